"""The tables a rebuild leaves to their first use (``index.derived``: the where filter's
property rows, the tag filter's rows, the typo vocabulary): a long-lived process (the
watcher of ``watch`` and ``serve``) builds them in the background after its start-up
sweep, and whoever waits for one sees why (the library's progress: a step on the CLI's
stderr, a notification over MCP). A reader arriving during a build waits for it and
finds it built; a shutdown during one leaves the table unbuilt, never half-built."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from agent_memory.cli import output
from agent_memory.index.db import Index
from agent_memory.index.derived import DERIVED, PHASES, PROPERTIES, TAGS, VOCABULARY
from agent_memory.progress import Step
from agent_memory.server.app import build_server
from agent_memory.vault.vault import Vault

from conftest import WATCH_DEADLINE, assert_index_matches_files, run_cli, wait_until, wait_until_async

DONE = ["notes/invoice-0.md", "notes/invoice-3.md", "notes/invoice-6.md", "notes/invoice-9.md"]


def rebuilt(vault: Vault, n: int = 12) -> Vault:
    """``vault`` holding ``n`` notes with properties and tags, just rebuilt: no derived table built."""
    folder = vault.root / "notes"
    folder.mkdir(exist_ok=True)
    for i in range(n):
        status = "done" if i % 3 == 0 else "open"
        (folder / f"invoice-{i}.md").write_text(
            f"---\nstatus: {status}\ntags: [billing, client-{i % 2}]\n---\nInvoice {i} for the escalation runbook.\n")
    vault.reindex()
    assert built(vault) == []
    return vault


def built(vault: Vault) -> list[str]:
    return sorted(row[0] for row in vault.index.query("SELECT name FROM derived"))


def paths(found: Any) -> list[str]:
    return sorted(item["path"] for item in found.get("hits", found.get("memories", [])))


def build_indexes(vault: Vault) -> set[str]:
    """The derived tables' own indexes the schema declares and the file holds (a build
    drops them while it loads and makes them again after)."""
    return {row[0] for row in vault.index.query(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name IN ('props', 'prop_keys', 'tags')")}


# ----------------------------------------------------------------------------- the library


def test_a_filter_after_a_rebuild_reports_its_one_time_build_and_the_next_reports_nothing(vault: Vault) -> None:
    rebuilt(vault)
    steps: list[Step] = []
    assert paths(vault.list(where=["status=done"], progress=steps.append)) == DONE
    assert steps == [Step(PHASES[PROPERTIES], 0, None), Step(PHASES[PROPERTIES], 12, 12)]  # said, then done
    assert str(PHASES[PROPERTIES]) == "building the index of properties for where filters (once after a rebuild)"
    steps.clear()
    assert paths(vault.search("invoice", tags=["client-0"], where=["status=done"], progress=steps.append)) == \
        ["notes/invoice-0.md", "notes/invoice-6.md"]
    assert {step.phase for step in steps} == {PHASES[TAGS]}  # the property rows were built already
    steps.clear()
    assert paths(vault.search("invoise", progress=steps.append))  # a misspelt word: the vocabulary
    assert steps[-1] == Step(PHASES[VOCABULARY], 12, 12)
    steps.clear()
    vault.search("invoise", tags=["billing"], where=["status"], progress=steps.append)
    vault.retrieve_context("invoice", tags=["billing"], progress=steps.append)
    assert steps == []  # built once, kept by every write since
    assert_index_matches_files(vault)


# ----------------------------------------------------------------------------- the watcher


def test_the_watcher_builds_every_table_after_its_start_up_sweep(vault: Vault, watch: Any) -> None:
    rebuilt(vault)
    watch()
    wait_until(lambda: built(vault) == sorted(DERIVED), "the watcher built the derived tables")
    assert_index_matches_files(vault)


def test_a_sweep_after_another_process_rebuilt_the_index_builds_them_again(vault: Vault, watch: Any) -> None:
    rebuilt(vault)
    watch(sweep_interval=0.05)
    wait_until(lambda: built(vault) == sorted(DERIVED), "the watcher built the derived tables")
    other = Vault(vault.root, clock=vault.clock)  # another process's rebuild empties them again
    try:
        other.reindex()
    finally:
        other.close()
    wait_until(lambda: built(vault) == sorted(DERIVED), "a later sweep built them again")
    assert paths(vault.list(where=["status=done"])) == DONE
    assert_index_matches_files(vault)


def test_a_stop_during_a_build_leaves_the_table_unbuilt_and_whole(vault: Vault, watch: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    rebuilt(vault)
    indexes = build_indexes(vault)
    reached = threading.Event()
    fill = Index._fill

    def stopped_midway(self: Index, conn: Any, name: str, done: Any, stop: threading.Event | None) -> None:
        if stop is not None:  # the background build: held until it is told to stop
            reached.set()
            assert stop.wait(WATCH_DEADLINE), "the build was never told to stop"
        fill(self, conn, name, done, stop)

    monkeypatch.setattr(Index, "_fill", stopped_midway)
    watcher = watch()
    assert reached.wait(WATCH_DEADLINE), "the background build never started"
    watcher.stop()  # joins the build's thread (the fixture checks no thread is left)
    assert built(vault) == [] and build_indexes(vault) == indexes  # rolled back whole: the dropped indexes too
    assert vault.index.query("SELECT count(*) FROM props")[0][0] == 0
    monkeypatch.setattr(Index, "_fill", fill)
    assert paths(vault.list(where=["status=done"])) == DONE  # built on first use, as without the watcher
    assert_index_matches_files(vault)


def test_a_full_disk_in_the_background_is_logged_and_the_first_use_builds_it(
        vault: Vault, watch: Any, caplog: pytest.LogCaptureFixture) -> None:
    rebuilt(vault, 300)
    conn = vault.index.conn
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
    def failures() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "in the background" in r.getMessage()]

    try:
        with caplog.at_level(logging.DEBUG, logger="agent_memory.index"):
            watcher = watch(sweep_interval=0.05)
            wait_until(lambda: len(failures()) >= 3, "the failed build is logged, and tried again after sweeps")
            watcher.stop()
    finally:
        conn.execute("PRAGMA max_page_count = 4294967294")
    said = failures()
    assert "could not build the index's properties table" in said[0].getMessage()
    assert "first query that needs it" in said[0].getMessage()
    assert [r.levelno for r in said[:3]] == [logging.WARNING, logging.DEBUG, logging.DEBUG]  # warned once
    assert built(vault) == []
    assert len(vault.list(where=["status=done"], limit=100)["memories"]) == 100
    assert built(vault) == [PROPERTIES]
    assert_index_matches_files(vault)


# ----------------------------------------------------------------------------- the MCP server

@pytest.mark.anyio
async def test_a_server_started_after_a_rebuild_builds_the_tables_without_any_query(vault: Vault) -> None:
    rebuilt(vault)
    async with Client(build_server(vault, keep_in_sync=True)):
        async def all_built() -> bool:
            return built(vault) == sorted(DERIVED)

        await wait_until_async(all_built, "the server built the derived tables")
    assert_index_matches_files(vault)


@pytest.mark.anyio
async def test_a_where_recall_during_the_background_build_waits_for_it_and_says_why(
        vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    rebuilt(vault)
    release = threading.Event()
    fills: list[str] = []
    fill = Index._fill

    def held(self: Index, conn: Any, name: str, done: Any, stop: threading.Event | None) -> None:
        fills.append(name)
        if stop is not None and name == PROPERTIES:  # the background build of the property rows
            assert release.wait(WATCH_DEADLINE), "the test never let the build go on"
        fill(self, conn, name, done, stop)

    monkeypatch.setattr(Index, "_fill", held)
    updates: list[tuple[float, float | None, str | None]] = []

    async def heard(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    try:
        async with Client(build_server(vault, keep_in_sync=True)) as client:
            async def building() -> bool:
                return fills == [PROPERTIES]

            await wait_until_async(building, "the background build started")
            found: list[Any] = []

            async def recall() -> None:
                found.append(await client.call_tool("recall", {"query": "invoice", "where": ["status=done"]},
                                                    progress_callback=heard))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(recall)

                async def told() -> bool:
                    return bool(updates)

                await wait_until_async(told, "the waiting recall says what it waits for")
                release.set()
            assert found[0].is_error is False, found[0].content[0].text
            assert paths(found[0].structured_content) == DONE
            after = await client.call_tool("recall", {"query": "invoice", "where": ["status=done"]})
            assert paths(after.structured_content) == DONE
    finally:
        release.set()
    assert updates[0] == (0, None, "building the index of properties for where filters (once after a rebuild)")
    assert fills.count(PROPERTIES) == 1  # built once: the recall waited for it and found it built
    assert_index_matches_files(vault)


# ----------------------------------------------------------------------------- the CLI


def test_a_cli_search_with_where_after_a_rebuild_shows_the_step_on_stderr(vault: Vault,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    rebuilt(vault)
    root = vault.root
    vault.close()
    monkeypatch.setattr(output, "LINE_EVERY", 0.0)  # as if the build took long (100k memories)
    first = run_cli("search", "invoice", "--where", "status=done", vault=root)
    assert first.returncode == 0, first.stderr
    said = "building the index of properties for --where filters (once after a rebuild)"
    assert first.stderr == f"{said}: 0\n{said}: 12/12\n"
    again = run_cli("search", "invoice", "--where", "status=done", vault=root)
    assert again.stderr == "" and again.stdout == first.stdout  # built once; stdout holds only the hits
    assert sorted(line.strip() for line in first.stdout.splitlines() if "notes/" in line) == DONE
    listed = run_cli("list", "--tag", "client-1", "--json", vault=root)
    assert listed.stderr == "" and json.loads(listed.stdout)["total"] == 6  # --json: no step, not even on stderr
    tagged = run_cli("search", "invoice", "--tag", "client-0", vault=root)
    assert tagged.stderr == ""  # the --json list built the tag rows


def test_a_cli_search_on_a_terminal_draws_the_build_as_a_bar(vault: Vault, tmp_path: Path) -> None:
    from conftest import run_with_terminal_stderr

    rebuilt(vault)
    root = vault.root
    vault.close()
    done, terminal = run_with_terminal_stderr("search", "invoice", "--where", "status=done", "--dir", str(root),
                                              cwd=tmp_path)
    assert done.returncode == 0, terminal
    assert b"Building the index of properties for --where filters" in terminal and b"12/12" in terminal
    assert b"Building" not in done.stdout and done.stdout.count(b"   notes/invoice-") == len(DONE)
