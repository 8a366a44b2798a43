"""Memory vectors: an index like FTS5, computed from the files, kept beside the index.

Only imported when semantic recall is on and its extra is installed (it needs numpy).

Storage: ``<index folder>/vectors.sqlite3``, one row per distinct file version
(``memories.sha256``): the vector as 384 signed bytes (each component times 127 over the
vector's largest) and that scale. A file's bytes decide its vector, so a move, a
``touch`` or a ``reindex`` re-embeds nothing; a vector no memory has any more is dropped
by the next catch-up. 392 bytes a memory on disk.

In memory (``VectorIndex``): the same signed bytes (384 B) and a 384-bit sign code
(48 B) per memory: 43 MB at 100k memories. A search ranks every memory by the
Hamming distance of the sign codes (a few ms at 100k), rescores the nearest
``PREFILTER`` exactly from the bytes, and widens to every memory within the filters
when too few of those pass them.

Embedding (``Embedder``) runs on a background thread: writes only wake it, so
``remember`` and edits never wait for the model. A search embeds a few memories still
waiting itself (``semantic.INLINE_CATCH_UP``: a one-shot ``search`` after a ``remember``
in another process), and ranks the rest once they are done.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .embed import DIMENSIONS, Encoder, shared_encoder
from .model_files import MODEL_NAME
from .semantic import VECTORS_FILE

VECTORS_VERSION = 1
EXACT_MAX = 20_000  # up to this many memories every one is scored exactly
PREFILTER = 2_000  # nearest by sign code, rescored exactly, in a larger vault
EMBED_BATCH = 32  # memories per encode and per write: closing waits for one batch at most
RELOAD_WHILE_EMBEDDING = 30.0  # seconds the loaded vectors serve while a background pass commits more
EMBED_CHARS = 2_000  # of title and body: the model reads at most 256 tokens anyway

Progress = Callable[[int, int], None]


def embedded_text(title: str, body: str) -> str:
    """What a memory's vector is computed from: its title (unless the body starts with
    it, as a title taken from the first line does) and body."""
    text = body if body.startswith(title) else f"{title}\n{body}"
    return text[:EMBED_CHARS]


def quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit float vectors -> (int8 codes, float32 scales): v ~ codes / scale."""
    peak = np.maximum(np.abs(vectors).max(axis=1), 1e-12)
    scales = (127.0 / peak).astype(np.float32)
    codes = np.clip(np.rint(vectors * scales[:, None]), -127, 127).astype(np.int8)
    return codes, scales


def sign_codes(codes: np.ndarray) -> np.ndarray:
    return np.packbits(codes > 0, axis=1).view(np.uint64)


class VectorStore:
    """The vectors file: sha256 -> (codes, scale); its model recorded, a vector of
    another model or version discarded."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / VECTORS_FILE
        self._lock = threading.Lock()
        self._own_writes = 0  # data_version does not count this connection's own commits
        try:
            self.conn = self._open()
        except sqlite3.DatabaseError:  # not a database (a half copy): it is only a cache
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            self.conn = self._open()

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        try:
            conn.execute("PRAGMA busy_timeout = 30000")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            made = f"{MODEL_NAME} {DIMENSIONS} int8 v{VECTORS_VERSION}"
            conn.execute("CREATE TABLE IF NOT EXISTS about (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = conn.execute("SELECT value FROM about WHERE key = 'model'").fetchone()
            if row is None or row[0] != made:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DROP TABLE IF EXISTS vectors")
                conn.execute("INSERT OR REPLACE INTO about VALUES ('model', ?)", (made,))
                conn.execute("COMMIT")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS vectors (sha256 TEXT PRIMARY KEY, scale REAL NOT NULL, code BLOB NOT NULL) "
                "WITHOUT ROWID"
            )
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        self.conn.close()

    def version(self) -> int:
        """Changes whenever another connection commits to the file (PRAGMA data_version)."""
        with self._lock:
            return self.conn.execute("PRAGMA data_version").fetchone()[0] + self._own_writes

    def keys(self) -> set[str]:
        with self._lock:
            return {row[0] for row in self.conn.execute("SELECT sha256 FROM vectors")}

    def load(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Every vector: keys, codes (N x 384 int8) and scales, read a block of rows at a
        time into arrays made once (no list of 100k blobs held beside them)."""
        with self._lock:
            count = self.conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
            keys: list[str] = []
            codes = np.empty((count, DIMENSIONS), dtype=np.int8)
            scales = np.empty(count, dtype=np.float32)
            cursor = self.conn.execute("SELECT sha256, scale, code FROM vectors")
            while rows := cursor.fetchmany(4096):
                at = len(keys)
                keys.extend(r[0] for r in rows)
                scales[at:at + len(rows)] = [r[1] for r in rows]
                codes[at:at + len(rows)] = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.int8).reshape(-1, DIMENSIONS)
        return keys, codes[: len(keys)], scales[: len(keys)]

    def put(self, keys: list[str], vectors: np.ndarray) -> None:
        codes, scales = quantize(vectors)
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                                  [(k, float(s), c.tobytes()) for k, s, c in zip(keys, scales, codes)])
            self.conn.execute("COMMIT")
            self._own_writes += 1

    def drop(self, keys: set[str]) -> None:
        if not keys:
            return
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany("DELETE FROM vectors WHERE sha256 = ?", [(k,) for k in keys])
            self.conn.execute("COMMIT")
            self._own_writes += 1

    def clear(self) -> None:
        with self._lock:
            self.conn.execute("DELETE FROM vectors")
            self._own_writes += 1

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())


class VectorIndex:
    """The vectors of the indexed memories, in memory: ``rids[i]``'s vector is row
    ``rows[i]`` of the loaded file's arrays (shared, not copied, between rebuilds)."""

    def __init__(self, rids: np.ndarray, rows: np.ndarray, codes: np.ndarray, scales: np.ndarray,
                 signs: np.ndarray) -> None:
        self.rids = rids
        self.rows = rows
        self.codes = codes
        self.scales = scales
        self.signs = signs[rows] if len(rids) > EXACT_MAX else signs[:0]  # in rids' order: no gather per search

    def __len__(self) -> int:
        return len(self.rids)

    def nearest(self, query: np.ndarray, allowed: Callable[[list[int] | None], set[int]], want: int
                ) -> list[tuple[int, float]]:
        """Memories by cosine to ``query`` (unit float32), best first, at least ``want``
        of them that ``allowed`` keeps (it gets candidate rids, or None for "every memory
        within the filters", and returns those it keeps)."""
        if not len(self):
            return []
        if len(self) <= EXACT_MAX:
            order = self._exact(np.arange(len(self)), query)
        else:
            code = sign_codes(quantize(query[None, :])[0])[0]
            distance = np.bitwise_count(self.signs ^ code).sum(1, dtype=np.int32)
            order = self._exact(np.argpartition(distance, PREFILTER)[:PREFILTER], query)
        candidates = self.rids[[i for i, _ in order]].tolist()
        keep = allowed(candidates)
        found = [(rid, s) for rid, (_, s) in zip(candidates, order) if rid in keep]
        if len(found) >= want or len(order) == len(self):
            return found
        within = allowed(None)
        chosen = np.nonzero(np.isin(self.rids, np.fromiter(within, dtype=np.int64, count=len(within))))[0]
        return [(int(self.rids[i]), s) for i, s in self._exact(chosen, query)]

    def _exact(self, chosen: np.ndarray, query: np.ndarray) -> list[tuple[int, float]]:
        """``chosen`` (positions in ``rids``) by cosine to ``query``, best first."""
        rows = self.rows[chosen]
        sims = (self.codes[rows].astype(np.float32) @ query) / self.scales[rows]
        order = np.argsort(-sims, kind="stable")
        return [(int(chosen[j]), float(sims[j])) for j in order]


class Embedder:
    """Keeps the vectors file equal to the index's memories.

    ``catch_up`` embeds what is missing (on the caller's thread); ``start`` runs it on a
    background thread that ``wake()`` (after an index write) sets going; ``index()`` is
    the in-memory ``VectorIndex`` of the current rows."""

    def __init__(self, index: Any, folder: Path, encoder: Callable[[], Encoder] = shared_encoder) -> None:
        self.source = index  # agent_memory.index.Index
        self.store = VectorStore(folder)
        self.model = MODEL_NAME
        self._encoder = encoder
        self._work = threading.Lock()  # one embedding pass at a time (thread or inline)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._cached: tuple[Any, VectorIndex] | None = None
        self._stored: tuple[int, dict[str, int], np.ndarray, np.ndarray, np.ndarray] | None = None
        self._loaded_at = 0.0
        self._checked: tuple[Any, set[str], set[str]] | None = None  # (versions, missing, unused)
        self._probe = sqlite3.connect(index.path, check_same_thread=False)  # its data_version sees every commit
        self._probe_lock = threading.Lock()
        self._probe_epoch = getattr(index, "_epoch", 0)
        self.error: str | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ thread
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="agent-memory-embedder", daemon=True)
            self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        self.store.close()
        self._probe.close()

    def _run(self) -> None:
        self._wake.set()  # catch up once at start
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.catch_up()
                self.index()  # rebuilt here, off the request path, not by the next search
            except Exception as exc:  # noqa: BLE001 - a broken model or disk must not break recall
                self.error = f"{type(exc).__name__}: {exc}"

    # ------------------------------------------------------------------ catching up
    def _rows(self) -> list[Any]:
        return self.source.query("SELECT rid, sha256 FROM memories")

    def _versions(self) -> tuple[Any, int]:
        return self._index_version(), self.store.version()

    def _gap(self) -> tuple[set[str], set[str]]:
        """(file versions without a vector, vectors no memory has), worked out again
        only when the index or the vectors file changed since the last time."""
        versions = self._versions()
        checked = self._checked
        if checked is not None and checked[0] == versions:
            return checked[1], checked[2]
        have = self.store.keys()
        wanted = {row[1] for row in self._rows()}
        missing, unused = wanted - have, have - wanted
        self._checked = (versions, missing, unused)
        return missing, unused

    def counts(self) -> tuple[int, int]:
        """(memories in the index, memories without a vector)."""
        missing, _ = self._gap()
        rows = self._rows()
        return len(rows), sum(1 for row in rows if row[1] in missing)

    def catch_up(self, most: int | None = None, progress: Progress | None = None, wait: bool = True) -> int:
        """Embed the memories whose file version has no vector and drop vectors no
        memory has; returns how many were embedded. ``most``: do nothing when more are
        missing (a search leaves those to the background). ``wait=False``: do nothing
        while another pass runs. Stops between batches when the vault closes."""
        if not self._work.acquire(blocking=wait):
            return 0
        try:
            missing, unused = self._gap()
            if not missing and not unused:
                return 0
            if most is not None and len(missing) > most:
                return 0
            self.store.drop(unused)
            todo = sorted(missing)
            done = 0
            for start in range(0, len(todo), EMBED_BATCH):
                if self._stop.is_set():
                    break
                rows = self.source.query(
                    "SELECT sha256, min(title) AS title, min(body) AS body FROM memories "
                    "WHERE sha256 IN (SELECT value FROM json_each(?)) GROUP BY sha256",
                    (json.dumps(todo[start:start + EMBED_BATCH]),),
                )
                if rows:
                    vectors = self._encoder().encode([embedded_text(r["title"], r["body"]) for r in rows])
                    self.store.put([r["sha256"] for r in rows], vectors)
                done += len(rows)
                if progress is not None:
                    progress(done, len(todo))
            self.error = None
            return done
        finally:
            self._work.release()

    # ------------------------------------------------------------------ reading
    def _index_version(self) -> tuple[int, int]:
        with self._probe_lock:
            # The epoch changes when the index file was replaced and reopened: so must the probe.
            epoch = getattr(self.source, "_epoch", 0)
            if epoch != self._probe_epoch:
                self._probe.close()
                self._probe = sqlite3.connect(self.source.path, check_same_thread=False)
                self._probe_epoch = epoch
            return epoch, self._probe.execute("PRAGMA data_version").fetchone()[0]

    def index(self) -> VectorIndex:
        """The vectors of the current rows, rebuilt only when the vectors file or the
        index changed since the last call (two PRAGMAs tell): the file's vectors are
        re-read only when it changed, the row numbers when the index did."""
        stored_at, indexed_at = self.store.version(), self._index_version()
        # While the background thread works through a large backlog it commits a batch
        # every few seconds; re-reading 100k vectors (~0.5 s) after each would slow every
        # search, so during a pass the loaded ones serve for RELOAD_WHILE_EMBEDDING seconds.
        busy = self._thread is not None and self._work.locked()
        fresh = self._stored is not None and time.monotonic() - self._loaded_at < RELOAD_WHILE_EMBEDDING
        if self._stored is None or (self._stored[0] != stored_at and not (busy and fresh)):
            self._loaded_at = time.monotonic()
            keys, codes, scales = self.store.load()
            signs = sign_codes(codes) if len(codes) else np.zeros((0, DIMENSIONS // 64), dtype=np.uint64)
            self._stored = (stored_at, {k: i for i, k in enumerate(keys)}, codes, scales, signs)
            self._cached = None
        cached = self._cached
        if cached is not None and cached[0] == indexed_at:
            return cached[1]
        _, position, codes, scales, signs = self._stored
        pairs = [(row[0], position[row[1]]) for row in self._rows() if row[1] in position]
        rids = np.array([p[0] for p in pairs], dtype=np.int64)
        rows = np.array([p[1] for p in pairs], dtype=np.int64)
        built = VectorIndex(rids, rows, codes, scales, signs)
        self._cached = (indexed_at, built)
        return built

    def encode_query(self, text: str) -> np.ndarray:
        return self._encoder().encode([text])[0]
