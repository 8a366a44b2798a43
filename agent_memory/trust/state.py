"""This user's own state, kept outside every vault: never synced, never committed.

A vault may come from someone else (git, a synced folder), so whatever decides what the
tool may act on — its register of open operations, the settings this clone approved —
lives here, in a folder only this user writes: ``AGENT_MEMORY_STATE_DIR`` if set, else
``$XDG_STATE_HOME/agent-memory``, else ``~/.local/state/agent-memory`` (on Windows
``%LOCALAPPDATA%\\agent-memory\\state``).
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

STATE_ENV = "AGENT_MEMORY_STATE_DIR"


def state_dir() -> Path:
    """The folder for this user's state (not created here)."""
    explicit = os.environ.get(STATE_ENV)
    if explicit:
        return Path(explicit).expanduser().absolute()
    xdg = os.environ.get("XDG_STATE_HOME")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "agent-memory"
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "agent-memory" / "state"
    return Path.home() / ".local" / "state" / "agent-memory"


def vault_key(root: Path) -> str:
    """A stable name for one vault in this user's state: a hash of its real path, so two
    vaults (or two clones of one repository) never share state."""
    real = os.path.realpath(root)
    return hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:24]


def vault_state_dir(root: Path) -> Path:
    """The folder of this user's state about one vault (not created here)."""
    return state_dir() / "vaults" / vault_key(root)


def inside_vault(root: Path, path: Path) -> bool:
    """Whether ``path`` (symlinks resolved) is in the vault at ``root``: this user's state
    there is a file anyone who shares the vault could write, so it is never trusted."""
    vault = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == vault or real.startswith(vault.rstrip(os.sep) + os.sep)
