"""The library's messages in the CLI's words: an error becomes one line on stderr and
exit code 1, naming the command or option a person types rather than the MCP tool.

The library names operations and arguments by reference (``wording.Name`` in a
``wording.Said`` sentence); ``CLI_WORDS`` is how the CLI says each. Nothing is parsed
out of prose: a message that names nothing is printed as it is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from ..errors import AgentMemoryError
from ..progress import Progress, Step
from ..wording import render
from .output import printable


def handle_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except AgentMemoryError as exc:
            raise click.ClickException(printable(exc.render(CLI_WORDS))) from exc
        except BrokenPipeError:
            raise  # the reader left (`| head`): click ends quietly
        except OSError as exc:  # the system refused what no check foresaw: one line, not a traceback
            raise click.ClickException(printable(system_refused(exc))) from exc

    return wrapper


def system_refused(exc: OSError) -> str:
    """An ``OSError`` no library check turned into its own message, as a line a person
    can act on: what the system said, on which file, and where to look next."""
    where = f": {exc.filename}" if exc.filename else ""
    return (f"{exc.strerror or exc}{where}. Check that this path exists, that you may write it and that the disk "
            "has room, then retry; `agent-memory doctor` checks the vault.")


# How the CLI says the names the library's messages use (``wording``'s names).
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
    "related": "`agent-memory search --depth`",
    "remember": "`agent-memory add`",
    "read_file": "`agent-memory show`",
    "expected_version": "--expected-version",
    "ttl_days": "--ttl-days",
    "append": "--append",
    "replace_old/replace_new": "--replace OLD NEW",
    "add_tags/remove_tags": "--add-tag/--remove-tag",
    "limit": "--limit",
    "offset": "--offset",
    "depth": "--depth",
    "match": "--match",
    "profile": "--profile",
    "since": "--since",
    "until": "--until",
    "older_than_days": "--older-than",
    "namespace": "-n",
    "path_prefix": "--path",
    "type": "--type",
    "min_importance": "--min-importance",
    "where": "--where",
    "target_id": "TARGET",
    "tag_filter": "--tag",
    "complete_first": "listed first",
    "see_matched": "the marked words show which",
}


def cli_words(message: str) -> str:
    """A library message (an error's, or a result's note or hint) in the CLI's words."""
    return render(message, CLI_WORDS)


def cli_steps(progress: Progress | None) -> Progress | None:
    """``progress`` (a bar or plain lines, ``output.progress_bar``) hearing each step's
    phase in the CLI's words ("for --where filters", not the MCP's "for where filters")."""
    if progress is None:
        return None
    shown = progress

    def said(step: Step, /) -> None:
        shown(Step(cli_words(step.phase), step.done, step.total))
    return said
