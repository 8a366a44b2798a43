"""stats, export/import, gc and doctor: through the library and the console script."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from agent_memory.errors import InvalidInput
from agent_memory.vault.vault import Vault

from conftest import CliResult, assert_index_matches_files, run_cli, run_with_terminal_stderr


def run(*args: str, cwd: Path) -> CliResult:
    """The CLI in ``cwd``, finding its vault as a user's shell would (./.memory)."""
    return run_cli(*args, cwd=cwd)


HAND_WRITTEN = """\ufeff---\r
title: Priya\r
on: push            # a key YAML reads as a boolean\r
2024: year\r
nested: {team: support, level: 2}\r
when: 2024-01-02\r
tags:\r
  - People\r
---\r
\r
Priya likes [[tea]] and #mornings.\r
"""


@pytest.fixture
def filled(vault: Vault) -> Vault:
    vault.remember("Customer ACME prefers deploys on Fridays", namespace="support", tags=["customer", "deploy"])
    vault.remember("Globex wants incident summaries within a day", namespace="support", tags=["customer"])
    vault.remember("The staging database resets every Sunday", namespace="engineering", tags=["staging"], ttl_days=7)
    (vault.root / "people").mkdir()
    (vault.root / "people" / "priya.md").write_bytes(HAND_WRITTEN.encode())
    vault.reconcile()
    return vault


def test_stats_counts_namespaces_tags_and_ttl(filled: Vault) -> None:
    stats = filled.stats()
    assert stats["total"] == 4
    assert stats["namespaces"] == {"support": 2, "default": 1, "engineering": 1}
    assert stats["top_tags"]["customer"] == 2
    assert stats["with_ttl"] == 1
    assert stats["parse_problems"] == [] and stats["conflicts"] == [] and stats["duplicate_ids"] == {}
    assert stats["index_bytes"] > 0 and stats["index_path"].endswith("index.sqlite3")
    assert "fts5" in stats["search_mode"]


def test_stats_names_broken_conflicted_and_duplicate_files(filled: Vault) -> None:
    (filled.root / "broken.md").write_text("---\ntags: [a\n---\nbody\n")
    (filled.root / "merge.md").write_text("<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> other\n")
    original = next(filled.root.glob("20*/*/*/customer-acme*.md"))
    (filled.root / "copy.md").write_bytes(original.read_bytes())
    filled.reconcile()
    stats = filled.stats()
    assert [p["path"] for p in stats["parse_problems"]] == ["broken.md"]
    assert stats["conflicts"] == ["merge.md"]
    (ids,) = stats["duplicate_ids"].values()
    assert ids == [original.relative_to(filled.root).as_posix(), "copy.md"] or ids[1] == "copy.md"


def test_export_import_round_trip_is_identical(filled: Vault, tmp_path: Path) -> None:
    exported = filled.export_memories()
    assert len(exported) == 4
    priya = next(e for e in exported if e["path"] == "people/priya.md")
    assert priya["front_matter"]["on"] == "push" and priya["front_matter"]["2024"] == "year"
    assert priya["front_matter"]["nested"] == {"team": "support", "level": 2}

    other = Vault.init(tmp_path / "other", clock=filled.clock)
    result = other.import_memories(json.loads(json.dumps(exported)))
    assert (result["imported"], result["duplicates"], result["expired"]) == (4, 0, 0)
    assert json.dumps(other.export_memories()) == json.dumps(exported)
    assert_index_matches_files(other)

    again = other.import_memories(exported)
    assert (again["imported"], again["duplicates"]) == (0, 4)
    other.close()


def test_import_counts_expired_and_duplicates_within_the_batch(vault: Vault) -> None:
    result = vault.import_memories([
        {"content": "fresh fact", "tags": ["a"]},
        {"content": "Fresh  FACT"},  # same normalised content, same namespace
        {"content": "old news", "expires": "2020-01-01T00:00:00Z"},
    ])
    assert (result["imported"], result["duplicates"], result["expired"]) == (1, 1, 1)
    assert vault.search("fresh fact")["count"] == 1
    assert vault.search("old news")["count"] == 0
    assert_index_matches_files(vault)


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"content": ""}, "Item 1: Content is empty"),
        ({"content": "x", "tags": ["has space"]}, "Item 1: Tag 'has space' contains whitespace"),
        ({"content": "x", "created": "yesterday"}, "Item 1: not a timestamp"),
        ("just a string", "Item 1 is not an object"),
        ({"content": "x", "front_matter": ["not", "a", "mapping"]}, "Item 1: front_matter must be an object"),
    ],
)
def test_import_rejects_the_whole_batch_naming_the_item(vault: Vault, bad: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(")):
        vault.import_memories([{"content": "a good one"}, bad])
    assert list(vault.store.walk()) == []
    assert vault.stats()["total"] == 0


def test_import_never_overwrites_a_taken_path(filled: Vault) -> None:
    item = {"path": "people/priya.md", "front_matter": {"title": "Another Priya"}, "content": "Someone else\n"}
    result = filled.import_memories([item])
    assert result["imported"] == 1
    assert (filled.root / "people" / "priya.md").read_bytes() == HAND_WRITTEN.encode()
    assert (filled.root / "people" / "priya-2.md").read_text() == "---\ntitle: Another Priya\n---\nSomeone else\n"


def test_gc_removes_only_old_trash(filled: Vault, clock) -> None:
    first = filled.forget(filled.search("staging database")["hits"][0]["id"])
    clock.advance(days=31)
    second = filled.forget(filled.list()["memories"][0]["id"])
    result = filled.gc()
    assert result["removed"] == [first["trashed_to"]]
    assert result["kept"] == 1
    assert (filled.root / second["trashed_to"]).exists() and not (filled.root / first["trashed_to"]).exists()
    assert filled.gc(older_than_days=0)["removed"] == [second["trashed_to"]]


def test_gc_never_deletes_what_a_person_put_in_the_trash(filled: Vault, clock) -> None:
    """.trash/ is Obsidian's trash too: a note deleted there (old mtime) is not the tool's."""
    deleted_in_obsidian = filled.root / ".trash" / "Old note.md"
    deleted_in_obsidian.parent.mkdir(exist_ok=True)
    deleted_in_obsidian.write_text("A note I deleted in Obsidian\n")
    year_ago = time.time() - 365 * 86400
    os.utime(deleted_in_obsidian, (year_ago, year_ago))
    forgotten = filled.forget(filled.list()["memories"][0]["id"])
    (filled.root / forgotten["trashed_to"]).write_text("changed by hand in the trash\n")
    clock.advance(days=400)
    assert filled.gc(older_than_days=1)["removed"] == []
    assert deleted_in_obsidian.read_text() == "A note I deleted in Obsidian\n"
    assert (filled.root / forgotten["trashed_to"]).read_text() == "changed by hand in the trash\n"


def test_gc_moves_expired_memories_to_the_trash_first(filled: Vault, clock) -> None:
    clock.advance(days=8)
    result = filled.gc()
    assert result["expired_moved"] == 1
    assert any(p.name.startswith("the-staging") for p in (filled.root / ".trash").rglob("*.md"))
    assert_index_matches_files(filled)


# ---------------------------------------------------------------- through the console script


def test_cli_stats_export_import_gc(tmp_path: Path) -> None:
    assert run("init", cwd=tmp_path).returncode == 0
    assert run("add", "Customer ACME prefers deploys on Fridays", "-n", "support", "-t", "customer", cwd=tmp_path).returncode == 0
    assert run("add", "Priya prefers written questions", "-t", "people", cwd=tmp_path).returncode == 0

    stats = json.loads(run("stats", "--json", cwd=tmp_path).stdout)
    assert stats["total"] == 2 and stats["namespaces"] == {"default": 1, "support": 1}
    assert "Memories   2" in run("stats", cwd=tmp_path).stdout

    backup = tmp_path / "backup.json"
    out = run("export", "-o", str(backup), cwd=tmp_path)
    assert out.returncode == 0 and "Exported 2 memories" in out.stderr
    assert run("--dir", str(tmp_path / "other"), "init", cwd=tmp_path).returncode == 0
    imported = run("--dir", str(tmp_path / "other"), "import", str(backup), cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert "Imported 2, updated 0, unchanged 0, expired 0, links 0; skipped 0 duplicates (from backup.json, an agent-memory export)." in imported.stdout
    again = json.loads(run("import", str(backup), "--json", "--dir", str(tmp_path / "other"), cwd=tmp_path).stdout)
    assert again == {"imported": 0, "updated": 0, "unchanged": 0, "duplicates": 2, "expired": 0, "links": 0, "kept": 0, "forgotten": 0,
                     "ids": [], "paths": []}
    reexported = run("--dir", str(tmp_path / "other"), "export", cwd=tmp_path).stdout
    assert reexported == backup.read_text()

    gc = run("gc", "--json", cwd=tmp_path)
    assert json.loads(gc.stdout) == {"removed": [], "kept": 0, "expired_moved": 0}


def test_cli_import_refuses_bad_json_and_writes_nothing(tmp_path: Path) -> None:
    run("init", cwd=tmp_path)
    (tmp_path / "bad.json").write_text('[{"content": "x"},')
    result = run("import", "bad.json", cwd=tmp_path)
    assert result.returncode == 1
    assert "not valid JSON" in result.stderr and "nothing was imported" in result.stderr
    assert json.loads(run("stats", "--json", cwd=tmp_path).stdout)["total"] == 0


def test_cli_doctor_passes_on_a_healthy_vault(tmp_path: Path) -> None:
    run("init", cwd=tmp_path)
    run("add", "a healthy fact", cwd=tmp_path)
    result = run("doctor", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    for name in ("python", "sqlite", "mcp", "vault", "files", "duplicate ids", "conflict markers", "index"):
        assert f"[  ok] {name}:" in result.stdout


def test_cli_doctor_names_problems_changes_nothing_and_exits_1(tmp_path: Path) -> None:
    run("init", cwd=tmp_path)
    added = run("add", "an original fact", cwd=tmp_path).stdout.strip()
    vault_dir = tmp_path / ".memory"
    (vault_dir / "broken.md").write_text("---\ntags: [a\n---\nbody\n")
    (vault_dir / "merge.md").write_text("<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> other\n")
    original = next(vault_dir.glob("20*/*/*/*.md"))
    (vault_dir / "copy.md").write_bytes(original.read_bytes())
    before = {p: p.read_bytes() for p in vault_dir.rglob("*") if p.is_file()}

    result = run("doctor", "--json", cwd=tmp_path)
    assert result.returncode == 1
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert not checks["files"]["ok"] and any("broken.md: broken YAML" in i for i in checks["files"]["items"])
    assert not checks["conflict markers"]["ok"] and checks["conflict markers"]["items"] == ["merge.md"]
    assert not checks["duplicate ids"]["ok"] and added in checks["duplicate ids"]["items"][0]
    assert "copy.md" in checks["duplicate ids"]["items"][0]
    # No watcher: the next command folds the copy in, so the index is no problem, but it is named.
    assert checks["index"]["ok"] and "not indexed: copy.md" in checks["index"]["items"]
    assert {p: p.read_bytes() for p in vault_dir.rglob("*") if p.is_file()} == before

    text = run("doctor", cwd=tmp_path)
    assert "[fail] files:" in text.stdout and "[  ok] python:" in text.stdout


def test_cli_doctor_on_a_missing_vault(tmp_path: Path) -> None:
    result = run("--dir", str(tmp_path / "nowhere"), "doctor", cwd=tmp_path)
    assert result.returncode == 1
    assert "[fail] vault: no vault at" in result.stdout
    assert not (tmp_path / "nowhere").exists()


def test_cli_reindex_shows_progress_on_a_terminal_but_not_under_json(tmp_path: Path) -> None:
    run("init", cwd=tmp_path)
    for i in range(3):
        run("add", f"fact number {i}", cwd=tmp_path)
    done, terminal = run_with_terminal_stderr("reindex", cwd=tmp_path)
    assert done.returncode == 0
    assert b"Indexing files" in terminal and b"3/3" in terminal  # done/total
    assert done.stdout.decode().startswith("Indexed 3 files")

    done, terminal = run_with_terminal_stderr("reindex", "--json", cwd=tmp_path)
    assert done.returncode == 0 and terminal == b""
    assert json.loads(done.stdout)["added"] == 3


def test_cli_doctor_names_md_files_it_cannot_use(tmp_path: Path) -> None:
    run("init", cwd=tmp_path)
    vault_dir = tmp_path / ".memory"
    run("add", "a healthy fact", cwd=tmp_path)
    (tmp_path / "secret.md").write_text("outside\n")
    (vault_dir / "outside.md").symlink_to(tmp_path / "secret.md")
    os.mkfifo(vault_dir / "pipe.md")
    (vault_dir / "dangling.md").symlink_to(vault_dir / "deleted-since.md")
    os.mkdir(os.path.join(os.fsencode(vault_dir), b"caf\xe9"))
    result = run("doctor", "--json", cwd=tmp_path)
    assert result.returncode == 1
    skipped = {c["name"]: c for c in json.loads(result.stdout)["checks"]}["skipped files"]
    items = " | ".join(skipped["items"])
    assert "outside.md: a symlink to a file outside the vault" in items
    assert "pipe.md: not a regular file" in items
    assert "dangling.md: cannot be read" in items
    assert "caf\ufffd/: folder name is not UTF-8" in items


def test_stats_leave_expired_memories_out_of_every_count(vault: Vault, clock) -> None:
    review = vault.remember("Keep the weekly deploy review", namespace="eng", tags=["deploy"], type="decision",
                            importance=8)
    (vault.root / "people").mkdir()
    (vault.root / "people" / "lee.md").write_text(
        "---\ntype: person\nimportance: .inf\nrelated: ['[[ops]]']\ncreated: 2020-01-01T00:00:00Z\n---\nLee.\n")
    clock.advance(hours=1)
    vault.remember("Temporary freeze on deploys", namespace="eng", tags=["deploy", "freeze"], type="decision",
                   importance=2, ttl_days=1)
    vault.reconcile()
    before = vault.stats()
    assert before["namespaces"] == {"eng": 2, "default": 1} and before["top_tags"] == {"deploy": 2, "freeze": 1}
    assert before["types"] == {"decision": 2, "person": 1} and before["average_importance"] == 5.0  # .inf is no number
    assert before["relations"] == {"related": 1} and before["oldest"] == "2020-01-01T00:00:00Z"
    clock.advance(days=2)  # the freeze expired; its file is still there until a sweep
    after = vault.stats()
    assert after["total"] == 2 and after["namespaces"] == {"eng": 1, "default": 1}
    assert after["top_tags"] == {"deploy": 1} and after["types"] == {"decision": 1, "person": 1}
    assert after["average_importance"] == 8.0 and after["relations"] == {"related": 1}
    assert after["newest"] == review["memory"]["created"] < before["newest"]
    assert vault.search("freeze")["hits"] == []
    assert [h["path"] for h in vault.search("lee", type="person")["hits"]] == ["people/lee.md"]
    assert vault.search("deploy", min_importance=9)["hits"] == []


def test_an_importance_no_float_can_hold_indexes_the_note_like_any_other(vault: Vault) -> None:
    """A hand-written importance of 400 digits (YAML reads it as an int) is no number the
    filters or stats can compare, like .inf; it must not stop the index being built
    (float() of it raised OverflowError, and the open indexed nothing at all)."""
    (vault.root / "ok.md").write_text("A fine note about invoices.\n", encoding="utf-8")
    (vault.root / "big.md").write_text("---\nimportance: " + "9" * 400 + "\n---\nBig invoices.\n", encoding="utf-8")
    vault.reconcile()
    assert sorted(h["path"] for h in vault.search("invoices")["hits"]) == ["big.md", "ok.md"]
    assert vault.search("invoices", min_importance=1)["hits"] == []
    assert vault.stats()["average_importance"] is None
    assert_index_matches_files(vault)


def test_the_tag_rows_are_built_by_the_first_tag_filter_or_stats_and_kept_by_writes(filled: Vault) -> None:
    filled.reindex()
    assert filled.index.query("SELECT count(*) FROM tags")[0][0] == 0  # a rebuild leaves them to the first use
    assert [h["content"].strip() for h in filled.search("deploys", tags=["customer"])["hits"]] == [
        "Customer ACME prefers deploys on Fridays"]
    assert filled.list(tags=["customer"])["total"] == 2
    made = filled.remember("Initech renews in March", tags=["customer", "renewal"])["memory"]
    assert filled.list(tags=["customer"])["total"] == 3 and filled.stats()["top_tags"]["customer"] == 3
    filled.forget(made["id"])
    assert filled.stats()["top_tags"]["customer"] == 2 and "renewal" not in filled.stats()["top_tags"]
    filled.reindex()
    assert filled.stats()["top_tags"] == {"customer": 2, "deploy": 1, "people": 1, "mornings": 1, "staging": 1}
    assert_index_matches_files(filled)
