"""Recall's one entry: terms in, ranked memories out (``Vault.search`` calls ``Engine.search``).

The engine decides what to fetch and in which order — match modes and their fallback,
a second chance for terms that match nothing (CJK words, prefixes, typos) — runs the
builders of ``recall.sql`` through ``Index.query``, and leaves every score to
``recall.rank``. With ``explain`` it keeps each statement it ran.

How it ranks (SPEC §5): each term is looked up once (``match_terms``): the memories it
matches within the filters, unless it is common (in more than ``common_df`` memories),
whose matches are only checked among candidates. Then: memories holding every term, by
BM25 then recency; else memories by IDF-weighted term coverage (lifted by their
neighbours under the conversation profile), then BM25, then recency. BM25 is computed
for terms that are not common only: FTS5 counts every document of every term it ranks,
and a common term weighs almost nothing in it.

Most questions are answered by a first pass of two statements (``first_pass``): a probe
of the terms (which are common, how many memories hold each, whether any memory
supersedes another), then the memories holding every term ranked in SQL with the page's
rows and snippets. The general path above runs when that cannot fill the page, going on
from what the first pass found; both give the same hits (tests/test_recall_first_pass.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..progress import Progress
from . import rank, sql
from .graph import LinkGraph, key_suffixes
from .language import SAMPLE, WRITTEN_DENSER, same_language, suiting, text_length
from .rank import RecallConfig, Scored
from .records import MemoryRecord, Neighbours, TermMatch
from .sql import Filters, Query
from .terms import (
    Term,
    all_expr,
    any_expr,
    best_window,
    can_correct,
    can_prefix,
    can_stem,
    cjk_parts,
    edit_distance,
    expansion_term,
    highlight,
    near_pairs,
    stem_candidates,
    typo_bound,
    word_term,
)

if TYPE_CHECKING:
    from ..index.db import Index

MATCH_MODES = ("auto", "all", "any")
# Semantic recall's part (the optional extra): (filters, now, how many wanted) -> memories
# within the filters by cosine similarity to the question, best first.
Nearest = Callable[[Filters, str, int], list[tuple[int, float]]]
# FTS5's snippet() scores every window against every match: quadratic in the matches of
# a row (a 256 KB body of common words took 20 s). Bodies longer than this many
# characters get a window picked in one pass over highlight()'s output instead.
SNIPPET_SCORED_BODY = 4096
SNIPPET_TOKENS = 16  # words in a snippet
# The first pass (``Engine.first_pass``): off, every search takes the general path it
# short-cuts (the tests compare the two, hit for hit).
FIRST_PASS = True


@dataclass(frozen=True)
class Found:
    """What a search found: the terms searched (after any rescue), the mode that
    produced the hits, one page of hits in order with their records and snippets,
    whether more follow it, typo corrections, and (with ``explain``) every statement run."""

    terms: list[Term]
    mode: str
    ranked: list[Scored]
    records: dict[int, MemoryRecord]
    snippets: dict[int, str]
    corrected: dict[str, str]
    more: bool = False
    statements: list[Query] = field(default_factory=list)
    semantic: str = ""  # the rule that combined the lexical ranking with embeddings ("gate", "fusion"), if any


class Engine:
    def __init__(self, index: Index, config: RecallConfig = rank.DEFAULT, explain: bool = False,
                 progress: Progress | None = None) -> None:
        self.index = index
        self.progress = progress  # hears the typo vocabulary's one-time build (``_words``)
        self.config = config
        self.statements: list[Query] | None = [] if explain else None
        self.newest = False
        self.now = ""
        self.language = ""  # the question's language as its own words tell it ("" when they do not)
        # Whether any memory supersedes another (None: not looked up): when none does,
        # replacements and ``supersede`` have nothing to do and run no statement.
        self.supersedes_found: bool | None = None
        self.needs: tuple[str, ...] = ()  # the derived tables the search's filters read (``Index.needed``)

    def _run(self, query: Query) -> list[Any]:
        if self.statements is not None:
            self.statements.append(query)
        return self.index.query(*query, needs=self.needs)

    def _words(self, query: Query) -> list[Any]:
        """A query of the typo vocabulary, built first if no query has needed it yet
        (``Index.derive``)."""
        self.index.spelling(self.progress)
        if self.statements is not None:
            self.statements.append(query)
        return self.index.query(*query, needs=self.index.SPELLING)

    # ------------------------------------------------------------------ the one entry
    def search(self, terms: list[Term], filters: Filters, now: str, limit: int, match: str, offset: int = 0,
               newest: bool = False, named: frozenset[int] = frozenset(), nearest: Nearest | None = None,
               language: str = "") -> Found:
        """One page (``offset``, ``limit``) of one ranking that depends on neither.

        ``all``: memories with every term. ``any``: memories with most terms.
        ``auto``: memories with every term first, then those with some of them. A term
        that matches nothing gets a second chance (``rescue``) before the partial
        ranking is used. ``newest`` (the question asks for the current state: "current",
        "latest", "ahora"...) puts the newest first among memories matching the same terms.
        ``nearest`` (semantic recall on): with ``auto``, the profile's rule combines the
        two rankings: ``gate``, when no memory holds every term, memories by meaning
        first (``rank.by_meaning``); ``fusion``, the lexical and semantic rankings fused
        by weighted reciprocal rank (``rank.fuse``). ``language`` (the question's, when
        its words tell it) is what the ``notes`` profile prefers."""
        self.newest = newest
        self.language = language
        self.needs = self.index.needed(filters)
        corrected: dict[str, str] = {}
        want = offset + limit
        weighted = self.config.ranking == "weighted" and match != "all"
        rule = self.config.semantic if match == "auto" and nearest is not None else ""
        probed: Any = None
        first: list[Scored] | None = None
        if FIRST_PASS and match != "any" and not weighted and rule != "fusion" and not any(t.cjk for t in terms):
            probed = self._run(sql.probe([t.expr for t in terms], self.config.common_df, supersedes=True))[0]
            self.supersedes_found = bool(probed[-1])
            done = self.first_pass(terms, probed, filters, now, offset, want, match, bool(named))
            if isinstance(done, Found):
                return done
            first = done
        matches = self.match_terms(terms, filters, now, probed)
        complete: list[Scored] = []
        if match != "any" and not weighted:
            complete = first if first is not None else self.every_term(matches, filters, now)
        if not complete and (not weighted or any(m.rids is not None and not m.rids for m in matches)):
            matches, corrected = self.rescue(matches, filters, now)
            rewritten = [m.term for m in matches] != terms
            terms = [m.term for m in matches]
            if match != "any" and rewritten and not weighted:
                complete = self.every_term(matches, filters, now)
        self.now = now
        if weighted:
            ranked = rank.named_first(self.weighted(matches, filters, now, tiers=match == "auto"), named)
            complete = [s for s in ranked if s.complete]
        else:
            complete = rank.named_first(self.supersede(self.with_replacements(complete, matches, filters, now)), named)
            ranked = complete
            # Partial hits: all of them for "any"; for "auto" after the complete ones, when
            # the page reaches past them (then whether more follow is known too), or past
            # the part of the ranking fused with the semantic one.
            depth = max(want, self.config.fusion_pool) if rule == "fusion" else want
            if match == "any" or (match == "auto" and len(terms) > 1 and len(complete) <= depth):
                held = {s.rid for s in complete}
                partial = [s for s in self.some_terms(matches, filters, now, depth) if s.rid not in held]
                ranked = partial if match == "any" else complete + partial
        gate = rule == "gate" and not complete
        if nearest is not None and (gate or rule == "fusion"):
            close = [pair for pair in nearest(filters, now, max(want, self.config.semantic_pool))
                     if pair[1] >= self.config.semantic_floor][: self.config.semantic_pool]
            ranked = self.by_meaning(close, ranked, newest) if gate else self.fused(close, ranked, named)
        semantic = "gate" if gate else "fusion" if rule == "fusion" else ""
        page = ranked[offset:want]
        if gate:
            mode = "any"
        elif match == "auto":
            mode = "all" if (complete and all(s.complete for s in page)) or (not complete and len(terms) <= 1) else "any"
        else:
            mode = match
        records = self.records([s.rid for s in page])
        page = [s for s in page if s.rid in records]  # forgotten since it was ranked
        snippets = self.snippets([records[s.rid] for s in page], terms)
        return Found(terms, mode, page, records, snippets, corrected, len(ranked) > want, list(self.statements or []),
                       semantic)

    def first_pass(self, terms: list[Term], probed: Any, filters: Filters, now: str, offset: int, want: int,
                   match: str, named: bool) -> Found | list[Scored] | None:
        """The common shapes in one statement after the probe: the memories holding every
        term, ranked as ``every_term`` ranks them, as far as one past the page, with the
        page's rows and snippets. When they fill the page (or nothing else may follow
        them: ``all``, one term) and neither replacements nor a memory called what was
        asked can move them, that is the answer. Else the complete hits when all of them
        are here (the general path goes on from them), or None (it starts over)."""
        floors, counts = probed[1:1 + 2 * len(terms):2], probed[2:2 + 2 * len(terms):2]
        if any(floor is None and not count for floor, count in zip(floors, counts)):
            return []  # a term no memory holds: none holds every term
        rare = [t for t, floor in zip(terms, floors) if floor is None]
        common = [t for t, floor in zip(terms, floors) if floor is not None]
        marked = any_expr(terms)
        if rare:
            within = f"({all_expr(common)}) AND ({all_expr(rare)})" if common else None  # as ``_members`` asks
            query = sql.first_page(all_expr(rare), within, filters, now, self.newest, offset, want, marked,
                                   SNIPPET_TOKENS, SNIPPET_SCORED_BODY, self.config.field_weights)
        else:
            query = sql.first_page_common(all_expr(common), filters, now, self.config.common_pool, offset, want,
                                          marked, SNIPPET_TOKENS, SNIPPET_SCORED_BODY)
        rows = self._run(query)
        words = tuple(t.text for t in terms)
        complete = [Scored(row[1], row[2], words, {"bm25": row[2]} if rare else {}) for row in rows]
        alone = match == "all" or len(terms) <= 1 or len(complete) > want
        if complete and alone and not named and not self.supersedes_found:
            return self.first_page(terms, complete, rows, offset, want)
        return complete if len(complete) <= want else None

    def first_page(self, terms: list[Term], complete: list[Scored], rows: list[Any], offset: int, want: int) -> Found:
        """The answer from ``first_pass``'s rows: the page's records and snippets as
        ``records`` and ``snippets`` make them (those only when some body's length reads
        differently in SQLite, as one holding a NUL does)."""
        records: dict[int, MemoryRecord] = {}
        snippets: dict[int, str] = {}
        long_in_sql = False
        columns = rows[0].keys()[5:] if rows else []  # the row's own: m.*
        for row in rows:
            if row[4] is None:  # off the page
                continue
            record = MemoryRecord.from_row(dict(zip(columns, tuple(row)[5:])))
            records[record.rid] = record
            long_in_sql = long_in_sql or (len(record.body) > SNIPPET_SCORED_BODY) != (row[4] > SNIPPET_SCORED_BODY)
            snippets[record.rid] = best_window(row[3], SNIPPET_TOKENS) if row[4] > SNIPPET_SCORED_BODY else row[3]
        page = [s for s in complete[offset:want] if s.rid in records]
        if long_in_sql:
            snippets = self.snippets([records[s.rid] for s in page], terms)
        return Found(terms, "all", page, records, snippets, {}, len(complete) > want, list(self.statements or []))

    def by_meaning(self, close: list[tuple[int, float]], partial: list[Scored], newest: bool) -> list[Scored]:
        """The ``gate`` rule: the memories closest in meaning, superseded ones below
        those replacing them, then the partial lexical hits not among them."""
        updated = self.updated([rid for rid, _ in close]) if newest else {}
        ordered = rank.by_meaning(close, partial, updated, self.config, newest)
        return self.supersede(ordered[: len(close)]) + ordered[len(close):]

    def fused(self, close: list[tuple[int, float]], lexical: list[Scored], named: frozenset[int]) -> list[Scored]:
        """The ``fusion`` rule (``rank.fuse``), superseded memories below those replacing
        them within the fused part, and a memory called exactly what was asked first."""
        pool = self.config.fusion_pool
        ordered = rank.named_first(rank.fuse(close, lexical, self.config), named)
        cut = len({s.rid for s in lexical[:pool]} | {rid for rid, _ in close[:pool]})
        return self.supersede(ordered[:cut]) + ordered[cut:]

    # ------------------------------------------------------------------ terms
    def match_terms(self, terms: list[Term], filters: Filters, now: str, probed: Any = None) -> list[TermMatch]:
        """Per term: the memories within the filters that it matches, and how many
        memories match it in the whole index (estimated when common); ``probed``: the
        probe of ``terms`` already run (``sql.probe``)."""
        common = self.config.common_df
        if probed is None:
            probed = self._run(sql.probe([t.expr for t in terms], common))[0]
        newest = probed[0] or 0
        out = []
        for i, term in enumerate(terms):
            floor, df = probed[1 + 2 * i], probed[2 + 2 * i]
            if floor is not None:
                out.append(TermMatch(term, rank.estimated_df(common, newest, floor), None))
                continue
            rows = self._run(sql.term_matches(term.expr, filters, now)) if df else []
            out.append(TermMatch(term, df, {row[0] for row in rows}))
        return out

    def rescue(self, matches: list[TermMatch], filters: Filters, now: str) -> tuple[list[TermMatch], dict[str, str]]:
        """Give each term that matches nothing a second chance: a CJK question run is
        split into its words, a word is tried as a prefix (``kube`` -> ``kubernetes``),
        then, if no memory anywhere holds it, corrected to the closest indexed word
        (the most frequent on a tie; ``kuberentes`` -> ``kubernetes``). Between the two
        a derived word tries its stem family (``linter`` -> "lint"); identifiers
        (``terms.identifier_like``) are never stemmed or corrected."""
        out: list[TermMatch] = []
        corrected: dict[str, str] = {}
        for m in matches:
            if m.rids is None or m.rids:
                out.append(m)
                continue
            if m.term.cjk and len(m.term.text) > 1:
                out.extend(self.match_terms(cjk_parts(m.term.text), filters, now))
                continue
            longer = self.words_starting(m.term.text) if can_prefix(m.term) else []
            if longer:
                [prefixed] = self.match_terms([expansion_term(m.term.text, longer)], filters, now)
                if prefixed.rids is None or prefixed.rids:
                    out.append(prefixed)
                    continue
            stemmed = self.stem(m, filters, now) if can_stem(m.term) else None
            if stemmed is not None:
                out.append(stemmed)
                continue
            fix = self.correct(m, filters, now) if m.df == 0 and can_correct(m.term) else None
            if fix is not None:
                corrected[m.term.text] = fix.term.text
            out.append(fix or m)
        unique = {m.term.text: m for m in out}
        return list(unique.values()), corrected

    def stem(self, m: TermMatch, filters: Filters, now: str) -> TermMatch | None:
        """The word's stem family: the longest stem it derives from by a known suffix
        (``terms.stem_candidates``: ``linter`` -> "lint") that starts an indexed word and
        matches within the filters through the index's stemmer ("lint" finds "linting").
        The term keeps its text; its expression is the stem's."""
        candidates = stem_candidates(m.term.text)
        indexed = {row[0] for row in self._words(sql.word_families(candidates))} if candidates else set()
        for stem in (c for c in candidates if c in indexed):
            [found] = self.match_terms([Term(m.term.text, word_term(stem).expr)], filters, now)
            if found.rids is None or found.rids:
                return found
        return None

    def correct(self, m: TermMatch, filters: Filters, now: str) -> TermMatch | None:
        """The closest indexed word (fewest edits, then most memories) that matches
        within the filters; None when nothing is close enough. Where the profile
        prefers the question's language, only words some memory in that language holds
        (the question's, else the vault's main language)."""
        word, bound = m.term.text, typo_bound(m.term.text)
        language = self.correction_language() if self.config.other_language != 1.0 else ""
        for candidate in rank.closest(word, self.vocabulary(word, bound), bound, edit_distance)[: self.config.typo_tries]:
            if language and not self._run(sql.in_language(word_term(candidate).expr, suiting(language))):
                continue  # a word of another language ("nicht" for "night" in an English vault)
            [found] = self.match_terms([word_term(candidate)], filters, now)
            if found.rids is None or found.rids:
                return found
        return None

    def words_starting(self, prefix: str) -> list[str]:
        return [row[0] for row in self._words(sql.words_starting(prefix, self.config.prefix_expansions))]

    def vocabulary(self, word: str, spread: int) -> list[tuple[str, int]]:
        """Indexed words (as written, accents folded) within ``spread`` of ``word``'s
        length that share its first two letters, with how many memories hold each.
        Where that is more than ``vocab_candidates`` words, a longer shared start is
        required, so correcting stays cheap in a large vault."""
        most = self.config.vocab_candidates
        for size in range(2, len(word)):
            rows = self._words(sql.vocabulary(word[:size], len(word) - spread, len(word) + spread, most + 1))
            if len(rows) <= most:
                return [(row[0], row[1]) for row in rows]
        return []

    # ------------------------------------------------------------------ every term
    def every_term(self, matches: list[TermMatch], filters: Filters, now: str) -> list[Scored]:
        """Memories holding every term, best first: BM25 then newest. When every term is
        common (the query names nothing specific), the newest ``common_pool`` of them."""
        words = tuple(m.term.text for m in matches)
        rare = [m for m in matches if m.rids is not None]
        common = [m.term for m in matches if m.rids is None]
        if not rare:
            # Row numbers follow the dated layout (and creation order since), so the
            # highest ones are nearly the newest; their updated times settle the order.
            rows = self._run(sql.newest_matching(all_expr(common), filters, now, self.config.common_pool))
            return rank.newest_of([(row[0], row[1]) for row in rows], words)
        found = set.intersection(*(m.rids for m in rare if m.rids is not None))
        if common and found:
            found &= self._members(all_expr(common), "(" + all_expr([m.term for m in rare]) + ")")
        bm25 = self.bm25(list(found), matches, every=True)
        return rank.every_term(found, bm25, self.updated(found), words, self.newest)

    # ------------------------------------------------------------------ some terms
    def some_terms(self, matches: list[TermMatch], filters: Filters, now: str, want: int) -> list[Scored]:
        """Memories matching some terms, best first: coverage (lifted by context), then
        BM25 among the best ``bm25_pool``, then recency. Only as far as ``want`` is the
        order worked out: past the pool, by coverage then recency."""
        scores, matched = self.coverage(matches, filters, now)
        lifted = self.with_context(scores)
        short = rank.shortlist(lifted, self.config.bm25_pool)
        bm25 = self.bm25(short, matches)
        held = set(short)
        rest = [rid for rid in lifted if rid not in held] if want > len(short) else []
        ordered = rank.some_terms(short, rest, lifted, scores, matched, bm25, self.updated(short + rest),
                                  frozenset(m.term.text for m in matches), self.newest)
        return self.supersede(ordered[: len(short)]) + self.supersede(ordered[len(short):])

    def weighted(self, matches: list[TermMatch], filters: Filters, now: str, tiers: bool) -> list[Scored]:
        """The ``weighted`` ranking (``rank.weighted``): every candidate of the coverage
        step, the best ``bm25_pool`` by BM25 with the profile's field weights and the
        question's language preferred; the memories holding every term first only when
        ``tiers`` and every term is specific."""
        scores, matched = self.coverage(matches, filters, now)
        short = rank.shortlist(scores, self.config.bm25_pool)
        held = set(short)
        rest = [rid for rid in scores if rid not in held]
        bm25 = self.hubs_down(self.bm25(short, matches, apart=True))
        language = self.question_language(matches) if self.config.other_language != 1.0 else ""
        languages = self.languages(short + rest) if language else {}
        population = max(self._run(sql.row_count())[0][0], 1)
        specific = tiers and all(rank.specific(m.df, population, self.config) for m in matches)
        ordered = rank.weighted(short, rest, scores, matched, bm25, languages, language,
                                frozenset(m.term.text for m in matches), specific, self.config)
        return self.supersede(ordered[: len(short)]) + self.supersede(ordered[len(short):])

    def hubs_down(self, bm25: dict[int, float]) -> dict[int, float]:
        """``bm25`` with each hub's score lowered (``rank.hub_share``): a note listing
        many others holds the question's words beside the link to the answer. Only
        the best ``hub_checked`` are checked: lowering others could not bring them up."""
        if not bm25 or not self.config.hub_links:
            return bm25
        best = rank.shortlist(bm25, self.config.hub_checked)
        for rid, links, length, start in self._run(sql.link_counts(sorted(best), SAMPLE, list(WRITTEN_DENSER))):
            bm25[rid] *= rank.hub_share(links, text_length(start or b"", length), self.config)
        return bm25

    def question_language(self, matches: list[TermMatch]) -> str:
        """The question's language: as its own words tell it; else (Latin letters, or no
        letters, and no language's function words) the language the memories its terms
        match point to (``rank.language_votes``); else the vault's main language when it
        suits the question's letters."""
        if self.language and self.language != "latin":
            return self.language
        counts = {m.term.text: dict(self._run(sql.language_counts(sorted(m.rids)))) for m in matches if m.rids}
        population = max(self._run(sql.row_count())[0][0], 1)
        weights = {m.term.text: rank.idf(m.df, population) for m in matches if m.rids}
        voted = rank.language_votes(counts, weights, self.language)
        if voted:
            return voted
        main = self.main_language()
        return main if same_language(self.language, main) else self.language

    def correction_language(self) -> str:
        """The language typos are corrected towards: the question's when its words
        tell it, else the vault's main language where that suits the question's letters."""
        if self.language and self.language != "latin":
            return self.language
        main = self.main_language()
        return main if same_language(self.language, main) else self.language

    def main_language(self) -> str:
        rows = self._run(sql.main_language())
        return str(rows[0][0]) if rows else ""

    def languages(self, rids: list[int]) -> dict[int, str]:
        return {row[0]: row[1] for row in self._run(sql.languages(rids))} if rids else {}

    def coverage(self, matches: list[TermMatch], filters: Filters, now: str) -> tuple[dict[int, float], Mapping[int, list[str]]]:
        """IDF-weighted term coverage (``rank.coverage``) over the candidates: the
        memories matching a term that is not common, whose common terms are then looked
        up with one FTS AND query per term; and memories holding several common terms
        together (``_combinations``), so that "melanie beach 2023" still finds a memory
        with all three when each is in thousands of memories."""
        total = max(self._run(sql.row_count())[0][0], 1)
        population = total
        if filters.namespace:  # other filters only narrow the namespace
            population = max(self._run(sql.population(filters.namespace))[0][0], 1)
        rare = [m for m in matches if m.rids]
        common = [m for m in matches if m.rids is None]
        found: dict[str, set[int]] = {m.term.text: set(m.rids) for m in rare if m.rids}
        pool: set[int] = set().union(*found.values())
        within = "(" + any_expr([m.term for m in rare]) + ")"
        for m in common:
            found[m.term.text] = self._members(m.term.expr, within) & pool if pool else set()
        if common:
            weights = {m.term.text: rank.idf(m.df * population / total, population) for m in common}
            for rid, terms in self._combinations([m.term for m in common], weights, bool(pool), filters, now).items():
                for text in terms:
                    found[text].add(rid)
        return rank.coverage(matches, found, population, total)

    def _combinations(self, common: list[Term], weights: dict[str, float], have_pool: bool,
                      filters: Filters, now: str) -> dict[int, set[str]]:
        """Memories holding several common terms at once (rid -> those terms): one FTS
        AND query per combination (``rank.combinations``), the newest ``common_pool``
        each. When no other term found a candidate, the newest memories holding any
        common term follow."""
        pool = self.config.common_pool
        out: dict[int, set[str]] = {}
        for combo in rank.combinations(common, weights, self.config.combination_queries):
            for rid in self._newest(all_expr(list(combo)), filters, now):
                out.setdefault(rid, set()).update(t.text for t in combo)
            if len(out) >= pool:
                return out
        if not have_pool:
            newest = set(self._newest(any_expr(common), filters, now))
            floor = min(newest, default=0)
            for term in common:
                holding = newest if len(common) == 1 else self._members_from(term.expr, floor) & newest
                for rid in holding:
                    out.setdefault(rid, set()).add(term.text)
        return out

    def _newest(self, expr: str, filters: Filters, now: str) -> list[int]:
        return [row[0] for row in self._run(sql.newest_ids(expr, filters, now, self.config.common_pool))]

    def _members(self, expr: str, within: str) -> set[int]:
        return {row[0] for row in self._run(sql.members_within(expr, within))}

    def _members_from(self, expr: str, floor: int) -> set[int]:
        return {row[0] for row in self._run(sql.members_from(expr, floor or 0))}

    def with_context(self, scores: dict[int, float]) -> dict[int, float]:
        """Rescore candidates as memories of a conversation (``rank.weigh_questions``,
        ``rank.lift``); unchanged when the profile has no context."""
        if not self.config.uses_context and self.config.question_weight == 1.0:
            return scores
        asking = self._asking(rank.question_candidates(scores, self.config))
        scores = rank.weigh_questions(scores, asking, self.config)
        sources = rank.context_sources(scores, self.config)
        around = self._neighbours(sources) if sources and self.config.context_shares else []
        return rank.lift(scores, asking, around, self.config)

    def _asking(self, rids: list[int]) -> set[int]:
        return {row[0] for row in self._run(sql.asking(rids))}

    def _neighbours(self, rids: list[int]) -> list[Neighbours]:
        offsets = list(self.config.context_shares)
        rows = self._run(sql.neighbours(rids, offsets, self.config.context_window))
        return [Neighbours(row[0], {offset: row[f"n{offset}"] for offset in offsets}) for row in rows]

    def with_replacements(self, complete: list[Scored], matches: list[TermMatch], filters: Filters,
                          now: str) -> list[Scored]:
        """The complete hits, with each memory that supersedes one of them (and matches
        some of the terms, within the filters) brought in just above it, though it lacks
        a term: "How do I get VPN access now?" must not answer with the replaced
        procedure because only that one says "get". Looked up for the first
        ``bm25_pool`` complete hits, a fixed number, so no page depends on another."""
        head = complete[: self.config.bm25_pool]
        if not head or self.supersedes_found is False:
            return complete
        heads = {s.rid for s in head}
        keys = {key for _, path_key in self._run(sql.path_keys(sorted(heads))) for key in key_suffixes(path_key)}
        held = {s.rid for s in complete}
        found_links = [row for row in self._run(sql.superseding(sorted(keys), filters, now)) if row[0] not in held]
        if not found_links:
            return complete
        matching = {row[0] for row in self._run(sql.matching_among(any_expr([m.term for m in matches]),
                                                                  sorted({row[0] for row in found_links})))}
        links = LinkGraph(self.index, now)
        above: dict[int, list[int]] = {}
        for src, path, target in found_links:
            if src not in matching:
                continue
            old = links.resolve(target, path)
            if src not in held and old is not None and old["rid"] in heads:
                above.setdefault(old["rid"], []).append(src)
                held.add(src)
        if not above:
            return complete
        found = [m.term.text for m in matches]
        out: list[Scored] = []
        for scored in complete:
            for src in above.get(scored.rid, ()):
                matched = tuple(m.term.text for m in matches if m.rids is not None and src in m.rids)
                out.append(Scored(src, 0.0, matched or tuple(found), {"supersedes": 1.0}, complete=False))
            out.append(scored)
        return out

    def supersede(self, order: list[Scored]) -> list[Scored]:
        """``order`` with each memory another one in it supersedes (``supersedes:
        ["[[old]]"]``, resolved as links are) just below the one replacing it
        (``rank.supersede``). Applied to each part of the ranking on its own (complete
        hits, the partial shortlist, the rest), so no page depends on another."""
        if len(order) < 2 or self.supersedes_found is False:
            return order
        links = LinkGraph(self.index, self.now)
        replaced_by: dict[int, set[int]] = {}
        for src, path, target in self._run(sql.supersedes([s.rid for s in order])):
            old = links.resolve(target, path)
            if old is not None:
                replaced_by.setdefault(old["rid"], set()).add(src)
        return rank.supersede(order, replaced_by) if replaced_by else order

    # ------------------------------------------------------------------ scores and records
    def bm25(self, rids: list[int], matches: list[TermMatch], every: bool = False,
             apart: bool = False) -> dict[int, float]:
        """BM25 of ``rids`` (higher is better) for the terms that are not common (any
        of them, or ``every`` one), over the row range of ``rids``; ``apart``: plus the
        profile's shares of the names' and the headings' own BM25 (``sql.bm25``)."""
        terms = [m.term for m in matches if m.rids]
        if not rids or not terms:
            return {}
        wanted = set(rids)
        expr = (all_expr if every else any_expr)(terms)
        if not every and self.config.near:
            # Pairs of words that are not common only: FTS5 reads every position of each word in a NEAR group.
            expr = " OR ".join([expr, *near_pairs([m.term if m.rids else Term("", "") for m in matches],
                                                  self.config.near)])
        shares = (self.config.names_apart, self.config.headings_apart) if apart else (0.0, 0.0)
        rows = self._run(sql.bm25(expr, rids, self.config.field_weights, *shares))
        return {row[0]: row[1] for row in rows if row[0] in wanted}

    def updated(self, rids: set[int] | list[int]) -> dict[int, str]:
        rids = list(rids)
        return dict(self._run(sql.updated(rids))) if rids else {}

    def records(self, rids: list[int]) -> dict[int, MemoryRecord]:
        if not rids:
            return {}
        return {row["rid"]: MemoryRecord.from_row(row) for row in self._run(sql.records(rids))}

    def snippets(self, records: list[MemoryRecord], terms: list[Term]) -> dict[int, str]:
        """A snippet of each record's body with the matches marked (``terms.MARK_OPEN``,
        ``MARK_CLOSE``; ``recall.highlights`` makes them offsets), from the
        indexed part of the body only. CJK matches are marked in Python: FTS5's
        ``snippet`` would show the bigram column."""
        if not records:
            return {}
        expr = any_expr(terms)
        long_rids = sorted(r.rid for r in records if len(r.body) > SNIPPET_SCORED_BODY)
        rids = sorted(r.rid for r in records if len(r.body) <= SNIPPET_SCORED_BODY)
        found: list[Any] = []
        if not rids:
            pass
        elif rids[-1] - rids[0] < 20 * len(rids):  # close together: one pass over that range
            found = self._run(sql.snippets_in_range(expr, rids, SNIPPET_TOKENS))
        else:  # one probe per row
            found = self._run(sql.snippets_of(expr, rids, SNIPPET_TOKENS))
        out = {row[0]: row[1] for row in found}
        if long_rids:
            marked = self._run(sql.highlighted(expr, long_rids))
            out.update((row[0], best_window(row[1], SNIPPET_TOKENS)) for row in marked)
        needles = [t.text for t in terms if t.cjk]
        if needles:
            for record in records:
                if any(n in record.body for n in needles):
                    out[record.rid] = highlight(record.body, needles)
        return out
