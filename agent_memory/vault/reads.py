"""The reads: list, search, related, history, retrieve_context, read_file, completions.

Each reads the index (SQL, ``recall``) and, where a whole memory is returned, its file
as it is now; none writes, except that a lookup folds in a file the index has not seen
yet (``Core.resolve``).
"""

from __future__ import annotations

import builtins
import datetime as dt
import os
import re
import sqlite3
import stat
from collections.abc import Iterable
from typing import Any

from ..recall import graph
from ..note import parse
from ..note.parse import file_version
from ..note.render import to_utc
from ..clock import iso
from .core import Core
from ..errors import InvalidInput, NotFound, PathRefused
from ..wording import (COMPLETE_FIRST, DEPTH, LIMIT, LINK_MEMORIES, LIST_MEMORIES, MATCH, PROFILE, RELATED,
                       SEE_MATCHED, TAG_FILTER, WHERE, Name, Said, said)
from ..recall.highlights import split_marks
from ..recall.engine import MATCH_MODES, Engine, Found
from ..recall.language import language_of
from ..recall.rank import PROFILES, RecallConfig, Scored
from ..recall.records import MemoryRecord
from ..recall.sql import Filters, expired_rids, within_filters
from ..recall.terms import MAX_QUERY_CHARS, plan
from ..git.history import log as history_log
from ..progress import Progress
from ..index.rows import name_key
from ..index.properties import check_where
from ..models import (
    ActivityResult,
    ContextMemory,
    ContextResult,
    Explanation,
    Edge,
    FileContent,
    HistoryResult,
    Hit,
    ListResult,
    Memory,
    RecallGraph,
    RelatedNode,
    RelatedResult,
    ScoreParts,
    SearchResult,
    Statement,
    Summary,
)
from ..limits import check_importance, check_limit, check_names, check_offset, check_tags, check_text, check_type, namespace_filter
from ..disk import nofollow
from ..disk.layout import is_memory_path

CONTENT_IN_HITS = 1500  # a hit carries the whole body up to this many characters (SPEC §5)
SEARCH_RELATED_LIMIT = 50  # most linked memories search(depth=...) adds beside the hits
CONTEXT_STRATEGIES = ("relevance", "recency", "importance")
CONTEXT_CANDIDATES = 100
MAX_TOKEN_BUDGET = 200_000
MAX_READ_BYTES = 1_000_000
TOKEN_ESTIMATE = "ceil(characters / 4) of each memory's title and content"


class Reads:
    """Everything that answers from the vault without changing it."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.store = core.store
        self.index = core.index

    # ------------------------------------------------------------------ reads
    def list(
        self,
        namespace: str | None = None,
        tags: Iterable[str] | str | None = (),
        limit: int = 20,
        offset: int = 0,
        path_prefix: str | None = None,
        type: str | None = None,
        min_importance: float | None = None,
        max_importance: float | None = None,
        since: str | None = None,
        until: str | None = None,
        where: Any = None,
        *,
        progress: Progress | None = None,
    ) -> ListResult:
        """Memories newest first, filtered in SQL, paged. ``since``/``until`` bound when
        each last changed (hand edits included; ``7d`` or a date), and then the latest
        change comes first."""
        now_moment = self.core.now()
        filters = Filters(namespace=namespace_filter(namespace), tags=tuple(check_tags(tags)),
                          path_prefix=check_text(path_prefix, "path_prefix") or None,
                          changed_since=_bound(since, "since", now_moment),
                          changed_until=_bound(until, "until", now_moment),
                          where=check_where(where),
                          **_kind_filters(type, min_importance, max_importance))
        check_limit(limit)
        check_offset(offset)
        self.core.check_index()
        self.index.filtering(filters, progress)
        now = iso(now_moment)
        by = "changed" if since or until else "updated"
        rows = self.index.list(filters, now, limit, offset, by=by)
        total = self.index.count(filters, now)
        result = ListResult(total=total, count=len(rows), offset=offset, memories=[self._listed(r) for r in rows])
        if offset + len(rows) < total:
            result["next_offset"] = offset + len(rows)
        return result

    def recent_activity(
        self,
        timeframe: str = "7d",
        until: str | None = None,
        namespace: str | None = None,
        type: str | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> ActivityResult:
        """What changed in a time frame (``7d``, ``24h``, ``2w`` or a date; hand edits
        included), the latest change first, paged: ``list`` by change time."""
        if not isinstance(timeframe, str) or not timeframe.strip():
            raise InvalidInput("timeframe is empty; give a span such as 7d, 24h or 2w, or a date like 2026-07-20.")
        now = self.core.now()
        since, before = _bound(timeframe, "timeframe", now) or "", _bound(until, "until", now)
        listed = self.list(namespace=namespace, limit=limit, offset=offset, type=type, since=since, until=before)
        result = ActivityResult(since=since, until=before, total=listed["total"], count=listed["count"],
                                offset=offset, memories=listed["memories"])
        if "next_offset" in listed:
            result["next_offset"] = listed["next_offset"]
        return result

    def _listed(self, row: sqlite3.Row) -> Summary:
        """A row as a list shows it: its summary and when its file last changed."""
        summary = self.core.summary(row)
        summary["changed"] = row["changed"]
        return summary

    def _named(self, query: str) -> frozenset[int]:
        """The memories called exactly what was asked (a note's name, title or alias, as
        Obsidian's quick switcher finds it): those rank first among the hits."""
        wanted = name_key(query.strip().rstrip("?!.").strip())
        if not wanted or len(wanted) > 200:
            return frozenset()
        return frozenset(self.index.named(wanted))

    def search(
        self,
        query: str,
        namespace: str | None = None,
        tags: Iterable[str] | str | None = (),
        limit: int = 10,
        match: str = "auto",
        since: str | None = None,
        until: str | None = None,
        path_prefix: str | None = None,
        offset: int = 0,
        profile: str | None = None,
        config: RecallConfig | None = None,
        explain: bool = False,
        depth: int = 0,
        type: str | None = None,
        min_importance: float | None = None,
        max_importance: float | None = None,
        semantic: bool | None = None,
        where: Any = None,
        *,
        progress: Progress | None = None,
    ) -> SearchResult:
        """Plain-question recall (``recall.engine``), ranked as docs/recall.md says: the
        memories holding every term first, then those holding most, by BM25 and recency.
        ``profile`` (default ``recall.profile``) picks the ranking and ``config`` replaces
        its knobs (tests and benchmarks); ``explain`` adds the SQL run and each hit's
        score parts; ``depth`` adds the linked memories (``related``); ``semantic``
        (default ``recall.semantic``) ranks by meaning when no memory holds every term."""
        if not isinstance(query, str) or len(query) > MAX_QUERY_CHARS:
            raise InvalidInput(f"The query must be text of at most {MAX_QUERY_CHARS} characters.")
        if match not in MATCH_MODES:
            raise InvalidInput(said(MATCH, f" must be one of {', '.join(MATCH_MODES)}; got {match!r}."))
        check_limit(limit)
        check_offset(offset)
        if not isinstance(depth, int) or isinstance(depth, bool) or not 0 <= depth <= graph.MAX_DEPTH:
            raise InvalidInput(said(DEPTH, f" must be between 0 and {graph.MAX_DEPTH}; got {depth!r}."))
        if profile is not None and profile not in PROFILES:
            raise InvalidInput(said(PROFILE, f" must be one of {', '.join(PROFILES)}; got {profile!r}."))
        filters = Filters(
            namespace=namespace_filter(namespace),
            tags=tuple(check_tags(tags)),
            since=_bound(since, "since", self.core.now()),
            until=_bound(until, "until", self.core.now()),
            path_prefix=check_text(path_prefix, "path_prefix") or None,
            where=check_where(where),
            **_kind_filters(type, min_importance, max_importance),
        )
        check_text(query, "The query")
        if semantic is not None and not isinstance(semantic, bool):
            raise InvalidInput(f"semantic must be true or false; got {semantic!r}.")
        use_meaning = self.core.semantic_on(semantic)
        self.core.check_index()
        self.index.filtering(filters, progress)
        planned = plan(query)
        terms = planned.terms
        if not terms:
            return SearchResult(
                terms=[], match_mode=match, count=0, hits=[],
                hint="The query has no words to search for; ask with a few plain words.",
            )
        now = iso(self.core.now())
        config = config or PROFILES[profile or self.core.profile_choice().profile]
        nearest = self.core.vectors.nearest(query, self._within) if use_meaning and match == "auto" and config.semantic else None
        engine = Engine(self.index, config, explain=explain, progress=progress)
        found = engine.search(terms, filters, now, limit, match, offset, newest=planned.newest,
                              named=self._named(query), nearest=nearest, language=language_of(query))
        hits = self._hits(found)
        mode = found.mode
        result = SearchResult(terms=[t.text for t in found.terms], match_mode=mode, count=len(hits), hits=hits)
        if found.semantic:
            for hit, scored in zip(hits, found.ranked):
                hit["found_by"] = scored.found_by
        if found.corrected:
            result["corrected"] = found.corrected
        if found.more:
            result["next_offset"] = offset + len(hits)
        if depth:
            result["related"] = self._related_to_hits([found.records[s.rid] for s in found.ranked], depth, now)
        if explain:
            result["explain"] = Explanation(
                profile=config.name,
                statements=[Statement(sql=text, params=list(params)) for text, params in found.statements],
                scores=[ScoreParts(id=hit["id"], score=hit["score"], parts={k: round(v, 4) for k, v in s.parts.items()})
                        for hit, s in zip(hits, found.ranked)],
            )
        if found.semantic == "gate" and hits:
            result["note"] = ("No memory contains all of the terms; these are the memories closest in meaning "
                              "(found_by: semantic), then those matching some of the terms (found_by: lexical).")
        elif match == "auto" and mode == "any" and hits:
            result["note"] = (
                said("Some memories contain all of the terms (", COMPLETE_FIRST, "); the others match some of them (",
                     SEE_MATCHED, ").") if any(h["complete"] for h in hits) or offset else
                said("No memory contains all of the terms; these match some of them (", SEE_MATCHED, ").")
            )
        if not hits:
            result["hint"] = _nothing_matched(filters)
        return result

    def _related_to_hits(self, hits: builtins.list[MemoryRecord], depth: int, now: str) -> RecallGraph:
        """The memories linked to or from ``hits`` (both directions, as ``related``'s
        default), breadth-first up to ``depth`` links from the nearest hit, at most
        ``SEARCH_RELATED_LIMIT`` besides the hits; edges among all of them."""
        walked = graph.walk_from(graph.LinkGraph(self.index, now), hits, depth, "both", len(hits) + SEARCH_RELATED_LIMIT)
        ordered = sorted((pair for pair in walked.nodes.values() if pair[1] > 0), key=lambda pair: (pair[1], pair[0]["path"]))
        ids = {row["rid"]: row["id"] for row, _distance in walked.nodes.values()}
        out = RecallGraph(
            depth=depth, count=len(ordered),
            nodes=[RelatedNode(**self.core.summary(row), distance=distance) for row, distance in ordered],
            edges=[Edge(source=ids[src], relation=relation, target=ids[dst]) for src, relation, dst in walked.edges],
            aborted=walked.aborted,
        )
        if walked.aborted:
            out["note"] = said(f"Stopped at {SEARCH_RELATED_LIMIT} linked memories: more are linked. Use ", RELATED,
                               " on one hit, or a lower ", DEPTH, ", to see the rest.")
        return out

    def _within(self, filters: Filters, now: str, rids: builtins.list[int] | None) -> set[int]:
        """Semantic recall's filter: which of ``rids`` (None: of all memories) are live
        and within the search's filters, checked in SQL as lexical hits are. Without
        filters only expiry applies: the expired few are left out instead."""
        if rids is not None and filters == Filters():
            expired = {row[0] for row in self.index.query(*expired_rids(now))}
            return set(rids) - expired
        return {row[0] for row in self.index.query(*within_filters(filters, now, rids), needs=self.index.needed(filters))}

    def _hits(self, found: Found) -> builtins.list[Hit]:
        return [self._hit(found.records[s.rid], s, found.snippets.get(s.rid) or _opening(found.records[s.rid].body))
                for s in found.ranked]

    def _hit(self, record: MemoryRecord, scored: Scored, snippet: str) -> Hit:
        """``score``: higher is better, comparable within one result only. A short
        memory comes whole (``content``), so no second call is needed to read it."""
        # content and found_by are Hit's optional keys, set below and by search (hence the ignore).
        text, highlights = split_marks(snippet)
        hit = Hit(**self.core.summary(record), snippet=text, highlights=highlights,  # type: ignore[typeddict-item]
                  matched_terms=list(scored.matched), complete=scored.complete, score=round(scored.score, 4))
        if len(record.body) <= CONTENT_IN_HITS:
            hit["content"] = record.body
        return hit

    def related(self, memory_id: str, depth: int = 1, direction: str = "both", limit: int = 100) -> RelatedResult:
        """Memories linked to this one, breadth-first up to ``depth`` hops.

        Follows front-matter relations and body ``[[wikilinks]]`` (``out``), backlinks
        (``in``) or both; visits at most ``limit`` memories, the start included, and
        says ``aborted`` when that cap cut the walk short.
        """
        if not isinstance(depth, int) or isinstance(depth, bool) or not 0 <= depth <= graph.MAX_DEPTH:
            raise InvalidInput(f"depth must be between 0 and {graph.MAX_DEPTH}; got {depth!r}.")
        if direction not in graph.DIRECTIONS:
            raise InvalidInput(f"direction must be one of {', '.join(graph.DIRECTIONS)}; got {direction!r}.")
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= graph.MAX_VISITS:
            raise InvalidInput(f"limit must be between 1 and {graph.MAX_VISITS}; got {limit!r}.")
        start = self.core.resolve(memory_id)
        walked = graph.walk(graph.LinkGraph(self.index, iso(self.core.now())), start, depth, direction, limit)
        ordered = sorted(walked.nodes.values(), key=lambda pair: (pair[1], pair[0]["path"]))
        ids = {row["rid"]: row["id"] for row, _distance in ordered}
        result = RelatedResult(
            memory_id=start["id"],
            depth=depth,
            direction=direction,
            count=len(ordered) - 1,
            nodes=[RelatedNode(**self.core.summary(row), distance=distance) for row, distance in ordered],
            edges=[Edge(source=ids[src], relation=relation, target=ids[dst]) for src, relation, dst in walked.edges],
            aborted=walked.aborted,
        )
        if walked.aborted:
            result["note"] = (
                f"Stopped at {limit} memories: more are linked. Raise limit (up to {graph.MAX_VISITS}) "
                "or lower depth to see the rest."
            )
        elif len(ordered) == 1:
            result["note"] = said("No linked memories. Add a link with ", LINK_MEMORIES,
                                  ", or try direction='both' or a larger depth.")
        return result

    def history(self, memory_id: str, limit: int = 20) -> HistoryResult:
        """The commits that changed this memory's file, newest first, following renames
        (``git log --follow``, at most ``limit``): date, author, message and what changed
        (front-matter keys, body lines). Read-only; the vault may be a subfolder of the
        repository. A vault not in git is a clear error."""
        check_limit(limit)
        row = self.core.resolve(memory_id)
        entries, more, top = history_log(self.core.root, row["path"], limit)
        result = HistoryResult(
            memory_id=row["id"], path=row["path"], repository=str(top), count=len(entries),
            truncated=more, commits=entries,
        )
        if not entries:
            result["note"] = (
                f"{row['path']} has no commits yet: it is not committed to git (new, ignored, or only staged). "
                "Its history starts with the first commit that includes it."
            )
        elif more:
            result["note"] = said(f"Showing the newest {limit} commits; more changed this memory. Raise ", LIMIT,
                                  " to see older ones.")
        return result

    def retrieve_context(
        self,
        query: str,
        token_budget: int = 4000,
        strategy: str = "relevance",
        namespace: str | None = None,
        tags: Iterable[str] | str | None = (),
        type: str | None = None,
        min_importance: float | None = None,
        max_importance: float | None = None,
        *,
        progress: Progress | None = None,
    ) -> ContextResult:
        """Whole memories that together fit ``token_budget``, best first.

        Candidates are the top recall hits for ``query`` (or the newest memories when
        the query is empty). ``relevance`` keeps recall's order, ``recency`` puts the
        latest update first, ``importance`` a numeric ``importance:`` front-matter key,
        then the number of memories linking to it. A memory that does not fit is
        skipped (never cut), and smaller ones after it may still fit.
        """
        if strategy not in CONTEXT_STRATEGIES:
            raise InvalidInput(f"strategy must be one of {', '.join(CONTEXT_STRATEGIES)}; got {strategy!r}.")
        if not isinstance(token_budget, int) or isinstance(token_budget, bool) or not 1 <= token_budget <= MAX_TOKEN_BUDGET:
            raise InvalidInput(f"token_budget must be between 1 and {MAX_TOKEN_BUDGET:,} tokens; got {token_budget!r}.")
        hint = None
        kinds: dict[str, Any] = {"type": type, "min_importance": min_importance, "max_importance": max_importance}
        if (query or "").strip():
            found = self.search(query, namespace=namespace, tags=tags, limit=CONTEXT_CANDIDATES, progress=progress, **kinds)
            paths = [hit["path"] for hit in found["hits"]]
            hint = found.get("hint")
        else:
            paths = [m["path"] for m in self.list(namespace=namespace, tags=tags, limit=CONTEXT_CANDIDATES,
                                                  progress=progress, **kinds)["memories"]]
        loaded = []
        for path in paths:
            try:
                row, data = self.core.load(path)
            except NotFound:  # forgotten or expired since the search
                continue
            loaded.append((row, self.core.memory(row["path"], data, row)))
        picked: list[ContextMemory] = []
        used = omitted = 0
        for _row, memory in self._context_order(loaded, strategy):
            cost = self.estimate_tokens(memory["title"] + "\n" + memory["content"])
            if used + cost > token_budget:
                omitted += 1
                continue
            used += cost
            picked.append(ContextMemory(**self._summary_of(memory), content=memory["content"], estimated_tokens=cost))
        result = ContextResult(
            query=query or "", strategy=strategy, token_budget=token_budget, estimated_tokens=used,
            estimate=TOKEN_ESTIMATE, truncated=omitted > 0, omitted=omitted, count=len(picked), memories=picked,
        )
        if hint:
            result["hint"] = hint
        elif omitted:
            result["hint"] = f"{omitted} matching memories did not fit; raise token_budget or narrow the query to see them."
        return result

    def _context_order(self, loaded: builtins.list[tuple[sqlite3.Row, Memory]], strategy: str) -> builtins.list[tuple[sqlite3.Row, Memory]]:
        if strategy == "recency":
            return sorted(loaded, key=lambda pair: pair[1]["updated"], reverse=True)
        if strategy == "importance":
            links = graph.LinkGraph(self.index, iso(self.core.now()))

            def weight(pair: tuple[sqlite3.Row, Memory]) -> tuple[float, int]:
                declared = pair[1]["front_matter"].get("importance")
                number = declared if isinstance(declared, (int, float)) and not isinstance(declared, bool) else 0
                return (-number, -links.backlink_count(pair[0]))

            return sorted(loaded, key=weight)
        return loaded

    @staticmethod
    def estimate_tokens(text: str) -> int:
        """The budget estimate ``retrieve_context`` uses: characters / 4, rounded up."""
        return -(-len(text) // 4)

    @staticmethod
    def _summary_of(memory: Memory) -> Summary:
        return Summary(id=memory["id"], path=memory["path"], version=memory["version"], namespace=memory["namespace"],
                       tags=memory["tags"], title=memory["title"], created=memory["created"],
                       updated=memory["updated"], age=memory["age"], expires=memory["expires"],
                       conflict=memory["conflict"])

    def read_file(self, path: str, max_bytes: int = MAX_READ_BYTES) -> FileContent:
        """A text file inside the vault, as it is on disk.

        Symlinks are resolved first and ``..`` escapes, absolute paths elsewhere and
        dot-folders other than ``.prompts/`` are refused (``.git/config`` can hold
        tokens); binary files and files over ``max_bytes`` are refused by name and size,
        and a memory that has expired is not found. A path inside the vault with nothing
        there is an answer (``exists: false``), not an error: agents ask "is it there?".
        """
        if not isinstance(path, str) or not path.strip():
            raise InvalidInput("path is empty; give a vault-relative path such as 2026/07/20/some-memory.md.")
        check_text(path, "path")
        resolved = self.store.confine(check_names(path.strip(), "path"))
        rel = resolved.relative_to(self.core.root.resolve()).as_posix()
        if resolved.is_dir():
            raise InvalidInput(said(f"{rel or '.'} is a folder in the vault; give the path of a file (",
                                    LIST_MEMORIES, " shows them)."), argument="path")
        if not os.path.lexists(resolved):  # nothing there: an answer, not an error
            return FileContent(path=rel, exists=False, size=0, version="", memory_id=None, content="")
        if not resolved.is_file():
            raise InvalidInput(f"{rel} is not a regular file; read_file reads text files only.")
        try:
            fd = nofollow.open_read(resolved)
        except OSError as exc:  # swapped for a symlink since it was checked, or unreadable
            raise PathRefused(f"{rel} cannot be read safely ({exc.strerror}); nothing was returned.") from exc
        if not self.store.opened_inside(fd) or not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)  # a folder on the way swapped for a symlink since the check, or a pipe swapped in
            raise PathRefused(f"{rel} changed while it was being read (a folder or the file was replaced); nothing "
                              "was returned. Retry.")
        with os.fdopen(fd, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(max_bytes + 1) if size <= max_bytes else b""
        if size > max_bytes or len(data) > max_bytes:
            raise InvalidInput(
                f"{rel} is {max(size, len(data)):,} bytes; read_file returns at most {max_bytes:,} bytes. "
                "Open it in an editor instead, or recall the memory for a snippet."
            )
        try:
            if b"\0" in data:
                raise UnicodeError
            text = data.decode("utf-8")
        except UnicodeError:
            raise InvalidInput(f"{rel} is a binary file, not UTF-8 text; read_file returns text files only.") from None
        if is_memory_path(rel):
            expires = parse.parse(data, rel).expires  # the file's own word, even before the index saw it
            if expires is not None and expires <= iso(self.core.now()):
                raise NotFound(rel)  # SPEC §3: an expired memory is never returned by any read
        row = self.index.by_path(rel)
        return FileContent(
            path=rel, exists=True, size=len(data), version=file_version(data),
            memory_id=row["id"] if row is not None else None, content=text,
        )

    def complete_ids(self, prefix: str, limit: int = 20) -> builtins.list[str]:
        """Live memory ids and vault paths that start with ``prefix``, newest first
        (what an MCP client offers while someone types a ``memory://`` address)."""
        n = len(prefix)
        rows = self.index.query(
            "SELECT id, path FROM memories m WHERE (substr(m.id, 1, ?) = ? OR substr(m.path, 1, ?) = ?) "
            "AND (m.expires IS NULL OR m.expires > ?) ORDER BY m.updated DESC, m.path LIMIT ?",
            (n, prefix, n, prefix, iso(self.core.now()), limit),
        )
        values: list[str] = []
        for row in rows:
            for value in (row["id"], row["path"]):
                if value.startswith(prefix) and value not in values:
                    values.append(value)
        return values[:limit]


def _opening(body: str, most: int = 160) -> str:
    """A snippet for a hit no term matched (found by meaning): the body's opening words."""
    text = " ".join(body.split())
    return text if len(text) <= most else text[:most].rsplit(" ", 1)[0] + "…"


def _kind_filters(kind: str | None, least: float | None, most: float | None) -> dict[str, Any]:
    """The ``type`` and importance filters, checked as the values a write takes."""
    filters = {"type": check_type(kind) or None,
               "min_importance": check_importance(least, "min_importance"),
               "max_importance": check_importance(most, "max_importance")}
    return filters


# The filters a search takes, each by the name a front end says it with.
_FILTER_NAMES = (("namespace", Name("namespace")), ("tags", TAG_FILTER), ("since", Name("since")),
                 ("until", Name("until")), ("path_prefix", Name("path_prefix")), ("type", Name("type")),
                 ("min_importance", Name("min_importance")), ("max_importance", Name("max_importance")),
                 ("where", WHERE))


def _nothing_matched(filters: Filters) -> Said:
    """The hint of a search with no hit: fewer words, or fewer of the filters it was
    given (named as given: a --where filter, not "namespace/tag filters")."""
    given = [name for field, name in _FILTER_NAMES if getattr(filters, field) not in (None, ())]
    if not given:
        return said("Nothing matched. Try fewer or other words, or browse with ", LIST_MEMORIES, ".")
    named: list[str | Name] = [given[0]]
    for name in given[1:]:
        named += [", ", name]
    return said("Nothing matched. Try fewer or other words, drop a filter (", *named, "), or browse with ",
                LIST_MEMORIES, ".")


_SPAN = re.compile(r"(\d{1,6})\s*(m|min|mins|minutes?|h|hours?|d|days?|w|weeks?)(?:\s+ago)?", re.IGNORECASE)
_SPAN_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def _bound(value: str | None, name: str, now: dt.datetime | None = None) -> str | None:
    """A time bound as canonical UTC: a date or timestamp (``2026-07-20``), or, given
    ``now``, a span back from it (``7d``, ``24h``, ``30m``, ``2w``, ``3 days ago``)."""
    if not value:
        return None
    span = _SPAN.fullmatch(value.strip()) if isinstance(value, str) and now is not None else None
    if span is not None and now is not None:
        unit = _SPAN_UNITS[span.group(2)[0].lower()]
        try:
            return iso(now - dt.timedelta(**{unit: int(span.group(1))}))
        except OverflowError:
            raise InvalidInput(said(Name(name), " reaches back before the year 1; give a shorter span.")) from None
    try:
        return to_utc(value)
    except ValueError as exc:
        spans = " A span back from now works too: 7d, 24h, 2w." if now is not None else ""
        raise InvalidInput(said(Name(name), f" must be a date or timestamp like 2026-07-20; got {value!r}.{spans}")) from exc
