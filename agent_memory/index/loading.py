"""Loading many rows at once into the index: a rebuild's every row, an import's
thousands. Secondary indexes are made after the rows, and the page cache is made
roomy for the load only (``Index.replace_all``, ``Index.roomy_cache``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

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


def fts_settings(conn: sqlite3.Connection, hashsize: int, automerge: int) -> None:
    """How many bytes of postings the full-text index (``fts``) buffers before it writes a
    segment (FTS5's ``hashsize``; each commit writes them anyway) and how many segments
    of a size it merges as it goes (``automerge``), both kept in its config table."""
    conn.execute("INSERT INTO fts (fts, rank) VALUES ('hashsize', ?)", (hashsize,))
    conn.execute("INSERT INTO fts (fts, rank) VALUES ('automerge', ?)", (automerge,))


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
