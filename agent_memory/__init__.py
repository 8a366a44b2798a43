"""agent-memory: a memory for AI agents that humans can read, edit and version."""

from .vault.vault import Vault

__all__ = ["Vault"]
__version__ = "0.1.0"
