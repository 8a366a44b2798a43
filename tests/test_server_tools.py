"""The tools as plain functions: called directly (a vault in, the tool's dict out, no SDK
running), and the table the server registers them from."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from agent_memory.errors import InvalidInput, NotFound
from agent_memory.server import tools
from agent_memory.server.app import build_server
from agent_memory.server.registry import one_paragraph
from agent_memory.server.seen import Seen, SeenVersions
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files


def test_a_tool_is_a_function_from_the_vault_and_its_arguments_to_its_result(vault: Vault) -> None:
    seen = Seen()
    stored = tools.remember(vault, seen, "Customer ACME prefers deploys on Fridays", tags="customer, deploy",
                            namespace="  ")
    memory = stored["memory"]
    assert memory["namespace"] == "default" and memory["tags"] == ["customer", "deploy"]
    assert (vault.root / memory["path"]).read_text(encoding="utf-8").endswith("prefers deploys on Fridays\n")
    found = tools.recall(vault, Seen(), "When does ACME prefer to deploy?", namespace="")
    assert [hit["id"] for hit in found["hits"]] == [memory["id"]]
    listed = tools.list_memories(vault, tags="deploy", type=" ")
    assert [m["id"] for m in listed["memories"]] == [memory["id"]]
    assert tools.memory_stats(vault)["total"] == 1
    assert_index_matches_files(vault)


def test_replacing_a_body_uses_the_version_the_callers_connection_saw(vault: Vault) -> None:
    made = tools.remember(vault, Seen(), "Staging resets on Sundays")["memory"]
    path = vault.root / made["path"]
    path.write_text(path.read_text(encoding="utf-8") + "A line a person added.\n", encoding="utf-8")
    reader = Seen()
    with pytest.raises(InvalidInput, match="needs the version you read: call get_memory first"):
        tools.update_memory(vault, reader, made["id"], content="Staging resets on Mondays")
    assert "A line a person added." in path.read_text(encoding="utf-8")
    tools.get_memory(vault, reader, made["path"])  # read by path, replaced by id: the same memory
    changed = tools.update_memory(vault, reader, made["id"], content="Staging resets on Mondays")
    assert changed["memory"]["content"] == "Staging resets on Mondays\n"
    assert reader.version(made["id"]) == changed["memory"]["version"]  # what it was handed last


def test_a_connection_remembers_the_versions_of_the_memories_it_was_handed_last(vault: Vault) -> None:
    """A long-lived connection keeps versions for the last memories handed to it, not for
    every memory it ever saw: past its limit the oldest is forgotten, and replacing that
    one's body asks for the version again (a fresh read gives it back)."""
    reader = Seen(limit=3)
    made = [tools.remember(vault, Seen(), f"Fact number {n} about the staging cluster")["memory"] for n in range(5)]
    first = vault.root / made[0]["path"]  # a person's edit: the tool's own last write no longer vouches
    first.write_text(first.read_text(encoding="utf-8") + "A line a person added.\n", encoding="utf-8")
    made[0] = tools.get_memory(vault, Seen(), made[0]["id"])
    for memory in made:
        tools.get_memory(vault, reader, memory["id"])
    tools.get_memory(vault, reader, made[2]["path"])  # handed over again: the newest now
    kept = [memory["id"] for memory in made if reader.version(memory["id"])]
    assert kept == [made[2]["id"], made[3]["id"], made[4]["id"]]
    assert reader.version(made[4]["path"]) == made[4]["version"]
    with pytest.raises(InvalidInput, match="needs the version you read: call get_memory first"):
        tools.update_memory(vault, reader, made[0]["id"], content="Fact number zero, replaced")
    tools.get_memory(vault, reader, made[0]["id"])
    assert tools.update_memory(vault, reader, made[0]["id"], content="Fact number zero, replaced")["memory"]["content"] \
        == "Fact number zero, replaced\n"


def test_forget_takes_one_id_or_several_and_says_which_when_given_neither(vault: Vault) -> None:
    a, b, c = (tools.remember(vault, Seen(), text)["memory"]["id"] for text in ("First", "Second", "Third"))
    with pytest.raises(InvalidInput, match="Give memory_id .* or memory_ids"):
        tools.forget(vault)
    with pytest.raises(InvalidInput, match="not both"):
        tools.forget(vault, memory_id=a, memory_ids=[b])
    assert tools.forget(vault, memory_ids=[a, b], dry_run=True)["count"] == 2
    assert tools.forget(vault, memory_id=c)["count"] == 1
    with pytest.raises(NotFound):
        tools.get_memory(vault, Seen(), c)
    assert tools.list_memories(vault)["total"] == 2


def test_import_and_reindex_report_their_steps_to_the_progress_they_are_given(vault: Vault) -> None:
    steps: list = []
    items = [{"content": f"Imported fact number {n}"} for n in range(250)]
    assert tools.import_memories(vault, items, progress=steps.append)["imported"] == 250
    assert [(s.phase, s.done, s.total) for s in steps] == [("importing memories", n, 250) for n in (100, 200, 250)]
    steps.clear()
    report = tools.reindex(vault, progress=steps.append)
    indexing = [(s.done, s.total) for s in steps if s.phase == "indexing files"]  # embedding may follow
    assert report["added"] == 250 and indexing == [(n, 250) for n in (50, 100, 150, 200, 250)]
    assert tools.reindex(vault)["added"] == 250  # progress is optional


def test_a_connection_is_known_by_its_handshake_and_a_request_without_one_stands_alone() -> None:
    class Handshake:  # stands in for the SDK's InitializeRequestParams, one per connection
        pass

    connections = SeenVersions()
    one, other = Handshake(), Handshake()
    connections.of(one).note({"id": "a", "path": "people/a.md", "version": "v1"})
    assert connections.of(one).version("./people/a.md") == "v1"
    assert connections.of(other).version("a") is None
    connections.of(None).note({"id": "a", "path": "a.md", "version": "v2"})
    assert connections.of(None).version("a") is None


@pytest.mark.anyio
async def test_the_table_covers_exactly_the_tools_the_server_lists(tmp_path: Path) -> None:
    with Vault.init(tmp_path / ".memory") as vault:
        async with Client(build_server(vault)) as client:
            listed = (await client.list_tools()).tools
    assert [t.name for t in listed] == [row.name for row in tools.TOOLS]
    assert len({row.function for row in tools.TOOLS}) == len(tools.TOOLS)
    for tool, row in zip(listed, tools.TOOLS, strict=True):
        assert tool.title == row.title, row.name
        assert tool.description == one_paragraph(row.function.__doc__), row.name
        hints = tool.annotations
        assert hints is not None
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == (
            row.hints.read_only, row.hints.destructive, row.hints.idempotent), row.name
        assert not set(tools.SERVER_FILLED) & set(tool.input_schema.get("properties", {})), row.name
