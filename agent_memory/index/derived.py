"""The tables derived from the memories rows, built the first time something needs one
(``Index.derive``) rather than by every rebuild (together about a third of its CPU):
what each is called, how its build is said to a person, the build itself, a chunk at a
time, and the background thread that builds them before anyone waits (``Prebuild``, run
by a long-lived process: the watcher of ``watch`` and ``serve``).

A build fills ``DERIVE_PAGE`` memories rows a write transaction, in row-number order,
and records how far it got in ``deriving``; every write keeps the rows up to that mark
(``kept``), so the part built stays current while the rest is built, and writers wait
for one chunk at most, never for a whole build (seconds at 100k memories). Anyone who
needs the table (a reader, the background thread, another process) builds the next
chunk: two builders share the work, none is done twice. Queries read a table only once
its name is in ``derived``, which the last chunk writes: a half-built table is never
read, and one left half-built (a stopped process) is finished by the next build.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol, Self

from ..progress import Progress
from ..wording import TAG_FILTER, WHERE, Said, said
from .properties import properties
from .rows import joined, words_text

# A name in the ``derived`` table says that table is built and current; from then on
# every write keeps it so (``Index._insert``, ``Index._delete_row``), and a rebuild
# empties the tables and the names.
PROPERTIES = "properties"  # prop_keys and props: the where filter's property rows
TAGS = "tags"  # tags: the tag filter's rows
VOCABULARY = "vocabulary"  # words (and words_vocab over it): the typo vocabulary
DERIVED = (PROPERTIES, TAGS, VOCABULARY)
# The memories columns each is built from, a chunk at a time in row order (``build_chunk``).
SOURCES = {PROPERTIES: "rid, meta, tags", TAGS: "rid, tags", VOCABULARY: "rid, names, aliases, tags, body"}
# Memories rows a build fills in one write transaction: at 100k memories the where filter's
# rows take ~45 us a row (CPU), so a writer waits ~25 ms at most, as for a normal write.
DERIVE_PAGE = 500
EVERY_ROW = 2**63 - 1  # the mark of a table built whole (``kept``)
# A build's mark as read: a row number, or -1 for what no build writes (text, a fraction:
# a planted record), which no write keeps and from which the build starts over.
MARK = "CASE WHEN typeof(upto) = 'integer' THEN upto ELSE -1 END"
# Leaf pages of the typo vocabulary merged a write transaction once it is built
# (``merge_step``): its chunks leave many small full-text segments, and merging them in
# one go ('optimize') held the write lock ~0.1 s at 100k memories, ten times that at 1M.
MERGE_PAGES = 200

# Each build as a person reads it, in the front end's words (``wording``): the filter
# (or the correction) it is for, and that it happens once after a rebuild.
PHASES: dict[str, Said] = {
    PROPERTIES: said("building the index of properties for ", WHERE, " filters (once after a rebuild)"),
    TAGS: said("building the index of tags for ", TAG_FILTER, " filters (once after a rebuild)"),
    VOCABULARY: said("building the vocabulary for correcting misspelt words (once after a rebuild)"),
}
log = logging.getLogger("agent_memory.index")


def kept(conn: sqlite3.Connection) -> dict[str, int]:
    """Each derived table a write must keep, with the highest row number whose rows it
    keeps: ``EVERY_ROW`` once built, its build's mark while one is under way; read in the
    write's own transaction (another process may have built some since)."""
    marks = {row[0]: row[1] for row in conn.execute(f"SELECT name, {MARK} FROM deriving")}
    # Built wins over a mark beside it (none a build leaves; a planted index may hold both):
    # a table read whole must be kept whole.
    marks.update((row[0], EVERY_ROW) for row in conn.execute("SELECT name FROM derived"))
    return marks


def build_chunk(conn: sqlite3.Connection, name: str) -> tuple[bool, int, int]:
    """The next ``DERIVE_PAGE`` memories rows past the build's mark filled into ``name``
    (as a write would have) in the caller's write transaction, and the mark moved on; when
    none are left, the name recorded as built. Returns (built, rows done, rows in all)."""
    page = DERIVE_PAGE
    total = int(conn.execute("SELECT memories FROM counts").fetchone()[0])
    if conn.execute("SELECT 1 FROM derived WHERE name = ?", (name,)).fetchone():
        return True, total, total  # another connection built it in the meantime
    mark = conn.execute(f"SELECT {MARK}, CAST(done AS INTEGER) FROM deriving WHERE name = ?", (name,)).fetchone()
    upto, done = (int(mark[0]), int(mark[1])) if mark else (0, 0)
    last = int(conn.execute("SELECT coalesce(max(rid), 0) FROM memories").fetchone()[0])
    if not 0 < upto <= last:  # the first chunk, or a mark past every row (planted, or its rows deleted since)
        start_over(conn, name)
        upto, done = 0, 0
    rows = conn.execute(f"SELECT {SOURCES[name]} FROM memories WHERE rid > ? ORDER BY rid LIMIT ?",
                        (upto, page)).fetchall()
    fill(conn, name, rows)
    if len(rows) < page:
        conn.execute("DELETE FROM deriving WHERE name = ?", (name,))
        conn.execute("INSERT INTO derived (name) VALUES (?)", (name,))
        return True, total, total
    done += len(rows)
    conn.execute("INSERT OR REPLACE INTO deriving (name, upto, done) VALUES (?, ?, ?)", (name, rows[-1][0], done))
    return False, min(done, total), total


def start_over(conn: sqlite3.Connection, name: str) -> None:
    """``name``'s table emptied and its mark dropped, for a build from the first row: what
    a rebuild left it (a rebuild empties it), unless rows were planted in it (the index
    may be pulled from git) or a mark says more rows are in it than are."""
    conn.execute("DELETE FROM deriving WHERE name = ?", (name,))
    if name == PROPERTIES:
        conn.execute("DELETE FROM prop_keys")
        conn.execute("DELETE FROM props")
    elif name == TAGS:
        conn.execute("DELETE FROM tags")
    else:
        conn.execute("INSERT INTO words (words) VALUES ('delete-all')")


def merge_step(conn: sqlite3.Connection) -> bool:
    """One step of merging the typo vocabulary's full-text segments into one (what
    'optimize' does at once; FTS5's 'merge' with a negative page count), in the
    caller's write transaction. False once there was nothing left to merge (FTS5 says
    so by changing fewer than two rows)."""
    before = conn.total_changes
    conn.execute("INSERT INTO words (words, rank) VALUES ('merge', ?)", (-MERGE_PAGES,))
    return conn.total_changes - before >= 2


def fill(conn: sqlite3.Connection, name: str, rows: list[Any]) -> None:
    """``name``'s rows of these memories rows (columns as ``SOURCES`` reads them)."""
    if name == PROPERTIES:
        insert_properties(conn, [(rid, json.loads(meta), tags.split()) for rid, meta, tags in rows])
    elif name == TAGS:  # the column holds them space-separated, and a tag holds no whitespace
        insert_tags(conn, [(rid, tags.split()) for rid, tags in rows])
    else:
        insert_words(conn, rows)


def insert_properties(conn: sqlite3.Connection, rows: Iterable[tuple[int, dict[str, Any], list[str]]]) -> None:
    """The where filter's rows of each (rid, front matter, tags) (``properties``)."""
    keys: list[tuple[str, int]] = []
    pairs: list[tuple[str, str, int]] = []
    for rid, meta, tags in rows:
        names, values = properties(meta, tags)
        keys += [(key, rid) for key in names]
        pairs += [(key, value, rid) for key, value in values]
    # In key order: a page of rows lands on neighbouring B-tree pages, not all over.
    conn.executemany("INSERT OR IGNORE INTO prop_keys (key, rid) VALUES (?, ?)", sorted(keys))
    conn.executemany("INSERT OR IGNORE INTO props (key, value, rid) VALUES (?, ?, ?)", sorted(pairs))


def insert_tags(conn: sqlite3.Connection, rows: Iterable[tuple[int, list[str]]]) -> None:
    """The tag filter's rows of each (rid, tags)."""
    conn.executemany("INSERT OR IGNORE INTO tags (tag, rid) VALUES (?, ?)",
                     [(tag, rid) for rid, tags in rows for tag in tags])


def insert_words(conn: sqlite3.Connection, rows: Iterable[tuple[int, str, str, str, str]]) -> None:
    """The typo vocabulary's text of each (rid, names, aliases, tags, body), as the
    memories row holds them (``words_text``)."""
    conn.executemany("INSERT INTO words (rowid, text) VALUES (?, ?)",
                     [(rid, words_text(joined(names, aliases), tags, body)) for rid, names, aliases, tags, body in rows])


class Derives(Protocol):
    """What ``Prebuild`` builds through: ``Index.derive``."""

    def derive(self, name: str, progress: Progress | None = None, stop: threading.Event | None = None) -> bool: ...

    def on_rebuilt(self, listener: Callable[[], None]) -> Callable[[], None]: ...


class Prebuild:
    """Builds the derived tables nobody has needed yet on a thread of its own, one at a
    time, each time it is woken (``wake``: after the watcher's start-up reconcile, each
    sweep, which finds a rebuild another process made, and each rebuild this process
    commits, such as the server's ``reindex`` tool). It holds no vault lock, and the
    index's write lock for one chunk at a time (``build_chunk``); a reader arriving
    meanwhile builds the next chunks beside it. ``stop`` ends a build between two chunks
    (the table stays unbuilt for queries, its mark kept for the next build) and joins the thread. A
    failure (a full disk) is logged, as a warning the first time only (a sweep wakes it
    every minute); the table is left to its first use, as without this."""

    def __init__(self, index: Derives) -> None:
        self._index = index
        self._failed = False
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._unlisten: Callable[[], None] | None = None

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name="agent-memory-derive", daemon=True)
        self._thread.start()
        self._unlisten = self._index.on_rebuilt(self.wake)
        return self

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
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
