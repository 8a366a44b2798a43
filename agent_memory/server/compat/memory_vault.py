"""``serve --compat memory-vault``: mcp-memory-vault's eight tools, with its names,
arguments (``memory_id`` a number, ``tag``, ``ttl_days=-1`` to keep) and result keys
(``id``, ``created_at``, ``merged_tags``, ``updated_fields``...), over this vault.

Its ids are integers: each memory gets one the first time this tool set shows it, kept
in the vault's index folder (``numbers``), so the same memory keeps its number across
sessions; a rebuilt index folder numbers memories afresh (docs/moving-in.md).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from ...errors import InvalidInput, NotFound
from ...limits import check_content
from ...models import Memory
from ...note.parse import content_hash
from ...note.tags import as_tag_list, normalise_tag
from ...progress import Progress
from ...vault.vault import Vault
from .numbers import id_of, number

def _get(vault: Vault, n: int) -> Memory:
    try:
        return vault.get(id_of(vault, n, NOT_FOUND))
    except NotFound as exc:  # numbered once, gone since: the seed's wording
        raise InvalidInput(NOT_FOUND.format(n=n)) from exc


def given_tags(memory: Memory) -> list[str]:
    """The tags a memory was given (its front matter's), without the ``#word`` tags the
    vault also reads in its text (Obsidian's inline tags), which the seeds do not have."""
    return list(dict.fromkeys(normalise_tag(t) for t in as_tag_list(memory["front_matter"].get("tags"))))


def shape(vault: Vault, memory: Memory) -> dict[str, Any]:
    """A memory as mcp-memory-vault returns one."""
    return {"id": number(vault, memory["id"]), "content": memory["content"].removesuffix("\n"),
            "namespace": memory["namespace"], "tags": given_tags(memory), "source": memory["source"],
            "created_at": memory["created"], "updated_at": memory["updated"], "expires_at": memory["expires"]}


NOT_FOUND = ("Memory {n} not found — it may have expired or been forgotten. Use list_memories or recall to find "
             "valid ids.")

# ----------------------------------------------------------------------------- arguments
Content = Annotated[str, Field(description="The fact to remember, in one or a few sentences.")]
NamespaceIn = Annotated[str, Field(description="A word that groups memories (default 'default').")]
NamespaceFilter = Annotated[str, Field(description="Only this namespace ('' for all).")]
TagsIn = Annotated[list[str], Field(description="Tags, e.g. ['customer', 'deploy'].")]
TtlDays = Annotated[float, Field(description="Days until it expires; 0 never.", ge=0)]
SourceIn = Annotated[str, Field(description="Where it came from, e.g. 'user note 2026-07-20'.")]
MemoryNumber = Annotated[int, Field(description="The memory's id (a number, from remember, recall or list_memories).")]
Query = Annotated[str, Field(description="A plain question or keywords, e.g. 'when does ACME prefer to deploy?'.")]
Limit = Annotated[int, Field(description="Hits at most.", ge=1, le=100)]
Match = Annotated[Literal["auto", "all", "any"], Field(description="auto (every term, else any), all or any.")]
Tag = Annotated[str, Field(description="Only memories with this tag ('' for all).")]
NewTtl = Annotated[float, Field(description="-1 keep, 0 remove, >0 expire that many days from now.", ge=-1)]


# ----------------------------------------------------------------------------- the tools
def remember(vault: Vault, content: Content, namespace: NamespaceIn = "default", tags: TagsIn | None = None,
             ttl_days: TtlDays = 0, source: SourceIn = "") -> dict[str, Any]:
    """Remember a fact for later sessions. An exact duplicate (same content in the same
    namespace) is never stored twice: the existing memory comes back with
    deduplicated=true, and new tags are merged into it (merged_tags)."""
    asked = [normalise_tag(t) for t in as_tag_list(tags or [])]
    namespace = namespace or "default"
    twin = vault.core.index.find_content(namespace, content_hash(check_content(content)), "")
    had = twin["tags"].split() if twin is not None else []
    done = vault.remember(content, namespace=namespace, tags=tags or [], ttl_days=ttl_days, source=source)
    memory = shape(vault, done["memory"])
    merged = [t for t in dict.fromkeys(asked) if t not in had] if done["deduplicated"] else []
    message = (f"Memory {memory['id']} already holds this in namespace '{memory['namespace']}'"
               + (f"; merged tags {', '.join(merged)}." if merged else ".") if done["deduplicated"]
               else f"Stored memory {memory['id']} in namespace '{memory['namespace']}'.")
    return {**memory, "deduplicated": done["deduplicated"], "merged_tags": merged, "message": message}


def recall(vault: Vault, query: Query, namespace: NamespaceFilter = "", tags: TagsIn | None = None, limit: Limit = 8,
           match: Match = "auto", progress: Progress | None = None) -> dict[str, Any]:
    """Search memories with a plain question. Ranked hits with a snippet (matches in
    [brackets]), matched_terms, tags and a readable age, plus the normalised terms and
    the match_mode used."""
    found = vault.search(query, namespace=namespace or None, tags=tags or [], limit=limit, match=match,
                         progress=progress)
    hits = [{"id": number(vault, h["id"]), "namespace": h["namespace"], "snippet": _bracketed(h["snippet"], h.get("highlights", [])).rstrip("\n"),
             "matched_terms": h["matched_terms"], "tags": h["tags"], "age": h["age"],
             **({"content": h["content"].removesuffix("\n")} if "content" in h else {})} for h in found["hits"]]
    out: dict[str, Any] = {"terms": found["terms"], "match_mode": found["match_mode"], "count": len(hits),
                           "hits": hits}
    for key in ("note", "hint"):
        if key in found:
            out[key] = found[key]
    return out


def _bracketed(snippet: str, highlights: list[list[int]]) -> str:
    """mcp-memory-vault's snippets mark matches in [brackets]: drawn here from the
    offsets this server's hits carry."""
    out, at = [], 0
    for start, end in highlights:
        out += [snippet[at:start], "[", snippet[start:end], "]"]
        at = end
    return "".join(out) + snippet[at:]


def forget(vault: Vault, memory_id: MemoryNumber) -> dict[str, Any]:
    """Delete a memory (it goes to the vault's trash). Returns a preview of what was removed."""
    memory = _get(vault, memory_id)
    vault.forget(memory["id"])
    preview = memory["content"].strip().replace("\n", " ")
    return {"deleted": True, "id": memory_id, "namespace": memory["namespace"],
            "preview": preview if len(preview) <= 80 else preview[:79] + "…",
            "message": f"Forgot memory {memory_id}."}


def list_memories(vault: Vault, namespace: NamespaceFilter = "", tag: Tag = "", limit: Limit = 20,
                  progress: Progress | None = None) -> dict[str, Any]:
    """Most recent memories first, including expires_at when a TTL is set."""
    listed = vault.list(namespace=namespace or None, tags=[tag] if tag else [], limit=limit, progress=progress)
    memories = [shape(vault, vault.get(m["id"])) for m in listed["memories"]]
    return {"count": len(memories), "memories": memories}


def update_memory(vault: Vault, memory_id: MemoryNumber, content: Content = "", add_tags: TagsIn | None = None,
                  ttl_days: NewTtl = -1, remove_tags: TagsIn | None = None, namespace: NamespaceIn = "",
                  source: SourceIn = "") -> dict[str, Any]:
    """Correct a memory in place: content, tags added or removed, ttl_days (-1 keep, 0
    remove, >0 from now), namespace (moves it), source. A change that would duplicate
    another memory is refused, naming it."""
    before = shape(vault, _get(vault, memory_id))
    done = vault.update(before_id(vault, memory_id), content=content or None, add_tags=add_tags or [],
                        remove_tags=remove_tags or [], ttl_days=None if ttl_days == -1 else ttl_days,
                        namespace=namespace or None, source=source or None)
    after = shape(vault, done["memory"])
    fields = [k for k in ("content", "tags", "namespace", "source", "expires_at") if before[k] != after[k]]
    return {**after, "updated_fields": fields}


def before_id(vault: Vault, n: int) -> str:
    """The string id behind ``n`` (``update_memory``'s own parameter is named ``memory_id``)."""
    return id_of(vault, n, NOT_FOUND)


def memory_stats(vault: Vault, *, progress: Progress | None = None) -> dict[str, Any]:
    """Totals, counts per namespace, the most used tags, active-TTL count, database size
    and path, schema_version and search_mode."""
    stats = vault.stats(progress)
    return {"total": stats["total"], "namespaces": stats["namespaces"], "top_tags": stats["top_tags"],
            "with_ttl": stats["with_ttl"], "db_path": stats["index_path"], "db_size_bytes": stats["index_bytes"],
            "schema_version": stats["schema_version"], "search_mode": stats["search_mode"]}


def export_memories(vault: Vault, namespace: NamespaceFilter = "") -> dict[str, Any]:
    """All memories as JSON-serialisable dicts, ready for backup or migration."""
    listed = vault.export_memories(namespace=namespace or None)
    memories = [shape(vault, vault.get(item["id"] if "id" in item else item["path"])) for item in listed]
    return {"count": len(memories), "memories": memories}


def import_memories(vault: Vault, memories: list[dict[str, Any]]) -> dict[str, Any]:
    """Import the array from export_memories: counts of imported, skipped (duplicates)
    and expired items; the whole batch is checked first."""
    done = vault.import_memories(memories, format="mcp-memory-vault")
    return {"imported": done["imported"] + done.get("updated", 0),
            "skipped": done["duplicates"] + done.get("unchanged", 0), "expired": done["expired"]}


TOOLS: tuple[tuple[str, str, Any, tuple[bool, bool, bool]], ...] = (
    # name, title, function, (readOnly, destructive, idempotent)
    ("remember", "Remember a fact", remember, (False, False, True)),
    ("recall", "Recall memories", recall, (True, False, True)),
    ("forget", "Forget a memory", forget, (False, True, True)),
    ("list_memories", "List memories", list_memories, (True, False, True)),
    ("update_memory", "Update a memory", update_memory, (False, True, False)),
    ("memory_stats", "Memory statistics", memory_stats, (True, False, True)),
    ("export_memories", "Export memories", export_memories, (True, False, True)),
    ("import_memories", "Import memories", import_memories, (False, False, True)),
)


def register(server: Any, vault: Vault) -> None:
    """The eight tools on ``server``."""
    register_table(server, vault, TOOLS)


def register_table(server: Any, vault: Vault, tools: tuple[tuple[str, str, Any, tuple[bool, bool, bool]], ...]) -> None:
    """A compat table of tools on ``server`` (the registry's wrapper: the vault filled in,
    library errors as tool errors)."""
    from mcp_types import ToolAnnotations

    from ..registry import bound, one_paragraph
    from ..seen import SeenVersions

    seen = SeenVersions()
    for name, title, function, (read_only, destructive, idempotent) in tools:
        server.add_tool(bound(_by_name(function), vault, seen), name=name, title=title,
                        description=one_paragraph(function.__doc__),
                        annotations=ToolAnnotations(read_only_hint=read_only, destructive_hint=destructive,
                                                    idempotent_hint=idempotent, open_world_hint=False))


def _by_name(function: Any) -> Any:
    """``function`` called with the arguments the SDK hands over by their wire names
    (a parameter ``lambda_`` is sent as its alias ``lambda``, a Python keyword)."""
    import functools
    import inspect
    import typing

    from pydantic.fields import FieldInfo

    aliases = {}
    for name, parameter in inspect.signature(function, eval_str=True).parameters.items():
        for meta in getattr(parameter.annotation, "__metadata__", ()) or typing.get_args(parameter.annotation)[1:]:
            if isinstance(meta, FieldInfo) and meta.alias:
                aliases[meta.alias] = name
    if not aliases:
        return function

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **{aliases.get(key, key): value for key, value in kwargs.items()})
    return call
