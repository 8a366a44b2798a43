"""``serve --compat memory-mcp``: memory-mcp's thirteen tools with its names, arguments
(``hash``, ``hashes``, ``items``, ``cursor``, ``direction="outgoing"|"incoming"``,
``memory_type``...), limits and result shapes (per-item batch results, ``old_hash`` and
``new_hash``, ``{ok: false, error}`` for a missing memory), its resources
(``internal://instructions``, ``memory://memories/{hash}``) and its ``get-help`` prompt,
over this vault.

A memory's hash is the SHA-256 of its text and its sorted tags (``hash_of``), so it
changes when either does, as memory-mcp's does; hashes are found through a table in the
vault's index folder, else by reading the memories once.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Any, Literal

from pydantic import Field

from ...errors import AgentMemoryError, InvalidInput, NotFound
from ...models import Memory
from ...progress import Progress
from ...vault.vault import Vault
from .memory_vault import given_tags

_HASHES = "CREATE TABLE IF NOT EXISTS hashes (hash TEXT PRIMARY KEY, id TEXT NOT NULL)"
_HEX = re.compile(r"[0-9a-f]{64}")
TYPES = ("general", "fact", "plan", "decision", "reflection", "lesson", "error", "gradient")


def hash_of(content: str, tags: list[str]) -> str:
    """memory-mcp's identity of a memory: its text and its tags, sorted."""
    return hashlib.sha256((content + "\x00" + "\x00".join(sorted(tags))).encode("utf-8")).hexdigest()


def _text(memory: Memory) -> str:
    return memory["content"].removesuffix("\n")


def shape(vault: Vault, memory: Memory) -> dict[str, Any]:
    """A memory as memory-mcp returns one (its hash remembered for the next lookup)."""
    digest = hash_of(_text(memory), given_tags(memory))
    with vault.core.index.transaction() as conn:
        conn.execute(_HASHES)
        conn.execute("INSERT OR REPLACE INTO hashes (hash, id) VALUES (?, ?)", (digest, memory["id"]))
    meta = memory["front_matter"]
    importance = meta.get("importance")
    return {"hash": digest, "content": _text(memory), "tags": given_tags(memory),
            "memory_type": str(meta.get("type") or "general"),
            "importance": importance if isinstance(importance, (int, float)) and not isinstance(importance, bool) else 0,
            "created_at": memory["created"], "updated_at": memory["updated"]}


def find(vault: Vault, digest: str) -> Memory | None:
    """The live memory whose hash is ``digest`` now, or None."""
    if not _HEX.fullmatch(digest):
        raise InvalidInput(f"hash must be 64 lowercase hex characters (a SHA-256); got {digest[:70]!r}.")
    with vault.core.index.transaction() as conn:
        conn.execute(_HASHES)
        row = conn.execute("SELECT id FROM hashes WHERE hash = ?", (digest,)).fetchone()
    candidates = [str(row[0])] if row is not None else []
    if not candidates:  # never shown by this tool set: look at every memory once
        candidates = [str(r[0]) for r in vault.core.index.query("SELECT id FROM memories")]
    for memory_id in candidates:
        try:
            memory = vault.get(memory_id)
        except AgentMemoryError:
            continue
        if hash_of(_text(memory), given_tags(memory)) == digest:
            shape(vault, memory)
            return memory
    return None


def _missing(digest: str) -> dict[str, Any]:
    return {"ok": False, "error": {"code": "E_NOT_FOUND", "message": f"Memory {digest} not found"}}


def _must(vault: Vault, digest: str) -> Memory:
    memory = find(vault, digest)
    if memory is None:
        raise InvalidInput(f"E_NOT_FOUND: memory {digest} not found; search_memories or recall give valid hashes.")
    return memory


# ----------------------------------------------------------------------------- arguments
Content = Annotated[str, Field(description="Memory content (1-100000 chars).", min_length=1, max_length=100000)]
Tag = Annotated[str, Field(min_length=1, max_length=50, pattern=r"^\S+$")]
Tags = Annotated[list[Tag], Field(description="1-100 tags, each at most 50 chars, no whitespace.", min_length=1,
                                  max_length=100)]
MemoryType = Annotated[Literal[TYPES], Field(description="general, fact, plan, decision, reflection, lesson, "  # type: ignore[valid-type]
                                                         "error or gradient.")]
Importance = Annotated[int, Field(description="Priority 0-10.", ge=0, le=10)]
Hash = Annotated[str, Field(description="The memory's 64-char lowercase SHA-256 hex hash.")]
Hashes = Annotated[list[str], Field(description="1-50 memory hashes.", min_length=1, max_length=50)]
Query = Annotated[str, Field(description="Search text (1-1000 chars).", min_length=1, max_length=1000)]
Cursor = Annotated[str | None, Field(description="Pagination cursor from the previous response (nextCursor).")]
Relation = Annotated[str, Field(description="Edge label, e.g. related_to, causes, depends_on, supersedes.",
                                min_length=1, max_length=50)]


def _offset(cursor: str | None) -> int:
    if cursor in (None, ""):
        return 0
    if not cursor.isdigit():
        raise InvalidInput(f"cursor {cursor[:40]!r} is not one this server gave; pass nextCursor from the last answer.")
    return int(cursor)


def _store(vault: Vault, content: str, tags: list[str], memory_type: str, importance: int) -> dict[str, Any]:
    done = vault.remember(content, tags=tags, type=None if memory_type == "general" else memory_type,
                          importance=importance)  # 0 too: memory-mcp's filters count it
    return {"hash": shape(vault, done["memory"])["hash"], "created": not done["deduplicated"]}


# ----------------------------------------------------------------------------- the tools
def store_memory(vault: Vault, content: Content, tags: Tags, memory_type: MemoryType = "general",
                 importance: Importance = 0) -> dict[str, Any]:
    """Store a new memory with content, tags, and optional type/importance. Storing the
    same content again returns the existing hash with created=false."""
    return _store(vault, content, tags, memory_type, importance)


Item = Annotated[dict[str, Any], Field(description="{content, tags, memory_type?, importance?}")]
Items = Annotated[list[Item], Field(description="1-50 items.", min_length=1, max_length=50)]


def store_memories(vault: Vault, items: Items) -> dict[str, Any]:
    """Store several memories: a result per item (its hash, or why it failed)."""
    results = []
    for n, item in enumerate(items):
        try:
            if not isinstance(item.get("content"), str) or not isinstance(item.get("tags"), list):
                raise InvalidInput("an item needs content (text) and tags (a list)")
            done = _store(vault, item["content"], item["tags"], str(item.get("memory_type") or "general"),
                          int(item.get("importance") or 0))
            results.append({"index": n, "ok": True, **done})
        except AgentMemoryError as exc:
            results.append({"index": n, "ok": False, "error": str(exc)})
    ok = sum(1 for r in results if r["ok"])
    return {"items": results, "succeeded": ok, "failed": len(results) - ok}


def get_memory(vault: Vault, hash: Hash) -> dict[str, Any]:
    """One memory by its hash; {ok: false, error} when there is none."""
    memory = find(vault, hash)
    return shape(vault, memory) if memory is not None else _missing(hash)


def update_memory(vault: Vault, hash: Hash, content: Content, tags: Tags | None = None) -> dict[str, Any]:
    """Replace a memory's content (and tags, if given): both hashes back. Content is
    replaced when the file is still as this tool last wrote it; a person's edit since is
    refused, naming the file's version."""
    memory = _must(vault, hash)
    adding = [t for t in tags or [] if t not in given_tags(memory)]
    removing = [t for t in given_tags(memory) if tags is not None and t not in tags]
    done = vault.update(memory["id"], content=content, add_tags=adding, remove_tags=removing)
    return {"old_hash": hash, "new_hash": shape(vault, done["memory"])["hash"]}


def delete_memory(vault: Vault, hash: Hash) -> dict[str, Any]:
    """Delete a memory (to the vault's trash, restorable); its links go with its file."""
    memory = find(vault, hash)
    if memory is not None:
        vault.forget(memory["id"])
    return {"hash": hash, "deleted": memory is not None}


def delete_memories(vault: Vault, hashes: Hashes) -> dict[str, Any]:
    """Delete several memories: a result per hash."""
    results = []
    for n, digest in enumerate(hashes):
        try:
            results.append({"index": n, **delete_memory(vault, digest)})
        except AgentMemoryError as exc:
            results.append({"index": n, "hash": digest, "deleted": False, "error": str(exc)})
    ok = sum(1 for r in results if r["deleted"])
    return {"items": results, "succeeded": ok, "failed": len(results) - ok}


def _shaped(vault: Vault, ids: list[str]) -> list[dict[str, Any]]:
    return [shape(vault, vault.get(memory_id)) for memory_id in ids]


def search_memories(vault: Vault, query: Query, limit: Annotated[int, Field(ge=1, le=100)] = 20,
                    cursor: Cursor = None, min_importance: Importance | None = None,
                    max_importance: Importance | None = None, memory_type: MemoryType | None = None,
                    progress: Progress | None = None) -> dict[str, Any]:
    """Full-text search over content and tags, with importance and type filters, a page at a time."""
    found = vault.search(query, limit=limit, offset=_offset(cursor), min_importance=min_importance or None,
                         max_importance=max_importance, type=memory_type if memory_type != "general" else None,
                         progress=progress)
    out: dict[str, Any] = {"memories": _shaped(vault, [h["id"] for h in found["hits"]]),
                           "total_returned": len(found["hits"])}
    if "next_offset" in found:
        out["nextCursor"] = str(found["next_offset"])
    return out


def create_relationship(vault: Vault, from_hash: Hash, to_hash: Hash, relation_type: Relation) -> dict[str, Any]:
    """A directed link from one memory to another (written in the first one's front matter)."""
    done = vault.link(_must(vault, from_hash)["id"], _must(vault, to_hash)["id"], relation_type)
    return {"created": done["changed"]}


def delete_relationship(vault: Vault, from_hash: Hash, to_hash: Hash, relation_type: Relation) -> dict[str, Any]:
    """Remove one directed link; {ok: false, error} when there is none."""
    source, target = find(vault, from_hash), find(vault, to_hash)
    if source is None or target is None:
        return _missing(from_hash if source is None else to_hash)
    done = vault.unlink(source["id"], target["id"], relation_type)
    return {"deleted": True} if done["changed"] else _missing(f"{from_hash} -[{relation_type}]-> {to_hash}")


Direction = Annotated[Literal["outgoing", "incoming", "both"], Field(description="outgoing, incoming or both.")]


def get_relationships(vault: Vault, hash: Hash, direction: Direction = "both") -> dict[str, Any]:
    """The links of a memory, with the memory at the other end."""
    memory = _must(vault, hash)
    related = vault.related(memory["id"], depth=1, direction={"outgoing": "out", "incoming": "in"}.get(direction, "both"))
    relationships = []
    for edge in related["edges"]:
        ends = _ends(vault, edge["source"], edge["target"])
        if ends is None:
            continue
        (src, src_hash), (dst, dst_hash) = ends
        other, other_hash = (dst, dst_hash) if src["id"] == memory["id"] else (src, src_hash)
        relationships.append({"from_hash": src_hash, "to_hash": dst_hash, "relation_type": edge["relation"],
                              "created_at": src["updated"], "linked_hash": other_hash,
                              "linked_content": _text(other), "linked_tags": given_tags(other)})
    return {"relationships": relationships, "count": len(relationships)}


def _ends(vault: Vault, source: str, target: str) -> tuple[tuple[Memory, str], tuple[Memory, str]] | None:
    try:
        a, b = vault.get(source), vault.get(target)
    except NotFound:
        return None
    return (a, hash_of(_text(a), given_tags(a))), (b, hash_of(_text(b), given_tags(b)))


def recall(vault: Vault, query: Query, depth: Annotated[int, Field(ge=0, le=3)] = 1,
           limit: Annotated[int, Field(ge=1, le=50)] = 10, cursor: Cursor = None,
           min_importance: Importance | None = None, max_importance: Importance | None = None,
           memory_type: MemoryType | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """Search, then follow links up to depth hops from the hits: the memories found and
    the edges walked."""
    found = vault.search(query, limit=limit, offset=_offset(cursor), depth=depth, min_importance=min_importance or None,
                         max_importance=max_importance, type=memory_type if memory_type != "general" else None,
                         progress=progress)
    ids = [h["id"] for h in found["hits"]]
    related = found.get("related")
    if related is not None:
        ids += [n["id"] for n in related["nodes"] if n["id"] not in ids]
    graph = []
    for edge in related["edges"] if related is not None else []:
        ends = _ends(vault, edge["source"], edge["target"])
        if ends is not None:
            graph.append({"from_hash": ends[0][1], "to_hash": ends[1][1], "relation_type": edge["relation"]})
    out: dict[str, Any] = {"memories": _shaped(vault, ids), "graph": graph,
                           "depth_reached": related["depth"] if related is not None else 0}
    if related is not None and related["aborted"]:
        out["aborted"] = True
    if "next_offset" in found:
        out["nextCursor"] = str(found["next_offset"])
    return out


def retrieve_context(vault: Vault, query: Query, token_budget: Annotated[int, Field(ge=100, le=200000)] = 4000,
                     strategy: Literal["relevance", "importance", "recency"] = "relevance",
                     progress: Progress | None = None) -> dict[str, Any]:
    """Whole memories, best first, that together fit the token budget."""
    done = vault.retrieve_context(query, token_budget=token_budget, strategy=strategy, progress=progress)
    return {"memories": _shaped(vault, [m["id"] for m in done["memories"]]),
            "estimated_tokens": done["estimated_tokens"], "truncated": done["truncated"]}


def memory_stats(vault: Vault, *, progress: Progress | None = None) -> dict[str, Any]:
    """Totals: memories (oldest, newest, average importance), relationships, memories per type."""
    stats = vault.stats(progress)
    return {"memories": {"total": stats["total"], "oldest": stats["oldest"], "newest": stats["newest"],
                         "avg_importance": stats["average_importance"]},
            "relationships": {"total": sum(stats["relations"].values())}, "by_type": stats["types"]}


TOOLS: tuple[tuple[str, str, Any, tuple[bool, bool, bool]], ...] = (
    ("store_memory", "Store a memory", store_memory, (False, False, True)),
    ("store_memories", "Store memories", store_memories, (False, False, True)),
    ("get_memory", "Get a memory", get_memory, (True, False, True)),
    ("update_memory", "Update a memory", update_memory, (False, True, False)),
    ("delete_memory", "Delete a memory", delete_memory, (False, True, True)),
    ("delete_memories", "Delete memories", delete_memories, (False, True, True)),
    ("search_memories", "Search memories", search_memories, (True, False, True)),
    ("create_relationship", "Create a relationship", create_relationship, (False, False, True)),
    ("delete_relationship", "Delete a relationship", delete_relationship, (False, True, True)),
    ("get_relationships", "Get relationships", get_relationships, (True, False, True)),
    ("recall", "Recall with the graph", recall, (True, False, True)),
    ("retrieve_context", "Retrieve context", retrieve_context, (True, False, True)),
    ("memory_stats", "Memory statistics", memory_stats, (True, False, True)),
)


HELP = "# Memory tools\n\nMemories are found by their hash (SHA-256 of text and sorted tags); it changes " \
       "when either changes, and update_memory returns the new one.\n\n" + "\n".join(
           f"- `{name}`: {' '.join((function.__doc__ or '').split())}" for name, _, function, _ in TOOLS)


def register(server: Any, vault: Vault) -> None:
    """The thirteen tools, the two resources and the get-help prompt."""
    from mcp.server.mcpserver.exceptions import ResourceError

    from ..prompts import refuse_unknown_prompts
    from .memory_vault import register_table

    register_table(server, vault, TOOLS)
    refuse_unknown_prompts(server, {"get-help"})

    @server.prompt(name="get-help", title="How to use the memory tools",
                   description="Returns full usage instructions for all tools")
    def get_help() -> str:
        return HELP

    @server.resource("internal://instructions", name="instructions", title="How to use the memory tools",
                     mime_type="text/markdown")
    def instructions() -> str:
        return HELP

    @server.resource("memory://memories/{hash}", name="memory", title="One memory by its hash",
                     mime_type="application/json")
    def one(hash: str) -> str:
        try:
            memory = find(vault, hash)
        except AgentMemoryError as exc:
            raise ResourceError(str(exc)) from exc
        if memory is None:
            raise ResourceError(f"Memory {hash} not found")
        return json.dumps(shape(vault, memory), ensure_ascii=False, indent=2)
