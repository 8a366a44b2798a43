"""How the CLI prints: vault text made safe for a terminal, a result as JSON or for a
person, the one-line summary of a memory, and progress bars on stderr."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import click

from ..progress import Progress, Step
from .options import global_options


def id_and_path(memory: Any) -> str:
    """A memory's id and path, the path once when it is the id (a file without ``id:``)."""
    return printable(memory["path"] if memory["id"] == memory["path"] else f"{memory['id']}  {memory['path']}")


# C0 and C1 control characters (and DEL): in a title, snippet or file name they are
# terminal escape sequences (clear the screen, retitle the window, write the clipboard).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_LINE_BREAKS = re.compile("[\t\n]")


def printable(value: Any, *, body: bool = False) -> str:
    """Text from the vault made safe for a terminal: control characters removed (a
    ``body`` keeps its newlines and tabs; anything else prints on one line). Every
    human-output path prints vault text through this; ``--json`` prints it as it is."""
    text = _CONTROLS.sub("", str(value))
    return text if body else _LINE_BREAKS.sub(" ", text)


def emit(data: Any, human: Callable[[], None]) -> None:
    if global_options().json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        human()


@contextmanager
def progress_bar() -> Iterator[Progress | None]:
    """Bars on stderr when it is a terminal, one per phase of the work (rich allows one
    live display at a time); None off a terminal or under --json."""
    if global_options().json or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress as Bars  # imported only for long work on a terminal

    with Bars(transient=True, console=_stderr_console()) as bars:
        tasks: dict[str, Any] = {}

        def update(step: Step) -> None:
            if step.phase not in tasks:
                tasks[step.phase] = bars.add_task(step.phase.capitalize(), total=None)
            bars.update(tasks[step.phase], completed=step.done, total=step.total)

        yield update


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def _tag_text(tags: list[str]) -> str:
    return " ".join("#" + printable(t) for t in tags)


def print_summary(n: int | None, item: Mapping[str, Any]) -> None:
    head = f"{n}. " if n is not None else ""
    tags = f"  {_tag_text(item['tags'])}" if item["tags"] else ""
    conflict = click.style("  git conflict", fg="yellow") if item.get("conflict") else ""
    click.echo(f"{head}{click.style(printable(item['title']), bold=True)}  [{printable(item['namespace'])}]{tags}  "
               f"({printable(item['age'])}){conflict}")
    click.echo(f"   {id_and_path(item)}")
