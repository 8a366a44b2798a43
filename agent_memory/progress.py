"""How long work tells its caller how far it got: one interface for every front end.

The library reports long work (the first index, a reindex, an import, an export,
embedding, emptying the trash) as ``Step`` values through a ``Progress`` callable it is
given; it never draws anything itself. The CLI turns steps into a bar on a terminal and
plain lines when piped, the MCP server into progress notifications for a client that
passed a progress token, and a library user into whatever they like. Nothing is
reported when no callable is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Step:
    """How far one phase of long work got: ``done`` of ``total`` items (``total`` None
    while unknown). ``phase`` names the work in a few plain words ("indexing files")."""

    phase: str
    done: int
    total: int | None = None


class Progress(Protocol):
    """Called with each ``Step``; must return quickly and never raise."""

    def __call__(self, step: Step, /) -> None: ...


class Every:
    """Report at most every ``items`` items (and always the last), so a front end is not
    called for each of 100,000 files."""

    def __init__(self, progress: Progress | None, phase: str, total: int | None, items: int = 100) -> None:
        self._progress, self._phase, self._total, self._items = progress, phase, total, max(1, items)

    def __call__(self, done: int) -> None:
        if self._progress is not None and (done % self._items == 0 or done == self._total):
            self._progress(Step(self._phase, done, self._total))
