"""Files the tool keeps in the vault (its records under ``.index/`` and ``.trash/``, the
settings, the git files it reads), opened by path as untrusted: a clone, a pull or a
synced folder can plant a symlink or a named pipe at any of these names. So a file is
never opened through a symlink at its name (``O_NOFOLLOW``: ``OSError`` ``ELOOP``),
never waited on (``O_NONBLOCK``: a pipe with no writer reads as empty at once), and
read only when it is a regular file, and only so far.

(Memories are read by ``Store.read``, which also checks where the opened file is;
folders are opened with ``openat.FOLDER_FLAGS``.)
"""

from __future__ import annotations

import json
import os
import stat as stat_kind
from typing import Any

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # 0 where there is none (Windows)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a pipe: fail (or read as empty) at once, never wait
READ_FLAGS = os.O_RDONLY | NOFOLLOW | NONBLOCK
RECORD_LIMIT = 64 << 20  # bytes of a record: far more than the tool writes


def open_read(path: str | os.PathLike[str]) -> int:
    """A descriptor for reading the file at ``path``, not through a symlink at its name
    (``OSError`` ``ELOOP``) and without waiting for a pipe's writer. For a caller that
    checks the opened file itself before reading; else ``read_regular``."""
    return os.open(path, READ_FLAGS)


def open_write(path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """``os.open(path, flags, mode)``, never through a symlink at ``path`` (``OSError``
    ``ELOOP``), which would send the write to the file it points to. ``flags`` say the
    rest as the caller needs it: ``O_CREAT | O_EXCL`` for a new file, ``O_APPEND`` for a
    journal, ``O_NONBLOCK`` so a planted pipe fails (``ENXIO``) rather than waits."""
    return os.open(path, flags | NOFOLLOW, mode)


def read_regular(path: str | os.PathLike[str], limit: int | None = None) -> bytes | None:
    """The bytes of the regular file at ``path``; None for anything else there (a
    folder, a pipe, a device). At most ``limit + 1`` bytes are read (all of them when
    ``limit`` is None): more than ``limit`` says the file is over it, for the caller to
    refuse or skip. ``OSError`` when it cannot be opened: ``FileNotFoundError``, or
    ``ELOOP`` for a symlink (never followed)."""
    fd = open_read(path)
    try:
        found = os.fstat(fd)
        return _read_upto(fd, found.st_size, limit) if stat_kind.S_ISREG(found.st_mode) else None
    finally:
        os.close(fd)


def read_record(path: str | os.PathLike[str], limit: int = RECORD_LIMIT) -> bytes:
    """A record's bytes, read as untrusted: never through a symlink, never blocking on a
    pipe, only a regular file, at most ``limit`` bytes (``OSError`` or ``ValueError``
    otherwise; ``FileNotFoundError`` when there is none)."""
    fd = open_read(path)
    try:
        found = os.fstat(fd)
        if not stat_kind.S_ISREG(found.st_mode):
            raise ValueError(f"{os.path.basename(path)} is not a regular file")
        data = _read_upto(fd, found.st_size, limit) if found.st_size <= limit else b""
        if found.st_size > limit or len(data) > limit:  # grown since its stat, or a stat that says too little
            raise ValueError(f"{os.path.basename(path)} is {max(found.st_size, len(data)):,} bytes, "
                             "too large for a record")
        return data
    finally:
        os.close(fd)


def _read_upto(fd: int, size: int, limit: int | None) -> bytes:
    """An opened file's bytes to its end, or its first ``limit + 1`` (it may have grown
    since its stat said ``size``, or say less than it holds)."""
    room = None if limit is None else limit + 1
    chunks: list[bytes] = []
    want = size + 1
    while room is None or room > 0:
        chunk = os.read(fd, want if room is None else min(want, room))
        if not chunk:
            break
        chunks.append(chunk)
        if room is not None:
            room -= len(chunk)
        want = 1 << 16
    return b"".join(chunks)


def load_json(data: bytes | str) -> Any:
    """A record's JSON, parsed as untrusted: lists or objects nested thousands deep (a
    few hundred KB of ``[``) make ``json.loads`` raise ``RecursionError``, which no
    caller expecting a damaged record's ``ValueError`` catches: every command crashed on
    a planted one. ``ValueError`` for that too."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("the record nests lists or objects too deeply to be one the tool wrote") from None
