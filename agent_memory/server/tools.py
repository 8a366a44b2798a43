"""The tools. Each one accepts what models actually send, makes one Vault call
and returns the library's typed dict, so clients get an ``outputSchema`` and
``structuredContent``. Library errors become ``ToolError``: in mcp 2.3 that is the only
exception whose text reaches the model, and the library's text says what to do next.

(No ``from __future__ import annotations`` here: the SDK evaluates each tool's
signature, and the ``Annotated`` aliases below must be real objects.)
"""

import dataclasses
import difflib
import functools
import inspect
import json
import logging
import re
import weakref
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata, func_metadata
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from ..recall import graph
from ..errors import AgentMemoryError as MemoryError_
from ..models import (
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
    RememberResult,
    SearchResult,
    Stats,
    UnlinkResult,
    UpdateResult,
)
from ..recall.terms import MAX_QUERY_CHARS
from ..limits import (MAX_BATCH, MAX_CONTENT, MAX_IMPORTANCE, MAX_LIMIT, MAX_OFFSET, MAX_TAG_LEN, MAX_TTL_DAYS,
                      MAX_TYPE_LEN, MEMORY_TYPES, namespace_filter)
from ..vault.reads import MAX_TOKEN_BUDGET
from ..vault.vault import Vault

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
        read_only_hint=read_only, destructive_hint=destructive, idempotent_hint=idempotent, open_world_hint=False
    )


READ = hints(read_only=True, destructive=False, idempotent=True)

F = TypeVar("F", bound=Callable[..., Any])

log = logging.getLogger("agent_memory.server")


def library_errors(fn: F) -> F:
    """Re-raise the library's own errors as ToolError, keeping their text."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MemoryError_ as exc:
            raise ToolError(str(exc)) from exc

    return wrapper  # type: ignore[return-value]


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
        return f"{where} needs at least {ctx['min_length']} item(s)."
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


class SeenVersions:
    """The last version of each memory a connection received with its full body.

    Replacing a body needs a version the caller saw (SPEC §3): the explicit
    ``expected_version``, else the one this connection was last handed with the whole
    content (get_memory, remember, update_memory, retrieve_context, a recall hit that
    carried ``content``). A connection is known by its handshake (the SDK's public
    ``client_params``, one object per connection); a stateless request (the 2026-07-28
    protocol, stateless HTTP) is a connection of its own, so it needs the explicit
    version, as it should: nothing ties its calls together."""

    def __init__(self) -> None:
        self._by_connection: dict[int, tuple[weakref.ref[Any], dict[str, str]]] = {}

    def _of(self, ctx: Context) -> dict[str, str] | None:
        handshake = ctx.session.client_params
        if handshake is None:
            return None
        entry = self._by_connection.get(id(handshake))
        if entry is None or entry[0]() is not handshake:
            self._by_connection = {k: e for k, e in self._by_connection.items() if e[0]() is not None}
            entry = self._by_connection[id(handshake)] = (weakref.ref(handshake), {})
        return entry[1]

    def note(self, ctx: Context, memory: Mapping[str, Any]) -> None:
        """Remember what this connection saw: by id and by path, as callers pass either."""
        seen = self._of(ctx)
        if seen is None:
            return
        for key in (memory.get("id"), memory.get("path")):
            if key:
                seen[key] = memory["version"]

    def version(self, ctx: Context, memory_id: str) -> str | None:
        seen = self._of(ctx)
        return None if seen is None else seen.get(memory_id.strip().replace("\\", "/").removeprefix("./"))


class ToolArguments:
    """What one tool accepts, and the problems with a call's arguments as sent."""

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        self.name = name
        self.names = [n for n, p in inspect.signature(fn).parameters.items() if p.annotation is not Context]
        self.metadata: FuncMetadata = func_metadata(fn)

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


def register_tools(server: MCPServer, vault: Vault) -> None:
    """Add every tool, each closing over ``vault``, and the check of what callers send."""
    checks: dict[str, ToolArguments] = {}
    seen = SeenVersions()

    def tool(name: str, title: str, annotations: ToolAnnotations) -> Callable[[F], F]:
        def add(fn: F) -> F:
            server.add_tool(
                library_errors(fn), name=name, title=title,
                description=_one_paragraph(fn.__doc__), annotations=annotations,
            )
            checks[name] = ToolArguments(name, fn)
            return fn

        return add

    server.middleware.append(refuse_bad_arguments(checks))

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
                description="Days until the memory expires (0 = never; else at least one minute, 0.0007). "
                "Use it for short-lived facts such as a temporary workaround or this week's on-call.",
                ge=0,
                le=MAX_TTL_DAYS,
            ),
        ] = 0,
        type: MemoryType = None,
        importance: Importance = None,
        ctx: Context = None,  # type: ignore[assignment]
    ) -> RememberResult:
        """Store a durable fact, preference, decision or procedure as a new memory: one markdown
        file in the vault that people can read and edit too. The same content in the same
        namespace is not stored twice: the existing memory comes back with deduplicated=true
        and the new tags merged in. To correct or extend a memory, use update_memory instead."""
        result = vault.remember(
            content, namespace=_blank_to_none(namespace) or "default", tags=tags,
            title=title, source=source, ttl_days=ttl_days, type=type, importance=importance,
        )
        seen.note(ctx, result["memory"])
        return result

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
            Field(description="auto: memories with all the words first, then those with most of them; all; any."),
        ] = "auto",
        since: Annotated[
            str | None, Field(description="Only memories created on or after this date (2026-07-20).", max_length=40)
        ] = None,
        until: Annotated[
            str | None, Field(description="Only memories created before this date.", max_length=40)
        ] = None,
        path_prefix: PathPrefix = None,
        offset: Offset = 0,
        profile: Annotated[
            Literal["facts", "conversation"] | None,
            Field(description="Ranking: facts (a store of facts) or conversation (dialog turns: a memory next to "
                  "a match is lifted); default: the vault's recall.profile setting."),
        ] = None,
        depth: Annotated[
            int,
            Field(description=f"Also return the memories linked to or from the hits, up to this many links away "
                  f"(0-{graph.MAX_DEPTH}; 0: none), as `related` (nodes with distance, edges).",
                  ge=0, le=graph.MAX_DEPTH),
        ] = 0,
        type: TypeFilter = None,
        min_importance: MinImportance = None,
        max_importance: MaxImportance = None,
        semantic: Annotated[
            bool | None,
            Field(description="When no memory holds every word, rank memories by meaning (embeddings; needs the "
                  "optional semantic extra); hits then say found_by. Default: the vault's recall.semantic setting."),
        ] = None,
        ctx: Context = None,  # type: ignore[assignment]
    ) -> SearchResult:
        """Search memory with a plain question. Returns the best matches (id, path, title,
        snippet with matches in [brackets], tags, age, version; the whole `content` of a
        short memory), ranked by matched words, then relevance, then recency. Memories with
        all the words come first (`complete: true`), then ones with some of them, and `note`
        says so; when nothing matches, `hint` says what to try. `next_offset` pages on.
        With depth 1-3, `related` holds the memories linked to the hits (one call, no
        `related` per hit)."""
        result = vault.search(
            query, namespace=namespace_filter(namespace), tags=tags, limit=limit, match=match,
            since=_blank_to_none(since), until=_blank_to_none(until), path_prefix=_blank_to_none(path_prefix),
            offset=offset, profile=profile, depth=depth,
            type=_blank_to_none(type), min_importance=min_importance, max_importance=max_importance,
            semantic=semantic,
        )
        for hit in result["hits"]:
            if "content" in hit:  # a hit that carried the whole body (SPEC §5)
                seen.note(ctx, hit)
        return result

    @tool("get_memory", "Read a memory", READ)
    def get_memory(memory_id: MemoryId, ctx: Context = None) -> Memory:  # type: ignore[assignment]
        """Read one memory whole: its content, tags, relations, front matter and `version`
        (pass that as expected_version to update_memory or forget)."""
        memory = vault.get(memory_id)
        seen.note(ctx, memory)
        return memory

    @tool("update_memory", "Update a memory", hints(read_only=False, destructive=True, idempotent=False))
    def update_memory(
        memory_id: MemoryId,
        content: Annotated[
            str | None,
            Field(description="New content: replaces the whole body. Needs the version you read (get_memory "
                  "gives it, or pass expected_version); the old body is kept in the vault's trash.",
                  min_length=1, max_length=MAX_CONTENT),
        ] = None,
        append: Annotated[
            str | None,
            Field(description="Text to add at the end of the content (needs no version: it cannot overwrite "
                  "what someone else just wrote).", min_length=1, max_length=MAX_CONTENT),
        ] = None,
        replace_old: Annotated[
            str | None,
            Field(description="Exact text in the content to replace with replace_new; it must occur exactly once.",
                  min_length=1, max_length=MAX_CONTENT),
        ] = None,
        replace_new: Annotated[
            str | None, Field(description="What replace_old becomes ('' deletes it).", max_length=MAX_CONTENT)
        ] = None,
        tags: Annotated[
            list[str] | str | None,
            Field(description="The whole new tag set, replacing the current one (needs the version you read). "
                  "To add or remove a few, use add_tags/remove_tags."),
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
            Field(
                description="Expire this many days from now (at least one minute, 0.0007); 0 removes the expiry. "
                "Omit to keep it.",
                ge=0, le=MAX_TTL_DAYS,
            ),
        ] = None,
        type: Annotated[
            str | None,
            Field(description="New type, free text; suggested: " + ", ".join(MEMORY_TYPES) + " ('' removes it).",
                  max_length=MAX_TYPE_LEN),
        ] = None,
        importance: Annotated[
            Annotated[float, Field(ge=0, le=MAX_IMPORTANCE)] | Literal[""] | None,
            Field(description=f"New importance, 0-{MAX_IMPORTANCE} (a number); '' removes it."),
        ] = None,
        expected_version: ExpectedVersion = None,
        ctx: Context = None,  # type: ignore[assignment]
    ) -> UpdateResult:
        """Correct or extend a memory in place instead of adding a near-duplicate. Only the
        front-matter keys that change are rewritten; everything else in the file stays.
        append and replace_old/replace_new edit the content without a version; replacing
        the whole content or tag set needs the version you read (get_memory). Refused if
        the result would duplicate another memory (its id is named), or if someone edited
        the file since you read it: then read it again and retry."""
        version = _blank_to_none(expected_version)
        if version is None and (content is not None or tags is not None):
            version = seen.version(ctx, memory_id)
            if version is None:
                raise ToolError(
                    f"Replacing the {'content' if content is not None else 'tag set'} of {memory_id!r} needs the "
                    "version you read: call get_memory first (or pass expected_version). To add text without "
                    "reading, use append; to change one passage, replace_old/replace_new; for tags, add_tags/remove_tags."
                )
        result = vault.update(
            memory_id, content=content, append=append, replace_old=replace_old, replace_new=replace_new,
            tags=tags, add_tags=add_tags, remove_tags=remove_tags,
            namespace=_blank_to_none(namespace), title=title, source=source, ttl_days=ttl_days,
            type=type, importance=importance, expected_version=version,
        )
        seen.note(ctx, result["memory"])
        return result

    @tool("forget", "Forget memories", hints(read_only=False, destructive=True, idempotent=True))
    def forget(
        memory_id: Annotated[
            str | None,
            Field(description="The memory to forget: its id or vault-relative path. For several, use memory_ids.",
                  min_length=1, max_length=1024),
        ] = None,
        memory_ids: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=1024)]] | None,
            Field(description=f"Several memories to forget at once (ids or paths), all or nothing; at most {MAX_BATCH}.",
                  min_length=1, max_length=MAX_BATCH),
        ] = None,
        expected_version: ExpectedVersion = None,
        dry_run: Annotated[
            bool, Field(description="Only say what would be forgotten (count, memories); change nothing.")
        ] = False,
    ) -> ForgetBatchResult:
        """Forget memories that are wrong or no longer true: their files move to the vault's
        .trash/ folder (kept 30 days), so a person can still restore them. One memory_id, or
        memory_ids for several (all or nothing; expected_version only with one id).
        dry_run=true previews what would go."""
        if (memory_id is None) == (memory_ids is None):
            raise ToolError("Give memory_id (one memory) or memory_ids (several), not both and not neither.")
        return vault.forget_many(
            [memory_id] if memory_id is not None else memory_ids,  # type: ignore[arg-type]  # one of them is set
            expected_version=_blank_to_none(expected_version), dry_run=dry_run,
        )

    @tool("list_memories", "List memories", READ)
    def list_memories(
        namespace: Namespace = None,
        tags: Tags = None,
        limit: Annotated[int, Field(description=f"How many to return (1-{MAX_LIMIT}).", ge=1, le=MAX_LIMIT)] = 20,
        offset: Offset = 0,
        path_prefix: PathPrefix = None,
        type: TypeFilter = None,
        min_importance: MinImportance = None,
        max_importance: MaxImportance = None,
    ) -> ListResult:
        """Browse memories newest first, optionally by namespace, tags or folder. Pages:
        pass next_offset as offset to get the next page."""
        return vault.list(
            namespace=namespace_filter(namespace), tags=tags, limit=limit, offset=offset,
            path_prefix=_blank_to_none(path_prefix),
            type=_blank_to_none(type), min_importance=min_importance, max_importance=max_importance,
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

    @tool("unlink_memories", "Unlink two memories", hints(read_only=False, destructive=True, idempotent=True))
    def unlink_memories(
        memory_id: Annotated[
            str,
            Field(description="The memory that holds the link (its id or vault-relative path).", min_length=1, max_length=1024),
        ],
        target_id: Annotated[
            str,
            Field(description="The memory linked to: its id or vault-relative path, or the link's text if that "
                  "memory is gone.", min_length=1, max_length=1024),
        ],
        relation: Annotated[
            str,
            Field(
                description="The relation the link was made with (link_memories' relation), e.g. related_to.",
                pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$",
            ),
        ] = "related_to",
    ) -> UnlinkResult:
        """Remove a link that link_memories made: the "[[target]]" items of the memory's
        front-matter property named after the relation (the property goes with its last
        link). Links written in the text are left alone. Unlinking what is not linked
        changes nothing."""
        return vault.unlink(memory_id, target_id, relation=relation)

    @tool("move_memory", "Rename or move a note", hints(read_only=False, destructive=True, idempotent=False))
    def move_memory(
        memory_id: MemoryId,
        new_path: Annotated[
            str,
            Field(
                description="Where the note goes, relative to the vault (people/priya.md; .md is added if "
                "missing; a folder ending in '/' keeps the file name). Never over an existing file.",
                min_length=1,
                max_length=1024,
            ),
        ],
    ) -> MoveResult:
        """Rename or move a note and rewrite every [[wikilink]] and markdown link to it across the vault, as
        Obsidian does (aliases, #headings and ! embeds kept): all files or none. A note
        without an id is known by its path, so its id changes: the result gives old_id
        and new_id."""
        return vault.move(memory_id, new_path)

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

    @tool("memory_history", "A memory's history", READ)
    def memory_history(
        memory_id: MemoryId,
        limit: Annotated[
            int,
            Field(description=f"Most commits to return, newest first (1-{MAX_LIMIT}).", ge=1, le=MAX_LIMIT),
        ] = 20,
    ) -> HistoryResult:
        """When a memory changed and who changed it: the git commits that changed its file,
        newest first, following renames — date, author, message, and what changed (the
        front-matter keys and the body lines added and removed). Works when the vault is a
        folder inside a repository; a vault not in git is an error that says so."""
        return vault.history(memory_id, limit=limit)

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
        type: TypeFilter = None,
        min_importance: MinImportance = None,
        max_importance: MaxImportance = None,
        ctx: Context = None,  # type: ignore[assignment]
    ) -> ContextResult:
        """Whole memories (never cut) that together fit a token budget, best first, with
        their content, ready to use as background for a task. estimated_tokens uses
        characters / 4; truncated=true when some matching memories did not fit."""
        result = vault.retrieve_context(
            query, token_budget=token_budget, strategy=strategy, namespace=namespace_filter(namespace), tags=tags,
            type=_blank_to_none(type), min_importance=min_importance, max_importance=max_importance,
        )
        for memory in result["memories"]:
            seen.note(ctx, memory)
        return result

    @tool("memory_stats", "Memory statistics", READ)
    def memory_stats() -> Stats:
        """How many memories there are, per namespace, tag, type and relation (with the average
        importance, the oldest and newest), and the vault's health: files
        that failed to parse, git conflict markers, duplicate ids, trash, index size."""
        return vault.stats()

    @tool("export_memories", "Export memories", READ)
    def export_memories(
        namespace: Namespace = None,
        limit: Annotated[int, Field(description=f"How many per page (1-{MAX_BATCH}).", ge=1, le=MAX_BATCH)] = 100,
        offset: Offset = 0,
    ) -> ExportPage:
        """Every live memory as written (path, all front-matter keys, content, and the file's
        raw text), a page at a time: the format import_memories accepts, for backups and
        moving memories; importing it unchanged writes byte-identical files."""
        return vault.export_page(namespace=namespace_filter(namespace), limit=limit, offset=offset)

    @tool("import_memories", "Import memories", hints(read_only=False, destructive=True, idempotent=True))
    def import_memories(
        items: Annotated[
            list[dict[str, Any]],
            Field(
                description="Memories as export_memories returns them ({path, front_matter, content, raw}) or "
                "as {content, namespace, tags, title, source}. All or nothing: one bad item and "
                f"nothing is written. At most {MAX_BATCH}.",
                min_length=1,
                max_length=MAX_BATCH,
            ),
        ],
        format: Annotated[
            Literal["mcp-knowledge-graph", "mcp-memory-vault", "memory-mcp"] | None,
            Field(
                description="Leave out for this tool's own export. mcp-knowledge-graph: items are the records of "
                "a memory.jsonl ({type: entity|relation, ...}), one note per entity, relations as links. "
                "mcp-memory-vault: items are its export's memories (created_at, updated_at, expires_at kept). "
                "memory-mcp: items are its memories (hash, content, tags, memory_type, importance, created_at) "
                "and relationships (from_hash, to_hash, relation_type). With a format, importing the same "
                "source again updates what changed and adds nothing twice; links resolve across calls. "
                "(AgentMemory's folder is imported with `agent-memory import --from agentmemory`.)",
            ),
        ] = None,
    ) -> ImportResult:
        """Add many memories at once, all or nothing. Content already in the vault (same
        namespace), or an id a live memory already has, is skipped and counted as a
        duplicate; already-expired items are counted and skipped; a taken path gets a new
        name, so nothing is overwritten. With a format, a memory the source gave before is
        updated where the source changed it (counted as updated, else unchanged)."""
        return vault.import_memories(items, format=format)

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
        up to 1 MB; a path with no file there answers exists: false. Paths outside the vault, through symlinks out of it, or into hidden
        folders (.git, .index) are refused, and so are binary files."""
        return vault.read_file(path)

    @tool("reindex", "Rebuild the index", hints(read_only=False, destructive=False, idempotent=True))
    def reindex() -> ReconcileReport:
        """Rebuild the search index from the files alone (the files are the truth; the
        index is a cache). Use it if results look stale or memory_stats shows problems."""
        return vault.reindex()
