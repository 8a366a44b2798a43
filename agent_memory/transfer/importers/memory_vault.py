"""mcp-memory-vault's ``export``: namespaced facts with tags, times and TTLs (pure)."""

from __future__ import annotations

from typing import Any

from ...errors import InvalidInput
from ...disk.layout import derived_id
from ._source import millis, read_json


def memory_vault(source: Any) -> list[dict[str, Any]]:
    """mcp-memory-vault's ``export`` (an object holding ``memories``, or the bare array):
    content, namespace, tags and source as they were; ``created_at``, ``updated_at`` and
    ``expires_at`` as ``created``, ``updated`` and ``expires`` (an item already expired is
    counted, not imported). Ids are ours, dated by the creation time and keyed by the
    source's own id, so importing the export again updates what changed there (its ids
    survive an edit) and adds nothing twice, and a TTL still applies."""
    data = read_json(source)
    memories = data.get("memories") if isinstance(data, dict) else data
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
            created = millis(item["created"], f"Memory {n + 1}: created_at")
            key = memory.get("id", memory.get("content"))  # its id survives an edit and a move to another namespace
            item["id"] = derived_id(created, f"mcp-memory-vault:{key}")
        items.append(item)
    return items
