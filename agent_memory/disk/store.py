"""The vault's files on disk: reading them safely, walking them, and durable writes.

All file writes in the package go through ``write_temp`` + a rename here, so a crash
leaves either the old file or the new one, and tests can inject disk errors in one place.
Where things are (the vault, its index folder, which paths are memories) is ``layout``.
"""

from __future__ import annotations

import ctypes
import datetime as dt
import errno
import hashlib
import json
import logging
import os
import re
import secrets
import stat as stat_kind
import sys
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from . import locking, nofollow, openat
from .durable import fsync_folder
from .walk import Walk
from ..errors import PathRefused, SavedMeanwhile, VaultError, disk_error
from ..trust import confine
from ..trust.register import digest, refusal, set_aside
from .layout import INDEX_DIRNAME, TMP_SUFFIX
from .trash import Trash

log = logging.getLogger("agent_memory.disk")

_TMP_NAME = re.compile(r"\.[0-9a-f]{12}" + re.escape(TMP_SUFFIX))
ORPHAN_AGE = 60.0  # seconds: a temp file of ours this old belongs to a process that died
READ_TRIES = 5  # checks of a file replaced (an atomic save) between its check and its open
_REPLACED = object()
_SLOW_PATH = object()
PARKED_GRACE = 3.0  # seconds a displaced file is watched for writes through an open descriptor


def _utc_stamp() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# syncfs(2): flush one file system, every file and folder written, in one call (Linux).
_syncfs = locking.libc_function("syncfs") if sys.platform.startswith("linux") else None


def _holds(path: Path, checked: bytes) -> bool:
    """Whether ``path`` is a regular file holding exactly ``checked`` (what a swap or a
    move aside displaced may be a folder a person put at that name: it is not read)."""
    return _regular_bytes(path) == checked


def _regular_bytes(path: Path) -> bytes | None:
    """The bytes of ``path`` if it is a regular file, else None (what a swap displaced may
    be a folder a person put at that name, or a link: it is not read). Looked at and read
    through one descriptor, so nothing swapped in between is read instead."""
    try:
        return nofollow.read_regular(path)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR):
            return None
        raise


def _still_holds(path: Path, checked: bytes) -> bool:
    """``_holds``, False for a file that is gone."""
    try:
        return _holds(path, checked)
    except FileNotFoundError:
        return False


def _follow(path: Path) -> int | None:
    """A descriptor on the file at ``path``, to read it later wherever it has moved
    (None if it cannot be opened: a copy made on the way must never fail the write)."""
    try:
        return nofollow.open_read(path)
    except OSError:
        return None


def _read_followed(fd: int) -> bytes | None:
    """What the file ``fd`` was opened on holds now (None if it cannot be read)."""
    chunks: list[bytes] = []
    try:
        while chunk := os.pread(fd, 1 << 20, sum(map(len, chunks))):
            chunks.append(chunk)
    except OSError:
        return None
    return b"".join(chunks)


def _unchanged_since(path: Path, written: os.stat_result) -> os.stat_result | None:
    """The stat of ``path`` if it is still the file ``written`` describes (same inode,
    size and mtime: nobody wrote into it since), else None."""
    try:
        now = os.stat(path)
    except OSError:
        return None
    same = (now.st_ino, now.st_dev, now.st_size, now.st_mtime_ns) == (
        written.st_ino, written.st_dev, written.st_size, written.st_mtime_ns)
    return now if same else None


def _remove_empty(folders: list[Path]) -> None:
    """Remove folders a failed write created (deepest first), unless something is in them."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


@dataclass(frozen=True)
class WriteChange:
    """One file a tool write changed (what its git commit takes): ``how`` is
    ``created``, ``changed``, ``moved`` (``detail``: the old path), ``forgotten`` or
    ``expired`` (``detail``: its trash path), or ``restored`` (``detail``: the trash
    path it came back from)."""

    path: str
    how: str
    detail: str = ""


OUTSIDE = "is outside the vault; give a path relative to the vault folder, such as 2026/07/20/some-memory.md."


class Store:
    """Paths, layout and atomic writes of one vault folder."""

    def __init__(self, root: Path, memories_folder: Callable[[], str] = str) -> None:
        self.root = root
        # Where new memories go (the ``memories.folder`` setting, read when asked): the date
        # folders there and at the vault's top are the tool's to remove once empty.
        self.memories_folder = memories_folder
        self._real_root: Path | None = None
        self.control_dir = root / INDEX_DIRNAME  # lock, staging, parked files: always the vault's own
        self.parked_dir = self.control_dir / "parked"
        self.trash = Trash(root, self.fsync_dir, lambda folder, data: self.write_temp(folder, data), self.changed,
                           memories_folder)
        # This user's register of open operations and git's tracked files: every record the
        # tool leaves in .index/ or .trash/ is checked against both before it is acted on.
        self.register, self.tracked = self.trash.register, self.trash.tracked
        # What the write in progress did to the vault's files, in order; the vault's write
        # lock takes them when the write ends (``git.commits`` commits them).
        self.changes: list[WriteChange] = []
        self._batch: set[Path] | None = None  # inside ``durable_together``: folders to fsync at its end
        # Memories the last whole walk found with a second name (a symlink, or a hard link
        # anywhere): an edit through one name brings no event for the other.
        self.aliased = 0
        self.most_held = 0  # the most folder entries the last whole walk held at once

    def changed(self, rel: str, how: str, detail: str = "") -> None:
        """Note that the tool changed ``rel`` (``WriteChange`` says how)."""
        self.changes.append(WriteChange(rel, how, detail))

    # ------------------------------------------------------------------ paths
    def abspath(self, rel: str) -> Path:
        return self.root / rel

    def relpath(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def confine(self, path: str) -> Path:
        """Resolve ``path`` (relative to the vault or absolute) and refuse escapes.

        Symlinks are resolved first, so a link pointing outside is refused too; every
        dot-folder except ``.prompts/`` is refused (``.git/config`` can hold tokens).
        """
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before Python 3.13)
            reason = getattr(exc, "strerror", None) or "a symlink loop"  # not str(exc): it names the absolute path
            raise PathRefused(f"{path!r} cannot be resolved ({reason}); give the path of a real file.") from exc
        refusal = self._refusal(resolved)
        lexical = os.path.normpath(candidate)
        if refusal == OUTSIDE and any(lexical.startswith(str(base).rstrip(os.sep) + os.sep)
                                      for base in (self.root, self.real_root)):
            refusal = "leads outside the vault through a symlink; only files inside the vault can be read."
        if refusal:
            raise PathRefused(f"{path!r} {refusal}")
        return resolved

    @property
    def real_root(self) -> Path:
        """The vault folder with symlinks resolved (computed once: resolving costs a
        system call per path part, and every read checks against it; a vault that moves
        is caught by the vault's own identity check)."""
        if self._real_root is None:
            self._real_root = self.root.resolve()
        return self._real_root

    def _refusal(self, resolved: Path) -> str | None:
        """Why a resolved path is off limits, or None: outside the vault, or in a
        dot-folder other than ``.prompts/`` (``.git/config`` can hold tokens). The words
        never name the vault's absolute path: over MCP they reach the model, which needs
        only the vault-relative paths it works with."""
        root = self.real_root
        text, base = str(resolved), str(root)
        if text != base and not text.startswith(base.rstrip(os.sep) + os.sep):
            return OUTSIDE
        rel_parts = resolved.relative_to(root).parts
        hidden = [p for p in rel_parts[:-1] if p.startswith(".") and p != ".prompts"]
        if hidden or (rel_parts and rel_parts[-1].startswith(".") and rel_parts[-1] != ".prompts"):
            return "is inside a hidden folder or is a hidden file; only memories and .prompts/ can be read."
        return None

    def _allowed_where(self, where: str) -> bool:
        """``_refusal`` for a path the kernel reported (``/proc/self/fd``): a file inside
        the vault, not the vault itself, in no dot-folder. Plain string checks for the
        common case (no part of the path inside the vault starts with a dot); the full
        check otherwise (``.prompts/`` is allowed)."""
        base = str(self.real_root)
        prefix = base.rstrip(os.sep) + os.sep
        if not where.startswith(prefix) or where == base:
            return False
        if os.sep + "." not in where[len(prefix) - 1:]:
            return True
        return self._refusal(Path(where)) is None

    def inside(self, rel: str) -> bool:
        """Whether ``rel``, once symlinks are resolved, is a file ``confine`` allows: a
        link to a file elsewhere or into ``.git/`` is no memory (get_memory and search
        would hand out that file's content)."""
        try:
            resolved = (self.root / rel).resolve()
        except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13)
            return False
        return resolved != self.real_root and self._refusal(resolved) is None

    def unaliased(self, rel: str) -> bool:
        """Whether ``rel`` is where it says: no symlink on its way (a symlinked folder
        could lead out of the vault or into ``.git/``), and a place ``confine`` allows.
        Import checks an item's path with it before writing there."""
        try:
            resolved = (self.root / rel).resolve()
        except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13)
            return False
        return resolved == self.real_root / rel and self._refusal(resolved) is None

    # ------------------------------------------------------------------ reading
    def walk(
        self, skipped: Callable[[str, str], None] | None = None, temp_files: list[Path] | None = None,
        kept_aside: list[str] | None = None,
    ) -> Iterator[tuple[str, os.stat_result]]:
        """Every memory file with its stat, in the index's path order (``walk.Walk``, which
        says what each argument hears of); once it is done, ``aliased`` counts the memories
        found with a second name and ``most_held`` the most entries it held at once."""
        walk = Walk(self.root, self.inside, skipped, temp_files, kept_aside)
        yield from walk
        self.aliased, self.most_held = walk.aliased, walk.most_held

    def read(self, rel: str, max_bytes: int | None = None) -> tuple[bytes, os.stat_result] | None:
        """A regular file's bytes and stat, read where it was checked to be; None for a file
        that is gone, is not a regular file, or leads out of the vault.

        Confinement is checked again at read time: the path is resolved and checked, then
        opened without following a last symlink and without blocking (a named pipe would
        wait for a writer forever); the opened file's (device, inode) must be the one that
        was checked, and where the kernel says it is must be inside the vault. A symlink
        or folder swapped in between (``O_NOFOLLOW`` alone guards only the last
        component) is refused. An editor's atomic save between the check and the open
        also changes the inode: that is checked afresh a few times before giving up.
        Files over ``max_bytes`` read as None.
        """
        for _ in range(READ_TRIES):
            outcome = self._read_once(rel, max_bytes)
            if outcome is not _REPLACED:
                return outcome  # type: ignore[return-value]
        return None

    def _read_once(self, rel: str, max_bytes: int | None) -> tuple[bytes, os.stat_result] | None | object:
        fast = self._read_by_fd(rel, max_bytes)
        if fast is not _SLOW_PATH:
            return fast
        try:
            resolved = (self.root / rel).resolve()
        except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13)
            return None
        if resolved == self.real_root or self._refusal(resolved) is not None:
            return None
        try:
            checked = os.stat(resolved)
            fd = nofollow.open_read(resolved)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as exc:  # unreadable, a symlink swapped in, a socket
            log.warning("skipped %s: %s", rel, exc.strerror or exc)
            return None
        found = os.fstat(fd)
        if not self.opened_inside(fd):
            os.close(fd)
            return None
        if (found.st_dev, found.st_ino) != (checked.st_dev, checked.st_ino):
            os.close(fd)
            return _REPLACED  # replaced since it was checked: check the new one
        if not stat_kind.S_ISREG(found.st_mode) or (max_bytes is not None and found.st_size > max_bytes):
            os.close(fd)  # a pipe, a device, a folder; too big
            return None
        try:
            data = openat.read_bounded(fd, found.st_size, max_bytes)  # grown past the bound since: None
        finally:
            os.close(fd)
        return None if data is None else (data, found)

    def _read_by_fd(self, rel: str, max_bytes: int | None) -> tuple[bytes, os.stat_result] | None | object:
        """The common case in three system calls: open the path itself without following
        a last symlink, then ask the kernel where the opened file is (Linux:
        ``/proc/self/fd``) and check that place. ``_SLOW_PATH`` when this cannot decide:
        the memory is a symlink (allowed inside the vault), or there is no ``/proc``."""
        path = os.path.join(self.root, rel)  # a string: no Path object per read
        try:
            fd = nofollow.open_read(path)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return _SLOW_PATH  # a symlink: resolved and checked the long way
            log.warning("skipped %s: %s", rel, exc.strerror or exc)
            return None
        try:
            where = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            os.close(fd)
            return _SLOW_PATH
        found = os.fstat(fd)
        if not self._allowed_where(where) or not stat_kind.S_ISREG(found.st_mode) \
                or (max_bytes is not None and found.st_size > max_bytes):
            os.close(fd)  # outside the vault or in a dot-folder; a pipe, a device, a folder; too big
            return None
        try:
            data = openat.read_bounded(fd, found.st_size, max_bytes)  # grown past the bound since: None
        finally:
            os.close(fd)
        return None if data is None else (data, found)

    def read_all(self, rels: Iterable[str], max_bytes: int | None = None,
                 ) -> Generator[tuple[str, tuple[bytes, os.stat_result] | None], None, None]:
        """``read`` of many paths in turn (a rebuild's every memory), each path with what
        ``read`` gives for it, in fewer system calls: each folder on the way is opened
        once, from the vault's own folder down and without following a symlink
        (``O_NOFOLLOW``), and each file by its name inside its opened folder, not following
        a symlink either. What is opened is then the file at that path in the vault,
        whatever is swapped in above it meanwhile (a folder replaced by a link opens no
        more), so the kernel need not be asked where it is. (A folder already opened and
        then moved whole out of the vault is still read from: its files are those that
        were in the vault, and whoever can add to it could add them to the vault.)
        Whatever this cannot open so (a symlink on the way or at the end, a dot-folder,
        an error, a system without ``dir_fd``) is read by ``read``, the one rule."""
        if not openat.OPEN_AT:
            for rel in rels:
                yield rel, self.read(rel, max_bytes)
            return
        folders: dict[str, int] = {}  # folder (vault-relative) -> an open descriptor of it
        try:
            folders[""] = os.open(self.real_root, openat.FOLDER_FLAGS)
        except OSError:
            folders[""] = -1
        try:
            for rel in rels:
                folder, _, name = rel.rpartition("/")
                if folders[""] < 0 or name.startswith(".") or "/." in f"/{folder}":
                    yield rel, self.read(rel, max_bytes)
                    continue
                try:
                    found = openat.read_at(openat.folder_fd(folders, folder), name, max_bytes)
                except OSError as exc:  # a symlink on the way or at the end, gone, unreadable
                    if exc.errno in (errno.EMFILE, errno.ENFILE):  # out of descriptors: the kept folders' back
                        openat.release(folders)
                    found = self.read(rel, max_bytes)
                yield rel, found
        finally:
            for fd in folders.values():
                if fd >= 0:
                    os.close(fd)

    def opened_inside(self, fd: int) -> bool:
        """Where the kernel says the opened file is (Linux: ``/proc/self/fd``) is inside
        the vault: a folder swapped for a symlink between the check and the open would
        pass the stat comparison, since both would see the swapped path."""
        try:
            where = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return True  # no /proc here: the (device, inode) comparison is what there is
        return self._refusal(Path(where)) is None

    def stat(self, rel: str) -> os.stat_result | None:
        try:
            return self.abspath(rel).stat()
        except OSError:  # missing, or a symlink loop: no file to read either way
            return None

    # ------------------------------------------------------------------ writing
    def write_temp(self, folder: Path, data: bytes, mode: int = 0o644, owner: tuple[int, int] | None = None, *,
                   name: str | None = None) -> Path:
        """The one place bytes reach the disk: a hidden temp file, fsynced.

        ``mode``: an edit keeps the file's permissions (a 0600 note stays private), and
        ``owner`` its owner and group where this process may give them (an agent that
        runs as root must not take a person's note from them). ``name``: the file is
        created under that name at once, never over one there and never through a link
        (an import's staged file, in a folder it made: nothing counts it before the
        manifest, so it needs no temp name and rename of its own)."""
        tmp = folder / (name if name is not None else f".{secrets.token_hex(6)}{TMP_SUFFIX}")
        fd = nofollow.open_write(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            if owner is not None and hasattr(os, "fchown") and owner != (os.geteuid(), os.getegid()):
                try:
                    os.fchown(fd, *owner)
                except PermissionError:
                    try:
                        os.fchown(fd, -1, owner[1])  # not root: the group at least, if this user is in it
                    except PermissionError:
                        pass
            if mode != 0o644 and hasattr(os, "fchmod"):
                os.fchmod(fd, mode)  # exactly the original's, whatever the umask (after chown, which clears setuid)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if self._batch is None or _syncfs is None:
                os.fsync(fd)  # in a batch on Linux, one syncfs at its end makes it durable with the rest
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        return tmp

    def fsync_dir(self, folder: Path) -> None:
        """Make a folder's entries durable (a new name, a rename); in a batch, once at its end."""
        if self._batch is not None:
            self._batch.add(folder)
            return
        fsync_folder(folder)

    def folders_missing(self, folder: Path) -> list[Path]:
        """The folders under the vault's root that making ``folder`` would create, deepest
        first: each one's name must be made durable in its parent (``entry_durable``)."""
        return [d for d in (folder, *folder.parents) if self._below_root(d) and not d.exists()]

    def entry_durable(self, folder: Path, made: list[Path]) -> None:
        """A new name in ``folder`` survives a power cut: the folder fsynced, and the
        parent of each folder made for it (``folders_missing`` before they were made)."""
        self.fsync_dir(folder)
        for each in made:
            self.fsync_dir(each.parent)

    @contextmanager
    def durable_together(self) -> Iterator[None]:
        """Write many files, then make them durable together at the end: one ``syncfs``
        of the vault's file system on Linux, else each file fsynced as it is written and
        each folder once. A caller that needs a point durable inside (an import's commit
        point) calls ``sync_batch``. Nested batches join the outer one."""
        if self._batch is not None:
            yield
            return
        self._batch = set()
        try:
            yield
            self.sync_batch()
        finally:
            self._batch = None

    def sync_batch(self) -> None:
        """Make everything the batch wrote so far durable (raises ``OSError`` if it cannot)."""
        folders, self._batch = self._batch or set(), set()
        if _syncfs is not None:
            fd = os.open(self.root, os.O_RDONLY)
            try:
                if _syncfs(fd) != 0:
                    code = ctypes.get_errno()
                    raise OSError(code, os.strerror(code), str(self.root))
            finally:
                os.close(fd)
            return
        for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
            fsync_folder(folder)

    def create(self, folder: str, slug: str, data: bytes) -> str:
        """Write a new file as ``folder/slug.md`` (``-2``, ``-3``… if taken); never overwrites."""
        return self.place(None, folder, slug, data)[0]

    def publish(self, staged: Path | None, folder: str, slug: str, data: bytes = b"") -> str:
        """``place``, returning only the new file's vault path."""
        return self.place(staged, folder, slug, data)[0]

    def place(self, staged: Path | None, folder: str, slug: str, data: bytes = b"") -> tuple[str, os.stat_result | None]:
        """Give a new file its name ``folder/slug.md`` (``-2``, ``-3``… if taken), never
        replacing a file: ``data`` written afresh, or a ``staged`` file (an import's),
        moved there in one step (``locking.move_no_replace``).

        Returns its vault path and the stat of the file published, taken after the
        move, when it is still the very file that was written (same inode, size and
        mtime): the index row can be built from the bytes just written and that stat,
        without reading the file back. None when something touched it in between."""
        target_dir = self.abspath(folder)
        plain = self._plain_existing_folder(target_dir, folder)
        new_dirs: list[Path] = []
        if plain is None:  # not there yet (or no /proc to ask): check the way there
            new_dirs = [d for d in (target_dir, *target_dir.parents) if self._below_root(d) and not d.exists()]
            existing = next((d for d in (target_dir, *target_dir.parents) if d.exists() or d == self.root), self.root)
            plain = existing == self.root or self.unaliased(self.relpath(existing))
        else:
            existing = target_dir
        if not plain:
            # A symlinked folder on the way: the file would land outside the vault (or in
            # a folder the walk skips) and never be indexed.
            raise VaultError(
                f"{self.relpath(existing)}/ in the vault is (or goes through) a symlink; new memories are not "
                "written through symlinks. Replace it with a real folder and retry."
            )
        try:
            if new_dirs:
                target_dir.mkdir(parents=True, exist_ok=True)
            tmp = staged if staged is not None else self.write_temp(target_dir, data)
            written = os.stat(tmp)
        except OSError as exc:
            _remove_empty(new_dirs)
            raise disk_error(exc, "write the memory file") from exc
        moved = False
        try:
            for n in range(1, 10_000):
                name = f"{slug}.md" if n == 1 else f"{slug}-{n}.md"
                try:
                    locking.move_no_replace(tmp, target_dir / name)  # fails if the name exists: no overwrite
                except FileExistsError:
                    continue
                moved = True
                self.fsync_dir(target_dir)
                for made in new_dirs:  # a folder made for it (a new day's): its name in its parent, once
                    self.fsync_dir(made.parent)
                rel = f"{folder}/{name}" if folder else name
                self.changed(rel, "created")
                return rel, _unchanged_since(target_dir / name, written)
            raise VaultError(f"Too many files named {slug!r} in {folder!r}.")
        except OSError as exc:
            _remove_empty(new_dirs)
            raise disk_error(exc, "write the memory file") from exc
        finally:
            if staged is None and not moved:
                tmp.unlink(missing_ok=True)

    def remove_empty_dated(self, rel: str) -> None:
        """The date folders the memory that was at ``rel`` leaves empty, removed: at the
        vault's top or in the memories folder (``openat.remove_empty_dated``)."""
        openat.remove_empty_dated(self.root, rel, ("", self.memories_folder()))

    def _below_root(self, path: Path) -> bool:
        text, base = str(path), str(self.root)
        return text != base and text.startswith(base.rstrip(os.sep) + os.sep)

    def _plain_existing_folder(self, target_dir: Path, folder: str) -> bool | None:
        """Whether an existing folder is where its path says (no symlink on the way) and
        a place ``confine`` allows, asked of the kernel in three system calls (open it,
        read ``/proc/self/fd``) instead of resolving each part of the path. None when
        this cannot tell: the folder is not there yet, or there is no ``/proc``."""
        try:
            fd = os.open(target_dir, openat.FOLDER_FLAGS)
        except OSError as exc:
            return False if exc.errno == errno.ELOOP else None  # ELOOP: the folder itself is a symlink
        try:
            where = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
        finally:
            os.close(fd)
        if folder and where == f"{str(self.real_root).rstrip(os.sep)}{os.sep}{folder.replace('/', os.sep)}":
            return self._allowed_where(where)  # the common case, in plain strings
        return where == str(self.real_root / folder if folder else self.real_root) and self._refusal(Path(where)) is None

    def replace_checked(self, rel: str, data: bytes, checked: bytes) -> os.stat_result | None:
        """Put ``data`` at ``rel`` only if the file there still holds exactly ``checked``,
        else raise ``SavedMeanwhile`` (a save that landed meanwhile stands). Returns the
        stat of the file now there if it is still the one written (None: read it back).
        Every step leaves a record ``settle_parked`` understands, so no crash loses a
        byte: the checked swap, docs/design/checked-writes.md (3 and 4)."""
        target = self._edit_target(rel)
        try:
            found = os.stat(target)
        except FileNotFoundError:
            raise SavedMeanwhile(rel) from None  # deleted since it was read: that stands too
        parked = self._park(rel, checked, data, stat_kind.S_IMODE(found.st_mode), (found.st_uid, found.st_gid))
        swapped = False
        try:
            # Writing the new file took a while (an fsync; longer on a busy disk): a save that
            # landed meanwhile is refused here, before the person's file is ever displaced.
            # Once swapped, the tool's version is the file for a moment, and an editor that
            # reads it then may save from it (``_swap_back``).
            if not _still_holds(target, checked):
                self._unpark(parked)
                raise SavedMeanwhile(rel)
            written = os.stat(parked)
            if locking.swap(parked, target):
                swapped = True
                displaced = _regular_bytes(parked)  # parked now holds what the swap displaced
                if displaced != checked:
                    self._swap_back(rel, parked, target, data, displaced)
                    raise SavedMeanwhile(rel)
            else:
                swapped = self._replace_without_swap(rel, parked, target, checked)
            self.fsync_dir(target.parent)
            self.changed(rel, "changed")
            return _unchanged_since(target, written)
        except OSError as exc:
            if not swapped:
                self._unpark(parked)  # nothing was changed
                raise disk_error(exc, f"write {rel}") from exc
            raise VaultError(  # changed, and every byte it displaced is kept in .index/parked/
                f"{rel} was written, but then: {exc.strerror or exc}. What it replaced is kept until the "
                "next write looks at it (and moved to .trash/ if it differs). Check the file, then retry."
            ) from exc

    def read_only(self, rel: str) -> bool:
        """Whether a person made the memory read-only (no write bit for anyone: ``chmod
        a-w``, a file manager's read-only box). The swap could still replace it, as the
        folder is writable; vim and Obsidian would refuse, and so do the tools' edits."""
        try:
            return stat_kind.S_IMODE(os.stat(self._edit_target(rel)).st_mode) & 0o222 == 0
        except OSError:
            return False  # gone or unreadable: the write itself says so

    def _edit_target(self, rel: str) -> Path:
        """The file an edit of ``rel`` changes: a memory that is a symlink inside the
        vault is edited where it points (replacing the link itself would make two files
        claim one id)."""
        path = self.abspath(rel)
        return self.confine(rel) if path.is_symlink() else path

    def _swap_back(self, rel: str, parked: Path, target: Path, ours: bytes, displaced: bytes | None) -> None:
        """Undo a swap that displaced someone's save; ``parked`` then holds ours again
        (kept a while: for a moment it was the file, and an editor that opened it then
        may write into it). If yet another save replaced ours meanwhile, that newest save
        becomes the file and the older one goes to the trash as a conflict copy.

        For that moment the tool's version was the file: an editor that read it then and
        saves from it afterwards (at once, or after an hour's typing) replaces the save
        put back, whose lines are then in no file. Nothing can tell that later save from
        one made from the person's own, so the save put back is also copied to the trash
        (``_keep_put_back``). Likewise the newest save when two landed: the older one was
        the file between the two swaps back."""
        # Empty when compared: an editor between truncate and write, whose text may land
        # any moment; the copy is of what that file holds after the swap back.
        follow = _follow(parked) if displaced == b"" else None
        try:
            self._swap_back_and_keep(rel, parked, target, ours, displaced, follow)
        finally:
            if follow is not None:
                os.close(follow)

    def _swap_back_and_keep(self, rel: str, parked: Path, target: Path, ours: bytes, displaced: bytes | None,
                            follow: int | None) -> None:
        """``_swap_back``'s swaps, and the copies it keeps."""
        if not locking.swap(parked, target):
            raise VaultError(f"Could not put {rel} back after a save landed during a write; "
                             f"its saved bytes are in {parked}.")
        in_place = _regular_bytes(parked)  # what the swap back displaced: ours, unless a save replaced it
        if in_place == ours:
            self._keep_put_back(rel, displaced if follow is None else _read_followed(follow))
            return
        # The newest save is here, an older one is the file.
        if not locking.swap(parked, target):
            raise VaultError(f"Two saves landed on {rel} during a write; the newer is in {parked}.")
        kept = self.trash.move_in(parked, rel, "", "conflict", _utc_stamp())
        self._unpark(parked)
        log.warning("two saves landed on %s while the tool wrote it; the older is kept in %s", rel, kept)
        self._keep_put_back(rel, in_place)

    def _keep_put_back(self, rel: str, saved: bytes | None) -> None:
        """Copy a save the write put back to the trash as a conflict copy (``_swap_back``
        says why). Made after the swap back, which must not wait: each moment the
        tool's version stays in place is one an editor may read it. Never raises: the
        save is in place; the copy only guards it against a save made from what an
        editor saw for that moment."""
        if not saved:
            return  # not a file (a folder a person put there), or still empty: no line to lose yet
        try:
            kept = self.trash.copy_in(saved, rel, "", "conflict", _utc_stamp())
        except (OSError, VaultError, PathRefused) as exc:  # a full disk; a .trash/ that is a symlink
            log.warning("a save that landed on %s during a write is back in place, but no copy of it could be "
                        "kept in the trash: %s", rel, exc)
            return
        log.warning("a save landed on %s while the tool wrote it; it is back in place, and a copy is kept in %s "
                    "(the tool's version was the file for a moment: an editor that read it then would save over it)",
                    rel, kept)

    def _replace_without_swap(self, rel: str, parked: Path, target: Path, checked: bytes) -> bool:
        """The fallback where the OS cannot swap: take the memory aside, compare it, and
        give the new file its name without replacing anything. True once the memory was
        changed."""
        held = parked.with_suffix(".held")
        os.rename(target, held)
        if not _holds(held, checked):  # saved (or made a folder) before it was taken aside: put it back
            try:
                locking.move_no_replace(held, target)
            except FileExistsError:  # and saved again meanwhile: keep both
                self.trash.move_in(held, rel, "", "conflict", _utc_stamp())
            self._unpark(parked)
            raise SavedMeanwhile(rel)
        try:
            locking.move_no_replace(parked, target)
        except FileExistsError:  # a save created the name while it was aside: it stands
            # The memory aside held the checked bytes when compared, but an editor that
            # opened it before may have written into it since: parked under the record in
            # place of ours (never in place), it is deleted only if still unchanged.
            parked.unlink()
            os.rename(held, parked)
            raise SavedMeanwhile(rel) from None
        os.rename(held, parked)  # the displaced file, kept a while like a swapped one
        return True

    # ------------------------------------------------------------------ displaced files
    def _park(self, rel: str, checked: bytes, data: bytes, mode: int, owner: tuple[int, int] | None = None) -> Path:
        """A new file ``parked/<n>.md`` holding ``data``, after its record ``<n>.json``."""
        folder = self.parked_dir
        name = f"{time.time_ns()}-{secrets.token_hex(4)}"
        record = folder / f"{name}.json"
        note = {"source": rel, "checked": hashlib.sha256(checked).hexdigest(), "ours": hashlib.sha256(data).hexdigest()}
        try:
            confine.tool_folder(folder)  # never a planted link: the bytes kept there are a memory's
        except OSError as exc:  # a vault this user may not write: no .index/ to keep them in
            raise disk_error(exc, f"write {rel}") from exc
        try:
            self._write_record(record, note)
            tmp = self.write_temp(folder, data, mode, owner)
            os.rename(tmp, folder / f"{name}.md")
        except OSError as exc:
            self._drop_record(record)
            raise disk_error(exc, f"write {rel}") from exc
        return folder / f"{name}.md"

    def park(self, displaced: Path, rel: str, checked: bytes) -> Path:
        """Keep an existing file (one a move or a write displaced) a while in ``parked/``
        instead of deleting it: record first, then a rename (its inode stays, so a
        descriptor opened on it still writes into it, and ``settle_parked`` sees that)."""
        folder = self.parked_dir
        name = f"{time.time_ns()}-{secrets.token_hex(4)}"
        confine.tool_folder(folder)
        note = {"source": rel, "checked": hashlib.sha256(checked).hexdigest(), "ours": ""}
        record = folder / f"{name}.json"
        self._write_record(record, note)
        try:
            os.rename(displaced, folder / f"{name}.md")
        except OSError:
            self._drop_record(record)
            raise
        return folder / f"{name}.md"

    def _write_record(self, record: Path, note: dict[str, str]) -> None:
        """A parked file's record, entered in this user's register first (not made durable:
        neither is the record; a crash that loses the entry only sets the record aside)."""
        note["record"] = secrets.token_hex(8)  # two parkings of the same bytes are two records
        data = json.dumps(note).encode("utf-8")
        self.register.enter("parked", digest(data), durable=False)
        try:
            record.write_bytes(data)
        except BaseException:
            self._drop_record(record, digest(data))
            raise

    def _drop_record(self, record: Path, known: str | None = None) -> None:
        """Remove a parked file's record and its register entry."""
        try:
            found = known or digest(nofollow.read_record(record))
        except (OSError, ValueError):
            found = None
        if found:
            self.register.done("parked", found)
        record.unlink(missing_ok=True)

    def _unpark(self, parked: Path) -> None:
        parked.unlink(missing_ok=True)
        self._drop_record(parked.with_suffix(".json"))

    def settle_parked(self, grace: float = PARKED_GRACE) -> list[str]:
        """Look again at parked files older than ``grace``. One holding the bytes that
        were checked (what a write displaced, unchanged) or the write's own bytes (never
        swapped in, or swapped back) is deleted; anything else, a save that reached it
        through an open descriptor, or one a crash left there, goes to the trash as a
        conflict copy (docs/design/checked-writes.md, 5). Returns those copies' trash
        paths. Never raises: one odd file must not stop every write."""
        kept: list[str] = []
        self.trash.finish_interrupted()  # a move into the trash a crash cut short, first
        listed = self.parked_files()
        self.remove_orphans([p for p in listed if p.name.endswith(TMP_SUFFIX)])  # a kill before its rename
        names = sorted(p.name for p in listed if p.suffix == ".json")
        now = time.time_ns()
        for name in names:
            stem = name[:-5]
            try:
                if now - int(stem.split("-", 1)[0]) < grace * 1e9:
                    break  # names start with their time: the rest are younger
            except ValueError:
                pass  # not a name the tool gives: looked at (and set aside) below
            try:
                kept.extend(self.settle_one(stem))
            except (OSError, ValueError, VaultError) as exc:
                log.warning("could not look at %s: %s", self.parked_dir / name, exc)
        return kept

    def set_aside_unlisted_parked(self) -> None:
        """Set aside every parked record this user's register does not list, young ones too
        (``doctor --apply`` and ``--discard`` first gather every such record)."""
        stems = sorted(p.name[:-5] for p in self.parked_files() if p.suffix == ".json")
        for stem in stems:
            try:
                self.settle_one(stem, settle=False)
            except (OSError, ValueError) as exc:
                log.warning("could not look at %s.json: %s", self.parked_dir / stem, exc)

    def parked_files(self) -> list[Path]:
        """What ``.index/parked/`` holds; nothing when it is not a real folder: a pull can
        put a link to a person's folder there, whose ``.json`` files (and the files beside
        them) would be set aside into ``.index/``, its old temp-named files deleted."""
        if not confine.real_folder(self.parked_dir):
            return []
        try:
            return list(self.parked_dir.iterdir())
        except OSError:
            return []

    def settle_one(self, stem: str, settle: bool = True) -> list[str]:
        """Settle one parked record, if this user's register lists it; else set it aside."""
        record = self.parked_dir / f"{stem}.json"
        files = [self.parked_dir / f"{stem}.md", self.parked_dir / f"{stem}.held"]
        raw = nofollow.read_record(record)
        found = digest(raw)
        origin = f"{INDEX_DIRNAME}/parked/{record.name}"
        why = refusal(self.register, self.tracked, "parked", found, origin)
        if why is not None:
            set_aside(self.control_dir, "parked", found, [record, *files], origin, why, parked_would(raw))
            return []
        if not settle:
            return []
        note = nofollow.load_json(raw)
        if not isinstance(note, dict):
            note = {}  # listed, so ours: never happens, and then each file is kept in the trash
        kept = []
        for parked in files:
            if not parked.exists():
                continue
            data = _regular_bytes(parked)
            if data is None:  # a link or a folder a synced folder put there: nobody's save, never read
                if parked.is_symlink():
                    parked.unlink()
                continue
            if hashlib.sha256(data).hexdigest() in (note.get("checked"), note.get("ours")):
                parked.unlink()
                continue
            source = note.get("source")
            source = source if confine.memory_problem(source) is None else "displaced.md"
            kept.append(self.trash.move_in(parked, str(source), "", "conflict", _utc_stamp()))
            log.warning("%s was written to while the tool replaced it; those bytes are kept in %s", source, kept[-1])
        record.unlink(missing_ok=True)
        self.register.done("parked", found)
        return kept

    def remove_orphans(self, found: list[Path]) -> int:
        """Delete temp files of ours (exactly ``TMP_SUFFIX``'s pattern, never another
        program's) older than ``ORPHAN_AGE``: left by a process that died mid-write."""
        removed = 0
        for path in found:
            try:
                if _TMP_NAME.fullmatch(path.name) and time.time() - path.lstat().st_mtime > ORPHAN_AGE:
                    path.unlink()
                    removed += 1
            except OSError:
                continue
        return removed

    def write_new_file(self, rel: str, data: bytes, mode: int = 0o644, owner: tuple[int, int] | None = None) -> None:
        """Create ``rel`` exactly (used by import and init, and by a move's copy, which
        gives it the original's ``mode`` and ``owner``); refuses to overwrite."""
        target = self.abspath(rel)
        new_dirs = self.folders_missing(target.parent)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.write_temp(target.parent, data, mode, owner)
        except OSError as exc:
            raise disk_error(exc, f"write {rel}") from exc
        try:
            locking.move_no_replace(tmp, target)
            self.entry_durable(target.parent, new_dirs)
            self.changed(rel, "created")
        except FileExistsError as exc:
            raise VaultError(f"{rel} already exists; it was left as it was.") from exc
        except OSError as exc:
            raise disk_error(exc, f"write {rel}") from exc
        finally:
            tmp.unlink(missing_ok=True)


def parked_would(raw: bytes) -> str:
    """What settling a parked file's record would do, for a person deciding about it."""
    try:
        note = nofollow.load_json(raw)
        source = note.get("source") if isinstance(note, dict) else None
    except ValueError:
        source = None
    shown = source if confine.memory_problem(source) is None else "displaced.md"
    return (f"delete a displaced copy of {shown!s} kept in .index/parked/ if it holds the bytes a write checked, "
            "else keep it in .trash/ as a conflict copy")
