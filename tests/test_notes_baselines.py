"""The real-notes benchmark's baselines (``benchmarks/notes_baselines.py``) on a small
vault made here: what they index, how they read a question, and that a long note is
embedded whole. The numbers they reach on the real corpus are the benchmark's business.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

# CI's environment with the semantic and bench extras sets this: there a missing piece fails.
REQUIRED = os.environ.get("AGENT_MEMORY_TEST_SEMANTIC") == "required"
_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "notes_baselines.py"
_SPEC = importlib.util.spec_from_file_location("notes_baselines", _PATH)
assert _SPEC and _SPEC.loader
baselines = importlib.util.module_from_spec(_SPEC)
sys.modules["notes_baselines"] = baselines
_SPEC.loader.exec_module(baselines)


def write(folder: Path, rel: str, text: str) -> None:
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "help"
    write(folder, "en/Files/Manage vaults.md",
          "---\npermalink: manage-vaults\naliases:\n  - Vault switcher\n---\n"
          "## Rename vault\n\nOpen the vault switcher and choose Rename vault.\n")
    write(folder, "en/Plugins/Slides.md", "---\npermalink: plugins/slides\n---\nStart a presentation from a note.\n")
    write(folder, "en/Help.md", "---\npermalink: help\n---\nHow do I get help? Ask in the forum.\n")
    write(folder, "de/Dateien/Vaults verwalten.md",
          "---\npermalink: manage-vaults\n---\n## Vault umbenennen\n\nWähle Vault umbenennen.\n")
    write(folder, ".obsidian/snippet.md", "rename vault rename vault\n")
    write(folder, "en/.trash/old.md", "rename vault\n")
    return folder


def test_notes_are_title_and_body_without_front_matter_and_hidden_folders(corpus: Path) -> None:
    notes = baselines.read_notes(corpus)
    assert [n.path for n in notes] == ["de/Dateien/Vaults verwalten.md", "en/Files/Manage vaults.md",
                                       "en/Help.md", "en/Plugins/Slides.md"]
    vaults = notes[1]
    assert (vaults.lang, vaults.title, vaults.permalink) == ("en", "Manage vaults", "manage-vaults")
    assert "aliases" not in vaults.body and "Vault switcher" not in vaults.body
    assert vaults.body.startswith("## Rename vault")
    assert notes[0].permalink == vaults.permalink  # the German copy of the same page


def test_a_question_loses_its_stop_words_and_repeats() -> None:
    assert baselines.query_words("How do I rename a Vault, the vault?") == ["rename", "vault"]
    assert baselines.query_words("how do I do it") == []


def test_fts5_ors_the_words_and_ranks_by_bm25(corpus: Path) -> None:
    fts = baselines.Fts5Or(baselines.read_notes(corpus))
    assert fts.search("how do I rename a vault")[0] == "en/Files/Manage vaults.md"
    # OR: one matching word is enough; the note with only stop words of the question is not found
    assert fts.search("presentation zebra") == ["en/Plugins/Slides.md"]
    assert "en/Help.md" not in fts.search("how do I rename a vault")
    assert fts.search("how do I") == []
    assert fts.search('rename "vault')[0] == "en/Files/Manage vaults.md"  # a quote cannot break the query


def test_bm25s_stems_english_words(corpus: Path) -> None:
    if not REQUIRED:
        pytest.importorskip("bm25s", reason="pip install bm25s PyStemmer (the bench extra)")
        pytest.importorskip("Stemmer", reason="pip install bm25s PyStemmer (the bench extra)")
    bm25 = baselines.Bm25sStemmed(baselines.read_notes(corpus))
    assert bm25.search("renaming vaults")[0] == "en/Files/Manage vaults.md"
    assert bm25.search("presentations") == ["en/Plugins/Slides.md"]
    assert bm25.search("zebra") == []  # no note shares a word: nothing, not ten notes at score 0


@dataclass
class WordEncoding:
    ids: list[int]
    offsets: list[tuple[int, int]]


def words(text: str) -> WordEncoding:
    """A stand-in tokenizer: one token per whitespace-separated word."""
    offsets, at = [], 0
    for word in text.split():
        at = text.index(word, at)
        offsets.append((at, at + len(word)))
        at += len(word)
    return WordEncoding(ids=list(range(len(offsets))), offsets=offsets)


def test_a_long_note_is_cut_into_overlapping_chunks_that_cover_every_word() -> None:
    body = " ".join(f"w{i}" for i in range(500))
    note = baselines.Note(path="en/Long.md", lang="en", title="Long note", body=body, permalink="long")
    chunks = baselines.chunk_texts(note, words, max_tokens=100)
    room = 100 - 2 - 2  # two special tokens, two title words
    assert all(c.startswith("Long note\n") for c in chunks)
    assert all(len(c.split()) - 2 <= room for c in chunks)
    covered = [w for c in chunks for w in c.split()[2:]]
    assert set(covered) == set(body.split())
    assert len(covered) == 500 + baselines.OVERLAP * (len(chunks) - 1)
    short = baselines.Note(path="en/T.md", lang="en", title="Only a title", body="", permalink="t")
    assert baselines.chunk_texts(short, words, max_tokens=100) == ["Only a title"]


def test_dense_finds_a_sentence_deep_in_a_long_note(corpus: Path, model_folder: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The sentence sits past the first 256 tokens: only a note embedded whole finds it."""
    monkeypatch.setenv("AGENT_MEMORY_MODEL", str(model_folder))
    filler = " ".join("Canvas cards can be moved, grouped and connected with arrows." for _ in range(60))
    write(corpus, "en/Plugins/Canvas.md", f"---\npermalink: plugins/canvas\n---\n{filler}\n\n"
              "The dentist appointment for the dog is on Friday afternoon.\n")
    cache = tmp_path / "dense-cache"
    dense = baselines.Dense(baselines.read_notes(corpus), cache=cache)
    assert dense.chunks > len(dense.paths)  # the long note has several chunks
    assert dense.search("when is the dog's dentist appointment")[0] == "en/Plugins/Canvas.md"
    again = baselines.Dense(baselines.read_notes(corpus), cache=cache)
    assert again.cached and (again.vectors == dense.vectors).all()
