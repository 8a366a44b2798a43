"""Recall as a user meets it: questions in six languages -> the memory that answers them
first, through the library and through ``search --json``; typos, prefixes, dates,
conversation context, CJK substrings on real Obsidian help vaults, and the vocabulary
kept in step with the files."""

from __future__ import annotations

import dataclasses
import os
import datetime as dt
import json
import re
import sqlite3
import unicodedata
from pathlib import Path

import pytest

from agent_memory.errors import InvalidInput
from agent_memory.recall.rank import DEFAULT
from agent_memory.vault.vault import Vault
from conftest import Clock, assert_index_matches_files, run_cli, deadline
from test_highlights import bracketed

CORPORA_DIR = Path(__file__).resolve().parents[2] / "shared" / "corpora"


@dataclasses.dataclass
class Corpus:
    memories: list[str]
    questions: list[tuple[str, int]]  # question, index of the memory that must come first


CORPORA = {
    "English": Corpus(
        [
            "Customer ACME prefers deploys on Fridays.",
            "Priya leads the billing team and owns the invoicing service.",
            "The staging database resets every Sunday at 02:00 UTC.",
            "Kubernetes pods in the eu-west cluster restart nightly after the backup.",
            "Our VPN certificate renewal is due in March; Sam has the admin login.",
            "Lunch order: Sam is vegetarian, Alex is allergic to peanuts.",
        ],
        [
            ("When does ACME prefer to deploy?", 0),
            ("Who owns invoicing?", 1),
            ("when does the staging db reset", 2),
            ("Which pods restart at night?", 3),
            ("Who has the VPN admin login?", 4),
            ("Is anyone allergic to peanuts?", 5),
            ("What does Sam eat for lunch?", 5),
        ],
    ),
    "Spanish": Corpus(
        [
            "La oficina de Madrid abre a las nueve de la mañana.",
            "El cliente Acme paga las facturas cada trimestre.",
            "María es la responsable del equipo de soporte.",
            "Las copias de seguridad se guardan en el servidor de Valencia.",
        ],
        [
            ("¿A qué hora abre la oficina de Madrid?", 0),
            ("¿Cada cuánto paga Acme sus facturas?", 1),
            ("¿Quién es la responsable de soporte?", 2),
            ("¿Dónde se guardan las copias de seguridad?", 3),
            ("oficina madrid manana", 0),
        ],
    ),
    "German": Corpus(
        [
            "Die Bürozeiten in München sind von 9 bis 17 Uhr.",
            "Jürgen übernimmt die Schlüsselübergabe am Freitag.",
            "Die Größe des Servers wurde auf 64 GB erhöht.",
        ],
        [
            ("Wie sind die Bürozeiten in München?", 0),
            ("Burozeiten Munchen", 0),
            ("Wer übernimmt die Schlüsselübergabe?", 1),
            ("Größe des Servers", 2),
        ],
    ),
    "French": Corpus(
        [
            "Le café de l'équipe est fermé le mercredi.",
            "Hélène prépare la réunion trimestrielle à Genève.",
            "La clé du local est chez François.",
        ],
        [
            ("Quand le café de l'équipe est-il fermé ?", 0),
            ("Qui prépare la réunion à Genève ?", 1),
            ("reunion geneve", 1),
            ("Où est la clé du local ?", 2),
            ("cle francois", 2),
        ],
    ),
    "Japanese": Corpus(
        [
            "東京オフィスの住所は渋谷区神南一丁目です。",
            "大阪オフィスは毎週金曜日に在宅勤務です。",
            "新しいノートを作成するには、左のサイドバーのボタンを押します。",
            "データベースのバックアップは毎晩三時に実行されます。",
        ],
        [
            ("東京オフィスの住所", 0),
            ("東京オフィスの住所はどこですか", 0),
            ("大阪", 1),
            ("ノートを作成するには？", 2),
            ("バックアップは何時に実行されますか", 3),
        ],
    ),
    "Chinese": Corpus(
        [
            "北京办公室的地址是朝阳区建国路88号。",
            "上海团队每周五下午开例会。",
            "数据库备份每天凌晨三点自动运行。",
            "如何创建新笔记：点击左侧边栏的按钮。",
        ],
        [
            ("北京办公室的地址", 0),
            ("上海团队什么时候开例会", 1),
            ("数据库备份", 2),
            ("怎么创建笔记", 3),
        ],
    ),
}
TABLE = [(lang, question, expected) for lang, corpus in CORPORA.items() for question, expected in corpus.questions]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory):
    """One vault per language, each memory written a day after the last (no
    conversation context between them); lang -> (vault, paths in corpus order)."""
    built = {}
    for lang, corpus in CORPORA.items():
        clock = Clock(dt.datetime(2026, 1, 1, 9, 0, tzinfo=dt.timezone.utc))
        vault = Vault.init(tmp_path_factory.mktemp(lang) / ".memory", clock=clock)
        paths = []
        for text in corpus.memories:
            paths.append(vault.remember(text)["memory"]["path"])
            clock.advance(days=1)
        assert_index_matches_files(vault)
        built[lang] = (vault, paths)
    yield built
    for vault, _ in built.values():
        vault.close()


def cli_search(root: Path, *args: str) -> dict:
    done = run_cli("search", "--json", *args, vault=root)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(("lang", "question", "expected"), TABLE, ids=[f"{r[0]}: {r[1]}" for r in TABLE])
def test_the_answering_memory_comes_first(corpora, lang: str, question: str, expected: int) -> None:
    vault, paths = corpora[lang]
    result = vault.search(question)
    assert result["hits"], result
    first = result["hits"][0]
    assert first["path"] == paths[expected], [h["snippet"] for h in result["hits"]]
    assert first["matched_terms"] and set(first["matched_terms"]) <= set(result["terms"])
    assert first["highlights"]  # where the snippet shows what matched


@pytest.mark.parametrize(("lang", "question", "expected"), TABLE, ids=[f"{r[0]}: {r[1]}" for r in TABLE])
def test_the_cli_answers_the_same(corpora, lang: str, question: str, expected: int) -> None:
    vault, paths = corpora[lang]
    printed = cli_search(vault.root, question)
    assert printed["hits"][0]["path"] == paths[expected]
    library = vault.search(question)
    assert [h["id"] for h in printed["hits"]] == [h["id"] for h in library["hits"]]
    assert printed["terms"] == library["terms"] and printed["match_mode"] == library["match_mode"]


# --------------------------------------------------------------------------- match modes


@pytest.fixture
def office(vault: Vault, clock: Clock) -> Vault:
    for text in ("Priya owns the billing service", "The billing service runs on Stripe",
                 "Invoices go out on the first Monday", "Kubernetes pods restart nightly"):
        vault.remember(text)
        clock.advance(days=1)
    return vault


def test_auto_puts_memories_with_every_term_first_then_fills_the_limit_with_partial_hits(office: Vault) -> None:
    """SPEC §5 (revised): complete hits first, then partial hits, each saying which."""
    result = office.search("Who owns the billing service?")
    first, *rest = result["hits"]
    assert first["title"] == "Priya owns the billing service" and first["complete"]
    assert first["matched_terms"] == ["owns", "billing", "service"]
    assert rest and not any(h["complete"] for h in rest)
    assert rest[0]["title"] == "The billing service runs on Stripe" and rest[0]["matched_terms"] == ["billing", "service"]
    assert result["match_mode"] == "any" and "complete: true" in result["note"]
    only = office.search("Who owns the billing service?", match="all")
    assert [h["title"] for h in only["hits"]] == ["Priya owns the billing service"] and "note" not in only
    assert_index_matches_files(office)


def test_auto_falls_back_to_partial_hits_with_a_note(office: Vault) -> None:
    result = office.search("billing service on Fridays")
    assert result["match_mode"] == "any" and "No memory contains all of the terms" in result["note"]
    assert {h["title"] for h in result["hits"]} == {"Priya owns the billing service", "The billing service runs on Stripe"}
    assert all(h["matched_terms"] == ["billing", "service"] for h in result["hits"])


def test_more_matched_terms_rank_first_and_rare_terms_weigh_more(vault: Vault, clock: Clock) -> None:
    for text in ["Stripe webhook retries"] + [f"Stripe note {n}" for n in range(5)] + ["webhook for billing"]:
        vault.remember(text)
        clock.advance(days=1)
    result = vault.search("stripe webhook billing", match="any")
    assert result["hits"][0]["title"] == "webhook for billing"  # two terms, one rare, beats two common
    assert result["hits"][1]["title"] == "Stripe webhook retries"


def test_match_all_never_returns_partial_hits(office: Vault) -> None:
    result = office.search("billing Fridays", match="all")
    assert result["count"] == 0 and result["match_mode"] == "all" and "hint" in result


def test_an_empty_result_carries_a_hint(office: Vault) -> None:
    result = office.search("quantum entanglement")
    assert result["count"] == 0 and result["hits"] == [] and "Nothing matched" in result["hint"]


@pytest.mark.parametrize("question", ['"', "*", "(", "NEAR", "-", "c++", "AND OR NOT", 'billing" OR "x', "kube*"])
def test_fts_syntax_never_raises(office: Vault, question: str) -> None:
    result = office.search(question)
    assert result["count"] == len(result["hits"])


# --------------------------------------------------------------------------- typos and prefixes


def test_a_typo_is_corrected_and_reported(office: Vault) -> None:
    result = office.search("kuberentes pods")
    assert result["corrected"] == {"kuberentes": "kubernetes"}
    assert result["terms"] == ["kubernetes", "pods"] and result["match_mode"] == "all"
    assert result["hits"][0]["title"] == "Kubernetes pods restart nightly"


def test_the_cli_says_which_words_it_corrected(office: Vault) -> None:
    done = run_cli("search", "kuberentes pods", vault=office.root)
    assert done.returncode == 0
    assert "Searched for corrected words: kuberentes -> kubernetes" in done.stdout
    assert "Kubernetes pods restart nightly" in done.stdout


def test_the_correction_is_the_most_frequent_of_the_closest_words(vault: Vault) -> None:
    for text in ("Shopping cart totals", "Cart abandonment emails", "Cart API limits", "Customer care hours"):
        vault.remember(text)
    result = vault.search("carx")
    assert result["corrected"] == {"carx": "cart"}
    assert result["count"] == 3


def test_a_word_someone_wrote_is_not_corrected(vault: Vault) -> None:
    vault.remember("Grafanna is how Ana spells it", namespace="ana")
    vault.remember("Grafana dashboards on Tuesday", namespace="ops")
    result = vault.search("grafanna", namespace="ops")
    assert "corrected" not in result and result["count"] == 0
    assert vault.search("grafnaa", namespace="ops")["corrected"] == {"grafnaa": "grafana"}


def test_numbers_and_short_words_are_not_corrected(office: Vault) -> None:
    assert "corrected" not in office.search("2025")
    assert "corrected" not in office.search("pqd")


def test_a_word_start_finds_the_whole_word(office: Vault) -> None:
    result = office.search("kube pods")
    assert "corrected" not in result and result["terms"] == ["kube", "pods"]
    assert result["hits"][0]["title"] == "Kubernetes pods restart nightly"


def test_inflections_match_by_stem(office: Vault) -> None:
    assert office.search("who owned billing services")["hits"][0]["title"] == "Priya owns the billing service"


def test_in_a_large_vault_common_words_still_find_what_holds_them_together(vault: Vault, clock: Clock) -> None:
    """A word in thousands of memories is not read in full; memories holding several
    such words together, or a rarer word too, are still found (here "thousands" is 2)."""
    config = dataclasses.replace(DEFAULT, common_df=2, common_pool=3)
    vault.remember("Caroline painted a sunset at the beach")  # the oldest: outside any 'newest' pool
    for n in range(4):
        clock.advance(days=1)
        vault.remember(f"Caroline called about the agency, call {n}")
        vault.remember(f"A day at the beach with the kids, number {n}")
    partial = vault.search("Caroline beach zebra", config=config)
    assert partial["match_mode"] == "any"
    assert partial["hits"][0]["title"] == "Caroline painted a sunset at the beach"
    assert partial["hits"][0]["matched_terms"] == ["caroline", "beach"]
    every = vault.search("caroline sunset beach", config=config)
    assert every["match_mode"] == "all" and [h["title"] for h in every["hits"]] == ["Caroline painted a sunset at the beach"]
    newest = vault.search("caroline agency", match="all", config=config)  # every term common: newest first
    assert [h["title"] for h in newest["hits"]][:2] == ["Caroline called about the agency, call 3", "Caroline called about the agency, call 2"]


# --------------------------------------------------------------------------- dates and context


def test_a_date_in_the_question_finds_what_was_written_that_day(vault: Vault, clock: Clock) -> None:
    clock.now = dt.datetime(2023, 5, 8, 14, 0, tzinfo=dt.timezone.utc)
    vault.remember("Signed the lease for the new office.")
    clock.now = dt.datetime(2023, 6, 1, 10, 0, tzinfo=dt.timezone.utc)
    vault.remember("Painted the office walls.")
    assert vault.search("What did we do on 8 May 2023?")["hits"][0]["title"] == "Signed the lease for the new office."
    assert vault.search("office in June 2023")["hits"][0]["title"] == "Painted the office walls."


CONVERSATION = [
    "Melanie: Anything you're excited for in the adoption process?",
    "Caroline: I'm thrilled to make a family for kids who need one.",
    "Melanie: That's lovely. We went camping at the lake last weekend.",
]
DISTRACTOR = "Caroline: The adoption agency called about the process."


def converse(vault: Vault, clock: Clock, gap: dt.timedelta) -> None:
    vault.remember(DISTRACTOR, namespace="chat")
    clock.advance(days=3)
    for turn in CONVERSATION:
        vault.remember(turn, namespace="chat")
        clock.now += gap


def test_the_reply_to_a_question_is_recalled_first(vault: Vault, clock: Clock) -> None:
    converse(vault, clock, dt.timedelta(minutes=1))
    hits = vault.search("What is Caroline excited about in the adoption process?", namespace="chat",
                        profile="conversation")["hits"]
    assert hits[0]["title"] == CONVERSATION[1][:80].rstrip("…")[: len(hits[0]["title"])]
    assert hits[0]["matched_terms"] == ["caroline"]
    assert_index_matches_files(vault)


def test_the_facts_profile_lifts_no_neighbour_and_the_vault_setting_picks_the_profile(vault: Vault, clock: Clock) -> None:
    converse(vault, clock, dt.timedelta(minutes=1))
    question = "What is Caroline excited about in the adoption process?"
    reply = CONVERSATION[1][:80].rstrip("…")
    facts = vault.search(question, namespace="chat", profile="facts")["hits"]
    assert not reply.startswith(facts[0]["title"])  # the memory asking the question, not its neighbour
    # a vault of dialog turns gets the conversation profile by itself...
    assert reply.startswith(vault.search(question, namespace="chat")["hits"][0]["title"])
    # ...and recall.profile overrides the choice
    (vault.root / ".agent-memory.toml").write_text('[recall]\nprofile = "facts"\n')
    assert vault.search(question, namespace="chat")["hits"] == facts
    with pytest.raises(InvalidInput, match="profile"):
        vault.search(question, profile="chat")


def test_memories_written_in_one_instant_are_not_a_conversation(vault: Vault, clock: Clock) -> None:
    converse(vault, clock, dt.timedelta(0))  # an import: every turn at the same time
    hits = vault.search("What is Caroline excited about in the adoption process?", namespace="chat")["hits"]
    titles = [h["title"] for h in hits]
    assert not titles[0].startswith("Caroline: I'm thrilled")
    assert titles.index(next(t for t in titles if t.startswith("Caroline: I'm thrilled"))) == len(titles) - 1


def test_context_stays_inside_the_namespace(vault: Vault, clock: Clock) -> None:
    vault.remember(CONVERSATION[0], namespace="chat")
    clock.advance(minutes=1)
    vault.remember("Caroline: unrelated note in another namespace", namespace="other")
    clock.advance(minutes=1)
    vault.remember(DISTRACTOR, namespace="chat")
    hits = vault.search("Caroline excited adoption process", namespace="other")["hits"]
    assert [h["score"] for h in hits] == [pytest.approx(hits[0]["score"])] and len(hits) == 1


# --------------------------------------------------------------------------- the index stays true


def vocabulary(db: Path) -> list[tuple[str, int]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT term, doc FROM words_vocab ORDER BY term").fetchall()
    finally:
        conn.close()


def test_the_typo_vocabulary_follows_every_write(vault: Vault, clock: Clock, tmp_path: Path) -> None:
    first = vault.remember("Kubernetes pods restart nightly", tags=["infra"])["memory"]
    assert vocabulary(vault.index.path) == []  # built on first use, not by every write
    assert vault.search("kubernetse")["corrected"] == {"kubernetse": "kubernetes"}  # built now
    second = vault.remember("Terraform state lives in S3")["memory"]
    assert ("terraform", 1) in vocabulary(vault.index.path)
    vault.update(first["id"], expected_version=vault.get(first["id"])["version"], content="Kubernetes nodes drain on Sundays", add_tags=["ops"])
    vault.forget(second["id"])
    (vault.root / "by-hand.md").write_text("# Runbook\nPagerduty escalation after ten minutes\n")
    vault.reconcile()
    fresh = tmp_path / "fresh-index"
    rebuilt = Vault(vault.root, index_dir=fresh, clock=clock, sync=False)
    rebuilt.reindex(sweep=False)
    assert vocabulary(fresh / "index.sqlite3") == []
    rebuilt.index.spelling()
    rebuilt.close()
    assert vocabulary(vault.index.path) == vocabulary(fresh / "index.sqlite3")  # kept by writes = built afresh
    assert ("terraform", 1) not in vocabulary(vault.index.path) and ("drain", 1) in vocabulary(vault.index.path)
    assert vault.search("pagerduty escalaton")["corrected"] == {"escalaton": "escalation"}
    assert_index_matches_files(vault)


def test_two_connections_needing_the_vocabulary_at_once_build_it_once(
        vault: Vault, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from agent_memory.index.db import Index

    for n in range(60):
        vault.remember(f"Escalation runbook {n}: page the on-call after ten minutes")
    vault.reindex()  # the vocabulary is left to the first query that needs it
    others = [Vault(vault.root, clock=clock) for _ in range(2)]  # each its own connections, as two processes
    both_looked, found, query = threading.Barrier(2, timeout=60), [], Index.query

    def looked(self: Index, sql: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        rows = query(self, sql, *args, **kwargs)
        if sql.startswith("SELECT 1 FROM derived") and not rows:
            both_looked.wait()  # each saw it unbuilt before either builds it
        return rows

    monkeypatch.setattr(Index, "query", looked)

    def search(other: Vault) -> None:
        found.append(other.search("escalaton runbok", limit=100))

    try:
        threads = [threading.Thread(target=search, args=(other,)) for other in others]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        monkeypatch.setattr(Index, "query", query)
        for other in others:
            other.close()
    assert [f["corrected"] for f in found] == [{"escalaton": "escalation", "runbok": "runbook"}] * 2
    assert [f["count"] for f in found] == [60, 60]
    assert ("escalation", 60) in vocabulary(vault.index.path)  # built once: each word's memories counted once
    assert_index_matches_files(vault)


def test_a_changed_cjk_memory_is_found_by_its_new_text_only(vault: Vault) -> None:
    made = vault.remember("東京オフィスの住所は渋谷です。")["memory"]
    vault.update(made["id"], expected_version=vault.get(made["id"])["version"], content="大阪オフィスの住所は梅田です。")
    assert vault.search("東京")["count"] == 0
    assert vault.search("東京オフィス")["hits"][0]["matched_terms"] == ["オフィス"]
    assert vault.search("大阪オフィス")["hits"][0]["id"] == made["id"]
    assert "[大阪オフィス]" in bracketed(vault.search("大阪オフィス")["hits"][0])
    assert_index_matches_files(vault)


# --------------------------------------------------------------------------- CJK on real vaults

_PHRASE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]{8,}")


def phrases(vault: Vault) -> list[tuple[str, str]]:
    """(path, a run of 8 CJK characters from its body) for every note that has one."""
    out = []
    for item in vault.list(limit=100)["memories"] + vault.list(limit=100, offset=100)["memories"]:
        body = unicodedata.normalize("NFKC", vault.get(item["path"])["content"])
        found = _PHRASE.search(body)
        if found:
            out.append((item["path"], found.group()[:8]))
    return out


@pytest.mark.parametrize("lang", ["ja", "zh"])
def test_a_phrase_from_an_obsidian_help_note_finds_that_note(lang: str, tmp_path: Path) -> None:
    root = CORPORA_DIR / "obsidian-help" / lang
    if not root.is_dir():
        pytest.skip(f"the obsidian-help corpus is not at {root} (it is not part of the repository)")
    vault = Vault(root, index_dir=tmp_path / "index")
    try:
        found = phrases(vault)
        assert len(found) > 100
        for path, phrase in found:
            hits = vault.search(phrase, limit=100)["hits"]
            assert path in [h["path"] for h in hits], (path, phrase)
            for hit in hits[:3]:
                name = hit["path"].rsplit("/", 1)[-1][:-3]  # a note's name is searched too (SPEC §2)
                text = unicodedata.normalize("NFKC", vault.get(hit["path"])["content"] + hit["title"] + name)
                assert phrase in text, (phrase, hit["path"])
    finally:
        vault.close()


def test_a_word_that_matches_nothing_stands_for_the_longer_words_it_starts(vault) -> None:
    orders = vault.remember("We chose PostgreSQL for the orders service")["memory"]
    vault.remember("The team neglected the backlog all quarter")
    hit = vault.search("postgres")["hits"]
    assert [h["id"] for h in hit] == [orders["id"]] and hit[0]["matched_terms"] == ["postgres"]
    assert vault.search("postgre orders", match="all")["hits"][0]["id"] == orders["id"]
    # Not through the stemmer: "negative" is not the start of "neglected".
    assert vault.search("negative")["count"] == 0


def test_a_question_of_many_common_words_still_returns(vault: Vault) -> None:
    """Combinations of common words are built lazily: 26 of them once meant 2**26."""
    import threading

    config = dataclasses.replace(DEFAULT, common_df=5)
    words = [f"word{chr(97 + i)}" for i in range(26)]
    for i in range(40):
        vault.remember(" ".join(w for j, w in enumerate(words) if (i + j) % 9) + f" number {i}")
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(vault.search(" ".join(words), config=config)), daemon=True)
    worker.start()
    worker.join(timeout=deadline(120))  # a hang guard, not a speed target
    assert not worker.is_alive(), "the search never returned"
    assert result["match_mode"] == "any" and result["count"] == 10
    assert all(len(h["matched_terms"]) >= 20 for h in result["hits"])


def test_words_that_look_like_dates_do_not_match_every_memory_of_that_day(vault: Vault, clock: Clock) -> None:
    clock.now = dt.datetime(2026, 5, 20, 9, 0, tzinfo=dt.timezone.utc)
    for text in ("Signed the lease for the office", "Ordered new laptops", "Tea may help with the cold"):
        vault.remember(text)
    assert [h["title"] for h in vault.search("may")["hits"]] == ["Tea may help with the cold"]
    assert vault.search("2026")["count"] == 0 and vault.search("20 tips")["count"] == 0
    on_the_day = vault.search("What did we do on 20 May 2026?")
    assert on_the_day["count"] == 3 and all(h["matched_terms"] == ["20 may 2026"] for h in on_the_day["hits"])


def test_common_word_questions_come_newest_first_after_a_reindex(vault: Vault, clock: Clock) -> None:
    config = dataclasses.replace(DEFAULT, common_df=3)
    for day in (5, 1, 9, 3, 7, 2, 8):  # written out of order, named so the walk order is not time order
        clock.now = dt.datetime(2026, 3, day, 9, 0, tzinfo=dt.timezone.utc)
        vault.remember(f"apple banana note of day {day}", title=f"{'zyx'[day % 3]} note {day}")
    before = [h["created"] for h in vault.search("apple banana", limit=5, config=config)["hits"]]
    vault.reindex()
    after = [h["created"] for h in vault.search("apple banana", limit=5, config=config)["hits"]]
    assert before == after == sorted(after, reverse=True)
    assert after[0].startswith("2026-03-09")


def test_common_word_questions_find_the_newest_hand_named_notes_after_a_reindex(vault: Vault) -> None:
    """A person's notes have no dated folders: after a rebuild the newest of them (by
    the day they were last edited) are the ones a question of only common words lists,
    not the ones whose names sort last."""
    config = dataclasses.replace(DEFAULT, common_df=3, common_pool=3)
    (vault.root / "people").mkdir()
    days = {"zoe": 1, "yan": 2, "xia": 3, "abe": 20, "bob": 21, "cy": 22}  # the newest sort first by name
    for name, day in days.items():
        path = vault.root / "people" / f"{name}.md"
        path.write_text(f"Weekly meeting notes with {name}.\n", encoding="utf-8")
        stamp = dt.datetime(2026, 3, day, 9, 0, tzinfo=dt.timezone.utc).timestamp()
        os.utime(path, (stamp, stamp))
    vault.reindex()
    hits = vault.search("weekly meeting notes", match="all", limit=3, config=config)["hits"]
    assert [h["path"] for h in hits] == ["people/cy.md", "people/bob.md", "people/abe.md"]


def test_a_date_written_in_the_text_is_found_as_typed(vault: Vault, clock: Clock) -> None:
    clock.now = dt.datetime(2026, 9, 1, 9, 0, tzinfo=dt.timezone.utc)
    froze = vault.remember("The deploy froze on 2023-05-08 after the migration")["memory"]
    failed = vault.remember("On May 2 the billing deploy failed")["memory"]
    assert [h["id"] for h in vault.search("what happened 2023-05-08")["hits"]] == [froze["id"]]
    result = vault.search("May 2 deploy")
    assert [h["id"] for h in result["hits"] if h["complete"]] == [failed["id"]] == [result["hits"][0]["id"]]


def test_a_prefix_never_matches_the_creation_date(vault: Vault, clock: Clock) -> None:
    clock.now = dt.datetime(2026, 6, 3, 9, 0, tzinfo=dt.timezone.utc)
    june = vault.remember("The June offsite is in Lisbon")["memory"]
    vault.remember("Kafka cluster upgrade notes")
    assert [h["id"] for h in vault.search("jun")["hits"]] == [june["id"]]


@pytest.mark.parametrize("common_df", [2000, 2])  # rare words, then every word common (the newest-rows path)
def test_tag_filters_keep_exactly_the_tagged_memories_whatever_the_tag_looks_like(vault: Vault, common_df: int) -> None:
    config = dataclasses.replace(DEFAULT, common_df=common_df)
    tagged = {
        "deploy": "deploy", "deploying": "deploying", "team/backend": "team/backend", "team": "team",
        "café": "café", "c++": "c++", "q3.2025": "q3.2025", "release-train": "release-train",
    }
    for name, tag in tagged.items():
        vault.remember(f"Release checklist owned by the {name} group", tags=[tag])
    vault.remember("Release checklist with no tag at all")

    def tags_of(query: str, tag: str) -> list[list[str]]:
        return sorted(h["tags"] for h in vault.search(query, tags=[tag], limit=50, config=config)["hits"])

    for query in ("release checklist", "release checklist group owned"):
        assert tags_of(query, "deploy") == [["deploy"]]  # not "deploying", though both stem to deploy
        assert tags_of(query, "team") == [["team"], ["team/backend"]]  # nested tags, as Obsidian reads them
        assert tags_of(query, "team/backend") == [["team/backend"]]
        for tag in ("café", "c++", "q3.2025", "release-train"):
            assert tags_of(query, tag) == [[tag]]
        assert tags_of(query, "train") == []
