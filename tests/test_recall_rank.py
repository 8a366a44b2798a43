"""recall.rank: scoring over records, with no database."""

from __future__ import annotations

import dataclasses

from agent_memory.recall import rank
from agent_memory.recall.rank import DEFAULT
from agent_memory.recall.records import Neighbours, TermMatch
from agent_memory.recall.terms import edit_distance, word_term

DEPLOY, FRIDAY = word_term("deploy"), word_term("friday")


def test_a_rare_term_weighs_more_than_a_common_one() -> None:
    matches = [TermMatch(DEPLOY, 2, {1, 2}), TermMatch(FRIDAY, 50, set(range(1, 51)))]
    scores, matched = rank.coverage(matches, {"deploy": {1, 2}, "friday": set(range(1, 51))}, 100, 100)
    assert scores[1] > scores[3] and matched[1] == ["deploy", "friday"] and matched[3] == ["friday"]
    assert rank.idf(2, 100) > rank.idf(50, 100) > 0


def test_every_term_orders_by_bm25_then_newest() -> None:
    updated = {1: "2026-01-01", 2: "2026-03-01", 3: "2026-02-01"}
    ranked = rank.every_term({1, 2, 3}, {1: 5.0, 2: 1.0, 3: 1.0}, updated, ("deploy",))
    assert [s.rid for s in ranked] == [1, 2, 3]
    assert [s.rid for s in rank.every_term({1, 2, 3}, {}, updated, ("deploy",))] == [2, 3, 1]


def test_a_neighbour_lifts_a_memory_that_matches_itself_only() -> None:
    scores = {1: 4.0, 2: 1.0}
    around = [Neighbours(1, {1: 2, -1: None, 2: 3, -2: None})]  # 3 matched nothing
    lifted = rank.lift(scores, set(), around, DEFAULT)
    assert lifted == {1: 4.0, 2: 1.0 + 0.5 * 4.0}
    asked = rank.lift(scores, {1}, around, DEFAULT)  # 1 asks a question: what follows gains twice as much
    assert asked[2] == 1.0 + 2 * 0.5 * 4.0


def test_a_config_without_shares_lifts_nothing() -> None:
    config = dataclasses.replace(DEFAULT, context_shares={})
    assert rank.lift({1: 4.0, 2: 1.0}, set(), [Neighbours(1, {1: 2})], config) == {1: 4.0, 2: 1.0}


def test_some_terms_breaks_ties_by_bm25_then_recency_and_explains_each_score() -> None:
    scores = {1: 2.0, 2: 2.0, 3: 3.0}
    ranked = rank.some_terms([1, 2, 3], [], scores, {1: 2.0, 2: 2.0, 3: 2.5}, {3: ["a", "b"]}, {2: 1.5},
                             {1: "2026-02", 2: "2026-01", 3: "2026-01"}, frozenset({"a", "b"}))
    assert [s.rid for s in ranked] == [3, 2, 1]
    assert ranked[0].parts == {"coverage": 2.5, "context": 0.5, "bm25": 0.0} and ranked[0].matched == ("a", "b")
    assert [s.complete for s in ranked] == [True, False, False]  # only 3 matched every term


def test_combinations_come_largest_and_weightiest_first_and_are_bounded() -> None:
    a, b, c = word_term("a"), word_term("b"), word_term("c")
    combos = rank.combinations([a, b, c], {"a": 1.0, "b": 3.0, "c": 2.0}, 3)
    assert [[t.text for t in combo] for combo in combos] == [["a", "b", "c"], ["b", "c"], ["a", "b"]]
    many = [word_term(f"w{i}") for i in range(40)]
    assert len(rank.combinations(many, {t.text: 1.0 for t in many}, 6)) == 6  # never 2**40


def test_the_closest_word_has_fewest_edits_then_most_memories() -> None:
    vocabulary = [("deploy", 3), ("deplay", 9), ("depot", 50), ("deploy2", 99)]
    assert rank.closest("deplyo", vocabulary, 1, edit_distance) == ["deploy"]
    assert rank.closest("deplby", vocabulary, 1, edit_distance) == ["deplay", "deploy"]


def test_a_common_terms_frequency_is_estimated_from_its_density() -> None:
    assert rank.estimated_df(2000, 10_000, 8001) == 2000 * 10_000 / 2000


def test_past_the_bm25_pool_memories_follow_by_coverage_then_recency() -> None:
    scores = {1: 3.0, 2: 1.0, 3: 1.0, 4: 2.0}
    ranked = rank.some_terms([1, 4], [2, 3], scores, scores, {}, {1: 9.0}, {2: "2026-01", 3: "2026-02"}, frozenset({"a"}))
    assert [s.rid for s in ranked] == [1, 4, 3, 2]
