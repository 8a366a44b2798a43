"""Loading many rows at once into the index: a rebuild's every row, an import's
thousands. Secondary indexes are made after the rows, and the page cache is made
roomy for the load only (``Index.replace_all``, ``Index.roomy_cache``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

LOAD_CACHE_KIB = 32 * 1024  # SQLite's page cache while a load goes in


@contextmanager
def bulk_load(conn: sqlite3.Connection, statements: list[str]) -> Iterator[None]:
    """Rows loaded into empty tables inside the caller's transaction, their secondary
    indexes (``statements``: ``CREATE INDEX``, each naming its index third) built after
    the rows, by sorting, rather than one random B-tree insert a row each (which a
    million rows make seek and spill); from the module's schema, never from what the
    file says they are. The page cache is big enough that the load does not write
    pages out and read them back over and over (SQLite's default is 2 MB)."""
    for statement in statements:
        conn.execute(f"DROP INDEX IF EXISTS {statement.split()[2]}")
    with load_cache(conn):
        yield
        for statement in statements:
            conn.execute(statement)


@contextmanager
def load_cache(conn: sqlite3.Connection) -> Iterator[None]:
    """``conn``'s page cache at ``LOAD_CACHE_KIB`` for one load, then as it was."""
    cache = conn.execute("PRAGMA cache_size").fetchone()[0]
    conn.execute(f"PRAGMA cache_size = {-LOAD_CACHE_KIB}")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA cache_size = {int(cache)}")
