"""A title from a note's first line: reading only the first few hundred characters of a
long paragraph gives the title reading the whole line gave."""

from __future__ import annotations

import random

from agent_memory.note import parse
from agent_memory.note.parse import derive_title


def whole_line_title(line: str) -> str:
    """The first-words title as read from the whole line (markup, emphasis, spaces)."""
    words = " ".join(parse._EMPHASIS_UNDERSCORE.sub("", line.translate(parse._MARKUP)).split())
    return parse.shorten(words, 80)


def long_lines(count: int) -> list[str]:
    """First lines of 300 to 900 characters: words, emphasis underscores and asterisks,
    snake_case, runs of markup, spaces of every kind, a run of underscores across the
    point where reading stops."""
    rng = random.Random(3)
    pieces = ["word", "snake_case", "_em_", "__bold__", "**x**", "`code`", "> ", "***", "_" * 50, "*" * 40,
              " ", "\t", "\u00a0", "\u2003", "\u3000", "é", "ü", "名前", ",", ";", ":", "[", "]"]
    lines = []
    for _ in range(count):
        line = ""
        while len(line) < rng.randint(300, 900):
            line += rng.choice(pieces)
        lines.append(line.strip() or "x")
    return lines


def test_a_long_first_line_gives_the_title_the_whole_line_gives() -> None:
    lines = long_lines(3000) + ["a" * 1000, "a " + "_" * 800 + " b", "*" * 500 + " " + "word " * 100]
    for line in lines:
        body = line + "\nsecond line\n"
        expected = whole_line_title(line.strip())
        if expected:
            assert derive_title(body, "2026/01/02/note.md") == expected, line
