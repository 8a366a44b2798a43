"""A person's uncommitted changes while ``sync`` pulls, and conflicts said as they are.

``sync`` sets the changes aside in a stash it makes itself, with a name that says whose
and when (not ``--autostash``, whose stash git may keep under ``MERGE_AUTOSTASH`` where
``git stash list`` never shows it), pulls, and puts them back; the stash is dropped only
once they are back whole. Conflicts are what ``git ls-files -u`` lists (a file git could
not merge line by line, ``merge=binary`` or an image, has no markers to look for), and
each file is described as it is: both sides between which marker lines, or one side
only and where the other is.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..clock import iso, utcnow
from ..disk import locking, nofollow
from ..disk.durable import write_beside
from ..errors import GitError
from .run import Repo, first_line

STASH_NAME = "agent-memory sync"  # every stash sync makes starts so: `git stash list` shows it
_START = re.compile(r"^<{7}(?: (.*))?$", re.MULTILINE)
_END = re.compile(r"^>{7}(?: (.*))?$", re.MULTILINE)
_ALL_PATHS = {"GIT_LITERAL_PATHSPECS": "0"}  # ":/" (the whole repository) is a magic pathspec
_NONE, _EXECUTABLE = "000000", "100755"  # git's modes: no file; an executable file
# What a write-back makes: a file (git's two modes of one), or none. A symlink (120000) or
# a submodule (160000) stays in the stash, for `git stash pop` to make as git makes it.
_WRITTEN_BACK = ("100644", _EXECUTABLE, _NONE)


@dataclass(frozen=True)
class Stash:
    """The stash sync made: its commit and its message."""

    commit: str
    message: str

    def where(self, repo: Repo) -> str:
        """How a person finds it now: ``stash@{0} ("agent-memory sync …")``."""
        ref = _ref(repo, self.commit)
        return f"{ref or 'the stash'} (\"{self.message}\")"


def set_aside(repo: Repo) -> Stash | None:
    """Stash the repository's uncommitted changes to tracked files under a name of our
    own; None when there are none (untracked files stay where they are: a pull that
    would overwrite one is refused by git, and nothing is lost)."""
    if _clean(repo):
        return None
    message = f"{STASH_NAME} {iso(utcnow())}: your uncommitted changes, set aside while it pulled"
    before = _top(repo)
    done = repo.run("stash", "push", "--quiet", "-m", message, optional_locks=True)
    after = _top(repo)
    if done.returncode != 0 or after is None or after == before:
        raise GitError(f"Cannot sync: your uncommitted changes could not be set aside ({first_line(done)}). Nothing "
                       "was pulled or pushed; commit or stash them yourself, then sync again.")
    return Stash(after, message)


def put_back(repo: Repo, stash: Stash) -> list[str]:
    """Apply the stash on the pulled tree; drop it once it applied cleanly. Returns the
    files where it conflicted (the stash is kept then). What was staged comes back
    staged; when the pull moved the lines around a staged change, git refuses to restore
    the staging before touching anything, and the changes come back unstaged instead."""
    done = repo.run("stash", "apply", "--index", "--quiet", stash.commit, optional_locks=True)
    if done.returncode != 0 and not unmerged(repo) and _clean(repo):
        done = repo.run("stash", "apply", "--quiet", stash.commit, optional_locks=True)
    conflicted = unmerged(repo)
    if done.returncode == 0 and not conflicted:
        ref = _ref(repo, stash.commit)
        if ref:
            repo.run("stash", "drop", "--quiet", ref, optional_locks=True)
        return []
    if not conflicted:
        raise GitError(f"sync pulled, but could not put your uncommitted changes back: {first_line(done)}. They are "
                       f"kept in {stash.where(repo)}; put them back with git stash pop once that is fixed.")
    return conflicted


def _clean(repo: Repo) -> bool:
    """Whether the tracked files and the staging area are HEAD's (untracked files aside):
    nothing to set aside, or what a refused ``stash apply --index`` leaves."""
    return repo.run("diff", "--quiet", "HEAD", "--", ":/", env=_ALL_PATHS).returncode == 0


def put_back_beside(repo: Repo, stash: Stash, conflicted: list[str]) -> tuple[list[str], list[str]]:
    """While a pull's conflicts wait for a person (no stash applies then): write back the
    stashed files the pull left exactly as they were, each whole, and drop the stash
    when that is all of them. Returns (put back, left only in the stash); paths are
    repository-relative."""
    out = repo.ok("diff", "--raw", "-z", "--no-abbrev", "--no-renames", f"{stash.commit}^1", stash.commit, "--",
                  ":/", env=_ALL_PATHS)
    fields = out.split("\0")
    back: list[str] = []
    left: list[str] = []
    for meta, path in zip(fields[0::2], fields[1::2]):  # ":<old mode> <new mode> <old blob> <new blob> <status>"
        _old_mode, mode, _old_blob, blob, _status = meta.split()
        checked = None if path in conflicted or mode not in _WRITTEN_BACK else _untouched(repo, stash, path)
        stashed = repo.run("cat-file", "blob", blob) if checked is not None and mode != _NONE else None
        if checked is None or (stashed is not None and stashed.returncode != 0):
            left.append(path)
            continue
        data = None if stashed is None else stashed.stdout  # None: the person had deleted it
        (back if _write_back(repo, repo.top / path, data, checked, mode) else left).append(path)
    if not left:
        ref = _ref(repo, stash.commit)
        if ref:
            repo.run("stash", "drop", "--quiet", ref, optional_locks=True)
    return back, left


def _untouched(repo: Repo, stash: Stash, path: str) -> str | None:
    """What the file in the work tree is, if it is what it was when the stash was made
    (the pull did not change it) and is reached through no symlink: its blob, or "" for
    no file then and none now. None when it is not safe to write the stashed one back."""
    target = repo.top / path
    if target.is_symlink() or not _plain_folder(repo, path):
        return None
    before = repo.run("rev-parse", "-q", "--verify", f"{stash.commit}^1:{path}").stdout.decode().strip()
    if not target.exists():
        return None if before else ""
    return before if before and _blob(repo, target) == before else None


def _plain_folder(repo: Repo, path: str) -> bool:
    """Whether the folder of ``path`` (repository-relative) is reached through no
    symlink (it need not exist: a missing folder is made through none either)."""
    folder = os.path.normpath(os.path.join(os.path.realpath(repo.top), os.path.dirname(path)))
    return os.path.realpath(repo.top / os.path.dirname(path)) == folder


def _blob(repo: Repo, path: Path) -> str:
    """The blob git would make of the regular file at ``path``; "" for anything else (a
    folder, a pipe, a socket, a symlink: no save of a person's is in it, and it is never
    read, nor followed) or when it cannot be read. Read here, never by git through the
    path, which follows a link and waits for a pipe's writer."""
    try:
        data = nofollow.read_regular(path)
    except OSError:
        return ""
    if data is None:
        return ""
    done = repo.run("hash-object", "--no-filters", "--stdin", stdin=data)
    return done.stdout.decode().strip() if done.returncode == 0 else ""


def _write_back(repo: Repo, target: Path, data: bytes | None, checked: str, mode: str = "100644") -> bool:
    """The stashed file (``data``; None: deleted) in place of the work tree's, checked to
    be the blob ``checked`` ("": no file), never over a save a person made since that
    check: what goes is taken away in one step (a swap, a rename aside, a rename that
    never replaces) and looked at after; a save found there is put back and False said.
    What is taken away is under a kept name beside the file from that step on
    (``locking.move_aside``): a crash before it is looked at leaves it where a person finds it.
    ``mode`` is git's for the stashed file: 100755 makes it executable."""
    if data is None:
        try:
            aside = locking.move_aside(target, target)
        except FileNotFoundError:
            return True
        return _done_with(repo, aside, target, checked)
    if not checked and not target.parent.is_dir():  # a new file's folder goes with it into the stash
        target.parent.mkdir(parents=True, exist_ok=True)
        if not _plain_folder(repo, target.relative_to(repo.top).as_posix()):
            return False  # a link planted on the way meanwhile: the file stays in the stash
    tmp = write_beside(target, data, _permissions(target, mode))
    try:  # until a swap, ``tmp`` holds only the stashed copy: it goes on any failure
        if not checked:
            locking.move_no_replace(tmp, target)
            return True
        tmp = locking.move_aside(tmp, target)  # the name what the swap displaces will have
        if not locking.swap(tmp, target):  # no atomic swap on this file system: the check again, then a rename
            if _blob(repo, target) != checked:
                tmp.unlink()
                return False
            os.replace(tmp, target)
            return True
    except (FileExistsError, FileNotFoundError):  # a person made or deleted the file meanwhile: that stands
        tmp.unlink(missing_ok=True)
        return False
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return _done_with(repo, tmp, target, checked, data)


def _permissions(target: Path, mode: str) -> int:
    """The stashed file's permissions: those of the file it replaces (0644 for a new one),
    with execute bits where it has read bits for git's 100755, none for 100644."""
    try:
        found = os.lstat(target).st_mode & 0o7777
    except OSError:
        found = 0o644
    return found | (found & 0o444) >> 2 if mode == _EXECUTABLE else found & ~0o111


def _done_with(repo: Repo, displaced: Path, target: Path, checked: str, data: bytes | None = None) -> bool:
    """``displaced`` (what was at ``target``) removed if it is the blob that was checked;
    else a person's save landed since the check, and it goes back to ``target`` (the
    stashed ``data`` there is dropped: the stash still holds it). False then."""
    if _blob(repo, displaced) == checked:
        displaced.unlink()
        return True
    try:
        back = data is not None and locking.swap(displaced, target)
    except FileNotFoundError:  # what was written there was deleted meanwhile: the save takes its name
        back = False
    if back and _holds(displaced, data):
        displaced.unlink()  # the stashed copy the swap gave back
        return False
    _keep(displaced, target)
    return False


def _holds(path: Path, data: bytes | None) -> bool:
    """Whether ``path`` is a regular file holding exactly ``data`` (never through a link)."""
    try:
        return nofollow.read_regular(path) == data
    except OSError:
        return False


def _keep(path: Path, target: Path) -> None:
    """A person's save at ``target``, or if that name is taken again, beside it as
    ``<name>.saved-<when>`` (where it may already be): never removed."""
    try:
        locking.move_no_replace(path, target)
    except FileExistsError:  # saved yet again
        if path.parent != target.parent or not path.name.startswith(locking.saved_prefix(target)):
            locking.move_aside(path, target)


def unmerged(repo: Repo) -> list[str]:
    """Files with unmerged index entries anywhere in the repository (repository-relative)."""
    out = repo.ok("ls-files", "-u", "-z", "--full-name", "--", ":/", env=_ALL_PATHS)
    return sorted({entry.split("\t", 1)[1] for entry in out.split("\0") if "\t" in entry})


def holds(repo: Repo, path: str, ours: str) -> str:
    """What one conflicted file (repository-relative) holds now, in a few words:
    ``both versions, between <<<<<<< ours and >>>>>>> theirs``, or one side only when
    git wrote no markers, ``ours`` naming that side."""
    try:  # never through a symlink a pull brought (to /dev/zero, say), nor blocked by a pipe
        data = nofollow.read_regular(repo.top / path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"a symlink, not read (git show :2:{path} and git show :3:{path} show the two sides)"
        return "no file (one side deleted it; git status shows which)"
    text = "" if data is None else data.decode("utf-8", "replace")  # a folder, a pipe: no markers
    start, end = _START.search(text), _END.search(text)
    if start and end and start.start() < end.start():
        return f"both versions, between the lines <<<<<<< {start[1] or ''} and >>>>>>> {end[1] or ''}".rstrip()
    return (f"{ours} only, without conflict markers (git could not merge it line by line); the other side is "
            f"git show :3:{path}")


def _top(repo: Repo) -> str | None:
    done = repo.run("rev-parse", "-q", "--verify", "refs/stash")
    return done.stdout.decode().strip() or None if done.returncode == 0 else None


def _ref(repo: Repo, commit: str) -> str | None:
    """``stash@{n}`` of the stash whose commit is ``commit``, or None when it is gone."""
    done = repo.run("log", "-g", "--format=%H", "refs/stash")
    if done.returncode != 0:
        return None
    for n, line in enumerate(done.stdout.decode().split()):
        if line == commit:
            return f"stash@{{{n}}}"
    return None
