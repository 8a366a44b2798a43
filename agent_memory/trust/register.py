"""This user's register of open operations, kept outside every vault.

Each record the tool leaves itself in a vault (a move's journal, an import's staging, a
parked write, a trash ledger line, a git journal line) could as well have been put
there by someone else: a teammate's push, a synced folder, a copy of an old genuine one.
So before writing a record the tool enters it here, in this user's state folder
(``state.vault_state_dir``): its kind, the vault's real path and the sha256 of the
record's bytes. A record is acted on only while the register lists it, for this vault,
this kind and exactly those bytes, and its entry is removed once it is done: a replay
of an old record is not listed any more.

One small file per entry (``register/<kind>.<hash prefix>``), written atomically (temp,
fsync, rename): processes never rewrite a shared file, so concurrent writers cannot
lose each other's entries. A register that cannot be read lists nothing (records are
then set aside, never acted on); one that cannot be written refuses the operation
before it starts.

``Tracked`` says which records git tracks (never read as records), and ``set_aside``
moves a record that is not listed into ``.index/set-aside/`` (never read as a record;
``agent-memory doctor`` lists it and can apply or discard it).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import secrets
import stat
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..disk import nofollow
from ..disk.durable import fsync_folder
from ..errors import PathRefused, VaultError
from ..git.run import gitfile_target, run
from .confine import tool_folder
from .state import inside_vault, vault_state_dir

log = logging.getLogger("agent_memory.trust")

REGISTER_DIRNAME = "register"
SET_ASIDE_DIRNAME = "set-aside"  # in the vault's .index/: records set aside, never read as records
ABOUT = "about.json"  # in each set-aside record's folder: what it is, why it was set aside, what it would do
KINDS = ("move", "import", "parked", "trash", "git-pending")
KEY_CHARS = 32  # hex digits of a record's hash that name its entry
PROBLEM_TTL = 1.0  # seconds a look at the register folder's health is trusted
INTENTS_DIRNAME = "intents"  # in the register: operations under way whose record is not written yet


class RegisterError(VaultError):
    """This user's register of open operations cannot be written."""


def digest(data: bytes) -> str:
    """A record's hash, as the register keeps it."""
    return hashlib.sha256(data).hexdigest()


def record_id(kind: str, record_hash: str) -> str:
    """How ``doctor`` names a record: its kind and the start of its hash."""
    return f"{kind}-{record_hash[:12]}"


class Register:
    """This user's register of one vault's open operations."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._vault: str | None = None
        self._folder: Path | None = None
        self._ready = False
        self._said = False
        self._problem: str | None = None
        self._looked = float("-inf")

    @property
    def vault(self) -> str:
        """The vault's real path (symlinks resolved), as entries name it."""
        if self._vault is None:
            self._vault = os.path.realpath(self._root)
        return self._vault

    @property
    def folder(self) -> Path:
        if self._folder is None:
            self._folder = vault_state_dir(self._root) / REGISTER_DIRNAME
        return self._folder

    def _name(self, kind: str, record_hash: str) -> Path:
        if kind not in KINDS or len(record_hash) < KEY_CHARS or not all(c in "0123456789abcdef" for c in record_hash):
            raise ValueError(f"not a register key: {kind} {record_hash!r}")
        return self.folder / f"{kind}.{record_hash[:KEY_CHARS]}"

    def problem(self) -> str | None:
        """Why this register cannot be trusted or used, in a sentence; None when it is fine
        (a register not made yet is fine: it lists nothing). Looked at again after a
        second at most: a trash listing asks once per ledger line."""
        now = time.monotonic()
        if now - self._looked > PROBLEM_TTL:
            self._problem, self._looked = self._find_problem(), now
        return self._problem

    def _find_problem(self) -> str | None:
        folder = self.folder
        if inside_vault(self._root, folder):
            return (f"this user's state folder {folder} is inside the vault, where anyone who shares the vault "
                    "could write it; set AGENT_MEMORY_STATE_DIR to a folder outside every vault")
        try:
            found = os.lstat(folder)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"this user's register {folder} cannot be read ({exc.strerror or exc})"
        if not stat.S_ISDIR(found.st_mode):
            return f"this user's register {folder} is not a folder"
        if not os.access(folder, os.R_OK | os.X_OK) or found.st_uid != os.geteuid():
            return f"this user's register {folder} is not this user's, or cannot be read"
        return None

    def exists(self) -> bool:
        return self.folder.is_dir()

    # ------------------------------------------------------------------ writing
    def enter(self, kind: str, record_hash: str, *, durable: bool = True) -> None:
        """List a record before it is written (``RegisterError`` when that cannot be done:
        the caller then writes no record and changes nothing). ``durable``: the entry is
        fsynced, and its folder; without it (for records that are not fsynced either) a
        crash may lose the entry, which only sets its record aside."""
        path = self._name(kind, record_hash)
        body = json.dumps({"kind": kind, "vault": self.vault, "hash": record_hash,
                           "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "pid": os.getpid()})
        try:
            self._written(path, body.encode("utf-8"), durable)
        except OSError as exc:
            raise self._error(exc) from exc

    def _written(self, path: Path, body: bytes, durable: bool) -> None:
        """``_write`` into the register, making its folders first (again, if someone
        removed them while this process ran)."""
        self._make_folder()
        try:
            path.parent.mkdir(exist_ok=True, mode=0o700)
            self._write(path, body, durable)
        except FileNotFoundError:
            self._ready = False
            self._make_folder()
            path.parent.mkdir(exist_ok=True, mode=0o700)
            self._write(path, body, durable)

    @staticmethod
    def _write(path: Path, body: bytes, durable: bool) -> None:
        """A small file, atomically: a temp file (fsynced when ``durable``), renamed."""
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        fd = nofollow.open_write(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, body)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if durable:
            fsync_folder(path.parent, strict=True)

    def _error(self, exc: OSError) -> RegisterError:
        reason = {errno.EROFS: "it is on a read-only file system", errno.ENOSPC: "the disk is full",
                  errno.EACCES: "permission denied", errno.EPERM: "permission denied",
                  errno.EDQUOT: "the disk quota is exceeded"}.get(exc.errno or 0, exc.strerror or str(exc))
        return RegisterError(
            f"Could not write this user's register of open operations ({self.folder}): {reason}. Nothing was "
            "changed; free space or fix permissions (AGENT_MEMORY_STATE_DIR names another folder) and retry."
        )

    def _make_folder(self) -> None:
        if self._ready:
            return
        self._looked = float("-inf")  # look afresh before writing
        problem = self.problem()
        if problem:
            raise OSError(problem)
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._ready = True

    def done(self, kind: str, record_hash: str) -> None:
        """The record was acted on (or removed): it is never listed again. A failure here
        leaves an entry that lists bytes no record holds any more: harmless."""
        try:
            self._name(kind, record_hash).unlink(missing_ok=True)
        except (OSError, ValueError):
            pass

    # ------------------------------------------------------------------ intents
    def intend(self, intent: dict[str, Any], *, durable: bool = True) -> Path:
        """Note an operation about to change the vault before its record can be written
        (a file moved into ``.trash/`` is recorded from the file as it lands): if the
        process dies in between, ``intents`` tells the next one what to finish or undo.
        Kept here, never in the vault. ``RegisterError`` when it cannot be written."""
        path = self.folder / INTENTS_DIRNAME / f"{time.time_ns()}-{secrets.token_hex(4)}.json"
        body = json.dumps({**intent, "vault": self.vault, "pid": os.getpid()}).encode("utf-8")
        try:
            self._written(path, body, durable)
        except OSError as exc:
            raise self._error(exc) from exc
        return path

    def intents(self) -> list[tuple[Path, dict[str, Any]]]:
        """This vault's intents whose process is gone (a live one is still at work)."""
        folder = self.folder / INTENTS_DIRNAME
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return []
        out = []
        for name in names:
            try:
                loaded = json.loads(nofollow.read_record(folder / name, 1 << 16))
            except (OSError, ValueError):
                continue
            if isinstance(loaded, dict) and loaded.get("vault") == self.vault and not _alive(loaded.get("pid")):
                out.append((folder / name, loaded))
        return out

    @staticmethod
    def drop_intent(path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass

    # ------------------------------------------------------------------ reading
    def listed(self, kind: str, record_hash: str) -> bool:
        """Whether the register lists this record, for this vault and kind, with exactly
        this hash. Anything in doubt (no register, one that cannot be read, an entry
        for another vault) is not listed."""
        try:
            path = self._name(kind, record_hash)
        except ValueError:
            return False
        if self.problem():
            self._say_problem()
            return False
        entry = _read_entry(path)
        return entry is not None and entry == {"kind": kind, "vault": self.vault, "hash": record_hash}

    def _say_problem(self) -> None:
        if not self._said:
            self._said = True
            warn(f"{self.problem()}; no record the tool left in {self._root} is acted on until that is fixed "
                 "(`agent-memory doctor` lists them)")

    def entries(self) -> list[dict[str, str]]:
        """Every entry for this vault (for ``doctor``)."""
        out: list[dict[str, str]] = []
        try:
            names = sorted(os.listdir(self.folder))
        except OSError:
            return out
        for name in names:
            entry = _read_entry(self.folder / name)
            if entry is not None and entry["vault"] == self.vault:
                out.append(entry)
        return out


def _alive(pid: object) -> bool:
    """Whether a process of that id runs (an intent it noted is still its business)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process, or no such call: alive, to be safe
        return True
    return True


_ENTRY_MAX = 4096  # bytes of one entry: a kind, a path and a hash


def _read_entry(path: Path) -> dict[str, str] | None:
    """An entry's kind, vault and hash; None when it is missing, damaged or not a file."""
    try:
        data = nofollow.read_regular(path, _ENTRY_MAX)
        loaded = json.loads(data) if data is not None and len(data) <= _ENTRY_MAX else None
    except (OSError, ValueError):
        return None
    if not isinstance(loaded, dict):
        return None
    entry = {key: loaded.get(key) for key in ("kind", "vault", "hash")}
    return entry if all(isinstance(v, str) for v in entry.values()) else None  # type: ignore[return-value]


def warn(sentence: str) -> None:
    """Name a record once, as a warning through ``logging`` (``agent_memory/log.py``)."""
    log.warning("%s", sentence)


# --------------------------------------------------------------------------- tracked by git


class Tracked:
    """Which of a vault's control files (``.index/``, ``.trash/``) git tracks: such a file
    came with a commit, so it is never read as a record. Asked of git only when a record
    exists and only when git's index changed since the last answer (one ``stat``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._marker: Path | None = None
        self._key: tuple[int, int, int] | None = None
        self._paths: frozenset[str] = frozenset()

    def among(self, rels: Iterable[str]) -> set[str]:
        """Those of ``rels`` (vault-relative files or folders) that git tracks, or that
        hold a file git tracks."""
        wanted = list(rels)
        if not wanted:
            return set()
        paths = self._tracked()
        if not paths:
            return set()
        return {r for r in wanted if r in paths or any(p.startswith(r.rstrip("/") + "/") for p in paths)}

    def _tracked(self) -> frozenset[str]:
        index = self._git_index()
        if index is None:
            return frozenset()
        try:
            found = os.stat(index)
            key = (found.st_mtime_ns, found.st_size, found.st_ino)
        except OSError:
            return frozenset()  # no index file: nothing is tracked yet
        if key != self._key:
            self._paths = self._ask_git()
            self._key = key
        return self._paths

    def _git_index(self) -> Path | None:
        """git's index file for the repository holding the vault, found by looking for
        ``.git`` from the vault up (no git process for a vault that is in no repository)."""
        if self._marker is not None and not os.path.lexists(self._marker):
            self._marker = None
        if self._marker is None:  # a few lstat calls, only when a record exists: a git init is seen at once
            here = Path(os.path.realpath(self.root))
            for folder in (here, *here.parents):
                if os.path.lexists(folder / ".git"):
                    self._marker = folder / ".git"
                    break
        if self._marker is None:
            return None
        if self._marker.is_dir():
            return self._marker / "index"
        named = gitfile_target(self._marker)  # a synced folder's `.git` may be a link to /dev/zero, a pipe
        return None if named is None else named / "index"

    def _ask_git(self) -> frozenset[str]:
        try:
            done = run(self.root, "ls-files", "-z", "--", ".index", ".trash", task="list tracked files")
        except VaultError:
            return frozenset()
        if done.returncode != 0:
            return frozenset()
        return frozenset(p for p in done.stdout.decode("utf-8", "surrogateescape").split("\0") if p)



# --------------------------------------------------------------------------- setting records aside


def set_aside(control_dir: Path, kind: str, record_hash: str, paths: list[Path], origin: str, why: str,
              what: str, written: dict[str, bytes] | None = None) -> str | None:
    """Move a record that is not to be acted on (its folder, or its files) into
    ``.index/set-aside/<kind>-<hash>/record/``, with ``about.json`` saying where it was,
    why it was set aside and what applying it would do; name it once in a logged warning. Returns
    its id (None when it could not be moved: it stays where it is, still not acted on).
    ``written``: files to write there instead (lines taken out of a journal)."""
    rid = record_id(kind, record_hash)
    base = control_dir / SET_ASIDE_DIRNAME
    folder = base / rid
    n = 1
    while os.path.lexists(folder):
        n += 1
        folder = base / f"{rid}-{n}"
    try:
        tool_folder(base)  # never a planted link: a record set aside holds memories' bytes
        (folder / "record").mkdir(parents=True)
        about = {"kind": kind, "hash": record_hash, "from": origin, "why": why, "what": what,
                 "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        (folder / ABOUT).write_text(json.dumps(about, ensure_ascii=False, indent=1), encoding="utf-8")
        for name, data in (written or {}).items():
            (folder / "record" / name).write_bytes(data)
        for path in paths:
            if os.path.lexists(path):
                os.rename(path, folder / "record" / path.name)
    except (OSError, PathRefused) as exc:
        warn(f"{origin} is {why}; it was not acted on, and could not be set aside ({getattr(exc, 'strerror', None) or exc})")
        return None
    warn(f"{origin} was not acted on: {why}. It would {what}. It is set aside as {folder.name} "
         f"(`agent-memory doctor` lists it; `agent-memory doctor --apply {folder.name}` or `--discard` decides)")
    return folder.name


def refusal(register: Register, tracked: Tracked, kind: str, record_hash: str, origin: str) -> str | None:
    """Why a record may not be acted on, or None when the register lists it and git does
    not track it."""
    if tracked.among([origin]):
        return "tracked by git (a commit brought it, so it is not this machine's record)"
    if register.listed(kind, record_hash):
        return None
    problem = register.problem()
    if problem:
        return f"not checked against this user's register ({problem})"
    if not register.exists():
        return (f"not in this user's register of open operations ({register.folder} does not exist: a record from "
                "another machine, or this user's state folder was lost)")
    return ("not in this user's register of open operations (planted, copied in by a sync, from another machine, "
            "or a replay of one already done)")
