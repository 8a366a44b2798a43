"""A plain question -> normalised terms -> safe FTS5 expressions, and snippet text (pure).

Terms only ever contain letters and digits and are always double-quoted in the
expression, so no input can inject FTS5 syntax (``"``, ``*``, ``NEAR``, ``-``, ``(``).

Words match exactly after the index's porter stemmer ("deploys" finds "deployed");
prefix matching is a fallback for a word that matches nothing ("kube" -> "kubernetes"),
since on LoCoMo it added 0.3 points and made partial queries 4x slower.
Chinese, Japanese and Korean have no spaces, so the index also holds every CJK run as
overlapping character bigrams (column ``cjk``) and a CJK run in a question becomes the
phrase of its bigrams: a substring match.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import unicodedata
from dataclasses import dataclass

from ..patterns import lazy_pattern

MAX_QUERY_CHARS = 1000
PREFIX_MIN = 3  # shortest word tried as the start of longer words when it matches nothing
TYPO_MIN = 4  # shortest word corrected when it matches nothing

# English filler words (NLTK's list of 179, which measured 5 points better on LoCoMo
# than a short list, less "won", a past tense more than a contraction) and Spanish ones
# (less those that are English content words or names: "son", "sea", "era", "sin", "sean").
_EN = """
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself
yourselves he him his himself she she's her hers herself it it's its itself they them
their theirs themselves what which who whom this that that'll these those am is are was
were be been being have has had having do does did doing a an the and but if or because
as until while of at by for with about against between into through during before after
above below to from up down in out on off over under again further then once here there
when where why how all any both each few more most other some such no nor not only own
same so than too very s t can will just don don't should should've now d ll m o re ve y
ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven
haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn
shouldn't wasn wasn't weren weren't won't wouldn wouldn't
"""
_ES = """
de la que el en y a los del se las por un para con no una su al lo como mas pero sus le
ya o este si porque esta entre cuando muy sobre tambien me hasta hay donde quien
desde todo nos durante todos uno les ni contra otros ese eso ante ellos e esto mi antes
algunos que unos yo otro otras otra el tanto esa estos mucho quienes nada muchos cual
poco ella estar estas algunas algo nosotros mi mis tu te ti tu tus ellas nosotras
vosotros vosotras os mio mia mios mias tuyo tuya tuyos tuyas suyo suya suyos suyas
nuestro nuestra nuestros nuestras vuestro vuestra vuestros vuestras esos esas estoy
estas esta estamos estais estan este estes estemos esteis esten es soy eres somos sois
seamos seais fue fui fuiste fuimos fueron eramos eran he has
ha hemos habeis han hay tengo tienes tiene tenemos tienen cual cuales cuando como donde
que quien quienes cuanto cuanta cuantos cuantas
"""


# Scripts written without spaces between words (and Hangul, whose words carry their
# particles): Hiragana, Katakana, CJK ideographs (+ extension A, compatibility, 々〆〇),
# Hangul syllables and jamo.
_CJK = "\u3005-\u3007\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"
# Compiled on first use: only text that is not ASCII runs them (ms to compile).
_CJK_RUN = lazy_pattern(f"[{_CJK}]+")
_CJK_OR_NOT = lazy_pattern(f"[{_CJK}]+|[^{_CJK}]+")
_KANA = lazy_pattern("[\u3040-\u30ff\u31f0-\u31ff]")


def _fold(text: str) -> str:
    """NFKC, lower case, strip accents: what the index's ``unicode61 remove_diacritics 2``
    does to Latin scripts (``Köln`` = ``koln``). Lower case, not ``casefold``: the index
    keeps ``ß`` as it is, so must the query. Kana keep their voicing marks (データ stays
    データ) so terms read as written; the index folds them on both sides alike."""
    text = unicodedata.normalize("NFKC", text).lower()
    if text.isascii():
        return text
    out: list[str] = []
    for char in unicodedata.normalize("NFKD", text):
        if unicodedata.combining(char) and not (out and _KANA().match(out[-1])):
            continue
        out.append(char)
    return unicodedata.normalize("NFC", "".join(out))


STOPWORDS = frozenset(_fold(w).replace("'", "") for w in (_EN + _ES).split())

_POSSESSIVE = re.compile(r"(\w)['’]s\b")
# French and Italian elisions (l'équipe, d'accord, qu'il, dell'anno): the article goes.
_WONT = re.compile(r"\bwon['’]t\b")  # not the "won" of a match, which is no filler word
_ELISION = re.compile(r"\b(?:l|d|j|m|n|s|t|c|qu|dell|all|nell|sull)['’](?=\w)")
_TOKEN = re.compile(r"[^\W_]+")


def is_cjk(text: str) -> bool:
    return bool(text) and not text.isascii() and _CJK_RUN().fullmatch(text) is not None


def tokens(text: str) -> list[str]:
    """Folded alphanumeric runs; possessives and elided articles dropped, apostrophes,
    hyphens and underscores split, and a CJK run split from Latin letters or digits
    touching it (``Obsidianの`` -> two)."""
    folded = _fold(text)
    folded = _POSSESSIVE.sub(r"\1", folded)
    # Other apostrophes split words as the index does (O'Brien -> o, brien; don't ->
    # don, t: both filler words), and elided articles are dropped.
    folded = _ELISION.sub("", _WONT.sub("will not", folded))
    out: list[str] = []
    for token in _TOKEN.findall(folded):
        out.extend(_CJK_OR_NOT().findall(token) if not token.isascii() else [token])
    return out


# --------------------------------------------------------------------------- terms


@dataclass(frozen=True)
class Term:
    """One searched unit: ``text`` as reported in ``terms``/``matched_terms``, and the
    FTS5 expression that finds it."""

    text: str
    expr: str
    cjk: bool = False
    date: bool = False
    ident: bool = False  # written like an identifier (``identifier_like``): never typo-corrected or stemmed


def _quote(word: str) -> str:
    return '"' + word.replace('"', "") + '"'


def word_term(word: str, prefix: bool = False) -> Term:
    """A word, stemmed by the index; ``prefix`` also matches longer words."""
    return Term(word, _quote(word) + ("*" if prefix else ""))


def date_tokens(day: int | None, month: str, year: int | None) -> str:
    """How the index's ``dated`` column spells a day: run together (``8may2023``,
    ``may2023``, ``8may``), so that no word of a question can match it ("may" in a
    question is not every memory written in May); only a date term does."""
    return "".join(str(p) for p in (day, month, year) if p is not None)


_MONTHS = "january february march april may june july august september october november december".split()
_MONTH = "(" + "|".join(m[:3] + f"(?:{m[3:]})?" if len(m) > 3 else m for m in _MONTHS) + r")\.?"
_DAY = r"([0-3]?\d)(?:st|nd|rd|th)?"
_DATE_PHRASE = re.compile(
    rf"\b(?:{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+(\d{{4}}))?|{_MONTH}\s+{_DAY}(?:,?\s+(\d{{4}}))?|{_MONTH}\s+(\d{{4}})"
    r"|(\d{4})-(\d\d)-(\d\d))\b",
    re.IGNORECASE,
)


def date_terms(question: str) -> tuple[list[Term], set[str]]:
    """Dates named in a question ("8 May 2023", "May 8", "May 2023", "2023-05-08") as
    terms that also match the day a memory was created, and the words they used up."""
    out: list[Term] = []
    used: set[str] = set()
    day: str | None
    for m in _DATE_PHRASE.finditer(question):
        g = m.groups()
        if g[8]:  # ISO
            if not 1 <= int(g[9]) <= 12:
                continue
            year, month, day = g[8], _MONTHS[int(g[9]) - 1], str(int(g[10]))
        else:
            day, month_word, year = (g[0], g[1], g[2]) if g[1] else (g[4], g[3], g[5]) if g[3] else (None, g[6], g[7])
            month = next(full for full in _MONTHS if full.startswith(month_word.lower()[:3]))
            if day is not None and not 1 <= int(day) <= 31:
                continue
            day = str(int(day)) if day else None
        phrase = " ".join(p for p in (day, month, year) if p)
        typed = " ".join(tokens(m.group(0)))
        dated = date_tokens(int(day) if day else None, month, int(year) if year else None)
        # The day a memory was created, or the date as the question wrote it in the text.
        out.append(Term(phrase, f"(dated : {_quote(dated)} OR {_quote(typed)})", date=True))
        used.update(tokens(m.group(0)))
    return list({t.text: t for t in out}.values()), used


def bigrams(run: str) -> list[str]:
    """``東京オフィス`` -> ``東京 京オ オフ フィ ィス``: overlapping character pairs."""
    return [run[i : i + 2] for i in range(len(run) - 1)] or [run]


def cjk_term(run: str) -> Term:
    """A CJK run as the phrase of its bigrams (so it matches as a substring); one
    character as a prefix of the indexed bigrams and run ends."""
    if len(run) == 1:
        return Term(run, f"cjk : {_quote(run)}*", cjk=True)
    return Term(run, f"cjk : {_quote(' '.join(bigrams(run)))}", cjk=True)


def can_prefix(term: Term) -> bool:
    """A word that may be the start of longer ones (``kube``, ``postgres``)."""
    return not term.cjk and len(term.text) >= PREFIX_MIN and not term.text.isdigit()


def expansion_term(word: str, longer: list[str]) -> Term:
    """``word`` standing for the indexed words it starts (``postgres`` -> postgresql).

    The words come from the unstemmed vocabulary rather than an FTS5 prefix query,
    because FTS5 stems a prefix before expanding it (``negative*`` is ``neg*``, which
    finds "neglect")."""
    return Term(word, "(" + " OR ".join(_quote(w) for w in longer) + ")")


def can_correct(term: Term) -> bool:
    return not term.cjk and not term.ident and len(term.text) >= TYPO_MIN and term.text.isalpha()


# --------------------------------------------------------------------------- stem families

STEM_MIN = 4  # shortest indexed word a longer word may be taken back to
# Suffixes (accents folded) and the endings that may replace them, longest first: a word
# that matches nothing is tried as ``word[:-len(suffix)] + ending`` for each. The index's
# porter stemmer already joins "deploys" and "deployed"; these catch what it leaves apart
# ("linter" / "linting", "creation" / "create") and Spanish, which it does not stem.
_SUFFIXES: dict[str, tuple[str, ...]] = {
    # English
    "ations": ("e", ""), "ation": ("e", ""), "ments": ("",), "ment": ("",), "ness": ("",),
    "ings": ("", "e", "-"), "ing": ("", "e", "-"), "ers": ("", "e", "-"), "er": ("", "e", "-"),
    "ed": ("", "e", "-"), "ions": ("", "e"), "ion": ("", "e"), "ors": ("", "e"), "or": ("", "e"),
    "ists": ("",), "ist": ("",), "ism": ("",), "ity": ("", "e"), "able": ("", "e"), "ible": ("",),
    "ally": ("",), "ly": ("",), "es": ("",), "s": ("",), "al": ("",), "ive": ("", "e"),
    # Spanish (-ción, -mente, -ando, -iendo, -ado, -dor, -miento...)
    "aciones": ("ar",), "acion": ("ar",), "iciones": ("ir",), "icion": ("ir", "er"), "ciones": ("",), "cion": ("",),
    "amente": ("o", "a"), "mente": ("",), "ando": ("ar",), "iendo": ("er", "ir"),
    "ados": ("ar",), "adas": ("ar",), "ado": ("ar",), "ada": ("ar",), "idos": ("er", "ir"), "idas": ("er", "ir"),
    "ido": ("er", "ir"), "ida": ("er", "ir"), "adores": ("ar",), "adoras": ("ar",), "ador": ("ar",), "adora": ("ar",),
    "amientos": ("ar",), "amiento": ("ar",), "imientos": ("er", "ir"), "imiento": ("er", "ir"),
    "istas": ("",), "ista": ("",),
}
_BY_LENGTH = sorted(_SUFFIXES, key=len, reverse=True)


def stem_candidates(word: str) -> list[str]:
    """Shorter words ``word`` may derive from by a known suffix (``linter`` -> lint,
    ``configuracion`` -> configurar), longest first; each at least ``STEM_MIN`` letters.
    An ending ``-`` undoes a doubled consonant (``stopped`` -> stop). What is left after
    the stem must be a listed suffix, so ``scarecrow`` never becomes "scare"."""
    out: dict[str, None] = {}
    for suffix in _BY_LENGTH:
        if not word.endswith(suffix) or len(word) - len(suffix) < STEM_MIN - 1:
            continue
        base = word[: -len(suffix)]
        for ending in _SUFFIXES[suffix]:
            if ending == "-":
                stem = base[:-1] if len(base) > 2 and base[-1] == base[-2] and base[-1] not in "aeiou" else ""
            else:
                stem = base + ending
            if len(stem) >= STEM_MIN and stem != word:
                out[stem] = None
    return sorted(out, key=len, reverse=True)


def can_stem(term: Term) -> bool:
    return not term.cjk and not term.ident and not term.date and len(term.text) > STEM_MIN and term.text.isalpha()


# --------------------------------------------------------------------------- identifiers

_VOWELS = frozenset("aeiouy")
_RARE_DOUBLES = ("qq", "jj", "vv", "xx", "ww", "yy")  # not kk, ii, uu, hh: bookkeeping, skiing, vacuum, withhold
_CONSONANT_RUN = 6  # "strengths" has five in a row; no English or Spanish word has six
_IDENT_CHUNK = re.compile(r"[^\W_]+(?:_[^\W_]+)+|\w*\d\w*|\w*[a-z][A-Z]\w*", re.UNICODE)


def identifier_like(word: str) -> bool:
    """A folded token whose letters no English or Spanish word has: a ``q`` not before
    ``u`` (except a final one: "iraq"), a letter three times in a row, a double of a
    letter that words never double (``qq``, ``jj``, ``vv``, ``ww``, ``xx``, ``yy``), six consonants in a row,
    or no vowel at all in five letters or more. Such a token is a name someone made
    (``burstmarkeriqq``), so a near miss is a different name, not a typo."""
    if not word.isalpha() or not word.isascii():
        return not word.isalpha()
    if any(c == "q" and i + 1 < len(word) and word[i + 1] != "u" for i, c in enumerate(word)):
        return True
    if any(word[i] == word[i + 1] == word[i + 2] for i in range(len(word) - 2)):
        return True
    if any(d in word for d in _RARE_DOUBLES):
        return True
    run = 0
    for c in word:
        run = 0 if c in _VOWELS else run + 1
        if run >= _CONSONANT_RUN:
            return True
    return len(word) >= 5 and not _VOWELS.intersection(word)


def _identifier_tokens(question: str) -> set[str]:
    """Tokens of the question's identifier-like words as written: ones joined by
    underscores (``deploy_token``), holding digits (``build42``) or mixed case
    (``burstMarker``; a capital after a small letter), folded as ``tokens`` folds them."""
    out: set[str] = set()
    for m in _IDENT_CHUNK.finditer(unicodedata.normalize("NFKC", question)):
        out.update(tokens(m.group(0)))
    return out


# Words asking for the newest state of something ("the current X", "who still owns Y",
# "¿quién lo lleva ahora?"): not searched for, they put the newest of the memories
# matching the same terms first. "today" only as "today's" (else it is a topic).
RECENCY_WORDS = frozenset(
    "current currently latest newest now still nowadays actual actualmente ultimo ultima ultimos ultimas ahora todavia".split()
)
_TODAYS = re.compile(r"\btoday['’]s\b", re.IGNORECASE)


def recency_intent(question: str) -> bool:
    """Whether the question asks for the newest state (``RECENCY_WORDS``, "today's")."""
    return bool(_TODAYS.search(question)) or any(w in RECENCY_WORDS for w in tokens(question))


def terms(question: str) -> list[Term]:
    """The distinct meaningful words of a question, in order.

    Recency words ("current", "ahora"...) are left out. If every word is a filler or
    recency word ("who is it", "latest"), the words themselves are used rather than
    searching for nothing.
    """
    dates, used = date_terms(question)
    words = tokens(question)
    if _TODAYS.search(question):
        used = used | {"today"}
    kept = [w for w in words if w not in STOPWORDS and w not in used and w not in RECENCY_WORDS]
    kept = kept or [w for w in words if w not in STOPWORDS and w not in used] or ([] if dates else words)
    idents = _identifier_tokens(question)
    out = [
        cjk_term(w) if is_cjk(w) else dataclasses.replace(word_term(w), ident=w in idents or identifier_like(w))
        for w in dict.fromkeys(kept)
    ]
    return out + [d for d in dates if d.text not in {t.text for t in out}]


def _script(char: str) -> str:
    if "\u3040" <= char <= "\u309f":
        return "hiragana"
    if "\u30a0" <= char <= "\u30ff" or "\u31f0" <= char <= "\u31ff":
        return "katakana"
    if "\uac00" <= char <= "\ud7af" or "\u1100" <= char <= "\u11ff" or "\u3130" <= char <= "\u318f":
        return "hangul"
    return "han"


def cjk_parts(run: str) -> list[Term]:
    """What to search for when a whole CJK run matches nothing (a question, not a
    phrase): its words as far as scripts tell them apart (``東京`` ``オフィス`` ``住所``;
    kana between them are particles and endings, dropped), and ideograph runs longer
    than two as their bigrams, most Chinese words being two characters."""
    segments = ["".join(chars) for _, chars in itertools.groupby(run, key=_script)]
    parts: list[str] = []
    for text in segments:
        kind = _script(text[0])
        if kind == "hiragana" and len(segments) > 1:
            continue
        if kind in ("han", "hangul") and len(text) > 2:
            parts.extend(bigrams(text))
        else:
            parts.append(text)
    return [cjk_term(p) for p in dict.fromkeys(parts) if p != run] or [cjk_term(run)]


def near_pairs(words: list[Term], distance: int) -> list[str]:
    """FTS5 ``NEAR`` groups of each two neighbouring plain words of a question: a note
    holding "table of contents" together scores above one holding "table" and
    "contents" apart (BM25 counts each group as one more, rarer term)."""
    plain = [t if t.expr == _quote(t.text) and not (t.cjk or t.date) else None for t in words]
    return [f"NEAR({a.expr} {b.expr}, {int(distance)})" for a, b in itertools.pairwise(plain) if a and b]


def all_expr(words: list[Term]) -> str:
    return " AND ".join(t.expr for t in words)


def any_expr(words: list[Term]) -> str:
    return " OR ".join(t.expr for t in words)


@dataclass(frozen=True)
class Plan:
    """What a search will run: the terms and the expression for each match mode."""

    terms: list[Term]
    newest: bool = False  # the question asks for the newest state (``recency_intent``)

    @property
    def words(self) -> list[str]:
        return [t.text for t in self.terms]

    @property
    def all(self) -> str:
        return all_expr(self.terms)

    @property
    def any(self) -> str:
        return any_expr(self.terms)


def plan(question: str) -> Plan:
    return Plan(terms=terms(question), newest=recency_intent(question))


# --------------------------------------------------------------------------- index side


def cjk_index_text(*texts: str) -> str:
    """What the index's ``cjk`` column holds for a memory: each CJK run of its text as
    bigrams, then the run's last character (so a one-character query finds a word's
    end too); and Latin letters or digits written against CJK (``Obsidianの``), which
    the body column reads as one word with them. Empty for text without CJK, which is
    most text and costs nothing."""
    out: list[str] = []
    for text in texts:
        if text.isascii() or not _CJK_RUN().search(text):
            continue
        for token in _TOKEN.findall(unicodedata.normalize("NFKC", text)):
            if not _CJK_RUN().search(token):
                continue
            for part in _CJK_OR_NOT().findall(token):
                if is_cjk(part):
                    out.extend(bigrams(part) if len(part) > 1 else [])
                    out.append(part[-1])
                else:
                    out.append(part)
    return " ".join(out)


# --------------------------------------------------------------------------- typos


def edit_distance(a: str, b: str, bound: int) -> int:
    """Optimal-string-alignment distance (a swap of neighbours costs 1), or ``bound + 1``
    as soon as it must exceed ``bound``."""
    if abs(len(a) - len(b)) > bound:
        return bound + 1
    before: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            value = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                value = min(value, before[j - 2] + 1)
            current[j] = value
        if min(current) > bound:
            return bound + 1
        before, previous = previous, current
    return min(previous[-1], bound + 1)


def typo_bound(word: str) -> int:
    """Edits allowed when correcting ``word``: one up to 8 letters, two from 9. A word
    missing from the vault is as often a real word as a typo ("partake" is two edits
    from "parade"), so short words get one edit only."""
    return 1 if len(word) <= 8 else 2


# --------------------------------------------------------------------------- snippets


def highlight(text: str, needles: list[str], width: int = 80) -> str:
    """A window of ``text`` around the first needle, every needle marked with
    ``MARK_OPEN``/``MARK_CLOSE`` (FTS5's ``snippet`` cannot do this for the bigram column)."""
    text = unicodedata.normalize("NFKC", text)
    found = sorted((m.start(), m.end()) for n in needles if n for m in re.finditer(re.escape(n), text))
    if not found:
        return text[:width] + ("…" if len(text) > width else "")
    start = max(0, found[0][0] - width // 4)
    end = min(len(text), start + width)
    pieces, pos = [], start
    for a, b in found:
        if a < pos or b > end:
            continue
        pieces += [text[pos:a], MARK_OPEN, text[a:b], MARK_CLOSE]
        pos = b
    pieces.append(text[pos:end])
    return ("…" if start else "") + "".join(pieces).replace("\n", " ") + ("…" if end < len(text) else "")


MARK_OPEN, MARK_CLOSE = "\x02", "\x03"  # what FTS5's highlight() is asked to mark with: char(2), char(3)


def best_window(marked: str, size: int) -> str:
    """``size`` words of a body marked by ``highlight()``: the first window holding the
    most different matched words, in one pass (FTS5's snippet is quadratic in the
    matches). Matches keep their marks; '…' where text is cut."""
    words = marked.split()
    hits = [i for i, word in enumerate(words) if MARK_OPEN in word]

    def matched(i: int) -> str:
        return words[i].partition(MARK_OPEN)[2].partition(MARK_CLOSE)[0].casefold()

    start = 0
    if hits:
        counts: dict[str, int] = {}
        best, best_score, last, end = hits[0], 0, hits[0], 0
        for first in hits:  # the window starting at this match
            while end < len(hits) and hits[end] < first + size:
                counts[matched(hits[end])] = counts.get(matched(hits[end]), 0) + 1
                end += 1
            if len(counts) > best_score:
                best, best_score, last = first, len(counts), hits[end - 1]
            gone = matched(first)
            counts[gone] -= 1
            if not counts[gone]:
                del counts[gone]
        slack = best + size - 1 - last  # words after the window's last match
        start = max(0, best - slack // 2)  # the matches in the middle, where there is room
    shown = " ".join(words[start : start + size])
    return ("…" if start else "") + shown + ("…" if start + size < len(words) else "")
