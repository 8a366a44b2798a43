"""``serve --compat agentmemory``: every tool, argument and result key of AgentMemory's
tool table, its resources and prompts, and its README's capture workflow replayed over
the real SDK client."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from agent_memory.server.app import build_server
from agent_memory.vault.vault import Vault

from conftest import tool_error as fails

pytestmark = pytest.mark.anyio

TABLE = {
    "insert_memory": ["content", "summary", "keywords"],
    "update_memory": ["id", "content", "summary", "keywords"],
    "search_memories": ["query", "keywords", "limit", "summaryWeight", "keywordWeight", "lambda"],
    "get_memory": ["id"],
    "delete_memory": ["id"],
    "list_memories": ["limit", "offset"],
    "optimize_index": [],
    "read_file": ["filePath"],
}


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    assert result.is_error is False, result.content[0].text  # type: ignore[union-attr]
    return result.structured_content


async def test_the_tool_table_resources_and_prompts_are_the_seeds(vault: Vault) -> None:
    async with Client(build_server(vault, compat="agentmemory")) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        prompts = {p.name for p in (await client.list_prompts()).prompts}
        assert "CREATE" in (await client.read_resource("memory://database/schema")).contents[0].text  # type: ignore[union-attr]
    assert {name: list(t.input_schema.get("properties", {})) for name, t in tools.items()} == TABLE
    assert set(tools["insert_memory"].input_schema["required"]) == {"content", "summary"}
    assert tools["get_memory"].input_schema["properties"]["id"]["type"] == "integer"
    assert resources == {"memory://database/stats", "memory://database/all", "memory://database/schema"}
    assert {"documentation_session", "capture_fact", "capture_procedure", "capture_troubleshooting_case",
            "generate_analogy_memory"} <= prompts


async def test_every_tool_and_result_key(vault: Vault) -> None:
    async with Client(build_server(vault, compat="agentmemory")) as client:
        made = await call(client, "insert_memory", content="The billing service retries three times.",
                          summary="Billing retries", keywords=["Billing Service", "Retries", "retries"])
        assert set(made) == {"message", "id", "file_path"} and made["id"] == 1
        got = await call(client, "get_memory", id=1)
        assert got == {"id": 1, "file_path": made["file_path"], "file_contents": "The billing service retries three times.\n",
                       "summary": "Billing retries"}
        listed = await call(client, "list_memories", limit=20, offset=0)
        assert listed["memories"][0]["keywords"] == ["billing-service", "retries"]  # a space kept as '-'
        assert set(listed["memories"][0]) == {"id", "file_path", "summary", "keywords", "created_at"}
        assert listed["pagination"] == {"total": 1, "limit": 20, "offset": 0, "has_more": False}
        found = await call(client, "search_memories", query="billing", keywords=["retries"], limit=5,
                           summaryWeight=0.5, keywordWeight=1.0, **{"lambda": 0.3})
        assert found["total_found"] == 1 and set(found["results"][0]) == {"file_path", "summary", "file_contents"}
        updated = await call(client, "update_memory", id=1, content="It retries five times.", summary="Retries",
                             keywords=[])
        assert set(updated) == {"message", "id", "file_path"}
        assert (await call(client, "list_memories"))["memories"][0]["keywords"] == []
        read = await call(client, "read_file", filePath=str(vault.root / made["file_path"]))
        assert read["file_exists"] is True and read["file_contents"].endswith("It retries five times.\n")
        assert (await call(client, "read_file", filePath="2020/01/01/none.md"))["file_exists"] is False
        assert "Index optimized" in (await call(client, "optimize_index"))["result"]
        assert (await call(client, "delete_memory", id=1))["result"] == "Memory 1 deleted"
        assert "Memory 1 not found" in await fails(client, "get_memory", id=1)


async def test_a_file_outside_the_vault_is_refused(vault: Vault, tmp_path: Any) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("no")
    async with Client(build_server(vault, compat="agentmemory")) as client:
        refused = await fails(client, "read_file", filePath=str(secret))
    assert "vault" in refused and "\n" not in refused, refused


async def test_the_readmes_capture_workflow_replays(vault: Vault) -> None:
    """Search for context, insert raw notes, store the session summary, find it next time."""
    async with Client(build_server(vault, compat="agentmemory")) as session:
        assert (await call(session, "search_memories", query="deploy pipeline flaky"))["total_found"] == 0
        notes = await call(session, "insert_memory", content="Pipeline flakes when the cache volume is full.",
                           summary="Exploration notes: flaky deploy pipeline", keywords=["ci", "deploy"])
        await session.get_prompt("documentation_session", {"goal": "fix the flaky deploy", "context_notes": "cache",
                                                           "tool_calls_json": "[]"})
        summary = await call(session, "insert_memory", content='{"summary": "Cache volume full -> flaky deploys", '
                             '"what": "pruned the cache", "tags": ["ci"]}',
                             summary="Session: flaky deploy fixed by pruning the cache", keywords=["ci", "session"])
        assert summary["id"] == notes["id"] + 1
    async with Client(build_server(vault, compat="agentmemory")) as later:
        found = await call(later, "search_memories", query="flaky deploy", keywords=["session"])
        assert found["results"][0]["summary"] == "Session: flaky deploy fixed by pruning the cache"
        fixed = await call(later, "update_memory", id=summary["id"], content="Pruning the cache fixed it.")
        assert fixed["id"] == summary["id"]
