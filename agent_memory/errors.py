"""Exceptions the library raises on purpose.

Each one carries the hint a user (or a model, via the MCP server) needs to get
unstuck. ``str(error)`` is the MCP server's wording; where a message names operations
or arguments it is a ``wording.Said`` and the error keeps its facts apart (``operation``,
``argument``, ``suggestion``), so the CLI renders it with its own commands and options.
"""

from __future__ import annotations

import errno
from collections.abc import Mapping
from pathlib import Path

from .wording import GET_MEMORY, LIST_MEMORIES, RECALL, render, said


class AgentMemoryError(Exception):
    """Base class: every error here is something the caller can act on.

    ``message`` (a ``Said`` where it names operations or arguments) is what happened
    and what to do; the facts a front end may use apart: ``operation`` (what was
    attempted, by its library name), ``argument`` (the one at fault) and
    ``suggestion`` (what to do next)."""

    def __init__(self, message: str = "", *, operation: str | None = None, argument: str | None = None,
                 suggestion: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.operation = operation
        self.argument = argument
        self.suggestion = suggestion

    def render(self, words: Mapping[str, str]) -> str:
        """The message with the names in ``words`` said that way (the CLI's commands)."""
        return render(self.message, words)


class NotFound(AgentMemoryError):
    """No memory has that id or path (it may have expired or been forgotten)."""

    def __init__(self, memory_id: str, *, looked: list[str] | None = None) -> None:
        where = f": looked for {' and for '.join(looked)}" if looked else ""
        suggestion = said("use ", RECALL, " or ", LIST_MEMORIES, " to find valid ids.")
        super().__init__(
            said(f"Memory {memory_id!r} not found{where} — it may have expired or been forgotten; ", *suggestion.parts),
            argument="memory_id", suggestion=suggestion,
        )
        self.memory_id = memory_id
        self.looked = looked or []


class NotInTrash(NotFound):
    """Nothing the trash can give back answers to that key (restore's not found: the
    memory may well exist, so "it may have been forgotten" would mislead)."""

    def __init__(self, key: str) -> None:
        AgentMemoryError.__init__(
            self, f"Nothing in the trash answers to {key!r} (an id, an old path or a path in .trash/), so nothing was "
                  "restored. `agent-memory restore` with no argument lists what the trash can give back.",
            argument="key")
        self.memory_id = key
        self.looked = []


class InvalidInput(AgentMemoryError):
    """An argument breaks a documented limit or format; nothing was written."""


class VersionConflict(AgentMemoryError):
    """The file changed on disk since the caller read it."""

    def __init__(self, memory_id: str, expected: str, actual: str) -> None:
        suggestion = said("Read it again with ", GET_MEMORY, " and retry with the new version.")
        super().__init__(
            said(f"Memory {memory_id!r} changed on disk since you read it (expected version "
                 f"{expected[:12]}…, now {actual[:12]}…) — someone edited it. ", *suggestion.parts),
            argument="expected_version", suggestion=suggestion,
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
        suggestion = said("Read it again (", GET_MEMORY, ") and retry.")
        super().__init__(
            said(f"Someone saved {path} while you were changing it; their save was kept and your change was not "
                 "made. ", *suggestion.parts),
            suggestion=suggestion,
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
