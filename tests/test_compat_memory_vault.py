"""``serve --compat memory-vault``: every tool, argument and result key of
mcp-memory-vault's tool table, its integer ids, and its README's example session
replayed over the real SDK client."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from agent_memory.server.app import build_server
from agent_memory.vault.vault import Vault

from conftest import tool_error as fails

pytestmark = pytest.mark.anyio

# the seed's tool table: name -> its arguments, in order
TABLE = {
    "remember": ["content", "namespace", "tags", "ttl_days", "source"],
    "recall": ["query", "namespace", "tags", "limit", "match"],
    "forget": ["memory_id"],
    "list_memories": ["namespace", "tag", "limit"],
    "update_memory": ["memory_id", "content", "add_tags", "ttl_days", "remove_tags", "namespace", "source"],
    "memory_stats": [],
    "export_memories": ["namespace"],
    "import_memories": ["memories"],
}
MEMORY_KEYS = {"id", "content", "namespace", "tags", "source", "created_at", "updated_at", "expires_at"}


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert result.is_error is False, result.content[0].text  # type: ignore[union-attr]
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def test_the_tool_table_is_the_seeds(vault: Vault) -> None:
    async with Client(build_server(vault, compat="memory-vault")) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert {name: list(t.input_schema.get("properties", {})) for name, t in tools.items()} == TABLE
    hints = {name: (t.annotations.read_only_hint, t.annotations.destructive_hint) for name, t in tools.items()}
    assert {n for n, (ro, _) in hints.items() if ro} == {"recall", "list_memories", "memory_stats", "export_memories"}
    assert {n for n, (_, d) in hints.items() if d} == {"forget", "update_memory"}
    assert tools["remember"].input_schema["required"] == ["content"]
    assert tools["update_memory"].input_schema["properties"]["memory_id"]["type"] == "integer"


async def test_every_tool_and_result_key(vault: Vault) -> None:
    async with Client(build_server(vault, compat="memory-vault")) as client:
        stored = await call(client, "remember", content="ACME's billing contact is Jane Doe", namespace="support",
                            tags=["customer", "billing"], ttl_days=30, source="call")
        assert MEMORY_KEYS | {"deduplicated", "merged_tags", "message"} == set(stored)
        assert isinstance(stored["id"], int) and stored["expires_at"] and stored["merged_tags"] == []
        again = await call(client, "remember", content="ACME's billing contact is Jane Doe", namespace="support",
                           tags=["finance", "customer"])
        assert again["deduplicated"] is True and again["merged_tags"] == ["finance"] and again["id"] == stored["id"]
        other = await call(client, "remember", content="Globex staging resets nightly", namespace="ops", tags=["infra"])
        assert other["id"] == stored["id"] + 1
        found = await call(client, "recall", query="who is ACME's billing contact?", namespace="support", tags=[],
                           limit=5, match="any")
        assert {"terms", "match_mode", "count", "hits"} <= set(found) and found["match_mode"] == "any"
        hit = found["hits"][0]
        assert {"id", "snippet", "matched_terms", "tags", "age"} <= set(hit) and hit["id"] == stored["id"]
        assert "[ACME" in hit["snippet"]
        listed = await call(client, "list_memories", namespace="", tag="infra", limit=20)
        assert [m["id"] for m in listed["memories"]] == [other["id"]] and MEMORY_KEYS == set(listed["memories"][0])
        updated = await call(client, "update_memory", memory_id=stored["id"], content="ACME's billing contact is Jo",
                             add_tags=["vip"], ttl_days=0, remove_tags=["billing"], namespace="sales", source="email")
        assert set(updated["updated_fields"]) == {"content", "tags", "namespace", "source", "expires_at"}
        assert updated["expires_at"] is None and updated["namespace"] == "sales" and "vip" in updated["tags"]
        kept = await call(client, "update_memory", memory_id=stored["id"], add_tags=["x"])  # ttl_days=-1 keeps
        assert kept["updated_fields"] == ["tags"]
        stats = await call(client, "memory_stats")
        assert {"total", "namespaces", "top_tags", "with_ttl", "db_path", "db_size_bytes", "schema_version",
                "search_mode"} <= set(stats) and stats["total"] == 2
        exported = await call(client, "export_memories", namespace="")
        assert exported["count"] == 2 and all(MEMORY_KEYS == set(m) for m in exported["memories"])
        gone = await call(client, "forget", memory_id=other["id"])
        assert gone["deleted"] is True and gone["preview"].startswith("Globex")
        assert "Memory 999 not found" in await fails(client, "forget", memory_id=999)
        assert f"Memory {other['id']} not found" in await fails(client, "forget", memory_id=other["id"])
    other_vault = Vault.init(vault.root.parent / "other")
    try:
        async with Client(build_server(other_vault, compat="memory-vault")) as client:
            counts = await call(client, "import_memories", memories=exported["memories"])
            assert counts == {"imported": 2, "skipped": 0, "expired": 0}
            assert (await call(client, "import_memories", memories=exported["memories"]))["imported"] == 0
    finally:
        other_vault.close()


async def test_the_readmes_example_session_replays(vault: Vault) -> None:
    """Monday: remember. A week later, a fresh connection: recall finds it by its number."""
    async with Client(build_server(vault, compat="memory-vault")) as monday:
        stored = await call(monday, "remember", content="Customer ACME prefers deploys on Fridays",
                            namespace="support", tags=["customer", "deploy"], source="user note 2026-07-20")
        assert (stored["id"], stored["deduplicated"], stored["merged_tags"], stored["message"]) == (
            1, False, [], "Stored memory 1 in namespace 'support'.")
    async with Client(build_server(vault, compat="memory-vault")) as later:
        found = await call(later, "recall", query="What are ACME's deploy preferences?", namespace="support")
        assert (found["terms"], found["match_mode"], found["count"]) == (["acme", "deploy", "preferences"], "all", 1)
        assert found["hits"][0]["id"] == 1
        assert found["hits"][0]["snippet"] == "Customer [ACME] [prefers] [deploys] on Fridays"
        assert found["hits"][0]["tags"] == ["customer", "deploy"]
        # and a one-shot correction from this later conversation, as the seed's agents make it
        fixed = await call(later, "update_memory", memory_id=1, content="Customer ACME prefers deploys on Thursdays")
        assert fixed["updated_fields"] == ["content"]


async def test_a_hashtag_in_the_text_is_not_a_tag_the_memory_was_given(vault: Vault) -> None:
    async with Client(build_server(vault, compat="memory-vault")) as client:
        stored = await call(client, "remember", content="Rotate keys #security monthly", tags=["ops"])
        assert stored["tags"] == ["ops"]
        assert (await call(client, "export_memories"))["memories"][0]["tags"] == ["ops"]


def test_the_server_compat_setting_picks_the_tool_set_for_serve(tmp_path: Any) -> None:
    from test_server_stdio import HANDSHAKE, serve_raw

    vault = Vault.init(tmp_path / "vault")
    vault.close()
    (tmp_path / "vault" / ".agent-memory.toml").write_text('[server]\ncompat = "memory-vault"\n', encoding="utf-8")
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    replies, _ = serve_raw(tmp_path / "vault", [*HANDSHAKE, listing], "serve")
    names = {t["name"] for t in next(r for r in replies if r.get("id") == 2)["result"]["tools"]}
    assert names == set(TABLE)
    replies, _ = serve_raw(tmp_path / "vault", [*HANDSHAKE, listing], "serve", "--compat", "agentmemory")
    names = {t["name"] for t in next(r for r in replies if r.get("id") == 2)["result"]["tools"]}
    assert "insert_memory" in names and "remember" not in names  # the flag wins over the setting
