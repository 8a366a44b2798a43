"""A person saving a memory file while the tool edits it: no save of theirs is ever lost.

SPEC §3. The races run real processes on real files: a saver
process plays the person (``benchmarks/races.py`` holds it, the tool's side of each
scenario and the checks; ``python benchmarks/races.py`` is the long version), saving
in place (truncate, then write, as Node's ``fs.writeFile`` and many editors do) or
atomically (temp file + ``os.replace``) while the CLI (in the test's process, one vault
opened per command), the library in another process, or the MCP server over stdio edit
the same memory. After both stop (the saver is joined
and writes down every line it saved), each test asserts:

- the file still parses with its id, namespace and body (never a bare front matter),
  and the person never read a broken one;
- every ``human save N`` line is in the final file or in a conflict copy the tool put
  in ``.trash/`` and recorded in its ledger: none silently lost;
- every tool edit succeeded or was refused with SavedMeanwhile, StillSaving or
  VersionConflict ("not found" or any other error fails the test);
- the index equals a rebuild from the files.

Each race is one short round (20 CLI edits, 60 library updates, 100 updates against
the atomic saver, 30 MCP calls; the script's rounds are 60/60/150/60, as long as asked).
Nothing asserts how often each outcome happens (that depends on timing); the counts are
printed. A race catches a broken write path in every run: with the checked swap
replaced by a plain rename (as it once was), each of four runs of this file lost saves.

The first tests are the races' findings as exact sequences: a person's actions run at
one point of the tool's write (a hook around the real ``locking.swap``, which still
runs), so they fail the same way every time.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
from conftest import assert_index_matches_files, run_cli

from agent_memory.disk import locking
from agent_memory.errors import SavedMeanwhile
from agent_memory.index.reconcile import FileIndexer
from agent_memory.vault.vault import Vault

_SPEC = importlib.util.spec_from_file_location("races", Path(__file__).resolve().parents[1] / "benchmarks" / "races.py")
races = importlib.util.module_from_spec(_SPEC)  # type: ignore[arg-type]
sys.modules["races"] = races
_SPEC.loader.exec_module(races)  # type: ignore[union-attr]


# --------------------------------------------------------------------------- exact sequences


def _conflict_copies(vault: Vault) -> list[str]:
    entries = vault.store.trash.live()
    return [(vault.root / e.trash).read_text(encoding="utf-8") for e in entries if e.reason == "conflict"]


def test_a_save_into_the_tools_file_while_it_was_briefly_in_place_is_kept(vault: Vault, monkeypatch) -> None:
    """A save lands between the tool's check and its swap, so the swap is undone; but for
    that moment the tool's file was in place, and an editor that opened the file then
    writes into the tool's file afterwards. That file must not be deleted at once: the
    person's save is kept as a conflict copy once the grace period is over."""
    stored = vault.remember("The kettle is in room 4.")["memory"]
    path = vault.root / stored["path"]
    real_swap = locking.swap
    editor: list[int] = []
    seen: list[str] = []

    def person_saves_around_the_swap(a: Path, b: Path) -> bool:
        if editor:
            return real_swap(a, b)
        path.write_text(path.read_text(encoding="utf-8") + "first line a person typed\n", encoding="utf-8")
        swapped = real_swap(a, b)
        seen.append(path.read_text(encoding="utf-8"))  # their editor reloads: the tool's file, for now
        editor.append(os.open(path, os.O_WRONLY))
        return swapped

    monkeypatch.setattr(locking, "swap", person_saves_around_the_swap)
    with pytest.raises(SavedMeanwhile):
        vault.update(stored["id"], add_tags=["x"])
    monkeypatch.setattr(locking, "swap", real_swap)
    assert "first line a person typed" in path.read_text(encoding="utf-8")
    os.ftruncate(editor[0], 0)
    os.write(editor[0], (seen[0] + "second line a person typed\n").encode("utf-8"))
    os.close(editor[0])
    vault.store.settle_parked(grace=0)
    kept = [path.read_text(encoding="utf-8"), *_conflict_copies(vault)]
    assert any("second line a person typed" in text for text in kept), "the person's second save was lost"


def test_a_write_refused_while_a_person_is_saving_keeps_the_memory_findable(vault: Vault, monkeypatch) -> None:
    """The tool's change is refused because an editor has just truncated the file; the
    index refresh after the refusal read the file at that instant (empty) and dropped
    the memory's id from the index: every later edit by id said "not found"."""
    stored = vault.remember("The kettle is in room 4.")["memory"]
    path = vault.root / stored["path"]
    original = path.read_text(encoding="utf-8")
    real_swap = locking.swap
    editor = []

    def person_starts_saving(a: Path, b: Path) -> bool:
        if not editor:
            editor.append(open(path, "w", encoding="utf-8"))  # noqa: SIM115 - held open: truncated, text later
        return real_swap(a, b)

    monkeypatch.setattr(locking, "swap", person_starts_saving)
    with pytest.raises(SavedMeanwhile):
        vault.update(stored["id"], add_tags=["x"])
    monkeypatch.setattr(locking, "swap", real_swap)
    assert _conflict_copies(vault) == []  # the save put back was empty (truncated, text to come): no copy of it
    editor[0].write(original + "a line a person typed\n")
    editor[0].close()
    result = vault.update(stored["id"], add_tags=["y"])
    assert result["changed"] and "y" in result["memory"]["tags"]
    assert "a line a person typed" in path.read_text(encoding="utf-8")
    assert_index_matches_files(vault)


def _person_saving_at_the_first_read(monkeypatch, path: Path, rel: str, finish_at_once: bool) -> list:
    """A person saves the memory (so the file is newer than its index row), then starts
    the next save in place (truncates the file, the text not written yet) at the exact
    moment the tool first reads ``rel``: that read finds the file empty and modified an
    instant ago, however long the machine took to get there (a truncate made earlier
    looks abandoned once it is older than ``SETTLE_GIVE_UP``). ``finish_at_once``: the
    save is finished right after that read, before the tool reads again. Returns, once
    the read has happened, [what it found, a function finishing the save]."""
    text = path.read_text(encoding="utf-8") + "a line a person typed\n"
    path.write_text(text, encoding="utf-8")
    real_read = FileIndexer.read
    seen: list = []

    def read(self: FileIndexer, wanted: str):
        if wanted != rel or seen:
            return real_read(self, wanted)
        editor = open(path, "w", encoding="utf-8")  # noqa: SIM115 - held open: truncated, text later
        found = real_read(self, wanted)
        seen.extend([found[0] if found else None,
                     lambda: (editor.write(text + "another line a person typed\n"), editor.close())])
        if finish_at_once:
            seen[1]()
        return found

    monkeypatch.setattr(FileIndexer, "read", read)  # every read of a memory file goes through it
    return seen


def test_an_edit_while_a_person_is_saving_waits_for_their_save(vault: Vault, monkeypatch) -> None:
    """``load`` saw the file newer than its row and re-indexed it at once, while it was
    empty: the edit said "not found" instead of waiting for the save to settle."""
    stored = vault.remember("The kettle is in room 4.")["memory"]
    path = vault.root / stored["path"]
    seen = _person_saving_at_the_first_read(monkeypatch, path, stored["path"], finish_at_once=True)
    result = vault.update(stored["id"], add_tags=["y"])
    assert seen[0] == b""  # the edit's first read found the file mid-save
    assert "y" in result["memory"]["tags"] and "another line a person typed" in result["memory"]["content"]


def test_a_vault_opened_while_a_person_is_saving_still_finds_the_memory(vault: Vault, monkeypatch) -> None:
    """Each CLI command opens the vault, and the open reconciles: a file caught between
    an editor's truncate and its write was indexed empty, so ``agent-memory edit ID``
    said "not found"."""
    stored = vault.remember("The kettle is in room 4.")["memory"]
    path = vault.root / stored["path"]
    seen = _person_saving_at_the_first_read(monkeypatch, path, stored["path"], finish_at_once=False)
    try:
        other = Vault(vault.root)  # what `agent-memory edit` does first
    finally:
        if seen:
            seen[1]()
    assert seen[0] == b""  # the open's reconcile found the file mid-save
    with other:
        result = other.update(stored["id"], add_tags=["y"])
    assert "y" in result["memory"]["tags"] and "another line a person typed" in result["memory"]["content"]


def _save_atomically(path: Path, text: str) -> None:
    """A person's editor saving atomically: a temp file beside the memory, then a rename."""
    tmp = path.with_name(f".{path.name}.editor.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _lines_kept(vault: Vault, path: Path) -> str:
    """Everything a person can find their lines in once the parked files are settled:
    the memory itself and the conflict copies in the trash."""
    vault.store.settle_parked(grace=0)
    return "\n".join([path.read_text(encoding="utf-8"), *_conflict_copies(vault)])


def test_a_save_made_from_the_tools_version_while_it_was_briefly_in_place_keeps_the_save_it_replaced(
    vault: Vault, monkeypatch
) -> None:
    """Found by the atomic race on a busy machine. A person saves after the tool's checks,
    just before its swap; the swap puts the tool's version in place for a moment, and
    the person's editor reads it then; the tool sees the displaced save and swaps it
    back; the editor's next save, made from the version it read, replaces the save put
    back. That save's lines were in no file: the swap back had deleted the tool's
    version as its own unchanged bytes. They must be kept (as a conflict copy)."""
    stored = vault.remember("The kettle is in room 4.")["memory"]
    path = vault.root / stored["path"]
    real_swap = locking.swap
    calls: list[bool] = []
    read_meanwhile: list[str] = []

    def swap(a: Path, b: Path) -> bool:
        if not calls:
            _save_atomically(path, path.read_text(encoding="utf-8") + "first save\n")
        calls.append(real_swap(a, b))
        if len(calls) == 1:
            read_meanwhile.append(path.read_text(encoding="utf-8"))  # the editor reloads: the tool's version
        return calls[-1]

    monkeypatch.setattr(locking, "swap", swap)
    with pytest.raises(SavedMeanwhile):
        vault.update(stored["id"], add_tags=["x"])
    monkeypatch.setattr(locking, "swap", real_swap)
    assert "first save" in path.read_text(encoding="utf-8")  # put back
    assert "first save" not in read_meanwhile[0]  # what the editor read lacked it
    _save_atomically(path, read_meanwhile[0] + "second save\n")
    kept = _lines_kept(vault, path)
    assert "first save" in kept, "the save put back was lost to a save made from the tool's version"
    assert "second save" in path.read_text(encoding="utf-8")
    assert list(vault.store.parked_dir.iterdir()) == []


def test_a_save_put_back_is_in_place_and_its_copy_in_the_trash(vault: Vault, monkeypatch, caplog: pytest.LogCaptureFixture) -> None:
    """The common case of a save landing just before the swap: it is put back, the tool's
    change is refused, and a copy of the save is in the trash at once (the tool's version
    was the file for a moment, and an editor that read it then may save from it at any
    later time); nothing is left in ``.index/parked/`` once settled."""
    stored = vault.remember("The kettle is in room 4.")["memory"]
    path = vault.root / stored["path"]
    real_swap = locking.swap
    calls: list[bool] = []

    def swap(a: Path, b: Path) -> bool:
        if not calls:
            _save_atomically(path, path.read_text(encoding="utf-8") + "first save\n")
        calls.append(real_swap(a, b))
        return calls[-1]

    monkeypatch.setattr(locking, "swap", swap)
    with pytest.raises(SavedMeanwhile):
        vault.update(stored["id"], add_tags=["x"])
    saved = path.read_text(encoding="utf-8")
    assert "first save" in saved and "x" not in vault.get(stored["id"])["tags"]
    assert _conflict_copies(vault) == [saved]
    assert "it is back in place, and a copy is kept in .trash/" in caplog.text
    vault.store.settle_parked(grace=0)
    assert path.read_text(encoding="utf-8") == saved and _conflict_copies(vault) == [saved]
    assert list(vault.store.parked_dir.iterdir()) == []
    assert_index_matches_files(vault)


def test_saves_made_from_each_version_briefly_in_place_during_a_swap_back_are_all_kept(
    vault: Vault, monkeypatch
) -> None:
    """Two saves land around the swap, so the tool swaps twice to put the newest one
    back, and each swap shows the editor another version for a moment: the tool's
    (the editor saves from it before the first swap back) and the older save (read
    between the two swaps back, and saved from after them). No save's lines may be
    lost, whichever version a later save was made from."""
    stored = vault.remember("The kettle is in room 4.")["memory"]
    path = vault.root / stored["path"]
    real_swap = locking.swap
    calls: list[bool] = []
    read_meanwhile: list[str] = []

    def swap(a: Path, b: Path) -> bool:
        if not calls:
            _save_atomically(path, path.read_text(encoding="utf-8") + "first save\n")
        calls.append(real_swap(a, b))
        if len(calls) == 1:  # the tool's version is in place: the editor saves from it
            _save_atomically(path, path.read_text(encoding="utf-8") + "second save\n")
        elif len(calls) == 2:  # the first save is back for a moment: the editor reads it
            read_meanwhile.append(path.read_text(encoding="utf-8"))
        return calls[-1]

    monkeypatch.setattr(locking, "swap", swap)
    with pytest.raises(SavedMeanwhile):
        vault.update(stored["id"], add_tags=["x"])
    monkeypatch.setattr(locking, "swap", real_swap)
    assert len(calls) == 3 and "second save" in path.read_text(encoding="utf-8")
    _save_atomically(path, read_meanwhile[0] + "third save\n")  # made from the first save, over the second
    kept = _lines_kept(vault, path)
    for line in ("first save", "second save", "third save"):
        assert line in kept, f"{line!r} was lost"
    assert list(vault.store.parked_dir.iterdir()) == []


def test_a_save_landing_while_the_tool_writes_its_new_file_is_refused_before_anything_is_swapped(
    vault: Vault, monkeypatch
) -> None:
    """The tool writes its new file (and fsyncs it: on a busy disk that takes a while)
    between reading the memory and swapping. A save landing then is seen before the
    swap: the person's file is never displaced, so their editor never sees the tool's
    version in its place."""
    stored = vault.remember("The kettle is in room 4.")["memory"]
    path = vault.root / stored["path"]
    real_park, real_swap = vault.store._park, locking.swap
    in_place: list[str] = []

    def park(*args, **kwargs) -> Path:
        parked = real_park(*args, **kwargs)
        _save_atomically(path, path.read_text(encoding="utf-8") + "a line a person typed\n")
        return parked

    def swap(a: Path, b: Path) -> bool:
        swapped = real_swap(a, b)
        in_place.append(path.read_text(encoding="utf-8"))
        return swapped

    monkeypatch.setattr(vault.store, "_park", park)
    monkeypatch.setattr(locking, "swap", swap)
    with pytest.raises(SavedMeanwhile):
        vault.update(stored["id"], add_tags=["x"])
    assert [text for text in in_place if "a line a person typed" not in text] == [], \
        "the tool's version was put in place of the person's save"
    assert path.read_text(encoding="utf-8").endswith("a line a person typed\n")
    assert list(vault.store.parked_dir.iterdir()) == []
    assert_index_matches_files(vault)


def test_a_save_landing_just_after_the_swap_stands(vault: Vault, monkeypatch) -> None:
    """A save lands after the swap, before the tool looks at what it displaced: it
    replaces the tool's version, the displaced file is the one checked, and the write
    goes through. The person's save is the file, and the index says what it holds."""
    stored = vault.remember("The kettle is in room 4.")["memory"]
    path = vault.root / stored["path"]
    real_swap = locking.swap
    original = path.read_text(encoding="utf-8")

    def swap(a: Path, b: Path) -> bool:
        swapped = real_swap(a, b)
        _save_atomically(path, original + "a line a person typed\n")
        return swapped

    monkeypatch.setattr(locking, "swap", swap)
    result = vault.update(stored["id"], add_tags=["x"])
    monkeypatch.setattr(locking, "swap", real_swap)
    assert path.read_text(encoding="utf-8") == original + "a line a person typed\n"
    assert "a line a person typed" in result["memory"]["content"]  # read back, not the tool's bytes
    vault.store.settle_parked(grace=0)
    assert _conflict_copies(vault) == [] and list(vault.store.parked_dir.iterdir()) == []
    assert_index_matches_files(vault)


def test_a_save_written_into_the_displaced_file_after_the_write_went_through_is_kept(
    vault: Vault, monkeypatch
) -> None:
    """An editor opened the memory before the swap and writes through that descriptor
    after the write went through: its bytes land in the displaced file, now under
    ``.index/parked/``, and are kept as a conflict copy when it is settled."""
    stored = vault.remember("The kettle is in room 4.")["memory"]
    path = vault.root / stored["path"]
    real_swap = locking.swap
    original = path.read_text(encoding="utf-8")
    editor: list[int] = []

    def swap(a: Path, b: Path) -> bool:
        if not editor:
            editor.append(os.open(path, os.O_WRONLY))  # opened on the person's file, before the swap
        return real_swap(a, b)

    monkeypatch.setattr(locking, "swap", swap)
    vault.update(stored["id"], add_tags=["x"])
    monkeypatch.setattr(locking, "swap", real_swap)
    os.ftruncate(editor[0], 0)
    os.write(editor[0], (original + "a line a person typed\n").encode("utf-8"))
    os.close(editor[0])
    assert "x" in vault.get(stored["id"])["tags"]
    assert any("a line a person typed" in text for text in _lines_kept(vault, path).split("\n"))
    assert list(vault.store.parked_dir.iterdir()) == []


@pytest.mark.parametrize("second", ["later, in place", "at once, atomically"])
def test_an_in_place_save_finished_before_the_swap_back_is_kept_from_a_save_made_from_the_tools_version(
    vault: Vault, monkeypatch, second: str
) -> None:
    """An editor truncates the memory just before the swap (so what the swap displaced
    is empty: refused, swapped back) and writes its text into the displaced file before
    the swap back; meanwhile the tool's version was in place, and a save made from it
    replaces the save put back: later, in place, or atomically the instant after the
    swap back, before the tool copies the save put back. Its lines must still be
    somewhere: the copy is of the file put back as it is after the swap back, not of
    the empty file seen, nor of whatever holds the name by then."""
    stored = vault.remember("The kettle is in room 4.")["memory"]
    path = vault.root / stored["path"]
    real_swap = locking.swap
    first = path.read_text(encoding="utf-8") + "first save\n"
    editor: list = []
    read_meanwhile: list[str] = []

    def swap(a: Path, b: Path) -> bool:
        if not editor:
            editor.append(open(path, "w", encoding="utf-8"))  # noqa: SIM115 - truncated, text later
        else:  # the swap back: the editor's text lands first, in the displaced file
            editor[0].write(first)
            editor[0].close()
        swapped = real_swap(a, b)
        if len(editor) == 1:
            read_meanwhile.append(path.read_text(encoding="utf-8"))  # another reader: the tool's version
            editor.append(None)
        elif second == "at once, atomically":
            assert path.read_text(encoding="utf-8") == first  # put back
            _save_atomically(path, read_meanwhile[0] + "second save\n")
        return swapped

    monkeypatch.setattr(locking, "swap", swap)
    with pytest.raises(SavedMeanwhile):
        vault.update(stored["id"], add_tags=["x"])
    monkeypatch.setattr(locking, "swap", real_swap)
    assert "first save" not in read_meanwhile[0]
    if second == "later, in place":
        assert path.read_text(encoding="utf-8") == first  # put back
        path.write_text(read_meanwhile[0] + "second save\n", encoding="utf-8")  # over the first save
    kept = _lines_kept(vault, path)
    assert "first save" in kept, "the save put back was lost to a save made from the tool's version"
    assert "second save" in path.read_text(encoding="utf-8")
    assert list(vault.store.parked_dir.iterdir()) == []


# --------------------------------------------------------------------------- races


def _assert_no_save_lost(result, root: Path) -> None:
    print(races._row(result.scenario, [result], 0))
    assert result.saves > 0, "the saver never saved: nothing was tested"
    assert result.broken_reads == [] and result.missing_reads == 0, \
        f"the person found the file broken or missing: {result.broken_reads[:2]}"
    assert result.damage == [], "\n".join(result.damage)
    assert result.lost == [], f"human saves silently lost: {result.lost} (on disk elsewhere: {result.lost_but_on_disk})"
    assert result.failures == [], result.failures[0]
    assert result.count("ok") > 0, "no tool edit got through: nothing raced"
    assert result.parked_left == 0
    assert not result.index_differs
    with Vault(root) as vault:
        assert_index_matches_files(vault)


def _cli_here(args: list[str]) -> tuple[int, str, str]:
    """One CLI command in this process (the saver is another): each opens the vault
    afresh and reconciles, as ``agent-memory edit`` does."""
    done = run_cli(*args)
    return done.returncode, done.stdout, done.stderr


def test_in_place_saver_against_cli_edits(tmp_path: Path) -> None:
    _assert_no_save_lost(races.run_round("inplace-cli", tmp_path, 11, edits=20, cli=_cli_here),
                         tmp_path / "vault-inplace-cli-11")


def test_in_place_saver_against_library_updates(tmp_path: Path) -> None:
    _assert_no_save_lost(races.run_round("inplace-lib", tmp_path, 12, edits=60), tmp_path / "vault-inplace-lib-12")


def test_atomic_saver_against_versioned_and_unversioned_updates(tmp_path: Path) -> None:
    _assert_no_save_lost(races.run_round("atomic-lib", tmp_path, 13, edits=100), tmp_path / "vault-atomic-lib-13")


@pytest.mark.anyio
async def test_in_place_saver_against_mcp_update_memory(tmp_path: Path) -> None:
    setup = races.prepare("inplace-mcp", tmp_path, 14)
    try:
        outcomes = await races.run_mcp_calls(setup.root, setup.memory_id, 30)
    finally:
        record = setup.saver.stop()
    _assert_no_save_lost(races.finish(setup, record, outcomes), setup.root)
