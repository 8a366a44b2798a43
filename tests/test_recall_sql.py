"""recall.sql: the statements recall runs, pinned, and each run on a real index."""

from __future__ import annotations

import datetime as dt

import pytest

from agent_memory.recall import sql
from agent_memory.recall.sql import Filters
from agent_memory.vault.vault import Vault

NOW = "2026-07-20T09:00:00Z"


def test_filters_become_and_clauses_with_parameters() -> None:
    where, params = Filters(namespace="work", tags=("a", "b"), since="2026-01-01T00:00:00Z", path_prefix="people/").sql()
    tag = "EXISTS (SELECT 1 FROM tags t WHERE (t.tag = ? OR (t.tag > ? AND t.tag < ?)) AND t.rid = m.rid)"
    assert where == (
        f" AND m.namespace = ? AND {tag} AND {tag} AND m.created >= ? AND substr(m.path, 1, ?) = ?"
    )
    # a tag also matches its nested tags (a/x), as Obsidian reads them: "/" < ... < "0"
    assert params == ["work", "a", "a/", "a0", "b", "b/", "b0", "2026-01-01T00:00:00Z", 7, "people/"]
    assert Filters().sql() == ("", [])


def test_term_matches_is_one_fts_driven_join_with_the_filters_after_the_expression() -> None:
    assert sql.term_matches('"deploy"', Filters(namespace="work"), NOW) == (
        "SELECT m.rid FROM fts CROSS JOIN memories m ON m.rid = fts.rowid WHERE fts MATCH ? "
        "AND (m.expires IS NULL OR m.expires > ?) AND m.namespace = ?",
        ['"deploy"', NOW, "work"],
    )


def test_expressions_are_parameters_and_row_ids_are_integers() -> None:
    text, params = sql.bm25('"a" OR "b"', [9, 3, 5])
    assert text == ("SELECT rowid, -rank FROM fts WHERE fts MATCH ? AND rowid BETWEEN ? AND ? "
                    "AND +rowid IN (SELECT value FROM json_each(?))")
    assert params == ['"a" OR "b"', 3, 9, "[9, 3, 5]"]
    assert sql.records([3, 1]) == ("SELECT * FROM memories WHERE rid IN (3, 1)", [])
    with pytest.raises(ValueError):
        sql.records(["1) OR (1=1"])  # type: ignore[list-item]
    text, params = sql.probe(['"x"'], 2000)
    assert "(SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?) AS f0" in text
    assert params == ['"x"', 1999, '"x"']


def test_neighbours_name_one_column_per_offset() -> None:
    text, params = sql.neighbours([5], [1, -1], dt.timedelta(minutes=30))
    assert params == [] and text.startswith("SELECT s.rid, (SELECT n.rid FROM memories n WHERE n.namespace = s.namespace ")
    assert 'LIMIT 1 OFFSET 0) AS "n1"' in text and 'LIMIT 1 OFFSET 0) AS "n-1"' in text
    assert "'+1800 seconds'" in text and "'-1800 seconds'" in text and text.endswith("WHERE s.rid IN (5)")


def test_every_builder_runs_on_a_real_index(vault: Vault) -> None:
    """A builder whose SQL does not parse, or names a column the schema lacks, fails here."""
    a = vault.remember("Customer ACME prefers deploys on Fridays?", namespace="work")["memory"]
    vault.remember("ACME deploy froze on Friday", namespace="work")
    run = lambda q: vault.index.query(*q)
    rid = run(("SELECT rid FROM memories WHERE id = ?", [a["id"]]))[0][0]
    assert run(sql.population("work"))[0][0] == 2
    # the newest row; "acme" common at 2 (its 2nd newest match is row 1), "froze" in one memory
    assert tuple(run(sql.probe(['"acme"', '"froze"'], 2, supersedes=True))[0]) == (2, 1, None, None, 1, 0)
    assert tuple(run(sql.probe(['"acme"', '"zebra"'], 3))[0]) == (2, None, 2, None, 0)
    page = run(sql.first_page('"prefers"', '("acme") AND ("prefers")', Filters(), NOW, False, 0, 1, '"acme"', 16, 4096))
    assert [(r["hit_n"], r["hit_rid"], r["rid"]) for r in page] == [(1, rid, rid)]
    assert "\x02ACME\x03" in page[0]["hit_marked"] and page[0]["hit_length"] == len(page[0]["body"])
    newest = run(sql.first_page_common('"acme"', Filters(namespace="work"), NOW, 200, 1, 2, '"acme"', 16, 4096))
    assert [(r["hit_n"], r["hit_score"], r["rid"]) for r in newest] == [(1, 0.0, None), (2, 0.0, 1)]  # page: the 2nd
    assert {r[0] for r in run(sql.term_matches('"deploy"', Filters(namespace="work"), NOW))} == {1, 2}
    assert run(sql.term_matches('"deploy"', Filters(namespace="other"), NOW)) == []
    assert [r[0] for r in run(sql.newest_matching('"acme"', Filters(), NOW, 1))] == [2]
    assert {r[0] for r in run(sql.members_within('"friday"', '("prefers")'))} == {rid}
    assert {r[0] for r in run(sql.members_from('"acme"', 2))} == {2}
    assert len(run(sql.updated([1, 2]))) == 2
    assert {r[0] for r in run(sql.bm25('"prefers"', [1, 2]))} == {rid}
    assert run(sql.bm25('"acme"', [2])) == run(sql.bm25('"acme"', [1, 2]))[1:] and rid == 1  # each row's own score
    assert {r[0] for r in run(sql.asking([1, 2]))} == {rid}
    assert run(sql.neighbours([1], [1, -1], dt.timedelta(minutes=30)))[0]["n1"] is None  # one instant
    assert "\x02ACME\x03" in run(sql.snippets_in_range('"acme"', [1, 2], 16))[0][1]
    assert "\x02ACME\x03" in run(sql.snippets_of('"acme"', [1], 16))[0][1]
    assert "\x02ACME\x03" in run(sql.highlighted('"acme"', [1]))[0][1]
    vault.index.spelling()  # the typo vocabulary, built on first use (as the engine asks for it)
    assert [r[0] for r in run(sql.words_starting("fri", 5))] == ["friday", "fridays"]
    assert ("froze", 1) in [tuple(r) for r in run(sql.vocabulary("fr", 4, 6, 10))]


def test_plain_ascii_tag_filters_narrow_the_full_text_match_and_others_are_left_to_the_exact_check() -> None:
    filters = sql.Filters(tags=("deploy", "café", "team/backend", "#", "c++"))
    assert filters.narrowed('"x"') == '("x") AND tags : "deploy" AND tags : "team/backend"'
    assert sql.Filters(tags=("café",)).narrowed('"x"') == '"x"'
    statement, params = sql.term_matches('"x"', filters, "2026-01-01T00:00:00Z")
    assert params[0] == filters.narrowed('"x"') and statement.count("EXISTS") == 5
