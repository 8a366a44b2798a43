"""Whole-vault sync: fold new, changed, moved and deleted files into the index.

``reconcile`` (every open, and the watcher's sweep), ``reindex`` (a rebuild from the
files alone) and the expiry sweep. One file at a time goes through ``_refresh``. The
protocol (the stat snapshot, examining outside the lock, the racy-stamp rule):
docs/design/reconcile.md.
"""

from __future__ import annotations

import datetime as dt
import gc
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..note.parse import Note, file_version
from ..clock import iso
from ..progress import Every, Progress
from ..vault.core import VaultCore
from .db import FileFacts
from ..models import ReconcileReport


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector while a walk builds a few hundred thousand small
    objects without cycles (stat results, tuples): left on, it runs over and over in
    the middle of them (about 15% of a 100k start)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


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


class Reconcile(VaultCore):
    def reconcile(self) -> ReconcileReport:
        """Make the index match the files: new, changed, moved and deleted ones.

        Unchanged files are skipped by their stat (size, mtime, ctime and inode, as
        git's index compares them), then by content hash, so a start
        with nothing changed reads no file. Expired memories go to the trash.
        """
        counts = {"added": 0, "updated": 0, "removed": 0, "unchanged": 0, "absent": 0, "settling": 0}
        # Walk, compare and read changed files outside the lock and the transaction; under
        # the lock each changed path is checked again (docs/design/reconcile.md).
        temp_files: list[Path] = []
        # The index's side as a compact stat snapshot; the walk yields only what differs.
        with _collector_paused():
            known = self.index.stamps()
        if not known:
            with self._writing():
                if not self.index.query("SELECT 1 FROM memories LIMIT 1"):
                    # Empty under the lock: build from one walk made now (the index is
                    # built from nothing; a comparing walk first would only list it all).
                    return self._rebuild(counts)
            known = self.index.stamps()  # another writer filled it meanwhile: compare against that
        matched = [0]
        with _collector_paused():
            stale = [rel for rel, _stat in self.store.walk(temp_files=temp_files, known=known, unchanged=matched)]
        if temp_files:
            with self._writing():
                self.store.remove_orphans(temp_files)
        counts["unchanged"] = matched[0]
        stale.extend(known)  # indexed, but no longer walked: gone, moved, or now out of bounds
        if not stale and not self._expiring():
            return self._report(counts, 0)
        rows = {rel: self.index.by_path(rel) for rel in stale}
        examined = {rel: self._examine(rel, FileFacts.of_row(row) if row else None) for rel, row in rows.items()}
        with self._writing():
            if stale:
                with self._index_write() as conn:
                    for rel in stale:
                        row = self.index.by_path(rel)
                        now_known = FileFacts.of_row(row) if row else None
                        counts[self._refresh(conn, rel, now_known, examined[rel])] += 1
            expired = self.sweep_expired()
        return self._report(counts, expired)

    def _expiring(self) -> bool:
        """Whether a memory's expiry has passed (one look at the partial index on expires)."""
        return bool(self.index.query("SELECT 1 FROM memories WHERE expires IS NOT NULL AND expires <= ? LIMIT 1",
                                     (iso(self.now()),)))

    def reindex(self, *, sweep: bool = True, progress: Progress | None = None) -> ReconcileReport:
        """Rebuild the index from the files alone, in one transaction; then, with
        semantic recall on, embed every memory whose vector is missing (a file's vector
        depends on its bytes only, so unchanged files keep theirs).

        ``sweep=False`` leaves expired files where they are (a read-only rebuild,
        as the test suite's "index equals a rebuild" check needs). ``progress`` gets a
        ``Step`` as files are read ("indexing files") and as memories are embedded
        ("embedding memories"), for a front end to show.
        """
        with self._writing():
            counts = {"added": 0, "updated": 0, "removed": 0, "unchanged": 0, "absent": 0}
            report = self._rebuild(counts, sweep=sweep, progress=progress)
        if self.semantic_on():
            report["embedded"] = self.vectors.rebuild(progress)
        return report

    def _rebuild(self, counts: dict[str, int], sweep: bool = True, progress: Progress | None = None,
                 paths: list[str] | None = None) -> ReconcileReport:
        # Oldest first, so row numbers follow recency (``rebuild_order``): the index's
        # "newest" shortcuts (for questions of only common words) read rows from the
        # highest number down, and later writes get higher numbers anyway.
        temp_files: list[Path] = []
        if paths is None:
            paths = rebuild_order(self.store.walk(temp_files=temp_files))
        else:
            paths = sorted(paths)
        self.store.remove_orphans(temp_files)  # temp files a crash left (callers hold the lock)

        reading = Every(progress, "indexing files", len(paths), items=500)

        def parsed() -> Iterator[tuple[Note, FileFacts]]:
            for done, rel in enumerate(paths, 1):
                reading(done)
                read = self._read(rel)
                if read is None:
                    continue
                data, stat = read
                yield self._note_for(rel, data, stat), FileFacts.read(data, stat)

        with self._index_write() as conn:
            counts["added"] = self.index.replace_all(conn, parsed())
        return self._report(counts, self.sweep_expired() if sweep else 0)

    def _report(self, counts: dict[str, int], expired: int) -> ReconcileReport:
        problems = self.index.problem_files()
        return ReconcileReport(
            added=counts["added"],
            updated=counts["updated"],
            removed=counts["removed"],
            unchanged=counts["unchanged"],
            expired=expired,
            problems=problems,
        )

    def sweep_expired(self) -> int:
        """Move memories whose ``expires`` has passed to the trash.

        Reads never return them anyway (every query filters on ``expires``); this only
        tidies the folder, so it needs no daemon.
        """
        rows = self.index.expired(iso(self.now()))
        if not rows:
            return 0
        moved = 0
        with self._writing():
            for row in rows:
                indexed, read = self.index.by_path(row["path"]), self._read(row["path"])
                if indexed is not None and read is not None and file_version(read[0]) != indexed["sha256"]:
                    # Changed since it was indexed (a person kept it, or another file took
                    # its place): only the file as it is now may say it expired.
                    with self._index_write() as conn:
                        self._refresh(conn, row["path"], FileFacts.of_row(indexed))
                    continue
                if self.store.abspath(row["path"]).is_symlink():
                    # A person's link to another memory file: moved into .trash/ it would
                    # point nowhere. It stays, hidden while expired; the file it names is
                    # swept under its own name.
                    continue
                if self.store.stat(row["path"]) is not None:
                    self.store.trash.move_in(self.store.abspath(row["path"]), row["path"], row["id"], "expired",
                                             iso(self.now()))
                with self._index_write() as conn:
                    self.index.delete(conn, row["path"])
                moved += 1
        return moved

