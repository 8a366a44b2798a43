"""Merging two versions of a memory file as git's merge driver (``agent-memory
merge-file %O %A %B %L %P``), key by key instead of line by line.

The result starts from our side's bytes and patches in their side's changes through
``note.patch`` (only the keys that change are rewritten): list keys (``tags``,
``aliases``, relation properties) by a 3-way set merge that honours removals on either
side, ``updated`` the later, ``created`` the earlier, any other key changed differently
on both sides a conflict; the body by git's own 3-way text merge (``git merge-file``),
where additions at the end on both sides keep both (SPEC §3: appends merge). A conflict
is written as standard markers, around the key's lines in the front matter or the
body's lines, so neither side is lost and ``doctor`` flags the file; the front matter's
first side (ours) keeps the memory's identity.

Anything this cannot read key by key (no front matter, broken YAML, conflict markers
already there, not UTF-8), and a front-matter comment one side added that a merge of
values would drop, goes to ``git merge-file`` whole. When both sides added the
file (no ancestor) with different ids: the same content in the same namespace is one
memory written twice, kept once (the SPEC's id owner, tags merged, a key only the other
copy has kept as written); anything else is two memories, kept both, the whole files
between markers.

All of it works on bytes in memory; only ``merge_text`` runs a program (``git
merge-file``, on temp files outside the repository) and only ``run_driver`` touches
the driver's files.
"""

from __future__ import annotations

import json
from collections import Counter
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..disk.durable import replace_file
from ..errors import GitError
from ..note import parse
from ..note.links import wikilinks
from ..note.parse import Note, RESERVED_KEYS
from ..note.patch import key_span, patch
from ..note.render import to_utc
from ..note.split import front_matter_span
from ..note.tags import normalise_tag, split_tags
from .run import first_line, run

_MISSING: Any = object()
MERGE_TIMEOUT = 60.0  # seconds for one git merge-file
LIST_KEYS = ("tags", "aliases")
# Keys the tool writes besides SPEC §2's: one memory written twice keeps its owner's.
_TOOL_KEYS = ("type", "importance", "imported_hash")


class MergeFailed(Exception):
    """git merge-file could not merge the texts (binary data, git missing, a timeout)."""


@dataclass
class MergeResult:
    data: bytes
    conflicts: list[str] = field(default_factory=list)  # what needs a person, e.g. "front matter: status"
    how: str = "key by key"

    @property
    def clean(self) -> bool:
        return not self.conflicts


@dataclass
class _Side:
    text: str
    note: Note
    fm_lines: list[str]  # the front matter's lines, ends kept ([] when there is none)
    body: str
    has_front_matter: bool

    @property
    def meta(self) -> dict[str, Any]:
        return self.note.meta


def merge(base: bytes | None, ours: bytes, theirs: bytes, *, path: str = "", marker_size: int = 7) -> MergeResult:
    """The merge of ``ours`` and ``theirs`` since ``base`` (None or empty: both sides
    added the file). Raises ``MergeFailed`` only when git's text merge itself fails."""
    base = base or None
    if ours == theirs or (base is not None and base == theirs):
        return MergeResult(ours, how="unchanged")
    if base is not None and base == ours:
        return MergeResult(theirs, how="theirs")
    o, t = _read(ours, path), _read(theirs, path)
    b = _read(base, path) if base is not None else None
    if o is None or t is None or not (o.has_front_matter and t.has_front_matter) or (base is not None and b is None):
        return merge_whole(base, ours, theirs, marker_size=marker_size)
    if b is None and o.note.id != t.note.id:
        if o.note.namespace == t.note.namespace and o.note.content_hash == t.note.content_hash:
            return _one_memory_written_twice(o, t)
        return both_kept(ours, theirs, marker_size=marker_size)
    result = _merge_keys(b, o, t, marker_size)
    check = parse.parse(result.data, path)
    if check.unreadable or (result.clean and check.conflict):
        return merge_whole(base, ours, theirs, marker_size=marker_size)  # never hand back what cannot be read
    if _drops_a_comment(b or _empty_side(), (o, t), result, check):
        return merge_whole(base, ours, theirs, marker_size=marker_size)  # a line merge keeps what a person wrote
    return result


def _read(data: bytes, path: str) -> _Side | None:
    """One side, or None when it cannot be merged key by key."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    note = parse.parse(data, path)
    if note.conflict or (note.unreadable and text.strip()):
        return None
    span = front_matter_span(text)
    if span is None:
        return _Side(text, note, [], text, False)
    start, end, body_start = span
    return _Side(text, note, text[start:end].splitlines(keepends=True), text[body_start:], True)


def _comments(lines: list[str], skipped: set[str] | None = None) -> Counter[str]:
    """The comments in front-matter lines (a whole ``#`` line, or what follows `` #`` on
    a value line), leaving out the lines of the keys ``skipped``."""
    left_out: set[int] = set()
    for key in skipped or ():
        span = key_span(lines, key)
        if span is not None:
            left_out.update(range(span[0], span[1]))
    found: Counter[str] = Counter()
    for n, line in enumerate(lines):
        text = line.rstrip("\r\n")
        at = 0 if text.lstrip().startswith("#") else text.find(" #")
        if n not in left_out and at >= 0:
            found[text[at:].strip()] += 1
    return found


def _drops_a_comment(base: _Side, sides: tuple[_Side, ...], result: MergeResult, merged: Note) -> bool:
    """Whether the key-by-key merge would lose a comment one side added to the front
    matter: it carries values, and a comment is none (a person's ``# ask Priya first``
    on a line whose value the other side changed, or a comment line of its own). Only
    the lines of a key a side changed and whose value did not get into the merge may go."""
    text = result.data.decode("utf-8")
    span = front_matter_span(text)
    kept = _comments(text[span[0]:span[1]].splitlines(keepends=True) if span else text.splitlines())
    had = _comments(base.fm_lines)
    for side in sides:
        lost = {key for key in side.meta if isinstance(key, str)
                and ((side.meta[key] != base.meta.get(key, _MISSING) and side.meta[key] != merged.meta.get(key, _MISSING))
                     or f"front matter: {key}" in result.conflicts)}
        if _comments(side.fm_lines, lost) - had - kept:
            return True
    return False


def _empty_side() -> _Side:
    return _Side("", parse.parse(b"", ""), [], "", False)


# --------------------------------------------------------------------------- keys


def _merge_keys(b: _Side | None, o: _Side, t: _Side, marker_size: int) -> MergeResult:
    base = b or _empty_side()
    changes: dict[str, Any] = {}  # key -> new value for note.patch (None removes)
    taken: list[str] = []  # keys whose lines come from their side as written
    conflicted: list[str] = []
    for key in dict.fromkeys([*o.meta, *t.meta, *base.meta]):
        bv, ov, tv = (side.meta.get(key, _MISSING) for side in (base, o, t))
        if ov == tv or tv == bv:
            continue
        if ov == bv:
            if tv is _MISSING:
                changes[key] = None
            else:
                taken.append(key)
            continue
        if key in ("created", "updated"):
            pick = _pick_time(ov, tv, later=key == "updated")
            if pick == "theirs":
                taken.append(key)
            elif pick is None:
                conflicted.append(key)
        elif is_list_key(key, bv, ov, tv):
            items = merge_list(key, bv, ov, tv)
            if [_ident(key, i) for i in items] != [_ident(key, i) for i in _items(key, ov)]:
                changes[key] = items
        else:
            conflicted.append(key)
    text = patch(o.text, changes) if changes else o.text
    start, end, body_start = front_matter_span(text) or (0, 0, 0)
    nl = "\r\n" if o.fm_lines and o.fm_lines[0].endswith("\r\n") else "\n"
    lines = text[start:end].splitlines(keepends=True)
    for key in taken:
        lines = _put_lines(lines, key, _lines_of(t, key, nl), nl)
    for key in conflicted:
        lines = _conflict_lines(lines, key, _lines_of(t, key, nl), nl, marker_size)
    body, body_conflicts = merge_body(base.body, o.body, t.body, marker_size=marker_size)
    merged = text[:start] + "".join(lines) + text[end:body_start] + body
    conflicts = [f"front matter: {key}" for key in conflicted]
    if body_conflicts:
        conflicts.append(f"body: {body_conflicts} conflict{'s' if body_conflicts > 1 else ''}")
    return MergeResult(merged.encode("utf-8"), conflicts)


def _pick_time(ours: Any, theirs: Any, *, later: bool) -> str | None:
    """``ours``/``theirs``: the later (or earlier) instant; None if one is not a time."""
    try:
        a, b = to_utc(ours), to_utc(theirs)
    except (ValueError, OverflowError, TypeError):
        return None
    if a == b:
        return "ours"
    return "theirs" if (b > a) == later else "ours"


def is_list_key(key: str, *values: Any) -> bool:
    """A key merged as a set: tags, aliases, and any property holding a list or wikilinks
    (a relation, SPEC §5) on some side."""
    present = [v for v in values if v is not _MISSING and v is not None]
    if any(not isinstance(v, (list, str)) for v in present):
        return False  # a number, a mapping: a value, not a set
    if key in LIST_KEYS or any(isinstance(v, list) for v in present):
        return True
    return key not in RESERVED_KEYS and any(wikilinks(v) for v in present)


def merge_list(key: str, base: Any, ours: Any, theirs: Any) -> list[Any]:
    """Our items without the ones their side removed, then the ones their side added.
    What our side removed stays removed (it is not in our items, and their side did not
    add it). Items compare as the key reads them (tags case-insensitively)."""
    base_ids = {_ident(key, i) for i in _items(key, base)}
    their_items = _items(key, theirs)
    their_ids = {_ident(key, i) for i in their_items}
    merged = [i for i in _items(key, ours) if _ident(key, i) in their_ids or _ident(key, i) not in base_ids]
    seen = {_ident(key, i) for i in merged}
    for item in their_items:
        ident = _ident(key, item)
        if ident not in base_ids and ident not in seen:
            merged.append(item)
            seen.add(ident)
    return merged


def _items(key: str, value: Any) -> list[Any]:
    if value is _MISSING or value is None:
        return []
    if isinstance(value, list):
        return [v for v in value if v is not None]
    if key == "tags":  # Obsidian reads a string of tags split on commas and spaces
        return [word for piece in split_tags(value) for word in piece.split()]
    if key == "aliases":
        return [piece.strip() for piece in str(value).split(",") if piece.strip()]
    return [value]


def _ident(key: str, item: Any) -> str:
    if key == "tags":
        return normalise_tag(str(item))
    if isinstance(item, str):
        return item.strip()
    return json.dumps(item, sort_keys=True, ensure_ascii=False)


def _lines_of(side: _Side, key: str, nl: str) -> list[str]:
    """``key``'s lines as ``side`` writes them, in our line ends ([] when it has none)."""
    span = key_span(side.fm_lines, key)
    if span is None:
        return []
    return [line.rstrip("\r\n") + nl for line in side.fm_lines[span[0] : span[1]]]


def _put_lines(lines: list[str], key: str, new: list[str], nl: str) -> list[str]:
    """``lines`` with ``key``'s lines replaced by ``new`` (appended when ``key`` is not there)."""
    span = key_span(lines, key)
    if span is None:
        if lines and not lines[-1].endswith("\n"):
            lines = [*lines[:-1], lines[-1] + nl]
        return lines + new
    return lines[: span[0]] + new + lines[span[1] :]


def _conflict_lines(lines: list[str], key: str, theirs: list[str], nl: str, size: int) -> list[str]:
    """Both sides' lines for ``key`` between markers, where our side writes it."""
    span = key_span(lines, key)
    ours = lines[span[0] : span[1]] if span else []
    block = ["<" * size + " ours" + nl, *ours, "=" * size + nl, *theirs, ">" * size + " theirs" + nl]
    if span is None:
        if lines and not lines[-1].endswith("\n"):
            lines = [*lines[:-1], lines[-1] + nl]
        return lines + block
    return lines[: span[0]] + block + lines[span[1] :]


def _one_memory_written_twice(o: _Side, t: _Side) -> MergeResult:
    """Both sides added the same content in one namespace under two ids: one memory
    stays, the one that owns the id by SPEC §2's rule (the earliest ``created``, then
    the smallest id, the path being the same), with both sides' tags, aliases and
    relations, the later ``updated``, and the keys only the other side has (a person's
    ``reviewed: yes``) as written. A person's key set two ways, or a comment only the
    other side has, keeps both files whole instead (``both_kept``): nothing they wrote
    is dropped for the tool's dedup."""
    owner, other = sorted((o, t), key=lambda s: (s.note.created or "", s.note.id))
    changes: dict[str, Any] = {}
    taken: list[str] = []  # keys only the other side has: their lines as written
    for key in dict.fromkeys([*owner.meta, *other.meta]):
        mine, yours = owner.meta.get(key, _MISSING), other.meta.get(key, _MISSING)
        if mine == yours or yours is _MISSING:
            continue
        if key == "updated" and _pick_time(mine, yours, later=True) == "theirs":
            changes[key] = yours
        elif key not in ("created", "updated") and is_list_key(key, mine, yours):
            merged = merge_list(key, _MISSING, mine, yours)
            if [_ident(key, i) for i in merged] != [_ident(key, i) for i in _items(key, mine)]:
                changes[key] = merged
        elif mine is _MISSING and isinstance(key, str):
            taken.append(key)
        elif key not in RESERVED_KEYS and key not in _TOOL_KEYS:
            return both_kept(o.text.encode("utf-8"), t.text.encode("utf-8"))  # a person's value two ways
    text = patch(owner.text, changes) if changes else owner.text
    if taken:
        start, end, _body = front_matter_span(text) or (0, 0, 0)
        nl = "\r\n" if owner.fm_lines and owner.fm_lines[0].endswith("\r\n") else "\n"
        lines = text[start:end].splitlines(keepends=True)
        for key in taken:
            lines = _put_lines(lines, key, _lines_of(other, key, nl), nl)
        text = text[:start] + "".join(lines) + text[end:]
    span = front_matter_span(text)
    if span and _comments(other.fm_lines) - _comments(text[span[0]:span[1]].splitlines(keepends=True)):
        return both_kept(o.text.encode("utf-8"), t.text.encode("utf-8"))  # a comment only the other side has
    side = "ours" if owner is o else "theirs"
    return MergeResult(text.encode("utf-8"), how=f"one memory written twice: kept {owner.note.id} ({side}), tags merged")


def both_kept(ours: bytes, theirs: bytes, *, marker_size: int = 7) -> MergeResult:
    """Two different memories added at one path: both whole, between markers (ours
    first, so the file keeps our memory's identity until it is resolved)."""
    def ended(data: bytes) -> bytes:
        return data if not data or data.endswith(b"\n") else data + b"\n"

    data = (b"<" * marker_size + b" ours\n" + ended(ours) + b"=" * marker_size + b"\n" + ended(theirs)
            + b">" * marker_size + b" theirs\n")
    return MergeResult(data, ["two memories added at one path"], how="both kept")


# --------------------------------------------------------------------------- text


def merge_body(base: str, ours: str, theirs: str, *, marker_size: int = 7) -> tuple[str, int]:
    """The body's 3-way merge and how many conflicts it holds. Text added at the end
    by both sides is kept from both (ours first): an ``append`` merges (SPEC §3)."""
    if ours == theirs or base == theirs:
        return ours, 0
    if base == ours:
        return theirs, 0
    appended = _both_appended(base, ours, theirs)
    if appended is not None:
        return appended, 0
    data, conflicts = merge_text(base.encode("utf-8"), ours.encode("utf-8"), theirs.encode("utf-8"),
                                 marker_size=marker_size)
    return data.decode("utf-8"), conflicts


def _both_appended(base: str, ours: str, theirs: str) -> str | None:
    kept = base.rstrip("\r\n")
    if not kept:
        return None  # nothing in common to append to: an ordinary merge
    added = []
    for side in (ours, theirs):
        rest = side[len(kept):]
        if not side.startswith(kept) or not rest.startswith(("\n", "\r\n")) or not rest.strip():
            return None
        added.append(rest.lstrip("\r\n"))
    nl = "\r\n" if "\r\n" in ours else "\n"
    head = ours if ours.endswith("\n") else ours + nl
    tail = added[1] if added[1].endswith("\n") else added[1] + nl
    return head + tail


def merge_text(base: bytes, ours: bytes, theirs: bytes, *, marker_size: int = 7) -> tuple[bytes, int]:
    """``git merge-file -p`` over three texts, in temp files outside any repository; the
    result and its number of conflicts. Raises ``MergeFailed`` when git cannot merge."""
    with tempfile.TemporaryDirectory(prefix="agent-memory-merge-") as folder:
        names = []
        for label, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            (Path(folder) / label).write_bytes(data)
            names.append(label)
        try:
            done = run(Path(folder), "merge-file", "-p", f"--marker-size={marker_size}",
                       "-L", "ours", "-L", "base", "-L", "theirs", *names,
                       task="merge the two versions", timeout=MERGE_TIMEOUT, outside_repository=True)
        except GitError as exc:
            raise MergeFailed(str(exc)) from None
    if not 0 <= done.returncode < 128:
        raise MergeFailed(f"git merge-file failed: {first_line(done)}")
    return done.stdout, done.returncode


def merge_whole(base: bytes | None, ours: bytes, theirs: bytes, *, marker_size: int = 7) -> MergeResult:
    """git's own line merge of the whole files, for what cannot be merged key by key."""
    data, conflicts = merge_text(base or b"", ours, theirs, marker_size=marker_size)
    found = [f"the whole file: {conflicts} conflict{'s' if conflicts > 1 else ''}"] if conflicts else []
    return MergeResult(data, found, how="whole file")


# --------------------------------------------------------------------------- the driver


def run_driver(base: Path, ours: Path, theirs: Path, marker_size: int = 7, path: str = "") -> int:
    """git's merge driver protocol: the result goes into ``ours`` (%A); 0 when clean, 1
    when conflicts remain (their markers are in %A), 2 when nothing could be merged
    (%A untouched: git reports a conflict, and the command line ``git setup`` writes
    then runs git's own text merge). %A is replaced whole or not at all."""
    name = path or str(ours)
    try:
        ancestor = base.read_bytes() if base.exists() else b""
        mine, yours = ours.read_bytes(), theirs.read_bytes()
    except OSError as exc:
        print(f"agent-memory merge-file: cannot read the versions of {name}: {exc}", file=sys.stderr)
        return 2
    try:
        result = merge(ancestor, mine, yours, path=path, marker_size=marker_size)
    except MergeFailed as exc:
        print(f"agent-memory merge-file: {name}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a bug here must not cost a side: git merges the whole file instead
        print(f"agent-memory merge-file: {name}: {type(exc).__name__}: {exc}; merged as plain text", file=sys.stderr)
        try:
            result = merge_whole(ancestor, mine, yours, marker_size=marker_size)
        except MergeFailed as failed:
            print(f"agent-memory merge-file: {name}: {failed}", file=sys.stderr)
            return 2
    try:
        replace_file(ours, result.data)
    except OSError as exc:
        print(f"agent-memory merge-file: cannot write the merge of {name}: {exc}", file=sys.stderr)
        return 2
    if result.clean:
        return 0
    print(f"agent-memory merge-file: {name}: conflict ({'; '.join(result.conflicts)}); both sides are in the "
          "file between <<<<<<< and >>>>>>> markers", file=sys.stderr)
    return 1
