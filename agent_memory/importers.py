"""Other memory servers' files -> import items (pure).

``FORMATS`` maps a format name to a function taking a path (the file as that server
writes it) or the data already parsed (what an MCP caller sends), and returning import
items in the shape ``Vault.import_memories`` takes (``{content, namespace, tags, title,
source, created, updated, expires, id, path, aliases, type, importance, links}``; see
``transfer.new_fields``). ``agent-memory import --from FORMAT PATH`` and
``import_memories(format=...)`` share them; our own export needs none.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
from collections.abc import Callable
from typing import Any

from . import note as notes
from .errors import InvalidInput
from .store import derived_id

Importer = Callable[[Any], list[dict[str, Any]]]


def _read(source: Any, what: str) -> str | None:
    """The text of ``source`` when it is a path, else None (it is parsed data)."""
    if not isinstance(source, os.PathLike):
        return None
    try:
        with open(source, encoding="utf-8-sig") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"Cannot read {os.fspath(source)} as {what}: {exc}; nothing was imported.") from exc


# --- mcp-knowledge-graph: the MCP reference memory server's memory.jsonl -------------

# Characters Obsidian refuses in a note name, or that would end or split a [[wikilink]].
_NOT_IN_NAME = re.compile(r'[\\/#|\[\]^:*?"<>\x00-\x1f\x7f]+')
_NAME_LENGTH = 100


def knowledge_graph(source: Any) -> list[dict[str, Any]]:
    """One note per entity, named after it (a clean file name, unique without regard to
    case; the original name in ``aliases`` and as the first-line heading, which titles
    it), its observations as a list in the body, ``entityType`` as ``type``, and each
    relation as a wikilink property of its ``from`` entity (``works_at: ["[[Acme]]"]``).
    A relation type that is not already a property name is made one, and the original
    is kept in ``relation_types`` so that it can be given back."""
    text = _read(source, "JSON lines")
    records = _jsonl(text, os.fspath(source)) if text is not None else source
    if not isinstance(records, list):
        raise InvalidInput("An mcp-knowledge-graph import is the list of memory.jsonl records "
                           "({type: entity|relation, ...}); nothing was imported.")
    entities: dict[str, dict[str, Any]] = {}
    relations: list[tuple[str, str, str]] = []
    for n, record in enumerate(records):
        where = f"Record {n + 1}"
        if not isinstance(record, dict) or record.get("type") not in ("entity", "relation"):
            raise InvalidInput(f"{where} is not an entity or a relation ({{\"type\": \"entity\", ...}}); "
                               "nothing was imported.")
        if record["type"] == "entity":
            name = _name(record.get("name"), f"{where}: name")
            observations = record.get("observations") or []
            if not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
                raise InvalidInput(f"{where}: observations must be a list of text; nothing was imported.")
            entity = entities.setdefault(name, {"type": None, "observations": []})
            kind = record.get("entityType")
            if kind not in (None, ""):
                if not isinstance(kind, str):
                    raise InvalidInput(f"{where}: entityType must be text; nothing was imported.")
                entity["type"] = kind.strip() or None
            entity["observations"] += [o for o in observations if o not in entity["observations"]]
        else:
            ends = [_name(record.get(key), f"{where}: {key}") for key in ("from", "to")]
            kind = record.get("relationType")
            if not isinstance(kind, str) or not kind.strip():
                raise InvalidInput(f"{where}: relationType must be text; nothing was imported.")
            relations.append((ends[0], kind.strip(), ends[1]))
            entities.setdefault(ends[0], {"type": None, "observations": []})  # a link needs a note to live in
    files = note_names(list(entities))
    items = []
    for name, entity in entities.items():
        links: dict[str, list[str]] = {}
        originals: dict[str, str] = {}
        for source_name, kind, target in relations:
            if source_name != name:
                continue
            prop = relation_property(kind)
            if prop != kind:
                originals[prop] = kind
            to = files.get(target) or _clean(target)
            if to not in links.setdefault(prop, []):
                links[prop].append(to)
        item: dict[str, Any] = {
            "id": "kg-" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:16],
            "path": files[name] + ".md",
            "content": _entity_body(name, entity["observations"]),
            "aliases": [name],
            "type": entity["type"],
            "links": links,
            "unique_by": "id",  # two entities may hold the same observations
        }
        if originals:
            item["relation_types"] = originals
        items.append(item)
    return items


def _jsonl(text: str, where: str) -> list[Any]:
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"{where} line {number} is not JSON ({exc.msg}); nothing was imported.") from exc
    return records


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{what} must be a non-empty name; nothing was imported.")
    return value.strip()


def _clean(name: str) -> str:
    """A file name for ``name``: what Obsidian or a wikilink cannot hold becomes '-'."""
    clean = " ".join(_NOT_IN_NAME.sub("-", name).split()).strip(" .-")[:_NAME_LENGTH].strip(" .-")
    return clean or "entity"


def note_names(names: list[str]) -> dict[str, str]:
    """Each name's file name (without .md): clean, and unique without regard to case
    (Obsidian on macOS and Windows sees ``Alice.md`` and ``alice.md`` as one file)."""
    taken: set[str] = set()
    out: dict[str, str] = {}
    for name in names:
        base = _clean(name)
        stem, n = base, 1
        while stem.casefold() in taken:
            n += 1
            stem = f"{base} {n}"
        taken.add(stem.casefold())
        out[name] = stem
    return out


def relation_property(kind: str) -> str:
    """A relation type as a front-matter property name (SPEC §5): ``works_at`` stays,
    ``works at`` becomes ``works_at``, ``2nd-cousin`` becomes ``rel_2nd-cousin``."""
    if notes.RELATION_NAME.fullmatch(kind) and kind not in notes.RESERVED_KEYS:
        return kind
    prop = re.sub(r"[^A-Za-z0-9_-]+", "_", kind).strip("_") or "related_to"
    if not prop[0].isalpha():
        prop = "rel_" + prop
    prop = prop[:64]
    return prop + "_" if prop in notes.RESERVED_KEYS else prop


def _entity_body(name: str, observations: list[str]) -> str:
    lines = [f"# {' '.join(name.split())}", ""]
    lines += ["- " + "\n  ".join(o.strip().splitlines() or [""]) for o in observations]
    return "\n".join(lines).rstrip("\n") + "\n"


# --- mcp-memory-vault: its export JSON --------------------------------------------------


def memory_vault(source: Any) -> list[dict[str, Any]]:
    """mcp-memory-vault's ``export`` (an object holding ``memories``, or the bare array):
    content, namespace, tags and source as they were; ``created_at``, ``updated_at`` and
    ``expires_at`` as ``created``, ``updated`` and ``expires`` (an item already expired is
    counted, not imported). Ids are ours, derived from the creation time and the source's
    own id, so importing the export again adds nothing twice and a TTL still applies."""
    text = _read(source, "JSON")
    if text is not None:
        try:
            source = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{os.fspath(source)} is not JSON ({exc.msg} at line {exc.lineno}); nothing was imported.") from exc
    memories = source.get("memories") if isinstance(source, dict) else source
    if not isinstance(memories, list):
        raise InvalidInput("An mcp-memory-vault import is its export: an object with a memories list, or that "
                           "list; nothing was imported.")
    items = []
    for n, memory in enumerate(memories):
        if not isinstance(memory, dict):
            raise InvalidInput(f"Memory {n + 1} is not an object; nothing was imported.")
        item = {key: memory.get(key) for key in ("content", "namespace", "tags", "source")}
        item["namespace"] = item["namespace"] or None
        for ours, theirs in (("created", "created_at"), ("updated", "updated_at"), ("expires", "expires_at")):
            item[ours] = memory.get(theirs)
        if item["created"] not in (None, ""):
            try:
                created = dt.datetime.fromisoformat(notes.to_utc(item["created"]))
            except (TypeError, ValueError) as exc:
                raise InvalidInput(f"Memory {n + 1}: created_at {item['created']!r} is not a time; "
                                   "nothing was imported.") from exc
            key = memory.get("id", memory.get("content"))
            item["id"] = derived_id(int(created.timestamp() * 1000), f"mcp-memory-vault:{item['namespace']}:{key}")
        items.append(item)
    return items


FORMATS: dict[str, Importer] = {
    "mcp-knowledge-graph": knowledge_graph,
    "mcp-memory-vault": memory_vault,
}


def importer(name: str) -> Importer:
    """The importer of format ``name``, or an error listing the formats there are."""
    try:
        return FORMATS[name]
    except KeyError:
        raise InvalidInput(f"Unknown import format {name!r}; use one of {', '.join(FORMATS)} "
                           "(or no format for this tool's own export).") from None
