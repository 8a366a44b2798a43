"""Exceptions the library raises on purpose.

Each one carries the hint a user (or a model, via the MCP server) needs to get
unstuck, so the CLI and the server can show ``str(error)`` as it is.
"""

from __future__ import annotations

import errno
from pathlib import Path


class AgentMemoryError(Exception):
    """Base class: every error here is something the caller can act on."""


class NotFound(AgentMemoryError):
    """No memory has that id or path (it may have expired or been forgotten)."""

    def __init__(self, memory_id: str) -> None:
        super().__init__(
            f"Memory {memory_id!r} not found — it may have expired or been forgotten; "
            "use recall or list_memories to find valid ids."
        )
        self.memory_id = memory_id


class InvalidInput(AgentMemoryError):
    """An argument breaks a documented limit or format; nothing was written."""


class VersionConflict(AgentMemoryError):
    """The file changed on disk since the caller read it."""

    def __init__(self, memory_id: str, expected: str, actual: str) -> None:
        super().__init__(
            f"Memory {memory_id!r} changed on disk since you read it (expected version "
            f"{expected[:12]}…, now {actual[:12]}…) — someone edited it. Read it again with "
            "get_memory and retry with the new version."
        )
        self.memory_id = memory_id
        self.expected = expected
        self.actual = actual


class Duplicate(AgentMemoryError):
    """The change would make this memory a copy of another one."""

    def __init__(self, memory_id: str, other_id: str) -> None:
        super().__init__(
            f"Updating {memory_id!r} would duplicate memory {other_id!r}, which already "
            "holds this content in the same namespace — update or forget that one instead."
        )
        self.memory_id = memory_id
        self.other_id = other_id


class VaultError(AgentMemoryError):
    """The vault folder is missing, not a folder, or cannot be written."""


class NoVault(VaultError):
    """No vault was named and none was found: says where it looked and how to name one."""

    def __init__(self, looked: list[Path], fallback: Path) -> None:
        shown = ", ".join(str(p) for p in looked[:8]) + (f" and {len(looked) - 8} more" if len(looked) > 8 else "")
        super().__init__(
            f"No vault found: looked for .memory/, .obsidian/ or a vault's .index/ in {shown}, then for {fallback}. "
            f"Create one with `agent-memory init` (makes ./.memory), or name the vault folder with "
            f"`agent-memory --dir PATH ...` (or AGENT_MEMORY_DIR=PATH)."
        )


class PathRefused(AgentMemoryError):
    """A path points outside the vault or into a folder that is off limits."""


class SettingsError(InvalidInput):
    """``<vault>/.agent-memory.toml`` is broken, unknown keys or bad values; it names which."""


class SecretRefused(InvalidInput):
    """The text holds what looks like a credential; nothing was written (the secret is never echoed)."""


class SavedMeanwhile(AgentMemoryError):
    """Someone saved the file between the tool's read and its write; their save stands."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"Someone saved {path} while you were changing it; their save was kept and your change was not "
            "made. Read it again (get_memory) and retry."
        )
        self.path = path


class ReadOnlyFile(AgentMemoryError):
    """A person made the file read-only: the tools do not change it (an editor would not)."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"{path} is read-only (its permissions let no one write it), so it was left as it is and nothing "
            "was changed. If it should change, ask its owner to make it writable (chmod u+w)."
        )
        self.path = path


class StillSaving(AgentMemoryError):
    """The file is empty, half-written or unclosed, as an editor leaves it mid-save."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(
            f"{path} {why}, as a file looks while an editor is saving it; it was not changed. "
            "Retry in a moment; if it stays like this, fix the file by hand."
        )
        self.path = path


class VaultGone(AgentMemoryError):
    """The vault folder was moved or deleted while this process had it open."""

    def __init__(self, root: str) -> None:
        super().__init__(
            f"The vault folder {root} was moved or deleted while agent-memory was running; nothing was "
            "written. Restart the server (or the command) with --dir pointing at the vault's new place."
        )
        self.root = root


class GitError(VaultError):
    """A git step of ``sync`` (or a commit of tool writes) cannot run or failed; says what to do."""


class SyncConflict(GitError):
    """``sync`` pulled changes that conflict with local ones: the merge is left for a person to finish."""

    def __init__(self, message: str, result: dict[str, object]) -> None:
        super().__init__(message)
        self.result = result


def disk_error(exc: OSError, what: str) -> VaultError:
    """A disk error as the one line a person can act on; nothing was changed."""
    reason = {
        errno.EROFS: "the vault is on a read-only file system",
        errno.ENOSPC: "the disk is full",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.EDQUOT: "the disk quota is exceeded",
    }.get(exc.errno or 0, exc.strerror or str(exc))
    return VaultError(f"Could not {what}: {reason}. Nothing was changed; free space or fix permissions and retry.")
