"""The real-notes benchmark's runner (``benchmarks/notes.py``): how it scores a ranking
(a translated copy of the answer is a wrong note that takes its rank) and that the vault
it builds from a corpus answers with the corpus's own paths, so a hit is recognised.
"""

from __future__ import annotations

import importlib.util
import stat
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "notes.py"
_SPEC = importlib.util.spec_from_file_location("notes_bench", _PATH)
assert _SPEC and _SPEC.loader
bench = importlib.util.module_from_spec(_SPEC)
sys.modules["notes_bench"] = bench
_SPEC.loader.exec_module(bench)


def note(path: str, permalink: str) -> object:
    return bench.Note(path=path, lang=path.split("/")[0], title=Path(path).stem, body="", permalink=permalink)


NOTES = {n.path: n for n in [note("en/Slides.md", "slides"), note("de/Präsentation.md", "slides"),
                             note("en/Canvas.md", "canvas"), note("de/Canvas.md", "canvas")]}


def score(ranked: list[str], gold: list[str], lang: str = "en") -> object:
    system = bench.System(name="s", group="agent-memory", ask=lambda q: ranked)
    bench.run([system], [{"n": 1, "kind": "paraphrase", "lang": lang, "q": "?", "gold": gold}], NOTES)
    return system


def test_a_translated_copy_is_a_wrong_note_that_takes_its_rank() -> None:
    s = score(["de/Präsentation.md", "en/Slides.md"], ["en/Slides.md"])
    assert s.ranks[1] == 2 and s.copy_first == {1}
    assert bench.scores(s, [1]) == (0.0, 100.0, 0.5)


def test_a_miss_scores_nothing_and_a_copy_of_the_answer_in_its_place_is_counted() -> None:
    s = score(["de/Präsentation.md", "en/Canvas.md"], ["en/Slides.md"])
    assert s.ranks[1] is None and s.copy_first == {1}
    assert bench.scores(s, [1]) == (0.0, 0.0, 0.0)
    assert score(["en/Canvas.md", "en/Slides.md"], ["en/Slides.md"]).copy_first == set()


def test_a_german_question_is_answered_by_the_german_note() -> None:
    s = score(["en/Slides.md", "de/Präsentation.md"], ["de/Präsentation.md"], lang="de")
    assert s.ranks[1] == 2 and s.copy_first == {1}


def test_paired_wins_count_a_miss_as_rank_eleven_and_the_sign_test_is_exact() -> None:
    a = bench.System(name="a", group="agent-memory", ask=lambda q: [], ranks={1: 1, 2: None, 3: 4, 4: 2})
    b = bench.System(name="b", group="baseline", ask=lambda q: [], ranks={1: 3, 2: 7, 3: 4, 4: None})
    assert bench.paired(a, b, [1, 2, 3, 4]) == (2, 1)
    assert bench.sign_test(0, 0) == 1.0
    assert bench.sign_test(10, 0) == pytest.approx(2 / 1024)
    assert bench.sign_test(3, 3) == 1.0


def test_the_vault_built_from_a_corpus_answers_with_the_corpus_paths(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "en" / "Plugins").mkdir(parents=True)
    (corpus / "en" / ".index").mkdir()
    (corpus / "en" / "Plugins" / "Slides.md").write_text(
        "---\npermalink: plugins/slides\n---\nStart a presentation from the active note.\n", encoding="utf-8")
    (corpus / "en" / ".index" / "writes.json").write_text("{}", encoding="utf-8")
    (corpus / "de").mkdir()
    (corpus / "de" / "Präsentation.md").write_text("Eine Präsentation starten.\n", encoding="utf-8")
    for path in [*corpus.rglob("*")]:  # the shared corpus is read-only
        path.chmod(stat.S_IRUSR | stat.S_IXUSR if path.is_dir() else stat.S_IRUSR)
    try:
        vault, line = bench.open_vault(corpus, tmp_path / "vault", ["en"], semantic=False)
        try:
            assert not (tmp_path / "vault" / "en" / ".index").exists()
            assert not (tmp_path / "vault" / "de").exists()
            ask = bench.vault_system(vault, "words", None, False).ask
            assert ask("presentation") == ["en/Plugins/Slides.md"]
            assert "indexed" in line
        finally:
            vault.close()
        again, line = bench.open_vault(corpus, tmp_path / "vault", ["en"], semantic=False)
        again.close()
        assert line.startswith("reused") and "reindexed" not in line
        again, line = bench.open_vault(corpus, tmp_path / "vault", ["en"], semantic=False, reindex=True)
        try:
            assert line.startswith("reused") and "reindexed" in line
            assert bench.vault_system(again, "words", None, False).ask("presentation") == ["en/Plugins/Slides.md"]
        finally:
            again.close()
    finally:
        for path in [*corpus.rglob("*")]:
            path.chmod(stat.S_IRWXU)
