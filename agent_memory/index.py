"""The SQLite cache of the vault: schema, writes, and search SQL built apart from running it.

It only ever holds what can be derived from the files again, so a schema change simply
drops and rebuilds it. FTS5 is an external-content table written explicitly in the same
transaction as its row (per-row triggers are 3-5x slower on bulk loads).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import heapq
import itertools
import json
import math
import os
import sqlite3
import threading
import weakref
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import limits
from .errors import MemoryError_
from .note import Note
from .query import Term, all_expr, any_expr, cjk_index_text, date_tokens, highlight

SCHEMA_VERSION = 3
DB_NAME = "index.sqlite3"
# BM25 column weights (title, tags, body, cjk, dated): title and tags count above the
# body; the CJK bigrams and the creation date count like body text.
WEIGHTS = (10.0, 5.0, 1.0, 1.0, 1.0)
TOKENIZER = "porter unicode61 remove_diacritics 2"
# The vocabulary typos are corrected against: words as written, not porter stems.
VOCAB_TOKENIZER = "unicode61 remove_diacritics 2"

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
  tags TEXT NOT NULL,           -- space-separated, as the FTS column reads it
  body TEXT NOT NULL,
  created TEXT NOT NULL,
  updated TEXT NOT NULL,
  expires TEXT,
  source TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  size INTEGER NOT NULL,
  mtime_ns INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  problems TEXT,                -- JSON list of parse problems, NULL when clean
  conflict INTEGER NOT NULL,
  meta TEXT NOT NULL,           -- the front matter as JSON
  cjk TEXT NOT NULL,            -- CJK runs of title, tags and body as bigrams (query.cjk_index_text)
  dated TEXT NOT NULL           -- the creation day as date tokens ("8may2023 may2023 8may"), for date terms
);
CREATE INDEX memories_id ON memories(id, created, path);
CREATE INDEX memories_ns_updated ON memories(namespace, updated);
CREATE INDEX memories_updated ON memories(updated);
CREATE INDEX memories_expires ON memories(expires) WHERE expires IS NOT NULL;
CREATE INDEX memories_hash ON memories(content_hash, namespace);
CREATE INDEX memories_path_key ON memories(path_key);
CREATE INDEX memories_name_key ON memories(name_key);
CREATE INDEX memories_ns_created ON memories(namespace, created, path);
CREATE TABLE tags (tag TEXT NOT NULL, rid INTEGER NOT NULL, PRIMARY KEY (tag, rid)) WITHOUT ROWID;
CREATE INDEX tags_rid ON tags(rid);
CREATE TABLE links (src INTEGER NOT NULL, relation TEXT NOT NULL, target TEXT NOT NULL);
CREATE INDEX links_src ON links(src);
CREATE INDEX links_target ON links(target);
CREATE VIRTUAL TABLE fts USING fts5(
  title, tags, body, cjk, dated, content='memories', content_rowid='rid', tokenize='{TOKENIZER}'
);
INSERT INTO fts(fts, rank) VALUES ('rank', 'bm25({", ".join(str(w) for w in WEIGHTS)})');
CREATE VIRTUAL TABLE words USING fts5(
  text, content='', detail=none, columnsize=0, tokenize='{VOCAB_TOKENIZER}'
);
CREATE VIRTUAL TABLE words_vocab USING fts5vocab(words, 'row');
"""

COLUMNS = (
    "path, path_key, name_key, id, own_id, namespace, title, tags, body, created, updated, expires, "
    "source, content_hash, size, mtime_ns, sha256, problems, conflict, meta, cjk, dated"
)
_MONTHS = "January February March April May June July August September October November December".split()


# Ranking knobs (measured on LoCoMo conversations 1-5, see benchmarks/README.md).
COMMON_DF = 2000  # a term in more memories than this is only looked up among candidates
COMBINATION_QUERIES = 6  # FTS AND queries looking for memories with several common terms
COMMON_POOL = 200  # candidates when every term is common: the newest memories matching any
CONTEXT_SOURCES = 30  # the best candidates whose neighbours are lifted
CONTEXT_WINDOW = dt.timedelta(minutes=30)  # how far apart neighbours may be written
CONTEXT_SHARES = {1: 0.5, -1: 0.4, 2: 0.3, -2: 0.2}  # position after (+) / before (-) the source
QUESTION_BOOST = 2.0  # a source asking a question lifts what follows it this much more
QUESTION_WEIGHT = 0.8  # what a memory asking a question counts for itself
QUESTION_CHECKED = 100  # the best candidates checked for a question mark
PREFIX_EXPANSIONS = 30  # most longer words one prefix stands for
VOCAB_CANDIDATES = 300  # most vocabulary words compared with a typo
# FTS5's snippet() scores every window against every match: quadratic in the matches of
# a row (a 256 KB body of common words took 20 s). Bodies longer than this many
# characters get a window picked in one pass over highlight()'s output instead.
SNIPPET_SCORED_BODY = 4096
SNIPPET_TOKENS = 16  # words in a snippet
PROGRESS_STEPS = 10_000  # SQLite VM steps between two checks of a query's deadline
_MARK_OPEN, _MARK_CLOSE = "\x02", "\x03"  # highlight()'s markers: char(2), char(3)


class QueryInterrupted(MemoryError_):
    """A read of the index ran past ``limits.MAX_QUERY_SECONDS`` and was stopped."""


def indexed_body(body: str) -> str:
    """The part of a body the index holds: at most ``limits.MAX_INDEXED_BODY`` bytes of
    UTF-8, cut before a whole character and, where one is near, after a whole word."""
    limit = limits.MAX_INDEXED_BODY
    if len(body) <= limit // 4:  # at most 4 bytes a character: fits without encoding
        return body
    head = body[:limit]
    data = head.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return head
    head = data[:limit].decode("utf-8", "ignore")
    for end in range(len(head) - 1, max(len(head) - 200, 0), -1):
        if head[end].isspace():
            return head[: end + 1]
    return head


@dataclass(frozen=True)
class TermMatch:
    """A term's document frequency in the whole index (estimated when common), and the
    memories within the filters it matches (None when common: too many to read)."""

    term: Term
    df: float
    rids: set[int] | None


def _idf(n: float, population: int) -> float:
    """BM25's IDF of a term in ``n`` of ``population`` memories."""
    return math.log(1 + (population - n + 0.5) / (n + 0.5))


def link_key(target: str) -> str:
    """How a wikilink target or a path is compared: case-insensitive, no ``.md``."""
    key = target.strip().replace("\\", "/").lstrip("/").casefold()
    return key[:-3] if key.endswith(".md") else key


@dataclass(frozen=True)
class FileFacts:
    """What reconcile compares to decide whether a file needs re-reading."""

    size: int
    mtime_ns: int
    sha256: str


@dataclass(frozen=True)
class Filters:
    """Search and list filters; all applied inside SQL, before any LIMIT."""

    namespace: str | None = None
    tags: tuple[str, ...] = ()
    since: str | None = None  # created >= since (canonical UTC)
    until: str | None = None  # created < until
    path_prefix: str | None = None

    def sql(self, alias: str = "m") -> tuple[str, list[Any]]:
        clauses, params = [], []
        if self.namespace:
            clauses.append(f"{alias}.namespace = ?")
            params.append(self.namespace)
        for tag in self.tags:
            clauses.append(f"EXISTS (SELECT 1 FROM tags t WHERE t.tag = ? AND t.rid = {alias}.rid)")
            params.append(tag)
        if self.since:
            clauses.append(f"{alias}.created >= ?")
            params.append(self.since)
        if self.until:
            clauses.append(f"{alias}.created < ?")
            params.append(self.until)
        if self.path_prefix:
            clauses.append(f"substr({alias}.path, 1, ?) = ?")
            params.extend([len(self.path_prefix), self.path_prefix])
        return "".join(" AND " + c for c in clauses), params


def _row_values(rid: int, note: Note, facts: FileFacts, body: str, cjk: str, dated: str) -> tuple[Any, ...]:
    return (
        rid,
        note.path,
        link_key(note.path),
        link_key(note.path.rsplit("/", 1)[-1]),
        note.id,
        int(note.own_id),
        note.namespace,
        note.title,
        " ".join(note.tags),
        body,  # the indexed prefix (indexed_body): FTS5 reads its text from this column
        note.created,
        note.updated,
        note.expires,
        note.source,
        note.content_hash,
        facts.size,
        facts.mtime_ns,
        facts.sha256,
        json.dumps(note.problems, ensure_ascii=False) if note.problems else None,
        int(note.conflict),
        json.dumps(note.meta, ensure_ascii=False, default=str),
        cjk,
        dated,
    )


def date_words(created: str | None) -> str:
    """``2023-05-08T13:56:00Z`` -> ``8may2023 may2023 8may``: the ways a question names
    that day, spelled so only a date term matches them (``query.date_tokens``)."""
    try:
        year, month, day = int(created[:4]), int(created[5:7]), int(created[8:10])  # type: ignore[index]
        name = _MONTHS[month - 1].lower()
    except (TypeError, ValueError, IndexError):
        return ""
    return " ".join((date_tokens(day, name, year), date_tokens(None, name, year), date_tokens(day, name, None)))


def _words_text(title: str, tags: str, body: str) -> str:
    """What the vocabulary table reads for one memory (the same at insert and delete)."""
    return f"{title}\n{tags}\n{body}"


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
        self._open()

    # ------------------------------------------------------------------ connection
    def _open(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
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
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        self._conn = conn
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = OFF")
        self._inode = os.stat(self.path).st_ino
        if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            self._create_schema()
        else:
            conn.execute("SELECT count(*) FROM memories").fetchone()

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
                for statement in _statements(SCHEMA):
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
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA busy_timeout = 30000")
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
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # also when COMMIT itself failed (a full disk)
                    conn.execute("ROLLBACK")
                raise
            finally:
                self._writer = None

    def query(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        """Run one read. Its work is bounded: past ``limits.MAX_QUERY_SECONDS`` SQLite
        interrupts it (``QueryInterrupted``) rather than hold the index for minutes."""
        seconds = limits.MAX_QUERY_SECONDS
        deadline = time.monotonic() + seconds
        stopped: list[bool] = []

        def over_time() -> bool:
            if time.monotonic() > deadline:
                stopped.append(True)
                return True  # nonzero: SQLite stops the statement with SQLITE_INTERRUPT
            return False

        writing = self._writer == threading.get_ident()
        with self._lock if writing else contextlib.nullcontext():
            conn = self.conn if writing else self._reader()
            conn.set_progress_handler(over_time, PROGRESS_STEPS)
            try:
                return conn.execute(sql, tuple(params)).fetchall()
            except sqlite3.OperationalError as exc:
                if stopped:
                    raise QueryInterrupted(
                        f"A search of the index ran longer than {seconds:g} s and was stopped; "
                        "narrow it (fewer or rarer words, a namespace or tag filter) and retry."
                    ) from exc
                raise
            finally:
                conn.set_progress_handler(None, 0)

    # ------------------------------------------------------------------ writes
    def upsert(self, conn: sqlite3.Connection, note: Note, facts: FileFacts) -> None:
        old = conn.execute("SELECT rid, title, tags, body, cjk, dated FROM memories WHERE path = ?", (note.path,)).fetchone()
        if old is not None:
            self._delete_row(conn, old)
            rid = old["rid"]
        else:
            rid = conn.execute("SELECT coalesce(max(rid), 0) + 1 FROM memories").fetchone()[0]
        self._insert(conn, [(rid, note, facts)])

    def _insert(self, conn: sqlite3.Connection, rows: list[tuple[int, Note, FileFacts]]) -> None:
        searched = []
        for rid, note, _ in rows:
            body = indexed_body(note.body)
            searched.append((
                rid, note.title, " ".join(note.tags), body,
                cjk_index_text("" if note.title in body else note.title, *note.tags, body),
                date_words(note.created),
            ))
        conn.executemany(
            f"INSERT INTO memories (rid, {COLUMNS}) VALUES ({', '.join('?' * 23)})",
            [_row_values(rid, note, facts, *fields[3:]) for (rid, note, facts), fields in zip(rows, searched)],
        )
        conn.executemany("INSERT INTO fts (rowid, title, tags, body, cjk, dated) VALUES (?, ?, ?, ?, ?, ?)", searched)
        conn.executemany(
            "INSERT INTO words (rowid, text) VALUES (?, ?)", [(f[0], _words_text(*f[1:4])) for f in searched]
        )
        conn.executemany(
            "INSERT OR IGNORE INTO tags (tag, rid) VALUES (?, ?)",
            [(tag, rid) for rid, note, _ in rows for tag in note.tags],
        )
        conn.executemany(
            "INSERT INTO links (src, relation, target) VALUES (?, ?, ?)",
            [(rid, rel, link_key(target)) for rid, note, _ in rows for rel, target in note.links],
        )

    @staticmethod
    def _delete_row(conn: sqlite3.Connection, old: sqlite3.Row) -> None:
        conn.execute(
            "INSERT INTO fts (fts, rowid, title, tags, body, cjk, dated) VALUES ('delete', ?, ?, ?, ?, ?, ?)",
            (old["rid"], old["title"], old["tags"], old["body"], old["cjk"], old["dated"]),
        )
        conn.execute(
            "INSERT INTO words (words, rowid, text) VALUES ('delete', ?, ?)",
            (old["rid"], _words_text(old["title"], old["tags"], old["body"])),
        )
        conn.execute("DELETE FROM memories WHERE rid = ?", (old["rid"],))
        conn.execute("DELETE FROM tags WHERE rid = ?", (old["rid"],))
        conn.execute("DELETE FROM links WHERE src = ?", (old["rid"],))

    def delete(self, conn: sqlite3.Connection, path: str) -> bool:
        old = conn.execute("SELECT rid, title, tags, body, cjk, dated FROM memories WHERE path = ?", (path,)).fetchone()
        if old is None:
            return False
        self._delete_row(conn, old)
        return True

    def touch(self, conn: sqlite3.Connection, path: str, facts: FileFacts) -> None:
        """Same bytes, new stat (a ``touch`` or a checkout): remember the new stat only."""
        conn.execute(
            "UPDATE memories SET size = ?, mtime_ns = ? WHERE path = ?", (facts.size, facts.mtime_ns, path)
        )

    def replace_all(self, conn: sqlite3.Connection, notes: Iterable[tuple[Note, FileFacts]], batch: int = 2000) -> int:
        """Empty the index and bulk-load ``notes`` (inside the caller's transaction)."""
        conn.execute("INSERT INTO fts (fts) VALUES ('delete-all')")
        conn.execute("INSERT INTO words (words) VALUES ('delete-all')")
        for table in ("memories", "tags", "links"):
            conn.execute(f"DELETE FROM {table}")
        count, pending = 0, []
        for note, facts in notes:
            count += 1
            pending.append((count, note, facts))
            if len(pending) >= batch:
                self._insert(conn, pending)
                pending = []
        self._insert(conn, pending)
        return count

    # ------------------------------------------------------------------ reads
    def file_facts(self) -> dict[str, FileFacts]:
        return {
            row["path"]: FileFacts(row["size"], row["mtime_ns"], row["sha256"])
            for row in self.query("SELECT path, size, mtime_ns, sha256 FROM memories")
        }

    def paths_under(self, folder: str) -> list[str]:
        """Indexed paths inside ``folder`` (vault-relative): what a moved or deleted
        folder takes with it, since no per-file event may come for them."""
        base = folder.rstrip("/")
        # "base/" <= path < "base0" ('0' follows '/'): a range scan on the path index.
        rows = self.query("SELECT path FROM memories WHERE path >= ? AND path < ?", (base + "/", base + "0"))
        return [row["path"] for row in rows]

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
        rows = self.query(
            "SELECT * FROM memories WHERE content_hash = ? AND namespace = ? AND path != ? "
            "AND (expires IS NULL OR expires > ?) ORDER BY created, path LIMIT 1",
            (content_hash, namespace, exclude_path, now),
        )
        return rows[0] if rows else None

    def expired(self, now: str) -> list[sqlite3.Row]:
        return self.query("SELECT path, id FROM memories WHERE expires IS NOT NULL AND expires <= ?", (now,))

    def list(self, filters: Filters, now: str, limit: int, offset: int = 0) -> list[sqlite3.Row]:
        where, params = filters.sql()
        return self.query(
            f"SELECT * FROM memories m WHERE (m.expires IS NULL OR m.expires > ?){where} "
            "ORDER BY m.updated DESC, m.path LIMIT ? OFFSET ?",
            [now, *params, limit, offset],
        )

    def count(self, filters: Filters, now: str) -> int:
        where, params = filters.sql()
        return self.query(
            f"SELECT count(*) FROM memories m WHERE (m.expires IS NULL OR m.expires > ?){where}", [now, *params]
        )[0][0]

    # ------------------------------------------------------------------ search
    # How recall ranks (SPEC §5; the numbers are in benchmarks/README.md). Each term is
    # looked up once (``match_terms``): the memories it matches within the filters, unless
    # it is common (in more than ``COMMON_DF`` memories), whose matches are only checked
    # among candidates, so no query reads a whole vault's worth of rows. Then: memories
    # holding every term, by BM25 (title and tags above the body) then recency; else
    # memories by IDF-weighted term coverage lifted by their neighbours, then BM25, then
    # recency. BM25 is computed for terms that are not common only: FTS5 counts every
    # document of every term it ranks, and a common term weighs almost nothing in it.
    #
    # Every query joins ``fts CROSS JOIN memories`` so that FTS drives: left to itself the
    # planner starts from a namespace index and probes FTS once per memory (20x slower).
    def match_terms(self, terms: list[Term], filters: Filters, now: str) -> list[TermMatch]:
        """Per term: the memories within the filters that it matches, and how many
        memories match it in the whole index (estimated when common)."""
        where, params = filters.sql()
        newest = self.query("SELECT max(rid) FROM memories")[0][0] or 0
        out = []
        for term in terms:
            floor = self.query(
                "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                (term.expr, COMMON_DF - 1),
            )
            if floor:  # as dense among older memories as among the newest COMMON_DF
                out.append(TermMatch(term, COMMON_DF * newest / max(newest - floor[0][0] + 1, 1), None))
                continue
            df = self.query("SELECT count(*) FROM fts WHERE fts MATCH ?", (term.expr,))[0][0]
            rows = self.query(
                "SELECT m.rid FROM fts CROSS JOIN memories m ON m.rid = fts.rowid "
                f"WHERE fts MATCH ? AND (m.expires IS NULL OR m.expires > ?){where}",
                [term.expr, now, *params],
            ) if df else []
            out.append(TermMatch(term, df, {row[0] for row in rows}))
        return out

    def all_terms(self, matches: list[TermMatch], filters: Filters, now: str, limit: int) -> list[tuple[int, float]]:
        """Memories holding every term as (rid, score), best first: BM25 then newest.
        When every term is common (the query names nothing specific), newest first."""
        rare = [m for m in matches if m.rids is not None]
        common = [m.term for m in matches if m.rids is None]
        if not rare:
            where, params = filters.sql()
            # Row numbers follow the dated layout (and creation order since), so the
            # highest ones are nearly the newest; their updated times settle the order.
            rows = self.query(
                "SELECT m.rid, m.updated FROM fts CROSS JOIN memories m ON m.rid = fts.rowid "
                f"WHERE fts MATCH ? AND (m.expires IS NULL OR m.expires > ?){where} ORDER BY fts.rowid DESC LIMIT ?",
                [all_expr(common), now, *params, max(5 * limit, 50)],
            )
            newest = sorted(rows, key=lambda row: row[1], reverse=True)[:limit]
            return [(row[0], 0.0) for row in newest]
        found = set.intersection(*(m.rids for m in rare if m.rids is not None))
        if common and found:
            found &= self._members(all_expr(common), "(" + all_expr([m.term for m in rare]) + ")", None)
        bm25 = self.bm25(list(found), matches, every=True)
        order = self._newest_first(found)
        order.sort(key=lambda rid: -bm25.get(rid, 0.0))
        return [(rid, bm25.get(rid, 0.0)) for rid in order[:limit]]

    def _newest_first(self, rids: Iterable[int]) -> list[int]:
        """``rids`` most recently updated first (the last tie-breaker)."""
        rids = list(rids)
        if not rids:
            return []
        updated = dict(
            self.query("SELECT rid, updated FROM memories WHERE rid IN (SELECT value FROM json_each(?))", (json.dumps(rids),))
        )
        return sorted(rids, key=lambda rid: updated.get(rid, ""), reverse=True)

    def coverage(self, matches: list[TermMatch], filters: Filters, now: str) -> tuple[dict[int, float], dict[int, list[str]]]:
        """IDF-weighted term coverage: each memory's sum of the IDF of the terms it
        matches (a rare word counts more than a common one), and which terms.

        IDF is over the namespace searched (or the vault). Candidates are the memories
        matching a term that is not common, whose common terms are then looked up with
        one FTS AND query per term; and memories holding several common terms together
        (``_combinations``), so that "melanie beach 2023" still finds a memory with all
        three when each is in thousands of memories.
        """
        total = max(self.query("SELECT max(rid) FROM memories")[0][0] or 0, 1)  # rowids are dense
        population = total
        if filters.namespace:  # other filters only narrow the namespace
            population = max(self.query("SELECT count(*) FROM memories WHERE namespace = ?", (filters.namespace,))[0][0], 1)
        rare = [m for m in matches if m.rids]
        common = [m for m in matches if m.rids is None]
        found: dict[str, set[int]] = {m.term.text: set(m.rids) for m in rare if m.rids}
        pool: set[int] = set().union(*found.values())
        within = "(" + any_expr([m.term for m in rare]) + ")"
        for m in common:
            found[m.term.text] = self._members(m.term.expr, within, None) & pool if pool else set()
        if common:
            weights = {m.term.text: _idf(m.df * population / total, population) for m in common}
            for rid, terms in self._combinations([m.term for m in common], weights, bool(pool), filters, now).items():
                for text in terms:
                    found[text].add(rid)
        scores: dict[int, float] = {}
        matched: dict[int, list[str]] = {}
        for m in matches:
            rids = found.get(m.term.text, set())
            weight = _idf(len(rids) if m.rids is not None else m.df * population / total, population)
            for rid in rids:
                scores[rid] = scores.get(rid, 0.0) + weight
                matched.setdefault(rid, []).append(m.term.text)
        return scores, matched

    def _combinations(self, common: list[Term], weights: dict[str, float], have_pool: bool,
                      filters: Filters, now: str) -> dict[int, set[str]]:
        """Memories holding several common terms at once (rid -> those terms): one FTS
        AND query per combination, the largest and weightiest first, the newest
        ``COMMON_POOL`` each, at most ``COMBINATION_QUERIES`` queries. When no other
        term found a candidate, the newest memories holding any common term follow."""
        def largest_first() -> Iterator[tuple[Term, ...]]:
            # Lazily, size by size: there are 2**n combinations of n common words, and
            # only the first COMBINATION_QUERIES are ever run.
            for size in range(len(common), 1, -1):
                yield from sorted(itertools.combinations(common, size), key=lambda c: -sum(weights[t.text] for t in c))

        combos = list(itertools.islice(largest_first(), COMBINATION_QUERIES))
        out: dict[int, set[str]] = {}
        for combo in combos:
            for rid in self._newest(all_expr(list(combo)), filters, now):
                out.setdefault(rid, set()).update(t.text for t in combo)
            if len(out) >= COMMON_POOL:
                return out
        if not have_pool:
            newest = set(self._newest(any_expr(common), filters, now))
            floor = min(newest, default=0)
            for term in common:
                holding = newest if len(common) == 1 else self._members(term.expr, None, floor) & newest
                for rid in holding:
                    out.setdefault(rid, set()).add(term.text)
        return out

    def _newest(self, expr: str, filters: Filters, now: str) -> list[int]:
        where, params = filters.sql()
        rows = self.query(
            "SELECT m.rid FROM fts CROSS JOIN memories m ON m.rid = fts.rowid "
            f"WHERE fts MATCH ? AND (m.expires IS NULL OR m.expires > ?){where} ORDER BY fts.rowid DESC LIMIT ?",
            [expr, now, *params, COMMON_POOL],
        )
        return [row[0] for row in rows]

    def _members(self, expr: str, within: str | None, floor: int | None) -> set[int]:
        """Memories matching ``expr`` and ``within`` (an FTS AND, driven by the rarer
        side), or matching ``expr`` from rowid ``floor`` on."""
        if within is not None:
            rows = self.query("SELECT rowid FROM fts WHERE fts MATCH ?", (f"({expr}) AND {within}",))
        else:
            rows = self.query("SELECT rowid FROM fts WHERE fts MATCH ? AND rowid >= ?", (expr, floor or 0))
        return {row[0] for row in rows}

    def partial(self, matches: list[TermMatch], filters: Filters, now: str, limit: int) -> tuple[list[tuple[int, float]], dict[int, list[str]]]:
        """Memories matching some terms as (rid, score), best first, and the terms each
        matches: coverage lifted by context, then BM25 and recency among the best
        ``2 * limit`` (at least 20)."""
        scores, matched = self.coverage(matches, filters, now)
        lifted = self.with_context(scores)
        shortlist = heapq.nsmallest(max(2 * limit, 20), lifted, key=lambda rid: (-lifted[rid], -rid))
        bm25 = self.bm25(shortlist, matches)
        order = self._newest_first(shortlist)
        order.sort(key=lambda rid: (-lifted[rid], -bm25.get(rid, 0.0)))
        return [(rid, lifted[rid]) for rid in order[:limit]], matched

    def with_context(self, scores: dict[int, float]) -> dict[int, float]:
        """Rescore candidates as memories of a conversation: a memory that asks a
        question holds the words of the question, not its answer, so it counts
        ``QUESTION_WEIGHT``; and each candidate is lifted by the best-scoring memory
        written just before or after it in the same namespace (within
        ``CONTEXT_WINDOW``), since the answer often sits next to the memory that matched.

        Only memories that match a term themselves are lifted, by a share of their
        neighbour's score (``CONTEXT_SHARES``; a neighbour that asks a question gives
        the memories after it ``QUESTION_BOOST`` times more). Memories written in one
        instant (an import) are not neighbours.
        """
        asking = self._asking(heapq.nlargest(QUESTION_CHECKED, scores, key=scores.__getitem__))
        scores = {rid: s * (QUESTION_WEIGHT if rid in asking else 1.0) for rid, s in scores.items()}
        sources = heapq.nsmallest(CONTEXT_SOURCES, scores, key=lambda rid: (-scores[rid], -rid))
        lifted = dict(scores)
        for row in self._neighbours(sources) if sources and CONTEXT_SHARES else []:
            source = row["rid"]
            for offset, share in CONTEXT_SHARES.items():
                neighbour = row[f"n{offset}"]
                if neighbour in scores:
                    gain = share * (QUESTION_BOOST if source in asking and offset > 0 else 1.0) * scores[source]
                    lifted[neighbour] = max(lifted[neighbour], scores[neighbour] + gain)
        return lifted

    def _asking(self, rids: list[int]) -> set[int]:
        """Which of ``rids`` contain a question mark."""
        rows = self.query(
            "SELECT rid FROM memories WHERE rid IN (SELECT value FROM json_each(?)) "
            "AND (instr(body, '?') > 0 OR instr(body, '？') > 0)",
            (json.dumps(rids),),
        )
        return {row[0] for row in rows}

    def _neighbours(self, rids: list[int]) -> list[sqlite3.Row]:
        """Per source, the memories written one and two places before (``n-1``,
        ``n-2``) and after (``n1``, ``n2``) it in its namespace, within the window."""
        window = f"{CONTEXT_WINDOW.total_seconds():.0f} seconds"
        columns = []
        for offset in CONTEXT_SHARES:
            before = offset < 0
            columns.append(
                "(SELECT n.rid FROM memories n WHERE n.namespace = s.namespace "
                f"AND n.created {'<' if before else '>'} s.created "
                f"AND n.created {'>=' if before else '<='} strftime('%Y-%m-%dT%H:%M:%SZ', s.created, '{'-' if before else '+'}{window}') "
                f"ORDER BY n.created {'DESC' if before else ''}, n.path {'DESC' if before else ''} "
                f'LIMIT 1 OFFSET {abs(offset) - 1}) AS "n{offset}"'
            )
        return self.query(
            f"SELECT s.rid, {', '.join(columns)} FROM memories s "
            f"WHERE s.rid IN ({', '.join(str(int(r)) for r in rids)})"
        )

    def rows_by_rid(self, rids: list[int]) -> dict[int, sqlite3.Row]:
        if not rids:
            return {}
        rows = self.query(f"SELECT * FROM memories WHERE rid IN ({', '.join(str(int(r)) for r in rids)})")
        return {row["rid"]: row for row in rows}

    def bm25(self, rids: list[int], matches: list[TermMatch], every: bool = False) -> dict[int, float]:
        """BM25 of ``rids`` (higher is better) for the terms that are not common (any
        of them, or ``every`` one). One FTS query over the rowid range of ``rids``:
        probing rowids one by one would recount each term's documents every time."""
        terms = [m.term for m in matches if m.rids]
        if not rids or not terms:
            return {}
        wanted = set(rids)
        rows = self.query(
            "SELECT rowid, -rank FROM fts WHERE fts MATCH ? AND rowid BETWEEN ? AND ?",
            ((all_expr if every else any_expr)(terms), min(rids), max(rids)),
        )
        return {row[0]: row[1] for row in rows if row[0] in wanted}

    def snippets(self, rows: list[sqlite3.Row], terms: list[Term]) -> dict[int, str]:
        """A snippet of each row's body with the matches in ``[brackets]``, from the
        indexed part of the body only. CJK matches are marked in Python: FTS5's
        ``snippet`` would show the bigram column."""
        if not rows:
            return {}
        long_rids = sorted(int(r["rid"]) for r in rows if len(r["body"]) > SNIPPET_SCORED_BODY)
        rids = sorted(int(r["rid"]) for r in rows if len(r["body"]) <= SNIPPET_SCORED_BODY)
        listed = ", ".join(map(str, rids))
        found: list[sqlite3.Row] = []
        if not rids:
            pass
        elif rids[-1] - rids[0] < 20 * len(rids):  # close together: one pass over that range
            found = self.query(
                "SELECT rowid, snippet(fts, 2, '[', ']', '…', 16) FROM fts "
                f"WHERE fts MATCH ? AND rowid BETWEEN ? AND ? AND +rowid IN ({listed})",
                (any_expr(terms), rids[0], rids[-1]),
            )
        else:  # one probe per row
            found = self.query(
                f"SELECT rowid, snippet(fts, 2, '[', ']', '…', 16) FROM fts WHERE fts MATCH ? AND rowid IN ({listed})",
                (any_expr(terms),),
            )
        out = {row[0]: row[1] for row in found}
        if long_rids:
            marked = self.query(
                "SELECT rowid, highlight(fts, 2, char(2), char(3)) FROM fts "
                f"WHERE fts MATCH ? AND rowid IN ({', '.join(map(str, long_rids))})",
                (any_expr(terms),),
            )
            out.update((row[0], _best_window(row[1])) for row in marked)
        needles = [t.text for t in terms if t.cjk]
        if needles:
            for row in rows:
                if any(n in row["body"] for n in needles):
                    out[row["rid"]] = highlight(row["body"], needles)
        return out

    def words_starting(self, prefix: str, limit: int = PREFIX_EXPANSIONS) -> list[str]:
        """Indexed words (as written) that start with ``prefix`` and are longer, the
        ones in most memories first."""
        rows = self.query(
            "SELECT term FROM words_vocab WHERE term > ? AND term < ? ORDER BY doc DESC, term LIMIT ?",
            (prefix, prefix + "\U0010ffff", limit),
        )
        return [row[0] for row in rows]

    def vocabulary(self, word: str, spread: int) -> list[tuple[str, int]]:
        """Indexed words (as written, accents folded) within ``spread`` of ``word``'s
        length that share its first two letters, with how many memories hold each.
        Where that is more than ``VOCAB_CANDIDATES`` words, a longer shared start is
        required, so correcting stays cheap in a large vault."""
        for size in range(2, len(word)):
            head = word[:size]
            rows = self.query(
                "SELECT term, doc FROM words_vocab WHERE term >= ? AND term < ? "
                "AND length(term) BETWEEN ? AND ? LIMIT ?",
                (head, head[:-1] + chr(ord(head[-1]) + 1), len(word) - spread, len(word) + spread, VOCAB_CANDIDATES + 1),
            )
            if len(rows) <= VOCAB_CANDIDATES:
                return [(row[0], row[1]) for row in rows]
        return []

    # ------------------------------------------------------------------ vault health
    def namespace_counts(self, now: str) -> dict[str, int]:
        rows = self.query(
            "SELECT namespace, count(*) FROM memories WHERE expires IS NULL OR expires > ? "
            "GROUP BY namespace ORDER BY 2 DESC, 1",
            (now,),
        )
        return {row[0]: row[1] for row in rows}

    def top_tags(self, now: str, limit: int = 20) -> dict[str, int]:
        rows = self.query(
            "SELECT t.tag, count(*) FROM tags t JOIN memories m ON m.rid = t.rid "
            "WHERE m.expires IS NULL OR m.expires > ? GROUP BY t.tag ORDER BY 2 DESC, 1 LIMIT ?",
            (now, limit),
        )
        return {row[0]: row[1] for row in rows}

    def ttl_count(self, now: str) -> int:
        return self.query("SELECT count(*) FROM memories WHERE expires > ?", (now,))[0][0]

    def problem_files(self) -> list[dict[str, str]]:
        return [
            {"path": row["path"], "problem": "; ".join(json.loads(row["problems"]))}
            for row in self.query("SELECT path, problems FROM memories WHERE problems IS NOT NULL ORDER BY path")
        ]

    def conflict_paths(self) -> list[str]:
        return [row[0] for row in self.query("SELECT path FROM memories WHERE conflict = 1 ORDER BY path")]

    def duplicate_ids(self) -> dict[str, list[str]]:
        """Ids claimed by several files; the owner (earliest created, smallest path) first."""
        rows = self.query(
            "SELECT id, path FROM memories WHERE id IN "
            "(SELECT id FROM memories GROUP BY id HAVING count(*) > 1) ORDER BY id, created, path"
        )
        found: dict[str, list[str]] = {}
        for row in rows:
            found.setdefault(row[0], []).append(row[1])
        return found

    def live_rows(self, now: str, namespace: str | None = None, limit: int = -1, offset: int = 0) -> list[sqlite3.Row]:
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

    @staticmethod
    def peek(folder: Path) -> tuple[int, dict[str, FileFacts]] | None:
        """Read an index without changing it (for ``doctor``): schema version and facts."""
        path = folder / DB_NAME
        if not path.exists():
            return None
        # With no writer active (no -wal file) open it immutable, which creates no
        # -wal/-shm files; with one, read-only mode sees its uncheckpointed pages.
        live = Path(f"{path}-wal").exists()
        conn = sqlite3.connect(f"file:{path}?{'mode=ro' if live else 'immutable=1'}", uri=True)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                return version, {}
            rows = conn.execute("SELECT path, size, mtime_ns, sha256 FROM memories").fetchall()
            return version, {r[0]: FileFacts(r[1], r[2], r[3]) for r in rows}
        finally:
            conn.close()


def _best_window(marked: str) -> str:
    """``SNIPPET_TOKENS`` words of a body marked by ``highlight()``: the first window
    holding the most different matched words, in one pass (like FTS5's snippet, which
    is quadratic in the matches). Matches in ``[brackets]``; '…' where text is cut."""
    words = marked.split()
    hits = [i for i, word in enumerate(words) if _MARK_OPEN in word]

    def matched(i: int) -> str:
        return words[i].partition(_MARK_OPEN)[2].partition(_MARK_CLOSE)[0].casefold()

    start = 0
    if hits:
        counts: dict[str, int] = {}
        best, best_score, last, end = hits[0], 0, hits[0], 0
        for k, first in enumerate(hits):  # the window starting at the k-th match
            while end < len(hits) and hits[end] < first + SNIPPET_TOKENS:
                counts[matched(hits[end])] = counts.get(matched(hits[end]), 0) + 1
                end += 1
            if len(counts) > best_score:
                best, best_score, last = first, len(counts), hits[end - 1]
            gone = matched(first)
            counts[gone] -= 1
            if not counts[gone]:
                del counts[gone]
        slack = best + SNIPPET_TOKENS - 1 - last  # words after the window's last match
        start = max(0, best - slack // 2)  # the matches in the middle, where there is room
    shown = " ".join(words[start : start + SNIPPET_TOKENS]).replace(_MARK_OPEN, "[").replace(_MARK_CLOSE, "]")
    return ("…" if start else "") + shown + ("…" if start + SNIPPET_TOKENS < len(words) else "")


def _statements(script: str) -> list[str]:
    """Split the schema script; ``executescript`` would commit our transaction."""
    out, current = [], []
    for line in script.strip().splitlines():
        current.append(line.split("--", 1)[0] if "--" in line else line)
        joined = "\n".join(current)
        if joined.rstrip().endswith(";") and sqlite3.complete_statement(joined):
            out.append(joined)
            current = []
    return out
