"""Edits of a body by its structure (pure): add text at its start (``prepend``), or
replace what one heading's section holds (``replace_section``). Every byte outside the
edit stays as written: front matter, a BOM, line endings, the other sections.

A section is a markdown ATX heading line (``## Status``) and the lines after it up to
the next heading of the same level or higher (fewer ``#``), or the end. Lines inside
fenced code blocks are never headings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .split import split

_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class Heading:
    """One heading line of a body: where its line starts and ends (its newline
    included), its level and its text."""

    start: int
    end: int
    level: int
    text: str


def headings(body: str) -> list[Heading]:
    """The ATX headings of ``body`` in order, fenced code skipped."""
    found: list[Heading] = []
    fence: str | None = None
    offset = 0
    for line in body.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        opened = _FENCE.match(bare)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence) \
                    and not bare[opened.end():].strip():
                fence = None
        elif opened:
            fence = opened.group(1)
        else:
            match = _HEADING.fullmatch(bare)
            if match:
                found.append(Heading(offset, offset + len(line), len(match.group(1)), (match.group(2) or "").strip()))
        offset += len(line)
    return found


def parse_heading(wanted: str) -> tuple[int | None, str]:
    """``"## Status"`` -> (2, "Status"); ``"Status"`` -> (None, "Status"): any level."""
    match = re.fullmatch(r"\s*(#{1,6})[ \t]+(.*?)\s*", wanted)
    if match:
        return len(match.group(1)), match.group(2).strip()
    return None, wanted.strip()


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def _lines(text: str, nl: str) -> str:
    """New text in the file's line endings, without outer blank lines, ending in one."""
    return text.replace("\r\n", "\n").strip("\n").replace("\n", nl) + nl


def prepend(text: str, addition: str) -> str:
    """``addition`` at the start of the body, after a first-line ``# Title`` heading when
    there is one (that heading is the note's title: text before it would change it)."""
    parts = split(text)
    nl = parts.newline
    cut = len(parts.bom) + parts.body_start
    head, body = text[:cut], text[cut:]
    found = headings(body)
    if found and found[0].start == len(body) - len(body.lstrip("\r\n")) and found[0].level == 1:
        title_end = found[0].end
        title = body[:title_end] if body[:title_end].endswith("\n") else body[:title_end] + nl
        rest = body[title_end:]
        gap = rest[: len(rest) - len(rest.lstrip("\r\n"))]
        return head + title + (gap or nl) + _lines(addition, nl) + (nl if rest.strip() else "") + rest[len(gap):]
    blank = body.strip() and not body.startswith(("\n", "\r\n"))
    return head + _lines(addition, nl) + (nl if blank else "") + body


def replace_section(text: str, heading: str, content: str) -> str:
    """The section under ``heading`` (``"## Status"``: that level; ``"Status"``: any,
    compared case-insensitively) holding ``content`` instead; the heading line and every
    other byte are kept. Raises ``ValueError`` (with the reason) when no heading or
    several match."""
    level, wanted = parse_heading(heading)
    if not wanted:
        raise ValueError("the heading to replace is empty; give its text, e.g. '## Status'")
    parts = split(text)
    nl = parts.newline
    cut = len(parts.bom) + parts.body_start
    head, body = text[:cut], text[cut:]
    found = headings(body)
    matches = [h for h in found if _same(h.text, wanted) and (level is None or h.level == level)]
    shown = ("#" * level + " " if level else "") + wanted
    if not matches:
        there = ", ".join(repr("#" * h.level + " " + h.text) for h in found[:10]) or "none"
        raise ValueError(f"no heading {shown!r} in the content (its headings: {there})")
    if len(matches) > 1:
        raise ValueError(f"{len(matches)} headings read {shown!r}; give the level too (e.g. '## {wanted}') "
                         "or edit with replace_old/replace_new")
    section = matches[0]
    after = [h for h in found if h.start > section.start and h.level <= section.level]
    end = after[0].start if after else len(body)
    heading_line = body[section.start:section.end]
    if not heading_line.endswith("\n"):
        heading_line += nl
    new = _lines(content, nl) if content.strip() else ""
    tail = body[end:]
    return head + body[:section.start] + heading_line + new + (nl if tail and new else "") + tail
