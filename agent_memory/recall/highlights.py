"""A marked snippet -> the snippet's text and where its matches are (pure).

Snippets are built with each match between ``MARK_OPEN`` and ``MARK_CLOSE`` (control
characters no note holds in practice, and ``printable`` strips from any that does), so
a bracket the note itself holds (``[[link]]``, ``![[Document.pdf]]``) is never taken for
a match. Callers get the plain text and the matches as ``[start, end)`` offsets into it,
counted in characters (Unicode code points); each front end marks them its own way.
"""

from __future__ import annotations

import re

from .terms import MARK_CLOSE, MARK_OPEN

_MARKS = re.compile(f"([{MARK_OPEN}{MARK_CLOSE}])")


def split_marks(marked: str) -> tuple[str, list[list[int]]]:
    """The text without its marks, and each marked stretch as ``[start, end]`` (end
    exclusive). A mark without its partner is dropped; an empty match is no range.
    Read a stretch at a time between marks (a page of snippets, character by character,
    was a tenth of a search)."""
    text: list[str] = []
    ranges: list[list[int]] = []
    length = 0
    opened: int | None = None
    for piece in _MARKS.split(marked):
        if piece == MARK_OPEN:
            opened = length
        elif piece == MARK_CLOSE:
            if opened is not None and length > opened:
                ranges.append([opened, length])
            opened = None
        else:
            text.append(piece)
            length += len(piece)
    return "".join(text), ranges
