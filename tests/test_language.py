"""Telling a note's language: the fast reading (by distinct characters, ASCII text as
bytes) names the same language as reading every character one by one, on real notes in
six languages and on text mixing every script the rule knows."""

from __future__ import annotations

import random
import unicodedata
from pathlib import Path

import pytest

from agent_memory.recall import language
from agent_memory.recall.language import language_of

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "obsidian-help"


def one_by_one(text: str) -> str:
    """The rule as the module states it, a character and a word at a time."""
    sample = text[:language.SAMPLE]
    letters: dict[str, int] = {}
    for char in sample:
        if char.isalpha():
            script = language._script(char)
            letters[script] = letters.get(script, 0) + 1
    if not letters:
        return ""
    weight = language._LETTER_WEIGHT
    counts = {s: n * weight.get(s, 1) for s, n in letters.items() if s not in ("han", "ja")}
    counts["cjk"] = letters.get("han", 0) * weight["han"] + letters.get("ja", 0) * weight["ja"]
    script = max(counts, key=lambda s: (counts[s], s))
    if script == "cjk":
        return "ja" if letters.get("ja", 0) * 20 >= letters.get("han", 0) else "zh"
    if script != "latin":
        return "" if script == "other" else script
    votes = dict.fromkeys(language._WORDS_OF, 0)
    for word in language._WORD.findall(sample):
        folded = "".join(c for c in unicodedata.normalize("NFKD", word.lower()) if not unicodedata.combining(c))
        for lang, words in language._WORDS_OF.items():
            votes[lang] += folded in words
    ranked = sorted(votes.items(), key=lambda item: -item[1])
    (best, most), (_, second) = ranked[0], ranked[1]
    return best if most >= 2 and most > second else "latin"


def mixed_texts(count: int) -> list[str]:
    """Short texts drawn from ASCII, accented Latin, Greek and Cyrillic, kana, ideographs,
    Hangul, punctuation past ASCII (dashes, ellipses), superscript digits and emoji,
    with function words of several languages mixed in."""
    rng = random.Random(7)
    pools = [range(0x20, 0x7F), range(0xA0, 0x250), range(0x370, 0x530), range(0x3040, 0x3100),
             range(0x4E00, 0x4F00), range(0xAC00, 0xAD00), range(0x2000, 0x2080), range(0x1F600, 0x1F650)]
    words = ["the and is", "der die und ist", "le la les et", "que de para", "het een van", " ", "\n"]
    texts = []
    for _ in range(count):
        chunks = [("".join(chr(rng.choice(rng.choice(pools))) for _ in range(rng.randint(0, 12)))
                   if rng.random() < 0.5 else rng.choice(words)) for _ in range(rng.randint(0, 12))]
        texts.append(" ".join(chunks))
    return texts


def test_the_language_read_fast_is_the_one_read_character_by_character() -> None:
    texts = mixed_texts(5000) + [
        "Plain English text — with a dash… and it is what the tool writes.",
        "x² is the and the",  # a superscript digit is part of a word: "x²" is no function word
        "Café au lait: le la les et", "The Is In", "DER UND IST",
        "", "1234 5678", "— … —", "Ⅻ and the",
    ]
    assert [language_of(text) for text in texts] == [one_by_one(text) for text in texts]


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"the obsidian-help corpus is not at {CORPUS}")
def test_real_notes_in_six_languages_are_told_as_before() -> None:
    notes = [path.read_text("utf-8", "replace") for path in sorted(CORPUS.rglob("*.md"))]
    told = [language_of(text) for text in notes]
    assert told == [one_by_one(text) for text in notes]
    assert {"en", "de", "zh", "ja", "cyrillic", "arabic"} <= set(told)  # each of its six, told apart


def test_adversarial_text_is_told_as_character_by_character_and_the_cache_stays_bounded() -> None:
    """Text a planted note can hold: lone surrogates, NUL, combining marks alone, every
    code point there is (in slices), a huge note, title-case and dotted letters. Each is
    told as the rule says, and classifying every code point keeps the script cache at
    its bound."""
    every = "".join(chr(code) for code in range(0x110000))
    texts = [every[start:start + 3000] for start in range(0, len(every), 3000)] + [
        "\ud800 the and is \udfff", "\x00the\x00and\x00is\x00", "the\x00and", "e\u0301\u0301\u0301 der die und",
        "\u0301" * 100, "ǅ ǈ İ ı the and", "ﬁ ﬂ Ａ Ｂ the and is", "\ufffd" * 5000 + " der die das",
        "the and " * 100_000 + "日本語", "日" * 1_000_000, "\u200b".join("the and is of to") * 500,
        "le la les " * 10 + "\U0001F600" * 3000, "ＴＨＥ ＡＮＤ ＩＳ",
    ]
    assert [language_of(text) for text in texts] == [one_by_one(text) for text in texts]
    assert len(language._SCRIPT_OF) <= language._SCRIPTS_KEPT
