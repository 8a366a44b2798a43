"""Where a file's parts are: the front matter between its fences (a BOM and the newline
style kept), the body after it, and the body's code (where ``#`` and ``[[`` are code).

The other modules of this folder build on it; everything here is pure.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass


_BOM = "\ufeff"
FENCE_OPEN = re.compile(r"---[ \t]*\r?\n")
_FENCE_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.MULTILINE)
CODE = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)|`[^`\n]*`", re.DOTALL)


@dataclass
class Split:
    bom: str
    fm_text: str | None  # None: the file has no front matter block
    fm_start: int  # offsets into the text after the BOM
    fm_end: int
    body_start: int
    newline: str


def split(text: str) -> Split:
    bom = _BOM if text.startswith(_BOM) else ""
    rest = text[len(bom) :]
    newline = "\r\n" if "\r\n" in rest[: rest.find("\n") + 1 or len(rest)] else "\n"
    opened = FENCE_OPEN.match(rest)
    if opened:
        closing = _FENCE_CLOSE.search(rest, opened.end())
        if closing:
            return Split(bom, rest[opened.end() : closing.start()], opened.end(), closing.start(), closing.end(), newline)
    return Split(bom, None, 0, 0, 0, newline)


def merge_unique(*lists: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for items in lists:
        for item in items:
            seen.setdefault(item, None)
    return list(seen)


@functools.lru_cache(maxsize=2)  # tags, wikilinks and markdown links each ask for the same body
def without_code(body: str) -> str:
    """The body with code spans and fenced blocks removed (their ``#`` and ``[[`` are code)."""
    return CODE.sub("", body) if "`" in body or "~~~" in body else body


def front_matter_span(text: str) -> tuple[int, int, int] | None:
    """Offsets in ``text`` (a BOM included) of the front matter's first line, the end of
    its last line (the closing fence starts there) and the body's start; None when the
    file has no closed front matter."""
    parts = split(text)
    if parts.fm_text is None:
        return None
    at = len(parts.bom)
    return at + parts.fm_start, at + parts.fm_end, at + parts.body_start
