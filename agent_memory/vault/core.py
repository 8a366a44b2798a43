"""An open vault: its folder, index, lock and settings, and finding and reading a memory.

Every job of ``Vault`` (writes, relations, moves, maintenance, git) works through one
``Core``: the write lock (``writing``), the lookups (``resolve``, ``load``) and the
settled read an edit starts from. Files reach the index through ``core.files``
(``index/reconcile.py``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from ..trust import approvals, credentials
from ..note import parse
from ..note.parse import file_version
from ..clock import Clock, humanize_age, iso, utcnow
from ..errors import InvalidInput, NotFound, SettingsError, StillSaving, VaultError, VaultGone
from ..wording import RECALL, said
from ..index.db import Index
from ..index.loading import drop_fresh
from ..index.mend import fresh_left
from ..index.rows import link_key
from ..index.reconcile import SETTLE_GIVE_UP, FileIndexer, Reconciler
from ..disk.locking import Generations, WriteLock
from ..semantic.status import Semantic, wanted
from ..recall.choice import Choice, choose, overridden
from ..recall.rank import PROFILES
from ..settings import SETTINGS_FILE, Settings, load_settings
from ..models import Memory, Summary
from ..limits import check_text
from ..disk.layout import INDEX_DIRNAME, TRASH_DIRNAME, cache_folder, encodable, index_folder, near_miss
from ..disk.store import Store, WriteChange

SETTLED_AGE = 0.1  # seconds: a file not modified for this long is not being saved
SETTLE_WAIT = 0.03  # between two reads that must agree
SETTLE_TRIES = 30  # about a second of retries before a clear error
_CONTROL_FOLDERS = (INDEX_DIRNAME, TRASH_DIRNAME, ".prompts")
log = logging.getLogger("agent_memory.vault")


class Fields(Protocol):
    """A memory's index row, as SQLite gives it or as recall holds it (``MemoryRecord``)."""

    def __getitem__(self, key: str, /) -> Any: ...


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


class Core:
    """A vault folder and its index, open: what every job of ``Vault`` shares.

    ``reconcile`` is what brings the index up to date when another process replaced
    it or wrote through another index (``Vault`` passes its own, which first undoes a
    move a crash interrupted); ``written`` gets the files each write changed, once it
    succeeded (``Vault`` passes git's commit journal)."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        index_dir: str | os.PathLike[str] | None = None,
        clock: Clock = utcnow,
        reconcile: Callable[[], object] | None = None,
        written: Callable[[list[WriteChange]], None] | None = None,
    ) -> None:
        self.root = Path(root).expanduser().absolute()
        if self.root.exists() and not self.root.is_dir():
            raise VaultError(f"{self.root} is a file, not a vault folder; pass --dir with a folder.")
        if not self.root.is_dir():
            meant = near_miss(self.root)
            if meant is not None:
                raise VaultError(f"No vault at {self.root}. Did you mean {meant}? Pass --dir {meant} (or to make a "
                                 f"new vault there: `agent-memory --dir {self.root} init`).")
            raise VaultError(f"No vault at {self.root}. Create one with `agent-memory --dir {self.root} init`.")
        self._identity = _identity(self.root)
        _refuse_symlinked_folders(self.root)
        self.store = Store(self.root, self._memories_folder)
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
        self.lock = WriteLock(self.store.control_dir / "write.lock")
        self._drop_left()
        self._generations = Generations(self.store.control_dir / "writes.json", str(self.index.path))
        self._seen_others = self._generations.others()
        self._settings: tuple[object, Settings] | None = None
        # Where this user's approvals of this vault are: asked on every write, worked out once
        # (as the register's folder is; a vault moved meanwhile is refused by ``_check_vault``).
        self._approvals = approvals.approvals_path(self.root)
        self._choice: tuple[int, Choice] | None = None  # (memories indexed, the profile chosen for them)
        self.settings  # noqa: B018 - a broken settings file is a clear error at open, not at the first write
        self.vectors = Semantic(self.index, self.index_dir)  # loads nothing until semantic recall is used
        self.files = FileIndexer(self.store, self.index, on_written=self.vectors.wake)
        self.reconciler = Reconciler(self.files, writing=self.writing, now=self.now)
        self._reconcile = reconcile or self.reconciler.reconcile
        self._written = written

    def _drop_left(self) -> None:
        """The tables a killed first build left in the index (``mend.fresh_left``): dropped
        at the open, when no process holds the vault's lock (a build under way holds it,
        and is not waited for); else the next rebuild drops them. One look at the schema."""
        if not fresh_left(self.index.conn):
            return
        with self.lock.hold(wait=False) as held:
            if held:
                try:
                    with self.index.transaction() as conn:
                        drop_fresh(conn)
                except sqlite3.Error as exc:  # a full disk: the next rebuild drops them
                    log.debug("could not drop a killed build's tables: %s", exc)

    @property
    def settings(self) -> Settings:
        """``<vault>/.agent-memory.toml`` as this clone approved it (``trust/approvals.py``): a value
        that loosens a guard and is not approved is ignored, with a one-line warning
        (logged). Read again when the file or the approvals change (a running server follows
        a person's edit; a broken edit is a clear error on the next use)."""
        try:
            found = os.stat(self.root / SETTINGS_FILE)
            stamp: object = (found.st_mtime_ns, found.st_size, found.st_ino, approvals.approvals_stamp(self.root, self._approvals))
        except OSError:
            stamp = approvals.approvals_stamp(self.root, self._approvals)
        if self._settings is None or self._settings[0] != stamp:
            applied, asked = approvals.effective(load_settings(self.root), approvals.load_approvals(self.root))
            self._settings = (stamp, applied)
            pending = [item for item in asked if not item.approved]
            if pending:
                log.warning("%s", approvals.ignored_warning(self.root, pending))
        return self._settings[1]

    def _memories_folder(self) -> str:
        """Where new memories go, for the store to tidy the date folders a memory leaves
        there; "" when the settings file cannot be read now (the write it follows is
        done: tidying after it must not fail it)."""
        try:
            return self.settings.memories_folder
        except SettingsError:
            return ""

    def profile_choice(self) -> Choice:
        """The recall profile used when none is asked for: ``recall.profile`` when set,
        else the one ``recall.choice`` picks from what the vault holds, recorded in the
        index so its hysteresis holds across processes. Worked out again when the
        number of memories changes."""
        if self.settings.recall_profile is not None:
            return overridden(self.settings.recall_profile)
        total = int(self.index.query("SELECT memories FROM counts")[0][0])
        if self._choice is not None and self._choice[0] == total:
            return self._choice[1]
        previous = self.index.recorded("profile")
        choice = choose(self.index.holdings(), previous if previous in PROFILES else None)
        if choice.profile != previous and not self.read_only:
            self.index.record("profile", choice.profile)
        self._choice = (total, choice)
        return choice

    def guard_credentials(self, fields: dict[str, str], already: str = "", settings: Settings | None = None) -> list[str]:
        """The credential guard over what a write adds (SPEC §3): refused (SecretRefused,
        naming each kind found) unless the vault's ``secrets.mode`` is ``warn``, which
        lets it through with the warning returned. Approved fingerprints pass, and so
        does a credential the file ``already`` held (a person's note is theirs: editing
        it must not be blocked by what they wrote). ``settings``: as read once for a
        batch (an import's thousands of items), else read now."""
        settings = settings or self.settings
        held = {f.fingerprint for f in credentials.find_credentials(already)} if already else set()
        if held:
            settings = dataclasses.replace(settings, secrets_allow=(*settings.secrets_allow, *held))
        found = credentials.enforce_fields(fields, settings)
        return [credentials.warning_message(found)] if found else []

    def close(self) -> None:
        self.vectors.close()
        self.index.close()
        self.lock.close()
        self._generations.close()

    def semantic_on(self, asked: bool | None = None) -> bool:
        """Whether recall uses embeddings: ``asked``, else the ``recall.semantic``
        setting, else whether the optional extra is installed."""
        return wanted(self.settings.recall_semantic, asked)

    def now(self) -> dt.datetime:
        return self.clock()

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the vault's write lock, on a vault that is still where it was opened and
        an index that is current; look again at files recent writes displaced. When the
        outermost write succeeds, the files it changed go to ``written``."""
        self._check_vault()
        with self.lock.hold():
            outermost = self.lock.depth == 1
            if outermost:
                self.store.changes.clear()  # what a crash recovery outside a write restored is no write's
            self.check_index()
            counts = self._catch_up() if outermost else None
            self.store.settle_parked()
            done = False
            try:
                yield
                done = True
            finally:
                if outermost:
                    self._generations.bump(counts)
                    changes, self.store.changes = self.store.changes, []
                    if done and changes and self._written is not None:
                        self._written(changes)

    def _catch_up(self) -> dict[str, int]:
        """Another process may have written through an index of its own (one of them with
        ``AGENT_MEMORY_INDEX_DIR``, one without): its writes are in the files but not in
        this database. Each write counts itself per index beside the vault's lock; a
        count of another index this process has not seen means reconcile first, so
        dedup never misses a file. Processes sharing one index never pay for this.
        Returns every index's count as read (the write's own bump adds to them: under
        the lock nobody else changes them meanwhile)."""
        counts = self._generations.counts()
        others = {k: v for k, v in counts.items() if k != self._generations.mine}
        if others != self._seen_others:
            self._seen_others = others
            self._reconcile()
        return counts

    def _check_vault(self) -> None:
        """The vault folder renamed or deleted under a running server: say so instead
        of finding nothing, or recreating the old path and reporting success."""
        if _identity(self.root) != self._identity:
            raise VaultGone(str(self.root))

    def check_index(self) -> None:
        """Another process deleted or replaced the index file: reopen it and, if it
        came back empty, rebuild it from the files."""
        self._check_vault()
        if self.index.ensure_current():
            with self.lock.hold():
                self._reconcile()

    # ------------------------------------------------------------------ lookups
    def resolve(self, memory_id: str) -> sqlite3.Row:
        """An id, a vault-relative path, or a note's name as Obsidian resolves
        ``[[Note name]]`` (a path without ``.md``, else the file name; case-insensitive and
        Unicode-normalised: macOS writes NFD names). A name several notes share is an
        error listing them. Expired memories are not found."""
        self.check_index()
        key = (check_text(memory_id, "memory_id") or "").strip()
        if not key:
            raise InvalidInput(said("memory_id is empty; pass an id or a vault-relative path (use ", RECALL,
                                    " to find one)."), argument="memory_id")
        if not encodable(key):
            raise NotFound(key)
        path = key.replace("\\", "/").removeprefix("./")
        row = self.index.by_id(key, iso(self.now())) or self.index.by_path(path)
        if row is None and path.endswith(".md") and self.store.stat(path) is not None:
            self.reconciler.reconcile_path(path)  # a file made by hand that the index has not seen yet
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

    def summary(self, row: Fields) -> Summary:
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

    def memory(self, rel: str, data: bytes, row: sqlite3.Row, note: parse.Note | None = None) -> Memory:
        """The memory at ``rel`` from its bytes and row; ``note``: those bytes already parsed."""
        note = note or parse.parse(data, rel)
        relations: dict[str, list[str]] = {}
        for relation, target in note.links:
            relations.setdefault(relation, []).append(target)
        summary = self.summary(row)
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

    def settled(self, rel: str) -> bytes:
        """The file's bytes once they have settled: unmodified for ``SETTLED_AGE``, or
        the same in two reads ``SETTLE_WAIT`` apart. An empty or unreadable file (what
        an editor leaves between truncate and write) is read again until it is complete
        or has stayed the same a while (then ``writes.editable`` says what is wrong); one that
        stays empty or keeps changing is refused."""
        last: bytes | None = None
        for _ in range(SETTLE_TRIES):
            read = self.files.read(rel)
            if read is None:
                raise NotFound(rel)
            data, stat = read
            age = time.time() - stat.st_mtime
            if age < SETTLED_AGE:
                time.sleep(SETTLE_WAIT)
                again = self.files.read(rel)
                if again is None or again[0] != data:
                    last = None
                    continue
            if not data.strip():
                if age > SETTLE_GIVE_UP:
                    raise StillSaving(rel, "is empty")
            elif data == last or age > SETTLE_GIVE_UP or not parse.parse(data, rel).unreadable:
                return data  # complete, or broken and not changing: editable() says why
            last = data
            time.sleep(SETTLE_WAIT * 3)
        raise StillSaving(rel, "is empty" if last is not None and not last.strip() else "keeps changing")

    def load(self, memory_id: str, settle: bool = False) -> tuple[sqlite3.Row, bytes]:
        """The row and the file's current bytes, re-indexing the file if it drifted.

        ``settle``: the bytes once settled (``settled``), as an edit needs them, and so
        the index never takes in a file caught halfway through someone's save (its id
        would vanish from the index, and the edit would say "not found")."""
        row = self.resolve(memory_id)
        if settle:
            data = self.settled(row["path"])
        else:
            read = self.files.read(row["path"])
            if read is None:
                self.reconciler.reconcile_path(row["path"])
                raise NotFound(memory_id)
            data, _ = read
        if file_version(data) != row["sha256"]:
            self.reconciler.reconcile_path(row["path"])
            row = self.resolve(memory_id)
        return row, data

    def get(self, memory_id: str) -> Memory:
        row, data = self.load(memory_id)
        return self.memory(row["path"], data, row)

