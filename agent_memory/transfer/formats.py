"""The formats ``agent-memory import --from FORMAT`` and ``import_memories(format=...)``
read (other memory servers' data, through ``importers/``) and those export writes."""


from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import InvalidInput
from .importers.agentmemory import agentmemory
from .importers.chats import CHAT_FORMATS
from .importers.memory_mcp import memory_mcp
from .importers.memory_vault import memory_vault

Importer = Callable[[Any], list[dict[str, Any]]]

# The reference memory server's graph is imported into the notes ``serve --compat
# knowledge-graph`` keeps (``vault.graph_import``), not through import items.
GRAPH_FORMAT = "mcp-knowledge-graph"

FORMATS: dict[str, Importer] = {
    "mcp-memory-vault": memory_vault,
    "memory-mcp": memory_mcp,
    "agentmemory": agentmemory,
}

# Chat exports are read a conversation at a time and imported in batches
# (``Maintenance._import_chats``), not turned into one list of items as the above are.
IMPORT_FORMATS = (GRAPH_FORMAT, *FORMATS, *CHAT_FORMATS)

EXPORT_FORMATS = ("mcp-knowledge-graph",)


def importer(name: str) -> Importer:
    """The importer of format ``name``, or an error listing the formats there are."""
    try:
        return FORMATS[name]  # GRAPH_FORMAT: Maintenance.import_memories reads it itself
    except KeyError:
        raise InvalidInput(f"Unknown import format {name!r}; use one of {', '.join(IMPORT_FORMATS)} "
                           "(or no format for this tool's own export).") from None
