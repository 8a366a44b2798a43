"""`forget` of several memories at once, each on its own with a per-item result, and
its dry run (SPEC §3/§7): over the library, the real MCP client in memory and the CLI."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client

from agent_memory.errors import InvalidInput, NotFound
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, cli_ok, run_cli, tool_error, tool_ok


def _made(vault: Vault, *contents: str) -> list[dict[str, Any]]:
    return [vault.remember(c)["memory"] for c in contents]


def test_forget_several_moves_each_to_the_trash(vault: Vault) -> None:
    a, b, c = _made(vault, "Alpha fact", "Beta fact", "Gamma fact")
    result = vault.forget_many([a["id"], b["path"], a["id"]])  # an id and a path; one named twice goes once
    assert result["dry_run"] is False and result["count"] == 2
    assert [m["id"] for m in result["memories"]] == [a["id"], b["id"]]
    for memory in (a, b):
        assert not (vault.root / memory["path"]).exists()
        assert (vault.root / ".trash" / memory["path"]).exists()
    assert [m["id"] for m in vault.list()["memories"]] == [c["id"]]
    assert_index_matches_files(vault)


def test_an_unknown_id_fails_on_its_own_and_the_others_go(vault: Vault) -> None:
    a, b = _made(vault, "Alpha fact", "Beta fact")
    result = vault.forget_many([a["id"], "01nosuchid000000", b["id"]])
    assert [m["id"] for m in result["memories"]] == [a["id"], b["id"]] and result["count"] == 2
    assert [f["memory_id"] for f in result["failed"]] == ["01nosuchid000000"]
    assert "not found" in result["failed"][0]["error"] and "list_memories" in result["failed"][0]["error"]
    assert not (vault.root / a["path"]).exists() and not (vault.root / b["path"]).exists()
    assert vault.list()["total"] == 0
    with pytest.raises(NotFound):  # one id alone: its error, as a single forget's
        vault.forget_many(["01nosuchid000000"])


def test_a_failed_move_fails_that_item_and_loses_nothing(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, c = _made(vault, "Alpha fact", "Beta fact", "Gamma fact")
    real = vault.store.trash.move_in
    calls = []

    def failing(*args: Any, **kwargs: Any) -> str:
        calls.append(args)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(vault.store.trash, "move_in", failing)
    result = vault.forget_many([a["id"], b["id"], c["id"]])
    assert [m["id"] for m in result["memories"]] == [a["id"], c["id"]]
    assert result["failed"] == [{"memory_id": b["id"], "error": result["failed"][0]["error"]}]
    assert "No space left on device" in result["failed"][0]["error"]
    assert (vault.root / b["path"]).exists() and [m["id"] for m in vault.list()["memories"]] == [b["id"]]
    assert_index_matches_files(vault)


def test_a_save_that_lands_mid_batch_keeps_that_note_only(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _made(vault, "Alpha fact", "Beta fact")
    real = vault.store.trash.move_in

    def person_saves_first(source: Any, rel: str, *args: Any, **kwargs: Any) -> str:
        if rel == a["path"]:
            source.write_text(source.read_text() + "A line a person just typed.\n")
        return real(source, rel, *args, **kwargs)

    monkeypatch.setattr(vault.store.trash, "move_in", person_saves_first)
    result = vault.forget_many([a["id"], b["id"]])
    assert [m["id"] for m in result["memories"]] == [b["id"]]
    assert [f["memory_id"] for f in result["failed"]] == [a["id"]]
    assert (vault.root / a["path"]).read_text().endswith("A line a person just typed.\n")
    assert_index_matches_files(vault)


def test_dry_run_says_what_would_go_and_changes_nothing(vault: Vault) -> None:
    a, b = _made(vault, "Alpha fact", "Beta fact")
    before = {p: p.read_bytes() for p in vault.root.rglob("*.md")}
    preview = vault.forget_many([a["id"], b["id"]], dry_run=True)
    assert preview["dry_run"] is True and preview["count"] == 2
    assert [(m["id"], m["path"]) for m in preview["memories"]] == [(a["id"], a["path"]), (b["id"], b["path"])]
    assert all("trashed_to" not in m for m in preview["memories"]) and preview["failed"] == []
    mixed = vault.forget_many([a["id"], "nowhere.md"], dry_run=True)
    assert mixed["count"] == 1 and [f["memory_id"] for f in mixed["failed"]] == ["nowhere.md"]
    assert {p: p.read_bytes() for p in vault.root.rglob("*.md")} == before
    assert not (vault.root / ".trash").exists() and vault.list()["total"] == 2


def test_expected_version_only_with_one_id(vault: Vault) -> None:
    a, b = _made(vault, "Alpha fact", "Beta fact")
    with pytest.raises(InvalidInput, match="single memory"):
        vault.forget_many([a["id"], b["id"]], expected_version=a["version"])
    one = vault.forget_many([a["id"]], expected_version=a["version"])
    assert one["id"] == a["id"] and one["trashed_to"] == ".trash/" + a["path"]
    assert vault.list()["total"] == 1


@pytest.mark.anyio
async def test_forget_several_over_the_real_client(vault: Vault, client: Client) -> None:
    a, b, c = _made(vault, "Alpha fact", "Beta fact", "Gamma fact")
    preview = await tool_ok(client, "forget", memory_ids=[a["id"], b["id"]], dry_run=True)
    assert preview["count"] == 2 and vault.list()["total"] == 3
    done = await tool_ok(client, "forget", memory_ids=[a["id"], b["id"]])
    assert done["count"] == 2
    assert [m["id"] for m in vault.list()["memories"]] == [c["id"]]
    single = await tool_ok(client, "forget", memory_id=c["id"])
    assert single["id"] == c["id"] and single["trashed_to"]
    assert "memory_ids" in await tool_error(client, "forget", memory_id="x", memory_ids=["y"])
    d = _made(vault, "Delta fact")[0]
    mixed = await tool_ok(client, "forget", memory_ids=["01nosuchid000000", d["id"]])
    assert mixed["count"] == 1 and mixed["memories"][0]["id"] == d["id"]
    assert mixed["failed"][0]["memory_id"] == "01nosuchid000000" and "not found" in mixed["failed"][0]["error"]
    assert "memory_id" in await tool_error(client, "forget")


def test_cli_forget_several_ids_and_dry_run(vault: Vault) -> None:
    a, b = _made(vault, "Alpha fact", "Beta fact")
    out = cli_ok("forget", a["id"], b["path"], "--dry-run", vault=vault.root)
    assert "Would forget" in out and a["id"] in out and b["path"] in out and "nothing was changed" in out
    assert vault.list()["total"] == 2
    done = json.loads(cli_ok("--json", "forget", a["id"], b["path"], vault=vault.root))
    assert done["count"] == 2 and vault.list()["total"] == 0
    assert (vault.root / ".trash" / a["path"]).exists()
    c = _made(vault, "Gamma fact")[0]
    partly = run_cli("forget", "01nosuchid000000", c["id"], vault=vault.root)
    assert partly.returncode == 1 and "01nosuchid000000" in partly.stderr and "not found" in partly.stderr
    assert c["id"] in partly.stdout and vault.list()["total"] == 0
