"""Byte-preserving edits of an existing file: rewrite only the front-matter keys that
change (``patch``), append to or replace within the body (``edit_body``); every other
byte stays as written (unknown keys and their order, comments, list style, line
endings, a BOM).
"""

from __future__ import annotations

import re
from typing import Any

from .render import yaml_scalar
from .split import split


def _key_line(key: str) -> re.Pattern[str]:
    escaped = re.escape(key)
    return re.compile(rf"^(?:{escaped}|\"{escaped}\"|'{escaped}')[ \t]*:(?:[ \t]|\r?\n|$)")


def patch(text: str, changes: dict[str, Any], body: str | None = None) -> str:
    """Rewrite only the front-matter keys in ``changes`` (``None`` removes a key).


    Every other byte stays: unknown keys and their order, comments, list style of
    untouched keys, line endings, a BOM, and the body unless a new one is given.
    """
    parts = split(text)
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
    parts = split(text)
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
    import yaml  # only a block list's edit needs the full parser

    from .safe_yaml import KeepKeysLoader, jsonable

    try:
        return jsonable(yaml.load(line.strip()[1:].strip() or "null", Loader=KeepKeysLoader))
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
