"""import_memories: what an export, a backup or a hand-made batch may hold, and what the
vault does with it. All or nothing: a refused batch writes no file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_memory import note as notes
from agent_memory.errors import InvalidInput
from agent_memory.vault import Vault

from conftest import assert_index_matches_files


def _files(vault: Vault) -> list[str]:
    return sorted(rel for rel, _ in vault.store.walk())


def test_an_old_export_does_not_take_back_an_edited_memory(vault: Vault) -> None:
    memory = vault.remember("The release train leaves on Thursdays")["memory"]
    exported = vault.export_memories()
    vault.update(memory["id"], content="The release train leaves on Wednesdays")

    result = vault.import_memories(json.loads(json.dumps(exported)))
    assert (result["imported"], result["duplicates"]) == (0, 1)
    assert _files(vault) == [memory["path"]]
    assert vault.get(memory["id"])["content"] == "The release train leaves on Wednesdays\n"
    assert vault.stats()["duplicate_ids"] == {}
    assert_index_matches_files(vault)


def test_two_items_with_one_id_import_once(vault: Vault) -> None:
    items = [
        {"path": "a.md", "front_matter": {"id": "abc123"}, "content": "First copy\n"},
        {"path": "b.md", "front_matter": {"id": "abc123"}, "content": "Second copy, edited\n"},
    ]
    result = vault.import_memories(items)
    assert (result["imported"], result["duplicates"], result["ids"]) == (1, 1, ["abc123"])
    assert _files(vault) == ["a.md"]
    assert_index_matches_files(vault)
