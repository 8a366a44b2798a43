"""What an open of the index mends in a file that may come from elsewhere (a teammate's
``.index/`` committed to git, a copy a sync tool damaged): the count of memories
(``counts``), recounted when it is not one whole number equal to the rows; and the
tables a killed first build left (``loading.FRESH``), found here and dropped by the vault's
open when no build holds its lock (``Core._drop_left``)."""

from __future__ import annotations

import logging
import sqlite3

from .loading import FRESH, LOADED, step

log = logging.getLogger("agent_memory.index")

# 1 when ``counts`` holds one row, an integer, equal to the rows of memories. The count of
# rows is what every open reads anyway (a file that is no database fails it).
COUNTED = ("SELECT count(*) = 1 AND typeof(max(memories)) = 'integer' AND max(memories) = "
           "(SELECT count(*) FROM memories) FROM counts")
# The fresh tables in the file: one look at the schema (most opens find none).
LEFT = f"SELECT 1 FROM sqlite_master WHERE name IN ({', '.join(repr(table + FRESH) for table in LOADED)}) LIMIT 1"


def mend_count(conn: sqlite3.Connection) -> None:
    """Make ``counts`` hold one row, the number of memories, when it does not (no row,
    two, NULL, text or a wrong number): every command read it as one whole number and
    crashed with a TypeError. Checked in one read, mended in a write transaction that
    checks again (another process may have mended it meanwhile)."""
    if conn.execute(COUNTED).fetchone()[0]:
        return
    with step(conn):
        if not conn.execute(COUNTED).fetchone()[0]:
            log.warning("the index's count of memories was damaged; it was counted again")
            conn.execute("DELETE FROM counts")
            conn.execute("INSERT INTO counts (memories) SELECT count(*) FROM memories")


def fresh_left(conn: sqlite3.Connection) -> bool:
    """Whether the file holds a fresh load's tables: a build under way's (it holds the
    vault's lock) or a killed one's (``loading.drop_fresh`` drops them)."""
    return bool(conn.execute(LEFT).fetchone())

