"""Integer ids for the seeds whose ids are numbers (mcp-memory-vault, AgentMemory): a
memory gets the next number the first time a compat tool shows it and keeps it. The
numbers live in a table of the vault's index database, beside the index (never in a
person's file); numbers are never reused.
"""

from __future__ import annotations

from ...errors import InvalidInput
from ...vault.vault import Vault

_NUMBERS = "CREATE TABLE IF NOT EXISTS numbers (n INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL)"


def number(vault: Vault, memory_id: str) -> int:
    """The integer id of a memory (given one the first time it is asked for)."""
    index = vault.core.index
    with index.transaction() as conn:
        conn.execute(_NUMBERS)
        row = conn.execute("SELECT n FROM numbers WHERE id = ?", (memory_id,)).fetchone()
        if row is None:  # numbers are never reused: AUTOINCREMENT
            return int(conn.execute("INSERT INTO numbers (id) VALUES (?) RETURNING n", (memory_id,)).fetchone()[0])
        return int(row[0])


def id_of(vault: Vault, n: int, not_found: str) -> str:
    """The memory an integer id stands for; ``not_found`` (``{n}`` filled in) when none."""
    with vault.core.index.transaction() as conn:
        conn.execute(_NUMBERS)
        row = conn.execute("SELECT id FROM numbers WHERE n = ?", (n,)).fetchone()
    if row is None:
        raise InvalidInput(not_found.format(n=n))
    return str(row[0])
