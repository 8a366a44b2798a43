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
    tmp = path.with_name(f".{secrets.token_hex(6)}{TMP_SUFFIX}")
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
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        tmp.unlink(missing_ok=True)
        raise


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
