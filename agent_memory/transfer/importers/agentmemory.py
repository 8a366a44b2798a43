"""AgentMemory: a ``.memory/`` folder of dated bodies plus its ``memories.db`` (pure).

Its schema, from its README: ``memories(id INTEGER PK, file_path TEXT UNIQUE, summary,
created_at DEFAULT CURRENT_TIMESTAMP)`` and ``keywords(memory_id, keyword)``; each body
is a file ``.memory/YYYY/MM/DD/<slug>.md`` (``file_path`` is read as absolute, or
relative to the folder, its parent or the working folder; failing those, by its dated
tail under the folder). The database sits beside the folder by default.
"""

from __future__ import annotations

import os
import re
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any

from ...note import parse
from ...note.tags import normalise_tag
from ...errors import InvalidInput
from ...disk.layout import derived_id
from ._source import millis

DATABASE = "memories.db"
FOLDER = ".memory"
_DATED_TAIL = re.compile(r"(?:^|/)(\d{4}/\d{2}/\d{2}/[^/]+)$")


def agentmemory(source: Any) -> list[dict[str, Any]]:
    """One memory per row: the file's body as it is, ``summary`` as its title,
    ``keywords`` as tags, ``created_at`` as created (and updated: AgentMemory keeps no
    update time). Ids are dated by ``created_at`` and keyed by the row id. Each item's
    ``origin`` is its file: when that file is in the vault, it is adopted in place.

    ``source`` is the ``.memory`` folder (its ``memories.db`` inside it or beside it) or
    the ``memories.db`` (its folder ``.memory`` beside it)."""
    if not isinstance(source, os.PathLike):
        raise InvalidInput("An agentmemory import is a folder (.memory/, with memories.db beside it) or its "
                           "memories.db, given as a path (agent-memory import --from agentmemory PATH).")
    folder, database = _locate(Path(source))
    rows, keywords = _read_database(database)
    items = []
    for row in rows:
        where = f"Memory {row['id']} of {database}"
        file = _body_file(row["file_path"], folder, database)
        if file is None:
            raise InvalidInput(f"{where}: its file {row['file_path']!r} is not in {folder}; put it back or delete "
                               "the row, then import again. Nothing was imported.")
        created = row["created_at"]
        memory_id = derived_id(millis(created, f"{where}: created_at"), f"agentmemory:{row['id']}")
        try:
            data = file.read_bytes()
            text = data.decode("utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"{where}: cannot read {file} as text ({exc}); nothing was imported.") from exc
        # Front matter an earlier import added is known by the id it wrote; a body that merely
        # starts with '---' (a YAML document the agent stored) is the memory's text, kept whole.
        parsed = parse.parse(data, file.name) if text.startswith("---") else None
        adopted = parsed is not None and not parsed.unreadable and parsed.own_id and parsed.id == memory_id
        body = parsed.body if adopted and parsed is not None else text
        if parsed is not None and not adopted and parsed.meta:
            raise InvalidInput(f"{where}: {file} starts with front matter this import did not write (no id "
                               f"{memory_id}); adopting it would rewrite those lines. Move the text below a first "
                               "line of its own, or give it that id, then import again. Nothing was imported.")
        items.append({
            "id": memory_id,
            "content": body,
            "title": (row["summary"] or "").strip() or None,
            "tags": [normalise_tag(k) for k in keywords.get(row["id"], []) if k and k.strip()],
            "created": created,
            "updated": created,
            "path": file.relative_to(folder).as_posix(),
            "origin": str(file),
            "unique_by": "id",  # a file is a memory: two with the same text stay two
        })
    return items


def _locate(path: Path) -> tuple[Path, Path]:
    """(the folder of bodies, the database) from either of them."""
    if path.is_dir():
        for database in (path / DATABASE, path.parent / DATABASE):
            if database.is_file():
                return path.resolve(), database
        raise InvalidInput(f"No {DATABASE} in {path} or beside it; give the path of AgentMemory's database "
                           "(agent-memory import --from agentmemory path/to/memories.db).")
    if path.is_file():
        folder = path.parent / FOLDER
        if not folder.is_dir():
            raise InvalidInput(f"No {FOLDER}/ folder beside {path}; give the folder of its files instead.")
        return folder.resolve(), path
    raise InvalidInput(f"{path} does not exist; give AgentMemory's .memory/ folder or its memories.db.")


def _read_database(database: Path) -> tuple[list[sqlite3.Row], dict[int, list[str]]]:
    uri = "file:" + urllib.parse.quote(str(database.resolve())) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
        conn.row_factory = sqlite3.Row
        try:
            rows = conn.execute("SELECT id, file_path, summary, created_at FROM memories ORDER BY id").fetchall()
            keywords: dict[int, list[str]] = {}
            for memory_id, keyword in conn.execute("SELECT memory_id, keyword FROM keywords ORDER BY memory_id, rowid"):
                keywords.setdefault(memory_id, []).append(str(keyword))
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise InvalidInput(f"{database} is not AgentMemory's database (memories and keywords tables): {exc}; "
                           "nothing was imported.") from exc
    return rows, keywords


def _body_file(file_path: Any, folder: Path, database: Path) -> Path | None:
    """Where a row's body is now: as written, else under the folder by its dated tail."""
    if not isinstance(file_path, str) or not file_path.strip():
        return None
    written = Path(file_path)
    candidates = [written] if written.is_absolute() else [folder / written, folder.parent / written,
                                                           database.parent / written, Path.cwd() / written]
    tail = _DATED_TAIL.search(file_path.replace("\\", "/"))
    if tail:
        candidates.append(folder / tail[1])
    for candidate in candidates:
        try:
            resolved = candidate.resolve()
        except OSError:
            continue
        if resolved.is_file() and folder in resolved.parents:
            return resolved
    return None
