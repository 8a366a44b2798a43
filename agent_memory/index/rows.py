"""What a note becomes in its index row: the text of each searched column, its names
and the values the filters read. Pure functions of the note and its file's facts, so a
rebuilt index says the same; ``db.Index`` writes them."""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
import re
import unicodedata
from typing import Any

from .. import limits
from ..clock import iso
from ..note.parse import Note, hand_named, note_name
from ..note.split import without_code
from ..recall.choice import shape_of
from ..recall.language import language_of
from ..recall.terms import date_tokens
from .facts import FileFacts

_MONTHS = "January February March April May June July August September October November December".split()


def indexed_body(body: str) -> str:
    """The part of a body the index holds: at most ``limits.MAX_INDEXED_BODY`` bytes of
    UTF-8, cut before a whole character and, where one is near, after a whole word."""
    limit = limits.MAX_INDEXED_BODY
    if len(body) <= limit // 4:  # at most 4 bytes a character: fits without encoding
        return body
    head = body[:limit]
    data = head.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return head
    head = data[:limit].decode("utf-8", "ignore")
    for end in range(len(head) - 1, max(len(head) - 200, 0), -1):
        if head[end].isspace():
            return head[: end + 1]
    return head


def link_key(target: str) -> str:
    """How a wikilink target or a path is compared: case-insensitive, no ``.md``."""
    key = unicodedata.normalize("NFC", target.strip().replace("\\", "/").lstrip("/")).casefold()
    return key.removesuffix(".md")


def search_names(note: Note) -> str:
    """What a memory is called, searched with title weight: its title, its note name
    (the file name, which Obsidian shows and ``[[links]]`` use) and its aliases."""
    names = [note.title, note_name(note.path) if hand_named(note.path) else "", *note.aliases]
    return "\n".join(dict.fromkeys(n.strip() for n in names if n and n.strip()))


def split_names(note: Note) -> tuple[str, str]:
    """``search_names`` in two: the title and note name, and the aliases (those not
    already among them), each one a line. Indexed in two columns, so a profile can
    weigh an alias below the name a note is filed under; together they are
    ``search_names`` (the same words, so BM25 over both at equal weight is unchanged)."""
    every = search_names(note).split("\n")
    own = {n.strip() for n in (note.title, note_name(note.path) if hand_named(note.path) else "") if n and n.strip()}
    return "\n".join(n for n in every if n in own), "\n".join(n for n in every if n not in own)


def joined(names: str, aliases: str) -> str:
    """Every name of a memory, one a line (``search_names``), from its two columns."""
    return f"{names}\n{aliases}" if names and aliases else names or aliases


def name_key(name: str) -> str:
    """How a name is compared with a question: Unicode-normalised (macOS writes NFD
    names) and case-folded, as Obsidian's quick switcher matches."""
    return unicodedata.normalize("NFC", name).casefold()


def description(note: Note) -> str:
    """A ``description:`` property as text (a string, or a list of strings)."""
    value = note.meta.get("description")
    items = value if isinstance(value, list) else [value]
    return "\n".join(str(v).strip() for v in items if isinstance(v, (str, int, float)) and str(v).strip())


_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)


def headings_of(body: str) -> str:
    """The markdown headings of a body (``## Rename a note``), one a line, without their
    ``#`` marks; none from code blocks (a ``# comment`` in a fenced block is code)."""
    if "#" not in body:
        return ""
    return "\n".join(m.group(1) for m in _HEADING.finditer(without_code(body)))


def kind_of(meta: dict[str, Any]) -> str | None:
    """The ``type:`` property as the type filter reads it: text, else none."""
    value = meta.get("type")
    return value if isinstance(value, str) else None


def importance_of(meta: dict[str, Any]) -> float | None:
    """The ``importance:`` property as filters and stats read it: a finite number (not
    a boolean), else none."""
    value = meta.get("importance")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int of hundreds of digits, as YAML reads one
        return None
    return number if math.isfinite(number) else None


def changed_at(updated: str | None, mtime_ns: int) -> str:
    """When a memory last changed: the later of its ``updated`` time and its file's
    mtime, so a person's edit in an editor (which leaves ``updated:`` as it was) counts.
    Both come from the file, so a rebuilt index says the same."""
    try:
        mtime = iso(dt.datetime.fromtimestamp(mtime_ns / 1e9, dt.timezone.utc))
    except (OverflowError, OSError, ValueError):  # a stamp past what a date holds
        mtime = ""
    return max(updated or "", mtime)


def row_values(rid: int, note: Note, facts: FileFacts, names: str, body: str, cjk: str,
                dated: str, described: str, aliases: str, headings: str) -> tuple[Any, ...]:
    return (
        rid,
        note.path,
        link_key(note.path),
        link_key(note.path.rsplit("/", 1)[-1]),
        note.id,
        int(note.own_id),
        note.namespace,
        note.title,
        names,
        " ".join(note.tags),
        body,  # the indexed prefix (indexed_body): FTS5 reads its text from this column
        note.created,
        note.updated,
        note.expires,
        note.source,
        note.content_hash,
        facts.size,
        facts.mtime_ns,
        facts.ctime_ns,
        facts.inode,
        facts.seen_ns,
        facts.sha256,
        json.dumps(note.problems, ensure_ascii=False) if note.problems else None,
        int(note.conflict),
        json.dumps(note.meta, ensure_ascii=False, default=str),
        cjk,
        dated,
        described,
        kind_of(note.meta),
        importance_of(note.meta),
        changed_at(note.updated, facts.mtime_ns),
        aliases,
        language_of(f"{note.title}\n{body}"),
        shape_of(note.path, body),
        headings,
    )


def date_words(created: str | None) -> str:
    """``2023-05-08T13:56:00Z`` -> ``8may2023 may2023 8may``: the ways a question names
    that day, spelled so only a date term matches them (``query.date_tokens``)."""
    return _day_words(created[:10]) if isinstance(created, str) else ""


@functools.lru_cache(maxsize=4096)
def _day_words(day_text: str) -> str:
    """``date_words`` of one day (a rebuild meets each day many times)."""
    try:
        year, month, day = int(day_text[:4]), int(day_text[5:7]), int(day_text[8:10])
        name = _MONTHS[month - 1].lower()
    except (ValueError, IndexError):
        return ""
    return " ".join((date_tokens(day, name, year), date_tokens(None, name, year), date_tokens(day, name, None)))


def words_text(title: str, tags: str, body: str) -> str:
    """What the vocabulary table reads for one memory (the same at insert and delete)."""
    return f"{title}\n{tags}\n{body}"
