"""Writing a whole file so that a crash leaves the old one or the new one, never half
of either, and making a folder's new names survive a crash: for files replaced whole
outside a memory's write (git's attributes, the merge driver's result, the tool's
records). A memory's write goes through ``Store``, which also guards against a person
saving at the same moment."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from .layout import TMP_SUFFIX


def replace_file(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all: a temp file beside it (fsynced), then a rename.

    A crash or an error leaves the old file as it was, never a truncated one."""
    tmp = write_beside(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_beside(path: Path, data: bytes, mode: int | None = None) -> Path:
    """A new hidden temp file beside ``path`` holding ``data``, fsynced, with ``path``'s
    permissions (or 0644) unless ``mode`` says others: the first half of a whole-file
    write, for a caller that puts it in place by its own rule (a rename, a swap, a rename
    that never replaces)."""
    tmp = path.with_name(f".{secrets.token_hex(6)}{TMP_SUFFIX}")
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except OSError:
            mode = 0o644
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def fsync_folder(folder: Path, *, strict: bool = False) -> None:
    """fsync a folder, so the names in it (a new file, a rename) survive a crash.
    A failed fsync is ignored, unless ``strict``: then it raises ``OSError``, for a
    caller that must not report a record durable when it may not be (the register)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # Windows cannot open a folder; its renames are durable enough
        return
    try:
        os.fsync(fd)
    except OSError:
        if strict:
            raise
    finally:
        os.close(fd)
