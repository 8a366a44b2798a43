"""How recall orders memories: pure scoring over fetched records, one frozen config.

Nothing here touches the database: ``recall.engine`` fetches (term matches, BM25,
neighbours, update times) and hands the numbers in, so each rule can be tested on a
list of records. The numbers behind the defaults are in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import datetime as dt
import heapq
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from .language import same_language
from .records import Neighbours, TermMatch
from .terms import Term

DistanceFn = Callable[[str, str, int], int]


@dataclass(frozen=True)
class RecallConfig:
    """Every knob of recall. Tests and benchmarks pass their own (``dataclasses.replace``)."""

    name: str = "conversation"
    # A term in more memories than this is "common": its matches are only looked up
    # among candidates, so no query reads a whole vault's worth of rows.
    common_df: int = 2000
    combination_queries: int = 6  # FTS AND queries looking for memories with several common terms
    common_pool: int = 200  # candidates when every term is common: the newest memories matching any
    # Conversation context: a candidate is lifted by the best memories written next to it.
    context_sources: int = 30  # the best candidates whose neighbours are lifted (0: no context)
    context_window: dt.timedelta = dt.timedelta(minutes=30)  # how far apart neighbours may be written
    context_shares: Mapping[int, float] = field(default_factory=lambda: {1: 0.5, -1: 0.4, 2: 0.3, -2: 0.2})
    question_boost: float = 2.0  # a source asking a question lifts what follows it this much more
    question_weight: float = 0.8  # what a memory asking a question counts for itself
    question_checked: int = 100  # the best candidates checked for a question mark
    prefix_expansions: int = 30  # most longer words one prefix stands for
    vocab_candidates: int = 300  # most vocabulary words compared with a typo
    typo_tries: int = 3  # closest vocabulary words tried against the filters when correcting a typo
    bm25_pool: int = 200  # partial hits whose BM25 breaks ties in coverage (the same for every page)
    # Semantic recall (the optional extra), with match="auto": how this profile combines
    # the lexical ranking with memories by meaning (cosine of embeddings). "gate": when
    # no memory holds every term, memories by meaning first (by_meaning); "fusion":
    # both rankings fused by weighted reciprocal rank (fuse); "": lexical only.
    semantic: str = "fusion"
    fusion_weight: float = 0.5  # what a place in the semantic ranking counts against one in the lexical
    fusion_k: int = 5  # reciprocal rank's constant: 1 / (k + place)
    fusion_pool: int = 50  # places of each ranking fused; the lexical ranking continues past them
    semantic_floor: float = 0.2  # a memory less similar than this is not a semantic hit
    semantic_newest_margin: float = 0.05  # "current X": newest among hits this close to the best
    semantic_pool: int = 200  # most semantic hits ranked (a fixed number: no page depends on another)
    # How lexical hits are ordered with match="auto": "tiers", the memories holding every
    # term first (each tier by its own score); "weighted" (hand-written notes), one
    # ranking by BM25 over the terms any memory holds, the complete hits first only
    # when every term is specific (in at most ``specific_share`` of the memories).
    ranking: str = "tiers"
    specific_share: float = 0.0
    # BM25 column weights (names: title and file name, tags, body, cjk, dated,
    # described, aliases, headings; see index.db), or () for the schema's.
    field_weights: tuple[float, ...] = ()
    # What a memory in another language than the question's counts (1.0: language plays
    # no part); typos are then corrected towards words of the question's language.
    other_language: float = 1.0
    # The "weighted" ranking's BM25 also counts each two neighbouring words of the
    # question found within this many words of each other (0: not).
    near: int = 0
    # The "weighted" ranking adds this share of a second BM25 counting the names only
    # (title, file name, aliases): BM25 saturates each term over all columns together,
    # so a word in the title lifts a note little above one repeating it in the body.
    names_apart: float = 0.0
    # ... and this share of a BM25 counting the body's markdown headings only (0: not).
    headings_apart: float = 0.0
    # A hub (a note linking to more than this many distinct notes per 1,000 characters
    # of its body, an ideograph, kana or Hangul syllable counting as the Latin letters it
    # takes to say it: an index or a table of pages) has its BM25 divided by 1 +
    # ``hub_weight`` for each link per 1,000 characters above it (0: no hub rule).
    hub_links: float = 0.0
    hub_weight: float = 0.0
    hub_checked: int = 50  # the best notes by BM25 checked for being a hub (a fixed number)

    @property
    def uses_context(self) -> bool:
        return self.context_sources > 0 and bool(self.context_shares)


CONVERSATION = RecallConfig()
# A store of facts: no lifting by neighbours or question marks (they suit a log of
# dialog turns, and are noise between unrelated facts written one after another).
FACTS = RecallConfig(name="facts", context_sources=0, context_shares={}, question_weight=1.0, question_checked=0,
                     semantic="gate")
# Hand-written notes (an Obsidian vault): title, aliases and body weighed apart, one
# ranking by BM25 with filler words never required, a preference for notes in the
# question's language, and words and meaning fused on every query. The numbers are
# from the real-notes set's tuning half (benchmarks/RESULTS.md).
NOTES = RecallConfig(name="notes", context_sources=0, context_shares={}, question_weight=1.0, question_checked=0,
                     ranking="weighted", specific_share=0.02, field_weights=(7.0, 3.0, 1.0, 1.0, 0.0, 1.0, 4.0, 0.0),
                     other_language=0.3, near=3, bm25_pool=1000, names_apart=0.25, headings_apart=0.1,
                     hub_links=5.0, hub_weight=0.1)
PROFILES = {"facts": FACTS, "conversation": CONVERSATION, "notes": NOTES}
DEFAULT = CONVERSATION  # what Vault.search(config=None, profile=None) used before profiles; tests start from it


@dataclass(frozen=True)
class Scored:
    """A ranked memory: its score (higher is better, comparable within one result), the
    terms it matched, and the parts the score came from (``search --explain``)."""

    rid: int
    score: float
    matched: tuple[str, ...]
    parts: Mapping[str, float] = field(default_factory=dict)
    complete: bool = True  # it holds every term
    found_by: str = "lexical"  # or "semantic": which signal put it in the ranking


# --------------------------------------------------------------------------- document frequency


def idf(n: float, population: int) -> float:
    """BM25's IDF of a term in ``n`` of ``population`` memories."""
    return math.log(1 + (population - n + 0.5) / (n + 0.5))


def estimated_df(common: int, newest: int, floor: int) -> float:
    """A common term's document frequency from the row number of its ``common``-th
    newest match: as dense among older memories as among the newest ``common``."""
    return common * newest / max(newest - floor + 1, 1)


# --------------------------------------------------------------------------- memories with every term


def newest_first(rids: Iterable[int], updated: Mapping[int, str]) -> list[int]:
    """``rids`` most recently updated first (the last tie-breaker); stable."""
    return sorted(rids, key=lambda rid: updated.get(rid, ""), reverse=True)


def every_term(found: Iterable[int], bm25: Mapping[int, float], updated: Mapping[int, str],
               words: tuple[str, ...], newest: bool = False) -> list[Scored]:
    """Memories holding every term: BM25 (title and tags above the body), then newest,
    then the highest row number (so no order depends on a set's). ``newest`` (the
    question asks for the current state): newest first, then BM25."""
    later = _later_first(updated)
    if newest:
        order = sorted(found, key=lambda rid: (later(rid), -bm25.get(rid, 0.0), -rid))
    else:
        order = sorted(found, key=lambda rid: (-bm25.get(rid, 0.0), later(rid), -rid))
    return [Scored(rid, bm25.get(rid, 0.0), words, {"bm25": bm25.get(rid, 0.0)}) for rid in order]


def named_first(order: list[Scored], named: frozenset[int]) -> list[Scored]:
    """Memories called exactly what was asked (name, title or alias) first, each part in
    its own order: asking for a note by its name finds that note."""
    if not named:
        return order
    return [s for s in order if s.rid in named] + [s for s in order if s.rid not in named]


def newest_of(rows: Iterable[tuple[int, str]], words: tuple[str, ...]) -> list[Scored]:
    """When every term is common (the query names nothing specific): newest first."""
    rows = list(rows)
    later = _later_first(dict(rows))
    newest = sorted(rows, key=lambda row: (later(row[0]), -row[0]))
    return [Scored(rid, 0.0, words, {}) for rid, _ in newest]


def _later_first(updated: Mapping[int, str]) -> Callable[[int], int]:
    """A sort key putting the memories updated later first: each stamp's place among
    the distinct stamps, newest 0 (one sort of the stamps, not a key built per
    comparison: at 100k memories a question ranks hundreds of candidates)."""
    place = {stamp: i for i, stamp in enumerate(sorted(set(updated.values()), reverse=True))}
    last = len(place)
    return lambda rid: place.get(updated.get(rid, ""), last)


# --------------------------------------------------------------------------- memories with some terms


def coverage(matches: list[TermMatch], found: Mapping[str, set[int]], population: int, total: int
             ) -> tuple[dict[int, float], Mapping[int, list[str]]]:
    """IDF-weighted term coverage: each memory's sum of the IDF of the terms it matches
    (a rare word counts more than a common one), and which terms, in question order.
    ``found`` holds the memories each term matched; IDF is over ``population``
    (the namespace searched, or the vault), common terms' counts scaled from ``total``.
    The terms are listed when asked (``MatchedTerms``): a question has thousands of
    candidates, a page shows ten."""
    scores: dict[int, float] = {}
    held: list[tuple[str, set[int]]] = []
    for m in matches:
        rids = found.get(m.term.text, set())
        weight = idf(len(rids) if m.rids is not None else m.df * population / total, population)
        held.append((m.term.text, rids))
        for rid in rids:
            scores[rid] = scores.get(rid, 0.0) + weight
    return scores, MatchedTerms(held, scores)


class MatchedTerms(Mapping[int, list[str]]):
    """rid -> the terms it matched, in question order, worked out per memory asked for."""

    def __init__(self, held: list[tuple[str, set[int]]], candidates: Mapping[int, float]) -> None:
        self._held = held
        self._candidates = candidates

    def __getitem__(self, rid: int) -> list[str]:
        if rid not in self._candidates:
            raise KeyError(rid)
        return [text for text, rids in self._held if rid in rids]

    def __iter__(self) -> Iterator[int]:
        return iter(self._candidates)

    def __len__(self) -> int:
        return len(self._candidates)


def combinations(common: list[Term], weights: Mapping[str, float], most: int) -> list[tuple[Term, ...]]:
    """Combinations of common terms worth an FTS AND query: the largest and weightiest
    first, at most ``most``. Built lazily, size by size: there are 2**n of n words."""

    def largest_first() -> Iterator[tuple[Term, ...]]:
        for size in range(len(common), 1, -1):
            yield from sorted(itertools.combinations(common, size), key=lambda c: -sum(weights[t.text] for t in c))

    return list(itertools.islice(largest_first(), most))


def question_candidates(scores: Mapping[int, float], config: RecallConfig) -> list[int]:
    """The best candidates whose text is checked for a question mark."""
    return heapq.nlargest(config.question_checked, scores, key=scores.__getitem__)


def weigh_questions(scores: Mapping[int, float], asking: set[int], config: RecallConfig) -> dict[int, float]:
    """A memory that asks a question holds the words of the question, not its answer:
    it counts ``question_weight``."""
    return {rid: s * (config.question_weight if rid in asking else 1.0) for rid, s in scores.items()}


def context_sources(scores: Mapping[int, float], config: RecallConfig) -> list[int]:
    """The best candidates whose neighbours are lifted."""
    return heapq.nsmallest(config.context_sources, scores, key=lambda rid: (-scores[rid], -rid))


def lift(scores: Mapping[int, float], asking: set[int], around: list[Neighbours], config: RecallConfig) -> dict[int, float]:
    """Each candidate lifted by the best-scoring memory written just before or after it
    in its namespace, since the answer often sits next to the memory that matched: by a
    share of that neighbour's score (``context_shares``; a neighbour that asks a
    question gives the memories after it ``question_boost`` times more). Only memories
    that match a term themselves are lifted."""
    lifted = dict(scores)
    for row in around:
        source = row.rid
        for offset, share in config.context_shares.items():
            neighbour = row.around.get(offset)
            if neighbour is not None and neighbour in scores:
                gain = share * (config.question_boost if source in asking and offset > 0 else 1.0) * scores[source]
                lifted[neighbour] = max(lifted[neighbour], scores[neighbour] + gain)
    return lifted


def shortlist(scores: Mapping[int, float], size: int) -> list[int]:
    """The candidates BM25 is computed for: the best ``size`` (a fixed number, so no
    page's order depends on how long the page is)."""
    return heapq.nsmallest(size, scores, key=lambda rid: (-scores[rid], -rid))


def some_terms(short: list[int], rest: list[int], scores: Mapping[int, float], coverage_of: Mapping[int, float],
               matched: Mapping[int, list[str]], bm25: Mapping[int, float], updated: Mapping[int, str],
               words: frozenset[str], newest: bool = False) -> list[Scored]:
    """The shortlist by (lifted) coverage, then BM25, then recency; then ``rest`` (all
    scoring at most the shortlist's last) by coverage and recency. A memory matching
    all of ``words`` (the question's terms) is ``complete``. ``newest`` (the
    question asks for the current state): by coverage, then newest among memories of
    equal coverage (those matching the same terms), then lifted score and BM25."""
    later = _later_first(updated)
    if newest:
        order = sorted(short, key=lambda rid: (-coverage_of.get(rid, 0.0), later(rid), -scores[rid],
                                               -bm25.get(rid, 0.0), -rid))
        order += sorted(rest, key=lambda rid: (-coverage_of.get(rid, 0.0), later(rid), -scores[rid], -rid))
    else:
        order = sorted(short, key=lambda rid: (-scores[rid], -bm25.get(rid, 0.0), later(rid), -rid))
        order += sorted(rest, key=lambda rid: (-scores[rid], later(rid), -rid))
    out = []
    for rid in order:
        terms = tuple(matched.get(rid, ()))
        out.append(Scored(rid, scores[rid], terms, {
            "coverage": coverage_of.get(rid, 0.0), "context": scores[rid] - coverage_of.get(rid, 0.0),
            "bm25": bm25.get(rid, 0.0),
        }, complete=words <= set(terms)))
    return out


# --------------------------------------------------------------------------- one weighted ranking (notes)


def weighted(short: list[int], rest: list[int], coverage_of: Mapping[int, float], matched: Mapping[int, list[str]],
             bm25: Mapping[int, float], languages: Mapping[int, str], language: str, words: frozenset[str],
             specific: bool, config: RecallConfig) -> list[Scored]:
    """The ``weighted`` ranking: the shortlist by BM25 (field weights, every term's
    rarity), a memory written in another language than ``language`` counting
    ``other_language`` of its score; then ``rest`` by IDF-weighted coverage. With
    ``specific`` (every term is specific) the memories holding every term come first.
    ``complete`` says on every hit whether it holds every term."""

    def affinity(rid: int) -> float:
        return 1.0 if same_language(language, languages.get(rid, "")) else config.other_language

    def complete(rid: int) -> bool:
        return words <= set(matched.get(rid, ()))

    def tier(rid: int) -> int:
        return 0 if not specific or complete(rid) else 1

    order = sorted(short, key=lambda rid: (tier(rid), -bm25.get(rid, 0.0) * affinity(rid),
                                           -coverage_of.get(rid, 0.0), -rid))
    order += sorted(rest, key=lambda rid: (tier(rid), -coverage_of.get(rid, 0.0) * affinity(rid), -rid))
    return [Scored(rid, bm25.get(rid, 0.0) * affinity(rid), tuple(matched.get(rid, ())), {
        "bm25": bm25.get(rid, 0.0), "coverage": coverage_of.get(rid, 0.0), "language": affinity(rid),
    }, complete=complete(rid)) for rid in order]


def hub_share(links: int, length: float, config: RecallConfig) -> float:
    """What a note's BM25 counts for, given the distinct notes it links to and its body's
    length in Latin letters (``language.text_length``: a Chinese page says in under
    half the characters what its English original says, and is no denser with links
    for it): 1, or less for a hub (``hub_links``): a page listing many notes mentions a
    question's words beside the link to the note that answers it."""
    if not config.hub_links or not config.hub_weight:
        return 1.0
    density = 1000 * links / max(length, 1)
    return 1 / (1 + config.hub_weight * max(0.0, density - config.hub_links))


def specific(df: float, population: int, config: RecallConfig) -> bool:
    """A term in at most ``specific_share`` of the memories: a word that names a topic,
    not a filler word a question happens to hold."""
    return df <= config.specific_share * population


def language_votes(counts: Mapping[str, Mapping[str, int]], weights: Mapping[str, float], script: str) -> str:
    """The language a question's words point to when its own words do not say: per term
    (``counts``: term -> language -> memories), its IDF ``weights`` shared among the
    languages of the memories it matches that suit ``script`` (``"latin"`` or ``""``);
    the clear winner, else ``""``."""
    votes: dict[str, float] = {}
    for term, by_language in counts.items():
        total = sum(by_language.values())
        for language, n in by_language.items():
            if language and language != "latin" and total and same_language(script, language):
                votes[language] = votes.get(language, 0.0) + weights.get(term, 0.0) * n / total
    ranked = sorted(votes.items(), key=lambda item: (-item[1], item[0]))
    if not ranked or ranked[0][1] <= 0 or (len(ranked) > 1 and ranked[1][1] >= ranked[0][1]):
        return ""
    return ranked[0][0]


# --------------------------------------------------------------------------- meaning


def by_meaning(nearest: list[tuple[int, float]], partial: list[Scored], updated: Mapping[int, str],
               config: RecallConfig, newest: bool = False) -> list[Scored]:
    """The ranking when no memory holds every term (the gate chosen on the fact-store
    set's tuning half, benchmarks/RESULTS.md): memories by cosine similarity to the
    question (``nearest``, best first) down to ``semantic_floor``; then the partial
    lexical hits not among them, in their order. ``newest`` (the question asks for the
    current state): among the hits within ``semantic_newest_margin`` of the best, the
    most recently updated first. A semantic hit keeps the terms it matched, if any."""
    close = [(rid, sim) for rid, sim in nearest if sim >= config.semantic_floor]
    if newest and close:
        best = close[0][1]
        near = [pair for pair in close if pair[1] >= best - config.semantic_newest_margin]
        later = _later_first(updated)
        near.sort(key=lambda pair: later(pair[0]))
        close = near + close[len(near):]
    lexical = {s.rid: s for s in partial}
    out = [
        Scored(rid, sim, lexical[rid].matched if rid in lexical else (),
               {**(lexical[rid].parts if rid in lexical else {}), "semantic": sim}, complete=False, found_by="semantic")
        for rid, sim in close
    ]
    held = {rid for rid, _ in close}
    return out + [s for s in partial if s.rid not in held]


def fuse(close: list[tuple[int, float]], lexical: list[Scored], config: RecallConfig) -> list[Scored]:
    """The lexical ranking and the memories closest in meaning fused (the rule chosen on
    LoCoMo's tuning conversations for dialog, benchmarks/RESULTS.md): each memory scores
    1 / (k + place) for its place in the first ``fusion_pool`` lexical hits, plus
    ``fusion_weight`` / (k + place) for its place among the first ``fusion_pool``
    semantic ones; ties keep the lexical order. The lexical ranking continues past
    them. Hits say ``found_by``: lexical, semantic or both."""
    k, pool = config.fusion_k, config.fusion_pool
    top, near = lexical[:pool], close[:pool]
    score: dict[int, float] = {}
    for place, s in enumerate(top, 1):
        score[s.rid] = score.get(s.rid, 0.0) + 1 / (k + place)
    similar = dict(near)
    for place, (rid, _sim) in enumerate(near, 1):
        score[rid] = score.get(rid, 0.0) + config.fusion_weight / (k + place)
    place_of = {s.rid: i for i, s in enumerate(top)}
    order = sorted(score, key=lambda rid: (-score[rid], place_of.get(rid, pool), -rid))
    by_rid = {s.rid: s for s in top}
    out = []
    for rid in order:
        parts = {"fusion": score[rid], **({"semantic": similar[rid]} if rid in similar else {})}
        if rid in by_rid:
            s = by_rid[rid]
            out.append(Scored(rid, score[rid], s.matched, {**s.parts, **parts}, s.complete,
                              "both" if rid in similar else "lexical"))
        else:
            out.append(Scored(rid, score[rid], (), parts, complete=False, found_by="semantic"))
    held = set(score)
    return out + [s for s in lexical[pool:] if s.rid not in held]


# --------------------------------------------------------------------------- supersedes


def supersede(order: list[Scored], replaced_by: Mapping[int, set[int]]) -> list[Scored]:
    """``order`` with each memory that another in it supersedes (``replaced_by``: old
    rid -> the rids whose ``supersedes`` names it) moved to just after the last of
    those; everything else keeps its place. Memories superseding each other in a
    circle keep their order."""
    present = {s.rid for s in order}
    waiting = {s.rid: {n for n in replaced_by.get(s.rid, ()) if n in present and n != s.rid} for s in order}
    out: list[Scored] = []
    emitted: set[int] = set()
    deferred: list[Scored] = []

    def emit(scored: Scored) -> None:
        out.append(scored)
        emitted.add(scored.rid)
        while True:
            ready = next((d for d in deferred if waiting[d.rid] <= emitted), None)
            if ready is None:
                return
            deferred.remove(ready)
            out.append(ready)
            emitted.add(ready.rid)

    for scored in order:
        if waiting[scored.rid] - emitted:
            deferred.append(scored)
        else:
            emit(scored)
    return out + deferred


# --------------------------------------------------------------------------- typos


def closest(word: str, vocabulary: list[tuple[str, int]], bound: int, distance: DistanceFn) -> list[str]:
    """Vocabulary words within ``bound`` edits of ``word``: fewest edits, then most memories."""
    near = []
    for candidate, docs in vocabulary:
        d = distance(word, candidate, bound)
        if 0 < d <= bound and candidate.isalpha():
            near.append((d, -docs, candidate))
    return [candidate for _, _, candidate in sorted(near)]

