"""An open vault: its folder, index and lock, reading one file safely, and finding a memory.

The files are the truth: a file enters the index only through ``_refresh``, from the
bytes actually on disk. Whole-vault sync (``reconcile``), writes and maintenance build
on this in their own modules; ``Vault`` composes them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from stat import S_ISREG

from . import note as notes
from .clock import Clock, humanize_age, iso, utcnow
from .errors import InvalidInput, NotFound, VaultError
from .index import FileFacts, Index
from .locking import WriteLock
from .models import Memory, ReconcileReport, Summary
from .store import Store, encodable, index_folder, is_memory_path

Progress = Callable[[int, int], None]


class VaultCore:
    """A vault folder and its index. Open it, use it, ``close()`` it."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        index_dir: str | os.PathLike[str] | None = None,
        clock: Clock = utcnow,
        sync: bool = True,
    ) -> None:
        self.root = Path(root).expanduser().absolute()
        if self.root.exists() and not self.root.is_dir():
            raise VaultError(f"{self.root} is a file, not a vault folder; pass --dir with a folder.")
        if not self.root.is_dir():
            raise VaultError(f"No vault at {self.root}. Create one with `agent-memory --dir {self.root} init`.")
        self.index_dir = index_folder(self.root, index_dir)
        self.store = Store(self.root)
        self.clock = clock
        try:
            self.index = Index(self.index_dir)
        except (OSError, sqlite3.OperationalError) as exc:
            raise VaultError(f"Cannot open the index in {self.index_dir}: {exc}. Check the folder is writable.") from exc
        self._lock = WriteLock(self.index_dir / "write.lock")
        if sync:
            self._sync_on_open()

    def _sync_on_open(self) -> None:
        """Reconcile, but let a read-only vault still be read: reads filter expired
        memories anyway, so failing to move them to the trash must not stop a search."""
        try:
            self.reconcile()
        except VaultError as exc:
            if self.index.file_facts():
                print(f"agent-memory: warning: could not tidy the vault: {exc}", file=sys.stderr)
            else:
                raise

    def close(self) -> None:
        self.index.close()

    def __enter__(self) -> "VaultCore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> dt.datetime:
        return self.clock()

    @contextmanager
    def _writing(self) -> Iterator[None]:
        with self._lock.hold():
            self._check_index()
            yield

    def reconcile(self) -> ReconcileReport:
        """Make the index match the files (see ``Reconcile.reconcile``)."""
        raise NotImplementedError

    def _check_index(self) -> None:
        """Another process deleted or replaced the index file: reopen it and, if it
        came back empty, rebuild it from the files."""
        if self.index.ensure_current():
            with self._lock.hold():
                self.reconcile()

    # ------------------------------------------------------------------ sync
    def _read(self, rel: str) -> tuple[bytes, os.stat_result] | None:
        """A regular file's bytes and stat; None for anything else, so one odd file never
        stops a command. Opened without blocking: reading a named pipe would wait for a
        writer forever, holding the vault's write lock."""
        try:
            fd = os.open(self.store.abspath(rel), os.O_RDONLY | os.O_NONBLOCK)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as exc:  # unreadable, a symlink loop, a socket
            print(f"agent-memory: warning: skipped {rel}: {exc.strerror or exc}", file=sys.stderr)
            return None
        found = os.fstat(fd)
        if not S_ISREG(found.st_mode):  # a pipe, a device, a folder behind a symlink
            os.close(fd)
            return None
        with os.fdopen(fd, "rb") as handle:
            return handle.read(), found

    def _note_for(self, rel: str, data: bytes, stat: os.stat_result) -> notes.Note:
        """Parse a file, filling times a hand-written file may lack from its mtime."""
        note = notes.parse(data, rel)
        if note.created is None or note.updated is None:
            mtime = iso(dt.datetime.fromtimestamp(stat.st_mtime, dt.timezone.utc))
            note = dataclasses.replace(note, created=note.created or mtime, updated=note.updated or note.created or mtime)
        return note

    def _refresh(self, conn: sqlite3.Connection, rel: str, known: FileFacts | None) -> str:
        """Bring one path's row in line with the file: the one way a file enters the index."""
        read = self._read(rel) if is_memory_path(rel) and self.store.inside(rel) else None
        if read is None:
            return "removed" if self.index.delete(conn, rel) else "absent"
        data, stat = read
        facts = FileFacts(len(data), stat.st_mtime_ns, notes.file_version(data))
        if known is not None and known.sha256 == facts.sha256:
            if (known.size, known.mtime_ns) != (facts.size, facts.mtime_ns):
                self.index.touch(conn, rel, facts)
            return "unchanged"
        self.index.upsert(conn, self._note_for(rel, data, stat), facts)
        return "added" if known is None else "updated"

    def reconcile_path(self, rel: str) -> str:
        """Fold one changed path into the index (used by the watcher)."""
        rel = rel.replace(os.sep, "/")
        if not encodable(rel):
            return "absent"  # a name that is not UTF-8 is never indexed (SQLite holds text)
        with self._writing():
            row = self.index.by_path(rel)
            known = FileFacts(row["size"], row["mtime_ns"], row["sha256"]) if row else None
            with self.index.transaction() as conn:
                return self._refresh(conn, rel, known)


    # ------------------------------------------------------------------ lookups
    def _resolve(self, memory_id: str) -> sqlite3.Row:
        """An id, or a vault-relative path; expired memories are not found."""
        self._check_index()
        key = (memory_id or "").strip()
        if not key:
            raise InvalidInput("memory_id is empty; pass an id or a vault-relative path (use recall to find one).")
        if not encodable(key):
            raise NotFound(key)
        path = key.replace("\\", "/").removeprefix("./")
        row = self.index.by_id(key, iso(self.now())) or self.index.by_path(path)
        if row is None and path.endswith(".md") and self.store.stat(path) is not None:
            self.reconcile_path(path)  # a file made by hand that the index has not seen yet
            row = self.index.by_path(path)
        if row is None:
            raise NotFound(key)
        if row["expires"] is not None and row["expires"] <= iso(self.now()):
            raise NotFound(key)
        return row

    def _summary(self, row: sqlite3.Row) -> Summary:
        return Summary(
            id=row["id"],
            path=row["path"],
            version=row["sha256"],
            namespace=row["namespace"],
            tags=row["tags"].split() if row["tags"] else [],
            title=row["title"],
            created=row["created"],
            updated=row["updated"],
            age=humanize_age(row["created"], self.now()),
            expires=row["expires"],
        )

    def _memory(self, rel: str, data: bytes, row: sqlite3.Row) -> Memory:
        note = notes.parse(data, rel)
        relations: dict[str, list[str]] = {}
        for relation, target in note.links:
            relations.setdefault(relation, []).append(target)
        summary = self._summary(row)
        summary["version"] = notes.file_version(data)
        return Memory(
            **summary,
            content=note.body,
            source=note.source,
            aliases=note.aliases,
            relations=relations,
            front_matter=note.meta,
            problems=note.problems,
            conflict=note.conflict,
        )

    def _load(self, memory_id: str) -> tuple[sqlite3.Row, bytes]:
        """The row and the file's current bytes, re-indexing the file if it drifted."""
        row = self._resolve(memory_id)
        read = self._read(row["path"])
        if read is None:
            self.reconcile_path(row["path"])
            raise NotFound(memory_id)
        data, _ = read
        if notes.file_version(data) != row["sha256"]:
            self.reconcile_path(row["path"])
            row = self._resolve(memory_id)
        return row, data

    def get(self, memory_id: str) -> Memory:
        row, data = self._load(memory_id)
        return self._memory(row["path"], data, row)

