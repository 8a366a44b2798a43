"""Tool writes as git commits (``git.commit``, ``serve --git-commit``) and ``agent-memory sync``.

A write never waits for git. When it succeeds, the files it changed (``Store.changes``,
noted where the store creates, replaces, trashes and restores files, and where a move
renames one) and a message (``remember: <title>``...) are appended to a small journal in
the vault's own ``.index/`` (``git-pending.jsonl``). A ``Committer`` thread (started by
the server) commits the journal after a short quiet spell, so writes that come close
together make one commit; ``sync`` commits whatever is still pending, from any process.

A commit touches only the journal's paths (``git commit --only``: a person's staged or
unstaged work elsewhere is never included), runs no hook of the repository unless this
clone opted in (``git.hooks = true``, approved; then a failing hook is logged and the
writes stay pending: the files are the truth, the commit a record), runs no program the
repository's own config names (``gitrepo.repository_overrides``),
and is not attempted in a state this module does not understand — a detached HEAD, a
rebase, merge or cherry-pick in progress, unmerged paths — which is said once in the
log. A busy repository (someone else's ``index.lock``) is retried a few seconds later.

Commits and ``sync`` act only when the vault is the repository's top folder, or when
``git.subfolder = true`` opts a vault inside a larger repository in: they must never
commit to, rebase or push a code branch by surprise.

Locks, always taken in this order: the git lock (``.index/git.lock``: one committer or
sync at a time per vault), the vault's write lock (writes, and ``sync`` while it joins
the histories and updates the index), the journal's own lock (held for an append or a
rewrite only). The committer never takes the vault's lock, so a commit never blocks a write.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import secrets
import re
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from .trust import confine
from .trust import credentials
from .note import parse
from .core import VaultCore
from .errors import GitError, SettingsError, SyncConflict
from .gitrepo import (BASE_CONFIG, DRIVER, DRIVER_NAME, HOOKS_OFF, SAFE_CONFIG, dubious_owner, driver_command,
                      replace_file, repository_overrides)
from .gitrepo import env as git_env
from .disk.locking import WriteLock, move_no_replace
from .models import SyncResult
from .trust.register import digest, read_record, refusal, set_aside
from .disk.layout import INDEX_DIRNAME, TMP_SUFFIX, is_memory_path
from .disk.layout import TRASH_DIRNAME

log = logging.getLogger("agent_memory.git")

PENDING_FILE = "git-pending.jsonl"
BATCH_WINDOW = 0.5  # seconds of quiet after a write before its commit: close writes share one
RETRY_AFTER = 5.0  # seconds before a busy repository (index.lock, a rebase) is tried again
LOCAL_TIMEOUT = 120.0  # a commit runs the repository's hooks, which may be slow
NETWORK_TIMEOUT = 120.0
PUSH_TRIES = 3  # a push refused because another clone pushed first: pull again, push again
FULL_RECONCILE_OVER = 2000  # changed files past which one reconcile is cheaper than per-file
MAX_TITLE = 72


# --------------------------------------------------------------------------- running git


@dataclass(frozen=True)
class Repo:
    """The repository a vault is in: its top folder, the vault's prefix in it (``''`` at
    the top, ``'notes/.memory/'`` in a subfolder) and its git folder."""

    vault: Path
    top: Path
    prefix: str
    git_dir: Path
    config_files: tuple[Path, ...] = ()  # the repository's own config files (.git/config, config.worktree)
    hooks: bool = False  # the repository's hooks run (``git.hooks = true``, approved)

    def run(self, *args: str, timeout: float = LOCAL_TIMEOUT, env: dict[str, str] | None = None,
            optional_locks: bool = False, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        """``git -C <vault> <args>``: no shell, literal pathspecs, a timeout, no prompts,
        no hooks (unless opted in) and no program the repository's own config names but
        our merge driver, pinned to this install's command."""
        config = (*BASE_CONFIG, *(() if self.hooks else HOOKS_OFF), *_DRIVER_PIN,
                  *repository_overrides(self.vault, self.config_files, keep=DRIVER))
        return _git(self.vault, *args, timeout=timeout, env=env, optional_locks=optional_locks, config=config,
                    stdin=stdin)

    def ok(self, *args: str, **kwargs: Any) -> str:
        """Run git; its stdout, or ``GitError`` with git's first line."""
        done = self.run(*args, **kwargs)
        if done.returncode != 0:
            raise GitError(f"git {args[0]} failed in {self.top}: {first_line(done)}.")
        return done.stdout.decode("utf-8", "surrogateescape")

    def busy_marker(self) -> str | None:
        """What a person (or another program) is in the middle of, or None."""
        found = self.operation()
        return found[0] if found else None

    def operation(self) -> tuple[str, str] | None:
        for name, what, how in _OPERATIONS:
            if (self.git_dir / name).exists():
                return what, how
        return None

    def in_scope(self, subfolder_allowed: bool) -> str | None:
        """Why commits and sync must leave this vault alone, or None."""
        if not self.prefix or subfolder_allowed:
            return None
        return (f"the vault is the folder {self.prefix.rstrip('/')} inside the git repository {self.top}, not its top "
                "folder, so agent-memory neither commits nor syncs it (that would commit to, rebase or push the "
                "repository's branch). Set [git] subfolder = true in the vault's .agent-memory.toml to allow it")


# An operation in progress: the file git keeps for it, what it is, and how a person ends it.
_OPERATIONS = (
    ("rebase-merge", "a rebase", "git rebase --continue, or git rebase --abort"),
    ("rebase-apply", "a rebase or git am", "git rebase --continue (git am --continue), or --abort"),
    ("MERGE_HEAD", "a merge", "resolve the conflicts, git add the files and git commit, or git merge --abort"),
    ("CHERRY_PICK_HEAD", "a cherry-pick", "git cherry-pick --continue, or git cherry-pick --abort"),
    ("REVERT_HEAD", "a revert", "git revert --continue, or git revert --abort"),
)


# Our merge driver as this install runs it, whatever a .git/config synced from elsewhere says.
_DRIVER_PIN = ("-c", f"merge.{DRIVER}.name={DRIVER_NAME}", "-c", f"merge.{DRIVER}.driver={driver_command()}")


def _git(cwd: Path, *args: str, timeout: float = LOCAL_TIMEOUT, env: dict[str, str] | None = None,
         optional_locks: bool = False, config: tuple[str, ...] = SAFE_CONFIG,
         stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    environment = git_env()
    environment.update(GIT_LITERAL_PATHSPECS="1", GIT_EDITOR="true", GIT_MERGE_AUTOEDIT="no")
    if optional_locks:
        environment.pop("GIT_OPTIONAL_LOCKS", None)
    environment.update(env or {})
    try:
        return subprocess.run(["git", "-C", str(cwd), *config, *args], capture_output=True, input=stdin,
                              stdin=None if stdin is not None else subprocess.DEVNULL, timeout=timeout,
                              env=environment, check=False)
    except FileNotFoundError:
        raise GitError("git is not installed (or not on PATH); agent-memory cannot commit or sync the vault.") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took more than {timeout:.0f} s and was stopped; nothing else was done. "
                       "Retry, or run the step by hand to see what it waits for.") from None


def first_line(done: subprocess.CompletedProcess[bytes]) -> str:
    """git's message, one line: its first ``error:``/``fatal:`` line, else its first line."""
    lines = [line.strip() for line in (done.stderr or done.stdout).decode("utf-8", "replace").splitlines() if line.strip()]
    for n, line in enumerate(lines):
        if line.startswith(("fatal:", "error:")):
            text = line.split(":", 1)[1].strip()
            if text.endswith(":"):  # "...would be overwritten by merge:" and the files on the next lines
                names = [x for x in lines[n + 1 : n + 4] if not x.startswith(("Please", "Aborting", "hint:"))]
                text = f"{text} {', '.join(names)}".rstrip(": ")
            return text
    return lines[0] if lines else f"exit status {done.returncode}"


def find_repo(vault: Path) -> Repo | None:
    """The repository holding ``vault``, or None when it is not in one."""
    done = _git(vault, "rev-parse", "--show-toplevel", "--show-prefix", "--absolute-git-dir",
                "--git-path", "config", "--git-path", "config.worktree")
    if done.returncode != 0:
        if b"not a git repository" in done.stderr:
            return None
        refused = dubious_owner(done.stderr)
        if refused:
            raise GitError(refused + ".")
        raise GitError(f"git cannot read the vault's repository: {first_line(done)}.")
    top, prefix, git_dir, config, worktree = (done.stdout.decode("utf-8", "surrogateescape").split("\n") + [""] * 5)[:5]
    return Repo(vault=vault, top=Path(top), prefix=prefix, git_dir=Path(git_dir),
                config_files=(vault / config, vault / worktree))


def _state_problem(repo: Repo) -> tuple[str, str] | None:
    """(kind, sentence) when the repository is in a state no commit should be made in:
    ``busy`` (an operation in progress: try again later), ``detached``, ``unmerged``."""
    busy = repo.operation()
    if busy:
        return "busy", (f"{busy[0]} is in progress in {repo.top}; agent-memory commits nothing until it is finished "
                        f"or aborted ({busy[1]})")
    if repo.run("symbolic-ref", "-q", "HEAD").returncode != 0:
        return "detached", (f"HEAD is detached in {repo.top} (not on a branch); agent-memory commits nothing there. "
                            "Switch to a branch (git switch <branch>)")
    unmerged = repo.run("ls-files", "-u", "-z")
    if unmerged.returncode == 0 and unmerged.stdout:
        return "unmerged", (f"{repo.top} has unresolved merge conflicts; agent-memory commits nothing until they are "
                            "resolved (edit the files, git add them, git commit)")
    return None


# --------------------------------------------------------------------------- the journal


class Pending:
    """Tool writes not committed yet: one JSON line each (``paths``, ``message``), appended
    under the vault's write lock, dropped by the committer or ``sync`` once committed.
    Each line is entered in this user's register first; a line it does not list (or a
    journal git tracks) is set aside when read, never committed."""

    def __init__(self, folder: Path, store: Any = None) -> None:
        self.path = folder / PENDING_FILE
        self._lock = WriteLock(folder / "git-pending.lock")
        self._folder = folder
        self._store = store  # the vault's Store: its register and tracked files (None: no checks, for tests)

    def add(self, entry: dict[str, Any]) -> None:
        text = json.dumps({**entry, "record": secrets.token_hex(8)}, ensure_ascii=False).encode("utf-8")
        with self._lock.hold():
            if self._store is not None:  # the journal is not fsynced: neither is its entry
                self._store.register.enter("git-pending", digest(text), durable=False)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
            try:
                os.write(fd, text + b"\n")
            finally:
                os.close(fd)

    def read(self) -> tuple[list[dict[str, Any]], int]:
        """The pending entries (a damaged line is skipped) and how many lines were read."""
        with self._lock.hold():
            try:
                data = read_record(self.path)
            except FileNotFoundError:
                return [], 0
            except (OSError, ValueError) as exc:  # a symlink, a pipe: no journal the tool wrote
                log.warning("%s is not read: %s", self.path, exc)
                return [], 0
            lines = data.split(b"\n")[:-1]  # a line being written has no newline yet
            lines = self._listed(lines, data[data.rfind(b"\n") + 1:])
        entries = []
        for line in lines:
            try:
                entry = json.loads(line)
            except (ValueError, RecursionError):
                continue
            paths = entry.get("paths") if isinstance(entry, dict) else None
            if isinstance(paths, list) and isinstance(entry.get("message"), str):
                entries.append({"paths": [p for p in paths if _safe_path(p)], "message": entry["message"]})
        return entries, len(lines)

    def _listed(self, lines: list[bytes], tail: bytes) -> list[bytes]:
        """The lines this user's register lists; the others are taken out of the journal
        and set aside (under the journal's lock)."""
        if self._store is None or not lines:
            return lines
        origin = f"{INDEX_DIRNAME}/{PENDING_FILE}"
        tracked = bool(self._store.tracked.among([origin]))
        keep = [line for line in lines if not tracked and self._store.register.listed("git-pending", digest(line))]
        if len(keep) == len(lines):
            return lines
        aside = [line for line in lines if line not in keep]
        why = refusal(self._store.register, self._store.tracked, "git-pending", digest(aside[0]), origin)
        tmp = self.path.with_name(f".{PENDING_FILE}.{os.getpid()}.tmp")
        tmp.write_bytes(b"".join(line + b"\n" for line in keep) + tail)
        os.replace(tmp, self.path)
        text = b"".join(line + b"\n" for line in aside)
        set_aside(self._folder, "git-pending", digest(text), [], origin,
                  f"{len(aside)} line(s) {why or 'not listed'}", _pending_would(aside), {PENDING_FILE: text})
        return keep

    def drop(self, count: int) -> None:
        """Forget the first ``count`` lines (committed); later ones stay."""
        if count <= 0:
            return
        with self._lock.hold():
            try:
                lines = self.path.read_bytes().split(b"\n")[:-1]
            except FileNotFoundError:
                return
            rest = lines[count:]
            if self._store is not None:
                for line in lines[:count]:
                    self._store.register.done("git-pending", digest(line))
            if not rest:
                self.path.unlink(missing_ok=True)
                return
            tmp = self.path.with_name(f".{PENDING_FILE}.{os.getpid()}.tmp")
            tmp.write_bytes(b"".join(line + b"\n" for line in rest))
            os.replace(tmp, self.path)


def _pending_would(lines: list[bytes]) -> str:
    """What committing journal lines would do, for a person deciding about them."""
    paths: list[str] = []
    for line in lines:
        try:
            found = json.loads(line).get("paths")
        except (ValueError, AttributeError):
            continue
        if isinstance(found, list):
            paths.extend(str(p) for p in found)
    shown = ", ".join(repr(p) for p in paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
    return f"commit {shown or 'nothing'} at the next commit or sync"


def _safe_path(path: Any) -> bool:
    """A vault-relative memory path (the journal's paths become git pathspecs): the memory
    rule every record's paths pass."""
    return confine.memory_problem(path) is None


# --------------------------------------------------------------------------- per-vault state


class GitState:
    """What one open vault knows about its repository: where it is, the journal, the git
    lock, the committer to wake, and which problems were already said in the log."""

    RECHECK = 10.0  # seconds: a vault not in git is looked at again after this long (git init)

    def __init__(self, vault: VaultCore) -> None:
        self.vault = vault
        self.pending = Pending(vault.store.control_dir, vault.store)
        self.lock = WriteLock(vault.store.control_dir / "git.lock")
        self.wake: Any = None  # the running committer's wake(), if any
        self._repo: Repo | None = None
        self._looked = 0.0
        self._said: set[str] = set()

    def repository(self) -> Repo | None:
        """The vault's repository; its hooks run only when ``git.hooks`` is on (approved)."""
        if self._repo is None and time.monotonic() - self._looked > self.RECHECK:
            self._looked = time.monotonic()
            self._repo = find_repo(self.vault.root)
        if self._repo is not None and self._repo.hooks != self.vault.settings.git_hooks:
            self._repo = dataclasses.replace(self._repo, hooks=self.vault.settings.git_hooks)
        return self._repo

    def say_once(self, key: str, sentence: str) -> None:
        """Log a problem once (until things work again)."""
        if key not in self._said:
            self._said.add(key)
            log.warning("%s: %s.", self.vault.root, sentence)

    def all_well(self) -> None:
        self._said.clear()


_state_lock = threading.Lock()


def state_of(vault: VaultCore) -> GitState:
    with _state_lock:
        if vault.git_state is None:
            vault.git_state = GitState(vault)
        return vault.git_state


# --------------------------------------------------------------------------- what a write did


def _clean(title: str) -> str:
    title = " ".join(title.split())
    return title if len(title) <= MAX_TITLE else title[: MAX_TITLE - 1] + "…"


def describe(vault: VaultCore, changes: list[tuple[str, str, str]]) -> tuple[list[str], str]:
    """The paths one write changed and its commit message (``remember: <title>``...)."""
    paths: list[str] = []
    kinds: dict[str, list[tuple[str, str]]] = {}
    seen: set[str] = set()
    for rel, how, detail in changes:
        for path in (rel, detail) if how == "moved" else (rel,):
            if path not in paths:
                paths.append(path)
        if rel in seen and how == "changed":
            continue  # created (or moved) then edited in the same write: still that
        seen.add(rel)
        kinds.setdefault(how, []).append((rel, detail))

    def title(rel: str, detail: str = "", trashed: bool = False) -> str:
        if trashed:  # gone from the vault: its title from the copy in the trash
            try:
                return _clean(parse.parse((vault.root / detail).read_bytes(), rel).title)
            except OSError:
                return rel
        row = vault.index.by_path(rel)
        return _clean(row["title"]) if row is not None else rel

    def one_or_many(verb: str, items: list[tuple[str, str]], many: str, trashed: bool = False) -> str:
        if len(items) == 1:
            return f"{verb}: {title(items[0][0], items[0][1], trashed)}"
        return f"{many}: {len(items)} memories"

    if "moved" in kinds:
        new, old = kinds["moved"][0]
        edited = [rel for rel, _ in kinds.get("changed", []) if rel not in (new, old)]
        links = f", links updated in {len(edited)} notes" if edited else ""
        message = f"move: {title(new)} ({old} -> {new}){links}"
    elif "restored" in kinds:
        message = one_or_many("restore", kinds["restored"], "restore")
    elif "forgotten" in kinds:
        message = one_or_many("forget", kinds["forgotten"], "forget", trashed=True)
    elif "expired" in kinds:
        message = one_or_many("expire", kinds["expired"], "expire", trashed=True)
    elif "created" in kinds:
        message = one_or_many("remember", kinds["created"], "import")
    else:
        message = one_or_many("update", kinds.get("changed", []), "update")
    return [p for p in paths if _safe_path(p)], credentials.redact_for_names(message)


# --------------------------------------------------------------------------- committing


@dataclass
class Outcome:
    """What one attempt to commit the pending writes did."""

    status: str  # "committed", "nothing", "busy" (retry later), "refused" (a state not understood), "failed"
    writes: int = 0  # pending writes it covered
    commit: str = ""
    message: str = ""
    paths: list[str] = field(default_factory=list)
    problem: str = ""  # for "busy"/"refused": which state ("busy", "detached", "unmerged")
    withheld: list[str] = field(default_factory=list)  # "path: kind (fingerprint …)": not committed


def _changed_paths(repo: Repo, paths: list[str]) -> tuple[list[str], list[str]]:
    """Of ``paths`` (vault-relative), those that differ from HEAD, and those of them git
    does not track yet."""
    done = repo.run("status", "--porcelain", "-z", "--untracked-files=all", "--no-renames", "--", *paths)
    if done.returncode != 0:
        raise GitError(f"git status failed in {repo.top}: {first_line(done)}.")
    changed, untracked = [], []
    for item in done.stdout.decode("utf-8", "surrogateescape").split("\0"):
        if len(item) < 4 or not item[3:].startswith(repo.prefix):
            continue
        rel = item[3:][len(repo.prefix):]
        changed.append(rel)
        if item[:2] == "??":
            untracked.append(rel)
    return changed, untracked


def _identity(repo: Repo, author: str) -> tuple[list[str], dict[str, str]]:
    """``--author`` and the committer's environment for the ``git.author`` setting (the
    committer too, when git has no identity of its own); nothing when it is unset."""
    if not author:
        return [], {}
    env: dict[str, str] = {}
    if repo.run("var", "GIT_COMMITTER_IDENT").returncode != 0:
        name, _, email = author.rpartition(" <")
        env = {"GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email.rstrip(">")}
    return [f"--author={author}"], env


def _message(entries: list[dict[str, Any]]) -> str:
    """The commit's message: never a credential, nor a password's value (SPEC §3)."""
    messages = [credentials.redact_for_names(e["message"]) for e in entries]
    if len(messages) == 1:
        return messages[0]
    return f"{messages[0]} (+{len(messages) - 1} more)\n\n" + "\n".join(f"- {m}" for m in messages) + "\n"


def commit_pending(vault: VaultCore, state: GitState, repo: Repo) -> Outcome:
    """Commit every pending write, in one commit, touching only their paths. The caller
    holds the git lock."""
    entries, taken = state.pending.read()
    if not taken:
        return Outcome("nothing")
    problem = _state_problem(repo)
    if problem is not None:
        kind, sentence = problem
        return Outcome("busy" if kind == "busy" else "refused", len(entries), message=sentence, problem=kind)
    paths = list(dict.fromkeys(p for e in entries for p in e["paths"]))
    changed, untracked = _changed_paths(repo, paths) if paths else ([], [])
    held = _holding_credentials(vault, changed)
    withheld = [f"{rel}: {why}" for rel, why in held.items()]
    changed = [p for p in changed if p not in held]
    untracked = [p for p in untracked if p not in held]
    if not changed:  # undone since, committed by a person already, or all withheld
        _keep_pending(state, taken, entries, held)
        return Outcome("nothing", len(entries), withheld=withheld)
    if untracked:
        added = repo.run("add", "-A", "--", *untracked, optional_locks=True)
        if added.returncode != 0:
            return _failed(repo, added, len(entries), changed)
    flags, env = _identity(repo, vault.settings.git_author)
    done = repo.run("commit", "--only", "--quiet", "--no-edit", "-m", _message(entries), *flags, "--", *changed,
                    env=env, optional_locks=True)
    if done.returncode != 0:
        if untracked:  # give the person's staging area back as it was
            repo.run("reset", "-q", "--", *untracked, optional_locks=True)
        return _failed(repo, done, len(entries), changed)
    _keep_pending(state, taken, entries, held)
    head = repo.run("rev-parse", "HEAD").stdout.decode().strip()
    return Outcome("committed", len(entries), head, _message(entries).split("\n")[0], changed, withheld=withheld)


def _holding_credentials(vault: VaultCore, paths: list[str]) -> dict[str, str]:
    """Of the files about to be committed, those holding a credential not in
    ``secrets.allow`` (a person's hand edit included), or that cannot be read to be
    checked: path -> what was found (kinds and fingerprints, never the value). A file
    that is gone is a deletion: nothing of it leaves."""
    settings = vault.settings
    held: dict[str, str] = {}
    for rel in paths:
        try:
            data = _as_committed(vault.root / rel)
        except FileNotFoundError:
            continue
        except OSError as exc:
            held[rel] = f"cannot be read to check it for credentials ({exc.strerror or exc})"
            continue
        found = credentials.check_text(data.decode("utf-8", "replace"), settings)
        if found:
            held[rel] = ", ".join(f"{f.kind} (line {f.line}, fingerprint {f.fingerprint})" for f in found[:3]) + (
                f" and {len(found) - 3} more" if len(found) > 3 else "")
    return held


def _as_committed(path: Path) -> bytes:
    """What git would commit for ``path``: a regular file's bytes, a symlink's target text
    (git stores the link, never what it points to); nothing for anything else."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return os.fsencode(os.readlink(path))
    if not stat.S_ISREG(info.st_mode):
        return b""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _keep_pending(state: GitState, taken: int, entries: list[dict[str, Any]], held: dict[str, str]) -> None:
    """Drop the committed journal lines; a withheld file stays pending, so the next commit
    takes it once the credential is removed (or its fingerprint approved)."""
    state.pending.drop(taken)
    waiting = [entry for entry in entries if any(p in held for p in entry["paths"])]
    if waiting:  # one line for them all: edits of a withheld file never pile up in the journal
        state.pending.add({"paths": list(held), "message": waiting[0]["message"], "at": time.time()})


def _failed(repo: Repo, done: subprocess.CompletedProcess[bytes], writes: int, paths: list[str]) -> Outcome:
    if (repo.git_dir / "index.lock").exists():
        return Outcome("busy", writes, message=f"git is busy in {repo.top} (another git command holds index.lock)",
                       problem="index.lock")
    text = (done.stderr or done.stdout).decode("utf-8", "replace").strip()
    lines = [line for line in text.splitlines() if line.strip()][-5:]
    hint = ""
    if "identity unknown" in text or "tell me who you are" in text:
        hint = ' (set [git] author = "Name <email>" in the vault\'s .agent-memory.toml, or git config user.email)'
    return Outcome("failed", writes, message=f"git commit failed{hint}: {' | '.join(lines) or 'no output'}",
                   paths=paths)


# --------------------------------------------------------------------------- the committer


class Committer:
    """Commits a vault's tool writes in the background, after ``window`` seconds of quiet.

    ``flush()`` commits what is pending now and waits for it (tests, and the server's
    exit through ``stop()``). It never raises into a write: every problem is logged."""

    def __init__(self, vault: VaultCore, *, window: float = BATCH_WINDOW, retry: float = RETRY_AFTER) -> None:
        self.vault = vault
        self.state = state_of(vault)
        self.window = window
        self.retry = retry
        self.last: Outcome | None = None
        self._cond = threading.Condition()
        self._wanted = 1  # a first run commits what a crash or the CLI left pending
        self._done = 0
        self._hurry = False
        self._stopping = False
        self._retry_at: float | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        self.state.wake = self.wake
        self._thread = threading.Thread(target=self._loop, name="agent-memory-git-commit", daemon=True)
        self._thread.start()
        return self

    def wake(self) -> None:
        with self._cond:
            self._wanted += 1
            self._cond.notify_all()

    def flush(self, timeout: float = 60.0) -> Outcome | None:
        """Commit now what is pending and wait (at most ``timeout`` s); the outcome."""
        with self._cond:
            self._wanted += 1
            target = self._wanted
            self._hurry = True
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._done >= target or self._thread is None or not self._thread.is_alive(),
                                timeout)
            return self.last

    def stop(self) -> None:
        """Commit what is pending, then end the thread."""
        if self._thread is None:
            return
        self.flush()
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout=60)
        if self.state.wake == self.wake:
            self.state.wake = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and self._wanted == self._done:
                    due = None if self._retry_at is None else max(0.0, self._retry_at - time.monotonic())
                    if due == 0.0:
                        self._retry_at = None
                        self._wanted += 1
                        break
                    self._cond.wait(due)
                if self._stopping and self._wanted == self._done:
                    return
                if not self._hurry:  # let close writes gather into one commit
                    self._cond.wait_for(lambda: self._hurry or self._stopping, self.window)
                self._hurry = False
                target = self._wanted
            outcome = self.run_once()
            with self._cond:
                self.last = outcome
                self._done = target
                self._retry_at = time.monotonic() + self.retry if outcome.status == "busy" else None
                self._cond.notify_all()

    def run_once(self) -> Outcome:
        """One attempt, under the git lock; never raises."""
        state = self.state
        if not state.pending.path.exists():
            return Outcome("nothing")  # no git command at all while nothing is pending
        try:
            repo = state.repository()
            if repo is None:
                return Outcome("refused", message="not in a git repository")
            scope = repo.in_scope(self.vault.settings.git_subfolder)
            if scope:
                state.say_once("scope", scope)
                return Outcome("refused", message=scope)
            with state.lock.hold():
                outcome = commit_pending(self.vault, state, repo)
        except Exception as exc:  # noqa: BLE001 - the committer outlives any one failure, and says it
            outcome = Outcome("failed", message=str(exc))
        for item in outcome.withheld:
            state.say_once(f"withheld {item}", f"not committed: {item}, not in secrets.allow; remove it from the "
                           "file (or approve its fingerprint), and the next commit takes it")
        if outcome.status == "committed":
            state.all_well()
            log.info("%s: committed %s (%d write%s)", self.vault.root, outcome.message, outcome.writes,
                     "" if outcome.writes == 1 else "s")
        elif outcome.status in ("refused", "busy"):
            state.say_once(outcome.problem or outcome.message, outcome.message + "; the writes stay "
                           "pending (the next commit or `agent-memory sync` takes them)")
        elif outcome.status == "failed":
            state.say_once(outcome.message, outcome.message + "; the writes stand and stay pending")
        return outcome


# --------------------------------------------------------------------------- the vault's part


class GitSync(VaultCore):
    def _written(self, changes: list[tuple[str, str, str]]) -> None:
        """Note a successful write's files in the journal when commits are on and the
        vault may be committed (checked once per process; said once otherwise), then wake
        the committer. Under the vault's lock: no git command runs here but the first look
        for the repository."""
        if not (self.git_commit or (self.git_commit is None and self.settings.git_commit)):
            return
        state = state_of(self)
        try:
            repo = state.repository()
            if repo is None:
                state.say_once("no-git", "git.commit is on but the vault is not in a git repository; nothing is "
                               "committed (git init in it to start)")
                return
            scope = repo.in_scope(self.settings.git_subfolder)
            if scope:
                state.say_once("scope", scope)
                return
            paths, message = describe(self, changes)
            if paths:
                state.pending.add({"paths": paths, "message": message, "at": time.time()})
        except Exception as exc:  # noqa: BLE001 - the write succeeded: it stands whatever its record does
            state.say_once("record", f"could not note a write for a git commit: {exc}")
            return
        if state.wake is not None:
            state.wake()

    def sync(self) -> SyncResult:
        """Commit pending tool writes, pull (rebase; a merge when the rebase conflicts),
        bring the index up to date with the files that changed, push.

        A person's uncommitted edits are stashed around the pull and put back
        (``--autostash``). Refused, with what to do, when the vault is not in git, not
        the repository's top folder (unless ``git.subfolder``), on a detached HEAD or in
        the middle of a rebase or merge, and without a remote or an upstream branch. A
        conflict leaves the merge in progress for a person (``SyncConflict``)."""
        state = state_of(self)
        repo = state.repository()
        if repo is None:
            raise GitError(f"The vault {self.root} is not in a git repository, so there is nothing to sync. Put it "
                           "in one (git init, git remote add origin URL) first.")
        scope = repo.in_scope(self.settings.git_subfolder)
        if scope:
            raise GitError(scope[0].upper() + scope[1:] + ".")
        with state.lock.hold():
            result: SyncResult | None = None
            for _attempt in range(PUSH_TRIES):
                with self._writing():  # tool writes wait; each round commits what they left first
                    branch, remote, merge_ref = _upstream(repo)
                    committed, withheld = _commit_for_sync(self, state, repo)
                    _fetch(repo, remote)
                    step = self._integrate(repo, branch, remote, merge_ref)
                step["committed"] = committed
                if withheld:
                    step["withheld"] = withheld
                private = tracked_private(repo)
                if private:
                    step["tracked_private"] = private
                result = step if result is None else _added(result, step)
                refused, result["pushed"] = _push(repo, remote, merge_ref)
                if not refused:
                    self._settings_pulled(result)
                    return result
        raise GitError(f"The remote kept refusing the push (others pushed meanwhile, {PUSH_TRIES} tries); "
                       "run agent-memory sync again.")

    def _settings_pulled(self, result: SyncResult) -> None:
        """Read the settings again after a pull: a loosening value that came with it is
        named now (``settings`` warns), and a broken file is said, not raised: the sync
        itself went through."""
        try:
            self.settings  # noqa: B018 - read for its warning
        except SettingsError as exc:
            result["note"] = f"{result.get('note', '')} {exc}".strip()

    def _integrate(self, repo: Repo, branch: str, remote: str, merge_ref: str) -> SyncResult:
        """Join the upstream branch into HEAD and update the index; under both locks."""
        tracking = f"refs/remotes/{remote}/{merge_ref.removeprefix('refs/heads/')}"
        old = _rev(repo, "HEAD")
        up = _rev(repo, tracking)
        result = SyncResult(repository=str(repo.top), branch=branch, upstream=f"{remote}/{merge_ref.removeprefix('refs/heads/')}",
                            committed=0, pulled=0, pushed=0, method="none", merged=[], conflicts=[], indexed=0)
        if up is None or old is None or up == old:
            return result
        base = repo.run("merge-base", old, up).stdout.decode().strip()
        if not base:
            raise GitError(f"{branch} and {result['upstream']} have no common history; join them by hand "
                           f"(git pull --allow-unrelated-histories) once, then sync.")
        if base == up:
            return result  # only local commits: nothing to pull
        result["pulled"] = int(repo.ok("rev-list", "--count", f"{base}..{up}").strip() or 0)
        _check_merge_attributes(repo, old, up)
        planted = _private_changes(repo, base, up)
        if planted:
            raise GitError(f"Cannot sync: the commits to pull add or change {_shown(planted)}, under the vault's "
                           f"{INDEX_DIRNAME}/ or {TRASH_DIRNAME}/: pulling them would overwrite this machine's index, "
                           "records or trash. Nothing was pulled or pushed. Whoever pushed them should take them out "
                           f"of git (git rm -r --cached {INDEX_DIRNAME} {TRASH_DIRNAME}, commit, push); then sync again.")
        dirty = _dirty(repo)
        stashes = _stash_count(repo)
        if base == old:
            result["method"] = "fast-forward"
            done = repo.run("merge", "--ff-only", "--autostash", up, optional_locks=True)
        else:
            result["method"] = "rebase"
            done = repo.run("rebase", "--autostash", up, optional_locks=True)
            if done.returncode != 0 and repo.busy_marker():
                repo.run("rebase", "--abort", optional_locks=True)  # one merge is easier to resolve than N replays
                result["method"] = "merge"
                named = tracking.removeprefix("refs/remotes/")  # "Merge remote-tracking branch 'origin/main'"
                done = repo.run("merge", "--no-edit", "--autostash", named, optional_locks=True)
        in_vault, elsewhere = _unmerged(repo)
        split = _keep_both_added(repo, in_vault) if in_vault else {}
        if split:
            result["split"] = sorted(split.values())
            in_vault, elsewhere = _unmerged(repo)
            if not in_vault and not elsewhere:
                done = repo.run("commit", "--no-edit", optional_locks=True)  # the merge, concluded
                if done.returncode != 0:
                    raise GitError(f"sync kept both memories added at {', '.join(sorted(split))} but could not "
                                   f"commit the merge: {first_line(done)}. Commit it (git commit), then sync again.")
        conflicts = in_vault + elsewhere
        if done.returncode != 0 and not conflicts:
            if repo.busy_marker() == "a rebase":
                repo.run("rebase", "--abort", optional_locks=True)
            raise GitError(f"git could not pull {result['upstream']} into {branch}: {first_line(done)}. "
                           "Nothing was changed; fix that, then sync again.")
        ours: set[str] = set()
        if base != old:  # a rebase rewrites the files of the commits it replays: their stat changes too
            ours = set(_names(repo, base, old))
            result["merged"] = sorted(p for p in _names(repo, base, up) if p in ours and p not in conflicts)
        new = _rev(repo, "HEAD") or old
        changed = set(_names(repo, old, new)) | ours | set(in_vault) | dirty | set(split) | set(split.values())
        result["indexed"] = self._follow(sorted(changed))
        result["conflicts"] = conflicts
        stashed = _stash_count(repo) > stashes  # the autostash could not be put back cleanly: git kept it
        shown = ", ".join(conflicts[:5]) + (f" and {len(conflicts) - 5} more" if len(conflicts) > 5 else "")
        if stashed:
            result["note"] = ("Your uncommitted edits conflicted with what was pulled: they are kept in the stash "
                              "(git stash list).")
        if conflicts and stashed and not repo.busy_marker():
            raise SyncConflict(
                f"sync pulled {result['upstream']}, but your uncommitted edits to {shown} conflict with it: each "
                "file now holds both versions (between <<<<<<< Updated upstream and >>>>>>> Stashed changes) and "
                "your edits are also kept in the stash (git stash list). Edit each file to keep what is right, then "
                "git restore --staged FILE (it stays your uncommitted edit) and git stash drop; then sync again.",
                dict(result),
            )
        if conflicts:
            raise SyncConflict(
                f"sync pulled {result['upstream']} but {len(conflicts)} file{'s' if len(conflicts) != 1 else ''} "
                f"conflict: {shown}. Resolve each (keep what is right, remove the <<<<<<< ======= >>>>>>> lines), "
                "then git add them, git commit, and run agent-memory sync again (or git merge --abort to go back).",
                dict(result),
            )
        return result

    def _follow(self, paths: list[str]) -> int:
        """Fold the files that changed into the index: per file, or one reconcile for many."""
        paths = [p for p in paths if is_memory_path(p)]
        if len(paths) > FULL_RECONCILE_OVER:
            self.reconcile()
        else:
            for rel in paths:
                self.reconcile_path(rel)
        return len(paths)


def _added(before: SyncResult, after: SyncResult) -> SyncResult:
    """Two rounds of one sync (the push was refused once) as one summary."""
    for key in ("committed", "pulled", "indexed"):
        after[key] += before[key]
    after["merged"] = sorted({*before["merged"], *after["merged"]})
    if "withheld" in before:
        after["withheld"] = sorted({*before["withheld"], *after.get("withheld", [])})
    if after["method"] == "none":
        after["method"] = before["method"]
    return after


def _commit_for_sync(vault: VaultCore, state: GitState, repo: Repo) -> tuple[int, list[str]]:
    problem = _state_problem(repo)
    if problem is not None:
        raise GitError(f"Cannot sync: {problem[1]}.")
    outcome = commit_pending(vault, state, repo)
    if outcome.status == "failed":
        raise GitError(f"Cannot sync: the pending tool writes could not be committed: {outcome.message}.")
    if outcome.status in ("busy", "refused"):
        raise GitError(f"Cannot sync: {outcome.message}.")
    return (outcome.writes if outcome.status == "committed" else 0), outcome.withheld


_PRIVATE = (INDEX_DIRNAME, TRASH_DIRNAME)  # this machine's index, records and trash: never shared


def _private_changes(repo: Repo, a: str | None, b: str) -> list[str]:
    """Files under the vault's ``.index/`` or ``.trash/`` that commit ``b`` adds or changes
    since ``a`` (None: every such file ``b`` holds); deletions are fine: they take them out."""
    if a is None:
        out = repo.ok("ls-tree", "-r", "-z", "--name-only", b, "--", *_PRIVATE)
    else:
        out = repo.ok("diff", "--name-only", "-z", "--no-renames", "--diff-filter=AMTC", "--relative", a, b,
                      "--", *_PRIVATE)
    return sorted(p for p in out.split("\0") if p)


def tracked_private(repo: Repo) -> list[str]:
    """Files under the vault's ``.index/`` or ``.trash/`` that git tracks (force-added by
    someone): never read as records, never committed or pushed by the tool."""
    return sorted(p for p in repo.ok("ls-files", "-z", "--", *_PRIVATE).split("\0") if p)


def _shown(paths: list[str]) -> str:
    return ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")


# How git may merge a memory file: its own text merge (unspecified, set, "text") or ours.
_MERGES_KEPT = {"unspecified", "set", "text", DRIVER}


def _check_merge_attributes(repo: Repo, old: str, up: str) -> None:
    """Refuse to pull when git would merge memory files some other way than by its text
    merge or ours — ``binary`` or ``-merge`` (one side silently kept), ``union``, another
    driver — as the attributes say now, or as a pulled ``.gitattributes`` would say: a
    teammate's line must not silently change how this clone merges memories. ``git
    setup`` pins ours in ``.git/info/attributes``, which no pull changes."""
    found = _merge_attributes(repo, repo.ok("ls-files", "-z").split("\0"))
    if any(name.rsplit("/", 1)[-1] == ".gitattributes" for name in _names(repo, old, up, whole=True)):
        with tempfile.TemporaryDirectory(prefix="agent-memory-attributes-") as folder:
            index = {"GIT_INDEX_FILE": str(Path(folder) / "index")}  # the pulled tree; the real index untouched
            repo.ok("read-tree", up, env=index)
            pulled = repo.ok("ls-tree", "-r", "-z", "--name-only", up).split("\0")
            found.update(_merge_attributes(repo, pulled, cached=True, env=index))
    if found:
        shown = ", ".join(f"{path} (merge={how})" for path, how in sorted(found.items())[:3])
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        raise GitError(f"Cannot sync: git would merge memory files another way than line by line or with "
                       f"agent-memory's driver: {shown}{more}, set by a .gitattributes here or in what would be "
                       "pulled. Nothing was pulled or pushed. Run agent-memory git setup (it pins memory files to "
                       "agent-memory's merge in .git/info/attributes, which no pull changes), or remove that line, "
                       "then sync again.")


def _merge_attributes(repo: Repo, paths: list[str], *, cached: bool = False,
                      env: dict[str, str] | None = None) -> dict[str, str]:
    """Memory files among ``paths`` (vault-relative) whose merge attribute is not one we keep."""
    memory = [p for p in paths if p and is_memory_path(p)]
    if not memory:
        return {}
    done = repo.run("check-attr", *(["--cached"] if cached else []), "-z", "--stdin", "merge", env=env,
                    stdin=("\0".join(memory) + "\0").encode("utf-8", "surrogateescape"))
    if done.returncode != 0:
        raise GitError(f"git check-attr failed in {repo.top}: {first_line(done)}.")
    fields = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    return {path: how for path, _attr, how in zip(fields[::3], fields[1::3], fields[2::3], strict=False)
            if how not in _MERGES_KEPT}


def _upstream(repo: Repo) -> tuple[str, str, str]:
    """The branch, its remote and the remote branch it follows; refused with what to do."""
    problem = _state_problem(repo)
    if problem is not None:
        raise GitError(f"Cannot sync: {problem[1]}.")
    branch = repo.ok("symbolic-ref", "--short", "HEAD").strip()
    remote = repo.run("config", "--get", f"branch.{branch}.remote").stdout.decode().strip()
    merge_ref = repo.run("config", "--get", f"branch.{branch}.merge").stdout.decode().strip()
    if not remote or not merge_ref or remote == ".":
        remotes = repo.ok("remote").split()
        if not remotes:
            raise GitError(f"The repository {repo.top} has no remote, so there is nothing to sync with. Add one: "
                           f"git remote add origin URL, then git push -u origin {branch}.")
        raise GitError(f"The branch {branch} has no upstream branch to sync with. Set one once: "
                       f"git push -u {remotes[0]} {branch}.")
    return branch, remote, merge_ref


_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_SCP_LIKE = re.compile(r"[^/\\:]{2,}:")  # user@host:path (one letter before ':' is a Windows drive)


def _local_pack_programs(repo: Repo, remote: str, option: str, program: str) -> list[str]:
    """For a remote on this machine (a path, file://), ``--upload-pack``/``--receive-pack``
    naming git's own program: git runs it here, and the repository's config
    (``remote.<name>.uploadpack``, which a ``.git/`` synced from elsewhere can set, and
    which ``-c`` cannot override) must not choose it. Remotes elsewhere run theirs there."""
    url = repo.run("remote", "get-url", remote).stdout.decode("utf-8", "surrogateescape").strip()
    scheme = _URL_SCHEME.match(url)
    local = url.startswith("file://") if scheme else not _SCP_LIKE.match(url)
    return [f"{option}={program}"] if local else []


def _fetch(repo: Repo, remote: str) -> None:
    done = repo.run("fetch", "--quiet", "--no-write-fetch-head",
                    *_local_pack_programs(repo, remote, "--upload-pack", "git-upload-pack"), remote,
                    timeout=NETWORK_TIMEOUT, optional_locks=True)
    if done.returncode != 0:
        url = repo.run("remote", "get-url", remote).stdout.decode("utf-8", "replace").strip()
        raise GitError(f"Cannot reach the remote {remote} ({url}): {first_line(done)}. Nothing was pulled or pushed; "
                       "the tool writes are committed locally. Run agent-memory sync again when it is reachable.")


def _push(repo: Repo, remote: str, merge_ref: str) -> tuple[bool, int]:
    """Push HEAD to the upstream branch: (refused because the remote moved on, commits sent)."""
    tracking = f"refs/remotes/{remote}/{merge_ref.removeprefix('refs/heads/')}"
    known = _rev(repo, tracking)
    ahead = int(repo.ok("rev-list", "--count", f"{tracking}..HEAD").strip() or 0) if known else 1
    if not ahead:
        return False, 0
    sent = _private_changes(repo, known, "HEAD")
    if sent:
        raise GitError(f"Cannot push: the commits to push add or change {_shown(sent)}, under the vault's "
                       f"{INDEX_DIRNAME}/ or {TRASH_DIRNAME}/, which hold this machine's index and trash and are never "
                       f"pushed by agent-memory. Take them out of git (git rm -r --cached {INDEX_DIRNAME} "
                       f"{TRASH_DIRNAME}, then commit), then sync again; the commits are kept locally.")
    done = repo.run("push", "--porcelain", *_local_pack_programs(repo, remote, "--receive-pack", "git-receive-pack"),
                    remote, f"HEAD:{merge_ref}", timeout=NETWORK_TIMEOUT, optional_locks=True)
    if done.returncode == 0:
        return False, ahead
    # Porcelain: "!<TAB>HEAD:refs/heads/main<TAB>[rejected] (fetch first)". Only "[rejected]"
    # means the remote moved on; "[remote rejected]" (a hook, a protected branch) says why.
    refused = [line.split("\t")[-1] for line in done.stdout.decode("utf-8", "replace").splitlines()
               if line.startswith("!")]
    if refused and all(reason.startswith("[rejected]") for reason in refused):
        return True, 0
    raise GitError(f"Cannot push to {remote}: {refused[0] if refused else first_line(done)}. The commits are kept "
                   "locally; run agent-memory sync again when that is fixed.")


def _rev(repo: Repo, name: str) -> str | None:
    done = repo.run("rev-parse", "-q", "--verify", f"{name}^{{commit}}")
    return done.stdout.decode().strip() or None if done.returncode == 0 else None


def _names(repo: Repo, a: str, b: str, *, whole: bool = False) -> list[str]:
    """Vault-relative files that differ between two commits (inside the vault only; with
    ``whole``, the whole repository's, repository-relative)."""
    out = repo.ok("diff", "--name-only", "-z", "--no-renames", *(() if whole else ("--relative",)), a, b)
    return [p for p in out.split("\0") if p]


def _unmerged(repo: Repo) -> tuple[list[str], list[str]]:
    """Files with conflicts anywhere in the repository: those in the vault (vault-relative)
    and those outside it (repository-relative; only with ``git.subfolder``)."""
    out = [p for p in repo.ok("diff", "--name-only", "-z", "--diff-filter=U").split("\0") if p]
    inside = sorted({p[len(repo.prefix):] for p in out if p.startswith(repo.prefix)})
    return inside, sorted({p for p in out if not p.startswith(repo.prefix)})


def _keep_both_added(repo: Repo, conflicted: list[str]) -> dict[str, str]:
    """Two clones that each wrote a memory with the same title on the same day made the
    same path (an add/add conflict): when both sides are memories with different ids,
    ours stays at the path and theirs takes the next free ``-2``, ``-3``... name, both
    staged, so the merge can conclude and nothing is lost. Returns path -> the new name.
    Anything else (one memory edited two ways, a file that is not a memory) is left as
    a conflict for a person."""
    split: dict[str, str] = {}
    for rel in conflicted:
        if not is_memory_path(rel):
            continue
        stages = {}
        for line in repo.ok("ls-files", "-u", "-z", "--", rel).split("\0"):  # run in the vault: paths are its own
            if line:
                info, _, _path = line.partition("\t")
                _mode, sha, stage = info.split()
                stages[stage] = sha
        if set(stages) != {"2", "3"}:  # a base exists (an edit two ways), or a side deleted it
            continue
        ours, theirs = (repo.run("cat-file", "blob", stages[n]).stdout for n in ("2", "3"))
        a, b = parse.parse(ours, rel), parse.parse(theirs, rel)
        if a.unreadable or b.unreadable or not a.own_id or not b.own_id or a.id == b.id:
            continue
        place = repo.vault / rel
        stem, folder = place.name[:-3], place.parent
        parent = rel.rsplit("/", 1)[0] + "/" if "/" in rel else ""
        tracked = set(repo.ok("ls-files", "-z", "--", parent or ".").split("\0"))
        n = 2
        while (folder / f"{stem}-{n}.md").exists() or f"{parent}{stem}-{n}.md" in tracked:
            n += 1
        other = folder / f"{stem}-{n}.md"
        tmp = folder / f".{stem}-{n}.md.{os.getpid()}{TMP_SUFFIX}"
        tmp.write_bytes(theirs)
        try:
            move_no_replace(tmp, other)
        finally:
            tmp.unlink(missing_ok=True)
        replace_file(place, ours)
        new_rel = other.relative_to(repo.vault).as_posix()
        repo.ok("add", "--", rel, new_rel)
        split[rel] = new_rel
        log.info("sync: two memories were added at %s; kept ours there and theirs as %s", rel, new_rel)
    return split


def _dirty(repo: Repo) -> set[str]:
    """Files with a person's uncommitted changes (the autostash takes and puts them back)."""
    out = repo.ok("diff", "--name-only", "-z", "--relative", "HEAD")
    return {p for p in out.split("\0") if p}


def _stash_count(repo: Repo) -> int:
    done = repo.run("rev-list", "--walk-reflogs", "--count", "refs/stash")
    return int(done.stdout.decode().strip() or 0) if done.returncode == 0 else 0
