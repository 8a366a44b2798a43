"""What reconcile compares to tell whether a file needs reading again: its stat as the
index stores it and its content hash, with git's racy-clean rule for coarse file times
(docs/design/reconcile.md)."""

from __future__ import annotations

import os
import sqlite3
import struct
import time
from dataclasses import dataclass, field

from ..note.parse import file_version

RACY_NS = 2_500_000_000  # a tick of the coarsest file system times (FAT: 2 s), and some slack

_STAMP = struct.Struct("<4q")


def signed64(n: int) -> int:
    """An integer as SQLite can store it (signed 64 bits), wrapped: ``st_ino`` is an
    unsigned 64-bit number on some file systems, and a timestamp past the year 2262 has
    more nanoseconds than 63 bits hold (a ``touch -d 2300-01-01``). These numbers are
    only compared for equality, which wrapping keeps."""
    return (n + 2**63) % 2**64 - 2**63


def packed_stamp(size: int, mtime_ns: int, ctime_ns: int, inode: int) -> bytes:
    """A file's stat as reconcile compares it (size, mtime, ctime, inode, each as
    ``signed64``), in 32 bytes: at 100k memories a snapshot of tuples of ints held
    ~17 MB more at a server's start. Packed as they are first: wrapping only changes a
    number that does not fit, and a 100k start packs 200k stamps."""
    try:
        return _STAMP.pack(size, mtime_ns, ctime_ns, inode)
    except struct.error:
        return _STAMP.pack(signed64(size), signed64(mtime_ns), signed64(ctime_ns), signed64(inode))



@dataclass(frozen=True)
class FileFacts:
    """What reconcile compares to decide whether a file needs re-reading: the stat git's
    index compares (size, mtime, ctime, inode; a ``cp -p`` or ``rsync -a`` keeps size and
    mtime but not the other two), then the content hash."""

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    sha256: str
    racy: bool = field(default=False, compare=False)  # see ``racy``
    # When the file was read (``indexed_ns``): the racy rule asks whether a save could
    # have followed the read within the file's time tick, and a row is written later
    # (after the lock, the transaction, a rebuild's batch), so not its write time.
    seen_ns: int = field(default_factory=time.time_ns, compare=False)

    @classmethod
    def read(cls, data: bytes, stat: os.stat_result) -> FileFacts:
        """The facts of bytes just read and the stat of the file they came from."""
        _size, mtime_ns, ctime_ns, inode = stamp_of(stat)
        return cls(len(data), mtime_ns, ctime_ns, inode, file_version(data))

    @classmethod
    def of_row(cls, row: sqlite3.Row) -> FileFacts:
        return cls(row["size"], row["mtime_ns"], row["ctime_ns"], row["inode"], row["sha256"],
                   racy=racy(row["mtime_ns"], row["ctime_ns"], row["indexed_ns"]), seen_ns=row["indexed_ns"])

    @property
    def stamp(self) -> tuple[int, int, int, int]:
        return self.size, self.mtime_ns, self.ctime_ns, self.inode

    def same_stat(self, stat: os.stat_result | None) -> bool:
        """Whether ``stat`` is the file these facts were taken from, unchanged since."""
        return stat is not None and stamp_of(stat) == self.stamp


def racy(mtime_ns: int, ctime_ns: int, indexed_ns: int) -> bool:
    """Whether a file's stat was taken within ``RACY_NS`` of its change on a file system
    with whole-second times, where a second same-size edit in that tick would keep the
    same stat: such a file is hashed again (git's racy-clean rule; docs/design/reconcile.md)."""
    coarse = mtime_ns % 1_000_000_000 == 0 and ctime_ns % 1_000_000_000 == 0
    return coarse and max(mtime_ns, ctime_ns) >= indexed_ns - RACY_NS


def stamp_of(stat: os.stat_result) -> tuple[int, int, int, int]:
    """The stat numbers reconcile compares, as the index stores them (``signed64``)."""
    return signed64(stat.st_size), signed64(stat.st_mtime_ns), signed64(stat.st_ctime_ns), signed64(stat.st_ino)
