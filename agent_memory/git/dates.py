"""Dates for notes that lack ``created`` or ``updated``, from git: when a note was first
added (its author date, renames followed with ``-M``) and last changed.

A file's mtime is the last ``git checkout`` or ``pull``, so it says nothing of when a
person wrote the note. One pass reads ``git log`` from the commit the index last saw to
``HEAD`` (the whole history when there is none, or when ``HEAD`` no longer descends
from it) and keeps the dates in the index: a cache like the rest, rebuilt from git when
``.index/`` is deleted. Nothing changed since the last pass costs one ``rev-parse``. A
shallow clone cannot know when a note older than its boundary was made: such notes
keep their file's dates, and the pass says so.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from ..clock import iso
from ..disk import nofollow
from ..disk.layout import is_memory_path
from ..errors import GitError
from ..index.db import Index
from ..index.reconcile import FileIndexer
from .run import Repo

log = logging.getLogger("agent_memory.git")

Dates = tuple[str | None, str | None]  # (created, updated); None where git cannot say


class DatedVault(Protocol):
    """What the pass needs of an open vault (``vault.core.Core`` is one)."""

    @property
    def root(self) -> Path: ...
    @property
    def index(self) -> Index: ...
    @property
    def files(self) -> FileIndexer: ...
    def writing(self) -> AbstractContextManager[None]: ...


class GitDates:
    """The git-dates pass of one open vault; ``repository`` finds its repository (None:
    not in git)."""

    def __init__(self, vault: DatedVault, repository: Callable[[], Repo | None]) -> None:
        self.vault = vault
        self._repository = repository

    def refresh(self) -> list[str]:
        """Bring the stored dates up to ``HEAD``; re-index the notes whose dates came from
        them and changed. Returns those paths. Never raises for git's sake: without git
        (or a repository git refuses) notes keep their files' dates."""
        seen = head_from_files(self.vault.root)
        if seen is None or seen == self.vault.index.git_dates_state():
            return []  # no repository above the vault, or nothing new: no git command at all
        try:
            repo = self._repository()
            if repo is None:
                return []
            return self._refresh(repo)
        except GitError as exc:
            log.info("dates of notes come from their files: %s", exc)
            return []

    def _refresh(self, repo: Repo) -> list[str]:
        index = self.vault.index
        done = repo.run("rev-parse", "-q", "--verify", "HEAD^{commit}")
        head = done.stdout.decode().strip()
        if done.returncode != 0 or not head:
            return []  # no commit yet
        shallow_file = repo.git_dir / "shallow"
        shallow = shallow_file.exists()
        stored = index.git_dates_state()
        if stored == (head, shallow):
            return []
        whole = (stored is None or stored[1] != shallow
                 or repo.run("merge-base", "--is-ancestor", stored[0], head).returncode != 0)
        since = None if whole or stored is None else stored[0]
        boundary = set(_shallow_boundary(shallow_file)) if shallow else set()
        dates = _walk(repo, since, head, boundary, index.git_date) if since else None
        if dates is None:  # the whole history: first pass, rewritten history, or merges since
            whole, dates = True, _walk(repo, None, head, boundary, lambda _p: None)
        assert dates is not None
        if shallow and whole:
            log.warning("%s is a shallow clone: notes older than its first commit keep their files' dates "
                        "(git fetch --unshallow gives them git's)", repo.top)
        with self.vault.writing():
            changed = set(dates)
            if whole:  # only the dates that differ from the stored ones call for a re-index
                before = {row["path"]: (row["created"], row["updated"])
                          for row in index.query("SELECT path, created, updated FROM git_dates")}
                changed = {p for p in dates.keys() | before.keys() if before.get(p) != dates.get(p)}
            with self.vault.files.transaction() as conn:
                index.save_git_dates(conn, dates, head, shallow, whole=whole)
            stale = index.undated(changed)
            if stale:
                with self.vault.files.transaction() as conn:
                    for rel in stale:
                        self.vault.files.refresh(conn, rel, None)
        return stale


_HASH = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def head_from_files(root: Path) -> tuple[str, bool] | tuple[()] | None:
    """``HEAD``'s commit and whether the clone is shallow, read from the files of the
    ``.git`` folder above ``root`` without running git (a start with nothing new must
    cost nothing); None when no folder above holds a ``.git``; ``()`` (never equal to a
    stored state: ask git) when it is not that simple (a worktree's ``.git`` file,
    ``GIT_DIR`` set, a ref git keeps elsewhere)."""
    if "GIT_DIR" in os.environ:
        return ()
    for folder in (root, *root.parents):
        marker = folder / ".git"
        if marker.is_dir():
            break
        if marker.exists():
            return ()
    else:
        return None
    try:
        head = _git_file(marker / "HEAD").strip()
        if head.startswith("ref: "):
            ref = head[5:].strip()
            try:
                head = _git_file(marker / ref).strip()
            except FileNotFoundError:
                packed = _git_file(marker / "packed-refs").splitlines()
                head = next((line.split()[0] for line in packed if line.endswith(" " + ref)), "")
    except (OSError, ValueError):  # a link, a pipe, a folder, a file too large: git is asked instead
        return ()
    return (head, (marker / "shallow").exists()) if _HASH.fullmatch(head) else ()


def _shallow_boundary(path: Path) -> list[str]:
    """The commits a shallow clone's history stops at (none when the file cannot be read safely)."""
    try:
        return _git_file(path).split()
    except (OSError, ValueError):
        return []


def _git_file(path: Path) -> str:
    """One of git's own small files (``HEAD``, a ref, ``packed-refs``, ``shallow``), read as
    untrusted: a ``.git`` folder synced from elsewhere can hold a link to ``/dev/zero`` or a
    pipe there (on which the tool runs no git, ``run.refuse_special_files``); never
    followed, never waited on."""
    return nofollow.read_record(path).decode("ascii", "replace")


def _walk(repo: Repo, since: str | None, head: str, boundary: set[str],
          known: Callable[[str], Dates | None]) -> dict[str, Dates | None] | None:
    """Each memory path's dates after replaying the commits ``since..head`` oldest first
    on top of what ``known`` says (None: the path is gone); a merge counts as what it
    changed against its first parent (a change it brought in is a change on this branch). None when ``since..head``
    holds a merge: replayed after what was stored, its sides' renames and edits could
    land in another order than in the whole history's walk, and the dates must be the
    same as a rebuild's, so the whole history is walked instead."""
    done = repo.run("log", "--reverse", "--topo-order", "-M", "--diff-merges=first-parent", "-z", "--name-status",
                    "--no-color", "--relative",
                    "--format=%x1e%H%x1f%aI%x1f%P", f"{since}..{head}" if since else head, timeout=600.0)
    if done.returncode != 0:
        raise GitError(f"git log failed in {repo.top}")
    table: dict[str, Dates | None] = {}

    def current(path: str) -> Dates | None:
        return table[path] if path in table else known(path)

    for record in done.stdout.decode("utf-8", "surrogateescape").split("\x1e")[1:]:
        header, _, rest = record.partition("\0")
        commit, _, rest_of_header = header.partition("\x1f")
        when, _, parents = rest_of_header.partition("\x1f")
        merge = len(parents.split()) > 1
        if since and merge:
            return None
        date = _utc(when)
        unknown = commit in boundary or date is None  # a shallow boundary: every file looks added there
        tokens = [t for t in rest.lstrip("\n").split("\0")]
        at = 0
        while at < len(tokens) and tokens[at]:
            status = tokens[at].lstrip("\n")
            letter = status[:1]
            paths = tokens[at + 1:at + 3] if letter in "RC" else tokens[at + 1:at + 2]
            at += 1 + len(paths)
            _apply(table, current, letter, status, paths, None if unknown else date, merge)
    return table


def _apply(table: dict[str, Dates | None], current: Callable[[str], Dates | None], letter: str, status: str,
           paths: list[str], date: str | None, merge: bool = False) -> None:
    """One file's change in one commit, on the table. A merge (against its first parent)
    that adds a file its other side added keeps that side's dates: the note was made
    then, whatever date the merge carries."""
    if not paths:
        return
    new = paths[-1]
    before = current(paths[0]) or (current(new) if letter == "R" else None)  # a merge repeats its side's rename
    if letter == "D":
        table[new] = None
        return
    if letter == "R":
        table[paths[0]] = None
        if not is_memory_path(new):
            return
        same = status[1:] == "100"  # moved, not changed: it keeps its last change's date
        table[new] = (before[0] if before else None,
                      (before[1] if before and before[1] else date) if same else _later(before, date))
        return
    if not is_memory_path(new):
        return
    if letter in "AC":
        earlier = current(new)
        if merge and earlier is not None and earlier[0] is not None:
            return
        created = date if not earlier or earlier[0] is None or date is None else min(earlier[0], date)
        table[new] = (created, _later(earlier, date))
    else:  # M, T: changed
        table[new] = (before[0] if before else None, _later(before, date))


def _later(before: Dates | None, date: str | None) -> str | None:
    if before is None or before[1] is None:
        return date
    return before[1] if date is None else max(before[1], date)


def _utc(text: str) -> str | None:
    try:
        return iso(dt.datetime.fromisoformat(text.strip()).astimezone(dt.timezone.utc))
    except ValueError:
        return None
