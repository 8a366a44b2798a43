"""Which language a note or a question is written in, roughly and cheaply (pure).

The ``notes`` profile prefers notes in the question's language (a vault holding the
same pages in several languages must not answer an English question with the German
copy) and corrects typos towards words of that language. Scripts other than Latin name
their language outright (kana: ``ja``; ideographs alone: ``zh``; Hangul: ``ko``;
Cyrillic, Arabic, Greek, Hebrew... by script). Latin text is told apart by its most
common function words (en, de, fr, es, it, pt, nl); text without enough of them is
``"latin"``; text without letters ``""``: unknown, never guessed.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

# The commonest function words of each language, written without accents (as compared).
# Words two languages share ("de", "la") count for both and decide nothing; no word of
# one letter (code and URLs are full of them).
_FUNCTION_WORDS = {
    "en": "the and is are of to in that it for with was this you on be as have not or by can from your how what "
          "do does i my an if when which there into will",
    "de": "der die das und ist nicht ein eine einen einer mit sich auf fur den dem des zu im auch wie oder werden "
          "kann sie ich wird sind bei von aus nach wenn ihre ihr ihren zum zur uber mein meine meines",
    "fr": "le la les et est des une un du que pour dans pas sur avec vous ce qui au aux sont par ou votre vos",
    "es": "el la los las es que de del en un una para por con no se su al lo como mas este esta sus",
    "it": "il lo la gli le che di un una per non con del della sono nel nella si questo come",
    "pt": "os as que de do da em um uma para com nao no na se mais por seu sua voce",
    "nl": "de het een en van is dat niet op te met voor zijn je ook als bij aan er naar",
}
_WORDS_OF = {lang: frozenset(words.split()) for lang, words in _FUNCTION_WORDS.items()}
_WORD = re.compile(r"[^\W\d_]+")
SAMPLE = 4000  # characters of a note read to tell its language
_LATIN_MIN = 2  # function words a Latin text needs before a language is named
# What one letter of a script counts for against Latin letters: an ideograph, a kana or
# a Hangul syllable is about a word (a note in Chinese full of English names and code is
# still Chinese).
_LETTER_WEIGHT = {"han": 4, "ja": 3, "ko": 3}


def _script(char: str) -> str:
    """The script of one letter, as far as telling languages apart needs."""
    code = ord(char)
    if 0x3040 <= code <= 0x30FF or 0x31F0 <= code <= 0x31FF:
        return "ja"
    if 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF or 0xF900 <= code <= 0xFAFF:
        return "han"
    if 0xAC00 <= code <= 0xD7AF or 0x1100 <= code <= 0x11FF or 0x3130 <= code <= 0x318F:
        return "ko"
    if 0x0400 <= code <= 0x052F:
        return "cyrillic"
    if 0x0600 <= code <= 0x06FF or 0x0750 <= code <= 0x077F or 0xFB50 <= code <= 0xFEFF:
        return "arabic"
    if 0x0370 <= code <= 0x03FF:
        return "greek"
    if 0x0590 <= code <= 0x05FF:
        return "hebrew"
    if 0x0900 <= code <= 0x097F:
        return "devanagari"
    if 0x0E00 <= code <= 0x0E7F:
        return "thai"
    return "latin" if char.isascii() or code <= 0x024F else "other"


def _fold(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", word.lower()) if not unicodedata.combining(c))


# Each function word with the languages that have it (a word two languages share votes for both).
_LANGUAGES_OF: dict[str, tuple[str, ...]] = {}
for _lang, _words in _WORDS_OF.items():
    for _word in _words:
        _LANGUAGES_OF[_word] = (*_LANGUAGES_OF.get(_word, ()), _lang)
_LANGUAGES_OF_BYTES = {word.encode(): langs for word, langs in _LANGUAGES_OF.items()}
_NON_ASCII_LETTER = re.compile(r"[^\W\d_\x00-\x7f]")  # a character past ASCII that _WORD takes
# ASCII bytes to what telling the language needs of them: a letter lower-cased, anything
# else a space (so ``split`` gives the words ``_WORD`` finds, when all are ASCII).
_ASCII_WORDS = bytes(c + 32 if 65 <= c <= 90 else c if 97 <= c <= 122 else 32 for c in range(256))
# The script of each character seen so far, None for one that is no letter: a note has a
# few dozen distinct characters, so each is classified once, not once per occurrence
# (the first ``_SCRIPTS_KEPT`` kept: text of every code point must not grow it unbounded).
_SCRIPT_OF: dict[str, str | None] = {}
_SCRIPTS_KEPT = 20_000


def _letters(sample: str) -> dict[str, int]:
    """How many letters of each script ``sample`` holds."""
    letters: dict[str, int] = {}
    for char, n in Counter(sample).items():
        script = _SCRIPT_OF.get(char, "")
        if script == "":
            script = _script(char) if char.isalpha() else None
            if len(_SCRIPT_OF) < _SCRIPTS_KEPT:
                _SCRIPT_OF[char] = script
        if script is not None:
            letters[script] = letters.get(script, 0) + n
    return letters


def language_of(text: str) -> str:
    """The language ``text`` is written in (a code as above), or ``""`` when unsure.

    The script with most letters decides, Han with any kana being Japanese; Latin text
    by which language's function words it holds most of (at least two, and more than
    any other language's), else ``"latin"``."""
    sample = text[:SAMPLE]
    if sample.isascii() or not _NON_ASCII_LETTER.search(sample):
        return _ascii_language(sample)
    letters = _letters(sample)
    if not letters:
        return ""
    counts = {script: n * _LETTER_WEIGHT.get(script, 1) for script, n in letters.items() if script not in ("han", "ja")}
    counts["cjk"] = letters.get("han", 0) * _LETTER_WEIGHT["han"] + letters.get("ja", 0) * _LETTER_WEIGHT["ja"]
    script = max(counts, key=lambda s: (counts[s], s))
    if script == "cjk":
        return "ja" if letters.get("ja", 0) * 20 >= letters.get("han", 0) else "zh"
    if script != "latin":
        return "" if script == "other" else script
    votes = dict.fromkeys(_WORDS_OF, 0)
    for word, n in Counter(_WORD.findall(sample)).items():
        for lang in _LANGUAGES_OF.get(word.lower() if word.isascii() else _fold(word), ()):
            votes[lang] += n
    return _voted(votes)


def _ascii_language(sample: str) -> str:
    """``language_of`` for text whose every letter is ASCII (no character past ASCII
    can be part of a word: most notes, a dash or an emoji aside), without a look at
    each character from Python: its letters are Latin and its words ASCII."""
    words = sample.encode("ascii", "replace").translate(_ASCII_WORDS).split()
    if not words:
        return ""  # no letter at all
    votes = dict.fromkeys(_WORDS_OF, 0)
    for word in [word for word in words if word in _LANGUAGES_OF_BYTES]:  # the few function words
        for lang in _LANGUAGES_OF_BYTES[word]:
            votes[lang] += 1
    return _voted(votes)


def _voted(votes: dict[str, int]) -> str:
    """The language with most function words, if at least two and more than any other's."""
    ranked = sorted(votes.items(), key=lambda item: -item[1])
    (best, most), (_, second) = ranked[0], ranked[1]
    return best if most >= _LATIN_MIN and most > second else "latin"


# About how many Latin letters it takes to say what one character of a script says (the
# hub rule's note length, ``text_length``): an ideograph writes a word or a morpheme, a
# kana or a Hangul syllable one to three sounds. On the obsidian-help vault, whose Chinese
# and Japanese pages translate its English ones, English runs to 3.4 characters an
# ideograph and 1.6 a kana (the other characters counted as they are); Hangul, which that
# vault lacks, is set from its syllable blocks of two or three letters each. Each is
# told by the first byte of its UTF-8 form (bytes.count runs at memory speed, a look at
# each character from Python would not): E3 starts U+3000-U+3FFF (kana, CJK
# punctuation), E4-E9 U+4000-U+9FFF (ideographs), EA-ED U+A000-U+D7FF (Hangul).
# The languages written in those scripts (``language_of``): only their notes are measured so.
WRITTEN_DENSER = ("ja", "zh", "ko")
_LATIN_SPAN = ((3.0, (b"\xe4", b"\xe5", b"\xe6", b"\xe7", b"\xe8", b"\xe9")), (1.5, (b"\xe3",)),
               (2.5, (b"\xea", b"\xeb", b"\xec", b"\xed")))


def text_length(sample: bytes, length: int) -> float:
    """The length of a text of ``length`` characters counted in Latin letters, each
    ideograph, kana or Hangul syllable counting as the letters it takes to say it
    (``_LATIN_SPAN``), so a Chinese page is about as long as its English original.
    ``sample``, the text's first ``SAMPLE`` characters in UTF-8, tells the mix of
    scripts. Latin, Cyrillic, Greek or Arabic text: its ``length``."""
    if not sample or sample.isascii():
        return float(length)
    characters = min(length, SAMPLE)
    extra = sum((span - 1) * sum(sample.count(lead) for lead in leads) for span, leads in _LATIN_SPAN)
    return length * (characters + extra) / max(characters, 1)


LATIN = frozenset(_WORDS_OF) | {"latin"}


def same_language(question: str, note: str) -> bool:
    """Whether a note in language ``note`` suits a question in ``question``: the same
    one, or either unknown (``""``), or Latin text of no named language beside a
    language written in Latin letters."""
    if not question or not note or question == note:
        return True
    return "latin" in (question, note) and question in LATIN and note in LATIN


def suiting(question: str) -> list[str]:
    """The note languages that suit a question in ``question`` (``same_language``),
    unknown included; every language when the question's is unknown."""
    if not question:
        return []
    if question in LATIN:
        return sorted({question, "latin", ""} if question != "latin" else LATIN | {""})
    return [question, ""]
