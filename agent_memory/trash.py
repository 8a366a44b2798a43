"""The vault's ``.trash/``: what the tool moved there, and only that, may be purged or restored.

``.trash/`` is also Obsidian's own trash folder, so a file found there is not the
tool's to delete. Every file the tool puts there is recorded in a small ledger inside
the folder (``.trash/.agent-memory.jsonl``, one JSON object a line) with the hash of
the bytes it put there: ``gc`` purges a recorded file only while it still holds those
bytes, after its retention, and ``restore`` puts one back where it came from. The
ledger lives beside the files it describes (not in the index, which may be deleted
or live elsewhere); losing it only means nothing is purged.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import stat as stat_kind
from collections.abc import Callable, Iterator
from pathlib import Path

from . import locking
from .errors import PathRefused, VaultError, disk_error

TRASH_DIRNAME = ".trash"
LEDGER_NAME = ".agent-memory.jsonl"
REASONS = ("forgotten", "expired", "replaced", "conflict")


@dataclasses.dataclass(frozen=True)
class Entry:
    """One file the tool put in the trash."""

    trash: str  # vault-relative path inside .trash/
    source: str  # vault-relative path it came from (where restore puts it back)
    id: str
    reason: str  # one of REASONS
    at: str  # canonical UTC time it was put there
    sha256: str  # of the bytes put there: a file holding others is not the tool's any more
    inode: int = 0  # and the file itself: a person's rename (say, Obsidian deleting a note
    ctime_ns: int = 0  # they had moved back) changes its ctime, so it is not the tool's either

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False, sort_keys=True)


def _sha256(path: Path) -> str | None:
    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return None


class Trash:
    """The trash folder of one vault (``root/.trash``), refused when it is a symlink."""

    def __init__(self, root: Path, fsync_dir: Callable[[Path], None], write_temp: Callable[[Path, bytes], Path],
                 changed: Callable[[str, str, str], None] | None = None) -> None:
        self.root = root
        self._changed = changed  # the store's record of what a write did to the vault
        self.folder = root / TRASH_DIRNAME
        self.ledger = self.folder / LEDGER_NAME
        self._fsync_dir = fsync_dir  # the store's: one place bytes reach the disk
        self._write_temp = write_temp

    # ------------------------------------------------------------------ safety
    def check(self) -> None:
        """A ``.trash`` that is a symlink (a ``git pull`` can bring one) would send
        forgotten memories out of the vault and let ``gc`` delete files elsewhere."""
        try:
            found = os.lstat(self.folder)
        except FileNotFoundError:
            return
        if stat_kind.S_ISLNK(found.st_mode) or not stat_kind.S_ISDIR(found.st_mode):
            raise VaultError(
                f"{self.folder} is a symlink or not a folder; the tool only moves files into a real .trash/ folder "
                "inside the vault. Replace it with a folder (mkdir) and retry."
            )

    def _inside(self, rel: str) -> Path:
        """The absolute path of a trash entry, refused unless it resolves inside the real
        trash folder (no symlinked folder on the way)."""
        if self.folder.is_symlink():
            raise PathRefused(f"{self.folder} is a symlink; nothing is removed through it.")
        path = self.root / rel
        real, parent = self.folder.resolve(), path.parent.resolve()
        if not rel.startswith(TRASH_DIRNAME + "/") or (parent != real and real not in parent.parents):
            raise PathRefused(f"{rel!r} is not in the vault's .trash/ folder.")
        return path

    def _make_folder(self, folder: Path) -> None:
        """Create a folder inside the trash, refusing a symlinked folder on the way (one
        arriving by ``git pull`` would send forgotten memories out of the vault)."""
        for part in (*reversed(folder.relative_to(self.folder).parents), folder.relative_to(self.folder)):
            step = self.folder / part
            if step.is_symlink():
                raise PathRefused(f"{step.relative_to(self.root).as_posix()} is a symlink: not in the vault's .trash/ "
                                  "folder. Replace it with a real folder and retry.")
        folder.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ the ledger
    def entries(self) -> list[Entry]:
        """Every recorded entry, oldest first (a damaged line is skipped, not fatal)."""
        try:
            lines = self.ledger.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        except (OSError, UnicodeError) as exc:
            raise VaultError(f"Cannot read the trash ledger {self.ledger}: {exc}.") from exc
        out = []
        for line in lines:
            try:
                out.append(Entry(**json.loads(line)))
            except (ValueError, TypeError):
                continue
        return out

    def _append(self, entry: Entry) -> None:
        fd = os.open(self.ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
        try:
            os.write(fd, (entry.to_json() + "\n").encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)

    def _rewrite(self, keep: list[Entry]) -> None:
        tmp = self.folder / f".{LEDGER_NAME}.{os.getpid()}.tmp"
        tmp.write_text("".join(e.to_json() + "\n" for e in keep), encoding="utf-8")
        os.replace(tmp, self.ledger)

    def _still_ours(self, entry: Entry) -> bool:
        """The entry's file is the one the tool put there, unchanged: same bytes, and (where
        recorded) the same inode and ctime, so a person's file at that path never counts."""
        path = self.root / entry.trash
        try:
            found = os.lstat(path)
        except OSError:
            return False
        if entry.inode and (found.st_ino, found.st_ctime_ns) != (entry.inode, entry.ctime_ns):
            return False
        return stat_kind.S_ISREG(found.st_mode) and _sha256(path) == entry.sha256

    def live(self) -> list[Entry]:
        """Entries whose file is still there as the tool put it, newest first."""
        return [e for e in reversed(self.entries()) if self._still_ours(e)]

    # ------------------------------------------------------------------ putting things in
    def _free_name(self, source: str, reason: str, now: str) -> Path:
        """``.trash/<source>`` for a forgotten or expired memory (numbered if taken); a
        version or conflict copy says so and when: ``<stem>.replaced-20260720T090000Z.md``."""
        stem, suffix = (source[:-3], ".md") if source.endswith(".md") else (source, "")
        if reason in ("replaced", "conflict"):
            stem += f".{reason}-{now.replace('-', '').replace(':', '')}"
        for n in range(1, 10_000):
            target = self.folder / (f"{stem}{suffix}" if n == 1 else f"{stem}-{n}{suffix}")
            if not os.path.lexists(target):
                return target
        raise VaultError(f"Too many copies of {source} in the trash; run `agent-memory gc`.")

    def move_in(self, path: Path, source: str, memory_id: str, reason: str, now: str) -> str:
        """Move ``path`` (a file in the vault, or a displaced temp file) to the trash as a
        copy of ``source``; returns its vault-relative trash path."""
        try:
            return self._move_in(path, source, memory_id, reason, now)
        except OSError as exc:
            raise disk_error(exc, f"move {source} to the trash") from exc

    def _move_in(self, path: Path, source: str, memory_id: str, reason: str, now: str) -> str:
        self.check()
        target = self._free_name(source, reason, now)
        self._make_folder(target.parent)
        try:
            locking.move_no_replace(path, target)  # never over a file already in the trash
        except FileExistsError:
            return self._move_in(path, source, memory_id, reason, now)
        found = os.lstat(target)
        # The bytes that moved, read where they are now: a save that replaced the file
        # just before the move is what moved, and must count as the tool's to put back.
        digest = _sha256(target) or ""
        rel = target.relative_to(self.root).as_posix()
        if self._changed is not None and path == self.root / source:  # a memory left the vault (not a parked copy)
            self._changed(source, reason, rel)
        self._append(Entry(trash=rel, source=source, id=memory_id, reason=reason, at=now, sha256=digest,
                           inode=found.st_ino, ctime_ns=found.st_ctime_ns))
        self._fsync_dir(target.parent)
        return rel

    def copy_in(self, data: bytes, source: str, memory_id: str, reason: str, now: str) -> str:
        """Keep ``data`` (e.g. a body about to be replaced) as a trash copy of ``source``."""
        self.check()
        target = self._free_name(source, reason, now)
        here = (self.root / source).parent  # a folder the orphan sweep walks, should a crash come now
        try:
            self._make_folder(target.parent)
            tmp = self._write_temp(here if here.is_dir() else target.parent, data)
        except OSError as exc:
            raise disk_error(exc, f"keep the previous version of {source} in the trash") from exc
        return self.move_in(tmp, source, memory_id, reason, now)

    # ------------------------------------------------------------------ taking things out
    def purge(self, older_than: dt.timedelta, now: dt.datetime) -> tuple[list[str], int, list[str]]:
        """Delete the tool's own entries older than ``older_than``; returns (removed, kept,
        refused: ledger lines naming a file outside ``.trash/``, left as they are).

        A file in the trash the tool did not put there (Obsidian's, a person's), or one
        that no longer holds the recorded bytes, is never deleted."""
        self.check()
        removed: list[str] = []
        refused: list[str] = []
        keep: list[Entry] = []
        entries = self.entries()
        for entry in entries:
            try:
                path = self._inside(entry.trash)
            except PathRefused:  # a tampered or mistaken line: never followed, never dropped
                refused.append(entry.trash)
                keep.append(entry)
                continue
            try:
                at = dt.datetime.fromisoformat(entry.at)
            except ValueError:
                keep.append(entry)
                continue
            if not os.path.lexists(path):
                continue  # restored or removed by hand: the record goes
            if now - at >= older_than and self._still_ours(entry):
                path.unlink()
                removed.append(entry.trash)
            else:
                keep.append(entry)
        if len(keep) != len(entries):
            self._rewrite(keep)
        return removed, len(self.live()), refused

    def find(self, key: str) -> Entry | None:
        """The newest live entry for a memory id, its original path or its trash path."""
        key = key.strip().replace("\\", "/").removeprefix("./")
        for entry in self.live():
            if key in (entry.id, entry.source, entry.trash):
                return entry
        return None

    def take_out(self, entry: Entry, target: Path) -> None:
        """Put an entry back at ``target``, never replacing a file there."""
        path = self._inside(entry.trash)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            locking.move_no_replace(path, target)
            self._fsync_dir(target.parent)
            if self._changed is not None:
                self._changed(target.relative_to(self.root).as_posix(), "restored", entry.trash)
            self._rewrite([e for e in self.entries() if e != entry])
        except FileExistsError:
            raise
        except OSError as exc:
            raise disk_error(exc, f"restore {entry.trash}") from exc

    def files(self) -> Iterator[Path]:
        """Every file in the trash (the tool's and others'), for counting."""
        for folder, _dirs, names in os.walk(self.folder):
            for name in names:
                if name != LEDGER_NAME:
                    yield Path(folder) / name
