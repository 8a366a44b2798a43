"""The library's messages in the CLI's words: an error becomes one line on stderr and
exit code 1, naming the command or option a person types rather than the MCP tool."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import click

from ..errors import AgentMemoryError
from .output import printable


def handle_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except AgentMemoryError as exc:
            raise click.ClickException(printable(cli_words(str(exc)))) from exc

    return wrapper


# The library's messages name MCP tools and arguments (a model reads them too); on a
# terminal they name the command or option a person types instead.
CLI_WORDS = {
    "get_memory": "`agent-memory show`",
    "list_memories": "`agent-memory list`",
    "recall": "`agent-memory search`",
    "update_memory": "`agent-memory edit`",
    "link_memories": "`agent-memory link`",
    "unlink_memories": "`agent-memory unlink`",
    "move_memory": "`agent-memory mv`",
    "memory_history": "`agent-memory history`",
    "export_memories": "`agent-memory export`",
    "import_memories": "`agent-memory import`",
    "expected_version": "--expected-version",
    "replace_old/replace_new": "--replace OLD NEW",
    "add_tags/remove_tags": "--add-tag/--remove-tag",
    "ttl_days": "--ttl-days",
}
# A whole word, not part of a dotted name (the recall.profile setting stays as it is).
_CLI_WORD = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, sorted(CLI_WORDS, key=len, reverse=True)))
                       + r")(?!\w|\.\w)")


def cli_words(message: str) -> str:
    """A library message with MCP tool and argument names as CLI commands and options."""
    return _CLI_WORD.sub(lambda m: CLI_WORDS[m[1]], message)
