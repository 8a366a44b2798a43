"""Front matter read without a YAML parser, for the shapes nearly every note has: one
``key: value`` a line, where a value is a plain or quoted scalar, a flow list
(``[a, "b, c"]``) or a block list (``- item`` lines under ``key:``). The tool's own files
and most hand-written notes (Obsidian's ``aliases:``, ``publish: true``) are all this.

``read_simple`` returns None for anything it is not certain YAML reads the same way
(then the full parser reads it): anchors, tags, block scalars, nested mappings, floats,
a continued line, a tab or a control character, a duplicate key. Tests compare it with
the full parser on every corpus here and on generated front matter. One deliberate
difference: an impossible timestamp (``2026-02-30T09:00:00Z``) as a key's value stays a
string, so only that key is reported instead of the whole front matter being lost.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

from ..patterns import lazy_pattern
from .render import MAYBE_TYPED, TIMESTAMP, plain_tag, reads_as_text

# Characters the fast path never reads: YAML refuses them, folds them as line breaks or
# treats them specially (tabs, a lone carriage return, a BOM inside, surrogates).
_UNSAFE = lazy_pattern("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff\r]")
# A key at the start of a line: a plain scalar without indicators, colons or comments
# (kept as written, as the full loader keeps keys); a value after ": " (or nothing).
_KEY_LINE = re.compile(r"([^\s\-?:,\[\]{}#&*!|>'\"%@`<=~][^:#,\[\]{}]{0,200}):(?: +(.*))?")
_ITEM_LINE = re.compile(r"( *)-(?: +(.*))?")  # no lazy match before trailing spaces: linear on any line
_DOUBLE = re.compile(r'"(?:[^"\\]|\\["\\bfnrt]|\\u(?![dD][89abAB])[0-9a-fA-F]{4})*"')
_SINGLE = re.compile(r"'(?:[^']|'')*'")
# A flow list's item: quoted, or plain without flow indicators, colons or comments.
_FLOW_ITEM = re.compile(  # possessive: no backtracking, so a hostile line costs linear time
    r""" *+("(?:[^"\\]|\\["\\bfnrt]|\\u(?![dD][89abAB])[0-9a-fA-F]{4})*+"|'(?:[^']|'')*+'"""
    r"""|[^\s,\[\]{}:#&*!|>'"%@`?\-][^,\[\]{}:#]*+) *+([,\]])"""
)
_FLOW_SPECIAL = re.compile(r"[\"':#\[\]{}]")
_DECIMAL = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_DATE = re.compile(r"\d{4}-\d\d-\d\d")
_INDICATORS = frozenset("-?:,[]{}#&*!|>%@`'\"")
_DIGITS = frozenset("0123456789")
_TRUE = frozenset(("yes", "true", "on"))
_STR, _BOOL, _NULL, _INT, _TIME = (f"tag:yaml.org,2002:{t}" for t in ("str", "bool", "null", "int", "timestamp"))


class _Declined(Exception):
    """Not a shape the fast path is certain of: the full parser reads it."""


def read_simple(fm_text: str) -> dict[str, Any] | None:
    """The front matter as YAML would read it, or None when it is not a simple shape."""
    if "\r" in fm_text:
        fm_text = fm_text.replace("\r\n", "\n")
    if _UNSAFE().search(fm_text):
        return None
    try:
        return _read_lines(fm_text.split("\n"))
    except _Declined:
        return None


def _read_lines(lines: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    listing: list[Any] | None = None  # the block list being read (under a key with no value)
    indent = -1
    for line in lines:
        match = _KEY_LINE.fullmatch(line)  # most lines: a key at the start, then its value
        if match is not None:
            key, raw = match.groups()
            if raw and raw[-1] == " ":
                raw = raw.rstrip(" ")
            if key in out or key[-1] == " ":
                raise _Declined
            if raw:
                out[key], listing = _top_value(raw), None
            else:
                out[key] = listing = _ListOrNone()
                indent = -1
        elif not line or line.isspace() or line.lstrip(" ").startswith("#"):
            continue  # blank lines and comments are nothing to YAML
        else:
            item = _ITEM_LINE.fullmatch(line) if listing is not None else None
            if item is None or listing is None or (indent >= 0 and len(item.group(1)) != indent):
                raise _Declined
            indent = len(item.group(1))
            listing.append(_value((item.group(2) or "").rstrip(" "), block=True))
    return {key: (value.value() if isinstance(value, _ListOrNone) else value) for key, value in out.items()}


class _ListOrNone(list):  # type: ignore[type-arg]
    """A key with nothing after its colon: a block list if item lines follow, else null."""

    def value(self) -> list[Any] | None:
        return list(self) if self else None


def _top_value(raw: str) -> Any:
    if raw[0] in _DIGITS and TIMESTAMP.fullmatch(raw):
        return raw  # see the module's docstring: kept even when not a real instant
    return _value(raw, block=True)


def _value(raw: str, block: bool) -> Any:
    """One scalar or flow list, as YAML reads it (``block``: not inside a flow list)."""
    if not raw:
        return None
    first = raw[0]
    if first not in _INDICATORS or (first == "-" and len(raw) > 1 and raw[1] != " "):
        if block and (": " in raw or " #" in raw or raw[-1] == ":"):
            raise _Declined
        return raw if first not in MAYBE_TYPED else _plain(raw)
    if first == '"':
        if raw[-1] == '"' and "\\" not in raw and raw.count('"') == 2 and len(raw) > 1:
            return raw[1:-1]
        if not _DOUBLE.fullmatch(raw):
            raise _Declined
        return json.loads(raw)
    if first == "'":
        if not _SINGLE.fullmatch(raw):
            raise _Declined
        return raw[1:-1].replace("''", "'")
    if first == "[" and block:
        return _flow_list(raw)
    raise _Declined


def _plain(raw: str) -> Any:
    """A plain scalar as YAML resolves it: text, or a boolean, null, decimal integer or
    valid date; anything else YAML would type (floats, octals, odd timestamps) is declined."""
    if reads_as_text(raw):
        return raw
    tag = plain_tag(raw)
    if tag == _BOOL:
        return raw.lower() in _TRUE
    if tag == _NULL:
        return None
    if tag == _INT and _DECIMAL.fullmatch(raw):
        return int(raw)
    if tag == _TIME:
        try:
            if _DATE.fullmatch(raw):
                return dt.date.fromisoformat(raw).isoformat()
            if TIMESTAMP.fullmatch(raw):
                dt.datetime.fromisoformat(raw)
                return raw
        except ValueError:
            pass
    raise _Declined


def _flow_list(raw: str) -> list[Any]:
    inner = raw[1:-1]
    if raw[-1] == "]" and not _FLOW_SPECIAL.search(inner):  # plain items, split at commas
        if not inner.strip():
            return []
        plain = [item.strip(" ") for item in inner.split(",")]
        if all(item and item[0] not in _INDICATORS for item in plain):
            return [item if item[0] not in MAYBE_TYPED else _plain(item) for item in plain]
    items: list[Any] = []
    at = 1
    while True:
        match = _FLOW_ITEM.match(raw, at)
        if match is None:
            raise _Declined
        items.append(_value(match.group(1).rstrip(" "), block=False))
        at = match.end()
        if match.group(2) == "]":
            break
    if at != len(raw):
        raise _Declined
    return items
