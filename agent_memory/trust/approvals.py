"""What this clone approved of a vault's settings: a pulled setting never loosens a guard.

The vault's ``.agent-memory.toml`` and ``.prompts/`` travel with the vault (git, a synced
folder), so a teammate can change them. A value that *tightens* a guard takes effect at
once; a value that *loosens* one (see ``RULES``) takes effect only once this clone has
approved that key with that very value, with ``agent-memory trust``. Until then it is
ignored — the safe default applies — and a one-line warning names the command.

Loosening values:

- ``secrets.mode = "warn"`` (credentials stored with a warning instead of refused);
- each fingerprint in ``secrets.allow`` (that value passes the credential guard);
- ``git.commit = true`` (tool writes are committed, and ``sync`` pushes them), or
  ``"all"`` (and ``sync`` commits and pushes the person's hand changes too);
- ``git.subfolder = true`` (commits and sync in a repository the vault is only a folder of);
- ``git.hooks = true`` (the repository's hooks run for the tool's own commits and pulls);
- each ``.prompts/*.md`` file, by name and content hash (its text reaches every agent).

``memories.folder`` (confined to a plain folder of the vault), ``recall.*`` and
``git.author`` loosen no guard and apply at once.

Approvals are bound to the value: approving ``git.commit = true`` approves that value
only, and a prompt file is approved with its content hash, so an edit pulled later needs
approving again. They live in this user's state folder (``userstate``), never in the
vault: ``<state>/vaults/<key>/approved.json``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import secrets
import shlex
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..disk import nofollow
from ..errors import InvalidInput
from ..settings import SETTINGS_FILE, Settings, load_settings
from .state import inside_vault, vault_state_dir

APPROVALS_FILE = "approved.json"
PROMPTS_KEY = ".prompts"
PROMPTS_DIR = ".prompts"
MAX_PROMPT_BYTES = 1 << 20  # as read_file: a prompt is a page of text


@dataclass(frozen=True)
class Rule:
    """One loosening setting: its key, its ``Settings`` field, the approvable values a
    file's value asks for (none: nothing loosened), and the value that applies when only
    ``approved`` of them are approved."""

    key: str
    field: str
    asks: Callable[[Any], list[str]]
    keep: Callable[[Any, list[str]], Any]


def _flag(value: Any) -> list[str]:
    """A boolean (or a later string such as ``"all"``) that loosens when set."""
    if value is True:
        return ["true"]
    return [value] if isinstance(value, str) and value else []


RULES: tuple[Rule, ...] = (
    Rule("secrets.mode", "secrets_mode", lambda v: ["warn"] if v == "warn" else [], lambda _v, _ok: "refuse"),
    Rule("secrets.allow", "secrets_allow", lambda v: list(v), lambda _v, ok: tuple(ok)),
    Rule("git.commit", "git_commit", _flag, lambda _v, _ok: False),
    Rule("git.subfolder", "git_subfolder", _flag, lambda _v, _ok: False),
    Rule("git.hooks", "git_hooks", _flag, lambda _v, _ok: False),
)
KEYS: tuple[str, ...] = (*(rule.key for rule in RULES), PROMPTS_KEY)


@dataclass(frozen=True)
class Loosening:
    """One value the vault asks for that loosens a guard, and whether this clone approved it."""

    key: str
    value: str
    approved: bool

    @property
    def shown(self) -> str:
        """As a person reads it: ``git.commit = true``, ``secrets.allow: "sha256:…"``."""
        if self.key == PROMPTS_KEY:
            name, _, digest = self.value.partition(" ")
            return f"{PROMPTS_DIR}/{name} ({digest[:len('sha256:') + 16]}…)"
        if self.key == "secrets.allow":
            return f'secrets.allow: "{self.value}"'
        if self.value in ("true", "false"):
            return f"{self.key} = {self.value}"
        return f'{self.key} = "{self.value}"'

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "shown": self.shown, "approved": self.approved}


# --------------------------------------------------------------------------- the approvals file


def approvals_path(root: Path) -> Path:
    return vault_state_dir(root) / APPROVALS_FILE


def _stamp(path: Path) -> object:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_mtime_ns, found.st_size, found.st_ino


def approvals_stamp(root: Path, path: Path | None = None) -> object:
    """Changes when the approvals change (a running server follows ``trust``). ``path``:
    ``approvals_path(root)`` worked out once by a caller that asks on every write (it
    resolves the vault's real path and hashes it)."""
    return _stamp(path or approvals_path(root))


def load_approvals(root: Path) -> dict[str, set[str]]:
    """key -> approved values. A missing or damaged file approves nothing (the safe side),
    nor does one in the vault (a state folder set or linked there: anyone who shares the
    vault could have written it)."""
    path = approvals_path(root)
    if inside_vault(root, path):
        return {}
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return {}
    found = data.get("approved") if isinstance(data, dict) else None
    if not isinstance(found, dict):
        return {}
    return {key: {v for v in values if isinstance(v, str)} for key, values in found.items()
            if key in KEYS and isinstance(values, list)}


def _save_approvals(root: Path, approved: dict[str, set[str]]) -> None:
    """Write the approvals whole or not at all, readable by this user only; never in the vault."""
    path = approvals_path(root)
    if inside_vault(root, path):
        raise InvalidInput(f"This user's state folder ({path.parent.parent.parent}) is inside the vault, where anyone "
                           "who shares the vault could write approvals; nothing was changed. Set "
                           "AGENT_MEMORY_STATE_DIR to a folder outside every vault, then run trust again.")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = {"vault": os.path.realpath(root), "approved": {k: sorted(v) for k, v in sorted(approved.items()) if v}}
    tmp = path.with_name(f".{APPROVALS_FILE}.{secrets.token_hex(6)}.tmp")
    fd = nofollow.open_write(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------- settings


def effective(raw: Settings, approved: dict[str, set[str]]) -> tuple[Settings, list[Loosening]]:
    """The settings that apply: each loosening value this clone has not approved replaced
    by the safe one; and every loosening value the file asks for, approved or not."""
    changes: dict[str, Any] = {}
    asked: list[Loosening] = []
    for rule in RULES:
        value = getattr(raw, rule.field)
        wanted = rule.asks(value)
        ok = [v for v in wanted if v in approved.get(rule.key, set())]
        asked.extend(Loosening(rule.key, v, v in ok) for v in wanted)
        if len(ok) != len(wanted):
            changes[rule.field] = rule.keep(value, ok)
    return dataclasses.replace(raw, **changes), asked


def settings_for(root: Path) -> Settings:
    """The settings that apply to the vault at ``root`` (``load_settings``, then approvals)."""
    return effective(load_settings(root), load_approvals(root))[0]


# --------------------------------------------------------------------------- prompts


def prompt_value(name: str, data: bytes) -> str:
    """What approving a prompt file binds to: its name and the whole SHA-256 of its bytes
    (the teammate writes both the text approved and the one that would replace it: a hash
    cut to 64 bits is one they could make collide)."""
    return f"{name} sha256:{hashlib.sha256(data).hexdigest()}"


def prompt_approved(root: Path, name: str, data: bytes) -> bool:
    return prompt_value(name, data) in load_approvals(root).get(PROMPTS_KEY, set())


def _prompt_files(root: Path) -> list[tuple[str, bytes]]:
    """The vault's ``.prompts/*.md`` (regular files, not symlinks, at most 1 MB), as the
    server would read them."""
    folder = root / PROMPTS_DIR
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return []
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    found = []
    for name in names:
        if not name.endswith(".md"):
            continue
        try:
            data = nofollow.read_regular(folder / name, MAX_PROMPT_BYTES)
        except OSError:
            continue
        if data is not None and len(data) <= MAX_PROMPT_BYTES:  # a folder, a pipe, a file too big: skipped
            found.append((name, data))
    return found


# --------------------------------------------------------------------------- the command


def review(root: Path) -> list[Loosening]:
    """Every loosening value the vault's settings and ``.prompts/`` ask for, approved or
    not (``SettingsError`` for a broken settings file)."""
    approved = load_approvals(root)
    asked = effective(load_settings(root), approved)[1]
    prompts = approved.get(PROMPTS_KEY, set())
    for name, data in _prompt_files(root):
        value = prompt_value(name, data)
        asked.append(Loosening(PROMPTS_KEY, value, value in prompts))
    return asked


def approve(root: Path, keys: list[str] | None = None) -> list[Loosening]:
    """Approve what the vault asks for now under ``keys`` (None: everything pending);
    returns what was newly approved. An unknown key is an error naming the known ones."""
    _check_keys(keys or [])
    pending = [item for item in review(root) if not item.approved and (keys is None or item.key in keys)]
    if pending:
        approved = load_approvals(root)
        for item in pending:
            approved.setdefault(item.key, set()).add(item.value)
        _save_approvals(root, approved)
    return [dataclasses.replace(item, approved=True) for item in pending]


def revoke(root: Path, keys: list[str] | None = None) -> list[str]:
    """Withdraw this clone's approvals for ``keys`` (None: all); the keys that had any."""
    _check_keys(keys or [])
    approved = load_approvals(root)
    gone = [key for key in approved if (keys is None or key in keys) and approved[key]]
    if gone:
        _save_approvals(root, {k: v for k, v in approved.items() if k not in gone})
    return gone


def _check_keys(keys: list[str]) -> None:
    unknown = [key for key in keys if key not in KEYS]
    if unknown:
        raise InvalidInput(f"{', '.join(map(repr, unknown))} {'is' if len(unknown) == 1 else 'are'} not a setting that "
                           f"needs approving; these do: {', '.join(KEYS)}.")


def approve_hint(root: Path, keys: list[str]) -> str:
    """The command that approves ``keys`` for the vault at ``root``."""
    return f"agent-memory --dir {shlex.quote(str(root))} trust {' '.join(dict.fromkeys(keys))}"


def ignored_warning(root: Path, pending: list[Loosening]) -> str:
    """One line: what the vault asks for that is ignored, and the command to approve it."""
    shown = ", ".join(item.shown for item in pending)
    settings = [item for item in pending if item.key != PROMPTS_KEY]
    where = f"{root / SETTINGS_FILE}" if settings else f"{root / PROMPTS_DIR}"
    they = "it is" if len(pending) == 1 else "they are"
    return (f"{where} asks for {shown}, which this clone has not approved, so {they} ignored (the safe default "
            f"applies). If you trust it, run: {approve_hint(root, [item.key for item in pending])}")
