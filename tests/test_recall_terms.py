"""recall.terms, the query planner: questions -> terms -> FTS5 expressions, each run on a real FTS5 table
with the index's own tokenizer and CJK column, so a wrong expression fails here."""

from __future__ import annotations

import sqlite3

import pytest

from agent_memory.recall import terms as query
from agent_memory.index.db import TOKENIZER
from agent_memory.index.rows import date_words


@pytest.fixture
def fts() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE fts USING fts5(title, tags, body, cjk, dated, tokenize='{TOKENIZER}')")
    yield conn
    conn.close()


def matches(fts: sqlite3.Connection, expr: str, text: str) -> bool:
    fts.execute("DELETE FROM fts")
    fts.execute("INSERT INTO fts (rowid, body, cjk) VALUES (1, ?, ?)", (text, query.cjk_index_text(text)))
    return fts.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", (expr,)).fetchone()[0] == 1


# question, terms, the all-terms expression, a text it must find, a text it must not
NORMALISATION = [
    ("When does ACME prefer to deploy?", ["acme", "prefer", "deploy"], '"acme" AND "prefer" AND "deploy"',
     "Customer ACME prefers deploys on Fridays.", "ACME prefers Mondays."),
    ("Priya's laptop", ["priya", "laptop"], '"priya" AND "laptop"', "Priya has a new laptop.", "Priyanka's laptop"),
    ("O'Brien won't approve", ["brien", "approve"], '"brien" AND "approve"', "Ask O'Brien to approve it.", "Brian approves"),
    ("Café crème à l'hôtel", ["cafe", "creme", "hotel"], '"cafe" AND "creme" AND "hotel"',
     "Un CAFÉ CRÈME servi à l’Hôtel du Nord", "café au lait à l'hôtel"),
    ("Grüße aus Köln", ["gruße", "aus", "koln"], '"gruße" AND "aus" AND "koln"', "Viele Grüsse? Nein: Grüße aus Koln!",
     "Grusse aus Köln"),
    ("ＡＣＭＥ ｄｅｐｌｏｙ", ["acme", "deploy"], '"acme" AND "deploy"', "acme deploys", "acme deep"),
    ("state_machine for e-mail", ["state", "machine", "mail"], '"state" AND "machine" AND "mail"',
     "The e-mail state machine", "statemachine email"),
    ("port 8080, version 2.10", ["port", "8080", "version", "2", "10"], '"port" AND "8080" AND "version" AND "2" AND "10"',
     "version 2.10 listens on port 8080", "version 2.1 listens on port 80801"),
    ("¿Dónde está la oficina de Madrid?", ["oficina", "madrid"], '"oficina" AND "madrid"',
     "La oficina de Madrid abre a las nueve.", "La oficina de Málaga"),
    ("The son went to sea", ["son", "went", "sea"], '"son" AND "went" AND "sea"', "Her son went to the sea.", "Sons"),
    ("who is it", ["who", "is", "it"], '"who" AND "is" AND "it"', "Who is it?", "Who was that?"),
    ("東京オフィス", ["東京オフィス"], 'cjk : "東京 京オ オフ フィ ィス"', "東京オフィスの住所は渋谷です。",
     "東京の大阪オフィス"),
    ("京", ["京"], 'cjk : "京"*', "東京オフィス", "大阪オフィス"),
    ("笔记", ["笔记"], 'cjk : "笔记"', "如何创建新笔记", "如何创建新文件"),
    ("Obsidianのノート", ["obsidian", "のノート"], '"obsidian" AND cjk : "のノ ノー ート"',
     "Obsidianのノートを作成する", "Obsidianでノートを作成する"),
    ("データ", ["データ"], 'cjk : "デー ータ"', "データベース", "テーブル"),
]


@pytest.mark.parametrize(("question", "terms", "expr", "found", "missed"), NORMALISATION, ids=[row[0] for row in NORMALISATION])
def test_normalisation(fts: sqlite3.Connection, question: str, terms: list[str], expr: str, found: str, missed: str) -> None:
    plan = query.plan(question)
    assert plan.words == terms
    assert plan.all == expr
    assert matches(fts, plan.all, found)
    assert not matches(fts, plan.all, missed)


INJECTION = ['"', '""', "*", "(", ")", "NEAR", "NEAR(a b)", "-", "- -x", "c++", "AND OR NOT", "a AND", "OR",
             "title: x", "{body}: x", "^start", "x*", "'", "\\", ":", "\x00", "\u200b", "a" * 300]


@pytest.mark.parametrize("question", INJECTION)
def test_fts_syntax_in_questions_is_only_text(fts: sqlite3.Connection, question: str) -> None:
    plan = query.plan(question)
    for expr in (plan.all, plan.any):
        if plan.terms:
            fts.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", (expr,)).fetchone()
    for term in plan.terms:
        prefixed = query.word_term(term.text, prefix=True)
        fts.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", (prefixed.expr,)).fetchone()


def test_a_prefix_term_finds_longer_words(fts: sqlite3.Connection) -> None:
    assert matches(fts, query.word_term("kube", prefix=True).expr, "Kubernetes pods restart")
    assert not matches(fts, query.word_term("kube").expr, "Kubernetes pods restart")
    assert query.can_prefix(query.word_term("postg")) and query.can_prefix(query.word_term("postgres"))
    assert not query.can_prefix(query.word_term("ab")) and not query.can_prefix(query.word_term("2024"))
    # FTS5 stems a prefix before expanding it: "negative"* would be neg*, finding "neglect";
    # so a fallback prefix stands for the longer words the unstemmed vocabulary holds.
    assert matches(fts, query.word_term("negative", prefix=True).expr, "neglected")
    expanded = query.expansion_term("postgres", ["postgresql", "postgrest"])
    assert expanded.text == "postgres"
    assert matches(fts, expanded.expr, "We run PostgreSQL")
    assert not matches(fts, query.expansion_term("negative", ["negatives"]).expr, "neglected")


@pytest.mark.parametrize(
    ("run", "parts"),
    [
        ("東京オフィスの住所はどこですか", ["東京", "オフィス", "住所"]),
        ("新しいノートを作成するには", ["新", "ノート", "作成"]),
        ("如何创建新笔记", ["如何", "何创", "创建", "建新", "新笔", "笔记"]),
        ("すし", ["すし"]),
        ("서울에서", ["서울", "울에", "에서"]),
    ],
)
def test_a_cjk_question_that_matches_nothing_splits_into_words(run: str, parts: list[str]) -> None:
    assert [t.text for t in query.cjk_parts(run)] == parts


def test_cjk_index_text_is_empty_for_latin_text() -> None:
    assert query.cjk_index_text("Plain English, café.") == ""
    assert query.cjk_index_text("ﾃﾞｰﾀ hi 東京", "Obsidianの") == "デー ータ タ 東京 京 Obsidian の"


@pytest.mark.parametrize(
    ("a", "b", "bound", "distance"),
    [
        ("kuberentes", "kubernetes", 2, 1),  # a swap of neighbours is one edit
        ("kubernetes", "kubernetes", 2, 0),
        ("deploi", "deploy", 1, 1),
        ("recieve", "receive", 2, 1),
        ("abc", "xyz", 1, 2),  # past the bound: bound + 1
        ("cat", "category", 2, 3),
    ],
)
def test_edit_distance(a: str, b: str, bound: int, distance: int) -> None:
    assert query.edit_distance(a, b, bound) == distance


def test_typos_allowed_grow_with_the_word() -> None:
    assert [query.typo_bound(w) for w in ("cart", "partake", "escalaton", "kuberentes")] == [1, 1, 2, 2]
    assert not query.can_correct(query.word_term("api"))
    assert not query.can_correct(query.word_term("2024"))
    assert query.can_correct(query.word_term("deplyo"))


def test_highlight_marks_every_needle_in_a_window() -> None:
    text = "私たちの東京オフィスの住所は渋谷です。" * 3
    assert query.highlight(text, ["東京", "住所"], width=20) == "私たちの\x02東京\x03オフィスの\x02住所\x03は渋谷です。私…"
    assert query.highlight("no match here", ["東京"]) == "no match here"


@pytest.mark.parametrize(
    ("question", "dates", "left"),
    [
        ("What did we do on 8 May 2023?", ["8 may 2023"], []),
        ("meeting May 8th, 2023", ["8 may 2023"], ["meeting"]),
        ("budget for Jan 2024", ["january 2024"], ["budget"]),
        ("the 3rd of March", ["3 march"], []),
        ("notes from 2023-05-08", ["8 may 2023"], ["notes"]),
        ("tea may help", [], ["tea", "may", "help"]),  # the verb, not the month
        ("top 20 tips", [], ["top", "20", "tips"]),
        ("2023-13-01", [], ["2023", "13", "01"]),
    ],
)
def test_dates_in_a_question_become_date_terms(question: str, dates: list[str], left: list[str]) -> None:
    found = query.terms(question)
    assert [t.text for t in found if t.date] == dates
    assert [t.text for t in found if not t.date] == left


def test_a_word_never_matches_the_creation_date_but_a_date_does(fts: sqlite3.Connection) -> None:
    fts.execute("INSERT INTO fts (rowid, body, dated) VALUES (1, 'Signed the lease', ?)", (date_words("2026-05-20T09:00:00Z"),))
    count = lambda expr: fts.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", (expr,)).fetchone()[0]
    assert count(query.word_term("may").expr) == 0 and count(query.word_term("2026").expr) == 0
    (date,) = query.date_terms("on 20 May 2026")[0]
    assert count(date.expr) == 1
