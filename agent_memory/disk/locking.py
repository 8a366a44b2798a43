"""Exclusive access to one vault across processes, and swapping two files atomically.

Both sit behind this one small module so the rest of the package stays portable:
POSIX systems lock with ``flock``, Windows with ``msvcrt.locking``; Linux swaps with
``renameat2(RENAME_EXCHANGE)`` and macOS with ``renamex_np(RENAME_SWAP)``. Nothing
POSIX-only is imported at the top, so the package imports and runs (single-process)
anywhere; ``swap`` answers False where the OS cannot swap, and callers fall back.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import re
import stat as stat_kind
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..clock import iso, utcnow
from ..errors import VaultError
from . import nofollow

try:  # POSIX
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]


def ignore_folder(folder: Path) -> None:
    """Give a control folder (``.index/``) its own ``.gitignore`` of ``*``, so a vault that
    is a git repository never shows it as untracked, whether or not ``init`` wrote the
    vault's ``.gitignore``. Never replaces one; a read-only folder is left as it is."""
    path = folder / ".gitignore"
    if path.exists():
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:
        return  # made meanwhile, or the folder cannot be written
    try:
        os.write(fd, b"*\n")
    finally:
        os.close(fd)


def _lock_fd(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX)
    elif sys.platform == "win32":
        import msvcrt

        while True:
            try:
                msvcrt.locking(fd, msvcrt.LK_LOCK, 1)  # retries for 10 s, then raises
                return
            except OSError:
                continue


def _try_lock_fd(fd: int) -> bool:
    """``_lock_fd`` without waiting: False when another open file holds the lock."""
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
    elif sys.platform == "win32":
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
    return True


def _unlock_fd(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
    elif sys.platform == "win32":
        import msvcrt

        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)


class WriteLock:
    """Exclusive across processes (a lock on a file in the vault's own ``.index/``) and
    re-entrant within one, so a write's dedup check, file create and index write
    happen as one step even with two agents and the CLI on one vault.

    The lock file is refused when it is a symlink or a folder: a ``git pull`` can bring
    either, and a lock taken on a file elsewhere would not exclude anyone.

    Between holds the file stays open (unlocked), so a write does not open and close it
    again: each hold still checks, once locked, that it is the file at the lock's path.
    A forked child opens its own: ``flock`` belongs to the open file, which a fork shares,
    so through the parent's the child would take the parent's lock as its own."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._fd: int | None = None
        self._kept: list[int] = []  # the file between holds, closed with this lock at the latest
        self._kept_by = os.getpid()  # the process whose open file that is
        weakref.finalize(self, _close_all, self._kept)

    def _open(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)  # someone may have deleted .index/
        ignore_folder(self.path.parent)
        try:
            found = os.lstat(self.path)
        except FileNotFoundError:
            found = None
        if found is not None and not stat_kind.S_ISREG(found.st_mode):
            kind = "a symlink" if stat_kind.S_ISLNK(found.st_mode) else "not a regular file"
            raise VaultError(
                f"The vault's lock file {self.path} is {kind}; remove it (it holds nothing) and retry."
            )
        try:
            return nofollow.open_write(self.path, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            raise VaultError(f"Cannot open the vault's lock file {self.path}: {exc.strerror or exc}.") from exc

    @property
    def depth(self) -> int:
        """How many nested holds this process has (1: the outermost)."""
        return self._depth

    def _acquire(self, wait: bool = True) -> int | None:
        """Lock the file that is at the lock's path *now*: if ``.index/`` was deleted (it
        is only a cache) while another process waited on the old file, that process
        would hold a lock nobody else takes; so after locking, check and retry.
        ``wait=False``: None at once when another process holds it."""
        if self._kept_by != os.getpid():  # forked: closing the parent's copy leaves its lock alone
            _close_all(self._kept)
            self._kept_by = os.getpid()
        while True:
            fd = self._kept.pop() if self._kept else self._open()
            if wait:
                _lock_fd(fd)
            elif not _try_lock_fd(fd):
                self._kept.append(fd)
                return None
            try:
                same = os.path.samestat(os.fstat(fd), os.lstat(self.path))
            except OSError:
                same = False
            if same:
                return fd
            _unlock_fd(fd)
            os.close(fd)

    @contextmanager
    def hold(self, wait: bool = True) -> Iterator[bool]:
        """Hold the lock inside (True). ``wait=False``: do not wait for another process
        holding it; inside, False says it is not held (nothing is locked)."""
        with self._thread_lock:
            if self._depth == 0:
                self._fd = self._acquire(wait)
                if self._fd is None:
                    yield False
                    return
            self._depth += 1
            try:
                yield True
            finally:
                self._depth -= 1
                if self._depth == 0 and self._fd is not None:
                    fd, self._fd = self._fd, None
                    try:
                        _unlock_fd(fd)
                    except OSError:
                        os.close(fd)
                        raise
                    self._kept.append(fd)

    def close(self) -> None:
        """Close the lock's file (kept open between holds)."""
        with self._thread_lock:
            _close_all(self._kept)


def _close_all(fds: list[int]) -> None:
    while fds:
        with contextlib.suppress(OSError):
            os.close(fds.pop())


_COUNTS_MAX = 1 << 16  # bytes of write counts: a few indexes' worth; a larger file is not ours


class Generations:
    """How many writes each index of one vault has taken, beside the vault's lock (read
    and written only while the lock is held). A process whose index is not the one
    another process wrote through must reconcile before trusting its own. Losing the
    file costs one extra reconcile, nothing more.

    Once written, the file stays open for the next write (as the lock's does), checked
    each time to still be the file at its name (a pull or a deleted ``.index/`` replaces
    it): a write reads and rewrites it without opening and closing it again."""

    def __init__(self, path: Path, mine: str) -> None:
        self.path = path
        self.mine = mine  # this process's index, as a key
        self._kept: list[int] = []  # the file, open for reading and writing, since the last write
        weakref.finalize(self, _close_all, self._kept)

    def counts(self) -> dict[str, int]:
        """Every index's write count, as the file holds them now."""
        return self._read()

    def _open(self) -> tuple[int, int] | None:
        """The file kept open since the last write, and its size, while it is still the
        regular file at the path; else None (closed, for ``_opened`` to open anew)."""
        if self._kept:
            try:
                found = os.fstat(self._kept[0])
                if os.path.samestat(found, os.lstat(self.path)):
                    return self._kept[0], found.st_size
            except OSError:
                pass
            _close_all(self._kept)
        return None

    def _opened(self) -> tuple[int, int] | None:
        """``_open``, else the file opened (made if missing) to be kept: never through a
        planted link, never waiting on a pipe, only a regular file. None where it
        cannot be written (a read-only vault, a full disk)."""
        kept = self._open()
        if kept is not None:
            return kept
        try:
            fd = nofollow.open_write(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return None
        try:
            found = os.fstat(fd)
        except OSError:
            found = None
        if found is None or not stat_kind.S_ISREG(found.st_mode):
            os.close(fd)
            return None
        self._kept.append(fd)
        return fd, found.st_size

    def _read(self) -> dict[str, int]:
        try:  # never through a planted link (to /dev/zero, say), nor blocked by a pipe
            kept = self._open()
            if kept is not None:
                data: bytes | None = _read_at_start(kept[0], _COUNTS_MAX + 1)
            else:
                data = nofollow.read_regular(self.path, _COUNTS_MAX)
            loaded = json.loads(data) if data is not None and len(data) <= _COUNTS_MAX else None
        except (OSError, ValueError, RecursionError):  # damaged or planted: no counts
            return {}
        return {str(k): v for k, v in loaded.items() if isinstance(v, int)} if isinstance(loaded, dict) else {}

    def others(self) -> dict[str, int]:
        """The write counts of every other index of this vault."""
        return {k: v for k, v in self._read().items() if k != self.mine}

    def bump(self, counts: dict[str, int] | None = None) -> None:
        """Count one more write of this index; ``counts``: the file's counts as read
        under the lock this write holds (else read now)."""
        counts = dict(self._read() if counts is None else counts)
        counts[self.mine] = counts.get(self.mine, 0) + 1
        data = json.dumps(counts).encode("utf-8")
        opened = self._opened()
        if opened is None:
            return  # a read-only vault or a full disk: the next write tries again
        fd, size = opened
        try:
            # Written over in place, then cut to length if it was longer: no O_TRUNC, which
            # on ext4 makes the close start writing the file back (a third of a millisecond
            # per write). Only ever read and written under the lock, so no reader sees it
            # half done.
            _write_at_start(fd, data)
            if len(data) < size:
                os.ftruncate(fd, len(data))
        except OSError:
            _close_all(self._kept)  # a full disk: losing the count costs one extra reconcile

    def close(self) -> None:
        """Close the file kept open since the last write."""
        _close_all(self._kept)


def _read_at_start(fd: int, size: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, size, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    return os.read(fd, size)


def _write_at_start(fd: int, data: bytes) -> None:
    if hasattr(os, "pwrite"):
        os.pwrite(fd, data, 0)
    else:
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, data)


# --------------------------------------------------------------------------- swapping

_RENAME_EXCHANGE = 2  # linux/fs.h
_RENAME_SWAP = 2  # macOS stdio.h
_AT_FDCWD = -100


def libc_function(name: str) -> Callable[..., int] | None:
    """A C library function, looked up in the running process first (which has libc
    loaded: no ``ldconfig`` subprocess, as ``ctypes.util.find_library`` runs, at import)."""
    for library in (None, "c"):
        try:
            if library is None:
                found = ctypes.CDLL(None, use_errno=True)
            else:
                from ctypes import util  # only where the running process does not export it (5 ms to import)

                found = ctypes.CDLL(util.find_library(library), use_errno=True)
            function: Callable[..., int] = getattr(found, name)
            return function
        except (OSError, AttributeError, TypeError):
            continue
    return None


_RENAME_NOREPLACE = 1  # linux/fs.h
_renameat2 = libc_function("renameat2") if sys.platform.startswith("linux") else None
_renamex_np = libc_function("renamex_np") if sys.platform == "darwin" else None
_swap_refused = {errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EPERM}


def swap(a: Path, b: Path) -> bool:
    """Exchange two paths in one atomic step; False where this OS or file system
    cannot (then nothing was changed). Other failures raise ``OSError``.

    Unlike a rename over the target, a swap hands back what it displaced: the caller
    can check that no one saved the target between its check and the swap."""
    fa, fb = os.fsencode(a), os.fsencode(b)
    if _renameat2 is not None:
        result = _renameat2(_AT_FDCWD, fa, _AT_FDCWD, fb, _RENAME_EXCHANGE)
    elif _renamex_np is not None:
        result = _renamex_np(fa, fb, _RENAME_SWAP)
    else:
        return False
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in _swap_refused:
        return False
    raise OSError(code, os.strerror(code), str(b))


def move_no_replace_at(src_dir: int, src: str, dst_dir: int, dst: str) -> None:
    """``move_no_replace`` of the name ``src`` in the open folder ``src_dir`` to ``dst`` in
    the open folder ``dst_dir`` (an import's publishing): the file lands in that very
    folder, whatever is renamed, or swapped for a symlink, on its path meanwhile."""
    if _renameat2 is not None:
        if _renameat2(src_dir, os.fsencode(src), dst_dir, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        if code == errno.EEXIST:
            raise FileExistsError(code, os.strerror(code), dst)
        if code not in _swap_refused:
            raise OSError(code, os.strerror(code), dst)
    try:
        os.link(src, dst, src_dir_fd=src_dir, dst_dir_fd=dst_dir)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS):
            raise
        os.close(os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dst_dir))
        os.replace(src, dst, src_dir_fd=src_dir, dst_dir_fd=dst_dir)
        return
    os.unlink(src, dir_fd=src_dir)


def move_no_replace(src: Path, dst: Path) -> None:
    """Give ``src`` the name ``dst`` in one step, never replacing a file there
    (``FileExistsError`` if one is). ``renameat2(RENAME_NOREPLACE)`` where Linux has it;
    else a hard link then removing the old name; where there are no hard links (exFAT,
    some network drives), an exclusive create of the name, then a rename over that
    placeholder: never an overwrite of someone's file."""
    if _renameat2 is not None:
        if _renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        if code == errno.EEXIST:
            raise FileExistsError(code, os.strerror(code), str(dst))
        if code not in _swap_refused:
            raise OSError(code, os.strerror(code), str(dst))
    try:
        os.link(src, dst)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS):
            raise
        os.close(os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.replace(src, dst)
        return
    os.unlink(src)


def move_aside(path: Path, target: Path) -> Path:
    """``path`` renamed beside ``target`` as ``<name>.saved-<when>`` (``-2``, ``-3`` … when
    that is taken, as in one second), and that name returned. What a write takes away to
    look at before it is sure nobody's save is in it goes here, never under the temp-file
    pattern: a crash before the look leaves it under a name a person reads, which no
    sweep removes (the orphan sweep deletes temp files) and no index reads (not ``.md``).
    ``FileNotFoundError`` when ``path`` is gone."""
    stamp = iso(utcnow()).replace(":", "")
    for n in range(1, 100):
        kept = target.with_name(f"{saved_prefix(target)}{stamp}{f'-{n}' if n > 1 else ''}")
        try:
            move_no_replace(path, kept)
            return kept
        except FileExistsError:  # kept once already this second
            continue
    raise VaultError(f"A save of {target.name} could not be given a name beside it; it is kept at {path}.")


KEPT_ASIDE = re.compile(r".\.saved-\d{4}-\d{2}-\d{2}T\d{6}Z(?:-\d+)?")
"""The names ``move_aside`` gives (``<name>.saved-<when>``, ``-2`` …): ``doctor`` lists them."""


def saved_prefix(target: Path) -> str:
    """``<name>.saved-``, the name cut to leave room for the stamp in a file name's 255 bytes."""
    name = target.name
    while len(os.fsencode(name)) > 200:
        name = name[:-1]
    return f"{name}.saved-"
