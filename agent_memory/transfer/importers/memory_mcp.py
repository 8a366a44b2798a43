"""memory-mcp (j0hanz): SHA-256-addressed memories with tags, a type, an importance, and
a directed relationship graph; as its tools return them (JSON) or its SQLite file (pure).

Its SQLite schema, as assumed here: ``memories(hash TEXT PRIMARY KEY, content, tags``
(a JSON array as text)``, memory_type, importance, created_at, updated_at)`` and
``relationships(from_hash, to_hash, relation_type, created_at)``. Only ``hash`` and
``content`` are required; the other columns are read when they are there.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import urllib.parse
from typing import Any

from ...errors import InvalidInput
from ._source import read_json
from .knowledge_graph import relation_property

_SQLITE_HEADER = b"SQLite format 3\x00"
_COLUMNS = ("hash", "content", "tags", "memory_type", "importance", "created_at", "updated_at")


def memory_id(hash_: str) -> str:
    """Our id of a memory-mcp memory: its hash is its key (a relation names it by hash)."""
    return "mm-" + hash_[:16]


def memory_mcp(source: Any) -> list[dict[str, Any]]:
    """Each memory with its content, tags, ``memory_type`` as ``type``, ``importance``,
    ``created_at`` and ``updated_at``; each relationship as a link property of its
    ``from`` memory (``depends_on: ["[[...]]"]``), resolved by hash in this batch or among
    memories imported before. Accepts its SQLite file, or JSON: a list of memories (as
    ``search_memories``/``recall`` return them) and relationships (``from_hash``,
    ``to_hash``, ``relation_type``), or an object with ``memories`` and
    ``relationships`` (or recall's ``graph``). A relationship whose ``from`` memory is not
    in the batch is added to that memory if it is already in the vault."""
    if isinstance(source, os.PathLike) and _is_sqlite(source):
        memories, edges = _from_sqlite(source)
    else:
        memories, edges = _split(read_json(source))
    items: dict[str, dict[str, Any]] = {}
    for n, memory in enumerate(memories):
        where = f"Memory {n + 1}"
        if not isinstance(memory, dict):
            raise InvalidInput(f"{where} is not an object; nothing was imported.")
        content = memory.get("content")
        tags = memory.get("tags") or []
        if isinstance(tags, str):
            tags = _tags_text(tags)
        key = memory.get("hash")
        if key in (None, ""):  # a hand-made item: hashed as memory-mcp hashes, content and sorted tags
            key = hashlib.sha256(json.dumps([content, sorted(map(str, tags))]).encode("utf-8")).hexdigest()
        if not isinstance(key, str):
            raise InvalidInput(f"{where}: hash must be text; nothing was imported.")
        edges += [e for e in memory.get("relationships") or [] if isinstance(e, dict)]
        items[key] = {
            "id": memory_id(key),
            "content": content,
            "tags": tags,
            "type": memory.get("memory_type", memory.get("type")),
            "importance": memory.get("importance"),
            "created": memory.get("created_at"),
            "updated": memory.get("updated_at"),
            "links": {},
        }
    for n, edge in enumerate(edges):
        fields = edge if isinstance(edge, dict) else {}
        start, end, kind = fields.get("from_hash"), fields.get("to_hash"), fields.get("relation_type")
        if not (isinstance(start, str) and start and isinstance(end, str) and end and isinstance(kind, str)
                and kind.strip()):
            raise InvalidInput(f"Relationship {n + 1} needs from_hash, to_hash and relation_type; nothing was imported.")
        source_item = items.get(start)
        if source_item is None:  # its memory came in an earlier batch: the link is added there
            source_item = items[start] = {"id": memory_id(start), "links": {}, "placeholder": True}
        prop = relation_property(kind.strip())
        if prop != kind.strip():
            source_item.setdefault("relation_types", {})[prop] = kind.strip()
        target = {"id": memory_id(end)}
        if target not in source_item["links"].setdefault(prop, []):
            source_item["links"][prop].append(target)
    return list(items.values())


def _split(data: Any) -> tuple[list[Any], list[Any]]:
    """(memories, relationships) from what its tools return, as a list or an object."""
    if isinstance(data, dict) and "content" in data:
        return [data], []
    if isinstance(data, dict):
        memories = data.get("memories", data.get("items", []))
        edges = data.get("relationships", data.get("graph", []))
        if isinstance(memories, list) and isinstance(edges, list):
            return list(memories), list(edges)
    elif isinstance(data, list):
        return ([r for r in data if not (isinstance(r, dict) and "from_hash" in r)],
                [r for r in data if isinstance(r, dict) and "from_hash" in r])
    raise InvalidInput("A memory-mcp import is a list of its memories and relationships (as its tools return "
                       "them), an object with memories and relationships, or its SQLite file; nothing was imported.")


def _is_sqlite(path: os.PathLike[str]) -> bool:
    """Whether a regular file starts as SQLite's do (a pipe, like standard input, is JSON:
    reading its first bytes here would take them from the JSON reader)."""
    if not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as handle:
            return handle.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER
    except OSError:
        return False


def _from_sqlite(path: os.PathLike[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Its memories (by rowid, the order they were stored) and relationships, read only."""
    uri = "file:" + urllib.parse.quote(os.path.abspath(os.fspath(path))) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise InvalidInput(f"Cannot open {os.fspath(path)}: {exc}; nothing was imported.") from exc
    try:
        conn.row_factory = sqlite3.Row
        present = {row["name"] for row in conn.execute("PRAGMA table_info(memories)")}
        if not {"hash", "content"} <= present:
            raise InvalidInput(f"{os.fspath(path)} is not a memory-mcp database (no memories table with hash and "
                               "content); nothing was imported.")
        columns = [c for c in _COLUMNS if c in present]
        memories = [dict(row) for row in conn.execute(f"SELECT {', '.join(columns)} FROM memories ORDER BY rowid")]
        for memory in memories:
            if isinstance(memory.get("tags"), str):
                memory["tags"] = _tags_text(memory["tags"])
        edges: list[dict[str, Any]] = []
        if {"from_hash", "to_hash", "relation_type"} <= {r["name"] for r in conn.execute("PRAGMA table_info(relationships)")}:
            edges = [dict(row) for row in conn.execute(
                "SELECT from_hash, to_hash, relation_type FROM relationships ORDER BY rowid")]
    except sqlite3.Error as exc:
        raise InvalidInput(f"Cannot read {os.fspath(path)} as a memory-mcp database: {exc}; "
                           "nothing was imported.") from exc
    finally:
        conn.close()
    return memories, edges


def _tags_text(text: str) -> list[str]:
    """Tags stored as text: a JSON array (memory-mcp's column), else comma-separated."""
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, list):
        return [str(t) for t in parsed]
    return [t.strip() for t in text.split(",") if t.strip()]
