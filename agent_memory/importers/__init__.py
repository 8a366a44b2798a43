"""Other memory servers' data -> import items, and our memories -> theirs (pure).

``FORMATS`` maps a format name to a function taking a path (the file or folder as that
server writes it) or the data already parsed (what an MCP caller sends), and returning
import items in the shape ``Vault.import_memories`` takes: ``{content, namespace, tags,
title, source, created, updated, expires, id, path, aliases, type, importance, links}``
(see ``transfer.new_fields``), plus:

- ``links``: ``{relation: [target, ...]}``, a target being a note name, or
  ``{"id": ..., "name": ...}``: the memory with that id (in this batch or already in the
  vault, so links resolve across batches), else a note of that name;
- ``relation_types``: ``{relation: name in the source}`` where they differ;
- ``unique_by: "id"``: told apart by id only (two entities may hold the same text);
- ``origin``: the file the body was read from; when that file is a memory of the vault
  itself, it is adopted in place (front matter added, body untouched).

Every id is derived from the source's own key (entity name, hash, row id), so importing
the same source again updates what changed and adds nothing twice.
``agent-memory import --from FORMAT PATH`` and ``import_memories(format=...)`` share them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InvalidInput
from .agentmemory import agentmemory
from .knowledge_graph import knowledge_graph, note_names, relation_property
from .memory_mcp import memory_mcp
from .memory_vault import memory_vault

Importer = Callable[[Any], list[dict[str, Any]]]

FORMATS: dict[str, Importer] = {
    "mcp-knowledge-graph": knowledge_graph,
    "mcp-memory-vault": memory_vault,
    "memory-mcp": memory_mcp,
    "agentmemory": agentmemory,
}

EXPORT_FORMATS = ("mcp-knowledge-graph",)

__all__ = ["EXPORT_FORMATS", "FORMATS", "importer", "note_names", "relation_property"]


def importer(name: str) -> Importer:
    """The importer of format ``name``, or an error listing the formats there are."""
    try:
        return FORMATS[name]
    except KeyError:
        raise InvalidInput(f"Unknown import format {name!r}; use one of {', '.join(FORMATS)} "
                           "(or no format for this tool's own export).") from None
