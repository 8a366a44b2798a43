"""The options every command takes (``--dir``, ``--json``, before or after the command
name) and the vault they name."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from pathlib import Path

    from ..vault.vault import Vault


class GlobalOptions:
    """--dir and --json, which may come before or after the command name."""

    def __init__(self) -> None:
        self.dir: str | None = None
        self.json: bool = False


def _remember_dir(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value:
        ctx.ensure_object(GlobalOptions).dir = value


def _remember_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(GlobalOptions).json = True


def vault_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--dir`` alone, for a command that prints no result (``serve``)."""
    return click.option(
        "--dir", "dir_", metavar="PATH", expose_value=False, callback=_remember_dir,
        help="The vault folder itself (default: the nearest .memory/, Obsidian vault or vault with an .index/ "
             "here or above, else ~/.memory; or $AGENT_MEMORY_DIR).",
    )(func)


def common(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--dir``/``--json`` to a command as well as to the group."""
    func = vault_option(func)
    func = click.option(
        "--json", "json_", is_flag=True, expose_value=False, callback=_remember_json, help="Print JSON."
    )(func)
    return func


def global_options() -> GlobalOptions:
    """The ``--dir`` and ``--json`` this command line gave, wherever they stood."""
    return click.get_current_context().ensure_object(GlobalOptions)


def vault_path() -> Path:
    """The vault this command works on (``require_vault``: a clear error naming where it
    looked when there is none)."""
    from ..disk.layout import require_vault

    return require_vault(global_options().dir)


def open_vault() -> Vault:
    """The vault this command works on, opened (which brings its index up to date,
    with progress drawn when that is long work: the first index of a vault)."""
    from ..vault.vault import Vault
    from .output import progress_bar

    path = vault_path()
    with progress_bar() as progress:
        return Vault(path, progress=progress)
