"""What recall fetches from the index and scores: frozen records, no database handles."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .terms import Term


@dataclass(frozen=True)
class TermMatch:
    """A term's document frequency in the whole index (estimated when common), and the
    memories within the filters it matches (None when common: too many to read)."""

    term: Term
    df: float
    rids: set[int] | None


@dataclass(frozen=True)
class MemoryRecord:
    """One memory's row as recall reads it: the fields ranking uses, and every column
    of the row (``record["title"]``), so the vault summarises a record as it does a row."""

    rid: int
    id: str
    path: str
    namespace: str
    body: str  # the indexed part of the body (all of it below limits.MAX_INDEXED_BODY)
    created: str
    updated: str
    meta: Mapping[str, Any]  # the front matter
    columns: Mapping[str, Any] = field(repr=False, compare=False)

    def __getitem__(self, key: str) -> Any:
        return self.columns[key]

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> MemoryRecord:
        # A sqlite3.Row iterates its values and finds a name by a case-blind scan of its
        # 35 columns: zipped with its keys, a page of ten rows is read in 40% less time.
        columns = dict(zip(row.keys(), row)) if isinstance(row, sqlite3.Row) else dict(row)
        try:
            meta = json.loads(columns.get("meta") or "{}")
        except ValueError:
            meta = {}
        return cls(
            rid=columns["rid"], id=columns["id"], path=columns["path"], namespace=columns["namespace"],
            body=columns["body"], created=columns["created"], updated=columns["updated"],
            meta=meta if isinstance(meta, dict) else {}, columns=columns,
        )


@dataclass(frozen=True)
class Neighbours:
    """The memories written just after (+1, +2) and before (-1, -2) a source memory in
    its namespace, within the context window; None where there is none."""

    rid: int
    around: Mapping[int, int | None]
