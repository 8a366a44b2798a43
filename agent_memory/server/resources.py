"""Resources: how to use the memory, its stats, the file and index schema, and every
memory as ``memory://{+id}`` (the ``+`` lets path ids with slashes through), with
completion of ids and paths while a client types one."""

from __future__ import annotations

import json
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp_types import Completion, ResourceTemplateReference

from ..errors import AgentMemoryError, NotFound
from ..index.db import SCHEMA
from ..note.render import NEW_FILE_ORDER
from ..vault.vault import Vault
from .instructions import INSTRUCTIONS

MEMORY_TEMPLATE = "memory://{+id}"
MAX_COMPLETIONS = 100  # the protocol's cap per answer

SCHEMA_DOC = f"""# agent-memory schema

## A memory file
One markdown file per memory, anywhere in the vault (new ones go to `YYYY/MM/DD/<slug>.md`),
with optional YAML front matter. Keys the tool writes, in this order: {", ".join(f"`{k}`" for k in NEW_FILE_ORDER)}.
`aliases` is read too. Any other key whose value holds `[[wikilinks]]` is a relation
(e.g. `related_to: ["[[acme-billing]]"]`), and so is every `[[wikilink]]` in the body
(relation `links_to`). Links resolve by vault path or file name, as in Obsidian.
A file without `id` is a memory whose id is its vault-relative path. Every memory's
`version` is the sha256 of its bytes.

## The index (SQLite FTS5, a cache rebuilt from the files)
```sql
{SCHEMA.strip()}
```
"""


def register_resources(server: MCPServer, vault: Vault) -> None:
    @server.resource(
        "memory://instructions", name="instructions", title="How to use this memory",
        description="When to remember, how to recall, how to keep memories accurate.", mime_type="text/markdown",
    )
    def instructions() -> str:
        return INSTRUCTIONS

    @server.resource(
        "memory://stats", name="stats", title="Memory statistics",
        description="Counts per namespace and tag, and the vault's health (as the memory_stats tool).",
        mime_type="application/json",
    )
    def stats() -> str:
        try:
            return json.dumps(vault.stats(), ensure_ascii=False, indent=2)
        except AgentMemoryError as exc:
            raise ResourceError(str(exc)) from exc

    @server.resource(
        "memory://schema", name="schema", title="File format and index schema",
        description="The memory file format (front-matter keys, links) and the SQLite index schema.",
        mime_type="text/markdown",
    )
    def schema() -> str:
        return SCHEMA_DOC

    @server.resource(
        MEMORY_TEMPLATE, name="memory", title="A memory file",
        description="One memory's markdown file exactly as on disk, by id or vault-relative path.",
        mime_type="text/markdown",
    )
    def memory(id: str) -> str:  # the URI template's variable name
        try:
            path = vault.get(id)["path"]
            return vault.read_file(path)["content"]
        except NotFound as exc:
            raise ResourceNotFoundError(str(exc)) from exc
        except AgentMemoryError as exc:
            raise ResourceError(str(exc)) from exc

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> Completion | None:
        if isinstance(ref, ResourceTemplateReference) and ref.uri == MEMORY_TEMPLATE and argument.name == "id":
            values = await anyio.to_thread.run_sync(vault.complete_ids, argument.value, MAX_COMPLETIONS + 1)
            return Completion(
                values=values[:MAX_COMPLETIONS], total=None, has_more=len(values) > MAX_COMPLETIONS
            )
        return None
