"""Tool writes as git commits (``git.commit``, ``serve --git-commit``): the journal of
pending writes (``Pending``, ``GitState.note_write``) and the ``Committer`` thread.

A write never waits for git: it appends its files to a journal in ``.index/``, and the
committer commits only those paths, without the repository's hooks or programs, and
never in a state it does not understand. The protocol (the journal, what a commit
touches, the lock order): docs/design/git.md.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import secrets
import shlex
import stat
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any, Protocol, Self

from ..disk.layout import INDEX_DIRNAME
from ..disk.locking import WriteLock
from ..disk import nofollow
from ..disk.durable import replace_file
from ..disk.store import Store, WriteChange
from ..index.db import Index
from ..settings import Settings
from ..errors import GitError
from ..note import parse
from ..trust import confine, credentials
from ..trust.register import digest, refusal, set_aside
from .run import Repo, find_repo, first_line

log = logging.getLogger("agent_memory.git")
PENDING_FILE = "git-pending.jsonl"
BATCH_WINDOW = 0.5  # seconds of quiet after a write before its commit: close writes share one
RETRY_AFTER = 5.0  # seconds before a busy repository (index.lock, a rebase) is tried again
MAX_TITLE = 72


class GitVault(Protocol):
    """What git's commits and ``sync`` need of an open vault (``vault.core.Core`` is one)."""

    @property
    def root(self) -> Path: ...
    @property
    def store(self) -> Store: ...
    @property
    def index(self) -> Index: ...
    @property
    def settings(self) -> Settings: ...


def state_problem(repo: Repo) -> tuple[str, str] | None:
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


class Pending:
    """Tool writes not committed yet: one JSON line each (``paths``, ``message``), appended
    under the vault's write lock, dropped by the committer or ``sync`` once committed.
    Each line is entered in this user's register first; a line it does not list (or a
    journal git tracks) is set aside when read, never committed."""

    def __init__(self, folder: Path, store: Store | None = None) -> None:
        self.path = folder / PENDING_FILE
        self._lock = WriteLock(folder / "git-pending.lock")
        self._folder = folder
        self._store = store  # the vault's Store: its register and tracked files (None: no checks, for tests)

    def close(self) -> None:
        """Close the journal's lock file (kept open between holds)."""
        self._lock.close()

    def add(self, entry: dict[str, Any]) -> None:
        text = json.dumps({**entry, "record": secrets.token_hex(8)}, ensure_ascii=False).encode("utf-8")
        with self._lock.hold():
            if self._store is not None:  # the journal is not fsynced: neither is its entry
                self._store.register.enter("git-pending", digest(text), durable=False)
            fd = nofollow.open_write(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | nofollow.NONBLOCK)
            try:
                os.write(fd, text + b"\n")
            finally:
                os.close(fd)

    def read(self) -> tuple[list[dict[str, Any]], int]:
        """The pending entries (a damaged line is skipped) and how many lines were read."""
        with self._lock.hold():
            try:
                data = nofollow.read_record(self.path)
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
        replace_file(self.path, b"".join(line + b"\n" for line in keep) + tail)  # never through a planted link
        text = b"".join(line + b"\n" for line in aside)
        set_aside(self._folder, "git-pending", digest(text), [], origin,
                  f"{len(aside)} line(s) {why or 'not listed'}", pending_would(aside), {PENDING_FILE: text})
        return keep

    def drop(self, count: int) -> None:
        """Forget the first ``count`` lines (committed); later ones stay."""
        if count <= 0:
            return
        with self._lock.hold():
            try:
                lines = nofollow.read_record(self.path).split(b"\n")[:-1]
            except FileNotFoundError:
                return
            except (OSError, ValueError) as exc:  # swapped for a link or a pipe since it was read: not ours
                log.warning("%s is not read: %s", self.path, exc)
                return
            rest = lines[count:]
            if self._store is not None:
                for line in lines[:count]:
                    self._store.register.done("git-pending", digest(line))
            if not rest:
                self.path.unlink(missing_ok=True)
                return
            replace_file(self.path, b"".join(line + b"\n" for line in rest))


def pending_would(lines: list[bytes]) -> str:
    """What committing journal lines would do, for a person deciding about them."""
    paths: list[str] = []
    for line in lines:
        try:
            found = nofollow.load_json(line).get("paths")
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


class GitState:
    """What one open vault knows about its repository: where it is, the journal, the git
    lock, the committer to wake, and which problems were already said in the log."""

    RECHECK = 10.0  # seconds: a vault not in git is looked at again after this long (git init)

    def __init__(self, vault: GitVault) -> None:
        self.vault = vault
        self.pending = Pending(vault.store.control_dir, vault.store)
        self.lock = WriteLock(vault.store.control_dir / "git.lock")
        self.wake: Callable[[], None] | None = None  # the running committer's wake(), if any
        # Commit tool writes: True (``serve --git-commit``), or None to follow ``git.commit``.
        self.commit: bool | None = None
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

    def close(self) -> None:
        """Close the files its locks keep open between holds (the vault is closed)."""
        self.lock.close()
        self.pending.close()

    def say_once(self, key: str, sentence: str) -> None:
        """Log a problem once (until things work again)."""
        if key not in self._said:
            self._said.add(key)
            log.warning("%s: %s.", self.vault.root, sentence)

    def all_well(self) -> None:
        self._said.clear()

    def note_write(self, changes: list[WriteChange]) -> None:
        """Note a successful write's files in the journal when commits are on and the
        vault may be committed (checked once per process; said once otherwise), then wake
        the committer. Under the vault's lock: no git command runs here but the first look
        for the repository."""
        if not (self.commit or (self.commit is None and self.vault.settings.git_commit)):
            return
        try:
            repo = self.repository()
            if repo is None:
                self.say_once("no-git", "git.commit is on but the vault is not in a git repository; nothing is "
                              "committed (git init in it to start)")
                return
            scope = repo.in_scope(self.vault.settings.git_subfolder)
            if scope:
                self.say_once("scope", scope)
                return
            paths, message = describe(self.vault, changes)
            if paths:
                self.pending.add({"paths": paths, "message": message, "at": time.time()})
        except Exception as exc:  # noqa: BLE001 - the write succeeded: it stands whatever its record does
            self.say_once("record", f"could not note a write for a git commit: {exc}")
            return
        if self.wake is not None:
            self.wake()


def _clean(title: str) -> str:
    title = " ".join(title.split())
    return title if len(title) <= MAX_TITLE else title[: MAX_TITLE - 1] + "…"


def describe(vault: GitVault, changes: list[WriteChange]) -> tuple[list[str], str]:
    """The paths one write changed and its commit message (``remember: <title>``...)."""
    paths: list[str] = []
    kinds: dict[str, list[tuple[str, str]]] = {}
    seen: set[str] = set()
    for change in changes:
        rel, how, detail = change.path, change.how, change.detail
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


@dataclass
class CommitOutcome:
    """What one attempt to commit the pending writes did."""

    status: str  # "committed", "nothing", "busy" (retry later), "refused" (a state not understood), "failed"
    writes: int = 0  # pending writes it covered
    commit: str = ""
    message: str = ""
    paths: list[str] = field(default_factory=list)
    problem: str = ""  # for "busy"/"refused": which state ("busy", "detached", "unmerged")
    withheld: list[str] = field(default_factory=list)  # "path: kind (fingerprint …)": not committed


def changed_paths(repo: Repo, paths: list[str]) -> tuple[list[str], list[str]]:
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


def identity_flags(repo: Repo, author: str) -> tuple[list[str], dict[str, str]]:
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


def commit_pending(vault: GitVault, state: GitState, repo: Repo) -> CommitOutcome:
    """Commit every pending write, in one commit, touching only their paths. The caller
    holds the git lock."""
    entries, taken = state.pending.read()
    if not taken:
        return CommitOutcome("nothing")
    problem = state_problem(repo)
    if problem is not None:
        kind, sentence = problem
        return CommitOutcome("busy" if kind == "busy" else "refused", len(entries), message=sentence, problem=kind)
    paths = list(dict.fromkeys(p for e in entries for p in e["paths"]))
    changed, untracked = changed_paths(repo, paths) if paths else ([], [])
    held = holding_credentials(vault, changed)
    held.update(ignored(vault, repo, [p for p in paths if p not in changed]))
    withheld = [f"{_shown(rel, vault.settings)}: {why}" for rel, why in held.items()]
    changed = [p for p in changed if p not in held]
    untracked = [p for p in untracked if p not in held]
    if not changed:  # undone since, committed by a person already, or all withheld
        _keep_pending(state, taken, entries, held)
        return CommitOutcome("nothing", len(entries), withheld=withheld)
    flags, env = identity_flags(repo, vault.settings.git_author)
    while True:  # a save with a credential landing during the commit: taken back, made again without that file
        if untracked:
            added = repo.run("add", "-A", "--", *untracked, optional_locks=True)
            if added.returncode != 0:
                return _failed(repo, added, len(entries), changed)
        done = repo.run("commit", "--only", "--quiet", "--no-edit", "-m", _message(entries), *flags, "--", *changed,
                        env=env, optional_locks=True)
        if done.returncode != 0:
            if untracked:  # give the person's staging area back as it was
                repo.run("reset", "-q", "--", *untracked, optional_locks=True)
            return _failed(repo, done, len(entries), changed)
        head = _head(repo)
        late = _held_as_committed(vault, repo, head, changed)
        if not late:
            break
        _take_back(repo, head, _message(entries), changed, ", ".join(_shown(rel, vault.settings) for rel in late))
        held.update(late)
        withheld += [f"{_shown(rel, vault.settings)}: {why}" for rel, why in late.items()]
        changed = [p for p in changed if p not in late]
        untracked = [p for p in untracked if p not in late]
        if not changed:  # each round leaves out at least one file: this ends
            _keep_pending(state, taken, entries, held)
            return CommitOutcome("nothing", len(entries), withheld=withheld)
    _keep_pending(state, taken, entries, held)
    return CommitOutcome("committed", len(entries), head, _message(entries).split("\n")[0], changed, withheld=withheld)


def _head(repo: Repo) -> str:
    return repo.run("rev-parse", "-q", "--verify", "HEAD").stdout.decode().strip()


def _held_as_committed(vault: GitVault, repo: Repo, made: str, paths: list[str]) -> dict[str, str]:
    """Of the files just committed (in ``made``), those whose committed bytes hold a
    credential: the check read each file before ``git commit`` read it again, and a
    person's save landing in between is what the commit took."""
    held: dict[str, str] = {}
    for rel, data in zip(paths, blobs(repo, [f"{made}:./{rel}" for rel in paths])):
        why = credentials_in(rel, data, vault.settings) if data is not None else ""  # gone: a deletion
        if why:
            held[rel] = why
    return held


def blobs(repo: Repo, names: list[str], env: dict[str, str] | None = None) -> list[bytes | None]:
    """The bytes of each blob ``names`` name (``HEAD:./path``, ``:./path``), None for one
    that is not there: one ``git cat-file --batch`` for them all, not a git process a
    file (an import's thousands took seconds more each). A name with a line break, which
    the batch reads as two, is asked for alone."""
    found: dict[str, bytes | None] = {}
    batched = [name for name in dict.fromkeys(names) if "\n" not in name and "\r" not in name]
    if batched:
        out = repo.run("cat-file", "--batch", env=env, stdin="".join(f"{n}\n" for n in batched).encode(
            "utf-8", "surrogateescape")).stdout
        at = 0
        for name in batched:
            end = out.find(b"\n", at)
            if end < 0:
                break  # git stopped short: the rest are asked for alone
            header, at = out[at:end], end + 1
            parts = header.rsplit(b" ", 2)
            if len(parts) == 3 and parts[2].isdigit() and not header.endswith((b" missing", b" ambiguous")):
                size = int(parts[2])
                found[name] = out[at:at + size] if parts[1] == b"blob" else None
                at += size + 1
            else:
                found[name] = None
    for name in names:
        if name not in found:
            done = repo.run("cat-file", "blob", name, env=env)
            found[name] = done.stdout if done.returncode == 0 else None
    return [found[name] for name in names]


def _take_back(repo: Repo, made: str, message: str, paths: list[str], named: str) -> None:
    """Undo the commit ``made`` (the tool's, with ``message``), which holds a credential
    in ``named``: the branch back at its parent (none: the first commit) and the staging
    area's entries for ``paths`` as they were there; no file is touched. Only while the
    branch still ends at the tool's commit (``update-ref`` compares and swaps): a commit
    a person made just before it stays under it, and one made just after it is never
    taken back with it. ``GitError`` when git could not (a commit on top, or another git
    program holds a lock): the sync stops before it pushes, and the error says what to
    undo by hand."""
    parent = repo.run("rev-parse", "-q", "--verify", f"{made}^").stdout.decode().strip()
    if _lines(_said(repo, made)) != _lines(message):  # a person's commit landed on top before HEAD was read
        raise GitError(
            f"A commit the tool just made took a save holding a credential ({named}) and could not be taken back: "
            f"a commit was made on top of it meanwhile. Nothing was pushed. Drop the tool's commit from the branch "
            f"before the next sync (in {repo.top}: for example with git rebase -i, keeping the commits after it), "
            "then remove the credential from the file."
        )
    if parent:
        steps = [("update-ref", "-m", "agent-memory: take back a commit holding a credential", "HEAD", parent, made),
                 ("reset", "-q", parent, "--", *paths)]
    else:
        steps = [("update-ref", "-d", "HEAD", made), ("rm", "-q", "--cached", "--ignore-unmatch", "--", *paths)]
    for n, step in enumerate(steps):
        done = repo.run(*step, optional_locks=True)
        if done.returncode != 0:
            undo = _undo(repo, made, parent) if n == 0 else _unstage(repo, paths, parent)
            raise GitError(
                f"A commit the tool just made took a save holding a credential ({named}) and could not be taken "
                f"back: git {step[0]} failed ({first_line(done)}). Nothing was pushed. Undo it before the next sync "
                f"(in {repo.top}: {undo}), then remove the credential from the file."
            )


def _said(repo: Repo, commit: str) -> str:
    """The message ``commit`` holds, read as its bytes: git keeps a message given with
    ``-m`` as those bytes, while ``git log`` would show it in the person's
    ``i18n.logOutputEncoding`` (Latin-1 turns "Café" into other bytes)."""
    raw = repo.run("cat-file", "commit", commit).stdout
    return raw.partition(b"\n\n")[2].decode("utf-8", "surrogateescape")


def _lines(message: str) -> list[str]:
    """A commit message as git keeps it (``--cleanup=whitespace``): no trailing spaces,
    no empty lines, to compare the tool's message with the one a commit holds."""
    return [line.rstrip() for line in message.splitlines() if line.strip()]


def _undo(repo: Repo, made: str, parent: str) -> str:
    """How a person undoes the commit ``made`` by hand, keeping every file as it is."""
    if _head(repo) != made:
        return (f"a commit was made on top of {made[:12]} meanwhile; drop {made[:12]} from the branch, for example "
                f"with git rebase -i {f'{made[:12]}^' if parent else '--root'}, keeping the commits after it")
    return f"git reset --soft {parent}" if parent else "git update-ref -d HEAD"


def _unstage(repo: Repo, paths: list[str], parent: str) -> str:
    """How a person takes the files (vault-relative ``paths``) of a commit already off
    the branch out of the staging area, where they are still staged as it holds them,
    run in the repository's top folder."""
    named = " ".join(shlex.quote(repo.prefix + p) for p in paths)
    return ("the commit is off the branch, but its files are still staged; unstage them with "
            + (f"git reset -q -- {named}" if parent else f"git rm -q --cached --ignore-unmatch -- {named}"))


def ignored(vault: GitVault, repo: Repo, paths: list[str]) -> dict[str, str]:
    """Of the tool's written files git did not list as changed, those it leaves out because
    a ``.gitignore`` line covers them (one a pull brought, say): path -> the line. Named
    at every commit and kept pending, never dropped as "nothing to commit"."""
    present = [p for p in paths if os.path.lexists(vault.root / p)]
    if not present:
        return {}
    names = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in present)  # memory paths: no ':' magic
    done = repo.run("check-ignore", "-v", "-z", "--stdin", stdin=names, env={"GIT_LITERAL_PATHSPECS": "0"})
    fields = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    return {path: (f"git ignores it ({source}:{line}: {pattern}); remove that line, or commit it yourself with "
                   "git add -f")
            for source, line, pattern, path in zip(fields[::4], fields[1::4], fields[2::4], fields[3::4], strict=False)
            if path in present}


def holding_credentials(vault: GitVault, paths: list[str]) -> dict[str, str]:
    """Of the files about to be committed, those holding a credential not in
    ``secrets.allow`` (a person's hand edit included), in their content or in their name
    (a commit carries both), or that cannot be read to be checked: path -> what was found
    (kinds and fingerprints, never the value). A file that is gone is a deletion: nothing
    of it leaves."""
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
        why = credentials_in(rel, data, settings)
        if why:
            held[rel] = why
    return held


def credentials_in(rel: str, data: bytes, settings: Settings) -> str:
    """What a file about to be committed holds that no commit may carry, in its bytes or
    its name (kinds and fingerprints, never the value); "" when nothing."""
    named = credentials.check_text(rel, settings)
    found = credentials.check_bytes(data, settings)  # UTF-16 text too: git carries its bytes
    said = [f"its name holds a {f.kind} (fingerprint {f.fingerprint})" for f in named[:3]]
    if not named and credentials.redact_for_names(rel) != rel:  # the rule every name the tool makes follows
        said.append("its name holds the value after a credential word (password, token…); rename the file")
    said += [f"{f.kind} (line {f.line}, fingerprint {f.fingerprint})" for f in found[:3]]
    if not said:
        return ""
    more = len(named) + len(found) - len(said)
    return ", ".join(said) + (f" and {more} more" if more else "")


def _shown(rel: str, settings: Any) -> str:
    """A path as messages and logs show it: a credential in its name redacted."""
    return credentials.redact(rel, credentials.check_text(rel, settings))


def _as_committed(path: Path) -> bytes:
    """What git would commit for ``path``: a regular file's bytes, a symlink's target text
    (git stores the link, never what it points to); nothing for anything else."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return os.fsencode(os.readlink(path))
    if not stat.S_ISREG(info.st_mode):
        return b""
    return nofollow.read_regular(path) or b""


def _keep_pending(state: GitState, taken: int, entries: list[dict[str, Any]], held: dict[str, str]) -> None:
    """Drop the committed journal lines; a withheld file stays pending, so the next commit
    takes it once the credential is removed (or its fingerprint approved)."""
    state.pending.drop(taken)
    waiting = [entry for entry in entries if any(p in held for p in entry["paths"])]
    if waiting:  # one line for them all: edits of a withheld file never pile up in the journal
        state.pending.add({"paths": list(held), "message": waiting[0]["message"], "at": time.time()})


def _failed(repo: Repo, done: subprocess.CompletedProcess[bytes], writes: int, paths: list[str]) -> CommitOutcome:
    if (repo.git_dir / "index.lock").exists():
        return CommitOutcome("busy", writes, message=f"git is busy in {repo.top} (another git command holds index.lock)",
                       problem="index.lock")
    text = (done.stderr or done.stdout).decode("utf-8", "replace").strip()
    lines = [line for line in text.splitlines() if line.strip()][-5:]
    hint = ""
    if "identity unknown" in text or "tell me who you are" in text:
        hint = ' (set [git] author = "Name <email>" in the vault\'s .agent-memory.toml, or git config user.email)'
    return CommitOutcome("failed", writes, message=f"git commit failed{hint}: {' | '.join(lines) or 'no output'}",
                   paths=paths)


class HasGitState(Protocol):
    """An open vault with its git state (``Vault``)."""

    @property
    def git_state(self) -> GitState: ...


class Committer:
    """Commits a vault's tool writes in the background, after ``window`` seconds of quiet.

    ``flush()`` commits what is pending now and waits for it (tests, and the server's
    exit through ``stop()``). It never raises into a write: every problem is logged."""

    def __init__(self, vault: HasGitState, *, window: float = BATCH_WINDOW, retry: float = RETRY_AFTER) -> None:
        self.state = vault.git_state
        self.vault = self.state.vault
        self.window = window
        self.retry = retry
        self.last: CommitOutcome | None = None
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

    def flush(self, timeout: float = 60.0) -> CommitOutcome | None:
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

    def run_once(self) -> CommitOutcome:
        """One attempt, under the git lock; never raises."""
        state = self.state
        if not state.pending.path.exists():
            return CommitOutcome("nothing")  # no git command at all while nothing is pending
        try:
            repo = state.repository()
            if repo is None:
                return CommitOutcome("refused", message="not in a git repository")
            scope = repo.in_scope(self.vault.settings.git_subfolder)
            if scope:
                state.say_once("scope", scope)
                return CommitOutcome("refused", message=scope)
            with state.lock.hold():
                outcome = commit_pending(self.vault, state, repo)
        except Exception as exc:  # noqa: BLE001 - the committer outlives any one failure, and says it
            outcome = CommitOutcome("failed", message=str(exc))
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
