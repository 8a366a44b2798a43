"""Attacks on the derived tables built a chunk at a time (``index.derived``): writes of
every kind between two chunks (from a second ``Vault`` on the folder: another process),
the row whose number is exactly the mark, a rebuild or a second builder part-way, a full
disk mid-chunk, and a planted ``deriving`` record (the index may be pulled from git).
After each sequence the index must equal a fresh rebuild of the same files
(``assert_index_matches_files``) and the filters must answer as on one."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agent_memory.index import derived
from agent_memory.index.derived import DERIVED, PROPERTIES, TAGS, VOCABULARY, build_chunk
from agent_memory.errors import VaultError
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, wait_until
from test_derived_background import rebuilt


def chunk(vault: Vault, name: str) -> bool:
    """One chunk of ``name``'s build, as a builder (any process) does it."""
    with vault.index.transaction() as conn:
        return build_chunk(conn, name)[0]


def mark(vault: Vault, name: str) -> int | None:
    rows = vault.index.query("SELECT upto FROM deriving WHERE name = ?", (name,))
    return int(rows[0][0]) if rows else None


def paths(found: Any) -> list[str]:
    return sorted(item["path"] for item in found.get("hits", found.get("memories", [])))


def answers(vault: Vault) -> dict[str, Any]:
    """What the three filters say (each builds its table first if it must)."""
    return {
        "where": paths(vault.list(where=["status=done"], limit=100)),
        "tag": paths(vault.list(tags=["client-1"], limit=100)),
        "typo": vault.search("escalaton runbok", limit=100).get("terms"),
    }


@contextmanager
def another_process(vault: Vault) -> Iterator[Vault]:
    """A second Vault on the same folder and index: another process's writes and builds."""
    other = Vault(vault.root, clock=vault.clock)
    try:
        yield other
    finally:
        other.close()


def fresh_answers(vault: Vault, tmp_path: Path) -> dict[str, Any]:
    fresh = Vault(vault.root, index_dir=tmp_path / "fresh-index", clock=vault.clock, sync=False)
    try:
        fresh.reindex(sweep=False)
        return answers(fresh)
    finally:
        fresh.close()


@pytest.mark.parametrize("name", DERIVED)
def test_writes_of_every_kind_between_chunks_from_another_process_leave_what_a_rebuild_builds(
        vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setattr(derived, "DERIVE_PAGE", 2)
    rebuilt(vault)
    with another_process(vault) as other:
        ids = {r["path"]: r["id"] for r in vault.index.query("SELECT path, id FROM memories")}
        # A rebuild numbers rows in path order: 1 invoice-0, 2 invoice-1, 3 invoice-10, 4 invoice-11,
        # 5 invoice-2, 6 invoice-3, ... 12 invoice-9; each chunk takes two rows, so the mark goes 2, 4, 6...
        writes = [
            # the row exactly at the mark: its tags and properties change
            lambda: other.update(ids["notes/invoice-1.md"], add_tags=["client-1", "urgent"], remove_tags=["billing"],
                                 type="paid", append="Paid runbook."),
            lambda: other.forget(ids["notes/invoice-11.md"]),  # the row at the mark, deleted
            lambda: other.remember("An escalation note, tagged.", tags=["client-1"]),  # a new row past the mark
            lambda: other.import_memories([  # a batch whose paths include existing ones, below and above the mark
                {"path": "notes/invoice-0.md", "content": "---\nstatus: open\ntags: [client-1]\n---\nReopened.\n"},
                {"path": "notes/invoice-7.md", "content": "---\nstatus: done\n---\nClosed escalation.\n"},
                {"path": "notes/new-one.md", "content": "---\nstatus: done\ntags: [client-1]\n---\nNew.\n"}]),
            lambda: hand_edit(other, "notes/invoice-6.md", "---\nstatus: open\ntags: [client-1]\n---\nEdited.\n"),
            lambda: other.move(ids["notes/invoice-9.md"], "moved/invoice-9.md"),  # the row at the mark, moved
            lambda: hand_edit(other, "notes/invoice-2.md", None),  # deleted by hand, below the mark
        ]
        marks = []
        steps = 0
        while not chunk(vault, name):
            marks.append(mark(vault, name))
            if writes:
                writes.pop(0)()
            steps += 1
            assert steps < 100, "the build never finished"
        assert marks[:6] == [2, 4, 6, 8, 10, 12]
        assert not writes, "the build finished before every write was tried"
        assert_index_matches_files(vault)
        assert answers(vault) == fresh_answers(vault, tmp_path)


def hand_edit(vault: Vault, rel: str, text: str | None) -> None:
    path = vault.root / rel
    if text is None:
        path.unlink()
    else:
        path.write_text(text)
    vault.reconcile_path(rel)


# --------------------------------------------------------------------------- a planted or corrupted mark
# The index sits under .index/, which a teammate can force-add through git: its records are
# read as untrusted. A mark no build could have left must not leave a table read with rows
# missing or doubled; the build starts that table over instead.

def plant(vault: Vault, sql: str, *params: Any) -> None:
    conn = sqlite3.connect(vault.index.path)
    try:
        conn.execute(sql, params)
        conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize("name", DERIVED)
def test_a_planted_mark_beyond_the_last_row_is_not_taken_as_the_rows_built(
        vault: Vault, tmp_path: Path, name: str) -> None:
    rebuilt(vault)
    plant(vault, "INSERT INTO deriving (name, upto, done) VALUES (?, ?, 0)", name, 10**9)
    assert answers(vault) == fresh_answers(vault, tmp_path)
    assert_index_matches_files(vault)


@pytest.mark.parametrize("upto", [-7, 0])
@pytest.mark.parametrize("name", DERIVED)
def test_a_mark_moved_back_over_rows_already_built_builds_none_twice(
        vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, upto: int) -> None:
    monkeypatch.setattr(derived, "DERIVE_PAGE", 4)
    rebuilt(vault)
    assert not chunk(vault, name) and mark(vault, name) == 4
    plant(vault, "UPDATE deriving SET upto = ? WHERE name = ?", upto, name)
    ids = {r["path"]: r["id"] for r in vault.index.query("SELECT path, id FROM memories")}
    assert answers(vault) == fresh_answers(vault, tmp_path)
    vault.forget(ids["notes/invoice-1.md"])  # a row built twice would leave its words behind
    assert_index_matches_files(vault)
    assert answers(vault) == fresh_answers(vault, tmp_path)


@pytest.mark.parametrize("name", DERIVED)
def test_a_name_both_built_and_under_way_is_kept_whole_by_the_writes(
        vault: Vault, tmp_path: Path, name: str) -> None:
    rebuilt(vault)
    answers(vault)  # every table built
    plant(vault, "INSERT INTO deriving (name, upto, done) VALUES (?, 3, 3)", name)
    vault.remember("A new escalation runbook, done.", tags=["client-1"])
    # invoice-8 is row 11 (a rebuild numbers them in path order), past the planted mark
    (vault.root / "notes" / "invoice-8.md").write_text("---\nstatus: done\ntags: [client-1]\n---\nEscalaton.\n")
    vault.reconcile_path("notes/invoice-8.md")
    assert answers(vault) == fresh_answers(vault, tmp_path)


def test_a_planted_record_of_a_table_that_does_not_exist_changes_no_answer(vault: Vault, tmp_path: Path) -> None:
    rebuilt(vault)
    plant(vault, "INSERT INTO deriving (name, upto, done) VALUES ('bogus', 5, 5)")
    vault.remember("A new escalation runbook.", tags=["client-1"])
    assert answers(vault) == fresh_answers(vault, tmp_path)


@pytest.mark.parametrize("name", (TAGS, PROPERTIES))
def test_rows_planted_in_an_unbuilt_table_are_not_read_once_it_is_built(
        vault: Vault, tmp_path: Path, name: str) -> None:
    rebuilt(vault)
    # Rows for memories that have none of them (invoice-0 is client-0 and done).
    plant(vault, "INSERT INTO tags (tag, rid) SELECT 'client-1', rid FROM memories")
    plant(vault, "INSERT INTO props (key, value, rid) SELECT 'status', 'done', rid FROM memories")
    assert answers(vault) == fresh_answers(vault, tmp_path)
    assert_index_matches_files(vault)


# --------------------------------------------------------------------------- a rebuild between the check and the read

@pytest.mark.parametrize("asked", ["where", "tag", "typo"])
def test_a_rebuild_by_another_process_just_after_the_table_was_found_built_does_not_empty_the_answer(
        vault: Vault, tmp_path: Path, asked: str) -> None:
    """A reader checks the table is built (``Index.derive``), then reads it; another process's
    rebuild landing in between empties the table (and its name in ``derived``): the read
    must not answer from the empty table."""
    rebuilt(vault)
    expected = fresh_answers(vault, tmp_path)[asked]
    answers(vault)  # every table built
    with another_process(vault) as other:
        index = vault.index
        derive = index.derive
        elsewhere: list[str] = []

        def then_rebuilt_elsewhere(name: str, *args: Any, **kwargs: Any) -> bool:
            done = derive(name, *args, **kwargs)
            if name == {"where": PROPERTIES, "tag": TAGS, "typo": VOCABULARY}[asked] and not elsewhere:
                elsewhere.append(name)
                other.reindex(sweep=False)
            return done

        index.derive = then_rebuilt_elsewhere  # type: ignore[method-assign]
        assert answers(vault)[asked] == expected
        assert elsewhere


# --------------------------------------------------------------------------- a rebuild, a full disk part-way

@pytest.mark.parametrize("name", DERIVED)
def test_a_rebuild_by_another_process_part_way_through_a_build_is_built_again_from_its_first_row(
        vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setattr(derived, "DERIVE_PAGE", 2)
    rebuilt(vault)
    with another_process(vault) as other:
        assert not chunk(vault, name) and not chunk(vault, name) and mark(vault, name) == 4
        for rel in ("notes/invoice-0.md", "notes/invoice-1.md"):  # rows 1-2, built, now other files
            (vault.root / rel).write_text("---\nstatus: done\ntags: [client-1]\n---\nAn escalaton runbok.\n")
        other.reindex(sweep=False)
        assert mark(vault, name) is None
        while not chunk(vault, name):  # the first builder goes on, in its next chunk's transaction
            pass
        assert_index_matches_files(vault)
        assert answers(vault) == fresh_answers(vault, tmp_path)


@pytest.mark.parametrize("name", DERIVED)
def test_a_full_disk_mid_chunk_loses_no_row_and_the_next_build_finishes_what_writes_kept_meanwhile(
        vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setattr(derived, "DERIVE_PAGE", 50)
    rebuilt(vault, 300)
    assert not chunk(vault, name)
    conn = vault.index.conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    try:
        with pytest.raises(VaultError, match="could not build"):
            while not vault.index.derive(name):
                pass
    finally:
        conn.execute("PRAGMA max_page_count = 4294967294")
    assert name not in [row[0] for row in vault.index.query("SELECT name FROM derived")]
    ids = {r["path"]: r["id"] for r in vault.index.query("SELECT path, id FROM memories")}
    vault.forget(ids["notes/invoice-0.md"])  # row 1: built, kept by the write
    vault.update(ids["notes/invoice-30.md"], add_tags=["client-1"], append="Escalation runbook.")
    assert_index_matches_files(vault)
    assert answers(vault) == fresh_answers(vault, tmp_path)


# --------------------------------------------------------------------------- the background build and real writers

def test_writes_of_another_process_and_hand_edits_during_the_watchers_background_build_leave_what_a_rebuild_builds(
        vault: Vault, tmp_path: Path, watch: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The watcher builds every table two rows a chunk on its own thread while a second
    ``Vault`` writes (tags, properties, deletes, a batch over existing paths) and a person
    edits files the watcher folds in: whatever chunk each lands beside, the end is a rebuild's."""
    monkeypatch.setattr(derived, "DERIVE_PAGE", 2)
    fill = derived.fill

    def slowly(conn: Any, name: str, rows: list[Any]) -> None:  # a chunk as long as one of thousands of rows
        time.sleep(0.01)
        fill(conn, name, rows)

    monkeypatch.setattr(derived, "fill", slowly)
    rebuilt(vault, 60)
    with another_process(vault) as other:
        ids = {r["path"]: r["id"] for r in vault.index.query("SELECT path, id FROM memories")}
        watcher = watch()
        overlap = []
        for i in range(0, 60, 4):
            overlap.append(len(vault.index.query("SELECT name FROM derived")) < len(DERIVED))
            other.update(ids[f"notes/invoice-{i}.md"], add_tags=["client-1"], type="paid", append="Escalation.")
            other.forget(ids[f"notes/invoice-{i + 1}.md"])
            other.import_memories([
                {"path": f"notes/invoice-{i + 2}.md", "content": "---\nstatus: done\ntags: [client-1]\n---\nRunbook.\n"},
                {"path": f"extra/new-{i}.md", "content": "---\nstatus: done\n---\nAn escalation.\n"}])
            (vault.root / "notes" / f"invoice-{i + 3}.md").write_text("---\nstatus: open\n---\nEdited runbook.\n")
        wait_until(lambda: vault.index.query("SELECT count(*) FROM memories WHERE body LIKE 'Edited runbook%'")[0][0]
                   == 15, "the watcher folded in every hand edit")
        wait_until(lambda: len(vault.index.query("SELECT name FROM derived")) == len(DERIVED),
                   "the background build finished every table")
        watcher.stop()
        assert any(overlap), "no write landed while the build was under way"
        assert_index_matches_files(vault)
        assert answers(vault) == fresh_answers(vault, tmp_path)


def test_a_read_another_process_keeps_rebuilding_under_gives_up_with_a_clear_error_not_an_empty_answer(
        vault: Vault) -> None:
    rebuilt(vault)
    answers(vault)
    with another_process(vault) as other:
        index = vault.index
        derive = index.derive

        def then_rebuilt_elsewhere(name: str, *args: Any, **kwargs: Any) -> bool:
            done = derive(name, *args, **kwargs)
            other.reindex(sweep=False)
            return done

        index.derive = then_rebuilt_elsewhere  # type: ignore[method-assign]
        with pytest.raises(VaultError, match="rebuilt again and again while it was read; retry"):
            vault.list(tags=["client-1"])


@pytest.mark.parametrize("then_new", [False, True])
@pytest.mark.parametrize("name", DERIVED)
def test_the_last_row_deleted_when_the_mark_is_on_it_and_a_new_row_taking_its_number(
        vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, then_new: bool) -> None:
    """The mark on the last row, which is then forgotten: the mark is past every row (the
    build starts over), or a new memory takes that row's number, at the mark (a write keeps it)."""
    monkeypatch.setattr(derived, "DERIVE_PAGE", 2)
    rebuilt(vault, 4)
    assert not chunk(vault, name) and not chunk(vault, name) and mark(vault, name) == 4
    last = vault.index.query("SELECT id FROM memories WHERE rid = 4")[0][0]
    vault.forget(last)
    if then_new:
        vault.remember("A done escalation runbook.", tags=["client-1"])
        assert vault.index.query("SELECT max(rid) FROM memories")[0][0] == 4
    for _ in range(10):
        if chunk(vault, name):
            break
    else:
        pytest.fail("the build never finished")
    assert_index_matches_files(vault)
    assert answers(vault) == fresh_answers(vault, tmp_path)


@pytest.mark.parametrize("upto", ["abc", b"\x01", 2.5, 9.9e300])
@pytest.mark.parametrize("name", DERIVED)
def test_a_planted_mark_that_is_not_a_row_number_stops_no_write_and_no_filter(
        vault: Vault, tmp_path: Path, name: str, upto: Any) -> None:
    rebuilt(vault)
    plant(vault, "INSERT INTO deriving (name, upto, done) VALUES (?, ?, ?)", name, upto, upto)
    vault.remember("A done escalation runbook.", tags=["client-1"])
    assert answers(vault) == fresh_answers(vault, tmp_path)
    assert_index_matches_files(vault)
