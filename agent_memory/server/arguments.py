"""What each tool accepts, and how a call's arguments are checked as sent.

The types are the tools' parameters as the model sees them: each ``Annotated`` alias
carries the description and bounds that become the tool's input schema. The check (a
server middleware) reads a call's arguments before the SDK does, so that an unknown
name is refused with the closest real one and each problem is one sentence.
"""

import dataclasses
import difflib
import functools
import inspect
import json
import logging
import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata, func_metadata
from mcp_types import CallToolResult, TextContent
from pydantic import Field, ValidationError

from ..limits import (MAX_BATCH, MAX_CONTENT, MAX_IMPORTANCE, MAX_LIMIT, MAX_OFFSET, MAX_SOURCE, MAX_TAG_LEN, MAX_TITLE,
                      MAX_TTL_DAYS, MAX_TYPE_LEN, MEMORY_TYPES)
from ..recall import graph
from ..recall.terms import MAX_QUERY_CHARS
from ..vault.reads import MAX_TOKEN_BUDGET

log = logging.getLogger("agent_memory.server")

# ----------------------------------------------------------------------------- shared by several tools

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
Tags = Annotated[  # passed as sent: the vault splits them (note.tags.split_tags), also '["a", "b"]'
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
ListLimit = Annotated[int, Field(description=f"How many to return (1-{MAX_LIMIT}).", ge=1, le=MAX_LIMIT)]
Offset = Annotated[
    int, Field(description="How many to skip, for paging (use next_offset).", ge=0, le=MAX_OFFSET)
]
MemoryType = Annotated[
    str | None,
    Field(description="The kind of memory, free text; suggested: " + ", ".join(MEMORY_TYPES) + ".",
          max_length=MAX_TYPE_LEN),
]
Importance = Annotated[
    float | None, Field(description=f"How much it matters, 0-{MAX_IMPORTANCE} (a number).", ge=0, le=MAX_IMPORTANCE)
]
TypeFilter = Annotated[
    str | None,
    Field(description="Only memories of this type (case-insensitive), e.g. decision or lesson.", max_length=MAX_TYPE_LEN),
]
MinImportance = Annotated[
    float | None, Field(description=f"Only memories with an importance of at least this (0-{MAX_IMPORTANCE}).",
                        ge=0, le=MAX_IMPORTANCE),
]
MaxImportance = Annotated[
    float | None, Field(description=f"Only memories with an importance of at most this (0-{MAX_IMPORTANCE}).",
                        ge=0, le=MAX_IMPORTANCE),
]
ChangedSince = Annotated[
    str | None,
    Field(description="Only memories changed (hand edits included) at or after this: a span back from now "
          "(7d, 24h, 2w) or a date (2026-07-20); the latest change then comes first.", max_length=40),
]
ChangedUntil = Annotated[
    str | None,
    Field(description="Only memories last changed before this: a span back from now (1d) or a date.", max_length=40),
]
Timeframe = Annotated[
    str,
    Field(description="How far back: a span from now (7d, 24h, 30m, 2w) or a date or timestamp (2026-07-20).",
          min_length=1, max_length=40),
]
Where = Annotated[
    list[str] | dict[str, str | int | float | bool | None] | None,
    Field(description="Only memories whose front-matter properties match: ['status=done', 'project=acme'] or "
          "{'status': 'done'}; a key alone (or null) means the property is present. A list property matches "
          "when it holds the value; names and text compare case-insensitively; all conditions must hold."),
]
PathPrefix = Annotated[
    str | None,
    Field(description="Only files under this vault folder, e.g. 'people/' or '2026/07/'.", max_length=1024),
]


def blank_to_none(value: str | None) -> str | None:
    """Text that is only blanks means "not given", as models send an empty string for it."""
    return (value.strip() or None) if isinstance(value, str) else value


# ----------------------------------------------------------------------------- remember

Content = Annotated[
    str,
    Field(
        description="The memory itself: one self-contained fact, preference, decision or short "
        "procedure in markdown. Name people, systems and dates explicitly.",
        min_length=1,
        max_length=MAX_CONTENT,
    ),
]
Title = Annotated[str, Field(description="A short title (default: the first words).", max_length=MAX_TITLE)]
Source = Annotated[
    str, Field(description="Where the fact came from: a person, document, URL or conversation.", max_length=MAX_SOURCE)
]
TtlDays = Annotated[
    float,
    Field(
        description="Days until the memory expires (0 = never; else at least one minute, 0.0007). "
        "Use it for short-lived facts such as a temporary workaround or this week's on-call.",
        ge=0,
        le=MAX_TTL_DAYS,
    ),
]

RememberItems = Annotated[
    list[dict[str, Any]],
    Field(
        description="The memories to store, each an object like remember's arguments: {content, namespace, tags, "
        "title, source, ttl_days, type, importance} (content required). Each is stored or refused on its own; "
        f"at most {MAX_BATCH}.",
        min_length=1,
        max_length=MAX_BATCH,
    ),
]

# ----------------------------------------------------------------------------- recall

Query = Annotated[
    str,
    Field(
        description="A plain question or a few keywords, e.g. 'When does ACME prefer to deploy?'.",
        max_length=MAX_QUERY_CHARS,
    ),
]
Match = Annotated[
    Literal["auto", "all", "any"],
    Field(description="auto: memories with all the words first, then those with most of them; all; any."),
]
Since = Annotated[
    str | None, Field(description="Only memories created on or after this date (2026-07-20) or span back from now (7d).", max_length=40)
]
Until = Annotated[str | None, Field(description="Only memories created before this date.", max_length=40)]
Profile = Annotated[
    Literal["facts", "conversation", "notes"] | None,
    Field(description="Ranking: facts (a store of facts), conversation (dialog turns: a memory next to "
          "a match is lifted) or notes (hand-written notes: title, aliases and body weighed apart); "
          "default: the vault's recall.profile setting, else the profile chosen from what the vault holds."),
]
HitDepth = Annotated[
    int,
    Field(description=f"Also return the memories linked to or from the hits, up to this many links away "
          f"(0-{graph.MAX_DEPTH}; 0: none), as `related` (nodes with distance, edges).",
          ge=0, le=graph.MAX_DEPTH),
]
Semantic = Annotated[
    bool | None,
    Field(description="When no memory holds every word, rank memories by meaning (embeddings; needs the "
          "optional semantic extra); hits then say found_by. Default: the vault's recall.semantic setting."),
]

# ----------------------------------------------------------------------------- update_memory

NewContent = Annotated[
    str | None,
    Field(description="New content: replaces the whole body. Needs the version you read (get_memory "
          "gives it, or pass expected_version); the old body is kept in the vault's trash.",
          min_length=1, max_length=MAX_CONTENT),
]
Append = Annotated[
    str | None,
    Field(description="Text to add at the end of the content (needs no version: it cannot overwrite "
          "what someone else just wrote).", min_length=1, max_length=MAX_CONTENT),
]
ReplaceOld = Annotated[
    str | None,
    Field(description="Exact text in the content to replace with replace_new; it must occur exactly once.",
          min_length=1, max_length=MAX_CONTENT),
]
ReplaceNew = Annotated[
    str | None, Field(description="What replace_old becomes ('' deletes it).", max_length=MAX_CONTENT)
]
Prepend = Annotated[
    str | None,
    Field(description="Text to add at the start of the content, after a first-line '# Title' heading if there "
          "is one (needs no version, like append).", min_length=1, max_length=MAX_CONTENT),
]
ReplaceSection = Annotated[
    str | None,
    Field(description="A heading whose section to replace with section_content: '## Status' (that level) or "
          "'Status' (any level, if only one); case-insensitive. The heading line stays, and so does every "
          "other section. Needs the version you read, like content.", min_length=1, max_length=500),
]
SectionContent = Annotated[
    str | None,
    Field(description="What the replace_section section holds from now on ('' empties it), up to the next "
          "heading of the same or a higher level.", max_length=MAX_CONTENT),
]
NewTags = Annotated[
    list[str] | str | None,
    Field(description="The whole new tag set, replacing the current one (needs the version you read). "
          "To add or remove a few, use add_tags/remove_tags."),
]
NewNamespace = Annotated[
    str | None, Field(description="Move the memory to this namespace (one word).", max_length=MAX_TAG_LEN)
]
NewTitle = Annotated[str | None, Field(description="New title ('' removes it).", max_length=MAX_TITLE)]
NewSource = Annotated[str | None, Field(description="New source ('' removes it).", max_length=500)]
NewTtlDays = Annotated[
    float | None,
    Field(
        description="Expire this many days from now (at least one minute, 0.0007); 0 removes the expiry. "
        "Omit to keep it.",
        ge=0, le=MAX_TTL_DAYS,
    ),
]
NewType = Annotated[
    str | None,
    Field(description="New type, free text; suggested: " + ", ".join(MEMORY_TYPES) + " ('' removes it).",
          max_length=MAX_TYPE_LEN),
]
NewImportance = Annotated[
    Annotated[float, Field(ge=0, le=MAX_IMPORTANCE)] | Literal[""] | None,
    Field(description=f"New importance, 0-{MAX_IMPORTANCE} (a number); '' removes it."),
]

# ----------------------------------------------------------------------------- forget

ForgetId = Annotated[
    str | None,
    Field(description="The memory to forget: its id or vault-relative path. For several, use memory_ids.",
          min_length=1, max_length=1024),
]
ForgetIds = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=1024)]] | None,
    Field(description=f"Several memories to forget at once (ids or paths), each on its own (the result's "
          f"`failed` lists those that could not go, with why); at most {MAX_BATCH}.",
          min_length=1, max_length=MAX_BATCH),
]
DryRun = Annotated[bool, Field(description="Only say what would be forgotten (count, memories); change nothing.")]

# ----------------------------------------------------------------------------- links and moves

LinkHolder = Annotated[
    str,
    Field(description="The memory that gets the link (its id or vault-relative path).", min_length=1, max_length=1024),
]
UnlinkHolder = Annotated[
    str,
    Field(description="The memory that holds the link (its id or vault-relative path).", min_length=1, max_length=1024),
]
UnlinkTarget = Annotated[
    str,
    Field(description="The memory linked to: its id or vault-relative path, or the link's text if that "
          "memory is gone.", min_length=1, max_length=1024),
]
Relation = Annotated[
    str,
    Field(
        description="The kind of link, one word: related_to, depends_on, part_of, supersedes…",
        pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$",
    ),
]
LinkedRelation = Annotated[
    str,
    Field(
        description="The relation the link was made with (link_memories' relation), e.g. related_to.",
        pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$",
    ),
]
NewPath = Annotated[
    str,
    Field(
        description="Where the note goes, relative to the vault (people/priya.md; .md is added if "
        "missing; a folder ending in '/' keeps the file name). Never over an existing file.",
        min_length=1,
        max_length=1024,
    ),
]
LinkDepth = Annotated[
    int, Field(description=f"How many links away to go (0-{graph.MAX_DEPTH}).", ge=0, le=graph.MAX_DEPTH)
]
Direction = Annotated[
    Literal["out", "in", "both"],
    Field(description="out: links this memory holds; in: memories linking to it (backlinks); both."),
]
Visits = Annotated[
    int,
    Field(description=f"Most memories to visit, the start included (1-{graph.MAX_VISITS}).", ge=1, le=graph.MAX_VISITS),
]
HistoryLimit = Annotated[
    int,
    Field(description=f"Most commits to return, newest first (1-{MAX_LIMIT}).", ge=1, le=MAX_LIMIT),
]

# ----------------------------------------------------------------------------- retrieve_context

TaskQuery = Annotated[
    str,
    Field(
        description="What the context is for, as a plain question or keywords. "
        "Empty: the newest memories.",
        max_length=MAX_QUERY_CHARS,
    ),
]
TokenBudget = Annotated[
    int, Field(description="Most tokens the memories may take together.", ge=1, le=MAX_TOKEN_BUDGET)
]
Strategy = Annotated[
    Literal["relevance", "recency", "importance"],
    Field(
        description="Which memories first: relevance (best match), recency (latest update) or "
        "importance (an 'importance:' number in the file, then how many memories link to it)."
    ),
]

# ----------------------------------------------------------------------------- export, import, files

PageSize = Annotated[int, Field(description=f"How many per page (1-{MAX_BATCH}).", ge=1, le=MAX_BATCH)]
Items = Annotated[
    list[dict[str, Any]],
    Field(
        description="Memories as export_memories returns them ({path, front_matter, content, raw}) or "
        "as {content, namespace, tags, title, source}. All or nothing: one bad item and "
        f"nothing is written. At most {MAX_BATCH}.",
        min_length=1,
        max_length=MAX_BATCH,
    ),
]
ImportFormat = Annotated[
    Literal["mcp-knowledge-graph", "mcp-memory-vault", "memory-mcp", "chatgpt", "claude"] | None,
    Field(
        description="Leave out for this tool's own export. mcp-knowledge-graph: items are the records of "
        "a memory.jsonl ({type: entity|relation, ...}) or read_graph's entities and relations, kept exactly "
        "as serve --compat knowledge-graph keeps its graph. "
        "mcp-memory-vault: items are its export's memories (created_at, updated_at, expires_at kept). "
        "memory-mcp: items are its memories (hash, content, tags, memory_type, importance, created_at) "
        "and relationships (from_hash, to_hash, relation_type). chatgpt, claude: items are conversations "
        "of a ChatGPT or Claude data export's conversations.json, one note per conversation. With a format, "
        "importing the same "
        "source again updates what changed and adds nothing twice; links resolve across calls. "
        "(AgentMemory's folder is imported with `agent-memory import --from agentmemory`.)",
    ),
]
FilePath = Annotated[
    str,
    Field(
        description="A file inside the vault: relative to it (people/priya.md) or absolute. "
        "Hidden folders other than .prompts/ are off limits.",
        min_length=1,
        max_length=4096,
    ),
]

# ----------------------------------------------------------------------------- arguments as sent
#
# The SDK validates a call's arguments with a pydantic model that drops unknown keys and
# reports problems as pydantic's multi-line dump. Before that, a server middleware (the
# SDK's documented hook to "observe, refuse, or rewrite" a message) checks the arguments
# exactly as sent: unknown names are refused with the closest real one, NUL characters
# anywhere are refused, and the schema's own validation (the SDK's func_metadata, the
# same model it validates with) is turned into one sentence per problem.

# Names models often send for a parameter this server spells differently.
_ALIASES = {
    "text": "content", "body": "content", "fact": "content", "note": "content",
    "id": "memory_id", "memory": "memory_id", "target": "target_id", "to": "target_id",
    "q": "query", "question": "query", "search": "query", "keywords": "query",
    "k": "limit", "n": "limit", "top_k": "limit", "topk": "limit", "max_results": "limit", "count": "limit",
    "tag": "tags", "ttl": "ttl_days", "days": "ttl_days", "version": "expected_version",
    "ns": "namespace", "file": "path", "filename": "path", "file_path": "path",
    "prefix": "path_prefix", "folder": "path_prefix", "skip": "offset", "cursor": "offset", "type": "relation",
    "budget": "token_budget", "max_tokens": "token_budget", "memories": "items",
    "memory_type": "type", "kind": "type", "min_importance": "importance",
}

# Other memory servers' argument names that mean exactly one of ours (the seeds:
# mcp-memory-vault's `tag` and `memories`, memory-mcp's `memory_type`, AgentMemory's
# `filePath`, `keywords` and `summary`): accepted, and the reply names ours. `keywords` are
# tags only where a memory is written: AgentMemory's search keywords boost terms, they
# don't filter, so recall refuses them with a suggestion like any unknown name.
SEED_NAMES = {"tag": "tags", "memory_type": "type", "memories": "items", "filePath": "path",
              "keywords": "tags", "summary": "title"}
_SEED_NAME_ONLY_IN = {"keywords": frozenset({"remember", "update_memory"})}

# Parameters holding an id: a number sent for one means its digits (AgentMemory's ids
# are row numbers; a path or our id is text), but only where reading is all the tool
# does: a number could also name a note ("12.md"), and a tool that changes or forgets
# must not act on a guess. The others refuse it as "must be text".
_ID_PARAMETERS = frozenset({"memory_id", "target_id"})
_NUMBER_AS_ID = frozenset({"get_memory", "related", "memory_history"})

# Values that can only mean "leave it as it is", by tool: update_memory(content="") and
# update_memory(ttl_days=-1), as the seeds' update tools read them.
_KEEP_VALUES: dict[str, dict[str, Any]] = {"update_memory": {"content": "", "ttl_days": -1}}

# Sentences for a schema pattern, by parameter.
_PATTERN_HINTS = {
    "relation": "one word of letters, digits, '_' or '-' that starts with a letter (e.g. related_to, depends_on)",
}

# Words for the members of a union, as pydantic names them in an error's location.
_TYPE_WORDS = {
    "str": "text", "list[str]": "a list of text", "int": "a whole number", "float": "a number",
    "bool": "true or false", "dict[str,any]": "an object", "list[dict[str,any]]": "a list of objects",
}


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def closest_name(sent: str, names: list[str]) -> str | None:
    """The parameter a caller most likely meant by ``sent`` (memoryId → memory_id)."""
    squashed = {_squash(n): n for n in names}
    key = _squash(sent)
    if key in squashed:
        return squashed[key]
    alias = _ALIASES.get(sent.lower()) or _ALIASES.get(key)
    if alias in names:
        return alias
    near = difflib.get_close_matches(key, list(squashed), n=1, cutoff=0.6)
    if near:
        return squashed[near[0]]
    containing = [n for k, n in squashed.items() if key and (key in k or k in key)]
    return containing[0] if len(containing) == 1 else None


def _shown(value: Any, most: int = 60) -> str:
    """A value as the caller sent it (JSON), cut short."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= most else text[: most - 1] + "…"


def _where(loc: tuple[Any, ...]) -> str:
    """``('items', 2, 'content')`` → ``items[2].content``."""
    out = str(loc[0])
    for part in loc[1:]:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _nul_paths(value: Any, loc: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Where a NUL character hides in an argument: in text, keys, list items, objects."""
    if isinstance(value, str):
        return [loc] if "\x00" in value else []
    found: list[tuple[Any, ...]] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and "\x00" in key:
                found.append(loc)
            found += _nul_paths(item, (*loc, str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _nul_paths(item, (*loc, i))
    return found


def _error_sentence(error: Mapping[str, Any]) -> str:
    """One pydantic error as one sentence that names the argument and what it needs."""
    where, kind, ctx = _where(error["loc"]), error["type"], error.get("ctx") or {}
    got = _shown(error.get("input"))
    if kind == "missing":
        return f"{where} is required."
    if kind == "string_too_short":
        n = ctx.get("min_length", 1)
        return f"{where} must not be empty." if n == 1 else f"{where} must be at least {n} characters."
    if kind == "string_too_long":
        return f"{where} is {len(error['input']):,} characters; the limit is {ctx['max_length']:,}."
    if kind == "too_short":
        n = ctx["min_length"]
        return f"{where} needs at least 1 item; got none." if n == 1 else f"{where} needs at least {n} items."
    if kind == "too_long":
        return f"{where} has {ctx.get('actual_length') or 'too many'} items; the limit is {ctx['max_length']:,}."
    bounds = {"greater_than_equal": ("at least", "ge"), "less_than_equal": ("at most", "le"),
              "greater_than": ("more than", "gt"), "less_than": ("less than", "lt")}
    if kind in bounds:
        words, key = bounds[kind]
        bound = ctx[key]
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)
        return f"{where} must be {words} {bound:,}; got {got}."
    if kind == "literal_error":
        return f"{where} must be one of {ctx['expected']}; got {got}."
    if kind == "string_pattern_mismatch":
        hint = _PATTERN_HINTS.get(str(error["loc"][-1])) or f"text matching {ctx.get('pattern')}"
        return f"{where} must be {hint}; got {got}."
    types = {"string_type": "text", "int_type": "a whole number", "int_parsing": "a whole number",
             "int_from_float": "a whole number", "float_type": "a number", "float_parsing": "a number",
             "finite_number": "a finite number", "bool_type": "true or false", "bool_parsing": "true or false",
             "list_type": "a list", "dict_type": "an object"}
    if kind in types:
        return f"{where} must be {types[kind]}; got {got}."
    message = str(error.get("msg", "is not valid")).rstrip(".")
    return f"{where}: {message[:1].lower() + message[1:]}; got {got}."


def _argument_sentences(errors: list[Any]) -> list[str]:
    """One sentence per argument: a union's alternatives (tags as a list or text) are one
    problem, not one per alternative."""
    by_argument: dict[Any, list[Any]] = {}
    for error in errors:
        by_argument.setdefault(error["loc"][0] if error["loc"] else "arguments", []).append(error)
    sentences: list[str] = []
    for argument, group in by_argument.items():
        members = [e["loc"][1] for e in group if len(e["loc"]) > 1 and isinstance(e["loc"][1], str)]
        if members and len(members) == len(group) and len(set(members)) > 1:
            words = list(dict.fromkeys(_TYPE_WORDS.get(m.replace(" ", "").lower(), m) for m in members))
            sent = group[0].get("input")
            sentences.append(f"{argument} must be {' or '.join(words)}; got {_shown(sent)}.")
        else:
            sentences += list(dict.fromkeys(_error_sentence(e) for e in group))
    return sentences


class ToolArguments:
    """What one tool accepts, and the problems with a call's arguments as sent."""

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        """``fn``: the callable the SDK calls for the tool (its ``Context`` parameter is
        the SDK's to fill, as the SDK skips it)."""
        self.name = name
        self._fn = fn
        parameters = inspect.signature(fn).parameters
        self._context = [n for n, p in parameters.items() if p.annotation is Context]
        self.names = [n for n in parameters if n not in self._context]

    @functools.cached_property
    def metadata(self) -> FuncMetadata:
        """The argument schema's check, built on the tool's first call: the SDK builds its
        own when the tool is added, and building this one too for every tool would hold
        the server's first answer back (pydantic schemas: ~2 ms a tool)."""
        return func_metadata(self._fn, skip_names=self._context)

    def unknown(self, sent: str) -> str:
        if not self.names:
            return f"Unknown argument {sent!r}: {self.name} takes no arguments."
        close = closest_name(sent, self.names)
        if close is not None:
            return f"Unknown argument {sent!r}: did you mean {close!r}?"
        return f"Unknown argument {sent!r}: {self.name} takes {', '.join(self.names)}."

    def accepted(self, sent: Mapping[str, Any]) -> tuple[dict[str, Any], list[str], list[str]]:
        """The arguments as this tool names and reads them, a note per name it renamed,
        and the clashes (a seed's name sent next to ours: which one wins is a guess)."""
        arguments: dict[str, Any] = {}
        renamed: list[str] = []
        clashes: list[str] = []
        for key, value in sent.items():
            ours = SEED_NAMES.get(key) if key not in self.names else None
            if ours is not None and ours in self.names and self.name in _SEED_NAME_ONLY_IN.get(key, {self.name}):
                if ours in sent:
                    clashes.append(f"Both {key!r} and {ours!r} were sent; send only {ours!r}.")
                    continue
                renamed.append(f"{key!r} as {ours!r}")
                key = ours
            arguments[key] = value
        for key in _ID_PARAMETERS.intersection(arguments) if self.name in _NUMBER_AS_ID else ():
            if isinstance(arguments[key], int) and not isinstance(arguments[key], bool):
                arguments[key] = str(arguments[key])
        for key, keep in _KEEP_VALUES.get(self.name, {}).items():
            value = arguments.get(key, None)
            if key in arguments and type(value) is type(keep) and value == keep:
                del arguments[key]
        return arguments, renamed, clashes

    def problems(self, arguments: Mapping[str, Any]) -> list[str]:
        problems = [self.unknown(key) for key in arguments if key not in self.names]
        nul = dict.fromkeys(loc for key, value in arguments.items() if key in self.names
                            for loc in _nul_paths(value, (key,)))
        problems += [f"{_where(loc)} contains a NUL character (\\x00); remove it." for loc in nul]
        try:
            self.metadata.validate_arguments(dict(arguments))
        except ValidationError as exc:
            flagged = {loc[0] for loc in nul}  # said once already
            problems += _argument_sentences([e for e in exc.errors() if not e["loc"] or e["loc"][0] not in flagged])
        return problems


def refuse_bad_arguments(checks: Mapping[str, ToolArguments]) -> Callable[..., Any]:
    """A server middleware: a ``tools/call`` whose arguments have problems gets a tool
    error naming each of them (one sentence per problem), and the tool does not run."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params if ctx.method == "tools/call" and isinstance(ctx.params, Mapping) else {}
        name, arguments = params.get("name"), params.get("arguments")
        check = checks.get(name) if isinstance(name, str) else None
        if check is None or not (arguments is None or isinstance(arguments, Mapping)):
            return await call_next(ctx)
        accepted, renamed, clashes = check.accepted(arguments or {})
        problems = clashes + check.problems(accepted)
        if problems:
            # Names only, as the SDK logs a rejection: the values are the caller's data.
            log.info("Tool %r refused arguments: %r", check.name, sorted(arguments or {}))
            text = f"Error executing tool {check.name}: " + " ".join(problems)
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        if accepted == (arguments or {}):
            return await call_next(ctx)
        result = await call_next(dataclasses.replace(ctx, params={**params, "arguments": accepted}))
        if renamed:
            note = f"Note: read {', '.join(renamed)}, this server's name{'s' if len(renamed) > 1 else ''}; use {'them' if len(renamed) > 1 else 'it'} next time."
            result = _with_note(result, note)
        return result

    return middleware


def _with_note(result: HandlerResult, note: str) -> HandlerResult:
    """A tool's result with one more text block after its own, for the model to read
    (the structured result and the first block, its JSON, stay as they were)."""
    if isinstance(result, Mapping) and isinstance(result.get("content"), list):
        return {**result, "content": [*result["content"], {"type": "text", "text": note}]}
    if isinstance(result, CallToolResult):
        return result.model_copy(update={"content": [*result.content, TextContent(type="text", text=note)]})
    return result


