"""How the CLI prints: vault text made safe for a terminal, a result as JSON or for a
person, the one-line summary of a memory, the library's warnings and progress bars on
stderr."""

from __future__ import annotations

import json
import logging
import math
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from typing import Any

import click

from ..progress import Progress, Step


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


def as_json() -> bool:
    """Whether this command line asked for --json: read from the command's root context,
    where ``options.GlobalOptions`` keeps it (not imported here: ``options`` opens vaults
    with this module's progress bars)."""
    return bool(getattr(click.get_current_context().find_root().obj, "json", False))


def emit(data: Any, human: Callable[[], None]) -> None:
    if as_json():
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        human()


class _WarningLines(logging.Handler):
    """A library warning as ``agent-memory: warning: <message>`` on stderr, never stdout.
    Printed to ``sys.stderr`` as it is when the record comes: click's test runner swaps
    it, and a progress bar puts a proxy there that prints above the bar (click.echo
    would find the stream beneath and write into the bar's line)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level = "warning" if record.levelno < logging.ERROR else "error"
            print(f"agent-memory: {level}: {printable(record.getMessage(), body=True)}", file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 - logging's own rule: a handler that fails reports it and goes on
            self.handleError(record)


@contextmanager
def library_warnings_on_stderr() -> Iterator[None]:
    """While a command runs, warnings the library logs (the "agent_memory" logger) print
    on stderr in the CLI's form, under --json too; taken off afterwards, so a program
    that runs the click group in process keeps its own logging as it was."""
    logger = logging.getLogger("agent_memory")
    handler = _WarningLines()
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


# Plain progress lines (stderr piped to a log or another program): the first once the
# work has run this many seconds, then at most one this often; shorter work prints none.
LINE_EVERY = 3.0


@contextmanager
def progress_bar() -> Iterator[Progress | None]:
    """How far long work got, on stderr: a bar per phase on a terminal, plain lines
    when stderr is piped (``PlainLines``), nothing under --json (None: the library
    reports nothing). The bars start with the first step: a command that may have long
    work (a search building a filter's table) draws and imports nothing when it has none."""
    if as_json():
        yield None
    elif sys.stderr.isatty():
        with ExitStack() as bars:
            drawn: list[Progress] = []

            def update(step: Step, /) -> None:
                if not drawn:
                    drawn.append(bars.enter_context(_bars()))
                drawn[0](step)

            yield update
    else:
        lines = PlainLines(time.monotonic)
        try:
            yield lines
        finally:
            lines.close()


@contextmanager
def _bars() -> Iterator[Progress]:
    """rich's bars, one per phase (rich allows one live display at a time): the phase,
    the bar, done/total and the time left; erased when the work ends. Only stderr is
    redirected above the bars (a warning then prints above them), stdout never."""
    from rich.console import Console  # imported only for long work on a terminal
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
    from rich.progress import Progress as Bars

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Bars(*columns, transient=True, console=Console(stderr=True), redirect_stdout=False) as bars:
        tasks: dict[str, Any] = {}

        def update(step: Step) -> None:
            if step.phase in tasks:
                bars.update(tasks[step.phase], completed=step.done, total=step.total)
            else:
                tasks[step.phase] = bars.add_task(step.phase.capitalize(), completed=step.done, total=step.total)

        yield update


class PlainLines:
    """Progress as lines a log keeps, ``indexing files: 500/1038``: none for work done
    within ``every`` seconds of starting, then at most one every ``every`` seconds, and
    the last count of each phase that printed any (as soon as it reaches its total, or
    when the next phase or the work ends)."""

    def __init__(self, clock: Callable[[], float], every: float | None = None) -> None:
        self._clock = clock
        self._every = LINE_EVERY if every is None else every
        self._next = clock() + self._every
        self._last: Step | None = None  # the latest step of the current phase
        self._said: Step | None = None  # the latest step printed of the current phase

    def __call__(self, step: Step) -> None:
        if self._last is not None and step.phase != self._last.phase:
            self.close()
            self._said = None
        self._last = step
        finished = self._said is not None and step.done == step.total
        if finished or self._clock() >= self._next:
            self._say(step)

    def close(self) -> None:
        """The current phase's last count, if it printed an earlier one."""
        if self._said is not None and self._last is not None and self._last != self._said:
            self._say(self._last)

    def _say(self, step: Step) -> None:
        total = f"/{step.total}" if step.total is not None else ""
        try:
            print(f"{step.phase}: {step.done}{total}", file=sys.stderr, flush=True)
        except (OSError, ValueError):  # stderr is gone (its reader left): the work goes on without lines
            self._said, self._next = None, math.inf  # so nothing is tried again
            return
        self._said = step
        self._next = self._clock() + self._every


def plural(n: int, one: str, many: str | None = None) -> str:
    """``1 file``, ``2 files``: a count with the word that agrees with it."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def marked_snippet(snippet: str, highlights: list[list[int]], *, terminal: bool | None = None) -> str:
    r"""A hit's snippet for a person, its matches marked so that nothing reads as a link
    (brackets would: ``[[[acme]-billing]]``). On a terminal the matches are bold and
    underlined, the text as it is; elsewhere (a pipe, a file) each match is ``**bold**``
    in markdown's way and every ``*`` of the text itself is escaped (``\*``), so a marker
    is always a match. Vault text goes through ``printable`` piece by piece."""
    if terminal is None:
        terminal = sys.stdout.isatty()
    pieces: list[str] = []
    pos = 0

    def plain(text: str) -> str:
        shown = printable(text)
        return shown if terminal else shown.replace("*", "\\*")

    for start, end in sorted(highlights):
        if start < pos or end > len(snippet):
            continue  # overlapping or outside the snippet: not a range this snippet has
        pieces.append(plain(snippet[pos:start]))
        match = plain(snippet[start:end])
        pieces.append(click.style(match, bold=True, underline=True) if terminal else f"**{match}**")
        pos = end
    pieces.append(plain(snippet[pos:]))
    return "".join(pieces).strip()


def _tag_text(tags: list[str]) -> str:
    return " ".join("#" + printable(t) for t in tags)


def print_summary(n: int | None, item: Mapping[str, Any]) -> None:
    head = f"{n}. " if n is not None else ""
    tags = f"  {_tag_text(item['tags'])}" if item["tags"] else ""
    conflict = click.style("  git conflict", fg="yellow") if item.get("conflict") else ""
    # The default namespace goes unsaid: a note without one (every Obsidian note) shows none.
    namespace = f"  [{printable(item['namespace'])}]" if item["namespace"] != "default" else ""
    click.echo(f"{head}{click.style(printable(item['title']), bold=True)}{namespace}{tags}  "
               f"({printable(item['age'])}){conflict}")
    click.echo(f"   {id_and_path(item)}")
