"""A batch remember: each item stored or refused on its own, with a result per item,
over the library, the real MCP client and `add --batch`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_memory.errors import InvalidInput
from agent_memory.limits import MAX_BATCH
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, run_cli
from conftest import tool_error as fails, tool_ok as ok

pytestmark = pytest.mark.anyio

AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's documented example id, detected on purpose


def test_each_item_is_stored_or_refused_on_its_own(vault: Vault) -> None:
    result = vault.remember_many([
        {"content": "ACME deploys on Fridays", "tags": ["acme"], "type": "fact", "importance": 7},
        {"content": "   "},
        {"content": f"The deploy key is {AWS_KEY}"},
        {"content": "Globex pays by invoice", "namespace": "billing", "ttl_days": 30},
        {"content": "ACME deploys on Fridays", "tags": ["deploy"]},  # the first again: deduplicated
        {"text": "a name from another server", "namespace": ".git"},
        "not an object",
        {"content": "A fact for a dot folder", "namespace": ".git"},
    ])
    assert (result["stored"], result["deduplicated"], result["failed"]) == (2, 1, 5)
    assert [r["ok"] for r in result["results"]] == [True, False, False, True, True, False, False, False]
    assert [r["index"] for r in result["results"]] == list(range(8))
    errors = {r["index"]: r["error"] for r in result["results"] if not r["ok"]}
    assert "empty" in errors[1] and "AWS" in errors[2] and "'text'" in errors[5] and "object" in errors[6]
    assert "may not start with '.'" in errors[7] and not (vault.root / ".git").exists()
    first = vault.get(result["results"][0]["id"])
    assert first["tags"] == ["acme", "deploy"] and first["front_matter"]["importance"] == 7
    assert result["results"][4]["id"] == first["id"] and result["results"][4]["deduplicated"] is True
    assert vault.get(result["results"][3]["path"])["namespace"] == "billing"
    assert vault.list()["total"] == 2 and AWS_KEY not in "".join(p.read_text() for p in vault.root.rglob("*.md"))
    assert_index_matches_files(vault)


def test_a_batch_over_the_limit_is_refused_whole(vault: Vault) -> None:
    with pytest.raises(InvalidInput, match=f"limit is {MAX_BATCH}"):
        vault.remember_many([{"content": f"fact {n}"} for n in range(MAX_BATCH + 1)])
    assert vault.list()["total"] == 0


async def test_remember_many_over_mcp(client: object, vault: Vault) -> None:
    result = await ok(client, "remember_many", items=[{"content": "Alpha fact"}, {"content": ""}, {"content": "Beta"}])
    assert (result["stored"], result["failed"]) == (2, 1)
    assert result["results"][1]["ok"] is False and "empty" in result["results"][1]["error"]
    assert vault.get(result["results"][2]["id"])["content"] == "Beta\n"
    assert "items" in await fails(client, "remember_many", items=[{"content": "x"}] * (MAX_BATCH + 1))


def test_cli_add_batch_from_json_lines_and_a_json_list(vault: Vault, tmp_path: Path) -> None:
    lines = tmp_path / "facts.jsonl"
    lines.write_text(json.dumps({"content": "Gamma fact", "tags": ["g"]}) + "\n\n"
                     + json.dumps({"content": ""}) + "\n" + json.dumps({"content": "Delta fact"}) + "\n")
    done = run_cli("add", "--batch", str(lines), vault=vault.root)
    assert done.returncode == 1 and "item 2" in done.stderr and "empty" in done.stderr
    ids = done.stdout.split()
    assert len(ids) == 2 and vault.get(ids[0])["tags"] == ["g"]
    listed = tmp_path / "facts.json"
    listed.write_text(json.dumps([{"content": "Epsilon fact"}]))
    again = run_cli("--json", "add", "--batch", str(listed), vault=vault.root)
    assert again.returncode == 0 and json.loads(again.stdout)["stored"] == 1
    piped = run_cli("add", "--batch", "-", vault=vault.root, stdin='[{"content": "Zeta fact"}]')
    assert piped.returncode == 0 and vault.list()["total"] == 4
    broken = run_cli("add", "--batch", str(lines) + ".missing", vault=vault.root)
    assert broken.returncode == 1 and "Cannot read" in broken.stderr and "Traceback" not in broken.stderr
