"""The MCP reference memory server's ``memory.jsonl`` records from notes that are not the
graph's own (pure).

Import writes a graph into the notes ``serve --compat knowledge-graph`` keeps
(``vault.graph_import``), exported exactly as they are; the helpers here give any other
memory as an entity (its first alias or title, its body's items as observations, its
link properties as relations), and an entity's note id (``entity_id``).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from ...note.links import RELATION_NAME
from ...note.parse import RESERVED_KEYS

def entity_id(name: str) -> str:
    """An entity's id: its name is its key in the graph."""
    return "kg-" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]


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
