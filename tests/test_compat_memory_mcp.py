"""``serve --compat memory-mcp``: every tool, argument and result key of memory-mcp's
tool tables, its resources and get-help prompt, and a realistic session replayed over
the real SDK client."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from agent_memory.server.app import build_server
from agent_memory.server.compat.memory_mcp import hash_of
from agent_memory.vault.vault import Vault

from conftest import tool_error as fails

pytestmark = pytest.mark.anyio

TABLE = {
    "store_memory": ["content", "tags", "memory_type", "importance"],
    "store_memories": ["items"],
    "get_memory": ["hash"],
    "update_memory": ["hash", "content", "tags"],
    "delete_memory": ["hash"],
    "delete_memories": ["hashes"],
    "search_memories": ["query", "limit", "cursor", "min_importance", "max_importance", "memory_type"],
    "create_relationship": ["from_hash", "to_hash", "relation_type"],
    "delete_relationship": ["from_hash", "to_hash", "relation_type"],
    "get_relationships": ["hash", "direction"],
    "recall": ["query", "depth", "limit", "cursor", "min_importance", "max_importance", "memory_type"],
    "retrieve_context": ["query", "token_budget", "strategy"],
    "memory_stats": [],
}
MEMORY_KEYS = {"hash", "content", "tags", "memory_type", "importance", "created_at", "updated_at"}


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert result.is_error is False, result.content[0].text  # type: ignore[union-attr]
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def test_the_tool_table_resources_and_prompt_are_the_seeds(vault: Vault) -> None:
    async with Client(build_server(vault, compat="memory-mcp")) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        helped = await client.get_prompt("get-help", {})
        assert [p.name for p in (await client.list_prompts()).prompts] == ["get-help"]
        with pytest.raises(Exception, match="Unknown prompt"):
            await client.get_prompt("get-halp", {})
    assert {name: list(t.input_schema.get("properties", {})) for name, t in tools.items()} == TABLE
    assert set(tools["store_memory"].input_schema["required"]) == {"content", "tags"}
    assert "outgoing" in str(tools["get_relationships"].input_schema)
    assert resources == {"internal://instructions"} and templates == {"memory://memories/{hash}"}
    text = helped.messages[0].content.text  # type: ignore[union-attr]
    assert all(f"`{name}`" in text for name in TABLE), text


async def test_every_tool_and_result_key(vault: Vault) -> None:
    async with Client(build_server(vault, compat="memory-mcp")) as client:
        a = await call(client, "store_memory", content="Deploys need the VPN", tags=["ops", "vpn"],
                       memory_type="fact", importance=7)
        assert set(a) == {"hash", "created"} and a["created"] is True
        assert a["hash"] == hash_of("Deploys need the VPN", ["ops", "vpn"])
        assert (await call(client, "store_memory", content="Deploys need the VPN", tags=["ops", "vpn"]))["created"] is False
        batch = await call(client, "store_memories", items=[
            {"content": "The VPN is WireGuard", "tags": ["vpn"], "memory_type": "fact"},
            {"content": "Plan: move CI to the new runner", "tags": ["ci"], "memory_type": "plan", "importance": 3},
            {"content": "", "tags": ["x"]}])
        assert (batch["succeeded"], batch["failed"]) == (2, 1) and batch["items"][2]["ok"] is False
        b, c = batch["items"][0]["hash"], batch["items"][1]["hash"]
        got = await call(client, "get_memory", hash=a["hash"])
        assert set(got) == MEMORY_KEYS and (got["memory_type"], got["importance"]) == ("fact", 7)
        assert await call(client, "get_memory", hash="0" * 64) == {
            "ok": False, "error": {"code": "E_NOT_FOUND", "message": f"Memory {'0' * 64} not found"}}
        assert (await call(client, "create_relationship", from_hash=a["hash"], to_hash=b,
                           relation_type="depends_on"))["created"] is True
        out = await call(client, "get_relationships", hash=a["hash"], direction="outgoing")
        assert out["count"] == 1 and set(out["relationships"][0]) == {
            "from_hash", "to_hash", "relation_type", "created_at", "linked_hash", "linked_content", "linked_tags"}
        assert out["relationships"][0]["linked_content"] == "The VPN is WireGuard"
        incoming = await call(client, "get_relationships", hash=b, direction="incoming")
        assert incoming["relationships"][0]["linked_hash"] == a["hash"]
        page = await call(client, "search_memories", query="VPN", limit=1, min_importance=0, max_importance=10)
        assert page["total_returned"] == 1 and "nextCursor" in page
        rest = await call(client, "search_memories", query="VPN", limit=1, cursor=page["nextCursor"])
        assert rest["memories"][0]["hash"] != page["memories"][0]["hash"]
        assert (await call(client, "search_memories", query="runner", memory_type="plan"))["total_returned"] == 1
        walked = await call(client, "recall", query="deploys", depth=1, limit=5)
        assert {m["hash"] for m in walked["memories"]} >= {a["hash"], b}
        assert walked["graph"] == [{"from_hash": a["hash"], "to_hash": b, "relation_type": "depends_on"}]
        assert walked["depth_reached"] == 1
        context = await call(client, "retrieve_context", query="VPN", token_budget=100, strategy="importance")
        assert set(context) == {"memories", "estimated_tokens", "truncated"}
        stats = await call(client, "memory_stats")
        assert stats["memories"]["total"] == 3 and stats["relationships"] == {"total": 1}
        assert set(stats["memories"]) == {"total", "oldest", "newest", "avg_importance"} and "by_type" in stats
        updated = await call(client, "update_memory", hash=c, content="Plan: move CI to runner B", tags=["ci", "q3"])
        assert updated["old_hash"] == c and updated["new_hash"] == hash_of("Plan: move CI to runner B", ["ci", "q3"])
        assert (await call(client, "get_memory", hash=c))["ok"] is False  # the old hash is gone, as there
        assert (await call(client, "delete_relationship", from_hash=a["hash"], to_hash=b,
                           relation_type="depends_on")) == {"deleted": True}
        again = await call(client, "delete_relationship", from_hash=a["hash"], to_hash=b, relation_type="depends_on")
        assert again["ok"] is False
        assert await call(client, "delete_memory", hash=updated["new_hash"]) == {"hash": updated["new_hash"],
                                                                                "deleted": True}
        both = await call(client, "delete_memories", hashes=[a["hash"], b, "f" * 64])
        assert (both["succeeded"], both["failed"]) == (2, 1)
        assert "64 lowercase hex" in await fails(client, "update_memory", hash="nope", content="x")


async def test_a_realistic_session_replays(vault: Vault) -> None:
    """An agent stores a decision and a lesson linked to it; a later session finds the
    decision by recall, follows the link, and corrects the lesson in one call."""
    async with Client(build_server(vault, compat="memory-mcp")) as first:
        decision = await call(first, "store_memory", content="Decision: Postgres 16 for Atlas", tags=["atlas", "db"],
                              memory_type="decision", importance=8)
        lesson = await call(first, "store_memory", content="Lesson: pgvector needs the contrib image",
                            tags=["atlas", "pgvector"], memory_type="lesson", importance=5)
        await call(first, "create_relationship", from_hash=lesson["hash"], to_hash=decision["hash"],
                   relation_type="references")
    async with Client(build_server(vault, compat="memory-mcp")) as later:
        walked = await call(later, "recall", query="Atlas database decision", depth=1)
        assert walked["memories"][0]["hash"] == decision["hash"]
        assert {m["hash"] for m in walked["memories"]} == {decision["hash"], lesson["hash"]}
        links = await call(later, "get_relationships", hash=decision["hash"])
        assert links["relationships"][0]["linked_hash"] == lesson["hash"]
        fixed = await call(later, "update_memory", hash=lesson["hash"],
                           content="Lesson: pgvector ships in the postgres:16 image")
        assert (await call(later, "get_memory", hash=fixed["new_hash"]))["content"].startswith("Lesson: pgvector ships")
        resource = await later.read_resource(f"memory://memories/{fixed['new_hash']}")
        assert fixed["new_hash"] in resource.contents[0].text  # type: ignore[union-attr]
