"""The fourteen tools. Each one accepts what models actually send, makes one Vault call
and returns the library's typed dict, so clients get an ``outputSchema`` and
``structuredContent``. Library errors become ``ToolError``: in mcp 2.3 that is the only
exception whose text reaches the model, and the library's text says what to do next.

(No ``from __future__ import annotations`` here: the SDK evaluates each tool's
signature, and the ``Annotated`` aliases below must be real objects.)
"""

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from .. import graph
from ..errors import MemoryError_
from ..models import (
    ContextResult,
    ExportPage,
    FileContent,
    ForgetResult,
    ImportResult,
    LinkResult,
    ListResult,
    Memory,
    ReconcileReport,
    RelatedResult,
    RememberResult,
    SearchResult,
    Stats,
    UpdateResult,
)
from ..query import MAX_QUERY_CHARS
from ..limits import MAX_BATCH, MAX_CONTENT, MAX_LIMIT, MAX_TAG_LEN
from ..vault import MAX_TOKEN_BUDGET, Vault

# ----------------------------------------------------------------------------- argument types

MemoryId = Annotated[
    str,
    Field(
        description="The memory's id, or its vault-relative path (e.g. people/priya.md), "
        "as recall and list_memories return them.",
        min_length=1,
        max_length=1024,
    ),
]
TargetId = Annotated[
    str,
    Field(description="The memory to link to: its id or vault-relative path.", min_length=1, max_length=1024),
]
Namespace = Annotated[
    str | None,
    Field(
        description="One word that groups memories, e.g. 'people' or 'project-x' (no spaces or '/'). "
        "Omit it for all namespaces (when reading) or 'default' (when writing).",
        max_length=MAX_TAG_LEN,
    ),
]
Tags = Annotated[  # passed as sent: the vault splits them (note.split_tags), also '["a", "b"]'
    list[str] | str | None,
    Field(
        description="Tags as a list (['billing', 'acme']) or one comma-separated string ('billing, acme'); "
        "lowercase words, no spaces (use '-'). When filtering, memories must have all of them.",
    ),
]
ExpectedVersion = Annotated[
    str | None,
    Field(
        description="The version get_memory (or recall) returned. If given, the change is refused "
        "when the file changed on disk since then (a human edited it).",
        max_length=64,
    ),
]
Limit = Annotated[int, Field(description=f"Most results to return (1-{MAX_LIMIT}).", ge=1, le=MAX_LIMIT)]
Offset = Annotated[int, Field(description="How many to skip, for paging (use next_offset).", ge=0)]
PathPrefix = Annotated[
    str | None,
    Field(description="Only files under this vault folder, e.g. 'people/' or '2026/07/'.", max_length=1024),
]


def _one_paragraph(doc: str | None) -> str:
    """A docstring as the tool description: the wrapped lines joined into one."""
    return " ".join(inspect.cleandoc(doc or "").split())


def _blank_to_none(value: str | None) -> str | None:
    return (value.strip() or None) if isinstance(value, str) else value


# ----------------------------------------------------------------------------- annotations


def hints(*, read_only: bool, destructive: bool, idempotent: bool) -> ToolAnnotations:
    """All four hints, always explicit: unset ones default to destructive and open-world."""
    return ToolAnnotations(
        readOnlyHint=read_only, destructiveHint=destructive, idempotentHint=idempotent, openWorldHint=False
    )


READ = hints(read_only=True, destructive=False, idempotent=True)

F = TypeVar("F", bound=Callable[..., Any])


def library_errors(fn: F) -> F:
    """Re-raise the library's own errors as ToolError, keeping their text."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MemoryError_ as exc:
            raise ToolError(str(exc)) from exc

    return wrapper  # type: ignore[return-value]


def register_tools(server: MCPServer, vault: Vault) -> None:
    """Add every tool, each closing over ``vault``."""

    def tool(name: str, title: str, annotations: ToolAnnotations) -> Callable[[F], F]:
        def add(fn: F) -> F:
            server.add_tool(
                library_errors(fn), name=name, title=title,
                description=_one_paragraph(fn.__doc__), annotations=annotations,
            )
            return fn

        return add

    @tool("remember", "Remember a fact", hints(read_only=False, destructive=False, idempotent=True))
    def remember(
        content: Annotated[
            str,
            Field(
                description="The memory itself: one self-contained fact, preference, decision or short "
                "procedure in markdown. Name people, systems and dates explicitly.",
                min_length=1,
                max_length=MAX_CONTENT,
            ),
        ],
        namespace: Namespace = None,
        tags: Tags = None,
        title: Annotated[str, Field(description="A short title (default: the first words).", max_length=200)] = "",
        source: Annotated[
            str, Field(description="Where the fact came from: a person, document, URL or conversation.", max_length=500)
        ] = "",
        ttl_days: Annotated[
            float,
            Field(
                description="Days until the memory expires (0 = never). Use it for short-lived facts "
                "such as a temporary workaround or this week's on-call.",
                ge=0,
                le=36500,
            ),
        ] = 0,
    ) -> RememberResult:
        """Store a durable fact, preference, decision or procedure as a new memory: one markdown
        file in the vault that people can read and edit too. The same content in the same
        namespace is not stored twice: the existing memory comes back with deduplicated=true
        and the new tags merged in. To correct or extend a memory, use update_memory instead."""
        return vault.remember(
            content, namespace=_blank_to_none(namespace) or "default", tags=tags,
            title=title, source=source, ttl_days=ttl_days,
        )

    @tool("recall", "Recall memories", READ)
    def recall(
        query: Annotated[
            str,
            Field(
                description="A plain question or a few keywords, e.g. 'When does ACME prefer to deploy?'.",
                max_length=MAX_QUERY_CHARS,
            ),
        ],
        namespace: Namespace = None,
        tags: Tags = None,
        limit: Limit = 10,
        match: Annotated[
            Literal["auto", "all", "any"],
            Field(description="auto: memories with all the words, else those with most of them; all; any."),
        ] = "auto",
        since: Annotated[
            str | None, Field(description="Only memories created on or after this date (2026-07-20).", max_length=40)
        ] = None,
        until: Annotated[
            str | None, Field(description="Only memories created before this date.", max_length=40)
        ] = None,
        path_prefix: PathPrefix = None,
    ) -> SearchResult:
        """Search memory with a plain question. Returns the best matches (id, path, title,
        snippet with matches in [brackets], tags, age, version), ranked by matched words,
        then relevance, then recency. When no memory has all the words, the hits match some
        of them and `note` says so; when nothing matches, `hint` says what to try."""
        return vault.search(
            query, namespace=_blank_to_none(namespace), tags=tags, limit=limit, match=match,
            since=_blank_to_none(since), until=_blank_to_none(until), path_prefix=_blank_to_none(path_prefix),
        )

    @tool("get_memory", "Read a memory", READ)
    def get_memory(memory_id: MemoryId) -> Memory:
        """Read one memory whole: its content, tags, relations, front matter and `version`
        (pass that as expected_version to update_memory or forget)."""
        return vault.get(memory_id)

    @tool("update_memory", "Update a memory", hints(read_only=False, destructive=True, idempotent=False))
    def update_memory(
        memory_id: MemoryId,
        content: Annotated[
            str | None,
            Field(description="New content (replaces the whole body). Omit to keep it.", min_length=1, max_length=MAX_CONTENT),
        ] = None,
        add_tags: Tags = None,
        remove_tags: Tags = None,
        namespace: Annotated[
            str | None, Field(description="Move the memory to this namespace (one word).", max_length=MAX_TAG_LEN)
        ] = None,
        title: Annotated[str | None, Field(description="New title ('' removes it).", max_length=200)] = None,
        source: Annotated[str | None, Field(description="New source ('' removes it).", max_length=500)] = None,
        ttl_days: Annotated[
            float | None,
            Field(description="Expire this many days from now; 0 removes the expiry. Omit to keep it.", ge=0, le=36500),
        ] = None,
        expected_version: ExpectedVersion = None,
    ) -> UpdateResult:
        """Correct or extend a memory in place instead of adding a near-duplicate. Only the
        front-matter keys that change are rewritten; everything else in the file stays.
        Refused if the result would duplicate another memory (its id is named) or, with
        expected_version, if someone edited the file since you read it."""
        return vault.update(
            memory_id, content=content, add_tags=add_tags, remove_tags=remove_tags,
            namespace=_blank_to_none(namespace), title=title, source=source, ttl_days=ttl_days,
            expected_version=_blank_to_none(expected_version),
        )

    @tool("forget", "Forget a memory", hints(read_only=False, destructive=True, idempotent=True))
    def forget(memory_id: MemoryId, expected_version: ExpectedVersion = None) -> ForgetResult:
        """Forget a memory that is wrong or no longer true: its file moves to the vault's
        .trash/ folder (kept 30 days), so a person can still restore it."""
        return vault.forget(memory_id, expected_version=_blank_to_none(expected_version))

    @tool("list_memories", "List memories", READ)
    def list_memories(
        namespace: Namespace = None,
        tags: Tags = None,
        limit: Annotated[int, Field(description=f"How many to return (1-{MAX_LIMIT}).", ge=1, le=MAX_LIMIT)] = 20,
        offset: Offset = 0,
        path_prefix: PathPrefix = None,
    ) -> ListResult:
        """Browse memories newest first, optionally by namespace, tags or folder. Pages:
        pass next_offset as offset to get the next page."""
        return vault.list(
            namespace=_blank_to_none(namespace), tags=tags, limit=limit, offset=offset,
            path_prefix=_blank_to_none(path_prefix),
        )

    @tool("link_memories", "Link two memories", hints(read_only=False, destructive=False, idempotent=True))
    def link_memories(
        memory_id: Annotated[
            str,
            Field(description="The memory that gets the link (its id or vault-relative path).", min_length=1, max_length=1024),
        ],
        target_id: TargetId,
        relation: Annotated[
            str,
            Field(
                description="The kind of link, one word: related_to, depends_on, part_of, supersedes…",
                pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$",
            ),
        ] = "related_to",
    ) -> LinkResult:
        """Record that one memory relates to another: adds "[[target]]" to the memory's
        front-matter property named after the relation (Obsidian shows it as a link).
        Linking twice changes nothing."""
        return vault.link(memory_id, target_id, relation=relation)

    @tool("related", "Related memories", READ)
    def related(
        memory_id: MemoryId,
        depth: Annotated[
            int, Field(description=f"How many links away to go (0-{graph.MAX_DEPTH}).", ge=0, le=graph.MAX_DEPTH)
        ] = 1,
        direction: Annotated[
            Literal["out", "in", "both"],
            Field(description="out: links this memory holds; in: memories linking to it (backlinks); both."),
        ] = "both",
        limit: Annotated[
            int,
            Field(description=f"Most memories to visit, the start included (1-{graph.MAX_VISITS}).", ge=1, le=graph.MAX_VISITS),
        ] = 100,
    ) -> RelatedResult:
        """Memories linked to this one, breadth-first: front-matter relations, [[wikilinks]]
        in the text and backlinks. Returns the nodes (with their distance; the start is
        distance 0) and the edges (source id, relation, target id); aborted=true when the
        visit limit cut the walk short."""
        return vault.related(memory_id, depth=depth, direction=direction, limit=limit)

    @tool("retrieve_context", "Retrieve context for a task", READ)
    def retrieve_context(
        query: Annotated[
            str,
            Field(
                description="What the context is for, as a plain question or keywords. "
                "Empty: the newest memories.",
                max_length=MAX_QUERY_CHARS,
            ),
        ],
        token_budget: Annotated[
            int, Field(description="Most tokens the memories may take together.", ge=1, le=MAX_TOKEN_BUDGET)
        ] = 4000,
        strategy: Annotated[
            Literal["relevance", "recency", "importance"],
            Field(
                description="Which memories first: relevance (best match), recency (latest update) or "
                "importance (an 'importance:' number in the file, then how many memories link to it)."
            ),
        ] = "relevance",
        namespace: Namespace = None,
        tags: Tags = None,
    ) -> ContextResult:
        """Whole memories (never cut) that together fit a token budget, best first, with
        their content, ready to use as background for a task. estimated_tokens uses
        characters / 4; truncated=true when some matching memories did not fit."""
        return vault.retrieve_context(
            query, token_budget=token_budget, strategy=strategy, namespace=_blank_to_none(namespace), tags=tags
        )

    @tool("memory_stats", "Memory statistics", READ)
    def memory_stats() -> Stats:
        """How many memories there are, per namespace and tag, and the vault's health: files
        that failed to parse, git conflict markers, duplicate ids, trash, index size."""
        return vault.stats()

    @tool("export_memories", "Export memories", READ)
    def export_memories(
        namespace: Namespace = None,
        limit: Annotated[int, Field(description=f"How many per page (1-{MAX_BATCH}).", ge=1, le=MAX_BATCH)] = 100,
        offset: Offset = 0,
    ) -> ExportPage:
        """Every live memory as written (path, all front-matter keys, content), a page at a
        time: the format import_memories accepts, for backups and moving memories."""
        return vault.export_page(namespace=_blank_to_none(namespace), limit=limit, offset=offset)

    @tool("import_memories", "Import memories", hints(read_only=False, destructive=True, idempotent=True))
    def import_memories(
        items: Annotated[
            list[dict[str, Any]],
            Field(
                description="Memories as export_memories returns them ({path, front_matter, content}) or "
                "as {content, namespace, tags, title, source}. All or nothing: one bad item and "
                f"nothing is written. At most {MAX_BATCH}.",
                min_length=1,
                max_length=MAX_BATCH,
            ),
        ],
    ) -> ImportResult:
        """Add many memories at once, all or nothing. Content already in the vault (same
        namespace), or an id a live memory already has, is skipped and counted as a
        duplicate; already-expired items are counted and skipped; a taken path gets a new
        name, so nothing is overwritten."""
        return vault.import_memories(items)

    @tool("read_file", "Read a vault file", READ)
    def read_file(
        path: Annotated[
            str,
            Field(
                description="A file inside the vault: relative to it (people/priya.md) or absolute. "
                "Hidden folders other than .prompts/ are off limits.",
                min_length=1,
                max_length=4096,
            ),
        ],
    ) -> FileContent:
        """Read a text file of the vault exactly as it is on disk (front matter included),
        up to 1 MB. Paths outside the vault, through symlinks out of it, or into hidden
        folders (.git, .index) are refused, and so are binary files."""
        return vault.read_file(path)

    @tool("reindex", "Rebuild the index", hints(read_only=False, destructive=False, idempotent=True))
    def reindex() -> ReconcileReport:
        """Rebuild the search index from the files alone (the files are the truth; the
        index is a cache). Use it if results look stale or memory_stats shows problems."""
        return vault.reindex()
