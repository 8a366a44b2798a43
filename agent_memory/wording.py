"""Sentences that name the library's operations and arguments by reference, so each
front end says them in its own words.

A message for a person or a model often says what to do next: "use recall or
list_memories", "pass expected_version". Those names belong to a front end: the MCP
server's tools and arguments, the CLI's commands and options. The library writes such a
sentence with ``said(...)``, naming each by a ``Name``; the result is a ``str`` in the
MCP server's words (what ``str()``, JSON and a model see) that also keeps its parts, so
the CLI can ``render`` it with its own words. Nothing is parsed back out of prose.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self


@dataclass(frozen=True)
class Name:
    """An operation, argument or field the sentence names: ``key`` is how front ends
    look it up; ``mcp`` is what the MCP server says (the key itself unless given)."""

    key: str
    mcp: str | None = None

    def __str__(self) -> str:
        return self.mcp if self.mcp is not None else self.key


class Said(str):
    """A sentence whose value is its MCP wording, keeping which of its parts are names."""

    parts: tuple[str | Name, ...]

    def __new__(cls, parts: tuple[str | Name, ...]) -> Self:
        made = super().__new__(cls, "".join(str(part) for part in parts))
        made.parts = parts
        return made

    def render(self, words: Mapping[str, str]) -> str:
        """The sentence with each name in ``words`` said that way (others as the MCP says them)."""
        return "".join(words.get(p.key, str(p)) if isinstance(p, Name) else p for p in self.parts)


def said(*parts: str | Name) -> Said:
    """A sentence from plain text and ``Name`` s, e.g. ``said("use ", RECALL, " to find ids.")``."""
    return Said(parts)


def render(message: str, words: Mapping[str, str]) -> str:
    """``message`` in a front end's words: a ``Said`` rendered with ``words``, any other
    text as it is."""
    return message.render(words) if isinstance(message, Said) else message


# The names the library's messages use (the MCP tools' and arguments').
GET_MEMORY = Name("get_memory")
LIST_MEMORIES = Name("list_memories")
RECALL = Name("recall")
LINK_MEMORIES = Name("link_memories")
RELATED = Name("related")
REMEMBER = Name("remember")
READ_FILE = Name("read_file")
IMPORT_MEMORIES = Name("import_memories")
EXPECTED_VERSION = Name("expected_version")
TTL_DAYS = Name("ttl_days")
APPEND = Name("append")
REPLACE = Name("replace_old/replace_new")
TAG_EDITS = Name("add_tags/remove_tags")
LIMIT = Name("limit")
DEPTH = Name("depth")
OFFSET = Name("offset")
MATCH = Name("match")
PROFILE = Name("profile")
OLDER_THAN_DAYS = Name("older_than_days")
WHERE = Name("where")
TARGET_ID = Name("target_id")
TAG_FILTER = Name("tag_filter", "tags")
COMPLETE_FIRST = Name("complete_first", "complete: true, first")
SEE_MATCHED = Name("see_matched", "see matched_terms")
