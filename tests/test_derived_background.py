"""The tables a rebuild leaves to their first use (``index.derived``: the where filter's
property rows, the tag filter's rows, the typo vocabulary): a long-lived process (the
watcher of ``watch`` and ``serve``) builds them in the background after its start-up
sweep, a chunk a transaction, and whoever needs one meanwhile builds the rest beside it
and sees why (the library's progress: a step on the CLI's stderr, a notification over
MCP). No row is built twice, a table is read only once whole, and a stop part-way leaves
a part the writes keep current, finished by the next build."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from agent_memory.cli import output
from agent_memory.index import derived
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


def stop_events(monkeypatch: pytest.MonkeyPatch) -> list[threading.Event]:
    """The ``stop`` events background builds are given, in order, as they start."""
    stops: list[threading.Event] = []
    derive = Index.derive

    def recorded(self: Index, name: str, progress: Any = None, stop: threading.Event | None = None) -> bool:
        if stop is not None:
            stops.append(stop)
        return derive(self, name, progress, stop)

    monkeypatch.setattr(Index, "derive", recorded)
    return stops


def built(vault: Vault) -> list[str]:
    return sorted(row[0] for row in vault.index.query("SELECT name FROM derived"))


def paths(found: Any) -> list[str]:
    return sorted(item["path"] for item in found.get("hits", found.get("memories", [])))


def filled(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, int]]:
    """Every memories row a build fills into a derived table, as (thread, table, row)
    once each time it is filled; builds go two rows a chunk, so they take several."""
    monkeypatch.setattr(derived, "DERIVE_PAGE", 2)
    rows: list[tuple[str, str, int]] = []
    fill = derived.fill

    def recorded(conn: Any, name: str, page: list[Any]) -> None:
        rows.extend((threading.current_thread().name, name, row[0]) for row in page)
        fill(conn, name, page)

    monkeypatch.setattr(derived, "fill", recorded)
    return rows


def each_once(rows: list[tuple[str, str, int]], name: str, vault: Vault) -> bool:
    numbers = sorted(rid for _thread, table, rid in rows if table == name)
    return numbers == sorted(row[0] for row in vault.index.query("SELECT rid FROM memories"))


# ----------------------------------------------------------------------------- the library


def test_a_filter_after_a_rebuild_reports_its_one_time_build_and_the_next_reports_nothing(vault: Vault) -> None:
    rebuilt(vault)
    steps: list[Step] = []
    assert paths(vault.list(where=["status=done"], progress=steps.append)) == DONE
    assert steps == [Step(PHASES[PROPERTIES], 12, 12)]
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


def test_two_processes_needing_the_table_at_once_share_its_chunks_and_build_no_row_twice(
        vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    rebuilt(vault)
    rows = filled(monkeypatch)
    others = [Vault(vault.root, clock=vault.clock) for _ in range(2)]  # each its own connections, as two processes
    both_started = threading.Barrier(2, timeout=WATCH_DEADLINE)
    found: dict[str, Any] = {}

    def list_done(other: Vault) -> None:
        both_started.wait()
        found[threading.current_thread().name] = other.list(where=["status=done"])

    try:
        threads = [threading.Thread(target=list_done, args=(other,), name=f"process-{n}") for n, other in
                   enumerate(others)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for other in others:
            other.close()
    assert [paths(found[name]) for name in ("process-0", "process-1")] == [DONE, DONE]
    assert each_once(rows, PROPERTIES, vault)
    assert_index_matches_files(vault)


def test_the_vocabulary_built_in_chunks_ends_merged_into_one_segment_as_a_rebuild_leaves_it(
        vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    rebuilt(vault, 40)
    filled(monkeypatch)  # two rows a chunk: twenty segments, one a transaction

    def structure() -> bytes:  # the full-text index's segment list (FTS5 keeps it in row 10)
        return bytes(vault.index.query("SELECT block FROM words_data WHERE id = 10")[0][0])

    assert paths(vault.search("invoise"))  # a misspelt word: the vocabulary is built
    merged = structure()
    vault.index.query("INSERT INTO words (words) VALUES ('optimize')", warm=True)  # nothing left for it to do
    assert structure() == merged
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


def test_a_rebuild_in_this_process_wakes_the_build_without_waiting_for_a_sweep(vault: Vault, watch: Any) -> None:
    """The server's ``reindex`` tool rebuilds through the watched vault: the tables are
    built again at once, not at the next sweep (an hour away here)."""
    rebuilt(vault)
    watcher = watch(sweep_interval=3600)
    wait_until(lambda: built(vault) == sorted(DERIVED), "the watcher built the derived tables")
    sweeps = watcher.counts["sweeps"]
    vault.reindex()
    wait_until(lambda: built(vault) == sorted(DERIVED), "the rebuild woke the background build")
    assert watcher.counts["sweeps"] == sweeps  # no sweep did it
    assert paths(vault.list(where=["status=done"])) == DONE
    assert_index_matches_files(vault)


def test_a_stop_part_way_leaves_a_part_writes_keep_current_and_the_next_build_finishes_it(
        vault: Vault, watch: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    rebuilt(vault)
    rows = filled(monkeypatch)
    stops = stop_events(monkeypatch)
    chunk = derived.build_chunk

    def first_chunk_then_stop(conn: Any, name: str) -> tuple[bool, int, int]:
        done = chunk(conn, name)
        if stops:  # the background build: its first chunk is in; now the process stops
            assert stops[0].wait(WATCH_DEADLINE), "the build was never told to stop"
        return done

    monkeypatch.setattr("agent_memory.index.db.build_chunk", first_chunk_then_stop)
    watcher = watch()
    wait_until(lambda: rows, "the background build filled its first chunk")
    watcher.stop()  # joins the build's thread (the fixture checks no thread is left)
    assert built(vault) == []  # not read by any query yet, its first chunk kept for the next build
    assert [tuple(row) for row in vault.index.query("SELECT name, upto FROM deriving")] == [(PROPERTIES, 2)]
    monkeypatch.setattr("agent_memory.index.db.build_chunk", chunk)
    first_two = sorted(row[0] for row in vault.index.query("SELECT path FROM memories WHERE rid <= 2"))
    assert first_two == ["notes/invoice-0.md", "notes/invoice-1.md"]
    # Writes meanwhile, to the part built (kept) and beyond it (left to the build).
    (vault.root / "notes" / "invoice-1.md").write_text("---\nstatus: done\n---\nInvoice 1, paid.\n")
    vault.reconcile_path("notes/invoice-1.md")
    vault.forget("notes/invoice-0.md")
    (vault.root / "notes" / "invoice-9.md").write_text("---\nstatus: open\n---\nInvoice 9, reopened.\n")
    vault.reconcile_path("notes/invoice-9.md")
    assert paths(vault.list(where=["status=done"])) == ["notes/invoice-1.md", "notes/invoice-3.md",
                                                        "notes/invoice-6.md"]
    assert built(vault) == [PROPERTIES] and vault.index.query("SELECT * FROM deriving") == []
    # Each row filled once: rows 1-2 by the stopped build (then kept by the writes), the rest by the last.
    assert sorted(rid for _thread, table, rid in rows if table == PROPERTIES) == list(range(1, 13))
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
async def test_a_where_recall_during_the_background_build_builds_the_rest_beside_it_and_says_why(
        vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    rebuilt(vault)
    rows = filled(monkeypatch)
    release = threading.Event()
    transaction = Index.transaction

    @contextlib.contextmanager
    def paused(self: Index) -> Iterator[Any]:
        with transaction(self) as conn:
            yield conn
        if threading.current_thread().name == "agent-memory-derive":  # between two chunks, no lock held
            assert release.wait(WATCH_DEADLINE), "the test never let the build go on"

    monkeypatch.setattr(Index, "transaction", paused)
    updates: list[tuple[float, float | None, str | None]] = []

    async def heard(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    try:
        async with Client(build_server(vault, keep_in_sync=True)) as client:
            async def building() -> bool:
                return bool(rows)

            await wait_until_async(building, "the background build filled its first chunk")
            during = await client.call_tool("recall", {"query": "invoice", "where": ["status=done"]},
                                            progress_callback=heard)
            assert during.is_error is False, during.content[0].text
            release.set()

            async def all_built() -> bool:
                return built(vault) == sorted(DERIVED)

            await wait_until_async(all_built, "the background build went on with the other tables")
            after = await client.call_tool("recall", {"query": "invoice", "where": ["status=done"]})
    finally:
        release.set()
    assert paths(during.structured_content) == paths(after.structured_content) == DONE
    said = "building the index of properties for where filters (once after a rebuild)"
    assert updates and {message for _p, _t, message in updates} == {said} and updates[-1][:2] == (12, 12)
    assert {thread for thread, table, _rid in rows if table == PROPERTIES} > {"agent-memory-derive"}  # shared
    assert each_once(rows, PROPERTIES, vault)  # every row once: none built twice
    assert_index_matches_files(vault)


@pytest.mark.anyio
async def test_a_server_shut_down_during_the_build_joins_it_and_the_index_still_answers(
        vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    rebuilt(vault)
    rows = filled(monkeypatch)
    stops = stop_events(monkeypatch)
    transaction = Index.transaction

    @contextlib.contextmanager
    def until_stopped(self: Index) -> Iterator[Any]:
        with transaction(self) as conn:
            yield conn
        if stops and threading.current_thread().name == "agent-memory-derive":  # part-way, between two chunks
            assert stops[0].wait(WATCH_DEADLINE), "the server never stopped the build"

    monkeypatch.setattr(Index, "transaction", until_stopped)
    async with Client(build_server(vault, keep_in_sync=True)):
        async def building() -> bool:
            return bool(rows)

        await wait_until_async(building, "the background build filled its first chunk")
    assert not [t for t in threading.enumerate() if t.name == "agent-memory-derive"]  # joined, not left running
    assert built(vault) == [] and [row[0] for row in vault.index.query("SELECT name FROM deriving")] == [PROPERTIES]
    monkeypatch.setattr(Index, "transaction", transaction)
    assert paths(vault.list(where=["status=done"])) == DONE
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
    assert first.stderr == "building the index of properties for --where filters (once after a rebuild): 12/12\n"
    again = run_cli("search", "invoice", "--where", "status=done", vault=root)
    assert again.stderr == "" and again.stdout == first.stdout  # built once; stdout holds only the hits
    assert sorted(line.strip() for line in first.stdout.splitlines() if "notes/" in line) == DONE
    listed = run_cli("list", "--tag", "client-1", "--json", vault=root)
    assert listed.stderr == "" and json.loads(listed.stdout)["total"] == 6  # --json: no step, not even on stderr
    tagged = run_cli("search", "invoice", "--tag", "client-0", vault=root)
    assert tagged.stderr == ""  # the --json list built the tag rows


@pytest.mark.anyio
async def test_memory_stats_over_mcp_after_a_rebuild_sends_the_tag_rows_build_as_progress(vault: Vault) -> None:
    rebuilt(vault)
    updates: list[tuple[float, float | None, str | None]] = []

    async def heard(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    async with Client(build_server(vault)) as client:  # no watcher: nothing builds them before
        stats = await client.call_tool("memory_stats", {}, progress_callback=heard)
    assert stats.is_error is False and stats.structured_content["top_tags"]["billing"] == 12
    said = "building the index of tags for tags filters (once after a rebuild)"  # the tool argument's name
    assert updates and {message for _p, _t, message in updates} == {said} and updates[-1][:2] == (12, 12)


def test_cli_stats_after_a_rebuild_says_it_builds_the_tag_rows_for_its_top_tags(
        vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    rebuilt(vault)
    root = vault.root
    vault.close()
    monkeypatch.setattr(output, "LINE_EVERY", 0.0)  # as if the build took long (100k memories)
    first = run_cli("stats", vault=root)
    assert first.returncode == 0, first.stderr
    assert first.stderr == "building the index of tags for --tag filters (once after a rebuild): 12/12\n"
    assert "#billing 12" in first.stdout and "building" not in first.stdout
    again = run_cli("stats", "--json", vault=root)
    assert again.stderr == "" and json.loads(again.stdout)["top_tags"]["billing"] == 12


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


TAG_ROWS = "building the index of tags for tags filters (once after a rebuild)"
VOCABULARY_WORDS = "building the vocabulary for correcting misspelt words (once after a rebuild)"


@pytest.mark.anyio
@pytest.mark.parametrize(("compat", "tool", "arguments", "said"), [
    ("memory-vault", "recall", {"query": "invoice", "tags": ["client-0"]}, TAG_ROWS),
    ("memory-vault", "list_memories", {"tag": "client-1"}, TAG_ROWS),
    ("memory-vault", "memory_stats", {}, TAG_ROWS),
    ("memory-mcp", "search_memories", {"query": "invoise"}, VOCABULARY_WORDS),
    ("memory-mcp", "recall", {"query": "invoise"}, VOCABULARY_WORDS),
    ("memory-mcp", "retrieve_context", {"query": "invoise"}, VOCABULARY_WORDS),
    ("memory-mcp", "memory_stats", {}, TAG_ROWS),
    ("agentmemory", "search_memories", {"query": "invoise"}, VOCABULARY_WORDS),
])
async def test_a_compat_tool_after_a_rebuild_sends_its_one_time_build_as_progress(
        vault: Vault, compat: str, tool: str, arguments: dict[str, Any], said: str) -> None:
    rebuilt(vault)
    updates: list[tuple[float, float | None, str | None]] = []

    async def heard(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    async with Client(build_server(vault, compat=compat)) as client:  # no watcher: nothing builds them before
        done = await client.call_tool(tool, arguments, progress_callback=heard)
        again = await client.call_tool(tool, arguments, progress_callback=heard)
    assert done.is_error is False and again.is_error is False, done.content
    assert updates and {message for _p, _t, message in updates} == {said}
    assert updates[-1][0] == updates[-1][1]  # the build's last step: all of it done, then nothing more
    assert len([u for u in updates if u[0] == u[1]]) == 1  # the second call found it built
