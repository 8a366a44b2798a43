"""agent-memory: a memory for AI agents that humans can read, edit and version."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .vault.vault import Vault

__all__ = ["Vault"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``agent_memory.Vault`` imported on first use: a command that never opens a vault
    (``--version``, ``--help``) does not pay for the whole library."""
    if name == "Vault":
        from .vault.vault import Vault

        return Vault
    raise AttributeError(f"module 'agent_memory' has no attribute {name!r}")
