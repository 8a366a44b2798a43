"""The shapes the library returns: plain JSON-ready dicts, typed for readers and for
the MCP server's structured output (``recall`` returns exactly ``search --json``)."""

from __future__ import annotations

from typing import Any, NotRequired

# pydantic (the MCP server's structured output) needs typing_extensions' TypedDict on
# Python < 3.12; it is a dependency of pydantic, which mcp requires.
from typing_extensions import TypedDict


class Summary(TypedDict):
    """A memory as listed: enough to pick it, without its whole content."""

    id: str
    path: str
    version: str
    namespace: str
    tags: list[str]
    title: str
    created: str
    updated: str
    age: str
    expires: str | None
    conflict: bool  # the file holds git conflict markers: found by its first side, refused for edits
    changed: NotRequired[str]  # when the file last changed (hand edits too), in lists



class Hit(Summary):
    snippet: str
    highlights: list[list[int]]  # the matches in the snippet: [start, end) character offsets
    matched_terms: list[str]
    complete: bool  # it holds every term of the search
    score: float
    content: NotRequired[str]  # the whole body, when it is short (CONTENT_IN_HITS characters at most)
    found_by: NotRequired[str]  # "lexical", "semantic" or "both", when semantic recall ranked the hits


class SemanticStatus(TypedDict):
    """Semantic recall in ``stats`` and ``doctor``: on or not, and whether every memory
    has its vector."""

    enabled: bool  # the setting (or its default: on when the extra is installed)
    installed: bool  # the optional extra (numpy, tokenizers)
    model: NotRequired[str]
    memories: NotRequired[int]
    vectors: NotRequired[int]  # memories with a vector
    current: NotRequired[bool]  # every memory has one
    vectors_path: NotRequired[str]
    vectors_bytes: NotRequired[int]
    hint: NotRequired[str]
    error: NotRequired[str]  # the background embedder's last failure


class Statement(TypedDict):
    sql: str
    params: list[Any]


class ScoreParts(TypedDict):
    """Where one hit's score came from (``search --explain``)."""

    id: str
    score: float
    parts: dict[str, float]


class Explanation(TypedDict):
    profile: str
    statements: list[Statement]  # every statement the search ran, in order
    scores: list[ScoreParts]  # per hit, in the order of ``hits``


class SearchResult(TypedDict):
    terms: list[str]
    match_mode: str
    count: int
    hits: list[Hit]
    note: NotRequired[str]
    hint: NotRequired[str]
    corrected: NotRequired[dict[str, str]]
    next_offset: NotRequired[int]  # pass as offset for the next page; absent on the last
    explain: NotRequired[Explanation]
    related: NotRequired[RecallGraph]  # with depth >= 1: the memories linked to the hits


class Memory(Summary):
    """One memory whole: what ``show``/``get_memory`` return."""

    content: str
    source: str
    aliases: list[str]
    relations: dict[str, list[str]]
    front_matter: dict[str, Any]
    problems: list[str]


class RememberResult(TypedDict):
    memory: Memory
    deduplicated: bool
    warnings: NotRequired[list[str]]  # e.g. a credential stored because secrets.mode is "warn"


class RememberedItem(TypedDict):
    """One item of a batch remember: stored (or found already stored), or why not."""

    index: int  # its place in the batch, from 0
    ok: bool
    id: NotRequired[str]
    path: NotRequired[str]
    title: NotRequired[str]
    version: NotRequired[str]
    deduplicated: NotRequired[bool]
    error: NotRequired[str]
    warnings: NotRequired[list[str]]


class RememberBatchResult(TypedDict):
    """A batch remember, item by item: each stored or refused on its own."""

    stored: int  # new memories written
    deduplicated: int  # items already remembered (their new tags merged in)
    failed: int
    results: list[RememberedItem]


class UpdateResult(TypedDict):
    memory: Memory
    changed: bool
    warnings: NotRequired[list[str]]


class ForgetResult(TypedDict):
    id: str
    path: str
    title: str
    trashed_to: str


class ForgottenMemory(TypedDict):
    id: str
    path: str
    title: str
    trashed_to: NotRequired[str]  # absent in a dry run: nothing moved


class FailedItem(TypedDict):
    """One item of a batch that failed on its own, and why (the others went ahead)."""

    memory_id: str
    error: str


class ForgetBatchResult(TypedDict):
    """What a forget of one or several memories moved to the trash (or, in a dry run,
    would move), and each id that failed with its reason. With one memory its fields
    are also at the top, as a single forget's."""

    dry_run: bool
    count: int
    memories: list[ForgottenMemory]
    failed: list[FailedItem]
    id: NotRequired[str]
    path: NotRequired[str]
    title: NotRequired[str]
    trashed_to: NotRequired[str]


class ListResult(TypedDict):
    total: int
    count: int
    offset: int
    memories: list[Summary]
    next_offset: NotRequired[int]


class ActivityResult(TypedDict):
    """What changed in a time frame (``recent_activity``), the latest change first."""

    since: str
    until: str | None
    total: int
    count: int
    offset: int
    memories: list[Summary]
    next_offset: NotRequired[int]


class ReconcileReport(TypedDict):
    added: int
    updated: int
    removed: int
    unchanged: int
    expired: int
    problems: list[dict[str, str]]
    embedded: NotRequired[int]  # memories given a vector (semantic recall on)


class RecallProfile(TypedDict):
    """The profile recall uses when none is asked for, and why (``recall.choice``)."""

    name: str
    reason: str
    set_by: str  # "vault" (chosen from what it holds) or "setting" (recall.profile)


class Stats(TypedDict):
    vault: str
    total: int
    namespaces: dict[str, int]
    top_tags: dict[str, int]
    types: dict[str, int]  # live memories per front-matter ``type`` (those without one are not counted)
    average_importance: float | None  # over the memories with a numeric ``importance``
    relations: dict[str, int]  # links the live memories hold, per relation (body [[wikilinks]] and markdown links included)
    oldest: str | None  # the earliest ``created`` of a live memory
    newest: str | None  # the latest
    with_ttl: int
    parse_problems: list[dict[str, str]]
    conflicts: list[str]
    duplicate_ids: dict[str, list[str]]
    trash_files: int
    index_path: str
    index_bytes: int
    schema_version: int
    search_mode: str
    semantic: SemanticStatus
    recall_profile: RecallProfile


class ExportedMemory(TypedDict):
    """One memory in an export: every front-matter field as written, the body, and the
    file's raw text (absent when it is not UTF-8), which import writes back byte for byte."""

    id: str
    path: str
    front_matter: dict[str, Any]
    content: str
    raw: NotRequired[str]


class ChatNote(TypedDict):
    """A conversation of a chat export that held a credential: redacted, or left out."""

    conversation: str  # its id in the export
    title: str
    kinds: list[str]  # the kinds of credential found (never the value)


class ImportResult(TypedDict):
    """What an import did. ``updated`` and ``unchanged`` count memories a source gave
    before (importing it again: its ids are the source's keys); ``links`` the relations
    written; ``ids`` and ``paths`` are of the files written (new and updated)."""

    imported: int
    updated: int
    unchanged: int
    duplicates: int
    expired: int
    links: int
    kept: int  # memories a person edited since the last import: theirs stand, the source's changes were not applied
    forgotten: int  # memories forgotten here since an earlier import: not brought back (restore does that)
    ids: list[str]
    paths: list[str]  # vault-relative, of the files written
    conversations: NotRequired[int]  # a chat export: the conversations read
    redacted: NotRequired[list[ChatNote]]  # ... those whose credentials were redacted before writing
    refused: NotRequired[list[ChatNote]]  # ... those left out: a credential that could not be redacted


class GcResult(TypedDict):
    removed: list[str]
    kept: int
    expired_moved: int
    refused: NotRequired[list[str]]  # ledger lines naming a file outside .trash/, left alone
    note: NotRequired[str]


class TrashEntry(TypedDict):
    """A file the tool put in ``.trash/`` (forgotten, expired, a replaced version, or a
    conflict copy of a save that landed during a write)."""

    trash: str
    source: str
    id: str
    reason: str
    at: str
    sha256: str


class RestoreResult(TypedDict):
    path: str
    id: str
    restored_from: str
    reason: str


class Rewritten(TypedDict):
    path: str
    links: int


class MoveResult(TypedDict):
    """What ``move`` did. A note without an ``id`` is known by its path, so its id
    changes with it (``old_id`` -> ``new_id``); a memory with an ``id`` keeps it."""

    old_id: str
    new_id: str
    old_path: str
    new_path: str
    memory: Summary
    rewritten: list[Rewritten]  # the files whose links to the note now name its new place (the note's own relative links too)


class UnlinkResult(TypedDict):
    """What ``unlink`` did: the relation items removed from the source's front matter
    (as they were written). ``target`` is None when the link pointed at nothing."""

    source: Summary
    target: Summary | None
    relation: str
    removed: list[str]
    changed: bool


class LinkResult(TypedDict):
    """What ``link`` did: the wikilink written (or already there) in the source's front matter."""

    source: Summary
    target: Summary
    relation: str
    link: str
    changed: bool
    warnings: NotRequired[list[str]]  # a relation name that looks like a credential, stored in "warn" mode


class Edge(TypedDict):
    """One link as written: ``source`` holds it, under ``relation``, pointing at ``target`` (ids)."""

    source: str
    relation: str
    target: str


class RelatedNode(Summary):
    distance: int


class RecallGraph(TypedDict):
    """What ``recall(depth=...)`` adds: the memories linked to or from the hits (not the
    hits themselves), each at its distance from the nearest hit, and every link seen
    between any of them and the hits."""

    depth: int
    count: int
    nodes: list[RelatedNode]
    edges: list[Edge]
    aborted: bool  # the node limit cut the walk short
    note: NotRequired[str]


class RelatedResult(TypedDict):
    memory_id: str
    depth: int
    direction: str
    count: int
    nodes: list[RelatedNode]
    edges: list[Edge]
    aborted: bool
    note: NotRequired[str]


class ContextMemory(Summary):
    content: str
    estimated_tokens: int


class ContextResult(TypedDict):
    query: str
    strategy: str
    token_budget: int
    estimated_tokens: int
    estimate: str
    truncated: bool
    omitted: int
    count: int
    memories: list[ContextMemory]
    hint: NotRequired[str]


class HistoryEntry(TypedDict):
    """One commit that changed a memory's file (``history``), and what it changed there."""

    commit: str
    date: str  # the author date, ISO 8601 with its offset
    author: str
    email: str
    message: str
    status: str  # added, modified, renamed, copied, deleted, or merged (a merge: its change against its first parent)
    path: str  # the file's path in that commit: vault-relative while inside the vault
    merge: NotRequired[bool]  # a merge commit (a conflict resolved, or the other side's change brought in)
    old_path: NotRequired[str]  # renamed or copied from
    keys_changed: list[str]  # front-matter keys added, removed or changed
    lines_added: int  # body lines
    lines_removed: int
    added: list[str]  # the first body lines added and removed (all are counted)
    removed: list[str]


class HistoryResult(TypedDict):
    """A memory's history: the commits that changed its file, newest first, renames followed."""

    memory_id: str
    path: str
    repository: str  # the repository's top folder
    count: int
    truncated: bool  # more commits changed it than ``limit``
    commits: list[HistoryEntry]
    note: NotRequired[str]


class SyncResult(TypedDict):
    """What ``agent-memory sync`` did: commits made from pending tool writes, pulled and
    pushed, how the two sides were joined, and the files that merged or need a person."""

    repository: str  # the repository's top folder
    branch: str
    upstream: str  # e.g. origin/main
    committed: int  # pending tool writes committed (together, in one commit)
    pulled: int  # commits brought in
    pushed: int  # commits sent
    method: str  # "none" (nothing to pull), "fast-forward", "rebase" or "merge"
    merged: list[str]  # vault paths changed on both sides, joined without a conflict
    conflicts: list[str]  # vault paths a person must resolve (the merge is left in progress)
    indexed: int  # files the index was brought up to date with
    note: NotRequired[str]
    split: NotRequired[list[str]]  # new names given to their side of two memories added at one path
    # Files left uncommitted (and unpushed): "path: kind (fingerprint sha256:…)" for a
    # credential not in secrets.allow; files under .index/ or .trash/ that git tracks.
    withheld: NotRequired[list[str]]
    tracked_private: NotRequired[list[str]]
    hand_shared: NotRequired[list[str]]  # hand changes committed by this sync ("edited people/priya.md")
    hand_not_shared: NotRequired[list[str]]  # hand changes it left uncommitted (sync --all shares them)


class SyncPreview(TypedDict):
    """What ``sync --dry-run`` would commit: the pending tool writes' files, the hand
    changes (committed only when ``shares_hand_changes``), and what would be held back."""

    dry_run: bool
    shares_hand_changes: bool
    tool_writes: list[str]
    hand_changes: list[str]
    withheld: list[str]


class FileContent(TypedDict):
    """A vault file as ``read_file`` returns it; ``exists`` is false (and the rest empty)
    for a path inside the vault with no file there, so a caller can ask "is it there?"
    without handling an error."""

    path: str
    exists: bool
    size: int
    version: str
    memory_id: str | None
    content: str


class ExportPage(TypedDict):
    """A page of ``export_memories`` (the MCP tool pages; the CLI writes them all)."""

    total: int
    count: int
    offset: int
    memories: list[ExportedMemory]
    next_offset: NotRequired[int]
