"""What changed lately: `list --since/--until` and the `recent_activity` tool, by when each
file last changed (a person's edit in an editor included), from the index."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from agent_memory.vault.vault import Vault

from conftest import Clock, assert_index_matches_files, cli_ok, run_cli
from conftest import tool_error as fails, tool_ok as ok

pytestmark = pytest.mark.anyio


def _set_mtime(path: Path, moment: dt.datetime) -> None:
    stamp = moment.timestamp()
    os.utime(path, (stamp, stamp))


def _hand_edit(vault: Vault, rel: str, extra: str, moment: dt.datetime) -> None:
    """A person appends a line in an editor: `updated:` stays as it was, the mtime moves."""
    path = vault.root / rel
    path.write_bytes(path.read_bytes() + extra.encode())
    _set_mtime(path, moment)
    vault.reconcile_path(rel)


@pytest.fixture
def aged(vault: Vault, clock: Clock) -> dict[str, str]:
    """Three memories written 30 days ago; one left alone since (its file 10 days old),
    two edited by hand 2 days and 1 hour ago."""
    written = clock.now
    paths = {name: vault.remember(f"The {name} fact about deploys", namespace=ns)["memory"]["path"]
             for name, ns in (("old", "work"), ("middle", "work"), ("fresh", "home"))}
    clock.advance(days=30)
    _set_mtime(vault.root / paths["old"], written + dt.timedelta(days=20))
    vault.reconcile_path(paths["old"])
    _hand_edit(vault, paths["middle"], "Edited by hand.\n", clock.now - dt.timedelta(days=2))
    _hand_edit(vault, paths["fresh"], "Also edited.\n", clock.now - dt.timedelta(hours=1))
    return paths


def test_list_since_finds_hand_edits_latest_change_first(vault: Vault, aged: dict[str, str]) -> None:
    listed = vault.list(since="7d")
    assert [m["path"] for m in listed["memories"]] == [aged["fresh"], aged["middle"]]
    assert listed["total"] == 2
    assert listed["memories"][0]["changed"] > listed["memories"][1]["changed"]
    # updated: is the tool's own stamp, untouched by the hand edit: the change time is the file's
    assert listed["memories"][0]["updated"] < listed["memories"][0]["changed"]
    assert [m["path"] for m in vault.list(until="7d")["memories"]] == [aged["old"]]
    assert [m["path"] for m in vault.list(since="3 days ago", until="1d")["memories"]] == [aged["middle"]]
    assert vault.list(since="2026-01-01")["total"] == 3
    assert_index_matches_files(vault)  # a rebuild from the files says the same


def test_recent_activity_by_time_frame_namespace_and_type_paged(vault: Vault, aged: dict[str, str]) -> None:
    week = vault.recent_activity("7d")
    assert [m["path"] for m in week["memories"]] == [aged["fresh"], aged["middle"]]
    assert week["since"] == "2026-08-12T09:00:00Z" and week["until"] is None
    assert [m["path"] for m in vault.recent_activity("7d", namespace="work")["memories"]] == [aged["middle"]]
    assert [m["path"] for m in vault.recent_activity("2h")["memories"]] == [aged["fresh"]]
    first = vault.recent_activity("30d", limit=2)
    assert (first["count"], first["total"], first["next_offset"]) == (2, 3, 2)
    rest = vault.recent_activity("30d", limit=2, offset=2)
    assert [m["path"] for m in rest["memories"]] == [aged["old"]] and "next_offset" not in rest
    vault.update(aged["old"], type="decision")  # a tool edit is a change too
    assert [m["path"] for m in vault.recent_activity("1h", type="Decision")["memories"]] == [aged["old"]]


@pytest.mark.parametrize("bad", ["soon", "7x", "-3d", "9999999d"])
def test_a_time_frame_that_is_not_a_span_or_a_date_is_refused(vault: Vault, bad: str) -> None:
    from agent_memory.errors import InvalidInput

    with pytest.raises(InvalidInput, match="span|date"):
        vault.recent_activity(bad)


def test_cli_list_since_a_span_over_hand_written_notes(tmp_path: Path) -> None:
    root = tmp_path / ".memory"
    cli_ok("init", str(root))
    now = dt.datetime.now(dt.timezone.utc)
    for name, days in (("ancient", 40), ("recent", 3), ("today", 0.01)):
        note = root / "notes" / f"{name}.md"
        note.parent.mkdir(exist_ok=True)
        note.write_text(f"# {name}\n\nA note a person wrote.\n")
        _set_mtime(note, now - dt.timedelta(days=days))
    listed = json.loads(cli_ok("--json", "list", "--since", "7d", vault=root))
    assert [m["path"] for m in listed["memories"]] == ["notes/today.md", "notes/recent.md"]
    human = cli_ok("list", "--since", "1w", vault=root)
    assert "notes/today.md" in human and "changed " in human and "ancient" not in human
    bad = run_cli("list", "--since", "last tuesday", vault=root)
    assert bad.returncode == 1 and "7d" in bad.stderr and "Traceback" not in bad.stderr


async def test_recent_activity_and_list_since_over_mcp(client: object, vault: Vault, aged: dict[str, str]) -> None:
    week = await ok(client, "recent_activity", timeframe="7d")
    assert [m["path"] for m in week["memories"]] == [aged["fresh"], aged["middle"]]
    assert all("changed" in m for m in week["memories"])
    listed = await ok(client, "list_memories", since="7d", namespace="home")
    assert [m["path"] for m in listed["memories"]] == [aged["fresh"]]
    assert "timeframe" in await fails(client, "recent_activity", timeframe="whenever")
