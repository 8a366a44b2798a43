"""Folders and files opened relative to an opened folder, never through a symlink
(``O_NOFOLLOW`` with ``dir_fd``): what ``Store.read_all`` reads a rebuild's files with.
A file opened so is the one at that path in the vault, whatever is swapped in above it
meanwhile, since no folder on the way was opened through a link."""

from __future__ import annotations

import os
import stat as stat_kind
from pathlib import Path

from . import nofollow

OPEN_AT = os.open in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW") and hasattr(os, "O_DIRECTORY")
FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
FILE_FLAGS = nofollow.READ_FLAGS | getattr(os, "O_CLOEXEC", 0)  # the one rule, by name in a folder
FOLDERS_KEPT = 64  # folders kept open at once (a rebuild reads folder by folder)


def folder_fd(folders: dict[str, int], folder: str) -> int:
    """``folder`` (vault-relative) opened part by part from the vault's folder
    (``folders[""]``), none through a symlink; kept in ``folders`` (at most
    ``FOLDERS_KEPT`` of them open). Raises ``OSError`` for a symlink on the way."""
    fd = folders.get(folder)
    if fd is not None:
        return fd
    if len(folders) > FOLDERS_KEPT:
        release(folders)
    root = fd = folders[""]
    try:
        for part in folder.split("/"):
            inner = os.open(part, FOLDER_FLAGS, dir_fd=fd)
            if fd != root:
                os.close(fd)
            fd = inner
    except OSError:
        if fd != root:
            os.close(fd)
        raise
    folders[folder] = fd
    return fd


def release(folders: dict[str, int]) -> None:
    """Close the folders kept open, all but the vault's own (``folders[""]``): to keep
    their number bounded, and to give their descriptors back when the process has run
    out of them (a server near its limit must still read every file, through ``read``)."""
    for kept in [key for key in folders if key]:
        os.close(folders.pop(kept))


def read_at(folder: int, name: str, max_bytes: int | None) -> tuple[bytes, os.stat_result] | None:
    """A regular file's bytes and stat, opened by name in an opened folder without
    following a symlink or blocking (a named pipe); None for anything else or a file
    over ``max_bytes``. Raises ``OSError`` for a symlink, a file gone, one unreadable."""
    fd = os.open(name, FILE_FLAGS, dir_fd=folder)
    try:
        found = os.fstat(fd)
        if not stat_kind.S_ISREG(found.st_mode) or (max_bytes is not None and found.st_size > max_bytes):
            return None
        data = read_bounded(fd, found.st_size, max_bytes)
        return None if data is None else (data, found)
    finally:
        os.close(fd)


def read_bounded(fd: int, size: int, max_bytes: int | None) -> bytes | None:
    """An opened file's bytes to its end (it may have grown since its stat said ``size``),
    or None once they pass ``max_bytes``: a file still being written, or one whose stat
    says less than it holds (a FUSE or /proc-like file), is bounded like one over it."""
    chunks, read = [os.read(fd, size + 1)], 0
    while chunks[-1]:
        read += len(chunks[-1])
        if max_bytes is not None and read > max_bytes:
            return None
        chunks.append(os.read(fd, 1 << 16))
    return b"".join(chunks)


def remove_empty_dated(root: Path, rel: str, tops: tuple[str, ...] = ("",)) -> None:
    """The date folders (``YYYY/MM/DD``, then ``YYYY/MM``, then ``YYYY``) that held the
    file ``rel`` (vault-relative, directly in a day), each removed if nothing is left in it: a forgotten,
    moved or restored memory leaves no empty day behind in the file tree. Only date
    folders directly in one of the folders ``tops`` (vault-relative: "" the vault's top,
    the memories folder, ``.trash``) are looked at, each opened without following a
    link, and ``rmdir`` removes only an empty folder, so a person's own folders, the
    folder ``tops`` names, and a day something is in, stay."""
    parts = rel.split("/")[:-1]
    for top_folder in tops:
        base = top_folder.split("/") if top_folder else []
        dated = parts[len(base):]
        if parts[:len(base)] == base and _dated(dated):
            break
    else:
        return
    if not OPEN_AT:
        return
    folders: list[int] = []
    try:
        folders.append(os.open(root, FOLDER_FLAGS & ~getattr(os, "O_NOFOLLOW", 0)))
        for part in base:
            folders.append(os.open(part, FOLDER_FLAGS, dir_fd=folders[-1]))
        top = len(folders)
        for part in dated[:-1]:
            folders.append(os.open(part, FOLDER_FLAGS, dir_fd=folders[-1]))
        for fd, name in zip(reversed(folders[top - 1:]), reversed(dated)):
            os.rmdir(name, dir_fd=fd)
    except OSError:
        return  # not empty, a link, or gone: it stays as it is
    finally:
        for fd in folders:
            os.close(fd)


def _dated(parts: list[str]) -> bool:
    """Whether ``parts`` are ``YYYY/MM/DD`` as digits: the only folders the tool puts a
    memory in (a file directly in ``2024/`` or ``2024/12/`` is in a person's folder)."""
    return len(parts) == 3 and all(len(p) == width and p.isascii() and p.isdigit()
                                   for p, width in zip(parts, (4, 2, 2)))
