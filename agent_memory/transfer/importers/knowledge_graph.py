"""The MCP reference memory server's ``memory.jsonl``: entities and relations, in and out (pure).

In: one note per entity (``knowledge_graph``). Out: the same records from notes
(``records``), so that import then export gives the same entities and relations.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any

from ...note.links import RELATION_NAME
from ...note.parse import RESERVED_KEYS
from ...errors import InvalidInput
from ._source import read_text

# Characters Obsidian refuses in a note name, or that would end or split a [[wikilink]].
_NOT_IN_NAME = re.compile(r'[\\/#|\[\]^:*?"<>\x00-\x1f\x7f]+')
_NAME_LENGTH = 100
_NAME_BYTES = 200  # room for " 2" and ".md" under a file system's 255 bytes


def knowledge_graph(source: Any) -> list[dict[str, Any]]:
    """One note per entity, named after it (a clean file name, unique without regard to
    case; the original name in ``aliases`` and as the first-line heading, which titles
    it), its observations as a list in the body, ``entityType`` as ``type``, and each
    relation as a wikilink property of its ``from`` entity (``works_at: ["[[Acme]]"]``).
    A relation type that is not already a property name is made one, and the original
    is kept in ``relation_types`` so that it can be given back."""
    text = read_text(source, "JSON lines")
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
            entity["recorded"] = True
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
    outgoing: dict[str, list[tuple[str, str]]] = {}
    for source_name, kind, target in relations:
        outgoing.setdefault(source_name, []).append((kind, target))
    items = []
    for name, entity in entities.items():
        links: dict[str, list[dict[str, str]]] = {}
        originals: dict[str, str] = {}
        for kind, target in outgoing.get(name, []):
            prop = relation_property(kind)
            if prop != kind:
                originals[prop] = kind
            # by id: the target's note wherever it is (this batch, or one imported before)
            to = {"id": entity_id(target), "name": files.get(target) or _clean(target)}
            if to not in links.setdefault(prop, []):
                links[prop].append(to)
        item: dict[str, Any] = {
            "id": entity_id(name),
            "path": files[name] + ".md",
            "content": _entity_body(name, entity["observations"]),
            "aliases": [name],
            "type": entity["type"],
            "links": links,
            "unique_by": "id",  # two entities may hold the same observations
        }
        if not entity.get("recorded"):  # named by a relation only: where its note exists, it only gains links
            item["placeholder"] = True
        if originals:
            item["relation_types"] = originals
        items.append(item)
    return items


def entity_id(name: str) -> str:
    """An entity's id: its name is its key in the graph."""
    return "kg-" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]


def _jsonl(text: str, where: str) -> list[Any]:
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"{where} line {number} is not JSON ({exc.msg}); nothing was imported.") from exc
            except RecursionError:
                raise InvalidInput(f"{where} line {number} nests lists or objects too deeply to read; nothing was "
                                   "imported.") from None
    return records


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{what} must be a non-empty name; nothing was imported.")
    return value.strip()


def _clean(name: str) -> str:
    """A file name for ``name``: what Obsidian or a wikilink cannot hold becomes '-'; at
    most ``_NAME_LENGTH`` characters and ``_NAME_BYTES`` bytes (100 CJK characters are 300)."""
    clean = " ".join(_NOT_IN_NAME.sub("-", name).split()).strip(" .-")[:_NAME_LENGTH]
    clean = clean.encode("utf-8")[:_NAME_BYTES].decode("utf-8", "ignore").strip(" .-")
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
    if RELATION_NAME.fullmatch(kind) and kind not in RESERVED_KEYS:
        return kind
    prop = re.sub(r"[^A-Za-z0-9_-]+", "_", kind).strip("_") or "related_to"
    if not prop[0].isalpha():
        prop = "rel_" + prop
    prop = prop[:64]
    return prop + "_" if prop in RESERVED_KEYS else prop


def _entity_body(name: str, observations: list[str]) -> str:
    lines = [f"# {' '.join(name.split())}", ""]
    lines += ["- " + "\n  ".join(o.strip().splitlines() or [""]) for o in observations]
    return "\n".join(lines).rstrip("\n") + "\n"


# --- out: notes -> memory.jsonl records -------------------------------------------------

_ITEM = re.compile(r"[-*+] (.*)|[-*+]$")


def entity_name(aliases: list[str], title: str) -> str:
    """The name an entity had (its first alias, where import keeps it), else the title."""
    return next((a.strip() for a in aliases if a.strip()), "") or title


def observations(body: str, name: str) -> list[str]:
    """A body as observations, the way import writes them: a first-line heading that is
    the name is dropped, each list item (continued by indented lines) is one, and any
    other paragraph is one."""
    lines = body.replace("\r\n", "\n").split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    if lines and lines[0].strip() == f"# {' '.join(name.split())}":
        lines.pop(0)
    out: list[str] = []
    current: list[str] | None = None  # the observation being read
    in_item = False
    for line in lines:
        item = _ITEM.fullmatch(line.rstrip())
        if item is not None:
            current = [item[1] or ""]
            out.append("")
            in_item = True
        elif not line.strip():
            current, in_item = None, False
            continue
        elif in_item and line.startswith("  ") and current is not None:
            current.append(line[2:].rstrip())
        elif current is not None and not in_item:
            current.append(line.rstrip())
        else:
            current, in_item = [line.rstrip()], False
            out.append("")
        out[-1] = "\n".join(current)
    return out


def relation_type(prop: str, originals: Any) -> str:
    """A link property's relation type in the source (``relation_types`` keeps those
    that are not property names already)."""
    if isinstance(originals, dict) and isinstance(originals.get(prop), str) and originals[prop].strip():
        return str(originals[prop])
    return prop


def records(entities: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """memory.jsonl records: every entity first, then every relation, as the reference
    server writes them. ``entities``: ``{name, type, observations, relations: [(type, to)]}``."""
    out: list[dict[str, Any]] = []
    for entity in entities:
        out.append({"type": "entity", "name": entity["name"], "entityType": entity["type"],
                    "observations": entity["observations"]})
    for entity in entities:
        for kind, to in entity["relations"]:
            out.append({"type": "relation", "from": entity["name"], "to": to, "relationType": kind})
    return out
