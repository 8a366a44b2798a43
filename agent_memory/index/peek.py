"""Reading an index without changing it, for ``doctor``: what it holds, as another
process left it (no schema made, nothing mended, no -wal or -shm file created)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..recall.choice import Holdings
from .db import DB_NAME, SCHEMA_VERSION
from .facts import FileFacts


def peek_choice(folder: Path) -> tuple[Holdings, str | None] | None:
    """Read what ``recall.choice`` needs without changing the index (for
    ``doctor``): the memories of each kind and the profile recorded before; None
    when there is no index of this schema."""
    conn = _read_only(folder)
    if conn is None:
        return None
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            return None
        counts = dict(conn.execute("SELECT shape, count(*) FROM memories GROUP BY shape").fetchall())
        recorded = conn.execute("SELECT value FROM choices WHERE name = 'profile'").fetchone()
        held = Holdings(facts=counts.get(0, 0), notes=counts.get(1, 0), turns=counts.get(2, 0))
        return held, (str(recorded[0]) if recorded else None)
    finally:
        conn.close()


def peek(folder: Path) -> tuple[int, dict[str, FileFacts]] | None:
    """Read an index without changing it (for ``doctor``): schema version and facts."""
    conn = _read_only(folder)
    if conn is None:
        return None
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            return version, {}
        rows = conn.execute("SELECT path, size, mtime_ns, ctime_ns, inode, sha256 FROM memories").fetchall()
        return version, {r[0]: FileFacts(*r[1:]) for r in rows}
    finally:
        conn.close()


def _read_only(folder: Path) -> sqlite3.Connection | None:
    """The index in ``folder`` opened without changing it (for ``doctor``); None when
    there is none. With no writer active (no -wal file) it is opened immutable, which
    creates no -wal/-shm files; with one, read-only mode sees its uncheckpointed pages."""
    path = folder / DB_NAME
    if not path.exists():
        return None
    live = Path(f"{path}-wal").exists()
    return sqlite3.connect(f"file:{path}?{'mode=ro' if live else 'immutable=1'}", uri=True)
