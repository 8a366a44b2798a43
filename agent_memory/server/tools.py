"""The tools, as plain functions: each takes the vault (and, where it needs them, the
versions its connection saw or a ``Progress`` for long work) and its typed arguments,
makes one Vault call and returns the library's typed dict, so clients get an
``outputSchema`` and ``structuredContent``. ``TOOLS`` at the end lists them with their
names, titles and hints; ``registry.py`` puts them on a server.

A function's docstring is the tool's description, as the model reads it. The parameter
types (``arguments.py``) carry the rest of what the model sees. A tool's own refusals
are library errors, as the library's are: the server passes their text on.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInput
from ..limits import namespace_filter
from ..models import (
    ActivityResult,
    ContextResult,
    ExportPage,
    FileContent,
    ForgetBatchResult,
    HistoryResult,
    ImportResult,
    LinkResult,
    ListResult,
    Memory,
    MoveResult,
    ReconcileReport,
    RelatedResult,
    RememberBatchResult,
    RememberResult,
    SearchResult,
    Stats,
    UnlinkResult,
    UpdateResult,
)
from ..progress import Progress
from ..vault.vault import Vault
from .arguments import (
    Append,
    ChangedSince,
    ChangedUntil,
    Content,
    Direction,
    DryRun,
    ExpectedVersion,
    FilePath,
    ForgetId,
    ForgetIds,
    HistoryLimit,
    HitDepth,
    Importance,
    ImportFormat,
    Items,
    Limit,
    LinkDepth,
    LinkedRelation,
    LinkHolder,
    ListLimit,
    Match,
    MaxImportance,
    MemoryId,
    MemoryType,
    MinImportance,
    Namespace,
    NewContent,
    NewImportance,
    NewNamespace,
    NewPath,
    NewSource,
    NewTags,
    NewTitle,
    NewTtlDays,
    NewType,
    Offset,
    PageSize,
    PathPrefix,
    Prepend,
    Profile,
    Query,
    Relation,
    RememberItems,
    ReplaceNew,
    ReplaceOld,
    ReplaceSection,
    SectionContent,
    Semantic,
    Since,
    Source,
    Strategy,
    Tags,
    TargetId,
    TaskQuery,
    Timeframe,
    Title,
    TokenBudget,
    TtlDays,
    TypeFilter,
    UnlinkHolder,
    UnlinkTarget,
    Until,
    Visits,
    Where,
    blank_to_none,
)
from .seen import Seen

SERVER_FILLED = ("vault", "seen", "progress")
"""Parameters the server fills in for each call; a caller can never send them."""

# ----------------------------------------------------------------------------- memories


def remember(
    vault: Vault,
    seen: Seen,
    content: Content,
    namespace: Namespace = None,
    tags: Tags = None,
    title: Title = "",
    source: Source = "",
    ttl_days: TtlDays = 0,
    type: MemoryType = None,
    importance: Importance = None,
) -> RememberResult:
    """Store a durable fact, preference, decision or procedure as a new memory: one markdown
    file in the vault that people can read and edit too. The same content in the same
    namespace is not stored twice: the existing memory comes back with deduplicated=true
    and the new tags merged in. To correct or extend a memory, use update_memory instead."""
    result = vault.remember(
        content, namespace=blank_to_none(namespace) or "default", tags=tags,
        title=title, source=source, ttl_days=ttl_days, type=type, importance=importance,
    )
    seen.note(result["memory"])
    return result


def remember_many(vault: Vault, items: RememberItems) -> RememberBatchResult:
    """Store several memories in one call, each as remember would (duplicates come back
    deduplicated). Each item succeeds or fails on its own: `results` has one entry per
    item, in order, with its id and path, or the `error` that refused it; the others
    are stored all the same."""
    return vault.remember_many(items)


def get_memory(vault: Vault, seen: Seen, memory_id: MemoryId) -> Memory:
    """Read one memory whole: its content, tags, relations, front matter and `version`
    (pass that as expected_version to update_memory or forget)."""
    memory = vault.get(memory_id)
    seen.note(memory)
    return memory


def update_memory(
    vault: Vault,
    seen: Seen,
    memory_id: MemoryId,
    content: NewContent = None,
    append: Append = None,
    replace_old: ReplaceOld = None,
    replace_new: ReplaceNew = None,
    tags: NewTags = None,
    add_tags: Tags = None,
    remove_tags: Tags = None,
    namespace: NewNamespace = None,
    title: NewTitle = None,
    source: NewSource = None,
    ttl_days: NewTtlDays = None,
    type: NewType = None,
    importance: NewImportance = None,
    expected_version: ExpectedVersion = None,
    prepend: Prepend = None,
    replace_section: ReplaceSection = None,
    section_content: SectionContent = None,
) -> UpdateResult:
    """Correct or extend a memory in place instead of adding a near-duplicate. Only the
    front-matter keys that change are rewritten; everything else in the file stays.
    append, prepend and replace_old/replace_new edit the content without a version;
    replacing the whole content needs the version you read (get_memory) unless the file
    is still as this tool last wrote it; one heading's section (replace_section +
    section_content) and the whole tag set always need it. Refused if
    the result would duplicate another memory (its id is named), or if someone edited
    the file since you read it: then read it again and retry."""
    version = blank_to_none(expected_version)
    if version is None and (content is not None or tags is not None or replace_section is not None):
        version = seen.version(memory_id)
        # content without a version: the vault replaces it over its own last write only
        if version is None and (tags is not None or replace_section is not None):
            what = "tag set" if tags is not None else "section"
            raise InvalidInput(
                f"Replacing the {what} of {memory_id!r} needs the "
                "version you read: call get_memory first (or pass expected_version). To add text without "
                "reading, use append; to change one passage, replace_old/replace_new; for tags, add_tags/remove_tags."
            )
    result = vault.update(
        memory_id, content=content, append=append, replace_old=replace_old, replace_new=replace_new,
        tags=tags, add_tags=add_tags, remove_tags=remove_tags,
        namespace=blank_to_none(namespace), title=title, source=source, ttl_days=ttl_days,
        type=type, importance=importance, expected_version=version,
        prepend=prepend, replace_section=replace_section, section_content=section_content,
    )
    seen.note(result["memory"])
    return result


def forget(
    vault: Vault,
    memory_id: ForgetId = None,
    memory_ids: ForgetIds = None,
    expected_version: ExpectedVersion = None,
    dry_run: DryRun = False,
) -> ForgetBatchResult:
    """Forget memories that are wrong or no longer true: their files move to the vault's
    .trash/ folder (kept 30 days), so a person can still restore them. One memory_id, or
    memory_ids for several: each goes on its own, and one that cannot (not found,
    changed meanwhile) is listed in `failed` with its reason (expected_version only
    with one id). dry_run=true previews what would go and what would fail."""
    if (memory_id is None) == (memory_ids is None):
        raise InvalidInput("Give memory_id (one memory) or memory_ids (several), not both and not neither.")
    ids = [memory_id] if memory_id is not None else memory_ids or []
    return vault.forget_many(ids, expected_version=blank_to_none(expected_version), dry_run=dry_run)


def list_memories(
    vault: Vault,
    namespace: Namespace = None,
    tags: Tags = None,
    limit: ListLimit = 20,
    offset: Offset = 0,
    path_prefix: PathPrefix = None,
    type: TypeFilter = None,
    min_importance: MinImportance = None,
    max_importance: MaxImportance = None,
    since: ChangedSince = None,
    until: ChangedUntil = None,
    where: Where = None,
    *,
    progress: Progress | None = None,
) -> ListResult:
    """Browse memories newest first, optionally by namespace, tags, folder, front-matter
    properties (where), or by when they last changed (since/until). Pages: pass next_offset as offset to get the next page."""
    return vault.list(
        namespace=namespace_filter(namespace), tags=tags, limit=limit, offset=offset,
        path_prefix=blank_to_none(path_prefix),
        type=blank_to_none(type), min_importance=min_importance, max_importance=max_importance,
        since=blank_to_none(since), until=blank_to_none(until), where=where, progress=progress,
    )


def recent_activity(
    vault: Vault,
    timeframe: Timeframe = "7d",
    namespace: Namespace = None,
    type: TypeFilter = None,
    limit: ListLimit = 20,
    offset: Offset = 0,
) -> ActivityResult:
    """What changed lately: the memories written, edited or hand-edited (in an editor,
    by git) within the time frame, the latest change first, each with its `changed`
    time. Use it to catch up ("what changed this week"). Pages: pass next_offset as offset."""
    return vault.recent_activity(timeframe, namespace=namespace_filter(namespace), type=blank_to_none(type),
                                 limit=limit, offset=offset)


# ----------------------------------------------------------------------------- recall


def recall(
    vault: Vault,
    seen: Seen,
    query: Query,
    namespace: Namespace = None,
    tags: Tags = None,
    limit: Limit = 10,
    match: Match = "auto",
    since: Since = None,
    until: Until = None,
    path_prefix: PathPrefix = None,
    offset: Offset = 0,
    profile: Profile = None,
    depth: HitDepth = 0,
    type: TypeFilter = None,
    min_importance: MinImportance = None,
    max_importance: MaxImportance = None,
    semantic: Semantic = None,
    where: Where = None,
    *,
    progress: Progress | None = None,
) -> SearchResult:
    """Search memory with a plain question. Returns the best matches (id, path, title,
    snippet with `highlights`: the matches as [start, end] character offsets into the
    snippet, tags, age, version; the whole `content` of a
    short memory), ranked by matched words, then relevance, then recency. Memories with
    all the words come first (`complete: true`), then ones with some of them, and `note`
    says so; when nothing matches, `hint` says what to try. `next_offset` pages on.
    With depth 1-3, `related` holds the memories linked to the hits (one call, no
    `related` per hit)."""
    result = vault.search(
        query, namespace=namespace_filter(namespace), tags=tags, limit=limit, match=match,
        since=blank_to_none(since), until=blank_to_none(until), path_prefix=blank_to_none(path_prefix),
        offset=offset, profile=profile, depth=depth,
        type=blank_to_none(type), min_importance=min_importance, max_importance=max_importance,
        semantic=semantic, where=where, progress=progress,
    )
    for hit in result["hits"]:
        if "content" in hit:  # a hit that carried the whole body (SPEC §5)
            seen.note(hit)
    return result


def retrieve_context(
    vault: Vault,
    seen: Seen,
    query: TaskQuery,
    token_budget: TokenBudget = 4000,
    strategy: Strategy = "relevance",
    namespace: Namespace = None,
    tags: Tags = None,
    type: TypeFilter = None,
    min_importance: MinImportance = None,
    max_importance: MaxImportance = None,
    *,
    progress: Progress | None = None,
) -> ContextResult:
    """Whole memories (never cut) that together fit a token budget, best first, with
    their content, ready to use as background for a task. estimated_tokens uses
    characters / 4; truncated=true when some matching memories did not fit."""
    result = vault.retrieve_context(
        query, token_budget=token_budget, strategy=strategy, namespace=namespace_filter(namespace), tags=tags,
        type=blank_to_none(type), min_importance=min_importance, max_importance=max_importance, progress=progress,
    )
    for memory in result["memories"]:
        seen.note(memory)
    return result


# ----------------------------------------------------------------------------- links, moves, history


def link_memories(vault: Vault, memory_id: LinkHolder, target_id: TargetId,
                  relation: Relation = "related_to") -> LinkResult:
    """Record that one memory relates to another: adds "[[target]]" to the memory's
    front-matter property named after the relation (Obsidian shows it as a link).
    Linking twice changes nothing."""
    return vault.link(memory_id, target_id, relation=relation)


def unlink_memories(vault: Vault, memory_id: UnlinkHolder, target_id: UnlinkTarget,
                    relation: LinkedRelation = "related_to") -> UnlinkResult:
    """Remove a link that link_memories made: the "[[target]]" items of the memory's
    front-matter property named after the relation (the property goes with its last
    link). Links written in the text are left alone. Unlinking what is not linked
    changes nothing."""
    return vault.unlink(memory_id, target_id, relation=relation)


def move_memory(vault: Vault, memory_id: MemoryId, new_path: NewPath) -> MoveResult:
    """Rename or move a note and rewrite every [[wikilink]] and markdown link to it across the vault, as
    Obsidian does (aliases, #headings and ! embeds kept): all files or none. A note
    without an id is known by its path, so its id changes: the result gives old_id
    and new_id."""
    return vault.move(memory_id, new_path)


def related(vault: Vault, memory_id: MemoryId, depth: LinkDepth = 1, direction: Direction = "both",
            limit: Visits = 100) -> RelatedResult:
    """Memories linked to this one, breadth-first: front-matter relations, [[wikilinks]]
    in the text and backlinks. Returns the nodes (with their distance; the start is
    distance 0) and the edges (source id, relation, target id); aborted=true when the
    visit limit cut the walk short."""
    return vault.related(memory_id, depth=depth, direction=direction, limit=limit)


def memory_history(vault: Vault, memory_id: MemoryId, limit: HistoryLimit = 20) -> HistoryResult:
    """When a memory changed and who changed it: the git commits that changed its file,
    newest first, following renames — date, author, message, and what changed (the
    front-matter keys and the body lines added and removed). Works when the vault is a
    folder inside a repository; a vault not in git is an error that says so."""
    return vault.history(memory_id, limit=limit)


# ----------------------------------------------------------------------------- the vault as a whole


def memory_stats(vault: Vault, *, progress: Progress | None = None) -> Stats:
    """How many memories there are, per namespace, tag, type and relation (with the average
    importance, the oldest and newest), and the vault's health: files
    that failed to parse, git conflict markers, duplicate ids, trash, index size."""
    return vault.stats(progress)


def export_memories(vault: Vault, namespace: Namespace = None, limit: PageSize = 100,
                    offset: Offset = 0) -> ExportPage:
    """Every live memory as written (path, all front-matter keys, content, and the file's
    raw text), a page at a time: the format import_memories accepts, for backups and
    moving memories; importing it unchanged writes byte-identical files."""
    return vault.export_page(namespace=namespace_filter(namespace), limit=limit, offset=offset)


def import_memories(vault: Vault, items: Items, format: ImportFormat = None, *,
                    progress: Progress | None = None) -> ImportResult:
    """Add many memories at once, all or nothing. Content already in the vault (same
    namespace), or an id a live memory already has, is skipped and counted as a
    duplicate; already-expired items are counted and skipped; a taken path gets a new
    name, so nothing is overwritten. With a format, a memory the source gave before is
    updated where the source changed it (counted as updated, else unchanged)."""
    return vault.import_memories(items, format=format, progress=progress)


def read_file(vault: Vault, path: FilePath) -> FileContent:
    """Read a text file of the vault exactly as it is on disk (front matter included),
    up to 1 MB; a path with no file there answers exists: false. Paths outside the vault, through symlinks out of it, or into hidden
    folders (.git, .index) are refused, and so are binary files."""
    return vault.read_file(path)


def reindex(vault: Vault, *, progress: Progress | None = None) -> ReconcileReport:
    """Rebuild the search index from the files alone (the files are the truth; the
    index is a cache). Use it if results look stale or memory_stats shows problems."""
    return vault.reindex(progress=progress)


# ----------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Hints:
    """What a client may assume about a tool (all three always said; none reaches
    outside the vault)."""

    read_only: bool
    destructive: bool
    idempotent: bool


READ = Hints(read_only=True, destructive=False, idempotent=True)
ADDS = Hints(read_only=False, destructive=False, idempotent=True)
"""Writes that add or rebuild and lose nothing; doing them twice is doing them once."""


@dataclass(frozen=True)
class Tool:
    """One row of the table: the name and title clients see, the function, its hints."""

    name: str
    function: Callable[..., Any]
    title: str
    hints: Hints


TOOLS: tuple[Tool, ...] = (
    Tool("remember", remember, "Remember a fact", ADDS),
    Tool("remember_many", remember_many, "Remember several facts", ADDS),
    Tool("recall", recall, "Recall memories", READ),
    Tool("get_memory", get_memory, "Read a memory", READ),
    Tool("update_memory", update_memory, "Update a memory", Hints(read_only=False, destructive=True, idempotent=False)),
    Tool("forget", forget, "Forget memories", Hints(read_only=False, destructive=True, idempotent=True)),
    Tool("list_memories", list_memories, "List memories", READ),
    Tool("recent_activity", recent_activity, "Recent activity", READ),
    Tool("link_memories", link_memories, "Link two memories", ADDS),
    Tool("unlink_memories", unlink_memories, "Unlink two memories",
         Hints(read_only=False, destructive=True, idempotent=True)),
    Tool("move_memory", move_memory, "Rename or move a note", Hints(read_only=False, destructive=True, idempotent=False)),
    Tool("related", related, "Related memories", READ),
    Tool("memory_history", memory_history, "A memory's history", READ),
    Tool("retrieve_context", retrieve_context, "Retrieve context for a task", READ),
    Tool("memory_stats", memory_stats, "Memory statistics", READ),
    Tool("export_memories", export_memories, "Export memories", READ),
    Tool("import_memories", import_memories, "Import memories", Hints(read_only=False, destructive=True, idempotent=True)),
    Tool("read_file", read_file, "Read a vault file", READ),
    Tool("reindex", reindex, "Rebuild the index", ADDS),
)
