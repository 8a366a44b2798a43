"""The one object every front end talks to: remember, recall, update, forget, sync.

It composes the store (files), the index (SQLite) and the query planner. The files
are the truth: every write goes to a file first, then the index is refreshed from
the bytes actually on disk, through the same per-file function reconcile uses.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import fcntl
import os
import re
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from stat import S_ISREG
from typing import Any

from . import graph, transfer
from . import note as notes
from .errors import Duplicate, InvalidInput, NotFound, PathRefused, VaultError, VersionConflict
from .index import SCHEMA_VERSION, TOKENIZER, FileFacts, Filters, Index, TermMatch
from .models import (
    ContextMemory,
    ContextResult,
    Edge,
    ExportedMemory,
    ExportPage,
    FileContent,
    ForgetResult,
    GcResult,
    ImportResult,
    LinkResult,
    Stats,
    Hit,
    ListResult,
    Memory,
    ReconcileReport,
    RelatedNode,
    RelatedResult,
    RememberResult,
    SearchResult,
    Summary,
    UpdateResult,
)
from .query import (
    MAX_QUERY_CHARS,
    Term,
    can_correct,
    can_prefix,
    expansion_term,
    cjk_parts,
    edit_distance,
    plan,
    typo_bound,
    word_term,
)
from .limits import (
    MAX_BATCH,
    MAX_TAGS,
    check_content,
    check_limit,
    check_namespace,
    check_tags,
    check_ttl,
)
from .store import (
    GITIGNORE,
    Store,
    dated_folder,
    encodable,
    index_folder,
    is_memory_path,
    make_slug,
    new_id,
)

MATCH_MODES = ("auto", "all", "any")
TYPO_TRIES = 3  # closest vocabulary words tried against the filters when correcting a typo
CONTEXT_STRATEGIES = ("relevance", "recency", "importance")
CONTEXT_CANDIDATES = 100
MAX_TOKEN_BUDGET = 200_000
MAX_READ_BYTES = 1_000_000
TOKEN_ESTIMATE = "ceil(characters / 4) of each memory's title and content"
_RELATION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
TRASH_DAYS = 30
SEARCH_MODE = (
    f"sqlite fts5 ({TOKENIZER}) with CJK bigrams; all terms, else IDF-weighted coverage; "
    "bm25 (title and tags above body); recency; prefix and typo fallbacks"
)

Clock = Callable[[], dt.datetime]
Progress = Callable[[int, int], None]


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def humanize_age(then: str, now: dt.datetime) -> str:
    """"3 days ago": how long since a canonical UTC timestamp."""
    try:
        seconds = (now - dt.datetime.fromisoformat(then)).total_seconds()
    except ValueError:
        return ""
    if seconds < 0:
        return "in the future"
    for unit, size in (("year", 365 * 86400), ("month", 30 * 86400), ("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''} ago"
    return "just now"


# --------------------------------------------------------------------------- editing


# Problems note.parse records when it could not read what a file says: a tool changing
# such a file would have to guess, so it is left to a human.
_UNREADABLE = ("broken YAML", "front matter must", "file is not valid")


def _editable(note: notes.Note) -> notes.Note:
    """``note``, unless its front matter could not be read (then InvalidInput)."""
    if any(p.startswith(_UNREADABLE) for p in note.problems):
        raise InvalidInput(
            f"{note.path} has a problem a tool must not guess around ({'; '.join(note.problems)}); "
            "fix the file by hand, then retry."
        )
    return note


# --------------------------------------------------------------------------- locking


class _WriteLock:
    """Exclusive across processes (``flock`` on a file in the index folder) and
    re-entrant within one, so a write's dedup check, file create and index write
    happen as one step even with two agents and the CLI on one vault."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    @contextmanager
    def hold(self) -> Iterator[None]:
        with self._thread_lock:
            if self._depth == 0:
                self.path.parent.mkdir(parents=True, exist_ok=True)  # someone may have deleted .index/
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                fcntl.flock(fd, fcntl.LOCK_EX)
                self._fd = fd
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._fd is not None:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
                    os.close(self._fd)
                    self._fd = None


# --------------------------------------------------------------------------- the vault


class Vault:
    """A vault folder and its index. Open it, use it, ``close()`` it."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        index_dir: str | os.PathLike[str] | None = None,
        clock: Clock = _utcnow,
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
        self._lock = _WriteLock(self.index_dir / "write.lock")
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

    @classmethod
    def init(cls, root: str | os.PathLike[str], **kwargs: Any) -> "Vault":
        """Create the vault folder (and its .gitignore) if needed, then open it."""
        path = Path(root).expanduser().absolute()
        if path.exists() and not path.is_dir():
            raise VaultError(f"{path} is a file, not a folder; choose another path for the vault.")
        try:
            path.mkdir(parents=True, exist_ok=True)
            gitignore = path / ".gitignore"
            if not gitignore.exists():
                Store(path).write_new_file(".gitignore", GITIGNORE.encode())
        except OSError as exc:
            raise VaultError(f"Cannot create a vault at {path}: {exc.strerror or exc}.") from exc
        return cls(path, **kwargs)

    def close(self) -> None:
        self.index.close()

    def __enter__(self) -> "Vault":
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

    def reconcile(self) -> ReconcileReport:
        """Make the index match the files: new, changed, moved and deleted ones.

        Unchanged files are skipped by size+mtime, then by content hash, so a start
        with nothing changed reads no file. Expired memories go to the trash.
        """
        counts = {"added": 0, "updated": 0, "removed": 0, "unchanged": 0, "absent": 0}
        # Walk first, outside the vault's lock and the index transaction: holding either
        # for the whole walk (~0.5 s at 100k files) would stall other writers and this
        # process's searches. A file changed after its stat is caught below: its stat no
        # longer matches the index, or it is re-read and hashed.
        walked = [(rel, stat.st_size, stat.st_mtime_ns) for rel, stat in self.store.walk()]
        with self._writing():
            known = self.index.file_facts()
            if not known:
                return self._rebuild(counts, paths=[rel for rel, _, _ in walked])
            seen: set[str] = set()
            stale: list[str] = []
            for rel, size, mtime_ns in walked:
                seen.add(rel)
                facts = known.get(rel)
                if facts is not None and facts.size == size and facts.mtime_ns == mtime_ns:
                    counts["unchanged"] += 1
                else:
                    stale.append(rel)
            stale.extend(known.keys() - seen)
            if stale:
                with self.index.transaction() as conn:
                    for rel in stale:
                        counts[self._refresh(conn, rel, known.get(rel))] += 1
            expired = self.sweep_expired()
        return self._report(counts, expired)

    def reindex(self, *, sweep: bool = True, progress: Progress | None = None) -> ReconcileReport:
        """Rebuild the index from the files alone, in one transaction.

        ``sweep=False`` leaves expired files where they are (a read-only rebuild,
        as the test suite's "index equals a rebuild" check needs). ``progress(done,
        total)`` is called as files are read, for a front end to show.
        """
        with self._writing():
            counts = {"added": 0, "updated": 0, "removed": 0, "unchanged": 0, "absent": 0}
            return self._rebuild(counts, sweep=sweep, progress=progress)

    def _rebuild(self, counts: dict[str, int], sweep: bool = True, progress: Progress | None = None,
                 paths: list[str] | None = None) -> ReconcileReport:
        # Sorted, so row numbers follow the dated layout: the index's "newest" shortcuts
        # (for questions of only common words) read rows from the highest number down.
        paths = sorted(paths if paths is not None else (rel for rel, _stat in self.store.walk()))

        def parsed() -> Iterator[tuple[notes.Note, FileFacts]]:
            for done, rel in enumerate(paths, 1):
                if progress is not None and (done % 500 == 0 or done == len(paths)):
                    progress(done, len(paths))
                read = self._read(rel)
                if read is None:
                    continue
                data, stat = read
                yield self._note_for(rel, data, stat), FileFacts(len(data), stat.st_mtime_ns, notes.file_version(data))

        with self.index.transaction() as conn:
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
        with self._writing():
            for row in rows:
                if self.store.stat(row["path"]) is not None:
                    self.store.trash(row["path"])
                with self.index.transaction() as conn:
                    self.index.delete(conn, row["path"])
        return len(rows)

    # ------------------------------------------------------------------ owning the vault
    def stats(self) -> Stats:
        """Totals and health at a glance (also the MCP ``memory_stats`` tool)."""
        self._check_index()
        now = iso(self.now())
        namespaces = self.index.namespace_counts(now)
        return Stats(
            vault=str(self.root),
            total=sum(namespaces.values()),
            namespaces=namespaces,
            top_tags=self.index.top_tags(now),
            with_ttl=self.index.ttl_count(now),
            parse_problems=self.index.problem_files(),
            conflicts=self.index.conflict_paths(),
            duplicate_ids=self.index.duplicate_ids(),
            trash_files=sum(1 for _ in self.store.trash_entries()),
            index_path=str(self.index.path),
            index_bytes=self.index.size_bytes(),
            schema_version=SCHEMA_VERSION,
            search_mode=SEARCH_MODE,
        )

    def export_memories(self, namespace: str | None = None) -> list[ExportedMemory]:
        """Every live memory as written: its path, all front-matter keys, the body."""
        self._check_index()
        return self._exported(self.index.live_rows(iso(self.now()), namespace or None))

    def export_page(self, namespace: str | None = None, limit: int = 100, offset: int = 0) -> ExportPage:
        """One page of the export, read from disk page by page (an MCP call's worth)."""
        self._check_index()
        if offset < 0:
            raise InvalidInput("offset must be 0 or more.")
        now = iso(self.now())
        total = self.index.count(Filters(namespace=namespace or None), now)
        check_limit(limit, most=MAX_BATCH)
        rows = self.index.live_rows(now, namespace or None, limit, offset)
        page = self._exported(rows)  # a file gone since it was indexed is left out...
        result = ExportPage(total=total, count=len(page), offset=offset, memories=page)
        if offset + len(rows) < total:  # ...but still counts, so the next page does not repeat one
            result["next_offset"] = offset + len(rows)
        return result

    def _exported(self, rows: list[sqlite3.Row]) -> list[ExportedMemory]:
        out: list[ExportedMemory] = []
        for row in rows:
            read = self._read(row["path"])
            if read is None:
                continue
            note = notes.parse(read[0], row["path"])
            out.append(ExportedMemory(id=note.id, path=note.path, front_matter=note.meta, content=note.body))
        return out

    def import_memories(self, items: list[dict[str, Any]], progress: Progress | None = None) -> ImportResult:
        """All or nothing: the whole batch is checked first, then written in one go.

        Same content in the same namespace, or an id that a live memory already has
        (already in the vault, or earlier in the batch: an older copy of a memory edited
        since), is skipped and counted; already-expired items are counted, not written.
        A path that is taken gets the next free ``-2``-style name; nothing is overwritten.
        """
        if not isinstance(items, list):
            raise InvalidInput("Import expects a JSON array of memories (as written by export).")
        with self._writing():
            now = self.now()
            plans, duplicates, expired = self._plan_import(items, now)
            written: list[str] = []
            try:
                for done, (rel, data) in enumerate(plans, 1):
                    folder, name = rel.rsplit("/", 1) if "/" in rel else ("", rel)
                    written.append(self.store.create(folder, name[:-3], data))
                    if progress is not None and (done % 100 == 0 or done == len(plans)):
                        progress(done, len(plans))
            except BaseException:
                for rel in written:  # files this call just created: undo, so nothing half-imported stays
                    self.store.abspath(rel).unlink(missing_ok=True)
                raise
            with self.index.transaction() as conn:
                for rel in written:
                    self._refresh(conn, rel, None)
            ids = [row["id"] for row in (self.index.by_path(rel) for rel in written) if row is not None]
        return ImportResult(imported=len(written), duplicates=duplicates, expired=expired, ids=ids)

    def _plan_import(self, items: list[Any], now: dt.datetime) -> tuple[list[tuple[str, bytes]], int, int]:
        plans: list[tuple[str, bytes]] = []
        seen: set[tuple[str, str]] = set()
        seen_ids: set[str] = set()
        duplicates = expired = 0
        for n, item in enumerate(items):
            where = f"Item {n}"
            if not isinstance(item, dict):
                raise InvalidInput(f"{where} is not an object; nothing was imported.")
            try:
                content = check_content(item.get("content"))  # type: ignore[arg-type]
                if "front_matter" in item:  # an export: its front matter is the file's, as written
                    meta, namespace = transfer.exported_front_matter(item["front_matter"])
                    content = item["content"]  # byte for byte: export -> import -> export is stable
                    data = notes.render_front_matter(meta, content)
                else:  # a hand-made item {content, namespace, tags, title, source, created, ...}
                    meta = transfer.new_fields(item, now)
                    namespace = meta["namespace"]
                    data = notes.render_new(meta, content)  # the file remember would write
            except (InvalidInput, ValueError) as exc:
                raise InvalidInput(f"{where}: {exc} Nothing was imported.") from exc
            if meta.get("expires") not in (None, "") and notes.to_utc(meta["expires"]) <= iso(now):
                expired += 1
                continue
            key = (namespace, notes.content_hash(content))
            if key in seen or self.index.find_content(namespace, key[1], iso(now)) is not None:
                duplicates += 1
                continue
            memory_id = transfer.own_id(meta)
            if memory_id is not None and (memory_id in seen_ids or self.index.by_id(memory_id, iso(now)) is not None):
                duplicates += 1  # an older copy of a live memory: a second file would claim its id
                continue
            seen.add(key)
            if memory_id is not None:
                seen_ids.add(memory_id)
            rel = transfer.import_path(self.store, item.get("path"), meta, content, now)
            plans.append((rel, data.encode("utf-8")))
        return plans, duplicates, expired

    def gc(self, older_than_days: float = TRASH_DAYS) -> GcResult:
        """Empty the trash of what has been there longer than ``older_than_days``."""
        if older_than_days < 0:
            raise InvalidInput("older_than_days must be 0 or more.")
        with self._writing():
            moved = self.sweep_expired()
            removed, kept = [], 0
            for rel, age in sorted(self.store.trash_entries()):
                if age >= older_than_days * 86400:
                    self.store.purge_from_trash(rel)
                    removed.append(rel)
                else:
                    kept += 1
        return GcResult(removed=removed, kept=kept, expired_moved=moved)

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

    # ------------------------------------------------------------------ writes
    def _twin(self, namespace: str, content_hash: str, now: str, exclude_path: str = "") -> sqlite3.Row | None:
        """The memory already holding this content, checked against its file: a human may
        have edited or deleted it since it was indexed (dedup must not swallow a new fact)."""
        twin = self.index.find_content(namespace, content_hash, now, exclude_path)
        while twin is not None and self.reconcile_path(twin["path"]) != "unchanged":
            twin = self.index.find_content(namespace, content_hash, now, exclude_path)
        return twin

    def remember(
        self,
        content: str,
        namespace: str = "default",
        tags: Iterable[str] | str | None = (),
        title: str = "",
        source: str = "",
        ttl_days: float = 0,
    ) -> RememberResult:
        """Store a fact as a new file, unless the same content is already in the namespace."""
        content = check_content(content)
        namespace = check_namespace(namespace)
        tag_list = check_tags(tags)
        ttl = check_ttl(ttl_days) or 0
        title = (title or "").strip()
        with self._writing():
            now = self.now()
            existing = self._twin(namespace, notes.content_hash(content), iso(now))
            if existing is not None:
                return self._merge_tags_into(existing, tag_list)
            fields = {
                "id": new_id(int(now.timestamp() * 1000)),
                "namespace": namespace,
                "title": title or None,
                "tags": tag_list,
                "created": iso(now),
                "updated": iso(now),
                "expires": iso(now + dt.timedelta(days=ttl)) if ttl else None,
                "source": (source or "").strip() or None,
            }
            data = notes.render_new(fields, content).encode("utf-8")
            slug = make_slug(title or notes.derive_title(content, ""))
            rel = self.store.create(dated_folder(now), slug, data)
            with self.index.transaction() as conn:
                self._refresh(conn, rel, None)
            return RememberResult(memory=self.get(rel), deduplicated=False)

    def _merge_tags_into(self, row: sqlite3.Row, tags: list[str]) -> RememberResult:
        current = row["tags"].split()
        if all(t in current for t in tags):
            return RememberResult(memory=self.get(row["path"]), deduplicated=True)
        result = self.update(row["path"], add_tags=tags)
        return RememberResult(memory=result["memory"], deduplicated=True)

    def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        add_tags: Iterable[str] | str | None = (),
        remove_tags: Iterable[str] | str | None = (),
        namespace: str | None = None,
        source: str | None = None,
        title: str | None = None,
        ttl_days: float | None = None,
        expected_version: str | None = None,
    ) -> UpdateResult:
        """Change a memory in place, rewriting only the front-matter keys that change."""
        new_body = check_content(content) if content is not None else None
        adding, removing = check_tags(add_tags), check_tags(remove_tags)
        new_namespace = check_namespace(namespace) if namespace is not None else None
        ttl = check_ttl(ttl_days)
        with self._writing():
            row, data = self._load(memory_id)
            version = notes.file_version(data)
            if expected_version and expected_version != version:
                raise VersionConflict(memory_id, expected_version, version)
            note = _editable(notes.parse(data, row["path"]))
            now = self.now()
            changes: dict[str, Any] = {}
            tags = _retag(note, adding, removing)
            if tags is not None:
                if len(tags) > MAX_TAGS and len(tags) > len(notes.as_tag_list(note.meta.get("tags"))):
                    raise InvalidInput(
                        f"{row['path']} would have {len(tags)} tags; the limit is {MAX_TAGS} per memory. "
                        "Remove some with remove_tags."
                    )
                changes["tags"] = tags
            if new_namespace is not None and new_namespace != note.namespace:
                changes["namespace"] = new_namespace
            if source is not None and source.strip() != note.source:
                changes["source"] = source.strip() or None
            if title is not None and title.strip() != str(note.meta.get("title") or ""):
                changes["title"] = title.strip() or None
            if ttl is not None:
                expires = iso(now + dt.timedelta(days=ttl)) if ttl else None
                if expires != note.expires:
                    changes["expires"] = expires
            body_changed = new_body is not None and new_body.replace("\r\n", "\n") != note.body.replace("\r\n", "\n").strip("\n")
            if body_changed or "namespace" in changes:
                other = self._twin(
                    changes.get("namespace", note.namespace),
                    notes.content_hash(new_body if body_changed else note.body),
                    iso(now),
                    exclude_path=row["path"],
                )
                if other is not None:
                    raise Duplicate(memory_id, other["id"])
            if not changes and not body_changed:
                return UpdateResult(memory=self._memory(row["path"], data, row), changed=False)
            if "created" not in note.meta:  # its creation time came from the mtime, which this write resets
                changes["created"] = row["created"]
            changes["updated"] = iso(now)
            text = notes.patch(data.decode("utf-8"), changes, body=new_body if body_changed else None)
            self.store.replace(row["path"], text.encode("utf-8"))
            with self.index.transaction() as conn:
                self._refresh(conn, row["path"], None)
            return UpdateResult(memory=self.get(row["path"]), changed=True)

    def forget(self, memory_id: str, expected_version: str | None = None) -> ForgetResult:
        """Move a memory's file to ``.trash/``; nothing is deleted outright."""
        with self._writing():
            row, data = self._load(memory_id)
            version = notes.file_version(data)
            if expected_version and expected_version != version:
                raise VersionConflict(memory_id, expected_version, version)
            trashed = self.store.trash(row["path"])
            with self.index.transaction() as conn:
                self.index.delete(conn, row["path"])
            return ForgetResult(id=row["id"], path=row["path"], title=row["title"], trashed_to=trashed)

    # ------------------------------------------------------------------ reads
    def list(
        self,
        namespace: str | None = None,
        tags: Iterable[str] | str | None = (),
        limit: int = 20,
        offset: int = 0,
        path_prefix: str | None = None,
    ) -> ListResult:
        """Memories newest first, filtered in SQL, paged."""
        filters = Filters(namespace=namespace or None, tags=tuple(check_tags(tags)), path_prefix=path_prefix or None)
        check_limit(limit)
        if offset < 0:
            raise InvalidInput("offset must be 0 or more.")
        self._check_index()
        now = iso(self.now())
        rows = self.index.list(filters, now, limit, offset)
        total = self.index.count(filters, now)
        result = ListResult(total=total, count=len(rows), offset=offset, memories=[self._summary(r) for r in rows])
        if offset + len(rows) < total:
            result["next_offset"] = offset + len(rows)
        return result

    def search(
        self,
        query: str,
        namespace: str | None = None,
        tags: Iterable[str] | str | None = (),
        limit: int = 10,
        match: str = "auto",
        since: str | None = None,
        until: str | None = None,
        path_prefix: str | None = None,
    ) -> SearchResult:
        """Plain-question recall: all terms when some memory has them all, else the
        memories matching most terms (IDF-weighted, lifted by the memories written next
        to them), then BM25, then recency. A term that matches nothing gets a second
        chance (``_rescue``); corrections are reported in ``corrected``."""
        if not isinstance(query, str) or len(query) > MAX_QUERY_CHARS:
            raise InvalidInput(f"The query must be text of at most {MAX_QUERY_CHARS} characters.")
        if match not in MATCH_MODES:
            raise InvalidInput(f"match must be one of {', '.join(MATCH_MODES)}; got {match!r}.")
        check_limit(limit)
        filters = Filters(
            namespace=namespace or None,
            tags=tuple(check_tags(tags)),
            since=_bound(since, "since"),
            until=_bound(until, "until"),
            path_prefix=path_prefix or None,
        )
        self._check_index()
        terms = plan(query).terms
        if not terms:
            return SearchResult(
                terms=[], match_mode=match, count=0, hits=[],
                hint="The query has no words to search for; ask with a few plain words.",
            )
        now = iso(self.now())
        hits: list[Hit] = []
        corrected: dict[str, str] = {}
        mode = "any" if match == "any" else "all"
        matches = self.index.match_terms(terms, filters, now)
        if mode == "all":
            hits = self._all_hits(matches, filters, now, limit)
        if not hits:
            matches, corrected = self._rescue(matches, filters, now)
            rewritten = [m.term for m in matches] != terms
            terms = [m.term for m in matches]
            if mode == "all" and rewritten:
                hits = self._all_hits(matches, filters, now, limit)
            if not hits and match == "auto" and len(terms) > 1:
                mode = "any"
            if mode == "any":
                hits = self._partial(matches, filters, now, limit)
        result = SearchResult(terms=[t.text for t in terms], match_mode=mode, count=len(hits), hits=hits)
        if corrected:
            result["corrected"] = corrected
        if match == "auto" and mode == "any" and hits:
            result["note"] = (
                "No memory contains all of the terms; these match some of them (see matched_terms)."
            )
        if not hits:
            result["hint"] = (
                "Nothing matched. Try fewer or other words, remove namespace/tag filters, "
                "or browse with list_memories."
            )
        return result

    def _all_hits(self, matches: list[TermMatch], filters: Filters, now: str, limit: int) -> list[Hit]:
        """Memories holding every term: BM25 (title and tags above the body), then newest."""
        ranked = self.index.all_terms(matches, filters, now, limit)
        words = [m.term.text for m in matches]
        return self._hits(ranked, {rid: words for rid, _ in ranked}, [m.term for m in matches])

    def _rescue(self, matches: list[TermMatch], filters: Filters, now: str) -> tuple[list[TermMatch], dict[str, str]]:
        """Give each term that matches nothing a second chance: a CJK question run is
        split into its words, a word is tried as a prefix (``kube`` -> ``kubernetes``),
        then, if no memory anywhere holds it, corrected to the closest indexed word
        (the most frequent on a tie; ``kuberentes`` -> ``kubernetes``)."""
        out: list[TermMatch] = []
        corrected: dict[str, str] = {}
        for m in matches:
            if m.rids is None or m.rids:
                out.append(m)
                continue
            if m.term.cjk and len(m.term.text) > 1:
                out.extend(self.index.match_terms(cjk_parts(m.term.text), filters, now))
                continue
            longer = self.index.words_starting(m.term.text) if can_prefix(m.term) else []
            if longer:
                [prefixed] = self.index.match_terms([expansion_term(m.term.text, longer)], filters, now)
                if prefixed.rids is None or prefixed.rids:
                    out.append(prefixed)
                    continue
            fix = self._correct(m, filters, now) if m.df == 0 and can_correct(m.term) else None
            if fix is not None:
                corrected[m.term.text] = fix.term.text
            out.append(fix or m)
        unique = {m.term.text: m for m in out}
        return list(unique.values()), corrected

    def _correct(self, m: TermMatch, filters: Filters, now: str) -> TermMatch | None:
        """The closest indexed word (fewest edits, then most memories) that matches
        within the filters; None when nothing is close enough."""
        word, bound = m.term.text, typo_bound(m.term.text)
        near = []
        for candidate, docs in self.index.vocabulary(word, bound):
            distance = edit_distance(word, candidate, bound)
            if 0 < distance <= bound and candidate.isalpha():
                near.append((distance, -docs, candidate))
        for _, _, candidate in sorted(near)[:TYPO_TRIES]:
            [found] = self.index.match_terms([word_term(candidate)], filters, now)
            if found.rids is None or found.rids:
                return found
        return None

    def _partial(self, matches: list[TermMatch], filters: Filters, now: str, limit: int) -> list[Hit]:
        """Memories matching some terms, most (IDF-weighted) first; see ``Index.partial``."""
        ranked, matched = self.index.partial(matches, filters, now, limit)
        return self._hits(ranked, matched, [m.term for m in matches])

    def _hits(self, ranked: list[tuple[int, float]], matched: dict[int, list[str]], terms: list[Term]) -> list[Hit]:
        rows = self.index.rows_by_rid([rid for rid, _ in ranked])
        snippets = self.index.snippets([rows[rid] for rid, _ in ranked if rid in rows], terms)
        return [
            self._hit(rows[rid], matched.get(rid, []), score, snippets.get(rid, ""))
            for rid, score in ranked
            if rid in rows
        ]

    def _hit(self, row: sqlite3.Row, matched_terms: list[str], score: float, snippet: str) -> Hit:
        """``score``: higher is better, comparable within one result only."""
        return Hit(**self._summary(row), snippet=snippet, matched_terms=list(matched_terms), score=round(score, 4))

    # ------------------------------------------------------------------ links, context, files
    def link(self, memory_id: str, target_id: str, relation: str = "related_to") -> LinkResult:
        """Add ``"[[target]]"`` to the source file's front-matter list ``relation``.

        That is the SPEC §5 form (``related_to: ["[[acme-billing]]"]``), a property
        Obsidian draws as links. Only that key's lines change (not even ``updated``);
        a link that is already there, in any spelling that resolves to the target,
        changes nothing.
        """
        relation = (relation or "").strip()
        if not _RELATION_NAME.fullmatch(relation) or relation in notes.RESERVED_KEYS:
            raise InvalidInput(
                f"Relation {relation!r} cannot be used: give one word such as related_to or depends_on "
                "(letters, digits, '_' or '-', up to 64 characters), not one of the reserved keys "
                f"{', '.join(notes.RESERVED_KEYS)}."
            )
        with self._writing():
            source, data = self._load(memory_id)
            target = self._resolve(target_id)
            if target["path"] == source["path"]:
                raise InvalidInput(f"A memory cannot be linked to itself ({source['path']}); give another target_id.")
            note = _editable(notes.parse(data, source["path"]))
            items = self._relation_items(note.meta.get(relation), source["path"], relation)
            links = graph.Links(self.index, iso(self.now()))
            already = any(
                (found := links.resolve(written, source["path"])) is not None and found["rid"] == target["rid"]
                for item in items
                if isinstance(item, str)
                for written in notes.wikilinks(item)
            )
            wikilink = f"[[{self._link_text(target)}]]"
            if not already:
                text = notes.patch(data.decode("utf-8"), {relation: [*items, wikilink]})
                self.store.replace(source["path"], text.encode("utf-8"))
                with self.index.transaction() as conn:
                    self._refresh(conn, source["path"], None)
                source = self.index.by_path(source["path"]) or source
            return LinkResult(
                source=self._summary(source), target=self._summary(target), relation=relation,
                link=wikilink, changed=not already,
            )

    @staticmethod
    def _relation_items(value: Any, path: str, relation: str) -> list[Any]:
        """What a relation property holds now, as a list to append to."""
        if value is None:
            return []
        if isinstance(value, str):
            return [value]
        if isinstance(value, list) and all(isinstance(v, (str, int, float)) or v is None for v in value):
            return [v for v in value if v is not None]
        raise InvalidInput(
            f"{path} already has a {relation!r} key that is not a list of links; "
            "choose another relation name or edit that key by hand."
        )

    def _link_text(self, target: sqlite3.Row) -> str:
        """The target's file name without ``.md``, or its vault path when the name repeats
        (Obsidian would otherwise resolve the name to another file)."""
        name = target["path"].rsplit("/", 1)[-1][:-3]
        same_name = self.index.query("SELECT count(*) FROM memories WHERE name_key = ?", (target["name_key"],))[0][0]
        text = name if same_name <= 1 else target["path"][:-3]
        if any(c in text for c in "[]|#^"):
            raise InvalidInput(
                f"{target['path']} has a character a wikilink cannot hold ([ ] | # ^); rename the file, then link again."
            )
        return text

    def related(self, memory_id: str, depth: int = 1, direction: str = "both", limit: int = 100) -> RelatedResult:
        """Memories linked to this one, breadth-first up to ``depth`` hops.

        Follows front-matter relations and body ``[[wikilinks]]`` (``out``), backlinks
        (``in``) or both; visits at most ``limit`` memories, the start included, and
        says ``aborted`` when that cap cut the walk short.
        """
        if not isinstance(depth, int) or isinstance(depth, bool) or not 0 <= depth <= graph.MAX_DEPTH:
            raise InvalidInput(f"depth must be between 0 and {graph.MAX_DEPTH}; got {depth!r}.")
        if direction not in graph.DIRECTIONS:
            raise InvalidInput(f"direction must be one of {', '.join(graph.DIRECTIONS)}; got {direction!r}.")
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= graph.MAX_VISITS:
            raise InvalidInput(f"limit must be between 1 and {graph.MAX_VISITS}; got {limit!r}.")
        start = self._resolve(memory_id)
        walked = graph.walk(graph.Links(self.index, iso(self.now())), start, depth, direction, limit)
        ordered = sorted(walked.nodes.values(), key=lambda pair: (pair[1], pair[0]["path"]))
        ids = {row["rid"]: row["id"] for row, _distance in ordered}
        result = RelatedResult(
            memory_id=start["id"],
            depth=depth,
            direction=direction,
            count=len(ordered) - 1,
            nodes=[RelatedNode(**self._summary(row), distance=distance) for row, distance in ordered],
            edges=[Edge(source=ids[src], relation=relation, target=ids[dst]) for src, relation, dst in walked.edges],
            aborted=walked.aborted,
        )
        if walked.aborted:
            result["note"] = (
                f"Stopped at {limit} memories: more are linked. Raise limit (up to {graph.MAX_VISITS}) "
                "or lower depth to see the rest."
            )
        elif len(ordered) == 1:
            result["note"] = "No linked memories. Add a link with link_memories, or try direction='both' or a larger depth."
        return result

    def retrieve_context(
        self,
        query: str,
        token_budget: int = 4000,
        strategy: str = "relevance",
        namespace: str | None = None,
        tags: Iterable[str] | str | None = (),
    ) -> ContextResult:
        """Whole memories that together fit ``token_budget``, best first.

        Candidates are the top recall hits for ``query`` (or the newest memories when
        the query is empty). ``relevance`` keeps recall's order, ``recency`` puts the
        latest update first, ``importance`` a numeric ``importance:`` front-matter key,
        then the number of memories linking to it. A memory that does not fit is
        skipped (never cut), and smaller ones after it may still fit.
        """
        if strategy not in CONTEXT_STRATEGIES:
            raise InvalidInput(f"strategy must be one of {', '.join(CONTEXT_STRATEGIES)}; got {strategy!r}.")
        if not isinstance(token_budget, int) or isinstance(token_budget, bool) or not 1 <= token_budget <= MAX_TOKEN_BUDGET:
            raise InvalidInput(f"token_budget must be between 1 and {MAX_TOKEN_BUDGET:,} tokens; got {token_budget!r}.")
        hint = None
        if (query or "").strip():
            found = self.search(query, namespace=namespace, tags=tags, limit=CONTEXT_CANDIDATES)
            paths = [hit["path"] for hit in found["hits"]]
            hint = found.get("hint")
        else:
            paths = [m["path"] for m in self.list(namespace=namespace, tags=tags, limit=CONTEXT_CANDIDATES)["memories"]]
        loaded = []
        for path in paths:
            try:
                row, data = self._load(path)
            except NotFound:  # forgotten or expired since the search
                continue
            loaded.append((row, self._memory(row["path"], data, row)))
        picked: list[ContextMemory] = []
        used = omitted = 0
        for _row, memory in self._context_order(loaded, strategy):
            cost = self.estimate_tokens(memory["title"] + "\n" + memory["content"])
            if used + cost > token_budget:
                omitted += 1
                continue
            used += cost
            picked.append(ContextMemory(**self._summary_of(memory), content=memory["content"], estimated_tokens=cost))
        result = ContextResult(
            query=query or "", strategy=strategy, token_budget=token_budget, estimated_tokens=used,
            estimate=TOKEN_ESTIMATE, truncated=omitted > 0, omitted=omitted, count=len(picked), memories=picked,
        )
        if hint:
            result["hint"] = hint
        elif omitted:
            result["hint"] = f"{omitted} matching memories did not fit; raise token_budget or narrow the query to see them."
        return result

    def _context_order(self, loaded: list[tuple[sqlite3.Row, Memory]], strategy: str) -> list[tuple[sqlite3.Row, Memory]]:
        if strategy == "recency":
            return sorted(loaded, key=lambda pair: pair[1]["updated"], reverse=True)
        if strategy == "importance":
            links = graph.Links(self.index, iso(self.now()))

            def weight(pair: tuple[sqlite3.Row, Memory]) -> tuple[float, int]:
                declared = pair[1]["front_matter"].get("importance")
                number = declared if isinstance(declared, (int, float)) and not isinstance(declared, bool) else 0
                return (-number, -links.backlink_count(pair[0]))

            return sorted(loaded, key=weight)
        return loaded

    @staticmethod
    def estimate_tokens(text: str) -> int:
        """The budget estimate ``retrieve_context`` uses: characters / 4, rounded up."""
        return -(-len(text) // 4)

    @staticmethod
    def _summary_of(memory: Memory) -> Summary:
        return Summary(**{key: memory[key] for key in Summary.__annotations__})  # type: ignore[misc]

    def read_file(self, path: str, max_bytes: int = MAX_READ_BYTES) -> FileContent:
        """A text file inside the vault, as it is on disk.

        Symlinks are resolved first and ``..`` escapes, absolute paths elsewhere and
        dot-folders other than ``.prompts/`` are refused (``.git/config`` can hold
        tokens); binary files and files over ``max_bytes`` are refused by name and size,
        and a memory that has expired is not found.
        """
        if not isinstance(path, str) or not path.strip():
            raise InvalidInput("path is empty; give a vault-relative path such as 2026/07/20/some-memory.md.")
        resolved = self.store.confine(path.strip())
        rel = resolved.relative_to(self.root.resolve()).as_posix()
        if not resolved.is_file():
            what = "is a folder" if resolved.is_dir() else "does not exist"
            raise InvalidInput(f"{rel or '.'} {what} in the vault; give the path of a file (list_memories shows them).")
        try:
            fd = os.open(resolved, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as exc:  # swapped for a symlink since it was checked, or unreadable
            raise PathRefused(f"{rel} cannot be read safely ({exc.strerror}); nothing was returned.") from exc
        with os.fdopen(fd, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(max_bytes + 1) if size <= max_bytes else b""
        if size > max_bytes or len(data) > max_bytes:
            raise InvalidInput(
                f"{rel} is {max(size, len(data)):,} bytes; read_file returns at most {max_bytes:,} bytes. "
                "Open it in an editor instead, or recall the memory for a snippet."
            )
        try:
            if b"\0" in data:
                raise UnicodeError
            text = data.decode("utf-8")
        except UnicodeError:
            raise InvalidInput(f"{rel} is a binary file, not UTF-8 text; read_file returns text files only.") from None
        if is_memory_path(rel):
            expires = notes.parse(data, rel).expires  # the file's own word, even before the index saw it
            if expires is not None and expires <= iso(self.now()):
                raise NotFound(rel)  # SPEC §3: an expired memory is never returned by any read
        row = self.index.by_path(rel)
        return FileContent(
            path=rel, size=len(data), version=notes.file_version(data),
            memory_id=row["id"] if row is not None else None, content=text,
        )

    def complete_ids(self, prefix: str, limit: int = 20) -> list[str]:
        """Live memory ids and vault paths that start with ``prefix``, newest first
        (what an MCP client offers while someone types a ``memory://`` address)."""
        n = len(prefix)
        rows = self.index.query(
            "SELECT id, path FROM memories m WHERE (substr(m.id, 1, ?) = ? OR substr(m.path, 1, ?) = ?) "
            "AND (m.expires IS NULL OR m.expires > ?) ORDER BY m.updated DESC, m.path LIMIT ?",
            (n, prefix, n, prefix, iso(self.now()), limit),
        )
        values: list[str] = []
        for row in rows:
            for value in (row["id"], row["path"]):
                if value.startswith(prefix) and value not in values:
                    values.append(value)
        return values[:limit]


def _retag(note: notes.Note, adding: list[str], removing: list[str]) -> list[Any] | None:
    """The front matter's new tags list, or None when it stays as it is.

    Tags nobody asked to change keep their spelling (``Customer`` stays ``Customer``;
    tags compare case-insensitively). A tag written only in the body (``#ops``) cannot
    be removed by rewriting the front matter: that is refused, not silently ignored.
    """
    value = note.meta.get("tags")
    written: list[Any] = []  # one entry per tag, as the reader splits them ("a, b" in a list is two)
    for item in value if isinstance(value, list) else [value]:
        if item is None:
            continue  # an empty list item is no tag (the reader skips it too)
        pieces = notes.split_tags([item]) if isinstance(item, str) else [item]
        written.extend(pieces if isinstance(value, list) else notes.as_tag_list(value))
    names = [notes.normalise_tag(str(t)) for t in written]
    inline_only = [t for t in removing if t not in names and t in note.tags]
    if inline_only:
        raise InvalidInput(
            f"Tag {inline_only[0]!r} is written in the text of {note.path} as #{inline_only[0]}, not in its "
            "tags property; change the content to remove it. Nothing was changed."
        )
    kept = [t for t, name in zip(written, names) if name not in removing]
    added = [t for t in adding if t not in names]
    if kept == written and not added:
        return None
    return kept + added


def _bound(value: str | None, name: str) -> str | None:
    if not value:
        return None
    try:
        return notes.to_utc(value)
    except ValueError as exc:
        raise InvalidInput(f"{name} must be a date or timestamp like 2026-07-20; got {value!r}.") from exc
