"""Progress notifications for long tools (import_memories, reindex): sent to a client that
passed a progress token, through the real SDK client in memory, never to one that did not."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp_types import ProgressNotification

from agent_memory.progress import Step
from agent_memory.server.app import build_server
from agent_memory.server.progress_notifications import Positions
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, tool_ok, wait_until_async

pytestmark = pytest.mark.anyio

ITEMS = [{"content": f"Fact number {n}: the billing job of shard {n} runs at {n % 24}:00"} for n in range(300)]


class Received:
    """What a client's progress callback got, in order."""

    def __init__(self) -> None:
        self.updates: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.updates.append((progress, total, message))

    async def until_done(self, total: float) -> list[tuple[float, float | None, str | None]]:
        """The updates once the last one arrived (over JSON-RPC the client runs its
        callbacks as tasks of their own, which may finish after the call's result)."""

        async def done() -> bool:
            return bool(self.updates) and self.updates[-1][0] == total

        await wait_until_async(done, f"progress reaches {total}")
        return self.updates


def assert_growing(updates: list[tuple[float, float | None, str | None]]) -> None:
    values = [progress for progress, _total, _message in updates]
    assert values == sorted(set(values)), f"progress must grow with every notification: {values}"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_import_sends_growing_progress_to_a_client_that_asked(vault: Vault, mode: str) -> None:
    received = Received()
    async with Client(build_server(vault), mode=mode) as client:
        result = await client.call_tool("import_memories", {"items": ITEMS}, progress_callback=received)
        assert result.is_error is False, result.content[0].text
        assert result.structured_content["imported"] == 300
        updates = await received.until_done(300)
    assert_growing(updates)
    assert all(total == 300 and message == "importing memories" for _p, total, message in updates), updates
    assert len(vault.list(limit=1)["memories"]) == 1 and vault.list()["total"] == 300
    assert_index_matches_files(vault)


async def test_a_reindex_reports_the_files_it_reads(vault: Vault) -> None:
    """(With semantic recall on, an embedding phase follows, counting on from there.)"""
    vault.import_memories(ITEMS[:40])
    received = Received()
    async with Client(build_server(vault)) as client:  # in memory, each update arrives before the result
        result = await client.call_tool("reindex", {}, progress_callback=received)
        assert result.is_error is False and result.structured_content["added"] == 40
    indexing = [update for update in received.updates if update[2] == "indexing files"]
    assert indexing[-1] == (40, 40, "indexing files") and received.updates[:len(indexing)] == indexing
    assert received.updates[-1][0] == received.updates[-1][1]
    assert_growing(received.updates)


async def test_no_progress_token_no_notification(vault: Vault) -> None:
    """Over JSON-RPC every notification the server sends reaches the message handler: none
    for calls without a callback (no token), and the ones for a call with one."""
    notified: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ProgressNotification):
            notified.append(message.params)

    async with Client(build_server(vault), mode="legacy", message_handler=on_message) as client:
        assert (await tool_ok(client, "import_memories", items=ITEMS))["imported"] == 300
        assert (await tool_ok(client, "reindex"))["added"] == 300
        await tool_ok(client, "memory_stats")  # a later answer: anything sent before it has arrived
        assert notified == []
        received = Received()
        more = [{"content": f"Another fact, number {n}"} for n in range(200)]
        await client.call_tool("import_memories", {"items": more}, progress_callback=received)
        await received.until_done(200)

        async def teed() -> bool:
            return len(notified) == len(received.updates)

        await wait_until_async(teed, "the message handler sees the notifications too")


async def test_a_refused_import_with_a_progress_token_is_the_librarys_one_line_error(vault: Vault) -> None:
    received = Received()
    items = [*ITEMS[:150], {"content": "x", "namespace": "two words"}]
    async with Client(build_server(vault)) as client:
        result = await client.call_tool("import_memories", {"items": items}, progress_callback=received)
    assert result.is_error is True
    assert result.content[0].text == ("Error executing tool import_memories: Item 150: Namespace 'two words' is not "
                                      "valid: use one word of up to 64 characters, no '/' or spaces. Nothing was "
                                      "imported.")
    assert received.updates == [] and vault.list()["total"] == 0


def test_a_later_phase_counts_on_from_where_the_one_before_ended() -> None:
    positions = Positions()
    steps = [Step("indexing files", 500, 1000), Step("indexing files", 1000, 1000),
             Step("embedding memories", 0, 1000), Step("embedding memories", 32, 1000),
             Step("embedding memories", 32, 1000), Step("embedding memories", 1000, 1000)]
    assert [positions.of(step) for step in steps] == [
        (500, 1000, "indexing files"), (1000, 1000, "indexing files"),
        None, (1032, 2000, "embedding memories"), None, (2000, 2000, "embedding memories")]
    unknown = Positions()
    assert [unknown.of(Step("scanning", n)) for n in (0, 10, 20)] == [(0, None, "scanning"), (10, None, "scanning"),
                                                                       (20, None, "scanning")]
    assert unknown.of(Step("copying", 5, 5)) == (25, 25, "copying")
