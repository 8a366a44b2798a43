"""Humans edit, the index follows: a watchdog observer over the vault, one worker thread.

The observer's callbacks only turn events into vault-relative paths and queue them
(they run on the observer thread, which must never block). One worker thread waits
until a path has been quiet for ``debounce`` seconds — an editor's save is several
events: a temp file, a rename, a backup deleted — and then folds the path's final
state on disk into the index with ``Vault.reconcile_path``, the same per-file function
a full ``reconcile()`` uses. A folder moved or deleted stands for every file under it.

Events are lossy (a watch set up late, a full inotify queue, a laptop that slept), so
the worker also runs a full ``reconcile()`` when it starts and every
``sweep_interval`` seconds; with nothing changed that is a walk of ``stat`` calls.
After each sweep the index's tables built on first use that a rebuild left empty are
built on a thread of their own (``index.derived.Prebuild``), so the first ``where``
filter, tag filter or misspelt word of a long-lived process does not wait for them.

While it watches, it vouches for the index (``vouch.py``, docs/design/vouching.md), so
commands can skip their own walk. An inotify overflow (watchdog only logs it: a log
handler hears it), a watch that is gone or a path it could not fold in make it answer
"cannot vouch" until a sweep has run.

The tool's own writes need no special case: after a write the index row already
holds the file's hash and stat, so the event for it ends in "unchanged" after one read
and one hash, without a parse and without the write lock. Nothing here ever writes a file.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import queue
import stat
import threading
import time
import warnings
import weakref
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from watchdog.events import (
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from ..note import parse
from ..index.derived import Prebuild
from ..index.reconcile import SETTLE_GIVE_UP
from ..limits import MAX_FILE_BYTES
from ..models import ReconcileReport
from ..disk.layout import is_ignored_dir, is_memory_path
from ..vault.vault import Vault
from .vouch import Voucher, is_cookie

DEFAULT_DEBOUNCE = 0.05
DEFAULT_SWEEP_INTERVAL = 60.0
# A file written without pause (a log, an editor autosaving while typing) is still
# indexed this often: the debounce may postpone a path, but not for longer than this.
MAX_DELAY = 1.0
# Without a watch, the sweep is all there is: run it more often than the default.
FALLBACK_SWEEP_INTERVAL = 5.0
# How often a vouching watcher looks at its own health (a watch that went away), and
# rewrites its health file at least this often (the heartbeat) while nothing changes.
HEALTH_CHECK = 1.0
HEARTBEAT = 10.0

# Only what can change a memory: no opens, no reads (the tool's own reads of a file
# would otherwise wake the handler), no folder "modified" noise. Folders created or
# moved in need no event of their own: watchdog reports each file inside them.
_EVENTS = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileClosedEvent,
    FileMovedEvent,
    FileDeletedEvent,
    FileAttribEvent,
    DirMovedEvent,
    DirDeletedEvent,
]


class _StopNoise(logging.Filter):
    """Drops the error watchdog logs when its reader races its own shutdown (harmless)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "called when the thread is inactive" not in record.getMessage()


_STOP_NOISE = _StopNoise()


class _Cookie(str):
    """A command's cookie (its file name) seen in the event stream."""


_WAKE = object()  # queued when events were lost: sweep now


class _LostEvents(logging.Handler):
    """watchdog says it lost events (an inotify queue overflow, a watch it could not
    rebuild) only in its log, at WARNING or above: every watcher in this process hears
    of it and stops vouching until it has swept the vault."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.watchers: weakref.WeakSet[Watcher] = weakref.WeakSet()

    def emit(self, record: logging.LogRecord) -> None:
        for watcher in list(self.watchers):
            watcher._lost(record.getMessage())


_LOST_EVENTS = _LostEvents()


@dataclass(frozen=True)
class Change:
    """What the watcher did to the index: ``added``/``updated``/``removed`` for one
    ``path``; ``problem`` for a file that changed but cannot be read as written (broken
    YAML, front matter not closed, not UTF-8), with what is wrong in ``detail``; or
    ``sweep`` (path empty) when a full reconcile found something that events had missed,
    with its counts in ``detail``."""

    action: str
    path: str
    detail: str = ""


OnChange = Callable[[Change], None]


log = logging.getLogger("agent_memory.watch")


def _warn(message: str) -> None:
    """A warning through ``logging`` (``agent_memory/log.py``): never stdout, which may
    be an MCP stdio channel."""
    log.warning("%s", message)


class _Handler(FileSystemEventHandler):
    """Runs on the observer thread: maps an event to a key and queues it.

    A key is ``(path, False)`` for a file to reconcile, or ``(folder, True)`` for a
    folder that went away (deleted, or moved): every indexed path under it must be
    reconciled, since a folder moved out of the vault brings no per-file events.
    """

    def __init__(self, root: str, put: Callable[[Any], None]) -> None:
        super().__init__()
        self._prefix = root.rstrip(os.sep) + os.sep
        self._put = put

    def dispatch(self, event: FileSystemEvent) -> None:
        if event.event_type == "created" and not event.is_directory:
            rel = self._relative(os.fsdecode(event.src_path))
            cookie = is_cookie(rel) if rel is not None else None
            if cookie is not None:
                self._put(_Cookie(cookie))
                return
        if event.is_directory:
            rel = self._relative(os.fsdecode(event.src_path))
            if rel is not None and not any(is_ignored_dir(part) for part in rel.split("/")):
                self._put((rel, True))
            return
        for raw in (event.src_path, event.dest_path):
            rel = self._relative(os.fsdecode(raw)) if raw else None
            if rel is not None and is_memory_path(rel):
                self._put((rel, False))

    def _relative(self, path: str) -> str | None:
        if not path.startswith(self._prefix):
            return None
        rel = path[len(self._prefix) :]
        return rel.replace(os.sep, "/") if os.sep != "/" else rel


def _describe(report: ReconcileReport) -> str:
    """"2 added, 1 removed": what a sweep changed, or "" when it changed nothing."""
    keys = ("added", "updated", "removed", "expired")
    return ", ".join(f"{report[k]} {k}" for k in keys if report[k])  # type: ignore[literal-required]


class Watcher:
    """Keeps ``vault``'s index in step with the files while it runs.

    ``start()`` returns once the watch is set up (or has failed, with a logged warning,
    leaving the periodic sweep to do the work); ``stop()`` folds in what is
    still pending, then stops and joins the observer and the worker thread. Also a
    context manager. ``on_change`` is called on the worker thread for every change
    made to the index; ``counts`` tallies every outcome (including ``unchanged``).
    """

    def __init__(
        self,
        vault: Vault,
        *,
        debounce: float = DEFAULT_DEBOUNCE,
        sweep_interval: float = DEFAULT_SWEEP_INTERVAL,
        on_change: OnChange | None = None,
    ) -> None:
        if debounce < 0 or sweep_interval <= 0:
            raise ValueError("debounce must be >= 0 and sweep_interval > 0 (seconds)")
        self.vault = vault
        self.debounce = debounce
        self.sweep_interval = sweep_interval
        self.on_change = on_change
        self.counts: Counter[str] = Counter()
        self.watching = False
        self._root = str(vault.root)
        self._events: queue.SimpleQueue[Any] = queue.SimpleQueue()  # keys, cookies, _WAKE, None (stop)
        self._observer: BaseObserver | None = None
        self._worker: threading.Thread | None = None
        self._prebuild: Prebuild | None = None  # builds the derived tables after each sweep
        self._pending: dict[tuple[str, bool], tuple[float, float]] = {}  # key -> (first event, due)
        self._timers: list[tuple[float, int, tuple[str, bool]]] = []  # heap of (due, n, key)
        self._tick = itertools.count()  # breaks ties in the heap without comparing keys
        self._voucher: Voucher | None = None
        self._doubt_lock = threading.Lock()
        self._doubt = 0  # bumped each time events may have been lost
        self._cleared = -1  # _doubt when the last sweep that succeeded began (-1: none yet)
        self._aliased = False  # a memory with a second name was seen since the last sweep
        # Set once the start-up sweep is done: from then on every change reaches the index
        # through its event (before, the sweep may find a file first and its event say "unchanged").
        self.swept = threading.Event()

    @property
    def pending(self) -> int:
        """Paths seen changing and not yet folded in (waiting out their debounce)."""
        return len(self._pending)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Self:
        if self._worker is not None:
            raise RuntimeError("this Watcher was already started; make a new one")
        # watchdog warns each time a new nested folder's watch is registered twice (by
        # the walk of its parent and by its own event): harmless, but it fills stderr.
        warnings.filterwarnings("ignore", message="Callback with id .* already exists", category=RuntimeWarning)
        logging.getLogger("watchdog.observers.inotify").addFilter(_STOP_NOISE)
        watchdog_log = logging.getLogger("watchdog")
        watchdog_log.addHandler(_LOST_EVENTS)
        if not watchdog_log.isEnabledFor(logging.WARNING):
            watchdog_log.setLevel(logging.WARNING)  # an overflow must reach _LOST_EVENTS
        _LOST_EVENTS.watchers.add(self)
        voucher = None
        if not self.vault.read_only:
            voucher = Voucher(self.vault.store.control_dir, self.vault.root, self.vault.index.path)
            with contextlib.suppress(OSError):
                voucher.cookies.mkdir(parents=True, exist_ok=True)  # watched from the start
        self._observer = self._watch()
        self.watching = self._observer is not None
        if self.watching and voucher is not None and voucher.acquire():
            self._voucher = voucher  # after the watch is up: the first sweep covers what came before
        self._worker = threading.Thread(target=self._run, name="agent-memory-sync", daemon=True)
        self._prebuild = Prebuild(self.vault.index).start()
        self.vault.vectors.hold()  # semantic recall's vectors load after the first sweep
        self._worker.start()
        return self

    def _keep_vectors(self) -> None:
        """With semantic recall on, changed memories get their vectors on the vault's own
        background thread (the index write wakes it): this worker never waits for a model.
        Started after the first sweep: its first pass then sees the files as they are,
        and its 100k-row reads do not add to the sweep's (a server's peak memory); a
        search that needs the vectors meanwhile waits for the sweep too (``hold``)."""
        try:
            self.vault.keep_vectors()
        except Exception as exc:
            _warn(f"semantic recall's vectors will not be kept current: {exc}")

    def stop(self) -> None:
        """Stop vouching, stop watching, fold in the paths still pending, join both threads."""
        if self._voucher is not None:
            self._voucher.release()
            self._voucher = None
        _LOST_EVENTS.watchers.discard(self)
        if self._prebuild is not None:  # first: a build in progress is rolled back, not waited out
            self._prebuild.stop()
            self._prebuild = None
        if self._observer is not None:
            self._observer.stop()
            self._observer.join()
            self._observer = None
        if self._worker is not None:
            self._events.put(None)
            self._worker.join()
            self._worker = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _watch(self) -> BaseObserver | None:
        """A recursive observer over the vault, or None (and a warning) if the OS refuses one."""
        observer: BaseObserver | None = None
        try:
            observer = Observer()
            observer.schedule(_Handler(self._root, self._events.put), self._root, recursive=True, event_filter=_EVENTS)
            observer.start()
            return observer
        except OSError as exc:
            if observer is not None:
                with contextlib.suppress(Exception):
                    observer.stop()
                with contextlib.suppress(RuntimeError):
                    observer.join()
            _warn(
                f"cannot watch {self._root} for changes ({exc.strerror or exc}); the index will catch up "
                f"with edits by a full sweep every {self._fallback_interval():g}s instead. On Linux, raise "
                "fs.inotify.max_user_watches / max_user_instances (sysctl) or stop other watchers."
            )
            return None

    def _fallback_interval(self) -> float:
        return min(self.sweep_interval, FALLBACK_SWEEP_INTERVAL)

    # ------------------------------------------------------------------ the worker
    def _run(self) -> None:
        """Debounce paths, fold them in when quiet; sweep on start and every interval."""
        interval = self.sweep_interval if self.watching else self._fallback_interval()
        try:
            self._sweep()
        finally:
            self.swept.set()
            self.vault.vectors.release()
        self._keep_vectors()
        next_sweep = time.monotonic() + interval
        next_check = time.monotonic() + HEALTH_CHECK
        while True:
            wake = min(next_sweep, next_check)
            wake = min(self._timers[0][0], wake) if self._timers else wake
            items = self._take(wake - time.monotonic())
            self._schedule(key for key in items if isinstance(key, tuple))
            if None in items:  # stop(): fold in what is pending, then end
                self._fold(list(self._pending))
                return
            if any(item is _WAKE for item in items):
                if self._voucher is not None:
                    self._voucher.report(healthy=False, lost=True)
                next_sweep = time.monotonic()  # events were lost: sweep now
            cookies = [item for item in items if isinstance(item, _Cookie)]
            if cookies:
                self._answer(cookies)
            ready = self._due(time.monotonic())
            if ready:
                self._fold(ready)
            if time.monotonic() >= next_sweep:
                self._sweep()
                next_sweep = time.monotonic() + interval
            if time.monotonic() >= next_check:
                if self._voucher is not None:
                    self._voucher.beat(self.healthy, HEARTBEAT)
                self._follow_head()
                next_check = time.monotonic() + HEALTH_CHECK

    def _answer(self, cookies: list[_Cookie]) -> None:
        """Fold in every path queued so far (all that happened before the cookies were
        written), debounce or not, then answer each cookie: vouch, or say it cannot."""
        pending = list(self._pending)
        self._pending.clear()  # their timers in the heap are stale now and get skipped
        doubt = self._doubt
        self._fold(pending)
        ok = self.healthy and self._doubt == doubt
        if self._voucher is not None:
            for cookie in cookies:
                self._voucher.answer(cookie, ok)

    @property
    def healthy(self) -> bool:
        """Whether this watcher can vouch for the index: its watch is up (observer and
        emitters alive), no events were lost since its last completed sweep, and no
        memory has a second name (a symlink, a hard link): an edit through one name brings
        an event for that name only, so only a walk sees what the other one holds now."""
        observer = self._observer
        return (self.watching and observer is not None and observer.is_alive() and bool(observer.emitters)
                and all(emitter.is_alive() for emitter in observer.emitters) and self._doubt == self._cleared
                and not self._aliased)

    def _lost(self, why: str) -> None:
        """Events may have been lost (on the observer thread: only note it and wake the worker)."""
        with self._doubt_lock:
            self._doubt += 1
        _warn(f"the watch of {self._root} may have missed changes ({why}); sweeping the vault")
        self._events.put(_WAKE)

    def _doubted(self) -> None:
        with self._doubt_lock:
            self._doubt += 1

    def _schedule(self, keys: Iterable[tuple[str, bool]]) -> None:
        """Each new event for a path pushes it back by ``debounce``, up to ``MAX_DELAY``
        after its first one."""
        for key in keys:
            now = time.monotonic()
            first = self._pending[key][0] if key in self._pending else now
            due = min(now + self.debounce, first + MAX_DELAY)
            self._pending[key] = (first, due)
            heapq.heappush(self._timers, (due, next(self._tick), key))

    def _due(self, now: float) -> list[tuple[str, bool]]:
        """Paths whose quiet time is up, earliest first (timers of postponed paths are stale)."""
        ready: list[tuple[str, bool]] = []
        while self._timers and self._timers[0][0] <= now:
            due, _, key = heapq.heappop(self._timers)
            if key in self._pending and self._pending[key][1] == due:
                ready.append(key)
                del self._pending[key]
        return ready

    def _take(self, timeout: float) -> list[Any]:
        """Wait up to ``timeout`` for one queued path, then take all already queued
        with it (a checkout queues thousands at once)."""
        try:
            items = [self._events.get(timeout=max(0.0, timeout))]
        except queue.Empty:
            return []
        while True:
            try:
                items.append(self._events.get_nowait())
            except queue.Empty:
                return items

    def _fold(self, keys: Iterable[tuple[str, bool]]) -> None:
        """Reconcile each path once; a folder that went away stands for its indexed paths."""
        paths: dict[str, None] = {}
        for rel, gone_folder in keys:
            if not gone_folder:
                paths.setdefault(rel, None)
                continue
            try:
                paths.update(dict.fromkeys(self.vault.index.paths_under(rel)))
            except Exception as exc:  # a failure here must not stop the watcher
                _warn(f"could not list what the index holds under {rel}/: {exc}")
                self._doubted()
        for rel in paths:
            self._fold_path(rel)
        self._follow_head()

    def _follow_head(self) -> None:
        """Bring the notes' dates from git up to ``HEAD`` when it moved (a checkout, a
        pull, a commit made outside the tool): ``.git/`` brings no events, and git moves
        ``HEAD`` only after it wrote the files. Costs a read of ``.git/HEAD`` when nothing
        moved."""
        try:
            self.vault.git_dates.refresh()
        except Exception as exc:  # the notes keep their files' dates; the watcher goes on
            _warn(f"could not bring the notes' dates from git up to date: {exc}")

    def _fold_path(self, rel: str) -> None:
        try:
            outcome = self.vault.reconcile_path(rel)
        except Exception as exc:  # one unreadable file must not stop the watcher
            _warn(f"could not index {rel}: {exc}")
            self._doubted()  # the index may be behind on it: no vouching until a sweep
            return
        self.counts[outcome] += 1
        if outcome == "settling":  # maybe an editor's save in progress: look again when it cannot be one
            key, due = (rel, False), time.monotonic() + SETTLE_GIVE_UP
            self._pending[key] = (due, due)
            heapq.heappush(self._timers, (due, next(self._tick), key))
        try:
            found = os.lstat(os.path.join(self._root, rel))
            if stat.S_ISLNK(found.st_mode) or found.st_nlink > 1:
                self._aliased = True  # a second name made since the sweep: no vouching until the next one
        except OSError:
            pass
        if outcome in ("added", "updated"):
            problem = self._unreadable(rel)
            self._notify(Change("problem", rel, problem) if problem else Change(outcome, rel))
        elif outcome == "removed":
            self._notify(Change(outcome, rel))

    def _unreadable(self, rel: str) -> str:
        """What is wrong with a file just indexed that cannot be read as written ("" when
        it can): only a file whose row records problems is read again to tell."""
        row = self.vault.index.by_path(rel)
        if row is None or not row["problems"]:
            return ""
        read = self.vault.store.read(rel, MAX_FILE_BYTES)
        if read is None:
            return ""
        note = parse.parse(read[0], rel)
        return "; ".join(note.problems) if note.unreadable else ""

    def _sweep(self) -> None:
        doubt = self._doubt  # what this sweep clears: anything lost before it began
        try:
            report = self.vault.reconcile()
        except Exception as exc:
            _warn(f"full reconcile of {self._root} failed: {exc}")
            if self._voucher is not None:
                self._voucher.report(healthy=False)
            return
        self._cleared = doubt
        self._aliased = self.vault.store.aliased > 0
        if self._voucher is not None:
            self._voucher.tidy()
            self._voucher.report(healthy=self.healthy)
        self.counts["sweeps"] += 1
        prebuild = self._prebuild  # stop() may clear it meanwhile
        if prebuild is not None:
            prebuild.wake()
        detail = _describe(report)
        if detail:
            self._notify(Change("sweep", "", detail))

    def _notify(self, change: Change) -> None:
        if self.on_change is None:
            return
        try:
            self.on_change(change)
        except Exception as exc:
            _warn(f"on_change callback failed: {exc}")
