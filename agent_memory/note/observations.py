"""A knowledge-graph entity's observations as list items of a note's body, and back (pure).

Each observation is one line ``- TEXT`` (an empty one is ``-``). TEXT is the observation
with backslash escapes, so that any string comes back exactly and none of it is read as
markdown structure the vault acts on:

- ``\\\\`` a backslash; ``\\n``, ``\\r``, ``\\t`` a line feed, carriage return, tab;
  ``\\s`` a space (written only at either end of the text, where editors trim them);
  ``\\uXXXX`` any other control or line-breaking character, and whitespace at either end;
- ``\\[`` and ``\\]`` brackets (so no ``[[wikilink]]`` and no ``[markdown](link)``),
  ``\\(`` a parenthesis right after a bracket, ``\\#`` a ``#`` that would start a tag;
- on reading, a backslash before any other ASCII punctuation is that character (as in
  CommonMark); before anything else it is a backslash.

Lines that are not ``-`` items (a person's own paragraphs, headings) are not observations
and are kept as they are when observations are added or deleted.
"""

from __future__ import annotations

import re
import string

from ..errors import InvalidInput

_SHORT = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "[": "\\[", "]": "\\]"}
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]")
_ITEM = re.compile(r"- (.*)|-")
_PUNCTUATION = frozenset(string.punctuation)
_UNPAIRED = re.compile("[\ud800-\udfff\x00]")


def check_text(value: str, what: str) -> str:
    """``value``, unless it holds a NUL or half of a surrogate pair, which no file can keep."""
    found = _UNPAIRED.search(value)
    if found:
        kind = "a NUL character" if found.group() == "\x00" else "an unpaired surrogate"
        raise InvalidInput(f"{what} holds {kind} (at character {found.start() + 1}), which a file cannot keep; "
                           "remove it and retry.")
    return value


def encode(text: str) -> str:
    """One observation as the text of its list item."""
    out: list[str] = []
    last = len(text) - 1
    for i, c in enumerate(text):
        at_end = i == 0 or i == last
        if c == " " and at_end:
            out.append("\\s")
        elif c in _SHORT:
            out.append(_SHORT[c])
        elif _UNSAFE.fullmatch(c) or (at_end and c.isspace()):
            out.append(f"\\u{ord(c):04x}")
        elif c == "(" and i > 0 and text[i - 1] == "]":
            out.append("\\(")
        elif c == "#" and (i == 0 or text[i - 1].isspace()):
            out.append("\\#")
        else:
            out.append(c)
    return "".join(out)


def decode(text: str) -> str:
    """A list item's text as the observation it encodes."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c != "\\" or i + 1 == n:
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt in "nrts":
            out.append({"n": "\n", "r": "\r", "t": "\t", "s": " "}[nxt])
            i += 2
        elif nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
        elif nxt in _PUNCTUATION:
            out.append(nxt)
            i += 2
        else:
            out.append("\\")
            i += 1
    return "".join(out)


def item_line(observation: str) -> str:
    """The body line of one observation."""
    encoded = encode(observation)
    return f"- {encoded}" if encoded else "-"


def read(body: str) -> list[str]:
    """The observations of a body, in order (duplicates kept)."""
    return [decode(text) for text in _item_texts(body)]


def _item_texts(body: str) -> list[str]:
    found = []
    for line in body.split("\n"):
        item = _ITEM.fullmatch(line.removesuffix("\r"))
        if item is not None:
            found.append(item.group(1) or "")
    return found


def write(observations: list[str]) -> str:
    """A new entity's body: its observations, one item each."""
    return "".join(item_line(o) + "\n" for o in observations)


def added(body: str, new: list[str]) -> str:
    """``body`` with ``new`` observations after its last one (or at its end); every other
    line as it was."""
    if not new:
        return body
    nl = "\r\n" if "\r\n" in body else "\n"
    lines = body.split(nl) if body else []
    trailing = bool(lines) and lines[-1] == ""
    if trailing:
        lines.pop()
    last = max((n for n, line in enumerate(lines) if _ITEM.fullmatch(line)), default=len(lines) - 1)
    lines[last + 1:last + 1] = [item_line(o) for o in new]
    return nl.join(lines) + nl


def removed(body: str, gone: set[str]) -> str:
    """``body`` without the items whose observation is in ``gone``; every other line as it was."""
    kept = []
    for line in body.split("\n"):
        item = _ITEM.fullmatch(line.removesuffix("\r"))
        if item is None or decode(item.group(1) or "") not in gone:
            kept.append(line)
    return "\n".join(kept)
