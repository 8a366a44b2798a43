"""One markdown file -> one ``Note``: what the index needs to know about it, derived
from its text alone (id, namespace, title, tags, timestamps, links, problems).

Reading tolerates whatever a human wrote and never raises; a conflicted file is read as
its first side writes it.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from .. import limits  # read at call time: tests lower the caps
from .links import BODY_LINK_RELATION, links_in, markdown_links, wikilinks
from .fast_yaml import read_simple
from .render import to_utc
from .split import FENCE_OPEN, merge_unique, split, without_code
from .tags import as_tag_list, inline_tags, not_tags


RESERVED_KEYS = ("id", "namespace", "tags", "aliases", "title", "created", "updated", "expires", "source")
_CONFLICT_START = re.compile(r"^<{7}(?: |$)", re.MULTILINE)
_CONFLICT_END = re.compile(r"^>{7}(?: |$)", re.MULTILINE)
_HEADING = re.compile(r"#{1,6}[ \t]+(.+?)[ \t#]*$")


@dataclass
class Note:
    """What the index needs to know about one file, derived from its text alone."""


    path: str
    id: str
    own_id: bool
    namespace: str
    title: str
    tags: list[str]
    aliases: list[str]
    created: str | None
    updated: str | None
    expires: str | None
    source: str
    body: str
    links: list[tuple[str, str]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    conflict: bool = False
    # The file could not be read as written (front matter broken, not a mapping, not
    # closed, aliases over budget; bytes not UTF-8; an empty file, which may be a save
    # in progress): a tool must not patch it, since it would have to guess.
    unreadable: bool = False
    half_written: bool = False  # empty, or a front matter opened and not closed: how a file looks mid-save


    @property
    def content_hash(self) -> str:
        return content_hash(self.body)


# 16 Crockford base-32 characters whose first ten, a time in milliseconds, fall before
# 2^43 ms (the year 2248): "0" then 0-7. Sixteen hex digits (some templates' ids) are in
# the alphabet too; almost all of them would be a time centuries away.
_TOOL_ID = re.compile(r"0[0-7][0-9abcdefghjkmnpqrstvwxyz]{14}")


def is_tool_id(value: str) -> bool:
    """An id in the tool's own format (``disk.layout.new_id``: 16 Crockford base-32 characters,
    the first ten a plausible time).


    Only such memories expire: Obsidian and Zettelkasten templates write ``id:`` too,
    and a person's note is never hidden or moved because of a property."""
    return bool(_TOOL_ID.fullmatch(value))


def content_hash(body: str) -> str:
    """Hash of the normalised content: what "an exact duplicate" means for dedup."""
    return hashlib.sha256(normalise_content(body).encode("utf-8")).hexdigest()


def normalise_content(body: str) -> str:
    if body.isascii():  # NFKC leaves ASCII as it is, and casefold is lower there: the same, faster
        return " ".join(body.lower().split())
    return " ".join(unicodedata.normalize("NFKC", body).casefold().split())


def file_version(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parse(data: bytes, path: str) -> Note:
    """Read one file as a memory. Never raises: problems are recorded on the note, and
    ``unreadable`` says whether its front matter was read as written."""
    problems: list[str] = []
    unreadable = half_written = False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        problems.append("file is not valid UTF-8")
        unreadable = True  # written back, the replacement characters would lose its bytes
    parts = split(text)
    rest = text[len(parts.bom) :]
    conflict = "<<<<<<<" in rest and bool(_CONFLICT_START.search(rest) and _CONFLICT_END.search(rest))
    fm_text, body_start = parts.fm_text, parts.body_start
    if conflict:  # the identity is the first side's, wherever the markers are (SPEC §2)
        fm_text, body_start = _first_side_front_matter(rest) or (fm_text, body_start)
    meta: dict[str, Any] = {}
    if fm_text is None:
        body = rest
        if (rest.startswith("---") and FENCE_OPEN.match(rest)) or (rest.strip() and "---".startswith(rest.strip())):
            # An opening fence without its close ("-", "--", "---" alone: the first bytes
            # of one): half a save, or a fence the person forgot.
            problems.append("front matter is not closed by a '---' line")
            unreadable = half_written = True
        elif not rest.strip():
            unreadable = half_written = True  # nothing to read: perhaps an editor between truncate and write
    else:
        body = rest[body_start:]
        meta, broken = read_front_matter(fm_text, problems)
        unreadable = unreadable or broken
    note = _note_from(path, meta, body, problems)
    # A git add/add conflict starts its markers inside or before the front matter, not the body.
    note.conflict = conflict
    if conflict:
        _first_side_names(note, rest, meta)
    note.unreadable = unreadable
    note.half_written = half_written
    return note


def read_front_matter(fm_text: str, problems: list[str]) -> tuple[dict[str, Any], bool]:
    """The front matter as plain data, and whether it could not be read as written: the
    fast path for the simple shapes nearly every note has, else the full YAML parser,
    imported only then (most commands, and most vaults, never need it)."""
    if len(fm_text) > limits.MAX_FRONT_MATTER:
        problems.append(f"front matter refused: it is {len(fm_text):,} characters, over the limit of "
                        f"{limits.MAX_FRONT_MATTER:,}, so none of its properties are read; move long text into the body")
        return {}, True
    if not fm_text.strip():
        return {}, False
    fast = read_simple(fm_text)
    if fast is not None:
        return fast, False
    from .safe_yaml import load_yaml

    return load_yaml(fm_text, problems)


_MARKER = {mark: re.compile(re.escape(mark * 7) + r"(?:[ \t]|\r?\n|$)") for mark in "<|=>"}


def _first_side_front_matter(text: str) -> tuple[str, int] | None:
    """The front matter of a conflicted file as its first side writes it, and the offset
    in ``text`` where the body starts; None when that side has no front matter.


    The first side of each conflict is kept (the lines after ``<<<<<<<``), the common
    ancestor (diff3's ``|||||||``) and the other side (after ``=======``) are dropped.
    That side is "ours" in a merge and the upstream one in a rebase; both normally carry
    the same id. The body is everything after that front matter as written, markers and
    both sides included, so what either side says is still found."""
    lines, kept = _first_side_lines(text)
    first = "".join(lines[i] for i in kept)
    parts = split(first)
    if parts.fm_text is None:
        return None
    offset = consumed = 0
    while consumed < len(kept) and offset < parts.body_start:
        offset += len(lines[kept[consumed]])
        consumed += 1
    last_fm_line = kept[consumed - 1]
    return parts.fm_text, sum(len(line) for line in lines[: last_fm_line + 1])


def _first_side_lines(text: str) -> tuple[list[str], list[int]]:
    """``text``'s lines (ends kept), and the indices of those the first side of each
    conflict reads (its own lines and every line outside a conflict)."""
    lines = text.split("\n")
    lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    kept: list[int] = []
    side = ""  # "", "first", "base", "other"
    for i, line in enumerate(lines):
        if not side and _MARKER["<"].match(line):
            side = "first"
        elif side == "first" and _MARKER["|"].match(line):
            side = "base"
        elif side in ("first", "base") and _MARKER["="].match(line):
            side = "other"
        elif side == "other" and _MARKER[">"].match(line):
            side = ""
        elif side in ("", "first"):
            kept.append(i)
    return lines, kept


def _first_side_names(note: Note, text: str, meta: dict[str, Any]) -> None:
    """A conflicted file's title and inline tags as its first side ("ours") writes them,
    not the marker line ``<<<<<<< ours`` nor the other side's heading (SPEC §2)."""
    lines, kept = _first_side_lines(text)
    first = "".join(lines[i] for i in kept)
    parts = split(first)
    body = first[len(parts.bom):][parts.body_start:] if parts.fm_text is not None else first[len(parts.bom):]
    title = meta.get("title")
    if not (isinstance(title, (str, int, float)) and str(title).strip()):
        note.title = derive_title(body, note.path)
    note.tags = merge_unique(as_tag_list(meta.get("tags")), inline_tags(body))


def _note_from(path: str, meta: dict[str, Any], body: str, problems: list[str]) -> Note:
    raw_id = meta.get("id")
    own_id = isinstance(raw_id, (str, int)) and str(raw_id).strip() != ""
    # SPEC §3: only the tool's own memories expire; a person's `expires:` property (a
    # passport's date) is just a property, never a reason to hide or move the note.
    ttl_applies = own_id and is_tool_id(str(raw_id).strip())
    namespace = meta.get("namespace")
    namespace = str(namespace).strip() if isinstance(namespace, (str, int)) and str(namespace).strip() else "default"
    tags = merge_unique(as_tag_list(meta.get("tags")), inline_tags(body))
    if not_tags(meta.get("tags")):
        problems.append("tags: holds a mapping or a nested list, which is no tag (tags is a list of words); "
                        "tag edits are refused until it is")
    timestamps: dict[str, str | None] = {}
    for key, value in (("created", meta.get("created")), ("updated", meta.get("updated")), ("expires", meta.get("expires") if ttl_applies else None)):
        timestamps[key] = None
        if value not in (None, ""):
            try:
                timestamps[key] = to_utc(value)
            except (ValueError, OverflowError):
                problems.append(f"{key}: {meta[key]!r} is not a date or timestamp")
    title = meta.get("title")
    links = [(key, target) for key, value in meta.items() if key not in RESERVED_KEYS for target in links_in(value)]
    if "[[" in body:
        links += [(BODY_LINK_RELATION, target) for target in wikilinks(without_code(body))]
    if "](" in body:
        links += [(BODY_LINK_RELATION, target) for target in markdown_links(body, path)]
    return Note(
        path=path,
        id=str(raw_id).strip() if own_id else path,
        own_id=own_id,
        namespace=namespace,
        title=str(title).strip() if isinstance(title, (str, int, float)) and str(title).strip() else derive_title(body, path),
        tags=tags,
        aliases=_as_str_list(meta.get("aliases")),
        created=timestamps["created"],
        updated=timestamps["updated"],
        expires=timestamps["expires"],
        source=str(meta.get("source") or "").strip(),
        body=body,
        links=links,
        meta=meta,
        problems=problems,
        conflict="<<<<<<<" in body and bool(_CONFLICT_START.search(body) and _CONFLICT_END.search(body)),
    )


def _as_str_list(value: Any) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list) else str(value).split(",")
    return [str(i).strip() for i in items if i is not None and str(i).strip()]


_LINK_TEXT = re.compile(r"!?\[\[([^\[\]|]*)(?:\|([^\[\]]*))?\]\]|!?\[([^\[\]]*)\]\([^()\s]*\)")


def _as_shown(line: str) -> str:
    """Links as a reader sees them: a wikilink's alias (else its target), a markdown link's text."""
    return _LINK_TEXT.sub(lambda m: (m.group(2) or m.group(1) or m.group(3) or "").rstrip("\\"), line)


_MARKUP = str.maketrans("", "", "*`>[]")
# An underscore that opens or closes emphasis (_word_, __bold__), not one inside a word
# (snake_case stays as written).
_EMPHASIS_UNDERSCORE = re.compile(r"(?<![^\W_])_+|_+(?![^\W_])")
_DATED_PATH = re.compile(r"(?:^|/)\d{4}/\d{2}/\d{2}/[^/]+$")


def hand_named(path: str) -> bool:
    """A file a person named (outside the tool's dated ``YYYY/MM/DD/`` layout, whose
    file names are slugs of the first words, not names)."""
    return bool(path) and not _DATED_PATH.search(path)


def note_name(path: str) -> str:
    """A note's name as Obsidian shows it: its file name without ``.md``."""
    stem = path.rsplit("/", 1)[-1]
    return stem.removesuffix(".md")


def derive_title(body: str, path: str) -> str:
    """A first-line heading; else, for a hand-named file (outside the tool's dated
    ``YYYY/MM/DD/`` layout), its file name, which is what Obsidian calls the note; else
    the first words; else the file name."""
    named = hand_named(path)
    rest = body
    while rest:  # line by line from the top: a long body is never split whole
        line, _, rest = rest.partition("\n")
        line = line.splitlines()[0].strip() if line.strip() else ""  # \r, \u2028… end a line too
        if "[" in line:
            line = _as_shown(line)
        if not line:
            continue
        heading = _HEADING.fullmatch(line)
        if heading:
            return heading.group(1).strip()
        if named:
            return note_name(path)
        words = _first_words(line)
        if words:  # a line of markup only (***, > ) is not a title
            return shorten(words, 80)
    return note_name(path)


_SPACE_AFTER = re.compile(r"\s")
_ENOUGH = 200  # characters of a line read for its first words before the rest is looked at


def _first_words(line: str) -> str:
    """A line's words without markup, as a title shows them, read only as far as the title
    needs. A line cut at a space reads the same up to the cut (markup goes character by
    character, an emphasis underscore never spans a space), so a long paragraph's first
    200-odd characters give its first 80 characters of words as the whole line would."""
    cut = _SPACE_AFTER.search(line, _ENOUGH) if len(line) > _ENOUGH else None
    if cut is not None:
        words = _words(line[:cut.start()])
        if len(words) > 80:
            return words
    return _words(line)


def _words(text: str) -> str:
    text = text.translate(_MARKUP)
    return " ".join((_EMPHASIS_UNDERSCORE.sub("", text) if "_" in text else text).split())


def shorten(text: str, limit: int) -> str:
    """``text`` cut to its first ``limit`` characters at a word, with "…" after (so
    ``limit + 1`` in all), as a title taken from the first words is cut."""
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return (cut or text[:limit]).rstrip(",;:") + "…"
