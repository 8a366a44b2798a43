"""Front-matter properties as the ``where`` filter reads them (pure).

Each key and each scalar value (a list's items one by one) becomes one lookup row, so
``--where status=done`` is one index seek instead of a scan of every file's front
matter. Keys and text are compared as Obsidian users type them: Unicode-normalised,
case-folded and trimmed; numbers by value (``3`` and ``3.0`` are one value); booleans
as ``true``/``false``; a ``[[wikilink]]`` also as its target. The one rule for both
sides lives here: how a file's value is indexed is how a filter's value is compared.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..errors import InvalidInput

MAX_KEY_CHARS = 200  # longer keys are not indexed (nor can a filter name one)
MAX_VALUE_CHARS = 500  # longer values are not indexed for equality (the key still is)
MAX_KEYS = 256  # most keys of one file indexed
MAX_ITEMS = 1000  # most items of one list indexed
_LINK = re.compile(r"\[\[([^\]|#]+)(?:#[^\]|]*)?(?:\|[^\]]*)?\]\]")
_NUMBER = re.compile(r"-?\d+(\.\d+)?")


def _nfc(text: str) -> str:
    """``text`` in NFC (ASCII text already is: no call for it)."""
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def prop_key(key: Any) -> str:
    """A property name as compared: normalised, case-folded, trimmed."""
    return _nfc(str(key)).casefold().strip()


def prop_value(value: Any) -> str | None:
    """One scalar value as compared, or None when it has no form an equality can match
    (nested data, null, NaN, or over ``MAX_VALUE_CHARS``)."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            return None
        text = str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    elif isinstance(value, str):
        text = _nfc(value).casefold().strip()
        number = _as_number(text)
        text = number if number is not None else text
    else:
        return None
    return text if len(text) <= MAX_VALUE_CHARS else None


def _as_number(text: str) -> str | None:
    """``3.0`` typed in a filter is the number 3, as a YAML ``3.0`` is."""
    first = text[:1]
    if not (first == "-" or first.isdecimal()) or not _NUMBER.fullmatch(text) or len(text) > 30:
        return None
    return prop_value(float(text)) if "." in text else str(int(text))


def _values(value: Any) -> Iterator[str]:
    items = value[:MAX_ITEMS] if isinstance(value, list) else [value]
    for item in items:
        text = prop_value(item)
        if text is None:
            continue
        yield text
        if isinstance(item, str) and "[[" in item:
            for target in _LINK.findall(item):  # "[[Acme Corp|Acme]]" is also "acme corp"
                linked = prop_value(target)
                if linked is not None and linked != text:
                    yield linked


# Keys as written -> as compared: a vault's files share a few dozen keys (``prop_key`` once each).
# Bounded in count and in size: only keys short enough to be indexed are kept (a planted
# file's 256 keys of 40,000 characters each must not stay in memory for the process's life).
_KEYS: dict[str, str] = {}
_KEYS_KEPT = 10_000


def properties(meta: Mapping[Any, Any], tags: Iterable[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """The keys a file has and its (key, value) pairs, as indexed. ``tags`` are the
    memory's tags as the tag filter reads them (a string of tags split, inline ``#tags``
    counted), so ``--where tags=x`` agrees with ``--tag x`` on exact tags."""
    keys: dict[str, None] = {}
    pairs: dict[tuple[str, str], None] = {}
    for raw, value in list(meta.items())[:MAX_KEYS]:
        key = _KEYS.get(raw) if type(raw) is str else None
        if key is None:
            key = prop_key(raw)
            if type(raw) is str and len(raw) <= MAX_KEY_CHARS and len(_KEYS) < _KEYS_KEPT:
                _KEYS[raw] = key
        if not key or len(key) > MAX_KEY_CHARS:
            continue
        keys[key] = None
        for text in _values(list(tags) if key == "tags" else value):
            pairs[(key, text)] = None
    return list(keys), list(pairs)


MAX_WHERE = 20  # most property conditions in one filter


def check_where(where: Any) -> tuple[tuple[str, str | None], ...]:
    """Property conditions as a caller gives them, checked and normalised: ``key=value``
    (equal, or a list holding it) or ``key`` alone (present), as a list of such strings
    or one string (the CLI's repeatable ``--where``), or an object ``{key: value}`` where
    ``null`` means present (MCP). All conditions must hold."""
    if where is None or where == "" or where == [] or where == {}:
        return ()
    if isinstance(where, str):
        where = [where]
    if isinstance(where, Mapping):
        items = [(key, value) for key, value in where.items()]
    elif isinstance(where, (list, tuple)):
        items = [_split(text) for text in where]
    else:
        raise InvalidInput(f"where must be a list of key=value conditions; got {where!r}.")
    if len(items) > MAX_WHERE:
        raise InvalidInput(f"where has {len(items)} conditions; the limit is {MAX_WHERE}.")
    return tuple(_condition(key, value) for key, value in items)


def _split(text: Any) -> tuple[str, Any]:
    if not isinstance(text, str):
        raise InvalidInput(f"A where condition must be text like status=done (or a key alone); got {text!r}.")
    key, sep, value = text.partition("=")
    return key, (value if sep else None)


def _condition(key: Any, value: Any) -> tuple[str, str | None]:
    name = prop_key(key) if isinstance(key, str) else ""
    if not name or "\x00" in name or len(name) > MAX_KEY_CHARS:
        raise InvalidInput(f"A where condition needs a property name of 1-{MAX_KEY_CHARS} characters before '='; "
                           f"got {key!r}. Example: status=done, or status alone for any value.")
    if value is None:
        return name, None
    text = prop_value(value) if isinstance(value, (str, int, float)) else None
    if text is None or "\x00" in text:
        raise InvalidInput(f"where {name}: the value must be text, a number or true/false of at most "
                           f"{MAX_VALUE_CHARS} characters; got {value!r}.")
    return name, text
