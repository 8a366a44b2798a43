"""Writing front matter: one YAML value as text YAML reads back the same
(``yaml_scalar``), canonical UTC timestamps (``to_utc``) and the files the tool creates
(``render_new``: a fixed key order, so git diffs show only real changes).
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
from collections.abc import Callable
from typing import Any

from ..patterns import lazy_pattern


# Key order of files the tool creates: fixed so that git diffs show only real changes.
NEW_FILE_ORDER = ("id", "namespace", "title", "tags", "created", "updated", "expires", "source")
_PLAIN_SCALAR = lazy_pattern(r"[A-Za-z0-9_\u00c0-\uffff][A-Za-z0-9_ .\-/@+\u00c0-\uffff]*")  # ms to compile
_YAML_SPECIAL = re.compile(
    r"(?i:y|n|yes|no|on|off|true|false|null|~)|[-+]?(\d[\d_]*)?\.?\d*(e[-+]?\d+)?|\d{4}-\d\d-\d\d.*"
)
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


# What YAML reads as a line break or refuses to read: always written as a \u escape.
_YAML_UNSAFE = lazy_pattern("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")


def plain_tag(text: str) -> str:
    """The tag YAML gives ``text`` written plain (unquoted): ``tag:yaml.org,2002:str``
    for text, ``...:int`` for ``0x1F``. PyYAML is imported on the first call, not with
    this module: a command that reads and writes no front matter never loads it."""
    return _yaml_resolve()(text)


@functools.cache
def _yaml_resolve() -> Callable[[str], str]:
    import yaml

    resolve: Callable[..., str] = yaml.resolver.Resolver().resolve  # PyYAML's stubs leave it untyped
    return functools.partial(resolve, yaml.ScalarNode, implicit=(True, False))


def to_utc(value: Any) -> str:
    """Canonical UTC (``2026-07-20T09:00:00Z``) from a datetime, date or ISO string."""
    if isinstance(value, str) and TIMESTAMP.fullmatch(value):
        try:
            dt.datetime.fromisoformat(value)  # already canonical: only check it is a real instant
        except ValueError as exc:
            raise ValueError(f"not a timestamp: {value!r}") from exc
        return value
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, dt.date):
        moment = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            moment = dt.datetime.fromisoformat(text.replace(" ", "T", 1) if "T" not in text and len(text) > 10 else text)
        except ValueError as exc:
            raise ValueError(f"not a timestamp: {value!r}") from exc
    else:
        raise ValueError(f"not a timestamp: {value!r}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    try:
        return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except OverflowError as exc:  # 0001-01-01T00:00+05:00 and 9999-12-31T23:59-05:00 have no UTC date
        raise ValueError(f"not a timestamp between the years 1 and 9999 in UTC: {value!r}") from exc


def yaml_scalar(value: Any) -> str:
    """One YAML value, plain where YAML would read it back as the same string."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(yaml_scalar(v) for v in value) + "]"
    if isinstance(value, dict):
        return _quoted(value)  # JSON is valid YAML flow style
    text = str(value)
    if TIMESTAMP.fullmatch(text):
        return text
    if (_PLAIN_SCALAR().fullmatch(text) and not _YAML_SPECIAL.fullmatch(text) and not text.endswith(" ")
            and ": " not in text and " #" not in text and not _YAML_UNSAFE().search(text) and reads_as_text(text)):
        return text
    return _quoted(text)


# Plain scalars YAML may read as something other than a string start with one of these
# (PyYAML's implicit resolvers are keyed by first character: "!", "&" and "*" alone are
# its "yaml" tag); any other is a string.
MAYBE_TYPED = frozenset("-+.0123456789yYnNtTfFoO~=<!&*")
_DIGITS = frozenset("0123456789")
# A letter YAML's numbers and timestamps never hold (they hold 0b, 0x, hex digits, e, T
# and Z): a scalar starting with a digit and holding one is text (the tool's ids).
_NOT_A_NUMBER = re.compile("[g-su-wyzG-SU-WY]")


def reads_as_text(text: str) -> bool:
    """Whether YAML reads ``text`` unquoted as a string (not ``0x1F`` -> 31, ``0b101`` -> 5):
    told by its first character where that settles it, else by asking PyYAML."""
    if text and (text[0] not in MAYBE_TYPED or (text[0] in _DIGITS and _NOT_A_NUMBER.search(text))):
        return True
    return _resolves_as_text(text)


@functools.lru_cache(maxsize=4096)  # namespaces and tags repeat across a whole vault
def _resolves_as_text(text: str) -> bool:
    return plain_tag(text) == "tag:yaml.org,2002:str"


def _quoted(value: Any) -> str:
    """JSON text is a YAML double-quoted scalar once line-break-like characters are escaped."""
    return _YAML_UNSAFE().sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False))


def render_new(fields: dict[str, Any], body: str) -> str:
    """A file the tool creates: fixed key order, flow lists, LF, one trailing newline."""
    ordered = {key: fields[key] for key in NEW_FILE_ORDER if fields.get(key) not in (None, "") or key == "tags"}
    ordered.update({k: v for k, v in fields.items() if k not in NEW_FILE_ORDER and v not in (None, "", [])})
    return render_front_matter(ordered, body.replace("\r\n", "\n").strip("\n") + "\n")  # LF first, then trim


def render_front_matter(meta: dict[str, Any], body: str) -> str:
    """Front matter with the keys in the order given, then ``body`` exactly as given
    (import uses this so that export -> import -> export is byte-stable)."""
    lines = ["---", *(f"{key}: {yaml_scalar(value)}" for key, value in meta.items()), "---"]
    return "\n".join(lines) + "\n" + body
