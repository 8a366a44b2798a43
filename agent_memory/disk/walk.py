"""The walk over a vault's files that reconcile, a rebuild and ``doctor`` share: every
memory file with its stat, in the order SQLite orders paths (what is left out, and why:
docs/design/reconcile.md)."""

from __future__ import annotations

import os
import stat as stat_kind
from collections.abc import Callable, Iterator
from pathlib import Path

from . import locking
from .layout import TMP_SUFFIX, encodable, is_ignored_dir


def _sort_key(entry: os.DirEntry[str]) -> str:
    """Where an entry's paths sort among its siblings': a folder as ``name/``, since every
    path inside it starts so (the walk then comes out in the index's path order)."""
    try:
        return entry.name + "/" if entry.is_dir(follow_symlinks=False) else entry.name
    except OSError:  # cannot tell (gone since the listing): the walk skips it anyway
        return entry.name


def _sorted_entries(folder: str) -> list[os.DirEntry[str]]:
    """One folder's entries in path order; none when it cannot be listed (gone since its
    parent was, or unreadable)."""
    try:
        with os.scandir(folder) as listing:
            return sorted(listing, key=_sort_key)
    except OSError:
        return []


class Walk:
    """Every memory file under ``root`` with its stat, in the index's order: by path, byte
    by byte, as SQLite orders them. ``inside(rel)`` says whether a symlinked memory leads
    to a file the vault may read. ``skipped(path, why)`` hears of each ``.md`` left out
    for a reason a person may fix (``doctor`` lists them); ``temp_files`` collects the
    tool's own temp files met on the way, ``kept_aside`` the files a write took aside and
    kept (``locking.move_aside``). Once done, ``aliased`` counts the memories found with a
    second name.

    Each folder's entries are sorted as their paths sort (a folder's name as ``name/``:
    ``a-b.md`` < ``a.md`` < ``a/x.md``) and a folder is walked where it sorts, so
    reconcile compares the walk with the index's rows read in the same order, a page at a
    time. The walk holds only the entries of the folders on the way down to the one it is
    in (``most_held``: the most it held at once), whatever the size of the vault."""

    def __init__(self, root: Path, inside: Callable[[str], bool], skipped: Callable[[str, str], None] | None = None,
                 temp_files: list[Path] | None = None, kept_aside: list[str] | None = None) -> None:
        self.root, self.inside, self.skipped = root, inside, skipped
        self.temp_files, self.kept_aside = temp_files, kept_aside
        self.aliased = self.most_held = 0

    def _skip(self, rel: str, why: str) -> None:
        if self.skipped is not None:
            self.skipped(rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace"), why)

    def __iter__(self) -> Iterator[tuple[str, os.stat_result]]:
        from .. import limits

        skip, inside, temp_files, kept_aside = self._skip, self.inside, self.temp_files, self.kept_aside
        max_bytes = limits.MAX_FILE_BYTES
        regular = stat_kind.S_ISREG  # looked up once: this loop runs per file
        aliased = 0
        first = _sorted_entries(str(self.root))
        # Each folder on the way down: its prefix, its entries left, how many it listed.
        stack: list[tuple[str, Iterator[os.DirEntry[str]], int]] = [("", iter(first), len(first))]
        held = most = len(first)  # entries of the folders on the stack (each list lives until done)
        while stack:
            prefix, entries, _listed = stack[-1]
            entry = next(entries, None)
            if entry is None:
                held -= stack.pop()[2]
                continue
            name = entry.name
            rel = prefix + name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if is_ignored_dir(name):
                        continue
                    if encodable(name):
                        inner = _sorted_entries(entry.path)
                        stack.append((rel + "/", iter(inner), len(inner)))
                        held += len(inner)
                        most = max(most, held)
                    else:
                        skip(rel + "/", "folder name is not UTF-8 (rename it)")
                    continue
                if not (name.endswith(".md") and name[0] != "." and (name.isascii() or encodable(name))):
                    if temp_files is not None and name.endswith(TMP_SUFFIX):
                        temp_files.append(Path(entry.path))
                    if kept_aside is not None and locking.KEPT_ASIDE.search(name):
                        kept_aside.append(rel)
                    if name.endswith(".md") and not name.startswith(".") and not encodable(name):
                        skip(rel, "file name is not UTF-8 (rename it)")
                    continue
                link = entry.is_symlink()
                if link and not inside(rel):
                    skip(rel, "a symlink to a file outside the vault or in a hidden folder")
                    continue
                found = entry.stat()  # follows a symlink: the file it names
            except OSError:  # gone since the listing, a symlink loop, unreadable
                skip(rel, "cannot be read (a broken symlink, a symlink loop, or no permission)")
                continue
            if link or found.st_nlink > 1:
                aliased += 1
            file = regular(found.st_mode)
            if file and found.st_size <= max_bytes:
                yield rel, found
            elif file:
                skip(rel, f"{found.st_size / 2**20:,.1f} MB, over the {max_bytes / 2**20:g} MB limit "
                          "for a memory file (split it, or move it out of the vault)")
            else:
                skip(rel, "not a regular file (a folder, pipe or device)")
        self.aliased, self.most_held = aliased, most
