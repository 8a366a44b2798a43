"""The files into the index: one file at a time (``FileIndexer``), and the whole vault
(``Reconciler``: reconcile, reindex, the expiry sweep).

The files are the truth: a file enters the index only through ``FileIndexer.refresh``,
from the bytes actually on disk. The protocol (the stat snapshot, examining outside the
lock, the racy-stamp rule): docs/design/reconcile.md.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import gc
import os
import re
import sqlite3
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import AbstractContextManager, closing, contextmanager
from pathlib import Path

from ..clock import iso
from ..disk import nofollow
from ..disk.layout import encodable, is_memory_path
from ..disk.store import Store
from .facts import packed_stamp
from ..errors import VaultError
from ..limits import MAX_FILE_BYTES
from ..models import ReconcileReport
from ..note import parse
from ..note.parse import Note, file_version
from ..progress import Every, Progress
from .db import Index
from .facts import FileFacts

SETTLE_GIVE_UP = 2.0  # seconds: an empty or broken file older than this is no save in progress
# Changed paths read (outside the lock), then folded in (under it, in one transaction) at a time.
REFRESH_BATCH = 2000
STALE_MARK = "stale"  # in the vault's .index/: an index write failed, rebuild on the next open


@dataclasses.dataclass(frozen=True)
class Examined:
    """A memory file as read before the lock: its facts, and its note (None: not
    parsed, its bytes are the ones the index already holds)."""

    note: Note | None
    facts: FileFacts


class _Unread(enum.Enum):
    UNREAD = "unread"


_UNREAD = _Unread.UNREAD  # refresh's "not examined yet" (None says "no file there")


def _current(known: FileFacts | None, examined: Examined | None) -> bool:
    """Whether an indexed row (``known``) is of exactly the file as just examined: the
    same content hash and the same stat, taken where file times cannot hide a second
    save (not racy)."""
    return (known is not None and examined is not None and not known.racy
            and known.sha256 == examined.facts.sha256 and known.stamp == examined.facts.stamp)


def _still(stat: os.stat_result | None, examined: Examined | None) -> bool:
    """Whether a file examined earlier is unchanged since (same presence, size, mtime,
    ctime and inode)."""
    if examined is None:
        return stat is None
    return examined.facts.same_stat(stat)


def _mid_save(note: Note, facts: FileFacts) -> bool:
    """A file that looks like one an editor is saving right now: empty, or its front
    matter not closed yet, and modified moments ago (broken YAML is reported at once)."""
    return note.half_written and time.time_ns() - facts.mtime_ns < SETTLE_GIVE_UP * 1e9


class FileIndexer:
    """One path's row brought in line with its file: reading it (confined, bounded),
    parsing it, and the index transaction that writes the row."""

    def __init__(self, store: Store, index: Index, *, on_written: Callable[[], None]) -> None:
        self.store = store
        self.index = index
        self._on_written = on_written  # after every index write (semantic recall's embedder catches up)

    def read(self, rel: str) -> tuple[bytes, os.stat_result] | None:
        """A memory file's bytes and stat, confined to the vault at read time; None for
        anything else (gone, not a regular file, over ``MAX_FILE_BYTES``), so one odd
        file never stops a command."""
        return self.store.read(rel, MAX_FILE_BYTES)

    def read_all(self, rels: Iterable[str]) -> Generator[tuple[str, tuple[bytes, os.stat_result] | None], None, None]:
        """``read`` of many paths in turn, each with what ``read`` gives for it, in fewer
        system calls (``Store.read_all``): a rebuild's every file."""
        return self.store.read_all(rels, MAX_FILE_BYTES)

    def note_for(self, rel: str, data: bytes, stat: os.stat_result) -> Note:
        """Parse a file, filling times a hand-written file may lack: from git's author
        dates when the vault is a repository (``git_dates``, kept in the index by
        ``git/dates.py``), else from its mtime (which a checkout resets)."""
        note = parse.parse(data, rel)
        if note.created is None or note.updated is None:
            git_created, git_updated = self.index.git_date(rel) or (None, None)
            try:
                mtime = iso(dt.datetime.fromtimestamp(stat.st_mtime, dt.timezone.utc))
            except (OverflowError, OSError, ValueError):  # a timestamp past what a date holds (year 9999)
                mtime = iso(dt.datetime.fromtimestamp(0, dt.timezone.utc))
            note = dataclasses.replace(note, created=note.created or git_created or mtime,
                                       updated=note.updated or git_updated or note.created or mtime)
        return note

    def written(self, rel: str, data: bytes, stat: os.stat_result) -> Examined:
        """A file this process just wrote, examined from the bytes it wrote and the stat
        of the file as published, without reading it back."""
        return Examined(self.note_for(rel, data, stat), FileFacts.read(data, stat))

    def examine(self, rel: str, known: FileFacts | None = None) -> Examined | None:
        """Read and parse one path, outside any lock or transaction: a slow file (a huge
        one, a hostile front matter) must not hold up other writers or this process's
        readers. None: no memory file there (gone, not a regular file, out of bounds).
        A file whose bytes are those ``known`` already describes is not parsed."""
        read = self.read(rel) if is_memory_path(rel) and self.store.inside(rel) else None
        if read is None:
            return None
        data, stat = read
        facts = FileFacts.read(data, stat)
        if known is not None and known.sha256 == facts.sha256:
            return Examined(None, facts)
        return Examined(self.note_for(rel, data, stat), facts)

    def refresh(self, conn: sqlite3.Connection, rel: str, known: FileFacts | None,
                examined: Examined | None | _Unread = _UNREAD) -> str:
        """Bring one path's row in line with the file: the one way a file enters the index.

        ``examined``: what ``examine`` found before the lock was taken; used if the file
        still has that stat (size, mtime, ctime, inode), else the file is read again."""
        outcome = self._checked(conn, rel, known, examined)
        if isinstance(outcome, str):
            return outcome
        self.index.upsert(conn, *outcome)
        return "added" if known is None else "updated"

    def refresh_new(self, conn: sqlite3.Connection, rels: list[str], examined: dict[str, Examined]) -> None:
        """``refresh`` of many paths the index had no facts of (an import's new files),
        each checked as ``refresh`` checks it (``examined``: those examined already),
        their rows inserted together."""
        rows = []
        for rel in rels:
            outcome = self._checked(conn, rel, None, examined.get(rel, _UNREAD))
            if not isinstance(outcome, str):
                rows.append(outcome)
        self.index.upsert_many(conn, rows)

    def _checked(self, conn: sqlite3.Connection, rel: str, known: FileFacts | None,
                 examined: Examined | None | _Unread) -> str | tuple[Note, FileFacts]:
        """``refresh`` up to its row: what it returns when no row is to be written (done
        here), else the note and facts to write."""
        if isinstance(examined, _Unread) or not _still(self.store.stat(rel), examined):
            examined = self.examine(rel, known)
        if examined is None:
            return "removed" if self.index.delete(conn, rel) else "absent"
        if known is not None and known.sha256 == examined.facts.sha256:
            if known.stamp != examined.facts.stamp or known.racy:
                self.index.touch(conn, rel, examined.facts)
            return "unchanged"
        if examined.note is None:  # examined against facts that changed since: parse it now
            examined = self.examine(rel)
            if examined is None:
                return "removed" if self.index.delete(conn, rel) else "absent"
        note, facts = examined.note, examined.facts
        assert note is not None  # examined without known facts: always parsed
        if _mid_save(note, facts) and (known is not None or self.index.by_path(rel) is not None):
            # Caught between an editor's truncate and its write: keep the row (the memory
            # keeps its id and stays findable); its facts differ from the file's, so the
            # next event or sweep folds in the finished save ("settling": a watcher looks
            # again once it cannot be a save in progress, in case no event comes).
            return "settling"
        return note, facts

    @contextmanager
    def transaction(self, wrote: bool = True) -> Iterator[sqlite3.Connection]:
        """An index transaction after a file changed (``wrote``: this process wrote it;
        else the index is catching up with files as they are): if it fails (a full disk),
        the index is marked stale and rebuilt on the next open, and the error says so."""
        with self.guarded(wrote), self.index.transaction() as conn:
            yield conn

    @contextmanager
    def guarded(self, wrote: bool = True) -> Iterator[None]:
        """``transaction``'s care for index writes that make their own transactions (a
        fresh load's, ``Index.load_fresh``)."""
        try:
            yield
        except sqlite3.Error as exc:
            raise self.mark_stale(exc, wrote) from exc
        self._on_written()

    def mark_stale(self, why: BaseException, wrote: bool = True) -> VaultError:
        """The index could not take a change (a full disk): leave a mark so the next open
        rebuilds it from the files; return the error to raise. It says whether a file was
        written, so an agent told of a failed ``remember`` does not write it twice."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NONBLOCK", 0)
        try:  # never through a link or into a pipe planted in .index/ (a clone can bring one)
            fd = nofollow.open_write(self.store.control_dir / STALE_MARK, flags)
            try:
                os.write(fd, f"{why}\n".encode("utf-8", "replace"))
            finally:
                os.close(fd)
        except OSError:
            pass  # the disk is full, or something not ours is there: the next open's walk still finds what changed
        done = "The file was written but the index" if wrote else "The files are as they were, but the index"
        return VaultError(
            f"{done} could not be updated ({why}); nothing is lost. "
            "Free some disk space; the next command rebuilds the index (or run `agent-memory reindex`)."
        )

    def index_new(self, rel: str, data: bytes, published: os.stat_result | None) -> tuple[sqlite3.Row | None, Note | None]:
        """Index a file this process just published from the bytes it wrote and the stat
        of the file as published (``Store.place``), without reading it back; when that
        stat is missing (something touched the file in between) it is read like any
        other. Returns the new row, and the note parsed from ``data`` (None: read back)."""
        note = None
        with self.transaction() as conn:
            if published is None:
                self.refresh(conn, rel, None)
            else:
                examined = self.written(rel, data, published)
                note = examined.note
                self.refresh(conn, rel, None, examined)
                self.index.note_tool_write(conn, rel, parse.file_version(data))
            # Read back through the writing connection, whose pages are warm: a reading
            # connection would load them afresh after every commit.
            return self.index.by_path(rel), note


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector while a walk, a rebuild or an import builds a few
    hundred thousand small objects without cycles (stat results, tuples; the notes, rows
    and rendered files of a load): left on, it runs over and over in the middle of them
    (about 15% of a 100k start), and each full pass walks every object alive, the list
    of every path a rebuild holds among them (at a million rows 7 of ~160 CPU seconds,
    growing faster than the rows). What it would have found is collected once it runs
    again."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def compare(walked: Iterable[tuple[str, os.stat_result]], indexed: Iterable[tuple[str, bytes]],
            unchanged: list[int]) -> Iterator[str]:
    """The paths whose file and row may differ: new files, files whose stat differs from
    their row's stamp, and rows whose file the walk did not find (gone, moved, or now out
    of bounds). Both sides come in path order (``Store.walk``, ``Index.stamps``) and are
    merged as they come, one item of each held at a time: the comparison's memory does
    not grow with the vault. A file whose stat matches is only counted in
    ``unchanged[0]``. Were the two orders ever to disagree, a path would come out as gone
    and again as new: read once more, never missed."""
    pack = packed_stamp
    rows = iter(indexed)
    row = next(rows, None)
    for rel, found in walked:
        while row is not None and row[0] < rel:
            yield row[0]  # indexed, not walked
            row = next(rows, None)
        if row is not None and row[0] == rel:
            if row[1] == pack(found.st_size, found.st_mtime_ns, found.st_ctime_ns, found.st_ino):
                unchanged[0] += 1
            else:
                yield rel
            row = next(rows, None)
        else:
            yield rel  # walked, not indexed
    while row is not None:
        yield row[0]
        row = next(rows, None)


_DATED = re.compile(r"(?:^|/)(\d{4})/(\d{2})/(\d{2})/[^/]+$")


def rebuild_order(walked: Iterable[tuple[str, os.stat_result]]) -> list[str]:
    """Paths oldest first, from what the walk knows without reading a file: the day in
    a ``YYYY/MM/DD/`` path (the tool's layout: when it was written), else the day the
    file was last modified (a person's note); then by path. Sorting by path alone made
    hand-named notes (``people/*.md``, after every dated folder) look newest."""
    def day(rel: str, stat: os.stat_result) -> str:
        dated = _DATED.search(rel)
        if dated:
            return "-".join(dated.groups())
        try:
            return dt.datetime.fromtimestamp(stat.st_mtime, dt.timezone.utc).date().isoformat()
        except (OverflowError, OSError, ValueError):  # a timestamp beyond what datetime holds
            return ""

    return [rel for _day, rel in sorted((day(rel, stat), rel) for rel, stat in walked)]


class Reconciler:
    """The index made to match the whole vault: new, changed, moved and deleted files, a
    rebuild from the files alone, and expired memories moved to the trash.

    ``writing`` is the vault's write lock (``Core.writing``); ``now`` its clock."""

    def __init__(self, files: FileIndexer, *, writing: Callable[[], AbstractContextManager[None]],
                 now: Callable[[], dt.datetime]) -> None:
        self.files = files
        self.store = files.store
        self.index = files.index
        self._writing = writing
        self._now = now

    def reconcile(self, progress: Progress | None = None) -> ReconcileReport:
        """Make the index match the files: new, changed, moved and deleted ones.

        Unchanged files are skipped by their stat (size, mtime, ctime and inode, as
        git's index compares them), then by content hash, so a start
        with nothing changed reads no file. Expired memories go to the trash.
        ``progress`` hears the files read: all of them for a first index ("indexing
        files"), else the changed ones ("indexing changed files").
        """
        counts = {"added": 0, "updated": 0, "removed": 0, "unchanged": 0, "absent": 0, "settling": 0}
        if not self.index.any_memory():
            with self._writing():
                if not self.index.any_memory():
                    # Empty under the lock: build from one walk made now (the index is
                    # built from nothing; a comparing walk first would only list it all).
                    return self._rebuild(counts, progress=progress)
            # another writer filled it meanwhile: compare against that
        # Walk, compare and read changed files outside the lock and the transaction; under
        # the lock each changed path is checked again (docs/design/reconcile.md). The walk
        # and the index's stamps come in the same order and are compared as they come:
        # only what differs is kept (``compare``).
        temp_files: list[Path] = []
        matched = [0]
        with collector_paused():
            stale = list(dict.fromkeys(compare(self.store.walk(temp_files=temp_files), self.index.stamps(), matched)))
        if temp_files:
            with self._writing():
                self.store.remove_orphans(temp_files)
        counts["unchanged"] = matched[0]
        if not stale and not self.expiring():
            return self._report(counts, 0)
        reading = Every(progress, "indexing changed files", len(stale))
        with self.index.one_merge():
            for first in range(0, len(stale), REFRESH_BATCH):
                self._refresh_batch(stale[first:first + REFRESH_BATCH], counts, reading, first)
        with self._writing():
            expired = self.sweep_expired()
        return self._report(counts, expired)

    def _refresh_batch(self, batch: list[str], counts: dict[str, int], reading: Every, before: int) -> None:
        """Read and parse a batch of changed paths outside the lock, then fold them in under
        it, in one transaction: what a batch reads is let go before the next (a checkout
        that changed every file does not hold every note at once)."""
        examined = {}
        for done, rel in enumerate(batch, before + 1):
            reading(done)
            row = self.index.by_path(rel)
            examined[rel] = self.files.examine(rel, FileFacts.of_row(row) if row else None)
        with self._writing(), self.files.transaction(wrote=False) as conn:
            for rel in batch:
                row = self.index.by_path(rel)
                now_known = FileFacts.of_row(row) if row else None
                counts[self.files.refresh(conn, rel, now_known, examined[rel])] += 1

    def reconcile_path(self, rel: str) -> str:
        """Fold one changed path into the index (the watcher's, and a lookup's of a file
        the index has not seen yet)."""
        rel = rel.replace(os.sep, "/")
        if not encodable(rel):
            return "absent"  # a name that is not UTF-8 is never indexed (SQLite holds text)
        before = self.index.by_path(rel)
        facts = FileFacts.of_row(before) if before else None
        examined = self.files.examine(rel, facts)
        if _current(facts, examined):
            # The row already holds these very bytes and this stat: the lock would find
            # nothing to write (the event of the tool's own write ends here), so it is
            # not taken, and no write is counted for other processes to catch up on.
            return "unchanged"
        with self._writing():
            row = self.index.by_path(rel)
            known = FileFacts.of_row(row) if row else None
            with self.files.transaction(wrote=False) as conn:
                return self.files.refresh(conn, rel, known, examined)

    def expiring(self) -> bool:
        """Whether a memory's expiry has passed (one look at the partial index on expires)."""
        return bool(self.index.query("SELECT 1 FROM memories WHERE expires IS NOT NULL AND expires <= ? LIMIT 1",
                                     (iso(self._now()),)))

    def reindex(self, *, sweep: bool = True, progress: Progress | None = None) -> ReconcileReport:
        """Rebuild the index from the files alone, in one transaction (an index with no
        rows: in steps into tables of its own, swapped in at once, ``Index.load_fresh``).

        ``sweep=False`` leaves expired files where they are (a read-only rebuild, as the
        test suite's "index equals a rebuild" check needs). ``progress`` gets a ``Step``
        as files are read ("indexing files")."""
        with self._writing():
            counts = {"added": 0, "updated": 0, "removed": 0, "unchanged": 0, "absent": 0}
            return self._rebuild(counts, sweep=sweep, progress=progress)

    def _rebuild(self, counts: dict[str, int], sweep: bool = True, progress: Progress | None = None) -> ReconcileReport:
        # Oldest first, so row numbers follow recency (``rebuild_order``): the index's
        # "newest" shortcuts (for questions of only common words) read rows from the
        # highest number down, and later writes get higher numbers anyway.
        temp_files: list[Path] = []
        paths = rebuild_order(self.store.walk(temp_files=temp_files))
        self.store.remove_orphans(temp_files)  # temp files a crash left (callers hold the lock)

        # About twenty steps (a bar moves from the start), one per 50 to 500 files (a
        # 100,000-file vault reports 200 times, not 100,000; a small one only its end).
        reading = Every(progress, "indexing files", len(paths), items=max(50, min(500, len(paths) // 20)))

        def parsed() -> Generator[tuple[Note, FileFacts], None, None]:
            with closing(self.files.read_all(paths)) as reads:
                for done, (rel, read) in enumerate(reads, 1):
                    reading(done)
                    if read is None:
                        continue
                    data, stat = read
                    yield self.files.note_for(rel, data, stat), FileFacts.read(data, stat)

        # Closed however the load ends: a load failing half way (a full disk) must not
        # leave the reads' open folders to the error's frames, held as long as it is.
        with collector_paused(), closing(parsed()) as notes:
            if not self.index.any_memory():  # nothing a reader could lose sight of: in steps
                with self.files.guarded(wrote=False):
                    counts["added"] = self.index.load_fresh(notes)
            else:
                with self.files.transaction(wrote=False) as conn:
                    counts["added"] = self.index.replace_all(conn, notes)
        self.index.rebuilt()
        return self._report(counts, self.sweep_expired() if sweep else 0)

    def _report(self, counts: dict[str, int], expired: int) -> ReconcileReport:
        return ReconcileReport(added=counts["added"], updated=counts["updated"], removed=counts["removed"],
                               unchanged=counts["unchanged"], expired=expired, problems=self.index.problem_files())

    def sweep_expired(self) -> int:
        """Move memories whose ``expires`` has passed to the trash.

        Reads never return them anyway (every query filters on ``expires``); this only
        tidies the folder, so it needs no daemon.
        """
        rows = self.index.expired(iso(self._now()))
        if not rows:
            return 0
        moved = 0
        with self._writing():
            for row in rows:
                indexed, read = self.index.by_path(row["path"]), self.files.read(row["path"])
                if indexed is not None and read is not None and file_version(read[0]) != indexed["sha256"]:
                    # Changed since it was indexed (a person kept it, or another file took
                    # its place): only the file as it is now may say it expired.
                    with self.files.transaction(wrote=False) as conn:
                        self.files.refresh(conn, row["path"], FileFacts.of_row(indexed))
                    continue
                if self.store.abspath(row["path"]).is_symlink():
                    # A person's link to another memory file: moved into .trash/ it would
                    # point nowhere. It stays, hidden while expired; the file it names is
                    # swept under its own name.
                    continue
                if self.store.stat(row["path"]) is not None:
                    self.store.trash.move_in(self.store.abspath(row["path"]), row["path"], row["id"], "expired",
                                             iso(self._now()))
                with self.files.transaction() as conn:
                    self.index.delete(conn, row["path"])
                self.store.remove_empty_dated(row["path"])
                moved += 1
        return moved
