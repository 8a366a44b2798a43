"""A click group that imports a command's module only when that command is run (or
``--help`` lists them all): ``agent-memory search`` does not import the MCP server, git
or the semantic extra, and ``--version`` imports none of the library."""

from __future__ import annotations

import importlib
from typing import Any

import click


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
