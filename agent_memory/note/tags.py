"""Tags as Obsidian reads them: front-matter lists or strings, ``#tags`` in the body,
normalised (case-insensitive, no ``#``, no whitespace).
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from .split import merge_unique, without_code


# A '#' at the start or after whitespace (a line's start is after a newline), written as
# "not after a non-space": the same matches as "(?<=\s)|^" with re.MULTILINE, tried
# at each character of a body about 1.7x faster. A tag ends at ASCII punctuation (but
# - _ /) and at the punctuation of other scripts: typographic quotes, dashes and the
# ellipsis (U+2000-206F, but the joiners Persian words and emoji need), U+2E00-2E7F,
# CJK and full-width stops, commas and brackets, Latin-1's guillemets and inverted
# marks (not its middle dot: Catalan writes it inside words, "#col·lecció"), Arabic
# and Devanagari stops. So "#tag。", "“see #project”" and "#tag…" are the tags "tag"
# and "project", as Obsidian reads them.
_PUNCTUATION = ("!\"$%&'()*+,.:;<=>?@\\[\\]^`{|}~\\\\"
                "\u00a1\u00a7\u00ab\u00b6\u00bb\u00bf\u060c\u061b\u061f\u06d4\u0964\u0965"
                "\u2000-\u200b\u200e-\u206f\u2e00-\u2e7f\u3000-\u3003\u3008-\u3011\u3014-\u301f"
                "\uff01-\uff0f\uff1a-\uff20\uff3b-\uff3e\uff40\uff5b-\uff65")
_INLINE_TAG = re.compile(f"(?<!\\S)#([^\\s#{_PUNCTUATION}]+)")


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


def not_tags(value: Any) -> list[Any]:
    """What a file's ``tags`` property holds that is no tag: a mapping (``tags: {a: 1}``),
    or a mapping or list inside its list. Read as no tag at all, never as the text of its
    Python form (``{'a': 1}`` was the tag ``{'a':-1}``), and named by ``doctor``."""
    if isinstance(value, dict):
        return [value]
    return [item for item in value if isinstance(item, (dict, list))] if isinstance(value, list) else []


def as_tag_list(value: Any) -> list[str]:
    """A file's tags as Obsidian reads them: a YAML list, or one string of tags split on
    commas and spaces; normalised (``Two Words`` in a list is ``two-words``). What is no
    tag (``not_tags``) is left out."""
    if not_tags(value):
        value = [] if isinstance(value, dict) else [item for item in value if not isinstance(item, (dict, list))]
    pieces = split_tags(value)
    if isinstance(value, str):
        pieces = [word for piece in pieces for word in piece.split()]
    return merge_unique([t for t in map(normalise_tag, pieces) if t])


def _starts_visible(tag: str) -> bool:
    """Whether a tag starts with a character of its own: not a combining mark, a
    variation selector or a joiner, which only change the character before them (the
    keycap emoji "#️⃣" is '#' with two such marks, and no tag)."""
    return unicodedata.category(tag[0])[0] != "M" and unicodedata.category(tag[0]) != "Cf"


def inline_tags(body: str) -> list[str]:
    """``#tags`` in the body count as tags (not in code, not all digits, not headings,
    not starting with a mark)."""
    if "#" not in body:
        return []
    found = (normalise_tag(m.group(1).rstrip("/-")) for m in _INLINE_TAG.finditer(without_code(body)))
    return merge_unique([t for t in found if t and not t.replace("/", "").isdigit() and _starts_visible(t)])
