"""The confinement rule for every path a record the tool left itself may name.

A record in ``.index/`` or ``.trash/`` (a move's journal, an import's staging, a parked
write, a trash ledger line, a git journal line) is a file in the vault, so its paths may
have been written by someone else. Before the tool acts on one, each path must be a place
of its kind, checked component by component the way git checks the paths it checks out:

- a **memory path** is vault-relative, inside the vault, in no dot-folder and no hidden
  file, never ``.git`` in any spelling: any case, trailing dots or spaces (Windows drops
  them), characters HFS+ ignores (zero-width joiners and the like), a fullwidth dot
  after Unicode normalisation, an 8.3 short name (``GIT~1``), an NTFS stream
  (``x.md::$DATA``); no ``..``, no empty part, no component over the 255-byte limit of a
  file name; and on disk, no symlinked folder on the way (a last-part symlink must lead
  to a memory path too);
- a **trash path** is ``.trash/`` followed by a memory path, with the same checks on disk
  from ``.trash/`` down.

``memory_problem``/``trash_problem`` say what is wrong with the text alone (pure);
``memory_path``/``trash_path`` also look at the disk and return the absolute path, or
raise ``PathRefused``.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import stat
import unicodedata
from pathlib import Path

from ..errors import PathRefused

TRASH = ".trash"
NAME_MAX = 255  # bytes of one file name on ext4, APFS, NTFS (UTF-16 units there), and most others
# Code points HFS+ leaves out when it compares names (git's is_hfs_dotgit list), and a
# few more that render as nothing: "\u200c.git" is ".git" to macOS.
_IGNORED = dict.fromkeys(
    [*range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2060, 0x2065), *range(0x206A, 0x2070), 0xFEFF, 0x00AD]
)
# An 8.3 short name as Windows makes them (``GIT~1`` for ``.git``, ``TRASH~1`` for ``.trash``).
_SHORT_NAME = re.compile(r"[^~]{1,6}~[0-9]+(\.[^.]{0,3})?")
_REFUSED_CHARS = re.compile(r"[\x00-\x1f\x7f\\:]")


def folded(part: str) -> str:
    """A name as the most forgiving file system compares it: Unicode-normalised (NFKC, so
    a fullwidth dot is a dot), without the code points HFS+ ignores, without the trailing
    dots and spaces Windows drops, case-folded."""
    return unicodedata.normalize("NFKC", part).translate(_IGNORED).rstrip(". ").casefold()


@functools.lru_cache(maxsize=4096)
def part_problem(part: str) -> str | None:
    """What is wrong with one component of a path, or None (pure: a batch's folder
    names, ``2025``, ``03``, are worked out once)."""
    if part in ("", ".", ".."):
        return "has an empty, '.' or '..' part"
    if _REFUSED_CHARS.search(part):
        return "has a control character, a backslash or a colon in a name"
    try:
        size = len(part.encode("utf-8"))
    except UnicodeEncodeError:
        return "has a name that is not UTF-8"
    if size > NAME_MAX:
        return f"has a name of {size} bytes, over the {NAME_MAX}-byte limit of file names"
    same = folded(part)
    if not same or same.startswith("."):
        return "is in a hidden folder or is a hidden file (.git and the like, in any spelling)"
    if _SHORT_NAME.fullmatch(same):
        return "has an 8.3 short name (GIT~1 is .git on Windows)"
    return None


def memory_problem(rel: object) -> str | None:
    """What makes ``rel`` no memory path (see the module's rule), or None. Pure."""
    if not isinstance(rel, str) or not rel:
        return "is not a vault-relative path"
    if rel.startswith("/"):
        return "is an absolute path"
    for part in rel.split("/"):
        problem = part_problem(part)
        if problem:
            return problem
    if not rel.endswith(".md"):
        return "is not a .md file"
    return None


def trash_problem(rel: object) -> str | None:
    """What makes ``rel`` no trash path (``.trash/`` then a memory path), or None. Pure."""
    if not isinstance(rel, str) or not rel.startswith(TRASH + "/"):
        return "is not in the vault's .trash/ folder"
    return memory_problem(rel[len(TRASH) + 1:])


def memory_path(root: Path, rel: object) -> Path:
    """The absolute path of a memory path a record names, checked as text and on disk;
    ``PathRefused`` otherwise."""
    problem = memory_problem(rel)
    if problem:
        raise PathRefused(f"{rel!r} {problem}: not a place for a memory.")
    assert isinstance(rel, str)
    return _on_disk(root, rel, rel.split("/"))


def trash_path(root: Path, rel: object) -> Path:
    """The absolute path of a trash path a record names, checked as text and on disk
    (``.trash`` itself must be a real folder); ``PathRefused`` otherwise."""
    problem = trash_problem(rel)
    if problem:
        raise PathRefused(f"{rel!r} {problem}: not a place in the vault's .trash/.")
    assert isinstance(rel, str)
    return _on_disk(root, rel, rel.split("/"))


def _on_disk(root: Path, rel: str, parts: list[str]) -> Path:
    """Walk the path from the vault down with ``lstat``: every folder that exists must be
    a real folder (no symlink), and a last part that is a symlink must lead to a memory
    path of this vault. Parts not there yet are fine (the caller creates them)."""
    here = Path(root)
    for n, part in enumerate(parts):
        here = here / part
        try:
            found = os.lstat(here)
        except FileNotFoundError:
            return Path(root).joinpath(*parts)
        except OSError as exc:
            raise PathRefused(f"{rel!r} cannot be checked ({exc.strerror or exc}).") from exc
        last = n == len(parts) - 1
        if stat.S_ISLNK(found.st_mode):
            if not last:
                raise PathRefused(f"{rel!r} goes through a symlink ({'/'.join(parts[:n + 1])}); records are never "
                                  "followed through symlinks.")
            _link_stays_inside(root, rel, here)
        elif not last and not stat.S_ISDIR(found.st_mode):
            raise PathRefused(f"{rel!r}: {'/'.join(parts[:n + 1])} is not a folder.")
    return Path(root).joinpath(*parts)


def _link_stays_inside(root: Path, rel: str, link: Path) -> None:
    """A memory that is itself a symlink must lead to a memory path of the vault."""
    real_root = os.path.realpath(root)
    try:
        target = os.path.realpath(link, strict=True)
    except (OSError, RuntimeError) as exc:
        raise PathRefused(f"{rel!r} is a symlink that leads nowhere ({exc}).") from exc
    inside = os.path.relpath(target, real_root).replace(os.sep, "/")
    if inside.startswith("../") or inside == ".." or memory_problem(inside) is not None:
        raise PathRefused(f"{rel!r} is a symlink to {target}, which is no memory path of the vault.")


def real_folder(path: Path) -> bool:
    """Whether ``path`` is a folder itself, not a symlink to one (nor a file)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def tool_folder(folder: Path) -> Path:
    """One of the tool's own folders in the vault's ``.index/`` (parked files, records set
    aside), made if missing. ``.index/`` is in the vault, so a synced folder or a pull can
    put a symlink (or a file) at that name, which would send what the tool keeps there,
    memories' bytes included, to a folder elsewhere: refused (``PathRefused``)."""
    if os.path.lexists(folder) and not real_folder(folder):
        raise PathRefused(f"{folder} is a symlink or a file, not a folder the tool made; it keeps its own files only "
                          "in a real folder in the vault's .index/. Remove it (nothing of the tool's is in it) and "
                          "retry.")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def tool_file(path: Path) -> Path:
    """One of the tool's own files in the vault's ``.index/`` (the index database, the
    vectors), refused (``PathRefused``) when something other than a regular file is at
    that name: a symlink a pull or a synced folder put there would have SQLite open the
    file it names, and the index, finding no schema of its own there, drop its tables."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return path
    if stat.S_ISREG(found.st_mode):
        return path
    kind = "a symlink" if stat.S_ISLNK(found.st_mode) else "not a regular file"
    raise PathRefused(f"{path} is {kind}, not a file agent-memory made; opening it would change what it names. "
                      f"Remove it (rm {shlex.quote(str(path))}): it is a cache, rebuilt from the memory files.")
