"""Regular expressions compiled on first use, not at import.

A pattern over wide Unicode ranges or a long set of rules takes milliseconds to compile,
and a command imports many modules whose patterns it never runs (a search compiles no
credential rule and writes no YAML). ``lazy_pattern`` is the one way the package defers
them; cheap patterns stay plain ``re.compile`` at the top of their module.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable


def lazy_pattern(pattern: str, flags: int = 0) -> Callable[[], re.Pattern[str]]:
    """A getter for ``re.compile(pattern, flags)``: compiled on its first call, then kept.

    ``_WORD = lazy_pattern(r"...")`` at the top of a module, ``_WORD().match(text)`` where
    it is used."""

    @functools.cache
    def compiled() -> re.Pattern[str]:
        return re.compile(pattern, flags)

    return compiled
