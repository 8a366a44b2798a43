"""``serve --compat agentmemory``: AgentMemory's eight tools (``insert_memory``,
``search_memories``, ``optimize_index``, ``read_file``...), with its argument names
(``id`` a number, ``summary``, ``keywords``, ``summaryWeight``, ``keywordWeight``,
``lambda``, ``filePath``) and result keys (``file_path``, ``file_contents``,
``total_found``, ``pagination``...), over this vault; its resources
``memory://database/{stats,all,schema}`` and this server's prompts (which share
AgentMemory's prompt names and placeholders).

A summary is the memory's title; keywords are its tags (lowercased; a space becomes
``-``, as the importer maps them); ids are integers (``numbers``).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field

from ...errors import InvalidInput, NotFound
from ...index.db import SCHEMA
from ...models import Memory
from ...note.tags import normalise_tag
from ...progress import Progress
from ...vault.vault import Vault
from .numbers import id_of, number

NOT_FOUND = "Memory {n} not found; list_memories or search_memories give valid ids."
MAX_FILE = 1024 * 1024

Content = Annotated[str, Field(description="The full text to store.")]
Summary = Annotated[str, Field(description="A one-line summary (at most 1000 characters): the memory's title.",
                               max_length=1000)]
Keywords = Annotated[list[str], Field(description="Up to 10 keywords (lowercased, deduplicated).", max_length=10)]
Id = Annotated[int, Field(description="The memory's id (a number, from insert_memory, list_memories or search).")]
Query = Annotated[str, Field(description="What to search for, in words or a question.")]
Limit = Annotated[int, Field(description="Results at most (1-100).", ge=1, le=100)]
Offset = Annotated[int, Field(description="Memories to skip.", ge=0)]
Weight = Annotated[float, Field(description="Accepted for AgentMemory's callers; this vault's recall ranks on its own.")]
Lambda = Annotated[float, Field(alias="lambda", ge=0,
                                description="Accepted for AgentMemory's callers; this vault's recall ranks on its own.")]
FilePath = Annotated[str, Field(description="The file's path: absolute inside the vault, or vault-relative.")]


def _tags(keywords: list[str] | None) -> list[str]:
    return list(dict.fromkeys(normalise_tag(k) for k in keywords or [] if k.strip()))


def _get(vault: Vault, n: int) -> Memory:
    try:
        return vault.get(id_of(vault, n, NOT_FOUND))
    except NotFound as exc:
        raise InvalidInput(NOT_FOUND.format(n=n)) from exc


def _written(vault: Vault, memory: Memory, message: str) -> dict[str, Any]:
    n = number(vault, memory["id"])
    return {"message": message.format(n=n), "id": n, "file_path": memory["path"]}


def insert_memory(vault: Vault, content: Content, summary: Summary, keywords: Keywords | None = None) -> dict[str, Any]:
    """Insert a new memory: its content saved as a dated markdown file named from the summary."""
    done = vault.remember(content, title=summary, tags=_tags(keywords))
    return _written(vault, done["memory"], "Memory {n} stored" if not done["deduplicated"]
                    else "Memory {n} already holds this content")


def update_memory(vault: Vault, id: Id, content: Content | None = None, summary: Summary | None = None,
                  keywords: Keywords | None = None) -> dict[str, Any]:
    """Update a memory (any subset of content, summary, keywords; keywords omitted stay,
    an empty list clears them). Content replaces the file's body when the file is still
    as this tool last wrote it; a person's edit since is refused, naming its version."""
    memory = _get(vault, id)
    adding, removing = [], []
    if keywords is not None:
        wanted = _tags(keywords)
        adding = [t for t in wanted if t not in memory["tags"]]
        removing = [t for t in memory["tags"] if t not in wanted]
    done = vault.update(memory["id"], content=content, title=summary, add_tags=adding, remove_tags=removing)
    return _written(vault, done["memory"], "Memory {n} updated")


def search_memories(vault: Vault, query: Query, keywords: Keywords | None = None, limit: Limit = 10,
                    summaryWeight: Weight = 0.8, keywordWeight: Weight = 2.0,
                    lambda_: Lambda = 1.0, progress: Progress | None = None) -> dict[str, Any]:
    """Search memories (summary, keywords and text): each result's file path, summary
    and contents. Keywords join the query as terms of their own."""
    words = " ".join([query, *(k for k in keywords or [] if k.strip())])
    found = vault.search(words, limit=limit, match="auto", progress=progress)
    results = [{"file_path": h["path"], "summary": h["title"], "file_contents": vault.get(h["id"])["content"]}
               for h in found["hits"]]
    return {"results": results, "total_found": len(results)}


def get_memory(vault: Vault, id: Id) -> dict[str, Any]:
    """One memory with its contents (the text stored; read_file gives the whole file)."""
    memory = _get(vault, id)
    return {"id": id, "file_path": memory["path"], "file_contents": memory["content"], "summary": memory["title"]}


def delete_memory(vault: Vault, id: Id) -> str:
    """Delete a memory (its file goes to the vault's trash, restorable)."""
    memory = _get(vault, id)
    vault.forget(memory["id"])
    return f"Memory {id} deleted"


def list_memories(vault: Vault, limit: Limit = 20, offset: Offset = 0) -> dict[str, Any]:
    """Memories with their keywords, newest first, a page at a time."""
    listed = vault.list(limit=limit, offset=offset)
    memories = [{"id": number(vault, m["id"]), "file_path": m["path"], "summary": m["title"], "keywords": m["tags"],
                 "created_at": m["created"]} for m in listed["memories"]]
    return {"memories": memories, "pagination": {"total": listed["total"], "limit": limit, "offset": offset,
                                                 "has_more": offset + len(memories) < listed["total"]}}


def optimize_index(vault: Vault) -> str:
    """Bring the search index in step with the files (what changed by hand since)."""
    report = vault.reconcile()
    return f"Index optimized ({report['added']} added, {report['updated']} updated, {report['removed']} removed)"


def read_file(vault: Vault, filePath: FilePath) -> dict[str, Any]:
    """Read a file inside the vault (confined to it; over 1 MB gives a placeholder)."""
    read = vault.read_file(filePath, max_bytes=MAX_FILE * 4)
    contents = read["content"] if read["size"] <= MAX_FILE else f"[file is {read['size']} bytes, over 1 MB: not shown]"
    return {"file_path": read["path"], "file_contents": contents, "file_exists": read["exists"]}


TOOLS: tuple[tuple[str, str, Any, tuple[bool, bool, bool]], ...] = (
    ("insert_memory", "Insert a memory", insert_memory, (False, False, False)),
    ("update_memory", "Update a memory", update_memory, (False, True, False)),
    ("search_memories", "Search memories", search_memories, (True, False, True)),
    ("get_memory", "Get a memory", get_memory, (True, False, True)),
    ("delete_memory", "Delete a memory", delete_memory, (False, True, True)),
    ("list_memories", "List memories", list_memories, (True, False, True)),
    ("optimize_index", "Optimize the index", optimize_index, (False, False, True)),
    ("read_file", "Read a stored file", read_file, (True, False, True)),
)


def register(server: Any, vault: Vault) -> None:
    """The eight tools, the three resources and the prompts on ``server``."""
    from ..prompts import register_prompts
    from .memory_vault import register_table

    register_table(server, vault, TOOLS)
    register_prompts(server, vault)

    @server.resource("memory://database/stats", name="stats", title="Database statistics",
                     mime_type="application/json")
    def stats() -> str:
        return json.dumps(vault.stats(), ensure_ascii=False, indent=2)

    @server.resource("memory://database/all", name="all", title="Every memory with its keywords",
                     mime_type="application/json")
    def everything() -> str:
        return json.dumps(vault.export_memories(), ensure_ascii=False, indent=2)

    @server.resource("memory://database/schema", name="schema", title="The index's schema (DDL)",
                     mime_type="text/plain")
    def schema() -> str:
        return SCHEMA
