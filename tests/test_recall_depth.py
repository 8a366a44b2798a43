"""``recall(depth=1..3)``: the hits and, in the same call, the memories linked from and
to them (nodes with their distance from the nearest hit, and edges), bounded as
``related`` is. Hand-written linked notes on a real index, through the library, the
MCP tool and ``search --depth``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_memory.errors import InvalidInput
from agent_memory.vault.reads import SEARCH_RELATED_LIMIT
from agent_memory.vault.vault import Vault

from conftest import mcp_client, run_cli, tool_error, tool_ok


def write(vault: Vault, rel: str, body: str, front: str = "") -> None:
    path = vault.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{front}---\n{body}\n")


@pytest.fixture
def linked(vault: Vault) -> Vault:
    write(vault, "incidents/incident-42.md", "Payment outage on Friday; the fix is in [[runbook-payments]].",
          'related_to: ["[[acme-billing]]"]\n')
    write(vault, "runbooks/runbook-payments.md", "Restart the payment workers; page [[oncall]] if it recurs.")
    write(vault, "customers/acme-billing.md", "ACME is billed monthly.")
    write(vault, "people/oncall.md", "The on-call rota is in PagerDuty.")
    write(vault, "reviews/postmortem.md", "Lessons from [[incident-42]]: alert earlier.")
    write(vault, "misc/unrelated.md", "Lunch is at noon.")
    vault.reconcile()
    return vault


def stems(nodes: list[dict[str, Any]]) -> dict[str, int]:
    return {Path(n["path"]).stem: n["distance"] for n in nodes}


def test_depth_one_returns_the_memories_linked_to_the_hits(linked: Vault) -> None:
    result = linked.search("outage friday", depth=1)
    assert Path(result["hits"][0]["path"]).stem == "incident-42"
    graph = result["related"]
    assert graph["depth"] == 1 and graph["aborted"] is False
    near = stems(graph["nodes"])
    assert near["acme-billing"] == 1 and near["postmortem"] == 1
    assert "oncall" not in near and "unrelated" not in near
    assert not {Path(h["path"]).stem for h in result["hits"]} & set(near)  # hits are not repeated as nodes
    ids = {Path(n["path"]).stem: n["id"] for n in graph["nodes"]} | {Path(h["path"]).stem: h["id"] for h in result["hits"]}
    edges = {(e["source"], e["relation"], e["target"]) for e in graph["edges"]}
    assert (ids["incident-42"], "related_to", ids["acme-billing"]) in edges
    assert (ids["postmortem"], "links_to", ids["incident-42"]) in edges
    assert graph["count"] == len(graph["nodes"])


def test_deeper_walks_reach_further(linked: Vault) -> None:
    near = stems(linked.search("ACME billed", depth=2)["related"]["nodes"])
    assert near["incident-42"] == 1 and near["runbook-payments"] == 2 and near["postmortem"] == 2
    assert "oncall" not in near
    assert stems(linked.search("ACME billed", depth=3)["related"]["nodes"])["oncall"] == 3


def test_no_depth_no_graph_and_bad_depths_refused(linked: Vault) -> None:
    assert "related" not in linked.search("payment outage")
    for bad in (-1, 4, True, "1"):
        with pytest.raises(InvalidInput):
            linked.search("payment outage", depth=bad)  # type: ignore[arg-type]
    assert linked.search("zebra", depth=2)["hits"] == []


def test_the_graph_is_bounded(vault: Vault) -> None:
    links = " ".join(f"[[spoke-{n}]]" for n in range(SEARCH_RELATED_LIMIT + 20))
    write(vault, "hub.md", f"Hub of the service catalogue: {links}")
    for n in range(SEARCH_RELATED_LIMIT + 20):
        write(vault, f"spokes/spoke-{n}.md", f"Service {n}.")
    vault.reconcile()
    graph = vault.search("service catalogue hub", depth=1)["related"]
    assert len(graph["nodes"]) == SEARCH_RELATED_LIMIT and graph["aborted"] is True and "note" in graph


@pytest.mark.anyio
async def test_the_recall_tool_takes_depth(linked: Vault) -> None:
    async with mcp_client(linked) as client:
        result = await tool_ok(client, "recall", query="outage friday", depth=1)
        assert "postmortem" in {Path(n["path"]).stem for n in result["related"]["nodes"]}
        await tool_error(client, "recall", query="payment outage", depth=9)


def test_search_depth_on_the_command_line(linked: Vault) -> None:
    done = run_cli("search", "outage friday", "--depth", "1", vault=linked.root)
    assert done.returncode == 0, done.stderr
    assert "linked (depth 1)" in done.stdout and "postmortem" in done.stdout
    as_json = json.loads(run_cli("--json", "search", "outage friday", "--depth", "2", vault=linked.root).stdout)
    assert stems(as_json["related"]["nodes"])["oncall"] == 2
