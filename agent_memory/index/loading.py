"""Loading many rows at once into the index: a rebuild's every row, an import's
thousands. Secondary indexes are made after the rows, and the page cache is made
roomy for the load only (``Index.replace_all``, ``Index.roomy_cache``). A rebuild of an
index with no rows loads tables of its own in steps and swaps them in (``fresh_load``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

LOAD_CACHE_KIB = 32 * 1024  # SQLite's page cache while a load goes in
# The bytes of postings the full-text index holds in memory while a load goes in before
# it writes them out as a segment; FTS5's own default (1 MB) is put back after the load.
# At 1 MB a load wrote a small segment every few hundred rows, each merged again and again
# by FTS5's automerge: 40% of the full-text time at 100k memories, growing faster than them.
LOAD_FTS_HASH = 32 * 1024 * 1024
FTS_HASH = 1024 * 1024
# A transaction adding this share of the index's rows, at least ``MERGE_LEAST`` of them,
# ends by merging the full-text index (``merge_due``), as a big one does.
MERGE_SHARE = 1 / 200
MERGE_LEAST = 50
# FTS5's automerge (its default, 4, put back after the load) is off while a load goes in:
# those few big segments are merged once, after it (``Index._merge_segments``), not
# merged into each other first (FTS5's crisismerge still bounds how many pile up).
FTS_AUTOMERGE = 4
# The indexes on memories a rebuild fills as its rows go in rather than building them after
# (``bulk_load``): their keys come in row order (the row number first) or from a few
# values (a language, a shape, a type, an importance; expiry times follow the rows' age;
# conflict copies are rare), so each row lands on one of a few pages at hand, where one
# built after the load reads the whole table once more (1.3 GB at a million memories)
# for an index that is often empty. The rest would be a random seek a row: built after.
FILLED_WITH_ROWS = frozenset({"memories_rid_updated", "memories_lang", "memories_shape", "memories_kind",
                              "memories_importance", "memories_expires", "memories_conflicts"})
# The indexes led by the path: filled as the rows go in while they come in path order (the
# tool's YYYY/MM/DD/ files, loaded oldest first, do), each row appended; at the first row
# out of order (a person's note dated by its mtime) dropped, and built after the load.
PATH_LED = frozenset({"memories_stamps", "memories_problems"})
# A rebuild of an index with no rows (``fresh_load``) loads the tables a rebuild fills into
# tables of these names plus ``FRESH``, committed ``STEP_ROWS`` rows at a time, and swaps
# them in at the end; the tables it only empties (the derived ones) are emptied then.
LOADED = ("memories", "links", "names", "fts")
EMPTIED = ("tags", "prop_keys", "props", "derived", "deriving")
FRESH = "_fresh"
STEP_ROWS = 20_000


class Load:
    """A bulk load under way (``bulk_load``): the statements of the indexes to build after
    it, and those led by the path it fills while the rows come in path order."""

    def __init__(self, conn: sqlite3.Connection, after: list[str], path_led: list[str]) -> None:
        self.conn, self.after, self.path_led, self.last = conn, after, path_led, ""

    def paths(self, paths: list[str]) -> None:
        """The paths of the next rows, in the order they go in, told before they do."""
        if self.path_led and not all(a < b for a, b in zip([self.last, *paths], paths)):
            for statement in self.path_led:
                self.conn.execute(f"DROP INDEX {statement.split()[2]}")
            self.after, self.path_led = self.after + self.path_led, []
        self.last = paths[-1] if paths else self.last


@contextmanager
def bulk_load(conn: sqlite3.Connection, statements: Sequence[str]) -> Iterator[Load]:
    """Rows loaded into empty tables inside the caller's transaction, their secondary
    indexes (``statements``: ``CREATE INDEX``, each naming its index third) built after
    the rows, by sorting, rather than one random B-tree insert a row each (which a
    million rows make seek and spill); from the module's schema, never from what the
    file says they are. The page cache is big enough that the load does not write
    pages out and read them back over and over (SQLite's default is 2 MB), and the
    full-text index writes fewer, bigger segments (``LOAD_FTS_HASH``). The indexes
    ``FILLED_WITH_ROWS`` are made first and filled as the rows go in: those whose keys
    come in order or from a few values, cheaper so than one more read of the table; so
    are the ``PATH_LED`` ones while the rows come in path order (``Load.paths``)."""
    filled = [st for st in statements if st.split()[2] in FILLED_WITH_ROWS | PATH_LED]
    load = Load(conn, [st for st in statements if st not in filled],
                [st for st in filled if st.split()[2] in PATH_LED])
    for statement in statements:
        conn.execute(f"DROP INDEX IF EXISTS {statement.split()[2]}")
    for statement in filled:  # on the emptied tables: made at once
        conn.execute(statement)
    fts_settings(conn, LOAD_FTS_HASH, 0)  # a load that fails is rolled back with the settings
    with load_cache(conn):
        yield load
        for statement in load.after:
            conn.execute(statement)
    fts_settings(conn, FTS_HASH, FTS_AUTOMERGE)


def merge_due(conn: sqlite3.Connection, inserted: int, most: int) -> bool:
    """Whether a transaction that added ``inserted`` rows ends by merging the full-text
    index (``Index._merge_segments``): ``most`` rows or more, or at least
    ``MERGE_LEAST`` that are a ``MERGE_SHARE`` of the index's rows. A reconcile writes
    a segment or two for each changed file (100 changed files of 10,000: 200 segment
    writes, 22 segments left as FTS5's automerge goes, and recall ~1.5x slower until it
    catches up); merging costs about 3 us a row (30 ms of CPU at 10,000), less than
    folding in a 200th of them did."""
    if inserted >= most:
        return True
    if inserted < MERGE_LEAST:
        return False
    total = conn.execute("SELECT memories FROM counts").fetchone()[0]
    return bool(inserted >= total * MERGE_SHARE)


def fts_settings(conn: sqlite3.Connection, hashsize: int, automerge: int, table: str = "fts") -> None:
    """How many bytes of postings the full-text index (``table``) buffers before it writes a
    segment (FTS5's ``hashsize``; each commit writes them anyway) and how many segments
    of a size it merges as it goes (``automerge``), both kept in its config table."""
    conn.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('hashsize', ?)", (hashsize,))
    conn.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('automerge', ?)", (automerge,))


@contextmanager
def load_cache(conn: sqlite3.Connection) -> Iterator[None]:
    """``conn``'s page cache at ``LOAD_CACHE_KIB`` for one load, then as it was."""
    cache = conn.execute("PRAGMA cache_size").fetchone()[0]
    conn.execute(f"PRAGMA cache_size = {-LOAD_CACHE_KIB}")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA cache_size = {int(cache)}")


@contextmanager
def sorted_in(conn: sqlite3.Connection, table: str, key: str) -> Iterator[str]:
    """The name of a temporary table to load ``table``'s rows into (its columns ``key``,
    which is its primary key, a ``WITHOUT ROWID`` table's), inside the caller's
    transaction; once the load is in they go into ``table`` sorted by that key (a
    duplicate ignored, as ``INSERT OR IGNORE`` did), each one appended. Inserted as
    they came, each went to a random place in the table: past the page cache (a
    million memories' names) nearly every row read a page back and wrote one out."""
    staged = f"temp.{table}_load"
    conn.execute(f"DROP TABLE IF EXISTS {staged}")
    conn.execute(f"CREATE TABLE {staged} ({key})")
    yield staged
    conn.execute(f"INSERT OR IGNORE INTO {table} ({key}) SELECT {key} FROM {staged} ORDER BY {key}")
    conn.execute(f"DROP TABLE {staged}")


@contextmanager
def step(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction of a fresh load, rolled back if it fails."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # also when COMMIT itself failed (a full disk)
            conn.execute("ROLLBACK")
        raise


def fresh_load(conn: sqlite3.Connection, script: str, rows: Iterable[tuple[Any, Any]], insert: Callable[..., None],
               batch: int) -> int:
    """Rebuild an index that holds no rows (its first build, a deleted ``.index/``) from
    ``rows``, numbered from 1: loaded into tables of their own (``FRESH``), ``STEP_ROWS``
    a committed transaction, then swapped in for the live ones, empty until then, in one
    last transaction that builds their indexes (``swap_in``). ``insert(conn, rows, {},
    names, suffix)`` puts a batch into the tables named with ``suffix``, names into
    ``names`` (``Index._insert``). Why: in one transaction on the WAL-mode file every page of a million
    memories stays in the WAL until it commits, and SQLite finds each page it reads
    there by scanning the WAL's hash blocks, ten times as many at a million as at
    100,000; committed in steps, each is checkpointed into the file as it goes. Safe:
    a reader sees the live tables, empty, until the swap commits, then the whole index;
    a crash leaves them empty (the next open drops the fresh tables, ``Core._drop_left``, and rebuilds)."""
    with step(conn):
        drop_fresh(conn)  # a killed build's, committed before it died
        for statement in fresh_schema(script):
            conn.execute(statement)
        fts_settings(conn, LOAD_FTS_HASH, 0, f"fts{FRESH}")
    count, pending = 0, []
    with load_cache(conn):
        conn.execute("BEGIN IMMEDIATE")
        try:
            with sorted_in(conn, f"names{FRESH}", "key, rid") as names:
                for count, row in enumerate(rows, 1):
                    pending.append((count, *row))
                    if len(pending) >= batch:
                        insert(conn, pending, {}, names, FRESH)
                        pending = []
                    if count % STEP_ROWS == 0:  # each step checkpointed once committed (SQLite's autocheckpoint)
                        conn.execute("COMMIT")
                        conn.execute("BEGIN IMMEDIATE")
                insert(conn, pending, {}, names, FRESH)
            conn.execute("COMMIT")  # the names, sorted, with the last rows
        except BaseException:
            if conn.in_transaction:  # also when COMMIT itself failed (a full disk)
                conn.execute("ROLLBACK")
            conn.execute(f"DROP TABLE IF EXISTS temp.names{FRESH}_load")  # made in a step committed before
            raise
        with step(conn):
            swap_in(conn, script, count)
    return count


def drop_fresh(conn: sqlite3.Connection) -> None:
    """Drop the tables a fresh load fills (``FRESH``), in the caller's transaction: what a
    killed one left (the next build's first step, a rebuild, or an open, ``mend.drop_left``)."""
    for table in LOADED:
        conn.execute(f"DROP TABLE IF EXISTS {table}{FRESH}")


def fresh_schema(script: str) -> list[str]:
    """The statements that make the tables a rebuild loads (``LOADED``) under the names a
    fresh load fills (``FRESH``), with the full-text index's settings and no index: those
    are built by ``swap_in``, under their own names, once the tables have the live names."""
    out = []
    for statement in statements(script):
        words = statement.split()
        name = words[3] if words[:3] == ["CREATE", "VIRTUAL", "TABLE"] else words[2]
        if words[0] == "CREATE" and words[1] != "INDEX" and name in LOADED:
            out.append(statement.replace(f" {name} ", f" {name}{FRESH} ", 1))
        elif words[:3] == ["INSERT", "INTO", "fts(fts,"]:
            out.append(statement.replace("fts(fts,", f"fts{FRESH}(fts{FRESH},", 1))
    return out


def swap_in(conn: sqlite3.Connection, script: str, count: int) -> None:
    """A fresh load's last transaction: the live tables (empty) dropped and the fresh ones
    given their names, their indexes built from the schema (the table is in the file by
    now, not in the WAL), the derived tables emptied (a reader finds them unbuilt), the
    full-text settings and the count of rows set."""
    conn.execute("INSERT INTO words (words) VALUES ('delete-all')")
    for table in EMPTIED:
        conn.execute(f"DELETE FROM {table}")
    for table in LOADED[::-1]:  # the full-text index before the table it reads
        conn.execute(f"DROP TABLE {table}")
    for table in LOADED:
        conn.execute(f"ALTER TABLE {table}{FRESH} RENAME TO {table}")
    for statement in index_statements(script, LOADED):
        conn.execute(statement)
    fts_settings(conn, FTS_HASH, FTS_AUTOMERGE)
    conn.execute("UPDATE counts SET memories = ?", (count,))


def index_statements(script: str, tables: Sequence[str] | None = None) -> list[str]:
    """The schema's ``CREATE INDEX`` statements (each names its index third, then its
    table fifth), of every table or of ``tables``."""
    return [st for st in statements(script) if st.split()[:2] == ["CREATE", "INDEX"]
            and (tables is None or st.split()[4].split("(")[0] in tables)]


def statements(script: str) -> list[str]:
    """A schema script split into its statements, to run inside a transaction of ours
    (``executescript`` would commit it)."""
    out, current = [], []
    for line in script.strip().splitlines():
        current.append(line.split("--", 1)[0] if "--" in line else line)
        joined = "\n".join(current)
        if joined.rstrip().endswith(";") and sqlite3.complete_statement(joined):
            out.append(joined)
            current = []
    return out
