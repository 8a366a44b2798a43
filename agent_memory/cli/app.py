"""The ``agent-memory`` command: one command = one vault call.

Library errors become a one-line message on stderr and exit code 1, and the warnings
it logs print on stderr while a command runs. ``--dir`` and ``--json`` work before or
after the command. Nothing here imports ``mcp`` or ``watchdog`` unless the command
needs them, so ``search`` starts fast.
"""

from __future__ import annotations

import sys

import click

from .. import __version__
from .lazy import LazyGroup
from .options import GlobalOptions, common

# Each command and where it is defined (module of this package, name there): its module
# is imported only when the command runs, so a command pays only for what it uses.
COMMANDS = {
    "init": ("vault", "init"), "add": ("memories", "add"), "search": ("search", "search"),
    "list": ("search", "list_"), "show": ("memories", "show"), "edit": ("memories", "edit"),
    "forget": ("memories", "forget"), "restore": ("memories", "restore"), "link": ("memories", "link"),
    "unlink": ("memories", "unlink"), "mv": ("memories", "mv"), "history": ("memories", "history"),
    "git": ("git", "git_group"), "trust": ("git", "trust"), "merge-file": ("git", "merge_file"),
    "reindex": ("vault", "reindex"), "stats": ("vault", "stats"), "export": ("transfer", "export"),
    "import": ("transfer", "import_"), "gc": ("vault", "gc"), "doctor": ("vault", "doctor"),
    "serve": ("serve", "serve"), "sync": ("git", "sync"), "watch": ("vault", "watch"),
}


@click.group(cls=LazyGroup, lazy=COMMANDS, invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"]})
@common
@click.version_option(__version__, prog_name="agent-memory")  # not read from the installed metadata: slow
@click.pass_context
def cli(ctx: click.Context) -> None:
    """A memory for AI agents that humans can read, edit and version.

    Every memory is a markdown file in the vault; the index is a cache. With no
    command: this help in a terminal, the MCP server on stdio when an MCP client
    starts it (neither stdin nor stdout a terminal).
    """
    ctx.ensure_object(GlobalOptions)
    if ctx.invoked_subcommand is None:
        if _a_person_is_here():
            click.echo(ctx.get_help())
            ctx.exit(0)
        serve = cli.get_command(ctx, "serve")
        assert serve is not None
        ctx.invoke(serve)
    elif ctx.invoked_subcommand != "serve":  # the server sets up its own log on stderr
        from .output import library_warnings_on_stderr

        ctx.with_resource(library_warnings_on_stderr())


def _a_person_is_here() -> bool:
    """Whether stdin or stdout is a terminal: a person typed ``agent-memory`` (an MCP
    client starts it with both on pipes)."""
    return any(stream is not None and stream.isatty() for stream in (sys.stdin, sys.stdout))


def main() -> None:
    """Parse the command line and run the command (``agent_memory.cli.main`` calls this)."""
    cli(obj=GlobalOptions())
