"""Long work's ``Step``s as MCP progress notifications, for a client that passed a progress
token with its ``tools/call`` (``_meta.progressToken``); without one the SDK sends nothing.

A tool runs on a worker thread and reports there; notifications go out on the event loop.
The worker never waits for the client: it hands each step over, and a task on the loop
sends the newest one whenever the previous notification is out (a slow client gets
fewer, never stale ones, and never holds the vault's write lock).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread

from ..progress import Progress, Step

log = logging.getLogger("agent_memory.server")
T = TypeVar("T")


class Positions:
    """Steps as the protocol's progress values, which must grow with every notification:
    a phase after the first (embedding after indexing) counts on from where the one
    before ended, and its total grows by as much."""

    def __init__(self) -> None:
        self._phase: str | None = None
        self._start = 0.0
        self._end = 0.0
        self.last: float | None = None
        """The progress value sent last (None: none yet)."""

    def of(self, step: Step) -> tuple[float, float | None, str] | None:
        """(progress, total, message) for ``step``; None when it would not move forward."""
        if step.phase != self._phase:
            self._phase, self._start = step.phase, max(self._end, self.last or 0.0)
        progress = self._start + step.done
        total = None if step.total is None else self._start + step.total
        self._end = max(self._end, total if total is not None else progress)
        if self.last is not None and progress <= self.last:
            return None
        self.last = progress
        return progress, total, step.phase


class _Sender:
    """Holds the newest unsent step; everything here runs on the event loop thread."""

    def __init__(self, report: Any) -> None:
        self._report = report  # the SDK's Context.report_progress
        self._positions = Positions()
        self._pending: tuple[float, float | None, str] | None = None
        self._wake = anyio.Event()
        self._done = False

    def offer(self, step: Step) -> None:
        position = self._positions.of(step)
        if position is not None:
            self._pending = position
            self._wake.set()

    def finish(self) -> None:
        self._done = True
        self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            pending, self._pending = self._pending, None
            if pending is not None:
                try:
                    await self._report(*pending)
                except Exception:  # the client went away: the work goes on, unreported
                    log.debug("a progress notification could not be sent", exc_info=True)
            if self._done and self._pending is None:
                return


async def run_reporting(work: Callable[[Progress], T], report_progress: Any) -> T:
    """``work(progress)`` on a worker thread, each step it reports sent through
    ``report_progress(progress, total, message)`` (the request's
    ``Context.report_progress``); the last step goes out before its result returns."""
    sender = _Sender(report_progress)

    def progress(step: Step, /) -> None:
        try:
            anyio.from_thread.run_sync(sender.offer, step)
        except Exception:  # not on the worker thread, or the loop is closing: never break the work
            log.debug("a progress step could not be handed to the event loop", exc_info=True)

    failure: Exception | None = None
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(sender.run)
        try:
            result = await anyio.to_thread.run_sync(work, progress)
        except Exception as exc:  # noqa: BLE001 - raised as it is below, not wrapped in the task group's ExceptionGroup
            failure = exc
        finally:
            sender.finish()
    if failure is not None:
        raise failure
    return result
