"""A person's own changes in the vault (hand edits, deletes, renames, attachments): what
``sync`` names every time it does not share them, and the one commit that shares them
(``sync --all``, ``git.commit = "all"``).

Only the vault's folder counts (``add -A`` scoped to it), never Obsidian's
``.obsidian/workspace*`` (which changes whenever a pane moves) nor the tool's own
``.index/`` and ``.trash/``. The commit is built in a temporary index from ``HEAD`` plus
exactly those files, so whatever the person staged for their own commit stays staged;
each file passes the credential gate first.
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from ..disk.layout import INDEX_DIRNAME, TMP_SUFFIX, TRASH_DIRNAME
from ..errors import GitError
from ..trust import credentials
from ..trust.confine import folded
from .commits import GitVault, blobs, credentials_in, holding_credentials
from .run import Repo, first_line

MAX_SHARED_BYTES = 50 << 20  # a larger file is not committed by the tool: a person decides
MAX_LISTED = 50  # files named in a commit message

_PRIVATE = (INDEX_DIRNAME, TRASH_DIRNAME)  # this machine's index, records and trash: never shared
_NEVER = (".obsidian/workspace*", f"*{TMP_SUFFIX}")


@dataclass(frozen=True)
class HandChange:
    """One changed file: how (``edited``, ``added``, ``deleted``, ``renamed``), and for a
    rename where from."""

    path: str
    how: str
    old: str = ""

    @property
    def shown(self) -> str:
        where = f"{self.old} -> {self.path}" if self.old else self.path
        return credentials.redact_for_names(f"{self.how} {where}")


def shareable(rel: str) -> bool:
    """Whether a vault-relative path is one ``sync --all`` may commit."""
    return not private(rel) and not any(fnmatchcase(rel, pattern) for pattern in _NEVER)


def private(rel: str) -> bool:
    """Whether a vault-relative path is under ``.index/`` or ``.trash/`` as some file
    system reads it: macOS and Windows compare names without case (Windows drops trailing
    dots and spaces, HFS+ zero-width characters), so a pulled ``.Trash/x.md`` lands in
    ``.trash/`` there (``confine.folded``, the path rule's own comparison)."""
    return folded(rel.split("/", 1)[0]) in _PRIVATE


def hand_changes(repo: Repo, exclude: frozenset[str] | set[str] = frozenset()) -> list[HandChange]:
    """The vault's files that differ from ``HEAD`` or git does not track yet (ignored
    files aside), but ``exclude`` (a tool write's own paths) and what is never shared."""
    done = repo.run("status", "--porcelain", "-z", "--untracked-files=all", "--no-renames", "--", ".")
    if done.returncode != 0:
        raise GitError(f"git status failed in {repo.top}: {first_line(done)}.")
    found: list[HandChange] = []
    for item in done.stdout.decode("utf-8", "surrogateescape").split("\0"):
        if len(item) < 4 or not item[3:].startswith(repo.prefix):
            continue
        rel = item[3:][len(repo.prefix):]
        if rel in exclude or not shareable(rel) or rel.endswith("/"):
            continue
        code = item[:2]
        how = "added" if code == "??" or "A" in code else "deleted" if "D" in code else "edited"
        found.append(HandChange(rel, how))
    return sorted(found, key=lambda change: change.path)


@dataclass
class HandCommit:
    """What sharing the hand changes did: the commit (empty: none), the changes in it
    (renames paired up), and the files held back with why."""

    commit: str
    shared: list[HandChange]
    withheld: list[str]


def held_back(vault: GitVault, changes: list[HandChange]) -> dict[str, str]:
    """Of the changed files, those the tool will not commit: a credential not in
    ``secrets.allow`` (``commits.holding_credentials``), or over ``MAX_SHARED_BYTES``."""
    present = [c.path for c in changes if c.how != "deleted"]
    held: dict[str, str] = {}
    for rel in present:
        try:
            info = os.lstat(vault.root / rel)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_size > MAX_SHARED_BYTES:
            held[rel] = f"over {MAX_SHARED_BYTES >> 20} MB (commit it yourself if it belongs in git)"
    held.update(holding_credentials(vault, [rel for rel in present if rel not in held]))
    return held


def commit_hand_changes(vault: GitVault, repo: Repo, changes: list[HandChange], author_flags: list[str],
                        env: dict[str, str]) -> HandCommit:
    """Commit ``changes`` in one commit naming them; the caller holds the git lock and
    the vault's write lock (tool writes are committed already)."""
    held = held_back(vault, changes)
    withheld = [f"{credentials.redact_for_names(rel)}: {why}" for rel, why in held.items()]
    paths = [c.path for c in changes if c.path not in held]
    if not paths:
        return HandCommit("", [], withheld)
    with tempfile.TemporaryDirectory(prefix="agent-memory-share-") as folder:
        index = {"GIT_INDEX_FILE": str(Path(folder) / "index")}  # the person's staging area untouched
        repo.ok("read-tree", "HEAD", env=index)
        repo.ok("add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul", env=index, optional_locks=True,
                stdin=_nul_list(paths))  # on stdin: any number of files
        shared = _staged(repo, index)
        late = _held_as_staged(vault, repo, index, shared)
        if late:  # saved with a credential after the check, before git read the file: back to HEAD's
            repo.ok("reset", "-q", "HEAD", "--pathspec-from-file=-", "--pathspec-file-nul", env=index,
                    optional_locks=True, stdin=_nul_list(list(late)))
            withheld += [f"{credentials.redact_for_names(rel)}: {why}" for rel, why in late.items()]
            shared = _staged(repo, index)
        if not shared:
            return HandCommit("", [], withheld)
        done = repo.run("commit", "--quiet", "--no-edit", "-m", _message(shared), *author_flags,
                        env={**index, **env}, optional_locks=True)
        if done.returncode != 0:
            raise GitError(f"Cannot sync: your hand changes could not be committed: {first_line(done)}. Nothing "
                           "was pulled or pushed; fix that, then sync again.")
    names = sorted({p for c in shared for p in (c.path, c.old) if p})
    repo.run("reset", "-q", "--pathspec-from-file=-", "--pathspec-file-nul", optional_locks=True,
             stdin=_nul_list(names))  # the real index: those files as committed
    head = repo.ok("rev-parse", "HEAD").strip()
    return HandCommit(head, shared, withheld)


def _held_as_staged(vault: GitVault, repo: Repo, index: dict[str, str], shared: list[HandChange]) -> dict[str, str]:
    """Of the files staged to be shared, those whose staged bytes hold a credential: the
    check before ``git add`` read the file, and a person's save landing in between is
    what git stages and the commit carries. The bytes that go out are checked too."""
    held: dict[str, str] = {}
    present = [change.path for change in shared if change.how != "deleted"]
    for rel, data in zip(present, blobs(repo, [f":./{rel}" for rel in present], env=index)):
        why = credentials_in(rel, data, vault.settings) if data is not None else ""
        if why:
            held[rel] = why
    return held


def _nul_list(paths: list[str]) -> bytes:
    return b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)


def _staged(repo: Repo, index: dict[str, str]) -> list[HandChange]:
    """What the temporary index changes against ``HEAD``, renames paired (``-M``)."""
    out = repo.ok("diff", "--cached", "-M", "--name-status", "-z", "--relative", "HEAD", env=index)
    tokens = [t for t in out.split("\0")]
    found: list[HandChange] = []
    at = 0
    while at < len(tokens) and tokens[at]:
        letter = tokens[at][:1]
        if letter in "RC":
            found.append(HandChange(tokens[at + 2], "renamed" if letter == "R" else "added", tokens[at + 1]))
            at += 3
            continue
        how = {"A": "added", "D": "deleted"}.get(letter, "edited")
        found.append(HandChange(tokens[at + 1], how))
        at += 2
    return found


def _message(shared: list[HandChange]) -> str:
    """``by hand: edited people/priya.md``, or ``by hand: 3 files`` and a line each."""
    if len(shared) == 1:
        return f"by hand: {shared[0].shown}"
    lines = [f"- {c.shown}" for c in shared[:MAX_LISTED]]
    if len(shared) > MAX_LISTED:
        lines.append(f"- and {len(shared) - MAX_LISTED} more")
    return f"by hand: {len(shared)} files\n\n" + "\n".join(lines) + "\n"
