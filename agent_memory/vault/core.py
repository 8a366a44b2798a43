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
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from ..trust import approvals, credentials
from ..note import parse
from ..note.parse import Note, file_version
from ..clock import Clock, humanize_age, iso, utcnow
from ..errors import InvalidInput, NotFound, StillSaving, VaultError, VaultGone
from ..index.db import FileFacts, Index, link_key
from ..disk.locking import Generations, WriteLock
from ..semantic.status import Semantic, wanted
from ..settings import SETTINGS_FILE, Settings, load_settings
from ..models import Memory, ReconcileReport, Summary
from ..limits import MAX_FILE_BYTES, check_text
from ..disk.layout import INDEX_DIRNAME, cache_folder, encodable, index_folder, is_memory_path
from ..disk.store import Store, WriteChange
from ..disk.layout import TRASH_DIRNAME

SETTLED_AGE = 0.1  # seconds: a file not modified for this long is not being saved
SETTLE_WAIT = 0.03  # between two reads that must agree
SETTLE_TRIES = 30  # about a second of retries before a clear error
SETTLE_GIVE_UP = 2.0  # seconds: an empty or broken file older than this is no save in progress
STALE_MARK = "stale"  # in the vault's .index/: an index write failed, rebuild on the next open
_CONTROL_FOLDERS = (INDEX_DIRNAME, TRASH_DIRNAME, ".prompts")
log = logging.getLogger("agent_memory.vault")


# A file as read before the lock: its note (None: not parsed, its bytes were already
# indexed) and facts; None: no memory file there.
Examined = tuple[Note | None, FileFacts] | None
_UNREAD: Any = object()  # _refresh's "not examined yet"


def _still(stat: os.stat_result | None, examined: Examined) -> bool:
    """Whether a file examined earlier is unchanged since (same presence, size, mtime,
    ctime and inode)."""
    if examined is None:
        return stat is None
    _note, facts = examined
    return facts.same_stat(stat)


def _mid_save(note: Note, facts: FileFacts) -> bool:
    """A file that looks like one an editor is saving right now: empty, or its front
    matter not closed yet, and modified moments ago (broken YAML is reported at once)."""
    return note.half_written and time.time_ns() - facts.mtime_ns < SETTLE_GIVE_UP * 1e9


def _identity(root: Path) -> tuple[int, int] | None:
    try:
        found = os.stat(root)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _refuse_symlinked_folders(root: Path) -> None:
    """``.index``, ``.trash`` and ``.prompts`` that are symlinks (a ``git pull`` can bring
    them) would put a copy of every memory, or forgotten ones, outside the vault, or
    serve prompts from elsewhere: refused, with what to do."""
    for name in _CONTROL_FOLDERS:
        if (root / name).is_symlink():
            raise VaultError(
                f"{root / name} is a symlink; agent-memory keeps {name}/ inside the vault only. "
                f"Remove the link (rm {root / name}) and retry."
            )


def _writable(root: Path) -> bool:
    """Whether this process can write the vault (else its index goes to a cache folder)."""
    own = root / INDEX_DIRNAME
    return os.access(root, os.W_OK) and (not own.is_dir() or os.access(own, os.W_OK))


class VaultCore:
    """A vault folder and its index. Open it, use it, ``close()`` it."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        index_dir: str | os.PathLike[str] | None = None,
        clock: Clock = utcnow,
    ) -> None:
        self.root = Path(root).expanduser().absolute()
        if self.root.exists() and not self.root.is_dir():
            raise VaultError(f"{self.root} is a file, not a vault folder; pass --dir with a folder.")
        if not self.root.is_dir():
            raise VaultError(f"No vault at {self.root}. Create one with `agent-memory --dir {self.root} init`.")
        self._identity = _identity(self.root)
        _refuse_symlinked_folders(self.root)
        self.store = Store(self.root)
        self.clock = clock
        self.index_dir = index_folder(self.root, index_dir)
        self.read_only = not _writable(self.root)
        if self.read_only and self.index_dir == self.store.control_dir:
            self.index_dir = cache_folder(self.root)
            self.store.control_dir = self.index_dir
            log.warning("%s is read-only: searching it with an index in %s", self.root, self.index_dir)
        try:
            self.index = Index(self.index_dir)
        except (OSError, sqlite3.Error) as exc:
            raise VaultError(f"Cannot open the index in {self.index_dir}: {exc}. Check the folder is writable.") from exc
        # The lock lives in the vault's own .index/ wherever the database is, so every
        # process on this vault takes the same one (AGENT_MEMORY_INDEX_DIR or not).
        self._lock = WriteLock(self.store.control_dir / "write.lock")
        self._generations = Generations(self.store.control_dir / "writes.json", str(self.index.path))
        self._seen_others = self._generations.others()
        self._settings: tuple[object, Settings] | None = None
        # Commit tool writes: True (``serve --git-commit``), or None to follow ``git.commit``.
        self.git_commit: bool | None = None
        self.git_state: Any = None  # git.commits' per-vault state (repository, pending writes, committer)
        self.settings  # noqa: B018 - a broken settings file is a clear error at open, not at the first write
        self.vectors = Semantic(self.index, self.index_dir)  # loads nothing until semantic recall is used

    @property
    def settings(self) -> Settings:
        """``<vault>/.agent-memory.toml`` as this clone approved it (``trust/approvals.py``): a value
        that loosens a guard and is not approved is ignored, with a one-line warning
        (logged). Read again when the file or the approvals change (a running server follows
        a person's edit; a broken edit is a clear error on the next use)."""
        try:
            found = os.stat(self.root / SETTINGS_FILE)
            stamp: object = (found.st_mtime_ns, found.st_size, found.st_ino, approvals.approvals_stamp(self.root))
        except OSError:
            stamp = approvals.approvals_stamp(self.root)
        if self._settings is None or self._settings[0] != stamp:
            applied, asked = approvals.effective(load_settings(self.root), approvals.load_approvals(self.root))
            self._settings = (stamp, applied)
            pending = [item for item in asked if not item.approved]
            if pending:
                log.warning("%s", approvals.ignored_warning(self.root, pending))
        return self._settings[1]

    def guard_credentials(self, fields: dict[str, str], already: str = "") -> list[str]:
        """The credential guard over what a write adds (SPEC §3): refused (SecretRefused,
        naming each kind found) unless the vault's ``secrets.mode`` is ``warn``, which
        lets it through with the warning returned. Approved fingerprints pass, and so
        does a credential the file ``already`` held (a person's note is theirs: editing
        it must not be blocked by what they wrote)."""
        settings = self.settings
        held = {f.fingerprint for f in credentials.find_credentials(already)} if already else set()
        if held:
            settings = dataclasses.replace(settings, secrets_allow=(*settings.secrets_allow, *held))
        found = credentials.enforce_fields(fields, settings)
        return [credentials.warning_message(found)] if found else []

    def close(self) -> None:
        self.vectors.close()
        self.index.close()

    def semantic_on(self, asked: bool | None = None) -> bool:
        """Whether recall uses embeddings: ``asked``, else the ``recall.semantic``
        setting, else whether the optional extra is installed."""
        return wanted(self.settings.recall_semantic, asked)

    def keep_vectors(self) -> None:
        """A long-running process (server, watcher): embed new and changed memories in
        the background from now on, when semantic recall is on."""
        if self.semantic_on():
            self.vectors.keep_current()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> dt.datetime:
        return self.clock()

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the vault's write lock, on a vault that is still where it was opened and
        an index that is current; look again at files recent writes displaced."""
        self._check_vault()
        with self._lock.hold():
            outermost = self._lock.depth == 1
            if outermost:
                self.store.changes.clear()  # what a crash recovery outside a write restored is no write's
            self._check_index()
            if outermost:
                self._catch_up()
            self.store.settle_parked()
            done = False
            try:
                yield
                done = True
            finally:
                if outermost:
                    self._generations.bump()
                    changes, self.store.changes = self.store.changes, []
                    if done and changes:
                        self._written(changes)

    def _written(self, changes: list[WriteChange]) -> None:
        """A write succeeded and changed these files (still under the lock): the hook
        ``git.sync.GitSync`` fills in to commit tool writes."""

    def _catch_up(self) -> None:
        """Another process may have written through an index of its own (one of them with
        ``AGENT_MEMORY_INDEX_DIR``, one without): its writes are in the files but not in
        this database. Each write counts itself per index beside the vault's lock; a
        count of another index this process has not seen means reconcile first, so
        dedup never misses a file. Processes sharing one index never pay for this."""
        others = self._generations.others()
        if others != self._seen_others:
            self._seen_others = others
            self.reconcile()

    def _check_vault(self) -> None:
        """The vault folder renamed or deleted under a running server: say so instead
        of finding nothing, or recreating the old path and reporting success."""
        if _identity(self.root) != self._identity:
            raise VaultGone(str(self.root))

    def mark_stale(self, why: BaseException) -> VaultError:
        """A file changed but its index row could not be written (a full disk): leave a
        mark so the next open rebuilds the index from the files; return the error to raise."""
        try:
            (self.store.control_dir / STALE_MARK).write_text(f"{why}\n", encoding="utf-8")
        except OSError:
            pass  # the disk is full: the next open's walk still finds what changed
        return VaultError(
            f"The file was written but the index could not be updated ({why}); nothing is lost. "
            "Free some disk space; the next command rebuilds the index (or run `agent-memory reindex`)."
        )

    def reconcile(self) -> ReconcileReport:
        """Make the index match the files (see ``Reconcile.reconcile``)."""
        raise NotImplementedError

    def _check_index(self) -> None:
        """Another process deleted or replaced the index file: reopen it and, if it
        came back empty, rebuild it from the files."""
        self._check_vault()
        if self.index.ensure_current():
            with self._lock.hold():
                self.reconcile()

    # ------------------------------------------------------------------ sync
    def _read(self, rel: str) -> tuple[bytes, os.stat_result] | None:
        """A memory file's bytes and stat, confined to the vault at read time; None for
        anything else (gone, not a regular file, over ``MAX_FILE_BYTES``), so one odd
        file never stops a command."""
        return self.store.read(rel, MAX_FILE_BYTES)

    def _note_for(self, rel: str, data: bytes, stat: os.stat_result) -> Note:
        """Parse a file, filling times a hand-written file may lack from its mtime."""
        note = parse.parse(data, rel)
        if note.created is None or note.updated is None:
            try:
                mtime = iso(dt.datetime.fromtimestamp(stat.st_mtime, dt.timezone.utc))
            except (OverflowError, OSError, ValueError):  # a timestamp past what a date holds (year 9999)
                mtime = iso(dt.datetime.fromtimestamp(0, dt.timezone.utc))
            note = dataclasses.replace(note, created=note.created or mtime, updated=note.updated or note.created or mtime)
        return note

    def _examine(self, rel: str, known: FileFacts | None = None) -> Examined:
        """Read and parse one path, outside any lock or transaction: a slow file (a huge
        one, a hostile front matter) must not hold up other writers or this process's
        readers. None: no memory file there (gone, not a regular file, out of bounds).
        A file whose bytes are those ``known`` already describes is not parsed (None note)."""
        read = self._read(rel) if is_memory_path(rel) and self.store.inside(rel) else None
        if read is None:
            return None
        data, stat = read
        facts = FileFacts.read(data, stat)
        if known is not None and known.sha256 == facts.sha256:
            return None, facts
        return self._note_for(rel, data, stat), facts

    def _refresh(self, conn: sqlite3.Connection, rel: str, known: FileFacts | None,
                 examined: Examined = _UNREAD) -> str:
        """Bring one path's row in line with the file: the one way a file enters the index.

        ``examined``: what ``_examine`` found before the lock was taken; used if the file
        still has that stat (size, mtime, ctime, inode), else the file is read again."""
        if examined is _UNREAD or not _still(self.store.stat(rel), examined):
            examined = self._examine(rel, known)
        if examined is None:
            return "removed" if self.index.delete(conn, rel) else "absent"
        note, facts = examined
        if known is not None and known.sha256 == facts.sha256:
            if known.stamp != facts.stamp or known.racy:
                self.index.touch(conn, rel, facts)
            return "unchanged"
        if note is None:  # examined against facts that changed since: parse it now
            examined = self._examine(rel)
            if examined is None:
                return "removed" if self.index.delete(conn, rel) else "absent"
            note, facts = examined
        if _mid_save(note, facts) and (known is not None or self.index.by_path(rel) is not None):  # type: ignore[arg-type]
            # Caught between an editor's truncate and its write: keep the row (the memory
            # keeps its id and stays findable); its facts differ from the file's, so the
            # next event or sweep folds in the finished save ("settling": a watcher looks
            # again once it cannot be a save in progress, in case no event comes).
            return "settling"
        self.index.upsert(conn, note, facts)  # type: ignore[arg-type]
        return "added" if known is None else "updated"

    def reconcile_path(self, rel: str) -> str:
        """Fold one changed path into the index (used by the watcher)."""
        rel = rel.replace(os.sep, "/")
        if not encodable(rel):
            return "absent"  # a name that is not UTF-8 is never indexed (SQLite holds text)
        before = self.index.by_path(rel)
        examined = self._examine(rel, FileFacts.of_row(before) if before else None)
        with self._writing():
            row = self.index.by_path(rel)
            known = FileFacts.of_row(row) if row else None
            with self._index_write() as conn:
                return self._refresh(conn, rel, known, examined)

    def _index_new(self, rel: str, data: bytes, published: os.stat_result | None) -> sqlite3.Row | None:
        """Index a file this process just published from the bytes it wrote and the stat
        of the file as published (``Store.place``), without reading it back; when that
        stat is missing (something touched the file in between) it is read like any
        other. Returns the new row."""
        with self._index_write() as conn:
            if published is None:
                self._refresh(conn, rel, None)
            else:
                self._refresh(conn, rel, None, (self._note_for(rel, data, published), FileFacts.read(data, published)))
        return self.index.by_path(rel)

    @contextmanager
    def _index_write(self) -> Iterator[sqlite3.Connection]:
        """An index transaction after a file changed: if it fails (a full disk), the
        index is marked stale and rebuilt on the next open, and the error says so."""
        try:
            with self.index.transaction() as conn:
                yield conn
        except sqlite3.Error as exc:
            raise self.mark_stale(exc) from exc
        self.vectors.wake()  # a background embedder (if any) catches up; nobody waits for it


    # ------------------------------------------------------------------ lookups
    def _resolve(self, memory_id: str) -> sqlite3.Row:
        """An id, a vault-relative path, or a note's name as Obsidian resolves
        ``[[Note name]]`` (a path without ``.md``, else the file name; case-insensitive and
        Unicode-normalised: macOS writes NFD names). A name several notes share is an
        error listing them. Expired memories are not found."""
        self._check_index()
        key = (check_text(memory_id, "memory_id") or "").strip()
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
            row = self._by_name(key)
        if row is None:
            raise NotFound(key)
        if row["expires"] is not None and row["expires"] <= iso(self.now()):
            raise NotFound(key)
        return row

    def _by_name(self, name: str) -> sqlite3.Row | None:
        """The one live note a name resolves to (by path without ``.md``, then by file name)."""
        now = iso(self.now())
        wanted = link_key(name)
        for column in ("path_key", "name_key"):
            rows = [r for r in self.index.query(f"SELECT * FROM memories WHERE {column} = ? ORDER BY path", (wanted,))
                    if r["expires"] is None or r["expires"] > now]
            if len(rows) == 1:
                return rows[0]
            if rows:
                listed = ", ".join(r["path"] for r in rows[:10]) + (" …" if len(rows) > 10 else "")
                raise InvalidInput(f"{len(rows)} notes are named {name!r}: {listed}. Pass one of these paths instead.")
        return None

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
            conflict=bool(row["conflict"]),
        )

    def _memory(self, rel: str, data: bytes, row: sqlite3.Row) -> Memory:
        note = parse.parse(data, rel)
        relations: dict[str, list[str]] = {}
        for relation, target in note.links:
            relations.setdefault(relation, []).append(target)
        summary = self._summary(row)
        summary["version"] = file_version(data)
        summary["conflict"] = note.conflict
        return Memory(
            **summary,
            content=note.body,
            source=note.source,
            aliases=note.aliases,
            relations=relations,
            front_matter=note.meta,
            problems=note.problems,
        )

    def _settled(self, rel: str) -> bytes:
        """The file's bytes once they have settled: unmodified for ``SETTLED_AGE``, or
        the same in two reads ``SETTLE_WAIT`` apart. An empty or unreadable file (what
        an editor leaves between truncate and write) is read again until it is complete
        or has stayed the same a while (then ``_editable`` says what is wrong); one that
        stays empty or keeps changing is refused."""
        last: bytes | None = None
        for _ in range(SETTLE_TRIES):
            read = self._read(rel)
            if read is None:
                raise NotFound(rel)
            data, stat = read
            age = time.time() - stat.st_mtime
            if age < SETTLED_AGE:
                time.sleep(SETTLE_WAIT)
                again = self._read(rel)
                if again is None or again[0] != data:
                    last = None
                    continue
            if not data.strip():
                if age > SETTLE_GIVE_UP:
                    raise StillSaving(rel, "is empty")
            elif data == last or age > SETTLE_GIVE_UP or not parse.parse(data, rel).unreadable:
                return data  # complete, or broken and not changing: _editable says why
            last = data
            time.sleep(SETTLE_WAIT * 3)
        raise StillSaving(rel, "is empty" if last is not None and not last.strip() else "keeps changing")

    def _load(self, memory_id: str, settle: bool = False) -> tuple[sqlite3.Row, bytes]:
        """The row and the file's current bytes, re-indexing the file if it drifted.

        ``settle``: the bytes once settled (``_settled``), as an edit needs them, and so
        the index never takes in a file caught halfway through someone's save (its id
        would vanish from the index, and the edit would say "not found")."""
        row = self._resolve(memory_id)
        if settle:
            data = self._settled(row["path"])
        else:
            read = self._read(row["path"])
            if read is None:
                self.reconcile_path(row["path"])
                raise NotFound(memory_id)
            data, _ = read
        if file_version(data) != row["sha256"]:
            self.reconcile_path(row["path"])
            row = self._resolve(memory_id)
        return row, data

    def get(self, memory_id: str) -> Memory:
        row, data = self._load(memory_id)
        return self._memory(row["path"], data, row)

