"""The SQLite cache of the vault: schema, writes and reads (recall's SQL is in ``recall.sql``).

It only ever holds what can be derived from the files again, so a schema change simply
drops and rebuilds it. FTS5 is an external-content table written explicitly in the same
transaction as its row (per-row triggers are 3-5x slower on bulk loads).
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import os
import sqlite3
import threading
import weakref
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import limits
from ..errors import AgentMemoryError, VaultError
from ..disk.locking import ignore_folder
from ..note.parse import Note
from ..recall.sql import Filters
from ..recall.choice import Holdings
from ..recall.terms import cjk_index_text
from ..progress import Progress, Step
from ..trust import confine
from .derived import (DERIVED, PHASES, PROPERTIES, TAGS, VOCABULARY, build_chunk, insert_properties, insert_tags,
                      insert_words, kept, merge_step)
from .facts import FileFacts, packed_stamp, racy
from .loading import bulk_load, drop_fresh, fresh_load, index_statements, load_cache, merge_due, sorted_in, statements
from .mend import mend_count
from .rows import (date_words, description, changed_at, headings_of, indexed_body, joined, link_key, name_key, row_values,
                   split_names, words_text)

SCHEMA_VERSION = 18  # 18: an inline tag starts with a character of its own, not a mark (rows rebuilt once)
# The bytes (sha256) of the last write this tool made to each file, whatever session made
# it: a body may be replaced without the version read only while the file still holds
# them (``Writes.update``). Outside the versioned schema: losing it (a rebuilt index)
# only makes such an update ask for the version.
TOOL_WRITES = "CREATE TABLE IF NOT EXISTS tool_writes (path TEXT PRIMARY KEY, sha256 TEXT NOT NULL)"
DB_NAME = "index.sqlite3"
# BM25 column weights (names: title and note name; tags, body, cjk, dated, described, aliases, headings): title,
# aliases and tags count above the body; the CJK bigrams and the creation date count like body text; headings are
# in the body already (their column is for the notes profile's second BM25, ``recall.sql.bm25``). A profile may weigh them
# otherwise (``RecallConfig.field_weights``: the notes profile puts an alias below the note's name).
WEIGHTS = (10.0, 5.0, 1.0, 1.0, 1.0, 1.0, 10.0, 0.0)
TOKENIZER = "porter unicode61 remove_diacritics 2"
# The vocabulary typos are corrected against: words as written, not porter stems.
VOCAB_TOKENIZER = "unicode61 remove_diacritics 2"
# A transaction adding this many rows (a rebuild, an import, a big reconcile), or a
# share of the index's (``loading.merge_due``), ends by merging the full-text segments.
MERGE_AFTER = 1000
# SQLite's own default page cache (2 MB), set on every connection: the index file's
# header can suggest another (``default_cache_size``), and a planted or synced index
# file must not decide how much of this process's memory its pages take.
CACHE_KIB = -2000
STAMPS_PAGE = 2000  # rows of the index's stamps read at a time by reconcile's comparison

SCHEMA = f"""
CREATE TABLE memories (
  rid INTEGER PRIMARY KEY,
  path TEXT NOT NULL UNIQUE,
  path_key TEXT NOT NULL,       -- lower-case path without .md: wikilink by path
  name_key TEXT NOT NULL,       -- lower-case file name without .md: wikilink by name
  id TEXT NOT NULL,
  own_id INTEGER NOT NULL,
  namespace TEXT NOT NULL,
  title TEXT NOT NULL,
  names TEXT NOT NULL,          -- title and note name (file name): what the FTS names column holds
  tags TEXT NOT NULL,           -- space-separated, as the FTS column reads it
  body TEXT NOT NULL,
  created TEXT NOT NULL,
  updated TEXT NOT NULL,
  expires TEXT,
  source TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  size INTEGER NOT NULL,
  mtime_ns INTEGER NOT NULL,
  ctime_ns INTEGER NOT NULL,     -- with inode: a same-size, same-mtime rewrite (cp -p) still shows
  inode INTEGER NOT NULL,
  indexed_ns INTEGER NOT NULL,  -- when that stat was taken: a file changed within RACY_NS of it is re-hashed
  sha256 TEXT NOT NULL,
  problems TEXT,                -- JSON list of parse problems, NULL when clean
  conflict INTEGER NOT NULL,
  meta TEXT NOT NULL,           -- the front matter as JSON
  cjk TEXT NOT NULL,            -- CJK runs of title, tags and body as bigrams (query.cjk_index_text)
  dated TEXT NOT NULL,          -- the creation day as date tokens ("8may2023 may2023 8may"), for date terms
  described TEXT NOT NULL,      -- a description: property (Obsidian's), searched like the body
  kind TEXT,                    -- the type: property when it is text (the type filter, stats)
  importance REAL,              -- the importance: property when it is a finite number
  changed TEXT NOT NULL,        -- when the file last changed: the later of updated and its mtime (hand edits too)
  aliases TEXT NOT NULL,        -- the aliases that are not the title or note name, one a line (FTS column aliases)
  lang TEXT NOT NULL,           -- the language the memory is written in (recall.language), '' when unsure
  shape INTEGER NOT NULL,       -- a fact, a note a person named or a dialog turn (recall.choice.shape_of)
  headings TEXT NOT NULL        -- the body's markdown headings, one a line (FTS column headings)
);
CREATE INDEX memories_id ON memories(id, created, path);
CREATE INDEX memories_ns_updated ON memories(namespace, updated);
CREATE INDEX memories_updated ON memories(updated);
CREATE INDEX memories_rid_updated ON memories(rid, updated);  -- recall's recency of candidates
CREATE INDEX memories_expires ON memories(expires) WHERE expires IS NOT NULL;
CREATE INDEX memories_hash ON memories(content_hash, namespace);
CREATE INDEX memories_path_key ON memories(path_key);
CREATE INDEX memories_name_key ON memories(name_key);
CREATE INDEX memories_ns_created ON memories(namespace, created, path);
CREATE INDEX memories_created ON memories(created);
CREATE INDEX memories_changed ON memories(changed);  -- list --since, recent_activity
CREATE INDEX memories_lang ON memories(lang);  -- the vault's main language, without a scan
CREATE INDEX memories_shape ON memories(shape);  -- the profile chosen from what the vault holds (recall.choice)
-- What this index decided before (the profile chosen from the vault: name 'profile').
CREATE TABLE choices (name TEXT PRIMARY KEY, value TEXT NOT NULL);
-- What stats counts, each from a small index rather than a scan of every row's text.
CREATE INDEX memories_kind ON memories(kind) WHERE kind IS NOT NULL;
CREATE INDEX memories_importance ON memories(importance) WHERE importance IS NOT NULL;
CREATE INDEX memories_conflicts ON memories(path) WHERE conflict = 1;
-- What reconcile compares, as a covering index: read without touching the table's rows
-- (bodies are stored inline: at 100k memories the table is over 100 MB, this index ~10 MB).
CREATE INDEX memories_stamps ON memories(path, size, mtime_ns, ctime_ns, inode, indexed_ns);
CREATE INDEX memories_problems ON memories(path, problems) WHERE problems IS NOT NULL;
-- How many rows memories holds, kept by every insert and delete (count(*) reads an
-- index: 0.6 ms at 100k, on every partial search); row numbers have gaps after deletes.
CREATE TABLE counts (memories INTEGER NOT NULL);
INSERT INTO counts VALUES (0);
CREATE TABLE tags (tag TEXT NOT NULL, rid INTEGER NOT NULL, PRIMARY KEY (tag, rid)) WITHOUT ROWID;
CREATE INDEX tags_rid ON tags(rid);
CREATE TABLE links (src INTEGER NOT NULL, relation TEXT NOT NULL, target TEXT NOT NULL);
-- Each of a memory's names (title, note name, aliases) as a lookup key (``name_key``):
-- a question that is exactly a name finds it in one seek.
CREATE TABLE names (key TEXT NOT NULL, rid INTEGER NOT NULL, PRIMARY KEY (key, rid)) WITHOUT ROWID;
CREATE INDEX names_rid ON names(rid);
CREATE INDEX links_src ON links(src);
-- Front-matter properties for the where filter (index.properties): each key a memory
-- has, and each (key, value) pair, so a filter is one seek, not a scan of every file.
CREATE TABLE prop_keys (key TEXT NOT NULL, rid INTEGER NOT NULL, PRIMARY KEY (key, rid)) WITHOUT ROWID;
CREATE INDEX prop_keys_rid ON prop_keys(rid);
CREATE TABLE props (key TEXT NOT NULL, value TEXT NOT NULL, rid INTEGER NOT NULL,
  PRIMARY KEY (key, value, rid)) WITHOUT ROWID;
CREATE INDEX props_rid ON props(rid);
CREATE INDEX links_target ON links(target);
-- The replacements (supersedes:): recall asks on every search whether any exist, and most vaults have none.
CREATE INDEX links_supersedes ON links(src) WHERE relation = 'supersedes';
-- Dates git gives the notes that lack created/updated (author dates, renames followed),
-- as of the commit named in git_dates_state: a cache like the rest, rebuilt from git.
CREATE TABLE git_dates (path TEXT PRIMARY KEY, created TEXT, updated TEXT) WITHOUT ROWID;
CREATE TABLE git_dates_state (head TEXT NOT NULL, shallow INTEGER NOT NULL);
CREATE VIRTUAL TABLE fts USING fts5(
  names, tags, body, cjk, dated, described, aliases, headings, content='memories', content_rowid='rid', tokenize='{TOKENIZER}'
);
INSERT INTO fts(fts, rank) VALUES ('rank', 'bm25({", ".join(str(w) for w in WEIGHTS)})');
CREATE VIRTUAL TABLE words USING fts5(
  text, content='', detail=none, columnsize=0, tokenize='{VOCAB_TOKENIZER}'
);
CREATE VIRTUAL TABLE words_vocab USING fts5vocab(words, 'row');
-- Which derived tables (PROPERTIES, TAGS, VOCABULARY) are built and kept current.
CREATE TABLE derived (name TEXT PRIMARY KEY) WITHOUT ROWID;
-- A derived table's build under way (index.derived): the rows up to upto are in it and kept.
CREATE TABLE deriving (name TEXT PRIMARY KEY, upto INTEGER NOT NULL, done INTEGER NOT NULL) WITHOUT ROWID;
"""

COLUMNS = (
    "path, path_key, name_key, id, own_id, namespace, title, names, tags, body, created, updated, expires, "
    "source, content_hash, size, mtime_ns, ctime_ns, inode, indexed_ns, sha256, problems, conflict, meta, cjk, dated, "
    "described, "
    "kind, importance, changed, aliases, lang, shape, headings"
)
# The memories that have expired (from the partial index on expires): counts subtract them.
EXPIRED = "SELECT rid FROM memories WHERE expires IS NOT NULL AND expires <= ?"
log = logging.getLogger("agent_memory.index")


PROGRESS_STEPS = 10_000  # SQLite VM steps between two checks of a query's deadline
REBUILT_RETRIES = 5  # tries of a read whose derived table another process's rebuild keeps emptying


class QueryInterrupted(AgentMemoryError):
    """A read of the index ran past ``limits.MAX_QUERY_SECONDS`` and was stopped."""


class _Reader:
    """One thread's reading connection; closed when the thread's local data goes."""

    def __init__(self, epoch: int, conn: sqlite3.Connection) -> None:
        self.epoch = epoch
        self.conn = conn
        self._finalizer = weakref.finalize(self, conn.close)

    def close(self) -> None:
        self._finalizer()


class Index:
    """One SQLite file in WAL mode, shared safely by threads of one process and by
    several processes (``BEGIN IMMEDIATE`` + busy timeout; writers also hold the
    vault's file lock).

    Writes go through one connection, one transaction at a time. Reads get a connection
    per thread (WAL lets them run beside a writer and each other), so one slow recall
    never makes another client wait; inside a transaction its own thread reads through
    the writing connection, to see what it just wrote."""

    SPELLING = (VOCABULARY,)  # what a query of the typo vocabulary needs built (``query``'s needs)

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / DB_NAME
        self._lock = threading.RLock()
        self._local = threading.local()
        self._readers: weakref.WeakSet[_Reader] = weakref.WeakSet()
        self._readers_lock = threading.Lock()
        self._epoch = 0  # bumped when the file is reopened: readers of the old one are replaced
        self._writer: int | None = None  # the thread inside a transaction
        self.rebuilt_schema = False
        self.discarded_corrupt = False
        self._conn: sqlite3.Connection | None = None
        self._inode: int | None = None
        self._inserted = 0  # rows added by the open transaction (see MERGE_AFTER)
        self._merge_held = 0  # ``one_merge`` blocks open: a merge due waits for the last to end
        self._merge_due = False
        self._rebuilt: list[Callable[[], None]] = []  # told when a rebuild has committed (``on_rebuilt``)
        self._open()

    # ------------------------------------------------------------------ connection
    def _open(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        ignore_folder(self.folder)
        try:
            self._connect()
        except sqlite3.DatabaseError as exc:
            # Not a database (truncated, overwritten, a sync tool's half copy): it is
            # only a cache, so start an empty one and let the vault rebuild it.
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise
            self.close()
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            self.discarded_corrupt = True
            self._connect()

    def _connect(self) -> None:
        conn = sqlite3.connect(confine.tool_file(self.path), isolation_level=None, check_same_thread=False, timeout=30)
        self._conn = conn
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute(f"PRAGMA cache_size = {CACHE_KIB}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = OFF")
        self._inode = os.stat(self.path).st_ino
        if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            self._create_schema()
        else:
            mend_count(conn)  # its count of rows also finds a file that is no database
        conn.execute(TOOL_WRITES)

    def _create_schema(self) -> None:
        conn = self._conn
        assert conn is not None
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                # Virtual tables first: dropping one drops its shadow tables with it.
                for (name,) in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type IN ('table') AND name NOT LIKE 'sqlite_%' "
                    "ORDER BY sql NOT LIKE 'CREATE VIRTUAL TABLE%'"
                ).fetchall():
                    conn.execute(f'DROP TABLE IF EXISTS "{name}"')
                for statement in statements(SCHEMA):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                self.rebuilt_schema = True
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def ensure_current(self) -> bool:
        """Reopen if another process deleted or replaced the file; True if it did."""
        try:
            inode = os.stat(self.path).st_ino
        except FileNotFoundError:
            inode = None
        if inode == self._inode:
            return False
        with self._lock:
            self._close_writer()
            self._open()
        return True

    def _close_writer(self) -> None:
        self._epoch += 1
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        with self._readers_lock:
            readers, self._readers = list(self._readers), weakref.WeakSet()
        for reader in readers:
            reader.close()
        self._close_writer()

    def _reader(self) -> sqlite3.Connection:
        """This thread's reading connection to the current file. It is closed when its
        thread ends (the server's worker threads come and go), when the file is reopened
        (a new epoch replaces it) or when the index is closed: none leaks."""
        held: _Reader | None = getattr(self._local, "reader", None)
        if held is not None and held.epoch == self._epoch:
            return held.conn
        conn = sqlite3.connect(confine.tool_file(self.path), isolation_level=None, check_same_thread=False, timeout=30)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute(f"PRAGMA cache_size = {CACHE_KIB}")
        reader = _Reader(self._epoch, conn)
        with self._readers_lock:
            self._readers.add(reader)
        if held is not None:
            held.close()
        self._local.reader = reader
        return conn

    @property
    def conn(self) -> sqlite3.Connection:
        assert self._conn is not None, "index is closed"
        return self._conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self.conn
            conn.execute("BEGIN IMMEDIATE")
            self._writer = threading.get_ident()
            self._inserted = 0
            try:
                yield conn
                merge = merge_due(conn, self._inserted, MERGE_AFTER)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # also when COMMIT itself failed (a full disk)
                    conn.execute("ROLLBACK")
                raise
            finally:
                self._writer = None
            if merge and self._merge_held:
                self._merge_due = True
            elif merge:
                self._merge_segments(conn)

    def on_rebuilt(self, listener: Callable[[], None]) -> Callable[[], None]:
        """``listener`` called after each rebuild of this index in this process has
        committed (the background build of the derived tables, which a rebuild emptied);
        returns what stops it."""
        self._rebuilt.append(listener)
        return lambda: self._rebuilt.remove(listener)

    def rebuilt(self) -> None:
        """Tell the ``on_rebuilt`` listeners a rebuild has committed."""
        for listener in list(self._rebuilt):
            listener()

    @contextmanager
    def one_merge(self) -> Iterator[None]:
        """The transactions inside merge the full-text index once, when the block ends,
        if any of them added ``MERGE_AFTER`` rows: a reconcile folds in changed files
        2,000 a transaction, and merging after each rewrote the whole full-text index
        every time (a second or more at a million memories) for segments the next batch
        would add to again."""
        with self._lock:
            self._merge_held += 1
        try:
            yield
        finally:
            with self._lock:
                self._merge_held -= 1
                due = not self._merge_held and self._merge_due
                if due:
                    self._merge_due = False
        if due:  # not when the block failed (a full disk, Ctrl-C): unmerged is only slower
            with self._lock:
                self._merge_segments(self.conn)

    def query(self, sql: str, params: Iterable[Any] = (), warm: bool = False,
              needs: tuple[str, ...] = ()) -> list[sqlite3.Row]:
        """Run one read. Its work is bounded: past ``limits.MAX_QUERY_SECONDS`` SQLite
        interrupts it (``QueryInterrupted``) rather than hold the index for minutes.
        ``warm``: through the writing connection, for a write's own lookups under the
        vault's lock (its pages stay cached across this process's commits, where a
        reading connection loads them afresh after each one). ``needs``: the derived
        tables it reads (``needed``), found built in the read's own transaction and
        built first if not: a rebuild elsewhere between a check and the read would
        otherwise leave it reading an emptied table."""
        for _ in range(REBUILT_RETRIES):
            rows = self._read(sql, params, warm, needs)
            if rows is not None:
                return rows
            for name in needs:
                self.derive(name)
        raise VaultError("The index was rebuilt again and again while it was read; retry in a moment.")

    @staticmethod
    def needed(filters: Filters) -> tuple[str, ...]:
        """The derived tables a query within ``filters`` reads (``Filters.sql``)."""
        return (PROPERTIES,) * bool(filters.where) + (TAGS,) * bool(filters.tags)

    def _read(self, sql: str, params: Iterable[Any], warm: bool, needs: tuple[str, ...]) -> list[sqlite3.Row] | None:
        """``query``'s one try: None when a table it needs is not built as of its read."""
        seconds = limits.MAX_QUERY_SECONDS
        deadline = time.monotonic() + seconds
        stopped: list[bool] = []

        def over_time() -> bool:
            if time.monotonic() > deadline:
                stopped.append(True)
                return True  # nonzero: SQLite stops the statement with SQLITE_INTERRUPT
            return False

        writing = warm or self._writer == threading.get_ident()
        with self._lock if writing else contextlib.nullcontext():
            conn = self.conn if writing else self._reader()
            conn.set_progress_handler(over_time, PROGRESS_STEPS)
            snapshot = bool(needs) and not conn.in_transaction  # a write's own reads: in its transaction
            try:
                if snapshot:
                    conn.execute("BEGIN")
                if needs and not {row[0] for row in conn.execute("SELECT name FROM derived")}.issuperset(needs):
                    return None
                return conn.execute(sql, tuple(params)).fetchall()
            except sqlite3.OperationalError as exc:
                if stopped:
                    raise QueryInterrupted(
                        f"A search of the index ran longer than {seconds:g} s and was stopped; "
                        "narrow it (fewer or rarer words, a namespace or tag filter) and retry."
                    ) from exc
                raise
            finally:
                if snapshot and conn.in_transaction:
                    conn.execute("COMMIT")
                conn.set_progress_handler(None, 0)

    # ------------------------------------------------------------------ writes
    def upsert(self, conn: sqlite3.Connection, note: Note, facts: FileFacts) -> None:
        self.upsert_many(conn, [(note, facts)])

    def upsert_many(self, conn: sqlite3.Connection, notes: list[tuple[Note, FileFacts]]) -> None:
        """Each note's row put in place of its path's old one (which keeps its row number),
        inserted together: one statement a table for the lot, not one a note (an
        import's thousands). The same rows, numbered the same, as one ``upsert`` a note."""
        if len({note.path for note, _ in notes}) != len(notes):  # a path twice: each sees the one before
            for pair in notes:
                self.upsert_many(conn, [pair])
            return
        rows: list[tuple[int, Note, FileFacts]] = []
        next_rid: int | None = None
        built = kept(conn)
        columns = "SELECT path, rid, names, tags, body, cjk, dated, described, aliases, headings FROM memories "
        if len(notes) == 1:  # a write's one row (remember, update): no list to send as JSON
            found = conn.execute(columns + "WHERE path = ?", (notes[0][0].path,))
        else:  # one lookup for the lot
            found = conn.execute(columns + "WHERE path IN (SELECT value FROM json_each(?))",
                                 (json.dumps([note.path for note, _ in notes]),))
        olds = {row["path"]: row for row in found}
        for note, facts in notes:
            old = olds.get(note.path)
            if old is not None:
                self._delete_row(conn, old, built)
                rid = old["rid"]
            else:
                if next_rid is None:
                    next_rid = conn.execute("SELECT coalesce(max(rid), 0) + 1 FROM memories").fetchone()[0]
                rid, next_rid = next_rid, next_rid + 1
            rows.append((rid, note, facts))
        if rows:
            self._insert(conn, rows, built)
            conn.execute("UPDATE counts SET memories = memories + ?", (len(rows),))

    @contextmanager
    def roomy_cache(self) -> Iterator[None]:
        """The writing connection's page cache at ``loading.LOAD_CACHE_KIB`` while a batch of rows
        goes in, and is merged (an import's thousands): at the default 2 MB a 10,000-row
        transaction writes pages out and reads them back, three times the writes."""
        with load_cache(self.conn):
            yield

    @staticmethod
    def _merge_segments(conn: sqlite3.Connection) -> None:
        """Merge each full-text index into one segment. A bulk load leaves FTS5 with
        dozens of segments, and every term lookup seeks in each of them: at 100k memories
        searches run 1.5-2x slower (snippets 6x) until they are merged. Merging costs
        about 0.45 s at 100k, so it runs only after a transaction that added
        ``MERGE_AFTER`` rows or more (a rebuild, an import, a reconcile of that many
        changed files: reconciling 1% of a 100k vault left 17 segments and searches 25%
        slower), or a share of the index's rows (``loading.merge_due``), which spent
        longer than that already; FTS5's own automerge keeps small writes in check."""
        # Its own transaction, after the rows are committed: merging needs room for a
        # copy of the full-text index, and a full disk must not undo the load itself.
        try:
            conn.execute("BEGIN IMMEDIATE")
            for table in ("fts", "words"):
                conn.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
            conn.execute("COMMIT")
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")  # unmerged is only slower

    def _insert(self, conn: sqlite3.Connection, rows: list[tuple[int, Note, FileFacts]],
                built: dict[str, int] | None = None, names_to: str = "names", into: str = "") -> None:
        """Insert rows (numbers given, counted by the caller) into memories, the full-text
        index, the lookup tables (names into ``names_to``: a load's ``sorted_in``) and each
        derived table ``built`` names, up to its mark (None: as the index says now, ``derived.kept``);
        ``into``: the suffix of the tables a fresh load fills (``loading.fresh_load``)."""
        built = kept(conn) if built is None else built
        self._inserted += len(rows)
        searched = []
        for rid, note, _ in rows:
            body = indexed_body(note.body)
            names, aliases = split_names(note)
            every = joined(names, aliases)
            searched.append((
                rid, names, " ".join(note.tags), body,
                cjk_index_text("" if every in body else every, *note.tags, body),
                date_words(note.created),
                description(note),
                aliases,
                headings_of(body),
            ))
        conn.executemany(
            f"INSERT INTO memories{into} (rid, {COLUMNS}) VALUES ({', '.join('?' * (COLUMNS.count(',') + 2))})",
            [row_values(rid, note, facts, fields[1], *fields[3:]) for (rid, note, facts), fields in zip(rows, searched)],
        )
        conn.executemany(f"INSERT INTO fts{into} (rowid, names, tags, body, cjk, dated, described, aliases, headings) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", searched)
        if VOCABULARY in built:
            insert_words(conn, [(f[0], f[1], f[7], f[2], f[3]) for f in searched if f[0] <= built[VOCABULARY]])
        conn.executemany(
            f"INSERT OR IGNORE INTO {names_to} (key, rid) VALUES (?, ?)",
            [(name_key(name), f[0]) for f in searched for name in joined(f[1], f[7]).split("\n") if name],
        )
        if TAGS in built:
            insert_tags(conn, [(rid, note.tags) for rid, note, _ in rows if rid <= built[TAGS]])
        conn.executemany(
            f"INSERT INTO links{into} (src, relation, target) VALUES (?, ?, ?)",
            [(rid, rel, link_key(target)) for rid, note, _ in rows for rel, target in note.links],
        )
        if PROPERTIES in built:
            insert_properties(conn, [(rid, note.meta, note.tags) for rid, note, _ in rows if rid <= built[PROPERTIES]])

    @staticmethod
    def _delete_row(conn: sqlite3.Connection, old: sqlite3.Row, built: dict[str, int]) -> None:
        conn.execute(
            "INSERT INTO fts (fts, rowid, names, tags, body, cjk, dated, described, aliases, headings) "
            "VALUES ('delete', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (old["rid"], old["names"], old["tags"], old["body"], old["cjk"], old["dated"], old["described"],
             old["aliases"], old["headings"]),
        )
        if old["rid"] <= built.get(VOCABULARY, 0):  # a contentless table's 'delete' must name text it holds
            conn.execute(
                "INSERT INTO words (words, rowid, text) VALUES ('delete', ?, ?)",
                (old["rid"], words_text(joined(old["names"], old["aliases"]), old["tags"], old["body"])),
            )
        conn.execute("DELETE FROM memories WHERE rid = ?", (old["rid"],))
        conn.execute("UPDATE counts SET memories = memories - 1")
        conn.execute("DELETE FROM tags WHERE rid = ?", (old["rid"],))
        conn.execute("DELETE FROM names WHERE rid = ?", (old["rid"],))
        conn.execute("DELETE FROM links WHERE src = ?", (old["rid"],))
        conn.execute("DELETE FROM prop_keys WHERE rid = ?", (old["rid"],))
        conn.execute("DELETE FROM props WHERE rid = ?", (old["rid"],))

    def delete(self, conn: sqlite3.Connection, path: str) -> bool:
        old = conn.execute("SELECT rid, names, tags, body, cjk, dated, described, aliases, headings FROM memories WHERE path = ?", (path,)).fetchone()
        if old is None:
            return False
        self._delete_row(conn, old, kept(conn))
        return True

    def touch(self, conn: sqlite3.Connection, path: str, facts: FileFacts) -> None:
        """Same bytes, new stat (a ``touch`` or a checkout), or a racy row found unchanged:
        remember the stat only, and when it was taken (and the change time it gives, as a
        rebuild would read it)."""
        conn.execute(
            "UPDATE memories SET size = ?, mtime_ns = ?, ctime_ns = ?, inode = ?, indexed_ns = ?, "
            "changed = max(updated, ?) WHERE path = ?",
            (*facts.stamp, facts.seen_ns, changed_at(None, facts.mtime_ns), path),
        )

    def replace_all(self, conn: sqlite3.Connection, notes: Iterable[tuple[Note, FileFacts]], batch: int = 2000) -> int:
        """Empty the index and bulk-load ``notes`` (inside the caller's transaction)."""
        drop_fresh(conn)  # what a killed fresh load left (``load_fresh``)
        conn.execute("INSERT INTO fts (fts) VALUES ('delete-all')")
        conn.execute("INSERT INTO words (words) VALUES ('delete-all')")
        for table in ("memories", "tags", "links", "names", "prop_keys", "props", "derived", "deriving"):
            conn.execute(f"DELETE FROM {table}")
        # Counted once, after the rows: an UPDATE a batch made FTS5 write out its postings (a savepoint).
        with bulk_load(conn, index_statements(SCHEMA)) as load, sorted_in(conn, "names", "key, rid") as names:
            count, pending = 0, []
            for count, (note, facts) in enumerate(notes, 1):
                pending.append((count, note, facts))
                if len(pending) >= batch:
                    load.paths([row[1].path for row in pending])
                    self._insert(conn, pending, {}, names)
                    pending = []
            load.paths([row[1].path for row in pending])
            self._insert(conn, pending, {}, names)
        conn.execute("UPDATE counts SET memories = ?", (count,))
        return count

    def load_fresh(self, notes: Iterable[tuple[Note, FileFacts]], batch: int = 2000) -> int:
        """``replace_all`` for an index that holds no rows, in transactions of its own
        (``loading.fresh_load``): the caller holds the vault's lock, and no transaction."""
        with self._lock:
            self._writer = threading.get_ident()
            try:
                count = fresh_load(self.conn, SCHEMA, notes, self._insert, batch)
            finally:
                self._writer = None
            self._merge_segments(self.conn)
        return count

    def derive(self, name: str, progress: Progress | None = None, stop: threading.Event | None = None) -> bool:
        """Build the derived table ``name`` (``derived.DERIVED``) from the memories rows
        if it is not built yet: what a reader calls before a query that reads it. A chunk
        a write transaction (``derived.build_chunk``), under no vault lock: it reads only
        the index's own rows, SQLite serialises each chunk with every writer of this file,
        in any process, and a builder elsewhere (the background one) shares the work.
        ``progress`` hears the rows done (``derived.PHASES``). ``stop`` (a background
        build's) ends it between chunks once set (False: not built yet), and between two
        chunks it pauses as long as the last took, so writers of this process and others
        (whose busy wait polls) get in. A failure (a full disk) leaves it unbuilt, its
        chunks kept, to be finished by the next try, and says so."""
        if name not in DERIVED:
            raise ValueError(f"no derived table {name!r}")
        if self.query("SELECT 1 FROM derived WHERE name = ?", (name,)):
            return True
        built = False
        try:
            while not built and not (stop is not None and stop.is_set()):
                began = time.monotonic()
                if self._writer == threading.get_ident():  # inside this thread's own write
                    built, done, total = build_chunk(self.conn, name)
                else:
                    with self.transaction() as conn:
                        built, done, total = build_chunk(conn, name)
                if progress is not None:
                    progress(Step(PHASES[name], done, total))
                if stop is not None and not built:
                    stop.wait(time.monotonic() - began)
            if built and name == VOCABULARY and self._writer != threading.get_ident():
                self._merge_words(stop)
            return built
        except sqlite3.Error as exc:
            raise VaultError(f"The index could not build its {name} table ({exc}); nothing is lost. "
                             "Free some disk space and retry, or run `agent-memory reindex`.") from exc

    def _merge_words(self, stop: threading.Event | None) -> None:
        """The typo vocabulary's segments merged into one after its build, a step a write
        transaction (``derived.merge_step``); a background build pauses between steps.
        A failure (a full disk: merging needs room for a copy) leaves it unmerged, only slower."""
        more = True
        while more and not (stop is not None and stop.is_set()):
            began = time.monotonic()
            try:
                with self.transaction() as conn:
                    more = merge_step(conn)
            except sqlite3.Error as exc:
                log.debug("the typo vocabulary's segments were left unmerged: %s", exc)
                return
            if stop is not None:
                stop.wait(time.monotonic() - began)

    def filtering(self, filters: Filters, progress: Progress | None = None) -> None:
        """Make ready what a query within ``filters`` reads (``derive``): the property
        rows for a where filter, the tag rows for a tag filter."""
        if filters.where:
            self.derive(PROPERTIES, progress)
        if filters.tags:
            self.tagging(progress)

    def tagging(self, progress: Progress | None = None) -> None:
        """Make ready what a tag filter or a count of tags (``stats``) reads (``derive``)."""
        self.derive(TAGS, progress)

    def spelling(self, progress: Progress | None = None) -> None:
        """Make ready what a query of the typo vocabulary reads (``derive``)."""
        self.derive(VOCABULARY, progress)

    # ------------------------------------------------------------------ git's dates
    def git_dates_state(self) -> tuple[str, bool] | None:
        """The commit the git dates were computed up to, and whether the clone was
        shallow then; None before the first pass."""
        rows = self.query("SELECT head, shallow FROM git_dates_state LIMIT 1")
        return (str(rows[0]["head"]), bool(rows[0]["shallow"])) if rows else None

    def git_date(self, path: str) -> tuple[str | None, str | None] | None:
        """(created, updated) git gives ``path``, either None where git cannot say."""
        rows = self.query("SELECT created, updated FROM git_dates WHERE path = ?", (path,))
        return (rows[0]["created"], rows[0]["updated"]) if rows else None

    def save_git_dates(self, conn: sqlite3.Connection, dates: dict[str, tuple[str | None, str | None] | None],
                       head: str, shallow: bool, *, whole: bool) -> None:
        """Store a pass's dates (None: the path is gone) as of ``head``; ``whole``: they
        replace every date stored before."""
        if whole:
            conn.execute("DELETE FROM git_dates")
        for path, found in dates.items():
            if found is None:
                conn.execute("DELETE FROM git_dates WHERE path = ?", (path,))
            else:
                conn.execute("INSERT OR REPLACE INTO git_dates VALUES (?, ?, ?)", (path, *found))
        conn.execute("DELETE FROM git_dates_state")
        conn.execute("INSERT INTO git_dates_state VALUES (?, ?)", (head, int(shallow)))

    def undated(self, paths: Iterable[str]) -> list[str]:
        """Of ``paths``, the indexed ones whose file lacks ``created`` or ``updated``."""
        found: list[str] = []
        wanted = list(paths)
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            marks = ",".join("?" * len(chunk))
            found += [row["path"] for row in self.query(
                f"SELECT path FROM memories WHERE path IN ({marks}) AND "
                "(json_type(meta, '$.created') IS NULL OR json_type(meta, '$.updated') IS NULL)", chunk)]
        return found

    # ------------------------------------------------------------------ reads
    def stamps(self, page: int = STAMPS_PAGE) -> Iterator[tuple[str, bytes]]:
        """Every indexed path with the stat reconcile compares, packed
        (``facts.packed_stamp``), in path order (SQLite's, byte by byte: the order of
        ``Store.walk``), read from the covering index alone, ``page`` rows at a time:
        reconcile compares them with the walk as it goes, so what it holds does not grow
        with the vault. Each page is a query of its own (keyed on the last path), so no
        read transaction stays open for the length of a walk."""
        after: str | None = None
        while True:
            cursor = self._reader().cursor()
            cursor.row_factory = None
            # The planner reads the covering index memories_stamps in order for this (no
            # INDEXED BY: an index another version of the tool rebuilt without it must
            # still be readable).
            if after is None:
                cursor.execute("SELECT path, size, mtime_ns, ctime_ns, inode, indexed_ns FROM memories "
                               "ORDER BY path LIMIT ?", (page,))
            else:
                cursor.execute("SELECT path, size, mtime_ns, ctime_ns, inode, indexed_ns FROM memories "
                               "WHERE path > ? ORDER BY path LIMIT ?", (after, page))
            rows = cursor.fetchall()
            # A racy row (``racy``) gets a stamp no file has: the comparison hands it back to be hashed.
            for path, size, mtime, ctime, inode, indexed in rows:
                yield path, (b"racy" if mtime % 1_000_000_000 == 0 and racy(mtime, ctime, indexed)
                             else packed_stamp(size, mtime, ctime, inode))
            if len(rows) < page:
                return
            after = rows[-1][0]

    def any_memory(self) -> bool:
        """Whether the index holds a row at all."""
        return bool(self.query("SELECT 1 FROM memories LIMIT 1"))

    def file_facts(self) -> dict[str, FileFacts]:
        return {
            row["path"]: FileFacts.of_row(row)
            for row in self.query("SELECT path, size, mtime_ns, ctime_ns, inode, indexed_ns, sha256 FROM memories")
        }

    def paths_under(self, folder: str) -> list[str]:
        """Indexed paths inside ``folder`` (vault-relative): what a moved or deleted
        folder takes with it, since no per-file event may come for them."""
        base = folder.rstrip("/")
        # "base/" <= path < "base0" ('0' follows '/'): a range scan on the path index.
        rows = self.query("SELECT path FROM memories WHERE path >= ? AND path < ?", (base + "/", base + "0"))
        return [row["path"] for row in rows]

    def holdings(self) -> Holdings:
        """How many memories of each kind the index holds (``recall.choice``)."""
        counts: dict[int, int] = {row[0]: row[1] for row in self.query("SELECT shape, count(*) FROM memories GROUP BY shape")}
        return Holdings(facts=counts.get(0, 0), notes=counts.get(1, 0), turns=counts.get(2, 0))

    def recorded(self, name: str) -> str | None:
        rows = self.query("SELECT value FROM choices WHERE name = ?", (name,))
        return str(rows[0][0]) if rows else None

    def record(self, name: str, value: str) -> None:
        """Remember a decision (``choices``); a read-only index simply does not."""
        try:
            with self.transaction() as conn:
                conn.execute("INSERT OR REPLACE INTO choices (name, value) VALUES (?, ?)", (name, value))
        except sqlite3.Error as exc:
            log.debug("could not record %s in the index: %s", name, exc)

    def named(self, key: str) -> builtins.list[int]:
        """The memories one of whose names has this ``name_key``."""
        return [row[0] for row in self.query("SELECT rid FROM names WHERE key = ?", (key,))]

    @staticmethod
    def note_tool_write(conn: sqlite3.Connection, path: str, sha256: str) -> None:
        """Remember ``sha256`` as the last bytes the tool itself wrote to ``path``."""
        conn.execute("INSERT OR REPLACE INTO tool_writes (path, sha256) VALUES (?, ?)", (path, sha256))

    def last_tool_write(self, path: str) -> str | None:
        """The sha256 of the last bytes the tool wrote to ``path`` (None: none known)."""
        rows = self.query("SELECT sha256 FROM tool_writes WHERE path = ?", (path,))
        return str(rows[0][0]) if rows else None

    def by_path(self, path: str) -> sqlite3.Row | None:
        rows = self.query("SELECT * FROM memories WHERE path = ?", (path,))
        return rows[0] if rows else None

    def by_id(self, memory_id: str, now: str) -> sqlite3.Row | None:
        """The owner of an id: earliest ``created``, then smallest path (same on every
        machine), among the copies that have not expired."""
        rows = self.query(
            "SELECT * FROM memories WHERE id = ? AND (expires IS NULL OR expires > ?) ORDER BY created, path LIMIT 1",
            (memory_id, now),
        )
        return rows[0] if rows else None

    def find_content(self, namespace: str, content_hash: str, now: str, exclude_path: str = "") -> sqlite3.Row | None:
        """The memory holding this content in the namespace (dedup: asked by writes, under
        the vault's lock, so through the writing connection). By the hash's index: unguided,
        SQLite walks the whole namespace in created order (to skip the sort) instead."""
        rows = self.query(
            "SELECT * FROM memories INDEXED BY memories_hash WHERE content_hash = ? AND namespace = ? AND path != ? "
            "AND (expires IS NULL OR expires > ?) ORDER BY created, path LIMIT 1",
            (content_hash, namespace, exclude_path, now), warm=True,
        )
        return rows[0] if rows else None

    def live_contents(self, pairs: list[tuple[str, str]], now: str) -> set[tuple[str, str]]:
        """Which (namespace, content hash) pairs a live memory holds: ``find_content`` for
        a whole batch (an import's) in one query, each seeking by the hash's index."""
        rows = self.query(
            "SELECT DISTINCT m.namespace, m.content_hash FROM json_each(?) AS j JOIN memories AS m INDEXED BY "
            "memories_hash ON m.content_hash = json_extract(j.value, '$[1]') AND m.namespace = "
            "json_extract(j.value, '$[0]') WHERE m.expires IS NULL OR m.expires > ?",
            (json.dumps(sorted(set(pairs))), now), warm=True,
        )
        return {(row[0], row[1]) for row in rows}

    def live_ids(self, ids: list[str], now: str) -> set[str]:
        """Which of ``ids`` a live memory has: ``by_id`` for a whole batch in one query."""
        rows = self.query(
            "SELECT DISTINCT m.id FROM json_each(?) AS j JOIN memories AS m ON m.id = j.value "
            "WHERE m.expires IS NULL OR m.expires > ?", (json.dumps(sorted(set(ids))), now), warm=True,
        )
        return {row[0] for row in rows}

    def expired(self, now: str) -> list[sqlite3.Row]:
        return self.query("SELECT path, id FROM memories WHERE expires IS NOT NULL AND expires <= ?", (now,))

    def list(self, filters: Filters, now: str, limit: int, offset: int = 0, by: str = "updated") -> list[sqlite3.Row]:
        """Live memories within the filters, newest first by ``updated`` or ``changed``."""
        where, params = filters.sql()
        order = "m.changed DESC" if by == "changed" else "m.updated DESC"
        return self.query(
            f"SELECT * FROM memories m WHERE (m.expires IS NULL OR m.expires > ?){where} "
            f"ORDER BY {order}, m.path LIMIT ? OFFSET ?",
            [now, *params, limit, offset], needs=self.needed(filters),
        )

    def count(self, filters: Filters, now: str) -> int:
        where, params = filters.sql()
        return int(self.query(
            f"SELECT count(*) FROM memories m WHERE (m.expires IS NULL OR m.expires > ?){where}", [now, *params],
            needs=self.needed(filters),
        )[0][0])

    # ------------------------------------------------------------------ vault health
    def namespace_counts(self, now: str) -> dict[str, int]:
        rows = self.query(
            f"SELECT namespace, count(*) FROM memories INDEXED BY memories_ns_updated WHERE rid NOT IN ({EXPIRED}) "
            "GROUP BY namespace ORDER BY 2 DESC, 1",
            (now,),
        )
        return {row[0]: row[1] for row in rows}

    def top_tags(self, now: str, limit: int = 20) -> dict[str, int]:
        rows = self.query(
            f"SELECT tag, count(*) FROM tags WHERE rid NOT IN ({EXPIRED}) GROUP BY tag ORDER BY 2 DESC, 1 LIMIT ?",
            (now, limit), needs=(TAGS,),
        )
        return {row[0]: row[1] for row in rows}

    def type_counts(self, now: str) -> dict[str, int]:
        """Live memories per front-matter ``type`` (text), as written; most first."""
        rows = self.query(
            f"SELECT kind, count(*) FROM memories WHERE kind IS NOT NULL AND rid NOT IN ({EXPIRED}) "
            "GROUP BY 1 ORDER BY 2 DESC, 1",
            (now,),
        )
        return {row[0]: row[1] for row in rows}

    def average_importance(self, now: str) -> float | None:
        """The mean numeric ``importance`` of the live memories that have one."""
        value = self.query(
            f"SELECT avg(importance) FROM memories WHERE importance IS NOT NULL AND rid NOT IN ({EXPIRED})", (now,),
        )[0][0]
        return None if value is None else round(value, 2)

    def relation_counts(self, now: str) -> dict[str, int]:
        """Links held by live memories, per relation name; most first."""
        rows = self.query(
            f"SELECT relation, count(*) FROM links WHERE src NOT IN ({EXPIRED}) GROUP BY 1 ORDER BY 2 DESC, 1",
            (now,),
        )
        return {row[0]: row[1] for row in rows}

    def created_range(self, now: str) -> tuple[str | None, str | None]:
        """The earliest and latest ``created`` among the live memories (each from one end
        of the index on ``created``)."""
        live = "WHERE expires IS NULL OR expires > ? ORDER BY created"
        first = self.query(f"SELECT created FROM memories INDEXED BY memories_created {live} LIMIT 1", (now,))
        last = self.query(f"SELECT created FROM memories INDEXED BY memories_created {live} DESC LIMIT 1", (now,))
        return (first[0][0] if first else None), (last[0][0] if last else None)

    def ttl_count(self, now: str) -> int:
        return int(self.query("SELECT count(*) FROM memories WHERE expires > ?", (now,))[0][0])

    def problem_files(self) -> builtins.list[dict[str, str]]:
        return [
            {"path": row["path"], "problem": "; ".join(json.loads(row["problems"]))}
            for row in self.query("SELECT path, problems FROM memories WHERE problems IS NOT NULL ORDER BY path")
        ]

    def conflict_paths(self) -> builtins.list[str]:
        return [row[0] for row in self.query("SELECT path FROM memories INDEXED BY memories_conflicts "
                                             "WHERE conflict = 1 ORDER BY path")]

    def duplicate_ids(self) -> dict[str, builtins.list[str]]:
        """Ids claimed by several files; the owner (earliest created, smallest path) first."""
        rows = self.query(
            "SELECT id, path FROM memories WHERE id IN "
            "(SELECT id FROM memories GROUP BY id HAVING count(*) > 1) ORDER BY id, created, path"
        )
        found: dict[str, list[str]] = {}
        for row in rows:
            found.setdefault(row[0], []).append(row[1])
        return found

    def live_rows(self, now: str, namespace: str | None = None, limit: int = -1, offset: int = 0) -> builtins.list[sqlite3.Row]:
        """Memories that have not expired, by path (the export order), paged."""
        where, params = Filters(namespace=namespace).sql()
        return self.query(
            f"SELECT * FROM memories m WHERE (m.expires IS NULL OR m.expires > ?){where} ORDER BY m.path LIMIT ? OFFSET ?",
            [now, *params, limit, offset],
        )

    def size_bytes(self) -> int:
        return sum(
            p.stat().st_size for p in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")) if p.exists()
        )
