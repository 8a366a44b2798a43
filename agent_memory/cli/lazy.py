"""The command group: it imports a command's module only when that command is run (or
``--help`` lists them all): ``agent-memory search`` does not import the MCP server, git
or the semantic extra, and ``--version`` imports none of the library. It also names the
command a typo meant, and says what a Ctrl-C left."""

from __future__ import annotations

import difflib
import importlib
import sys
from typing import Any

import click


INTERRUPTED = ("Interrupted. Each file is written whole or not at all, so no memory is half-written, and the index "
               "catches up on the next command; `agent-memory doctor` shows where things stand.")


class LazyGroup(click.Group):
    """``lazy`` maps a command's name to ``(module, attribute)``, the module relative to
    this package (``agent_memory.cli``)."""

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self._lazy and cmd_name not in self.commands:
            module, attribute = self._lazy[cmd_name]
            command = getattr(importlib.import_module(f".{module}", __package__), attribute)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        """A mistyped command names the one meant, as a mistyped option does."""
        typed = args[0] if args else ""
        if typed and not typed.startswith("-") and self.get_command(ctx, typed) is None:
            close = difflib.get_close_matches(typed, self.list_commands(ctx), n=1)
            if close:
                ctx.fail(f"No such command {typed!r}. Did you mean {close[0]!r}?")
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        """The command, saying what a Ctrl-C left (click's own "Aborted!" says nothing of
        it) and exiting 130, as a shell expects of a program SIGINT stopped."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            if sys.stderr.isatty():
                click.echo(err=True)  # off the line where the terminal echoed ^C
            click.echo(INTERRUPTED, err=True)
            ctx.exit(130)
