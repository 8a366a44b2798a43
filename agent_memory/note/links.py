"""Links between notes: ``[[wikilinks]]`` and ``[text](note.md)`` markdown links, as
written and as vault paths, and rewriting them in place when a note moves (only the
targets' bytes change).
"""

from __future__ import annotations

import posixpath
import re
import urllib.parse
from collections.abc import Callable
from typing import Any

from .split import CODE, merge_unique, split, without_code


BODY_LINK_RELATION = "links_to"


# A relation property's name (SPEC §5): one word, as link_memories takes it.
RELATION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
_WIKILINK = re.compile(r"!?\[\[([^\[\]|#^\n]*)(?:[#^][^\[\]|\n]*)?(?:\|[^\[\]\n]*)?\]\]")


# A markdown link to a note: [text](Note%20name.md), [text](<Note name.md>), with an
# optional #heading and "title". Images (![..](..)) and URLs with a scheme are not notes.
_MDLINK = re.compile(r"(?<!!)\[[^\[\]\n]*\]\((<[^<>\n]+>|[^()\s<>]+)(?:\s+\"[^\"\n]*\")?\)")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:|//")


# Any markdown link or image, for the moved note's own relative links to what is not a note.
_ANYLINK = re.compile(r"\[[^\[\]\n]*\]\((<[^<>\n]+>|[^()\s<>]+)(?:\s+\"[^\"\n]*\")?\)")
_URL_PARTS = re.compile(r"([^?#]*)(.*)", re.DOTALL)
_URL_SAFE = "/!$&'*+,;=:@~"


def wikilinks(text: str) -> list[str]:
    """Targets of ``[[target|alias]]`` / ``[[target#heading]]`` links, as written.


    Inside a markdown table Obsidian escapes the alias pipe: ``[[target\\|alias]]``."""
    targets = (m.group(1).rstrip("\\").strip() for m in _WIKILINK.finditer(text))
    return merge_unique([t for t in targets if t])


def retarget_links(text: str, new_target: Callable[[str], str | None]) -> tuple[str, int]:
    """``text`` with the target of each wikilink that ``new_target`` maps to a new one
    rewritten in place, and how many were. Span edits: ``!`` embeds, ``#heading``,
    ``^block``, ``|alias`` (and a table's ``\\|``) and every other byte stay as written;
    links in the body's code are code, left alone. ``new_target`` gets the target as
    written (stripped) and returns its new text, or None to leave the link."""
    parts = split(text)
    start = len(parts.bom)
    regions = [(start + parts.fm_start, start + parts.fm_end, False)] if parts.fm_text is not None else []
    regions.append((start + parts.body_start, len(text), True))
    edits: list[tuple[int, int, str]] = []
    for begin, end, is_body in regions:
        segment = text[begin:end]
        code = [m.span() for m in CODE.finditer(segment)] if is_body and ("`" in segment or "~~~" in segment) else []
        for m in _WIKILINK.finditer(segment):
            if any(a <= m.start() < b for a, b in code):
                continue
            written = m.group(1).rstrip("\\")
            target = written.strip()
            replacement = new_target(target) if target else None
            if replacement is not None and replacement != target:
                at = begin + m.start(1) + len(written) - len(written.lstrip())
                edits.append((at, at + len(target), replacement))
    for at, stop, replacement in reversed(edits):
        text = text[:at] + replacement + text[stop:]
    return text, len(edits)


def markdown_link_target(url: str, source_path: str) -> str | None:
    """The note a markdown link's URL names, as a vault path (``Projects/Note name.md``),
    or None when it names no note (a web address, an attachment, a path out of the
    vault). Percent-escapes are decoded; ``./`` and ``../`` are read from the linking
    note's folder, ``/x.md`` from the vault's top; a plain ``Note.md`` or
    ``folder/Note.md`` is left as written, for link resolution to find as Obsidian
    does (nearest first)."""
    if url.startswith("<") and url.endswith(">"):
        url = url[1:-1]
    if _SCHEME.match(url):
        return None
    path = urllib.parse.unquote(url.split("#", 1)[0]).strip()
    if not path.casefold().endswith(".md"):
        return None
    if path.startswith("/"):
        path = path.lstrip("/")
    elif path.startswith(("./", "../")) or "/./" in path or "/../" in path:
        path = posixpath.normpath(posixpath.join(posixpath.dirname(source_path), path))
        if path == ".." or path.startswith("../"):
            return None
    return path or None


def markdown_links(body: str, source_path: str) -> list[str]:
    """The notes ``[text](note.md)`` links in ``body`` name (``markdown_link_target``),
    outside code, each once."""
    found = (markdown_link_target(m.group(1), source_path) for m in _MDLINK.finditer(without_code(body)))
    return merge_unique([t for t in found if t])


def retarget_markdown_links(text: str, source_path: str, new_path: Callable[[str], str | None],
                            moved_to: str | None = None) -> tuple[str, int]:
    """``text`` with each markdown link in its body whose note ``new_path`` maps to a new
    vault path pointing there, written the way it was: relative to the linking note
    when it was (``Note.md``, ``../x/Note.md``), from the vault's top when it was
    (``folder/Note.md``, ``/folder/Note.md``), inside ``<...>`` or percent-escaped as
    it was, its ``#heading`` kept. ``moved_to``: the linking note itself moves there,
    so its ``./`` and ``../`` links are rewritten from its new folder (to the same
    notes). Only the URLs' bytes change; links in code stay."""
    parts = split(text)
    begin = len(parts.bom) + parts.body_start
    segment = text[begin:]
    code = [m.span() for m in CODE.finditer(segment)] if ("`" in segment or "~~~" in segment) else []
    edits: list[tuple[int, int, str]] = []
    for m in (_MDLINK if moved_to is None else _ANYLINK).finditer(segment):
        if any(a <= m.start() < b for a, b in code):
            continue
        url = m.group(1)
        image = m.start() > 0 and segment[m.start() - 1] == "!"
        target = None if image else markdown_link_target(url, source_path)
        if target is None:
            rebased = _rebased(url, source_path, moved_to) if moved_to is not None else None
            if rebased is not None and rebased != url:
                edits.append((begin + m.start(1), begin + m.end(1), rebased))
            continue
        bracketed = url.startswith("<")
        written = url[1:-1] if bracketed else url
        path_part, hash_, heading = written.partition("#")
        relative = path_part.startswith(("./", "../"))
        moved = new_path(target)
        if moved is None and moved_to is not None and relative:
            moved = target  # the same note, reached from the linking note's new folder
        if moved is None:
            continue
        if path_part.startswith("/"):
            place = "/" + moved
        elif relative or "/" not in path_part:
            place = posixpath.relpath(moved, posixpath.dirname(moved_to or source_path) or ".")
            if path_part.startswith("./") and not place.startswith("../"):
                place = "./" + place
        else:
            place = moved
        if not bracketed:
            place = urllib.parse.quote(place, safe=_URL_SAFE)
        new_url = ("<" if bracketed else "") + place + hash_ + heading + (">" if bracketed else "")
        if new_url != url:
            edits.append((begin + m.start(1), begin + m.end(1), new_url))
    for at, stop, replacement in reversed(edits):
        text = text[:at] + replacement + text[stop:]
    return text, len(edits)


def _rebased(url: str, source_path: str, moved_to: str) -> str | None:
    """A ``./`` or ``../`` link to what is not a note (an image, a PDF) in a note moving
    from ``source_path`` to ``moved_to``, rewritten to reach the same file from the new
    folder (its ``?query`` and ``#fragment`` kept); None for any other link, or one
    leading out of the vault."""
    bracketed = url.startswith("<") and url.endswith(">")
    written = url[1:-1] if bracketed else url
    if _SCHEME.match(written):
        return None
    path_part, rest = _URL_PARTS.fullmatch(written).groups()  # type: ignore[union-attr]
    if not path_part.startswith(("./", "../")):
        return None
    path = posixpath.normpath(posixpath.join(posixpath.dirname(source_path), urllib.parse.unquote(path_part)))
    if path == ".." or path.startswith("../"):
        return None
    place = posixpath.relpath(path, posixpath.dirname(moved_to) or ".")
    if path_part.startswith("./") and not place.startswith("../"):
        place = "./" + place
    if not bracketed:
        place = urllib.parse.quote(place, safe=_URL_SAFE)
    return ("<" if bracketed else "") + place + rest + (">" if bracketed else "")


def links_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return wikilinks(value)
    if isinstance(value, list):
        return merge_unique(*[wikilinks(v) for v in value if isinstance(v, str)])
    return []
