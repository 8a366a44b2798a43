"""The SQL recall runs, built apart from running it (pure).

Every builder returns ``(sql, params)``; ``recall.engine`` runs them through
``Index.query`` and ``search --explain`` prints them. FTS expressions are passed as
parameters, never spliced in: they come from ``recall.terms``, which quotes every word.
Row ids spliced into ``IN (...)`` lists are forced through ``int()``.

Every query that joins FTS to ``memories`` says ``fts CROSS JOIN memories`` so that FTS
drives: left to itself the planner starts from a namespace index and probes FTS once
per memory (20x slower).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..note.links import BODY_LINK_RELATION

Query = tuple[str, list[Any]]

LIVE = "(m.expires IS NULL OR m.expires > ?)"  # not expired at ``now``
_MATCHED = "FROM fts CROSS JOIN memories m ON m.rid = fts.rowid WHERE fts MATCH ?"
_EXPIRED = "SELECT rid FROM memories WHERE expires IS NOT NULL AND expires <= ?"  # the partial index on expires


# The index's FTS columns in order (index.db), for weights given per column.
FTS_COLUMNS = ("names", "tags", "body", "cjk", "dated", "described", "aliases", "headings")

_PLAIN_TAG = re.compile(r"[A-Za-z0-9]+(?:[-_/.][A-Za-z0-9]+)*")


@dataclass(frozen=True)
class Filters:
    """Search and list filters; all applied inside SQL, before any LIMIT."""

    namespace: str | None = None
    tags: tuple[str, ...] = ()
    since: str | None = None  # created >= since (canonical UTC)
    until: str | None = None  # created < until
    path_prefix: str | None = None
    type: str | None = None  # the front matter's ``type``, compared case-insensitively
    min_importance: float | None = None  # a numeric ``importance`` at least this
    max_importance: float | None = None  # ... at most this
    changed_since: str | None = None  # changed >= this: the file's last change, hand edits included
    changed_until: str | None = None  # changed < this
    # Front-matter properties (index.properties): (key, value) equal, or (key, None) present
    where: tuple[tuple[str, str | None], ...] = ()

    def narrowed(self, expr: str) -> str:
        """``expr`` narrowed inside FTS5 by the tag filters: each tag's words in the
        ``tags`` column. The same tokenizer reads both sides, so this keeps every memory
        the exact tag check of ``sql()`` keeps (and some it then drops: ``deploying``
        for ``deploy``); a selective tag then spares fetching every row that matches a
        common word (at 100k, a tag filter on common words took 6 ms of row lookups).
        Only tags of plain ASCII words: one the tokenizer might read as no word at all
        would match nothing here."""
        plain = [tag for tag in self.tags if _PLAIN_TAG.fullmatch(tag)]
        if not plain:
            return expr
        return f"({expr})" + "".join(f' AND tags : "{tag}"' for tag in plain)

    def sql(self, alias: str = "m") -> tuple[str, list[Any]]:
        """`` AND ...`` clauses (or nothing) and their parameters."""
        clauses: list[str] = []
        params: list[Any] = []
        if self.namespace:
            clauses.append(f"{alias}.namespace = ?")
            params.append(self.namespace)
        for tag in self.tags:  # nested as Obsidian reads them: "team" also matches "team/backend"
            clauses.append(f"EXISTS (SELECT 1 FROM tags t WHERE (t.tag = ? OR (t.tag > ? AND t.tag < ?)) "
                           f"AND t.rid = {alias}.rid)")
            params.extend([tag, tag + "/", tag + "0"])  # "0" is the character after "/"
        if self.since:
            clauses.append(f"{alias}.created >= ?")
            params.append(self.since)
        if self.until:
            clauses.append(f"{alias}.created < ?")
            params.append(self.until)
        if self.path_prefix:
            clauses.append(f"substr({alias}.path, 1, ?) = ?")
            params.extend([len(self.path_prefix), self.path_prefix])
        if self.type:  # the type: property when it is text (index.kind_of)
            clauses.append(f"lower({alias}.kind) = lower(?)")
            params.append(self.type)
        for bound, op in ((self.min_importance, ">="), (self.max_importance, "<=")):
            if bound is not None:  # importance: when a finite number (index.importance_of)
                clauses.append(f"{alias}.importance {op} ?")
                params.append(bound)
        for moment, op in ((self.changed_since, ">="), (self.changed_until, "<")):
            if moment is not None:  # index.changed_at: the later of updated and the file's mtime
                clauses.append(f"{alias}.changed {op} ?")
                params.append(moment)
        for key, value in self.where:  # a seek in the property tables, driving the rows when selective
            if value is None:
                clauses.append(f"{alias}.rid IN (SELECT rid FROM prop_keys WHERE key = ?)")
                params.append(key)
            else:
                clauses.append(f"{alias}.rid IN (SELECT rid FROM props WHERE key = ? AND value = ?)")
                params.extend([key, value])
        return "".join(" AND " + c for c in clauses), params


def _ids(rids: Iterable[int]) -> str:
    return ", ".join(str(int(r)) for r in rids)


# --------------------------------------------------------------------------- document frequencies


def row_count() -> Query:
    """How many memories the index holds (kept in ``counts``: no scan)."""
    return "SELECT memories FROM counts", []


def population(namespace: str) -> Query:
    """How many memories a namespace holds (IDF is over the namespace searched)."""
    return "SELECT count(*) FROM memories WHERE namespace = ?", [namespace]


def probe(exprs: list[str], common: int, supersedes: bool = False) -> Query:
    """In one statement, what ranking needs to know of the terms before it reads their
    matches: the highest row number (the newest row after a rebuild; rows have gaps
    after deletes), then per term the ``common``-th newest memory matching it (NULL: the
    term is not common) and, when it is not common, how many memories in the whole index
    match it (its document frequency); with ``supersedes``, last, whether any memory
    supersedes another (most vaults have none, and then recall need not look for them)."""
    columns = ["(SELECT max(rid) FROM memories) AS newest"]
    outer = ["newest"]
    params: list[Any] = []
    for i, expr in enumerate(exprs):
        columns.append(f"(SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?) AS f{i}")
        params.extend([expr, common - 1])
    counts: list[Any] = []
    for i, expr in enumerate(exprs):
        outer += [f"f{i}", f"CASE WHEN f{i} IS NULL THEN (SELECT count(*) FROM fts WHERE fts MATCH ?) END"]
        counts.append(expr)
    if supersedes:
        outer.append("EXISTS (SELECT 1 FROM links WHERE relation = 'supersedes')")
    return (f"WITH p AS MATERIALIZED (SELECT {', '.join(columns)}) SELECT {', '.join(outer)} FROM p",
            [*params, *counts])


# --------------------------------------------------------------------------- term matches and candidate pools


def term_matches(expr: str, filters: Filters, now: str) -> Query:
    """The live memories within the filters that match ``expr``. Without filters, from
    the full-text index alone, less the expired (a handful, from the partial index on
    ``expires``): reading each match's row to check its expiry cost ~2 µs a match,
    3.5 ms for a word in 1,500 memories against 0.4 ms."""
    if filters == Filters():
        return f"SELECT rowid FROM fts WHERE fts MATCH ? AND rowid NOT IN ({_EXPIRED})", [expr, now]
    where, params = filters.sql()
    return f"SELECT m.rid {_MATCHED} AND {LIVE}{where}", [filters.narrowed(expr), now, *params]


def expired_rids(now: str) -> Query:
    """Memories expired at ``now`` (few, and found by the partial index on ``expires``):
    all a search without filters must leave out of semantic hits."""
    return _EXPIRED, [now]


def within_filters(filters: Filters, now: str, rids: list[int] | None = None) -> Query:
    """The live memories within the filters: among ``rids`` (semantic recall's nearest
    candidates, passed as one JSON parameter), or all of them (None)."""
    where, params = filters.sql()
    if rids is None:
        return f"SELECT m.rid FROM memories m WHERE {LIVE}{where}", [now, *params]
    return (f"SELECT m.rid FROM memories m WHERE m.rid IN (SELECT value FROM json_each(?)) AND {LIVE}{where}",
            [json.dumps([int(r) for r in rids]), now, *params])


def newest_matching(expr: str, filters: Filters, now: str, limit: int) -> Query:
    """The ``limit`` live memories within the filters matching ``expr`` with the highest
    row numbers (the dated layout's order), with their ``updated`` time."""
    where, params = filters.sql()
    return (
        f"SELECT m.rid, m.updated {_MATCHED} AND {LIVE}{where} ORDER BY fts.rowid DESC LIMIT ?",
        [filters.narrowed(expr), now, *params, limit],
    )


def newest_ids(expr: str, filters: Filters, now: str, limit: int) -> Query:
    """``newest_matching`` without the ``updated`` times: without filters, from the
    full-text index alone (``term_matches`` says why)."""
    if filters == Filters():
        return (f"SELECT rowid FROM fts WHERE fts MATCH ? AND rowid NOT IN ({_EXPIRED}) ORDER BY rowid DESC LIMIT ?",
                [expr, now, limit])
    return newest_matching(expr, filters, now, limit)


def members_within(expr: str, within: str) -> Query:
    """Memories matching both expressions: one FTS AND, driven by the rarer side."""
    return "SELECT rowid FROM fts WHERE fts MATCH ?", [f"({expr}) AND {within}"]


def members_from(expr: str, floor: int) -> Query:
    """Memories matching ``expr`` from row number ``floor`` on."""
    return "SELECT rowid FROM fts WHERE fts MATCH ? AND rowid >= ?", [expr, floor]


def updated(rids: list[int]) -> Query:
    # From the narrow index on (rid, updated): the rows themselves are wide (bodies
    # inline), and 200 of them scattered over a 100k table cost twice as much.
    return ("SELECT rid, updated FROM memories INDEXED BY memories_rid_updated "
            "WHERE rid IN (SELECT value FROM json_each(?))", [json.dumps(rids)])


# --------------------------------------------------------------------------- scores


def bm25(expr: str, rids: list[int], weights: tuple[float, ...] = (), names_apart: float = 0.0,
         headings_apart: float = 0.0) -> Query:
    """BM25 (higher is better, with the schema's column weights or ``weights``) of those
    of ``rids`` that match ``expr``: one FTS query over their row range for a whole
    shortlist, since probing row by row would recount each term's documents every time;
    scored only for ``rids`` (``+rowid``: checked after the match, not probed for), since
    a shortlist spread over a vault leaves thousands of other matches in its range.
    ``names_apart``, ``headings_apart``: plus that share of the BM25 of the names and
    aliases columns alone, of the headings column alone."""
    score = f"-bm25(fts, {', '.join(repr(float(w)) for w in weights)})" if weights else "-rank"
    for share, columns in ((names_apart, ("names", "aliases")), (headings_apart, ("headings",))):
        if share:
            only = ", ".join("1.0" if column in columns else "0.0" for column in FTS_COLUMNS)
            score += f" - {float(share)!r} * bm25(fts, {only})"
    return (f"SELECT rowid, {score} FROM fts WHERE fts MATCH ? AND rowid BETWEEN ? AND ? "
            "AND +rowid IN (SELECT value FROM json_each(?))", [expr, min(rids), max(rids), json.dumps(rids)])


def link_counts(rids: list[int], sample: int, scripts: list[str]) -> Query:
    """For each of ``rids`` that links to other notes: how many distinct ones, its
    body's length in characters and, for a note written in one of ``scripts``' languages,
    the body's first ``sample`` characters in UTF-8 (the ``hub`` rule: the sample tells
    the scripts it is written in)."""
    return ("SELECT l.src, count(DISTINCT l.target), length(m.body), CASE WHEN m.lang IN "
            "(SELECT value FROM json_each(?)) THEN CAST(substr(m.body, 1, ?) AS BLOB) END FROM links l "
            "CROSS JOIN memories m ON m.rid = l.src WHERE l.src IN (SELECT value FROM json_each(?)) "
            "AND l.relation = ? GROUP BY l.src", [json.dumps(scripts), int(sample), json.dumps(rids), BODY_LINK_RELATION])


def languages(rids: list[int]) -> Query:
    """The language (``index.db``'s ``lang``) of each of ``rids``."""
    return "SELECT rid, lang FROM memories WHERE rid IN (SELECT value FROM json_each(?))", [json.dumps(rids)]


def language_counts(rids: list[int]) -> Query:
    """How many of ``rids`` are written in each language."""
    return ("SELECT lang, count(*) FROM memories WHERE rid IN (SELECT value FROM json_each(?)) GROUP BY lang",
            [json.dumps(rids)])


def main_language() -> Query:
    """The language most memories are written in (from the index on ``lang``)."""
    return "SELECT lang FROM memories WHERE lang != '' GROUP BY lang ORDER BY count(*) DESC, lang LIMIT 1", []


def in_language(expr: str, languages: list[str]) -> Query:
    """Whether some memory written in one of ``languages`` matches ``expr``."""
    return ("SELECT 1 FROM fts CROSS JOIN memories m ON m.rid = fts.rowid WHERE fts MATCH ? "
            "AND m.lang IN (SELECT value FROM json_each(?)) LIMIT 1", [expr, json.dumps(languages)])


def asking(rids: list[int]) -> Query:
    """Which of ``rids`` hold a question mark."""
    return (
        "SELECT rid FROM memories WHERE rid IN (SELECT value FROM json_each(?)) "
        "AND (instr(body, '?') > 0 OR instr(body, '？') > 0)",
        [json.dumps(rids)],
    )


def neighbours(rids: list[int], offsets: Iterable[int], window: dt.timedelta) -> Query:
    """Per source, the memories written ``offset`` places after (+) or before (-) it in
    its namespace, within ``window`` (columns ``n1``, ``n-1``...)."""
    seconds = f"{window.total_seconds():.0f} seconds"
    columns = []
    for offset in offsets:
        before = offset < 0
        columns.append(
            "(SELECT n.rid FROM memories n WHERE n.namespace = s.namespace "
            f"AND n.created {'<' if before else '>'} s.created "
            f"AND n.created {'>=' if before else '<='} strftime('%Y-%m-%dT%H:%M:%SZ', s.created, '{'-' if before else '+'}{seconds}') "
            f"ORDER BY n.created {'DESC' if before else ''}, n.path {'DESC' if before else ''} "
            f'LIMIT 1 OFFSET {abs(int(offset)) - 1}) AS "n{int(offset)}"'
        )
    return f"SELECT s.rid, {', '.join(columns)} FROM memories s WHERE s.rid IN ({_ids(rids)})", []


# --------------------------------------------------------------------------- records and snippets


def first_page(every: str, within: str | None, filters: Filters, now: str, newest: bool, offset: int, want: int,
               marked: str, tokens: int, long_body: int, weights: tuple[float, ...] = ()) -> Query:
    """The memories holding every term, ranked, as far as one row past the page, in one
    statement: each with its place (``n``, from 1) and score (BM25 over ``every``, the
    terms that are not common, with the schema's column weights or ``weights``, as
    ``bm25`` scores); those on the page (places ``offset`` + 1 to ``want``) with
    their row and their body marked for ``marked`` (a snippet of ``tokens`` words; a body
    longer than ``long_body`` characters whole, for ``terms.best_window``). ``within``:
    what the common terms add, an FTS AND with ``every`` (``members_within``). The order
    is ``rank.every_term``'s: BM25, then the latest updated, then the highest row number
    (``newest``: the latest updated first)."""
    live, params = _live_rows("u", filters, now)
    common = " AND +fts.rowid IN (SELECT rowid FROM fts WHERE fts MATCH ?)" if within is not None else ""
    order = "updated DESC, score DESC, rid DESC" if newest else "score DESC, updated DESC, rid DESC"
    score = f"-bm25(fts, {', '.join(repr(float(w)) for w in weights)})" if weights else "-fts.rank"
    hits = (f"SELECT fts.rowid AS rid, {score} AS score, u.updated AS updated {live[0]} WHERE fts MATCH ?{common}"
            f"{live[1]} ORDER BY {order} LIMIT ?")
    return _paged(hits, order, [every, *([within] if within is not None else []), *params, want + 1],
                  offset, want, marked, tokens, long_body)


def first_page_common(every: str, filters: Filters, now: str, pool: int, offset: int, want: int, marked: str,
                      tokens: int, long_body: int) -> Query:
    """``first_page`` when every term is common: the ``pool`` newest memories holding
    them (``newest_matching``), latest updated first (``rank.newest_of``), scored 0."""
    newest, params = newest_matching(every, filters, now, pool)
    order = "updated DESC, rid DESC"
    hits = f"SELECT rid, 0.0 AS score, updated FROM ({newest}) ORDER BY {order} LIMIT ?"
    return _paged(hits, order, [*params, want + 1], offset, want, marked, tokens, long_body)


def _live_rows(alias: str, filters: Filters, now: str) -> tuple[tuple[str, str], list[Any]]:
    """The ``FROM`` and the trailing conditions that keep a match to the live memories
    within the filters, with the memory's ``updated`` at ``alias``: without filters from
    the narrow index on (rid, updated), less the expired (``term_matches`` says why)."""
    if filters == Filters():
        return ((f"FROM fts CROSS JOIN memories {alias} INDEXED BY memories_rid_updated ON {alias}.rid = fts.rowid",
                 f" AND fts.rowid NOT IN ({_EXPIRED})"), [now])
    where, params = filters.sql(alias)
    return ((f"FROM fts CROSS JOIN memories {alias} ON {alias}.rid = fts.rowid",
             f" AND ({alias}.expires IS NULL OR {alias}.expires > ?){where}"), [now, *params])


def _paged(hits: str, order: str, params: list[Any], offset: int, want: int, marked: str, tokens: int,
           long_body: int) -> Query:
    """``hits`` (rid, score, updated; ranked by ``order``) numbered, and the page's rows
    with their marked bodies: the same ``snippet`` and ``highlight`` as ``snippets_of``
    and ``highlighted``, chosen by the body's length."""
    snippet = f"(SELECT snippet(fts, 2, char(2), char(3), '…', {int(tokens)}) FROM fts WHERE fts MATCH ? AND rowid = h.rid)"
    whole = "(SELECT highlight(fts, 2, char(2), char(3)) FROM fts WHERE fts MATCH ? AND rowid = h.rid)"
    return (
        f"WITH h AS MATERIALIZED (SELECT rid, score, row_number() OVER (ORDER BY {order}) AS n FROM ({hits})) "
        f"SELECT h.n AS hit_n, h.rid AS hit_rid, h.score AS hit_score, "
        f"CASE WHEN m.rid IS NULL THEN NULL WHEN length(m.body) > {int(long_body)} THEN {whole} ELSE {snippet} END "
        "AS hit_marked, length(m.body) AS hit_length, m.* FROM h LEFT JOIN memories m ON m.rid = h.rid AND h.n > ? AND h.n <= ? ORDER BY h.n",
        [*params, marked, marked, offset, want],
    )


def records(rids: Iterable[int]) -> Query:
    return f"SELECT * FROM memories WHERE rid IN ({_ids(rids)})", []


def snippets_in_range(expr: str, rids: list[int], tokens: int) -> Query:
    """FTS5 snippets of rows that lie close together: one pass over their range (matches
    marked with char(2) and char(3), which ``recall.highlights`` turns into offsets)."""
    return (
        f"SELECT rowid, snippet(fts, 2, char(2), char(3), '…', {int(tokens)}) FROM fts "
        f"WHERE fts MATCH ? AND rowid BETWEEN ? AND ? AND +rowid IN ({_ids(rids)})",
        [expr, min(rids), max(rids)],
    )


def snippets_of(expr: str, rids: list[int], tokens: int) -> Query:
    """FTS5 snippets of rows far apart: one probe per row."""
    return (
        f"SELECT rowid, snippet(fts, 2, char(2), char(3), '…', {int(tokens)}) FROM fts WHERE fts MATCH ? "
        f"AND rowid IN ({_ids(rids)})",
        [expr],
    )


def highlighted(expr: str, rids: list[int]) -> Query:
    """Long bodies with every match marked (``terms.best_window`` picks the window)."""
    return (
        f"SELECT rowid, highlight(fts, 2, char(2), char(3)) FROM fts WHERE fts MATCH ? AND rowid IN ({_ids(rids)})",
        [expr],
    )


# --------------------------------------------------------------------------- vocabulary


def words_starting(prefix: str, limit: int) -> Query:
    """Indexed words (as written) that start with ``prefix`` and are longer, the ones
    in most memories first."""
    return (
        "SELECT term FROM words_vocab WHERE term > ? AND term < ? ORDER BY doc DESC, term LIMIT ?",
        [prefix, prefix + "\U0010ffff", limit],
    )


def vocabulary(head: str, shortest: int, longest: int, limit: int) -> Query:
    """Indexed words starting with ``head`` of a length in a range, with how many
    memories hold each."""
    return (
        "SELECT term, doc FROM words_vocab WHERE term >= ? AND term < ? AND length(term) BETWEEN ? AND ? LIMIT ?",
        [head, head[:-1] + chr(ord(head[-1]) + 1), shortest, longest, limit],
    )


def word_families(stems: list[str]) -> Query:
    """Which of ``stems`` start some indexed word (as written, accents folded): the
    stems worth an FTS query."""
    return (
        "SELECT s.value FROM json_each(?) s WHERE EXISTS "
        "(SELECT 1 FROM words_vocab v WHERE v.term >= s.value AND v.term < s.value || char(1114111))",
        [json.dumps(stems)],
    )


def path_keys(rids: list[int]) -> Query:
    """The ``path_key`` of ``rids`` (what a link to each of them is indexed under)."""
    return f"SELECT rid, path_key FROM memories WHERE rid IN ({_ids(rids)})", []


def superseding(targets: list[str], filters: Filters, now: str) -> Query:
    """Live memories within the filters whose ``supersedes`` names one of ``targets``
    (link keys): (rid, path, the target as indexed). Driven by the links' target index
    (``CROSS JOIN``: left to itself, with filters, the planner walks the namespace's
    memories instead): most vaults have none, and then this costs one probe per key."""
    where, params = filters.sql()
    return (
        "SELECT m.rid, m.path, l.target FROM links l CROSS JOIN memories m ON m.rid = l.src "
        f"WHERE l.target IN (SELECT value FROM json_each(?)) AND l.relation = 'supersedes' AND {LIVE}{where} "
        "ORDER BY m.rid",
        [json.dumps(targets), now, *params],
    )


def matching_among(expr: str, rids: list[int]) -> Query:
    """Which of ``rids`` match ``expr`` (a handful: one FTS probe each)."""
    return f"SELECT rowid FROM fts WHERE fts MATCH ? AND rowid IN ({_ids(rids)})", [expr]


def supersedes(rids: list[int]) -> Query:
    """The ``supersedes`` links written in ``rids`` (source rid, its path, the target as
    indexed), for ``recall.rank.supersede``."""
    return (
        "SELECT l.src, m.path, l.target FROM links l JOIN memories m ON m.rid = l.src "
        "WHERE l.relation = 'supersedes' AND l.src IN (SELECT value FROM json_each(?))",
        [json.dumps(rids)],
    )
