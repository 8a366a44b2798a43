"""One markdown file <-> one ``Note``: parse, patch front matter, render new files.

Everything here is pure (text in, text or data out) so that the format rules can be
tested as tables. Reading tolerates whatever a human wrote; writing an existing file
only ever touches the front-matter lines of the keys that change.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import posixpath
import re
import urllib.parse
import unicodedata
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any

import frontmatter
import yaml

from . import limits  # attributes read at call time: limits imports this module too

RESERVED_KEYS = ("id", "namespace", "tags", "aliases", "title", "created", "updated", "expires", "source")
# Key order of files the tool creates: fixed so that git diffs show only real changes.
NEW_FILE_ORDER = ("id", "namespace", "title", "tags", "created", "updated", "expires", "source")
BODY_LINK_RELATION = "links_to"
# A relation property's name (SPEC §5): one word, as link_memories takes it.
RELATION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")

_BOM = "\ufeff"
_FENCE_OPEN = re.compile(r"---[ \t]*\r?\n")
_FENCE_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.MULTILINE)
_WIKILINK = re.compile(r"!?\[\[([^\[\]|#^\n]*)(?:[#^][^\[\]|\n]*)?(?:\|[^\[\]\n]*)?\]\]")
_INLINE_TAG = re.compile(r"(?:(?<=\s)|^)#([^\s#!\"$%&'()*+,.:;<=>?@\[\]^`{|}~\\]+)", re.MULTILINE)
# A markdown link to a note: [text](Note%20name.md), [text](<Note name.md>), with an
# optional #heading and "title". Images (![..](..)) and URLs with a scheme are not notes.
_MDLINK = re.compile(r"(?<!!)\[[^\[\]\n]*\]\((<[^<>\n]+>|[^()\s<>]+)(?:\s+\"[^\"\n]*\")?\)")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:|//")
# Any markdown link or image, for the moved note's own relative links to what is not a note.
_ANYLINK = re.compile(r"\[[^\[\]\n]*\]\((<[^<>\n]+>|[^()\s<>]+)(?:\s+\"[^\"\n]*\")?\)")
_URL_PARTS = re.compile(r"([^?#]*)(.*)", re.DOTALL)
_URL_SAFE = "/!$&'*+,;=:@~"
_CODE = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)|`[^`\n]*`", re.DOTALL)
_CONFLICT_START = re.compile(r"^<{7}(?: |$)", re.MULTILINE)
_CONFLICT_END = re.compile(r"^>{7}(?: |$)", re.MULTILINE)
_HEADING = re.compile(r"#{1,6}[ \t]+(.+?)[ \t#]*$")
_PLAIN_SCALAR = re.compile(r"[A-Za-z0-9_\u00c0-\uffff][A-Za-z0-9_ .\-/@+\u00c0-\uffff]*")
_YAML_SPECIAL = re.compile(
    r"(?i:y|n|yes|no|on|off|true|false|null|~)|[-+]?(\d[\d_]*)?\.?\d*(e[-+]?\d+)?|\d{4}-\d\d-\d\d.*"
)
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
# What YAML reads as a line break or refuses to read: always written as a \u escape.
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")
_RESOLVER = yaml.resolver.Resolver()


_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when PyYAML has it


class _KeepKeysLoader(_BaseLoader):  # type: ignore[valid-type,misc]
    """Safe YAML loader that keeps mapping keys as written.

    Plain YAML 1.1 turns the key ``on:`` into ``True`` and ``2024:`` into an int, which
    makes python-frontmatter raise ``TypeError``; a human's key is a name, so keep it.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = key_node.value
            else:
                key = json.dumps(_jsonable(self.construct_object(key_node, deep=True)))
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


    def get_single_data(self) -> Any:
        # Composed nodes share what an alias names; built into Python objects they still
        # do, but everything downstream (``_jsonable``, JSON in the index) copies them. So
        # the expansion is measured on the nodes, before anything is built.
        node = self.get_single_node()
        if node is None:
            return None
        _check_alias_expansion(node)
        return self.construct_document(node)


_KeepKeysLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _KeepKeysLoader.construct_mapping
)


class AliasBudgetExceeded(yaml.YAMLError):
    """The front matter's aliases expand beyond ``limits.MAX_YAML_ALIAS_EXPANSION``."""


def _node_weight(node: yaml.Node) -> int:
    return 1 + len(node.value) if isinstance(node, yaml.ScalarNode) else 1


def _node_children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_alias_expansion(root: yaml.Node) -> None:
    """Raise ``AliasBudgetExceeded`` if expanding every alias would add more than the
    budget (nodes plus scalar characters) to what is written, or never end (an alias
    inside the node it names). Linear in the composed nodes: each shared node's
    expanded size is computed once; no recursion, so deep nesting cannot overflow."""
    budget = limits.MAX_YAML_ALIAS_EXPANSION
    expanded: dict[int, int] = {}  # id(node) -> weight of the node with its aliases expanded
    written = 0
    open_nodes: set[int] = set()  # the nodes whose subtree is being walked (the current path)
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            expanded[key] = _node_weight(node) + sum(expanded[id(c)] for c in _node_children(node))
            continue
        if key in expanded:
            continue
        if key in open_nodes:
            raise AliasBudgetExceeded("a YAML alias (*name) refers to a node that contains it, so it never ends")
        open_nodes.add(key)
        written += _node_weight(node)
        stack.append((node, True))
        stack.extend((c, False) for c in _node_children(node) if id(c) not in expanded)
    added = expanded[id(root)] - written
    if added > budget:
        raise AliasBudgetExceeded(
            f"its YAML aliases (*name) would expand it by {added:,} nodes and characters, over the limit of {budget:,}"
        )


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
    """An id in the tool's own format (``store.new_id``: 16 Crockford base-32 characters,
    the first ten a plausible time).

    Only such memories expire: Obsidian and Zettelkasten templates write ``id:`` too,
    and a person's note is never hidden or moved because of a property."""
    return bool(_TOOL_ID.fullmatch(value))


def content_hash(body: str) -> str:
    """Hash of the normalised content: what "an exact duplicate" means for dedup."""
    return hashlib.sha256(normalise_content(body).encode("utf-8")).hexdigest()


def normalise_content(body: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", body).casefold().split())


def file_version(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- reading


@dataclass
class _Split:
    bom: str
    fm_text: str | None  # None: the file has no front matter block
    fm_start: int  # offsets into the text after the BOM
    fm_end: int
    body_start: int
    newline: str


def _split(text: str) -> _Split:
    bom = _BOM if text.startswith(_BOM) else ""
    rest = text[len(bom) :]
    newline = "\r\n" if "\r\n" in rest[: rest.find("\n") + 1 or len(rest)] else "\n"
    opened = _FENCE_OPEN.match(rest)
    if opened:
        closing = _FENCE_CLOSE.search(rest, opened.end())
        if closing:
            return _Split(bom, rest[opened.end() : closing.start()], opened.end(), closing.start(), closing.end(), newline)
    return _Split(bom, None, 0, 0, 0, newline)


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
    parts = _split(text)
    rest = text[len(parts.bom) :]
    conflict = "<<<<<<<" in rest and bool(_CONFLICT_START.search(rest) and _CONFLICT_END.search(rest))
    fm_text, body_start = parts.fm_text, parts.body_start
    if conflict:  # the identity is the first side's, wherever the markers are (SPEC §2)
        fm_text, body_start = _first_side_front_matter(rest) or (fm_text, body_start)
    meta: dict[str, Any] = {}
    if fm_text is None:
        body = rest
        if (rest.startswith("---") and _FENCE_OPEN.match(rest)) or (rest.strip() and "---".startswith(rest.strip())):
            # An opening fence without its close ("-", "--", "---" alone: the first bytes
            # of one): half a save, or a fence the person forgot.
            problems.append("front matter is not closed by a '---' line")
            unreadable = half_written = True
        elif not rest.strip():
            unreadable = half_written = True  # nothing to read: perhaps an editor between truncate and write
    else:
        body = rest[body_start:]
        meta, broken = _load_yaml(fm_text, problems)
        unreadable = unreadable or broken
    note = _note_from(path, meta, body, problems)
    # A git add/add conflict starts its markers inside or before the front matter, not the body.
    note.conflict = conflict
    note.unreadable = unreadable
    note.half_written = half_written
    return note


_MARKER = {mark: re.compile(re.escape(mark * 7) + r"(?:[ \t]|\r?\n|$)") for mark in "<|=>"}


def _first_side_front_matter(text: str) -> tuple[str, int] | None:
    """The front matter of a conflicted file as its first side writes it, and the offset
    in ``text`` where the body starts; None when that side has no front matter.

    The first side of each conflict is kept (the lines after ``<<<<<<<``), the common
    ancestor (diff3's ``|||||||``) and the other side (after ``=======``) are dropped.
    That side is "ours" in a merge and the upstream one in a rebase; both normally carry
    the same id. The body is everything after that front matter as written, markers and
    both sides included, so what either side says is still found."""
    lines = text.split("\n")
    lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    kept: list[int] = []  # indices of the lines the first side reads
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
    first = "".join(lines[i] for i in kept)
    parts = _split(first)
    if parts.fm_text is None:
        return None
    offset = consumed = 0
    while consumed < len(kept) and offset < parts.body_start:
        offset += len(lines[kept[consumed]])
        consumed += 1
    last_fm_line = kept[consumed - 1]
    return parts.fm_text, sum(len(line) for line in lines[: last_fm_line + 1])


_FAST_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*): (.*?)[ \t]*\r?")
_FAST_WORD = r"[A-Za-z0-9][A-Za-z0-9_\-/.]*"
# A quoted comma is left to YAML (items are split on ", "), and so are control and
# line-break characters, which YAML refuses or folds.
_FAST_ITEM = rf"{_FAST_WORD}|\"[^\"\\\\,\x00-\x1f\x7f-\x9f\u2028\u2029\ufffe\uffff]*\""
_FAST_LIST = re.compile(rf"\[((?:{_FAST_ITEM})(?:, (?:{_FAST_ITEM}))*)?\]")
_FAST_SCALAR = re.compile(rf"{_FAST_WORD}(?: {_FAST_WORD})*")

def _fast_value(raw: str) -> tuple[bool, Any]:
    if _TIMESTAMP.fullmatch(raw):
        return True, raw
    if _FAST_SCALAR.fullmatch(raw):
        return _reads_as_text(raw), raw
    if _FAST_LIST.fullmatch(raw):
        items = [] if raw == "[]" else raw[1:-1].split(", ")
        if not all(i.startswith('"') or _reads_as_text(i) for i in items):
            return False, None
        return True, [i[1:-1] if i.startswith('"') else i for i in items]
    return False, None


def _fast_yaml(fm_text: str) -> dict[str, Any] | None:
    """The simple front matter the tool writes, without a YAML parser (6x faster on a
    full reindex). Returns None for anything it is not certain YAML reads the same way;
    tests check it agrees with YAML on every case it accepts. One deliberate difference:
    an impossible timestamp (2026-02-30T09:00:00Z) stays a string, so only that key is
    reported as a problem instead of the whole front matter being lost."""
    out: dict[str, Any] = {}
    for line in fm_text.split("\n"):
        if not line:
            continue
        match = _FAST_LINE.fullmatch(line)
        if match is None or match.group(1) in out:
            return None
        ok, value = _fast_value(match.group(2))
        if not ok:
            return None
        out[match.group(1)] = value
    return out


def _load_yaml(fm_text: str, problems: list[str]) -> tuple[dict[str, Any], bool]:
    """The front matter as plain data, and whether it could not be read as written."""
    if not fm_text.strip():
        return {}, False
    fast = _fast_yaml(fm_text)
    if fast is not None:
        return fast, False
    try:
        loaded = frontmatter.YAMLHandler().load(fm_text, Loader=_KeepKeysLoader)
        if isinstance(loaded, dict):
            return {k: _jsonable(v) for k, v in loaded.items()}, False
    except AliasBudgetExceeded as exc:
        problems.append(f"front matter refused: {exc}; write the values out instead of &anchors and *aliases")
        return {}, True
    except (yaml.YAMLError, ValueError, OverflowError, RecursionError) as exc:
        # ValueError: a value YAML recognises but cannot build (``when: 2026-02-30``);
        # RecursionError: nesting deeper than Python's stack.
        first = str(exc).strip().splitlines() or [type(exc).__name__]
        problems.append("broken YAML front matter: " + " ".join(line.strip() for line in first[:3]))
        return {}, True
    if loaded is not None or any(line.strip() and not line.lstrip().startswith("#") for line in fm_text.splitlines()):
        kind = "null" if loaded is None else f"a {type(loaded).__name__}"  # ``~`` or ``null``: keys added after it break it
        problems.append(f"front matter must be a mapping of keys, not {kind}")
        return {}, True
    return {}, False  # comments only


def _jsonable(value: Any) -> Any:
    """YAML gives datetimes, dates and sets; the index and JSON output want plain data."""
    if isinstance(value, dt.datetime):
        try:
            return to_utc(value) if value.tzinfo else value.isoformat()
        except ValueError:  # no UTC form (year 1 east of Greenwich): kept as written, flagged on read
            return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def _note_from(path: str, meta: dict[str, Any], body: str, problems: list[str]) -> Note:
    raw_id = meta.get("id")
    own_id = isinstance(raw_id, (str, int)) and str(raw_id).strip() != ""
    # SPEC §3: only the tool's own memories expire; a person's `expires:` property (a
    # passport's date) is just a property, never a reason to hide or move the note.
    ttl_applies = own_id and is_tool_id(str(raw_id).strip())
    namespace = meta.get("namespace")
    namespace = str(namespace).strip() if isinstance(namespace, (str, int)) and str(namespace).strip() else "default"
    tags = _merge_unique(as_tag_list(meta.get("tags")), inline_tags(body))
    timestamps: dict[str, str | None] = {}
    for key, value in (("created", meta.get("created")), ("updated", meta.get("updated")), ("expires", meta.get("expires") if ttl_applies else None)):
        timestamps[key] = None
        if value not in (None, ""):
            try:
                timestamps[key] = to_utc(value)
            except (ValueError, OverflowError):
                problems.append(f"{key}: {meta[key]!r} is not a date or timestamp")
    title = meta.get("title")
    links = [(key, target) for key, value in meta.items() if key not in RESERVED_KEYS for target in _links_in(value)]
    if "[[" in body:
        links += [(BODY_LINK_RELATION, target) for target in wikilinks(_without_code(body))]
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


def _merge_unique(*lists: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for items in lists:
        for item in items:
            seen.setdefault(item, None)
    return list(seen)


def normalise_tag(tag: str) -> str:
    """Tags are case-insensitive and carry no '#' or whitespace (as in Obsidian)."""
    return "-".join(str(tag).strip().lstrip("#").casefold().split())


def split_tags(value: Any) -> list[str]:
    """Tags however they come, as the pieces written: a list (each item split on commas:
    ``['customer, deploy']`` is two), one comma-separated string, or a list written into
    a string as models send it (``'["a", "b"]'``, ``'[a, b]'``, ``"'a', 'b'"``). Pieces
    are stripped of whitespace, and of quotes when they come from a string; nothing is
    normalised or refused here (``as_tag_list`` reads a file's tags, ``limits.check_tags``
    checks a caller's)."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except (ValueError, RecursionError):  # "[[[[…": not a list of tags
                parsed = None
            if isinstance(parsed, list):
                return split_tags(parsed)
            text = text.strip("[]")
        pieces = [piece.strip().strip("\"'").strip() for piece in text.split(",")]
    else:
        items = value if isinstance(value, (list, tuple, set, frozenset)) else [value]
        pieces = [piece.strip() for item in items if item is not None for piece in str(item).split(",")]
    return [piece for piece in pieces if piece]


def as_tag_list(value: Any) -> list[str]:
    """A file's tags as Obsidian reads them: a YAML list, or one string of tags split on
    commas and spaces; normalised (``Two Words`` in a list is ``two-words``)."""
    pieces = split_tags(value)
    if isinstance(value, str):
        pieces = [word for piece in pieces for word in piece.split()]
    return _merge_unique([t for t in map(normalise_tag, pieces) if t])


def _as_str_list(value: Any) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list) else str(value).split(",")
    return [str(i).strip() for i in items if i is not None and str(i).strip()]


def inline_tags(body: str) -> list[str]:
    """``#tags`` in the body count as tags (not in code, not all digits, not headings)."""
    if "#" not in body:
        return []
    found = (normalise_tag(m.group(1).rstrip("/-")) for m in _INLINE_TAG.finditer(_without_code(body)))
    return _merge_unique([t for t in found if t and not t.replace("/", "").isdigit()])


def _without_code(body: str) -> str:
    """The body with code spans and fenced blocks removed (their ``#`` and ``[[`` are code)."""
    return _CODE.sub("", body) if "`" in body or "~~~" in body else body


def wikilinks(text: str) -> list[str]:
    """Targets of ``[[target|alias]]`` / ``[[target#heading]]`` links, as written.

    Inside a markdown table Obsidian escapes the alias pipe: ``[[target\\|alias]]``."""
    targets = (m.group(1).rstrip("\\").strip() for m in _WIKILINK.finditer(text))
    return _merge_unique([t for t in targets if t])


def retarget_links(text: str, new_target: Callable[[str], str | None]) -> tuple[str, int]:
    """``text`` with the target of each wikilink that ``new_target`` maps to a new one
    rewritten in place, and how many were. Span edits: ``!`` embeds, ``#heading``,
    ``^block``, ``|alias`` (and a table's ``\\|``) and every other byte stay as written;
    links in the body's code are code, left alone. ``new_target`` gets the target as
    written (stripped) and returns its new text, or None to leave the link."""
    parts = _split(text)
    start = len(parts.bom)
    regions = [(start + parts.fm_start, start + parts.fm_end, False)] if parts.fm_text is not None else []
    regions.append((start + parts.body_start, len(text), True))
    edits: list[tuple[int, int, str]] = []
    for begin, end, is_body in regions:
        segment = text[begin:end]
        code = [m.span() for m in _CODE.finditer(segment)] if is_body and ("`" in segment or "~~~" in segment) else []
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
    found = (markdown_link_target(m.group(1), source_path) for m in _MDLINK.finditer(_without_code(body)))
    return _merge_unique([t for t in found if t])


def retarget_markdown_links(text: str, source_path: str, new_path: Callable[[str], str | None],
                            moved_to: str | None = None) -> tuple[str, int]:
    """``text`` with each markdown link in its body whose note ``new_path`` maps to a new
    vault path pointing there, written the way it was: relative to the linking note
    when it was (``Note.md``, ``../x/Note.md``), from the vault's top when it was
    (``folder/Note.md``, ``/folder/Note.md``), inside ``<...>`` or percent-escaped as
    it was, its ``#heading`` kept. ``moved_to``: the linking note itself moves there,
    so its ``./`` and ``../`` links are rewritten from its new folder (to the same
    notes). Only the URLs' bytes change; links in code stay."""
    parts = _split(text)
    begin = len(parts.bom) + parts.body_start
    segment = text[begin:]
    code = [m.span() for m in _CODE.finditer(segment)] if ("`" in segment or "~~~" in segment) else []
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


def _links_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return wikilinks(value)
    if isinstance(value, list):
        return _merge_unique(*[wikilinks(v) for v in value if isinstance(v, str)])
    return []


_LINK_TEXT = re.compile(r"!?\[\[([^\[\]|]*)(?:\|([^\[\]]*))?\]\]|!?\[([^\[\]]*)\]\([^()\s]*\)")


def _as_shown(line: str) -> str:
    """Links as a reader sees them: a wikilink's alias (else its target), a markdown link's text."""
    return _LINK_TEXT.sub(lambda m: (m.group(2) or m.group(1) or m.group(3) or "").rstrip("\\"), line)


_MARKUP = str.maketrans("", "", "*_`>[]")


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
        words = " ".join(line.translate(_MARKUP).split())
        if words:  # a line of markup only (***, > ) is not a title
            return _shorten(words, 80)
    return note_name(path)


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return (cut or text[:limit]).rstrip(",;:") + "…"


def to_utc(value: Any) -> str:
    """Canonical UTC (``2026-07-20T09:00:00Z``) from a datetime, date or ISO string."""
    if isinstance(value, str) and _TIMESTAMP.fullmatch(value):
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


# --------------------------------------------------------------------------- writing


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
    if _TIMESTAMP.fullmatch(text):
        return text
    if (_PLAIN_SCALAR.fullmatch(text) and not _YAML_SPECIAL.fullmatch(text) and not text.endswith(" ")
            and ": " not in text and " #" not in text and not _YAML_UNSAFE.search(text) and _reads_as_text(text)):
        return text
    return _quoted(text)


@functools.lru_cache(maxsize=4096)  # namespaces and tags repeat across a whole vault
def _reads_as_text(text: str) -> bool:
    """Whether YAML reads ``text`` unquoted as a string (not ``0x1F`` -> 31, ``0b101`` -> 5)."""
    return _RESOLVER.resolve(yaml.ScalarNode, text, (True, False)) == "tag:yaml.org,2002:str"


def _quoted(value: Any) -> str:
    """JSON text is a YAML double-quoted scalar once line-break-like characters are escaped."""
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False))


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


def _key_line(key: str) -> re.Pattern[str]:
    escaped = re.escape(key)
    return re.compile(rf"^(?:{escaped}|\"{escaped}\"|'{escaped}')[ \t]*:(?:[ \t]|\r?\n|$)")


def patch(text: str, changes: dict[str, Any], body: str | None = None) -> str:
    """Rewrite only the front-matter keys in ``changes`` (``None`` removes a key).

    Every other byte stays: unknown keys and their order, comments, list style of
    untouched keys, line endings, a BOM, and the body unless a new one is given.
    """
    parts = _split(text)
    nl = parts.newline
    rest = text[len(parts.bom) :]
    if parts.fm_text is None:
        fm_lines: list[str] = []
        old_body = rest
        head, tail = "---" + nl, "---" + nl
    else:
        fm_lines = parts.fm_text.splitlines(keepends=True)
        old_body = rest[parts.body_start :]
        head, tail = rest[: parts.fm_start], rest[parts.fm_end : parts.body_start]
        if not tail.endswith("\n"):
            tail += nl
    for key, value in changes.items():
        fm_lines = _patch_key(fm_lines, key, value, nl)
    new_body = old_body
    if body is not None:
        new_body = body.replace("\r\n", "\n").strip("\n") + "\n"
        if nl != "\n":
            new_body = new_body.replace("\n", nl)
    return parts.bom + head + "".join(fm_lines) + tail + new_body


def edit_body(text: str, *, append: str | None = None, old: str | None = None, new: str = "") -> str:
    """Append to the body, or replace the one occurrence of ``old`` in it, leaving every
    other byte of the file as it is (front matter, line endings, the rest of the body).

    Edits that need no version: they cannot clobber a line someone else just wrote.
    Raises ``ValueError`` (with the reason) when ``old`` is missing or not unique."""
    parts = _split(text)
    nl = parts.newline
    cut = len(parts.bom) + parts.body_start
    head, body = text[:cut], text[cut:]
    if append is not None:
        addition = append.replace("\r\n", "\n").strip("\n").replace("\n", nl)
        kept = body.rstrip("\r\n")
        return head + (kept + nl if kept else "") + addition + nl
    assert old is not None
    wanted, replacement = old.replace("\r\n", "\n").replace("\n", nl), new.replace("\r\n", "\n").replace("\n", nl)
    count = body.count(wanted)
    if count != 1:
        where = "does not occur" if count == 0 else f"occurs {count} times"
        raise ValueError(f"the text to replace {where} in the content; it must occur exactly once")
    return head + body.replace(wanted, replacement, 1)


def _continues_value(line: str) -> bool:
    return bool(line.strip()) and (line[0] in " \t" or line.startswith("- ") or line.rstrip() == "-")


def _is_gap(line: str) -> bool:
    return not line.strip() or line.startswith("#")


def _block_item(line: str) -> Any:
    """The value of one ``- item`` line as YAML reads it (None if it is not that simple)."""
    try:
        return _jsonable(yaml.load(line.strip()[1:].strip() or "null", Loader=_KeepKeysLoader))
    except yaml.YAMLError:
        return None


def _patch_block_list(body: list[str], value: list[Any], nl: str) -> list[str]:
    """A block list's lines for the new ``value``: the lines of items that stay are kept
    as written (their quoting and comments, and the lines between two of them), the
    lines of items that go are dropped, new items are appended in the list's indent."""
    items = [ln for ln in body if ln.lstrip().startswith("- ")]
    indent = items[0][: len(items[0]) - len(items[0].lstrip())]
    fresh = [f"{indent}- {yaml_scalar(v)}{nl}" for v in value]
    if any(not ln.lstrip().startswith("- ") and not _is_gap(ln.lstrip()) for ln in body):
        return fresh  # an item written over several lines: its lines cannot be kept one by one
    wanted = list(value)
    kept: list[str] = []
    between: list[str] = []  # comments and blank lines: kept where they sit between items that stay
    for line in body:
        if not line.lstrip().startswith("- "):
            between.append(line)
            continue
        item = _block_item(line)
        if item in wanted:
            wanted.remove(item)
            kept += [*between, line]
        between = []
    patched = kept + [f"{indent}- {yaml_scalar(v)}{nl}" for v in wanted]
    if [_block_item(ln) for ln in patched if ln.lstrip().startswith("- ")] != list(value):
        return fresh  # kept lines would not read back as the new list (another order)
    return patched


def key_span(lines: list[str], key: str) -> tuple[int, int, int] | None:
    """Where ``key`` is written in the front matter's ``lines``: the index of its line,
    the end of its value (block items and continuation lines included) and how many
    times the key is written. A key written twice: YAML reads the last one, so that is
    the one given. None when the key is not there."""
    pattern = _key_line(key)
    found = [i for i, line in enumerate(lines) if pattern.match(line)]
    if not found:
        return None
    start = found[-1]
    end = start + 1
    while end < len(lines) and (_continues_value(lines[end]) or _is_gap(lines[end])):
        end += 1  # a block list may hold blank and comment lines between its items
    while end > start + 1 and _is_gap(lines[end - 1]):
        end -= 1  # ...but those after its last item belong to what follows
    return start, end, len(found)


def front_matter_span(text: str) -> tuple[int, int, int] | None:
    """Offsets in ``text`` (a BOM included) of the front matter's first line, the end of
    its last line (the closing fence starts there) and the body's start; None when the
    file has no closed front matter."""
    parts = _split(text)
    if parts.fm_text is None:
        return None
    at = len(parts.bom)
    return at + parts.fm_start, at + parts.fm_end, at + parts.body_start


def _patch_key(lines: list[str], key: str, value: Any, nl: str) -> list[str]:
    span = key_span(lines, key)
    # A key written twice: the last copy is the one changed; removing a key removes
    # every copy, or the earlier one would come back.
    if span is None:
        if value is None:
            return lines
        if lines and not lines[-1].endswith("\n"):
            lines = lines[:-1] + [lines[-1] + nl]
        return lines + [f"{key}: {yaml_scalar(value)}{nl}"]
    start, end, copies = span
    if value is None:
        rest = lines[:start] + lines[end:]
        return _patch_key(rest, key, None, nl) if copies > 1 else rest
    block_items = [ln for ln in lines[start + 1 : end] if ln.lstrip().startswith("- ")]
    written_key = lines[start].split(":", 1)[0]
    if isinstance(value, list) and value and block_items and lines[start].split(":", 1)[1].strip() == "":
        new = [lines[start], *_patch_block_list(lines[start + 1 : end], value, nl)]
    else:
        new = [f"{written_key}: {yaml_scalar(value)}{nl}"]
    return lines[:start] + new + lines[end:]
