"""The ``agent-memory`` command: one command = one vault call.

Library errors become a one-line message on stderr and exit code 1, and the warnings
it logs print on stderr while a command runs. ``--dir`` and ``--json`` work before or
after the command. Nothing here imports ``mcp`` or ``watchdog`` unless the command
needs them, so ``search`` starts fast.
"""

from __future__ import annotations

import click

from .git import git_group, merge_file, sync, trust
from .memories import add, edit, forget, history, link, mv, restore, show, unlink
from .options import GlobalOptions, common
from .output import library_warnings_on_stderr
from .search import list_, search
from .serve import serve
from .transfer import export, import_
from .vault import doctor, gc, init, reindex, stats, watch


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@common
@click.version_option(package_name="agent-memory")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """A memory for AI agents that humans can read, edit and version.

    Every memory is a markdown file in the vault; the index is a cache.
    With no command, runs the MCP server on stdio.
    """
    ctx.ensure_object(GlobalOptions)
    if ctx.invoked_subcommand is None:
        ctx.invoke(serve)
    elif ctx.invoked_subcommand != "serve":  # the server sets up its own log on stderr
        ctx.with_resource(library_warnings_on_stderr())


for _command in (init, add, search, list_, show, edit, forget, restore, link, unlink, mv, history, git_group, trust,
                 merge_file, reindex, stats, export, import_, gc, doctor, serve, sync, watch):
    cli.add_command(_command)


def main() -> None:
    """Parse the command line and run the command (``agent_memory.cli.main`` calls this)."""
    cli(obj=GlobalOptions())
