"""Replacing a memory's body without the version read (the seeds' one-shot
``update_memory(memory_id, content)``, from a later conversation than the one that stored
it): allowed over the tool's own last write only, old bytes kept in the trash; refused,
naming the current version, once a person changed the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_memory.disk import locking
from agent_memory.errors import InvalidInput, SavedMeanwhile
from agent_memory.note.parse import file_version
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, person_saves_before_the_swap
from conftest import tool_error as fails, tool_ok as ok, mcp_client

pytestmark = pytest.mark.anyio


def replaced_copies(vault: Vault) -> list[bytes]:
    return [(vault.root / e["trash"]).read_bytes() for e in vault.trash_list() if e["reason"] == "replaced"]


def test_a_later_session_replaces_the_body_the_tool_wrote(vault: Vault) -> None:
    made = vault.remember("Staging resets on Sundays")["memory"]
    stored = (vault.root / made["path"]).read_bytes()
    vault.close()
    later = Vault(vault.root, clock=vault.clock)  # another process, another day: no version in hand
    try:
        changed = later.update(made["id"], content="Staging resets on Mondays")
        assert changed["changed"] and changed["memory"]["content"] == "Staging resets on Mondays\n"
        assert replaced_copies(later) == [stored]  # another agent's text stays restorable
        again = later.update(made["id"], content="Staging resets on Tuesdays")  # over its own update too
        assert again["memory"]["content"] == "Staging resets on Tuesdays\n"
        assert_index_matches_files(later)
    finally:
        later.close()


def test_a_persons_change_is_never_replaced_without_the_version(vault: Vault) -> None:
    made = vault.remember("Staging resets on Sundays")["memory"]
    path = vault.root / made["path"]
    path.write_text(path.read_text(encoding="utf-8") + "A line a person added.\n", encoding="utf-8")
    with pytest.raises(InvalidInput) as refused:
        vault.update(made["id"], content="Staging resets on Mondays")
    now = file_version(path.read_bytes())
    assert now in str(refused.value) and "\n" not in str(refused.value)
    assert "A line a person added." in path.read_text(encoding="utf-8")
    assert replaced_copies(vault) == []
    assert vault.update(made["id"], content="Staging resets on Mondays", expected_version=now)["changed"]


def test_a_save_landing_after_the_check_stands(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    made = vault.remember("Staging resets on Sundays")["memory"]
    path = vault.root / made["path"]
    monkeypatch.setattr(locking, "swap", person_saves_before_the_swap("Typed meanwhile.\n", path=path))
    with pytest.raises(SavedMeanwhile):
        vault.update(made["id"], content="Staging resets on Mondays")
    assert path.read_text(encoding="utf-8").endswith("Staging resets on Sundays\nTyped meanwhile.\n")
    monkeypatch.undo()
    with pytest.raises(InvalidInput, match="needs the version you read"):  # the person's bytes are not the tool's
        vault.update(made["id"], content="Staging resets on Mondays")


def test_a_rebuilt_index_asks_for_the_version(vault: Vault, tmp_path: Path) -> None:
    made = vault.remember("Staging resets on Sundays")["memory"]
    vault.close()
    fresh = Vault(vault.root, index_dir=tmp_path / "fresh-index", clock=vault.clock)
    try:
        with pytest.raises(InvalidInput, match="needs the version you read"):
            fresh.update(made["id"], content="Staging resets on Mondays")
    finally:
        fresh.close()


async def test_over_mcp_a_new_connection_updates_without_reading_first(vault: Vault) -> None:
    made = vault.remember("Staging resets on Sundays")["memory"]
    async with mcp_client(vault) as client:
        changed = await ok(client, "update_memory", memory_id=made["id"], content="Staging resets on Mondays")
        assert changed["memory"]["content"] == "Staging resets on Mondays\n"
    path = vault.root / made["path"]
    path.write_text(path.read_text(encoding="utf-8") + "A person's line.\n", encoding="utf-8")
    async with mcp_client(vault) as client:
        refused = await fails(client, "update_memory", memory_id=made["id"], content="Staging resets on Fridays")
        assert "needs the version you read" in refused and file_version(path.read_bytes()) in refused
        refused = await fails(client, "update_memory", memory_id=made["id"], tags=["a"])
        assert "needs the version you read" in refused
    assert path.read_text(encoding="utf-8").endswith("A person's line.\n")
