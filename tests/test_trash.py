"""``.trash/`` when things go wrong: a damaged ledger, a file removed by hand, a name
taken at the last moment, a full disk during restore. Nothing a person has is lost or
overwritten, and each refusal is one line saying what to do."""

from __future__ import annotations

import errno
import hashlib
import json
from pathlib import Path

import pytest

from agent_memory.disk import locking
from agent_memory.errors import InvalidInput, NotFound, PathRefused, VaultError
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files


def ledger_of(vault: Vault) -> Path:
    return vault.root / ".trash" / ".agent-memory.jsonl"


def test_forget_refuses_a_trash_that_is_a_file_and_keeps_the_memory(vault: Vault) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    (vault.root / ".trash").write_text("a file a sync tool left\n")
    with pytest.raises(VaultError, match=r"\.trash is a symlink or not a folder; .*Replace it with a folder"):
        vault.forget(made["id"])
    assert (vault.root / made["path"]).exists()
    assert (vault.root / ".trash").read_text() == "a file a sync tool left\n"
    assert vault.get(made["id"])["id"] == made["id"]


def test_damaged_ledger_lines_are_skipped_and_the_rest_still_restores(vault: Vault) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    trashed = vault.forget(made["id"])["trashed_to"]
    with open(ledger_of(vault), "a", encoding="utf-8") as ledger:
        ledger.write('{"trash": ".trash/half-a-line\n')  # a sync tool cut it short
        ledger.write('{"unexpected": "keys"}\n')
    assert [e["trash"] for e in vault.trash_list()] == [trashed]
    assert vault.restore(made["id"])["path"] == made["path"]
    assert (vault.root / made["path"]).exists()
    assert_index_matches_files(vault)


def test_a_ledger_that_is_not_text_is_named_and_nothing_is_moved(vault: Vault) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    trashed = vault.forget(made["id"])["trashed_to"]
    ledger_of(vault).write_bytes(b"\xff\xfe binary garbage \x00")
    with pytest.raises(VaultError, match=r"^Cannot read the trash ledger .*\.agent-memory\.jsonl: "):
        vault.restore(made["id"])
    assert (vault.root / trashed).exists() and not (vault.root / made["path"]).exists()


def test_gc_keeps_an_entry_whose_time_was_garbled(vault: Vault, clock) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    trashed = vault.forget(made["id"])["trashed_to"]
    entry = json.loads(ledger_of(vault).read_text())
    entry["at"] = "last tuesday"
    ledger_of(vault).write_text(json.dumps(entry) + "\n")
    clock.advance(days=400)
    assert vault.gc(older_than_days=0)["removed"] == []
    assert (vault.root / trashed).exists()  # when it came is unknown: never purged


def test_a_trash_file_deleted_by_hand_drops_out_of_the_list_and_the_ledger(vault: Vault) -> None:
    first = vault.remember("The staging database resets on Sundays")["memory"]
    second = vault.remember("The VPN needs the hardware key")["memory"]
    gone = vault.forget(first["id"])["trashed_to"]
    kept = vault.forget(second["id"])["trashed_to"]
    (vault.root / gone).unlink()  # emptied by hand in Obsidian
    assert [e["trash"] for e in vault.trash_list()] == [kept]
    with pytest.raises(NotFound):
        vault.restore(first["id"])
    assert vault.gc(older_than_days=30)["removed"] == []
    assert [json.loads(line)["trash"] for line in ledger_of(vault).read_text().splitlines()] == [kept]


def test_restore_of_something_never_trashed_is_not_found(vault: Vault) -> None:
    vault.remember("The staging database resets on Sundays")
    with pytest.raises(NotFound, match="Nothing in the trash answers to .no-such-memory."):
        vault.restore("no-such-memory")


def test_a_full_disk_during_restore_leaves_the_copy_in_the_trash_to_retry(
    vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    trashed = vault.forget(made["id"])["trashed_to"]

    def full(_src: Path, _dst: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(locking, "move_no_replace", full)
    with pytest.raises(VaultError, match=rf"^Could not restore {trashed}: the disk is full\. Nothing was changed"):
        vault.restore(made["id"])
    monkeypatch.undo()
    assert (vault.root / trashed).exists() and not (vault.root / made["path"]).exists()
    assert vault.restore(made["id"])["path"] == made["path"]  # and it can be retried
    assert_index_matches_files(vault)


def test_restore_never_replaces_a_file_that_appears_at_the_last_moment(
    vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    trashed = vault.forget(made["id"])["trashed_to"]
    target = vault.root / made["path"]
    real_move = locking.move_no_replace

    def person_saves_first(src: Path, dst: Path) -> None:
        if dst == target:
            dst.write_text("A new note a person saved under that name.\n")
        real_move(src, dst)

    monkeypatch.setattr(locking, "move_no_replace", person_saves_first)
    with pytest.raises(InvalidInput, match="appeared meanwhile; nothing was restored"):
        vault.restore(made["id"])
    assert target.read_text() == "A new note a person saved under that name.\n"
    assert (vault.root / trashed).exists()


def test_forget_takes_the_next_name_when_the_trash_name_is_taken_at_the_last_moment(
    vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    real_move = locking.move_no_replace
    taken: list[Path] = []

    def obsidian_trashes_first(src: Path, dst: Path) -> None:
        if not taken and ".trash" in dst.parts:
            taken.append(dst)
            dst.write_text("A note deleted in Obsidian.\n")
        real_move(src, dst)

    monkeypatch.setattr(locking, "move_no_replace", obsidian_trashes_first)
    trashed = vault.forget(made["id"])["trashed_to"]
    assert taken[0].read_text() == "A note deleted in Obsidian.\n"  # theirs, untouched
    assert trashed.endswith("-2.md") and "resets on Sundays" in (vault.root / trashed).read_text()
    assert [e["trash"] for e in vault.trash_list()] == [trashed]


def test_a_ledger_line_pointing_outside_the_trash_is_refused_and_nothing_moves(vault: Vault) -> None:
    """The ledger is a file a pull or a sync can bring: a line naming a live memory as
    its 'trash' copy must neither move that memory nor let gc delete it."""
    made = vault.remember("The staging database resets on Sundays")["memory"]
    live = vault.remember("The VPN needs the hardware key")["memory"]
    vault.forget(made["id"])
    entry = json.loads(ledger_of(vault).read_text())
    entry.update(trash=live["path"], source="restored-here.md", id="tampered")
    entry.update(sha256=hashlib.sha256((vault.root / live["path"]).read_bytes()).hexdigest(),
                 inode=0, ctime_ns=0)
    with open(ledger_of(vault), "a", encoding="utf-8") as ledger:
        ledger.write(json.dumps(entry) + "\n")
    with pytest.raises(PathRefused, match="is not in the vault's .trash/ folder"):
        vault.restore("tampered")
    result = vault.gc(older_than_days=0)  # the honest entry is purged, the tampered line left alone and named
    assert result["removed"] == [f".trash/{made['path']}"] and result["refused"] == [live["path"]]
    assert "outside .trash/" in result["note"] and "tampered" in ledger_of(vault).read_text()
    assert (vault.root / live["path"]).exists() and not (vault.root / "restored-here.md").exists()
    assert vault.get(live["id"])["id"] == live["id"]


def test_restore_never_writes_over_a_file_now_at_the_old_path(vault: Vault) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    trashed = vault.forget(made["id"])["trashed_to"]
    (vault.root / made["path"]).parent.mkdir(parents=True, exist_ok=True)  # its emptied day went with it
    (vault.root / made["path"]).write_text("A new note a person wrote under that name.\n")
    with pytest.raises(InvalidInput, match=rf"{made['path']} exists, so {trashed} was not restored over it"):
        vault.restore(made["id"])
    assert (vault.root / made["path"]).read_text() == "A new note a person wrote under that name.\n"
    assert (vault.root / trashed).exists()


@pytest.mark.parametrize("key", ["", "   "])
def test_restore_of_nothing_says_what_to_give(vault: Vault, key: str) -> None:
    with pytest.raises(InvalidInput, match="Say what to restore: a memory id, its old path, or its path in .trash/"):
        vault.restore(key)


@pytest.mark.parametrize("days", [-1, "30"])
def test_gc_refuses_a_retention_that_is_not_a_number_of_days(vault: Vault, days: object) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    trashed = vault.forget(made["id"])["trashed_to"]
    with pytest.raises(InvalidInput, match="older_than_days must be a number of days, 0 or more"):
        vault.gc(older_than_days=days)  # type: ignore[arg-type]
    assert (vault.root / trashed).exists()


def test_a_folder_where_a_trash_entry_was_is_not_listed_and_nothing_breaks(vault: Vault, clock) -> None:
    """A folder now at a trash entry's name (a synced folder's, a person's) made the trash
    listing, restore and gc fail with "Is a directory": the entry's file was opened
    to be hashed before anything said it was a file. The folder is no entry of the
    tool's: it is not listed, not restored, and gc leaves it."""
    kept = vault.remember("The staging database resets on Sundays")["memory"]
    gone = vault.remember("The office closes at six")["memory"]
    vault.forget(kept["id"])
    trashed = vault.root / vault.forget(gone["id"])["trashed_to"]
    trashed.unlink()
    (trashed / "inside.md").parent.mkdir()
    (trashed / "inside.md").write_text("A person's note in a folder of that name.\n")
    assert [e["id"] for e in vault.trash_list()] == [kept["id"]]
    assert vault.restore(kept["id"])["path"] == kept["path"]
    clock.advance(days=60)
    vault.gc()
    assert (trashed / "inside.md").read_text() == "A person's note in a folder of that name.\n"
