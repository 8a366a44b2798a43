"""The write path indexes what it wrote: the row comes from the bytes rendered and the
stat of the file as published, not from reading it back, and is exactly what the next
start would find; a save that lands on the new file first is what gets indexed."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_memory.disk import locking
from agent_memory.disk import store as store_module
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files


@pytest.fixture
def reads(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every memory file the vault reads (a spy: the real read still runs)."""
    seen: list[str] = []
    real = vault.store.read

    def spy(rel: str, max_bytes: int | None = None):  # type: ignore[no-untyped-def]
        seen.append(rel)
        return real(rel, max_bytes)

    monkeypatch.setattr(vault.store, "read", spy)
    return seen


def test_remember_and_update_index_without_reading_the_file_back(vault: Vault, reads: list[str]) -> None:
    made = vault.remember("The billing export runs at 02:00 UTC", tags=["billing"])["memory"]
    assert made["path"] not in reads
    assert made == vault.get(made["id"])
    reads.clear()
    changed = vault.update(made["id"], append="It takes about ten minutes.", add_tags=["ops"])["memory"]
    # Only the settled read the edit is computed from (twice, to agree, for a file
    # younger than a tenth of a second); nothing after the swap.
    assert 1 <= reads.count(made["path"]) <= 2
    assert changed == vault.get(made["id"])
    assert vault.search("billing export ten minutes")["hits"][0]["id"] == made["id"]
    assert_index_matches_files(vault)


def test_the_next_start_reads_nothing_the_tool_wrote(vault: Vault, clock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stat recorded is the published file's own: a start compares and moves on."""
    first = vault.remember("The VPN needs the hardware key")["memory"]
    vault.remember("Standups are at 09:30")
    vault.update(first["id"], append="Ask IT for a spare.")
    vault.import_memories([{"content": f"Imported fact {i} about the release train"} for i in range(5)])
    vault.close()
    opened: list[str] = []
    real = store_module.Store.read

    def spy(self: store_module.Store, rel: str, max_bytes: int | None = None):  # type: ignore[no-untyped-def]
        opened.append(rel)
        return real(self, rel, max_bytes)

    monkeypatch.setattr(store_module.Store, "read", spy)
    with Vault(vault.root, clock=clock) as again:
        assert opened == []
        assert again.search("release train")["count"] == 5
        assert_index_matches_files(again)


def test_a_save_that_lands_on_a_new_file_before_it_is_indexed_is_what_gets_indexed(
    vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_move = locking.move_no_replace

    def then_a_person_saves(src: Path, dst: Path) -> None:
        real_move(src, dst)
        with open(dst, "a", encoding="utf-8") as handle:  # an editor with the folder open, autosaving
            handle.write("Added by a person at once.\n")

    monkeypatch.setattr(locking, "move_no_replace", then_a_person_saves)
    made = vault.remember("The office closes early on Fridays")["memory"]
    monkeypatch.undo()
    assert "Added by a person at once." in (vault.root / made["path"]).read_text()
    assert vault.search("added by a person")["hits"][0]["path"] == made["path"]
    assert "Added by a person at once." in vault.get(made["id"])["content"]
    assert_index_matches_files(vault)
