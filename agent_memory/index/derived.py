"""The tables derived from the memories rows, built the first time something needs one
(``Index.derive``): what each is called, how its build is said to a person, how a
thread waiting for another's build hears how far it got, and the background thread that
builds them before anyone waits (``Prebuild``, run by a long-lived process: the watcher
of ``watch`` and ``serve``).

A rebuild leaves them empty (together they are about a third of its CPU), so the first
``where`` filter, tag filter or misspelt word after one waits for its table: 0.35 s at
10k memories, seconds at 100k. A long-lived process builds them right after its
start-up reconcile instead; a short one (a CLI search) shows the build as a progress step.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol, Self

from ..progress import Progress, Step
from ..wording import TAG_FILTER, WHERE, Said, said

# A name in the ``derived`` table says that table is built and current; from then on
# every write keeps it so (``Index._insert``, ``Index._delete_row``), and a rebuild
# empties the tables and the names.
PROPERTIES = "properties"  # prop_keys and props: the where filter's property rows
TAGS = "tags"  # tags: the tag filter's rows
VOCABULARY = "vocabulary"  # words (and words_vocab over it): the typo vocabulary
DERIVED = (PROPERTIES, TAGS, VOCABULARY)
DERIVED_TABLES = {PROPERTIES: ("prop_keys", "props"), TAGS: ("tags",), VOCABULARY: ("words",)}
# The memories columns each is built from (``Index._fill``), in row order.
DERIVED_FROM = {PROPERTIES: "SELECT rid, meta, tags FROM memories ORDER BY rid",
                TAGS: "SELECT rid, tags FROM memories ORDER BY rid",
                VOCABULARY: "SELECT rid, names, aliases, tags, body FROM memories ORDER BY rid"}
DERIVE_PAGE = 2000  # memories rows read (and reported) at a time while a derived table is built
WAIT_STEP = 0.25  # seconds between two looks at another thread's build while waiting for it

# Each build as a person reads it, in the front end's words (``wording``): the filter
# (or the correction) it is for, and that it happens once after a rebuild.
PHASES: dict[str, Said] = {
    PROPERTIES: said("building the index of properties for ", WHERE, " filters (once after a rebuild)"),
    TAGS: said("building the index of tags for ", TAG_FILTER, " filters (once after a rebuild)"),
    VOCABULARY: said("building the vocabulary for correcting misspelt words (once after a rebuild)"),
}
log = logging.getLogger("agent_memory.index")


class Stopped(Exception):
    """A build was asked to stop (``Prebuild.stop``): its transaction is rolled back."""


class Builds:
    """How far this process's build of each derived table got, so a thread that waits
    for it (the index's writing lock is held for the whole build) can say so."""

    def __init__(self) -> None:
        self._latest: dict[str, Step] = {}

    def reporter(self, name: str, progress: Progress | None) -> Progress:
        """The build's own progress: each step kept for waiting threads, and passed on."""
        def report(step: Step, /) -> None:
            self._latest[name] = step
            if progress is not None:
                progress(step)
        return report

    def ended(self, name: str) -> None:
        self._latest.pop(name, None)

    @contextmanager
    def turn(self, lock: threading.RLock, name: str, progress: Progress | None) -> Iterator[None]:
        """``lock`` (the index's writing lock) held; while another thread of this process
        holds it building ``name``, that build's steps go to ``progress`` as they come."""
        if progress is not None:  # a person sees what they wait for, even while another process builds it
            progress(Step(PHASES[name], 0, None))
        said_last: Step | None = None
        while not lock.acquire(timeout=WAIT_STEP):
            step = self._latest.get(name)
            if progress is not None and step is not None and step != said_last:
                progress(step)
                said_last = step
        try:
            yield
        finally:
            lock.release()


class Derives(Protocol):
    """What ``Prebuild`` builds through: ``Index.derive``."""

    def derive(self, name: str, progress: Progress | None = None, stop: threading.Event | None = None) -> bool: ...


class Prebuild:
    """Builds the derived tables nobody has needed yet on a thread of its own, one at a
    time, each time it is woken (``wake``: after the watcher's start-up reconcile and
    each sweep, which finds a rebuild made meanwhile). It holds no vault lock; each build
    is the one SQLite transaction a first use would run, so a reader arriving meanwhile
    waits for it and finds it built, and none is ever seen half-built. ``stop`` ends a
    build in progress (rolled back: the table stays unbuilt) and joins the thread. A
    failure (a full disk) is logged, as a warning the first time only (a sweep wakes it
    every minute); the table is left to its first use, as without this."""

    def __init__(self, index: Derives) -> None:
        self._index = index
        self._failed = False
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name="agent-memory-derive", daemon=True)
        self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while True:
            self._wake.wait()
            if self._stop.is_set():
                return
            self._wake.clear()
            self._build_missing()

    def _build_missing(self) -> None:
        for name in DERIVED:
            try:
                if not self._index.derive(name, stop=self._stop):
                    return  # stopped
            except Exception as exc:  # noqa: BLE001 - a background build must never end the thread unsaid
                log.log(logging.DEBUG if self._failed else logging.WARNING,
                        "could not build the index's %s table in the background (%s); "
                        "the first query that needs it builds it", name, exc)
                self._failed = True
                return
