"""A memory's history from git: the commits that changed its file, following renames,
newest first, and what each changed (front-matter keys, body lines).

Read-only by construction: only ``rev-parse``, ``log``, ``merge-base`` and ``cat-file`` run, through
``git -C <vault>`` without a shell, with a timeout and ``GIT_OPTIONAL_LOCKS=0`` (so not
even git's optional index refresh writes). The vault may be the repository's root or
any folder inside one; paths in the result are vault-relative when the file was inside
the vault at that commit, else repository-relative.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

from ..errors import VaultError
from ..models import HistoryEntry
from ..note import parse
from ..trust import credentials
from .run import first_line, repository, run

MAX_LINES_SHOWN = 20  # body lines added/removed listed per commit (all are counted)
MAX_LINE_CHARS = 200
MAX_MESSAGE_CHARS = 2000

_STATUS = {"A": "added", "M": "modified", "R": "renamed", "C": "copied", "D": "deleted", "T": "modified"}
_HASH = re.compile(r"[0-9a-f]{40,64}")
_TASK = "read the history"  # what git was asked, for its errors
_RETRY = "Retry with a smaller limit."


def log(root: Path, rel: str, limit: int) -> tuple[list[HistoryEntry], bool, Path]:
    """Up to ``limit`` commits that changed ``rel`` (vault-relative), newest first, and
    whether there are more. Each says what changed between its parent's version of the
    file and its own."""
    repo = repository(root)
    top, prefix = repo.top, repo.prefix
    # -m: a merge is listed when its file differs from either parent (a conflict resolved
    # to our side differs only from theirs); what it changed is taken against its first
    # parent, as --diff-merges=first-parent shows it (``_merges``).
    done = run(
        root, "log", "--follow", "-M", "-m", "-z", "--name-status", "--no-color", "--no-ext-diff", "--no-textconv",
        f"-n{limit + 1}", "--format=%x1e%H%x1f%P%x1f%aI%x1f%an%x1f%ae%x1f%B%x1f", "--", rel,
        task=_TASK, retry=_RETRY,
    )
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace")
        if "does not have any commits" in message or "bad default revision" in message:
            return [], False, top  # a repository without a first commit: no history yet
        raise VaultError(f"git could not read the history of {rel}: {first_line(done)}.")
    parsed = [_parse(record) for record in done.stdout.decode("utf-8", "surrogateescape").split("\x1e")[1:]]
    commits = list({c["commit"]: c for c in reversed([c for c in parsed if c is not None])}.values())[::-1]
    more = len(commits) > limit
    commits = commits[:limit]
    for c in commits:
        if len(c["parents"]) > 1:  # a merge: labelled, its file compared with its first parent's
            c["status"], c["merge"] = "merged", True
            c["new"] = c["old"] = c["new"] or c["old"]
    blobs = _read_blobs(root, commits)
    commits = [c for c in commits if not c.get("merge") or _changed_memory(root, c, blobs)]
    entries = [_entry(c, prefix, blobs) for c in commits]
    return entries, more, top


def _changed_memory(root: Path, c: dict[str, Any], blobs: dict[str, bytes | None]) -> bool:
    """Whether a merge changed the memory: its file is not its first parent's, or it is
    but the other side had changed the file and the merge dropped that (a conflict
    resolved to our side). A merge that only carried our own change past theirs did not."""
    path = c["new"]
    if blobs.get(f"{c['commit']}:{path}") != blobs.get(f"{c['parent']}:{path}"):
        return True
    return _dropped_theirs(root, c, path)


def _dropped_theirs(root: Path, c: dict[str, Any], path: str) -> bool:
    """Whether the second parent had changed ``path`` since the merge base."""
    first, second = c["parents"][:2]
    base = run(root, "merge-base", first, second, task=_TASK, retry=_RETRY).stdout.decode().strip()
    if not base:
        return True
    blobs = [run(root, "rev-parse", "-q", "--verify", f"{rev}:{path}", task=_TASK, retry=_RETRY).stdout.strip()
             for rev in (base, second)]
    return blobs[0] != blobs[1]


def _parse(record: str) -> dict[str, Any] | None:
    fields = record.split("\x1f")
    if len(fields) < 7 or not _HASH.fullmatch(fields[0]):
        return None
    commit, parents, date, author, email = fields[:5]
    message = "\x1f".join(fields[5:-1]).strip()
    tokens = [t for t in fields[-1].lstrip("\0\n").split("\0") if t]
    status, old, new = "modified", None, None
    if tokens:
        letter = tokens[0][:1]
        status = _STATUS.get(letter, "modified")
        if letter in "RC" and len(tokens) >= 3:
            old, new = tokens[1], tokens[2]
        elif len(tokens) >= 2:
            new = old = tokens[1]
        if letter == "A":
            old = None
    return {"commit": commit, "parent": parents.split()[0] if parents.split() else None, "parents": parents.split(),
            "date": date,
            "author": author, "email": email, "message": message, "status": status, "old": old, "new": new}


def _read_blobs(root: Path, commits: list[dict[str, Any]]) -> dict[str, bytes | None]:
    """Both versions of the file for every commit, through one ``git cat-file --batch``."""
    wanted: list[str] = []
    for c in commits:
        if c["new"] is not None and c["status"] != "deleted":
            wanted.append(f"{c['commit']}:{c['new']}")
        if c["old"] is not None and c["parent"] is not None:
            wanted.append(f"{c['parent']}:{c['old']}")
    wanted = [w for w in dict.fromkeys(wanted) if "\n" not in w]
    if not wanted:
        return {}
    done = run(root, "cat-file", "--batch", stdin="".join(w + "\n" for w in wanted).encode("utf-8", "surrogateescape"),
               task=_TASK, retry=_RETRY)
    if done.returncode != 0:
        raise VaultError(f"git could not read old versions of the file: {first_line(done)}.")
    out, at = done.stdout, 0
    blobs: dict[str, bytes | None] = {}
    for name in wanted:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        at = end + 1
        if len(header) == 3 and header[1] == b"blob":
            size = int(header[2])
            blobs[name] = out[at : at + size]
            at += size + 1
        elif len(header) == 3:  # a tree or a submodule where the file was: skip its bytes
            at += int(header[2]) + 1
            blobs[name] = None
        else:  # "<name> missing"
            blobs[name] = None
    return blobs


def _entry(c: dict[str, Any], prefix: str, blobs: dict[str, bytes | None]) -> HistoryEntry:
    new_data = blobs.get(f"{c['commit']}:{c['new']}") if c["new"] is not None and c["status"] != "deleted" else None
    old_data = blobs.get(f"{c['parent']}:{c['old']}") if c["old"] is not None and c["parent"] else None
    keys, added, removed = _changes(old_data, new_data, c["new"] or c["old"] or "")
    message = _redacted(c["message"])
    entry = HistoryEntry(
        commit=c["commit"], date=c["date"], author=c["author"], email=c["email"],
        message=message if len(message) <= MAX_MESSAGE_CHARS else message[: MAX_MESSAGE_CHARS - 1] + "…",
        status=c["status"], path=_redacted(_shown_path(c["new"] or c["old"] or "", prefix)),
        keys_changed=keys, lines_added=len(added), lines_removed=len(removed),
        added=[_cut(line) for line in added[:MAX_LINES_SHOWN]],
        removed=[_cut(line) for line in removed[:MAX_LINES_SHOWN]],
    )
    if c.get("merge"):
        entry["merge"] = True
    if c["status"] in ("renamed", "copied") and c["old"] is not None:
        entry["old_path"] = _redacted(_shown_path(c["old"], prefix))  # a name once held a token
    return entry


def _changes(old: bytes | None, new: bytes | None, path: str) -> tuple[list[str], list[str], list[str]]:
    """The front-matter keys that differ and the body lines added and removed."""
    before = parse.parse(old, path) if old is not None else None
    after = parse.parse(new, path) if new is not None else None
    old_meta = before.meta if before else {}
    new_meta = after.meta if after else {}
    keys = sorted(k for k in set(old_meta) | set(new_meta) if old_meta.get(k, _MISSING) != new_meta.get(k, _MISSING))
    old_lines = _redacted(before.body).splitlines() if before else []
    new_lines = _redacted(after.body).splitlines() if after else []
    added: list[str] = []
    removed: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes():
        if tag != "equal":
            removed.extend(old_lines[i1:i2])
            added.extend(new_lines[j1:j2])
    return keys, added, removed


_MISSING = object()


def _redacted(text: str) -> str:
    """``text`` with each credential in it shown as ``[redacted <kind>]``: a token a person
    removed from a note (or one a commit message holds) stays in git, but the history
    never hands it to a model."""
    return credentials.redact(text, credentials.find_credentials(text))


def _shown_path(repo_path: str, prefix: str) -> str:
    return repo_path[len(prefix):] if prefix and repo_path.startswith(prefix) else repo_path


def _cut(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 1] + "…"
