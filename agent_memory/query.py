"""A plain question -> normalised terms -> a safe FTS5 expression (pure).

Terms only ever contain letters and digits and are always double-quoted in the
expression, so no input can inject FTS5 syntax (``"``, ``*``, ``NEAR``, ``-``, ``(``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

MAX_QUERY_CHARS = 1000
PREFIX_MIN = 3

# English filler words (the 179 of NLTK's list, which measured 5 points better on
# LoCoMo than a short list) and Spanish ones.
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
shouldn't wasn wasn't weren weren't won won't wouldn wouldn't
"""
_ES = """
de la que el en y a los del se las por un para con no una su al lo como mas pero sus le
ya o este si porque esta entre cuando muy sin sobre tambien me hasta hay donde quien
desde todo nos durante todos uno les ni contra otros ese eso ante ellos e esto mi antes
algunos que unos yo otro otras otra el tanto esa estos mucho quienes nada muchos cual
poco ella estar estas algunas algo nosotros mi mis tu te ti tu tus ellas nosotras
vosotros vosotras os mio mia mios mias tuyo tuya tuyos tuyas suyo suya suyos suyas
nuestro nuestra nuestros nuestras vuestro vuestra vuestros vuestras esos esas estoy
estas esta estamos estais estan este estes estemos esteis esten es soy eres somos sois
son sea seas seamos seais sean fue fui fuiste fuimos fueron era eras eramos eran he has
ha hemos habeis han hay tengo tienes tiene tenemos tienen cual cuales cuando como donde
que quien quienes cuanto cuanta cuantos cuantas
"""


def _fold(text: str) -> str:
    """NFKC, case-fold, strip accents: what the index's ``remove_diacritics 2`` does."""
    text = unicodedata.normalize("NFKC", text).casefold()
    decomposed = unicodedata.normalize("NFKD", text)
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


STOPWORDS = frozenset(_fold(w).replace("'", "") for w in (_EN + _ES).split())

_POSSESSIVE = re.compile(r"(\w)['’]s\b")
_APOSTROPHE = re.compile(r"(\w)['’](\w)")
_TOKEN = re.compile(r"[^\W_]+")


def tokens(text: str) -> list[str]:
    """Folded alphanumeric runs; possessives dropped, hyphens/underscores split."""
    folded = _fold(text)
    folded = _POSSESSIVE.sub(r"\1", folded)
    folded = _APOSTROPHE.sub(r"\1\2", folded)  # don't -> dont, so it meets the stopword list
    return _TOKEN.findall(folded)


def terms(question: str) -> list[str]:
    """The distinct meaningful words of a question, in order.

    If every word is a filler word ("who is it"), the words themselves are used
    rather than searching for nothing.
    """
    words = tokens(question)
    kept = [w for w in words if w not in STOPWORDS]
    return list(dict.fromkeys(kept or words))


def term_expr(term: str) -> str:
    """One term as FTS5: quoted, and a prefix query when long enough to be safe."""
    quoted = '"' + term.replace('"', "") + '"'
    return quoted + "*" if len(term) >= PREFIX_MIN and not term.isdigit() else quoted


def all_expr(words: list[str]) -> str:
    return " AND ".join(term_expr(t) for t in words)


def any_expr(words: list[str]) -> str:
    return " OR ".join(term_expr(t) for t in words)


@dataclass(frozen=True)
class Plan:
    """What a search will run: the terms and the expression for each match mode."""

    terms: list[str]
    all: str
    any: str


def plan(question: str) -> Plan:
    words = terms(question)
    return Plan(terms=words, all=all_expr(words), any=any_expr(words))
