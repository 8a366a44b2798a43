"""A memory's `type` and `importance` (SPEC §2): set by remember and update,
written as front-matter keys, filtered in SQL by recall, list and retrieve_context,
counted by memory_stats; over the library, the real MCP client in memory and the CLI."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client

from agent_memory.errors import InvalidInput
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, cli_ok, run_cli, tool_error, tool_ok


def test_remember_writes_type_and_importance_as_front_matter_keys(vault: Vault) -> None:
    stored = vault.remember("We chose Postgres over MySQL for billing", type="decision", importance=8)
    text = (vault.root / stored["memory"]["path"]).read_text()
    assert "\ntype: decision\n" in text and "\nimportance: 8\n" in text
    assert stored["memory"]["front_matter"]["type"] == "decision"
    assert stored["memory"]["front_matter"]["importance"] == 8
    plain = vault.remember("No type here")
    plain_text = (vault.root / plain["memory"]["path"]).read_text()
    assert "type:" not in plain_text and "importance:" not in plain_text
    assert_index_matches_files(vault)


def test_update_patches_only_the_type_and_importance_lines(vault: Vault) -> None:
    path = vault.root / "people" / "priya.md"
    path.parent.mkdir()
    original = "---\n# kept comment\nowner: me\ntags: [team]\n---\nPriya prefers calls after 3pm.\n"
    path.write_text(original)
    vault.reconcile()
    vault.update("people/priya.md", type="preference", importance=6.5)
    text = path.read_text()
    assert text.startswith("---\n# kept comment\nowner: me\ntags: [team]\n")
    assert "type: preference\n" in text and "importance: 6.5\n" in text
    assert text.endswith("---\nPriya prefers calls after 3pm.\n")
    again = vault.update("people/priya.md", type="preference", importance=6.5)
    assert again["changed"] is False
    vault.update("people/priya.md", type="", importance=2)
    text = path.read_text()
    assert "type:" not in text and "importance: 2\n" in text
    vault.update("people/priya.md", importance="")  # '' removes it, as type='' does
    text = path.read_text()
    assert "importance:" not in text and text.startswith("---\n# kept comment\nowner: me\ntags: [team]\n")
    assert text.endswith("---\nPriya prefers calls after 3pm.\n")
    assert vault.update("people/priya.md", importance="")["changed"] is False
    assert_index_matches_files(vault)


@pytest.mark.parametrize("arguments", [{"importance": 11}, {"importance": -1}, {"importance": True},
                                       {"importance": "high"}, {"type": "two\nlines"}, {"type": "x" * 65}])
def test_bad_type_or_importance_is_refused_and_nothing_is_written(vault: Vault, arguments: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        vault.remember("Something to keep", **arguments)
    assert vault.list()["total"] == 0


def _three(vault: Vault) -> dict[str, str]:
    ids = {}
    for content, kind, weight in (("Deploy lesson: always drain the queue first", "lesson", 9),
                                  ("Deploy decision: Fridays only", "Decision", 4),
                                  ("Deploy note without a type", None, None)):
        ids[content.split(":")[0] if kind else "plain"] = vault.remember(
            content, type=kind, importance=weight)["memory"]["id"]
    # a hand-written file whose importance is not a number never passes a numeric filter
    (vault.root / "odd.md").write_text("---\ntype: lesson\nimportance: high\n---\nDeploy oddity\n")
    vault.reconcile()
    return ids


def test_list_search_and_context_filter_by_type_and_importance(vault: Vault) -> None:
    ids = _three(vault)
    listed = vault.list(type="lesson")
    assert sorted(m["path"] for m in listed["memories"]) == sorted(
        [vault.get(ids["Deploy lesson"])["path"], "odd.md"])
    assert [m["id"] for m in vault.list(type="decision")["memories"]] == [ids["Deploy decision"]]  # any case
    assert [m["id"] for m in vault.list(min_importance=5)["memories"]] == [ids["Deploy lesson"]]
    assert [m["id"] for m in vault.list(max_importance=5)["memories"]] == [ids["Deploy decision"]]
    assert vault.list(min_importance=5)["total"] == 1
    found = vault.search("deploy", type="lesson", min_importance=1)
    assert [h["id"] for h in found["hits"]] == [ids["Deploy lesson"]]
    assert vault.search("deploy", min_importance=10)["count"] == 0
    context = vault.retrieve_context("deploy", type="decision")
    assert [m["id"] for m in context["memories"]] == [ids["Deploy decision"]]
    newest = vault.retrieve_context("", min_importance=4, strategy="importance")
    assert [m["id"] for m in newest["memories"]] == [ids["Deploy lesson"], ids["Deploy decision"]]


def test_stats_count_types_and_average_importance(vault: Vault) -> None:
    _three(vault)
    stats = vault.stats()
    assert stats["types"] == {"lesson": 2, "Decision": 1}
    assert stats["average_importance"] == 6.5


# ----------------------------------------------------------------------------- over MCP


@pytest.mark.anyio
async def test_type_and_importance_over_the_real_client(vault: Vault, client: Client) -> None:
    stored = await tool_ok(client, "remember", content="Lesson: pin the mcp version", type="lesson", importance=7)
    memory_id = stored["memory"]["id"]
    assert "importance: 7\n" in (vault.root / stored["memory"]["path"]).read_text()
    await tool_ok(client, "remember", content="A plain fact about pins")
    assert [m["id"] for m in (await tool_ok(client, "list_memories", type="lesson"))["memories"]] == [memory_id]
    assert [h["id"] for h in (await tool_ok(client, "recall", query="pin", min_importance=5))["hits"]] == [memory_id]
    assert (await tool_ok(client, "recall", query="pin", max_importance=6))["count"] == 0  # none has one that low
    assert (await tool_ok(client, "recall", query="pin", max_importance=7))["count"] == 1
    context = await tool_ok(client, "retrieve_context", query="pin", type="lesson")
    assert [m["id"] for m in context["memories"]] == [memory_id]
    updated = await tool_ok(client, "update_memory", memory_id=memory_id, type="procedure", importance=3)
    assert updated["memory"]["front_matter"]["type"] == "procedure"
    assert (await tool_ok(client, "memory_stats"))["types"] == {"procedure": 1}
    assert "importance" in await tool_error(client, "remember", content="x", importance=12)
    alias = await client.call_tool("list_memories", {"memory_type": "procedure"})  # memory-mcp's name
    assert not alias.is_error and [m["id"] for m in alias.structured_content["memories"]] == [memory_id]
    assert "'memory_type' as 'type'" in alias.content[1].text
    removed = await tool_ok(client, "update_memory", memory_id=memory_id, importance="")
    assert "importance" not in removed["memory"]["front_matter"]
    assert "importance:" not in (vault.root / stored["memory"]["path"]).read_text()
    assert "importance" in await tool_error(client, "update_memory", memory_id=memory_id, importance="high")


# ----------------------------------------------------------------------------- CLI


def test_cli_flags(vault: Vault) -> None:
    root = vault.root
    out = json.loads(cli_ok("--json", "add", "Procedure: restart the worker", "--type", "procedure",
                          "--importance", "5", vault=root))
    memory_id = out["memory"]["id"]
    cli_ok("add", "Another restart note", vault=root)
    listed = json.loads(cli_ok("--json", "list", "--type", "procedure", vault=root))
    assert [m["id"] for m in listed["memories"]] == [memory_id]
    found = json.loads(cli_ok("--json", "search", "restart", "--min-importance", "5", vault=root))
    assert [h["id"] for h in found["hits"]] == [memory_id]
    cli_ok("edit", memory_id, "--importance", "1", "--type", "lesson", vault=root)
    text = (root / out["memory"]["path"]).read_text()
    assert "type: lesson\n" in text and "importance: 1\n" in text
    assert json.loads(cli_ok("--json", "search", "restart", "--min-importance", "5", vault=root))["hits"] == []
    cli_ok("edit", memory_id, "--importance", "", vault=root)
    assert "importance:" not in (root / out["memory"]["path"]).read_text()
    refused = run_cli("edit", memory_id, "--importance", "high", vault=root)
    assert refused.returncode == 2 and "not a number" in refused.stderr


def test_stats_count_relations_and_give_the_oldest_and_newest(vault: Vault, clock: Any) -> None:
    empty = vault.stats()
    assert (empty["relations"], empty["oldest"], empty["newest"]) == ({}, None, None)
    a = vault.remember("Billing runs on Postgres")["memory"]
    clock.advance(days=2)
    b = vault.remember("Invoices are sent on the first, see [[elsewhere]]")["memory"]
    vault.link(a["id"], b["id"], relation="depends_on")
    stats = vault.stats()
    assert stats["relations"] == {"depends_on": 1, "links_to": 1}
    assert stats["oldest"] == a["created"] and stats["newest"] == b["created"]
