"""Memory vectors: an index like FTS5, computed from the files, kept beside the index.

Only imported when semantic recall is on and its extra is installed (it needs numpy).

Storage: ``<index folder>/vectors.sqlite3``, one row per chunk of each distinct file
version (``memories.sha256``, chunk number): the vector as 384 signed bytes (each
component times 127 over the vector's largest) and that scale. A memory within the
model's 256 tokens is one chunk; a longer one is cut into overlapping windows
(``embed.Encoder.chunks``) so every word of it is embedded, and it scores as its best
chunk. A file's bytes decide its vectors, so a move, a ``touch`` or a ``reindex``
re-embeds nothing; vectors no memory has any more are dropped by the next catch-up.
About 400 bytes a chunk on disk.

In memory (``Loaded``, ``VectorIndex``): per vector its signed bytes (384 B), a 384-bit
sign code (48 B), its scale and its file version as 32 raw bytes; per memory its row
number and the row of its vector (16 B): 49 MB at 100k memories, in numpy arrays (no
Python object per memory, which would take as much again). A search ranks every memory
chunk by the Hamming distance of the sign codes (0.4 ms at 100k), rescores the nearest
``PREFILTER`` exactly from the bytes, a block of rows at a time, and widens to every
memory within the filters when too few of those pass them. Vectors committed since the
last load are read alone and appended in place (``Loaded.refresh``): a background pass
or a ``remember`` never re-reads the 100k others.

Embedding (``Embedder``) runs on a background thread: writes only wake it, so
``remember`` and edits never wait for the model, and a search ranks by words alone
what has no vector yet. Each batch of memories is committed with all its chunks, so a
pass that is interrupted (the process killed) resumes where it stopped: the next one
embeds only the memories without vectors. A search embeds a few memories still
waiting itself (``status.INLINE_CATCH_UP``: a one-shot ``search`` after a ``remember``
in another process), and ranks the rest once they are done.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..index.db import Index
from ..progress import Progress, Step
from ..trust import confine
from .embed import DIMENSIONS, Encoder, shared_encoder
from .model_files import MODEL_NAME, VECTORS_FILE

VECTORS_VERSION = 2  # 2: a row per chunk (1 held each memory's first 256 tokens only)
EXACT_MAX = 20_000  # up to this many chunks every one is scored exactly
PREFILTER = 2_000  # nearest by sign code, rescored exactly, in a larger vault
EMBED_BATCH = 32  # memories per encode and per write: closing waits for one batch at most
RELOAD_WHILE_EMBEDDING = 30.0  # seconds the loaded vectors serve while a background pass commits more
INLINE_CHARS = 64_000  # characters of title and body at most that a search embeds itself (``catch_up(most)``)
EMBED_CHARS = 400_000  # of title and body: more than ``embed.MAX_CHUNKS`` chunks of tokens hold
READ_ROWS = 1024  # rows per fetch: bounds what a load holds (~1 MB of rows and scratch)
SCORE_ROWS = 512  # rows per scoring block: a search's scratch (< 1 MB), not 150 MB of floats
HAMMING_ROWS = 16_384  # sign codes per block of distances (128 KB of scratch)
ROOM = 1 / 8  # spare rows kept after a full load, for vectors appended later
CACHE_KIB = -256  # SQLite page cache of our connections (KiB): they read each row once, in order

DIGEST = np.dtype("S32")  # a sha256 as raw bytes: half its hex, and one numpy array for 100k


def digests(hexes: list[str]) -> np.ndarray:
    """sha256 hex strings -> one array of their raw bytes (``DIGEST``)."""
    raw = bytes.fromhex("".join(hexes))
    if len(raw) != 32 * len(hexes):
        raise ValueError("a file version is not a sha256 hex digest")
    return np.frombuffer(raw, dtype=DIGEST)


def hexes(found: np.ndarray) -> list[str]:
    """The inverse of ``digests`` (through bytes: an S32 item drops trailing zero bytes)."""
    return [row.tobytes().hex() for row in np.ascontiguousarray(found).view(np.uint8).reshape(-1, 32)]


def _blocks(cursor: sqlite3.Cursor) -> Iterator[list[Any]]:
    while rows := cursor.fetchmany(READ_ROWS):
        yield rows


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
        conn = sqlite3.connect(confine.tool_file(self.path), isolation_level=None, check_same_thread=False, timeout=30)
        try:
            conn.execute("PRAGMA busy_timeout = 30000")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(f"PRAGMA cache_size = {CACHE_KIB}")
            made = f"{MODEL_NAME} {DIMENSIONS} int8 v{VECTORS_VERSION}"
            conn.execute("CREATE TABLE IF NOT EXISTS about (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = conn.execute("SELECT value FROM about WHERE key = 'model'").fetchone()
            if row is None or row[0] != made:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("DROP TABLE IF EXISTS vectors")
                conn.execute("INSERT OR REPLACE INTO about VALUES ('model', ?)", (made,))
                conn.execute("COMMIT")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS vectors (sha256 TEXT NOT NULL, chunk INTEGER NOT NULL, scale REAL NOT NULL, "
                "code BLOB NOT NULL, PRIMARY KEY (sha256, chunk)) WITHOUT ROWID"
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
            return int(self.conn.execute("PRAGMA data_version").fetchone()[0]) + self._own_writes

    def count(self) -> int:
        with self._lock:
            return int(self.conn.execute("SELECT count(*) FROM vectors").fetchone()[0])

    def keys(self) -> np.ndarray:
        """Every vector's file version (``DIGEST``), in order (a version once per chunk),
        read a block at a time."""
        with self._lock:
            blocks = [digests([r[0] for r in rows])
                      for rows in _blocks(self.conn.execute("SELECT sha256 FROM vectors ORDER BY sha256, chunk"))]
        return np.concatenate(blocks) if blocks else np.zeros(0, dtype=DIGEST)

    def read(self, keys: np.ndarray | None, each: Callable[[np.ndarray, np.ndarray, np.ndarray], None]) -> None:
        """Pass the vectors of ``keys`` (every one when None) to ``each`` as blocks of
        (keys, int8 codes, scales), a block of rows at a time: no list of 100k blobs is
        ever held."""
        with self._lock:
            queries: list[tuple[str, tuple[str, ...]]]
            if keys is None:
                queries = [("SELECT sha256, code, scale FROM vectors", ())]
            else:
                wanted = hexes(np.unique(keys))  # each version once: its chunks come with it
                queries = [("SELECT sha256, code, scale FROM vectors WHERE sha256 IN (SELECT value FROM json_each(?))",
                            (json.dumps(wanted[at:at + READ_ROWS]),)) for at in range(0, len(wanted), READ_ROWS)]
            for sql, params in queries:
                for rows in _blocks(self.conn.execute(sql, params)):
                    each(digests([r[0] for r in rows]),
                         np.frombuffer(b"".join(r[1] for r in rows), dtype=np.int8).reshape(-1, DIMENSIONS),
                         np.array([r[2] for r in rows], dtype=np.float32))

    def put(self, keys: list[str], vectors: np.ndarray) -> None:
        """Store the vectors of some file versions, ``keys[i]`` owning ``vectors[i]``
        (a version's chunks in order, one after the other), in one transaction: a
        version has all its chunks or none, whatever stops the process."""
        codes, scales = quantize(vectors)
        chunk, rows = 0, []
        for i, (k, s, c) in enumerate(zip(keys, scales, codes)):
            chunk = chunk + 1 if i and keys[i - 1] == k else 0
            rows.append((k, chunk, float(s), c.tobytes()))
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.executemany("DELETE FROM vectors WHERE sha256 = ?", [(k,) for k in dict.fromkeys(keys)])
            self.conn.executemany("INSERT INTO vectors VALUES (?, ?, ?, ?)", rows)
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


class Loaded:
    """The vectors file in memory: row ``i`` holds a vector of file version ``keys[i]``
    (its codes, scale and sign code; a version has a row per chunk), for rows below
    ``count``; ``alive[i]`` says the
    file still has it. Rows past ``count`` are room for vectors committed later:
    ``refresh`` reads only those and appends them, so a ``VectorIndex`` made earlier
    keeps reading the rows it knows, which are never rewritten."""

    def __init__(self, size: int) -> None:
        room = size + max(256, int(size * ROOM))
        self.keys = np.zeros(room, dtype=DIGEST)
        self.codes = np.zeros((room, DIMENSIONS), dtype=np.int8)
        self.scales = np.zeros(room, dtype=np.float32)
        self.signs = np.zeros((DIMENSIONS // 64, room), dtype=np.uint64)  # a line per word: see VectorIndex
        self.count = 0
        self.alive = np.zeros(0, dtype=bool)
        self.order = np.zeros(0, dtype=np.int64)  # rows by key, for ``rows_of``
        self.view = (self.keys[:0], self.order, self.alive)

    @classmethod
    def read(cls, store: VectorStore) -> Loaded:
        """Every vector of the file, with room for more."""
        while True:
            loaded = cls(store.count())
            try:
                store.read(None, loaded._append)
            except _NoRoom:  # another process committed many since they were counted
                continue
            loaded._settle(np.ones(loaded.count, dtype=bool))
            return loaded

    def _append(self, keys: np.ndarray, codes: np.ndarray, scales: np.ndarray) -> None:
        at, end = self.count, self.count + len(keys)
        if end > len(self.keys):  # more rows were committed since they were counted
            raise _NoRoom
        self.keys[at:end], self.codes[at:end], self.scales[at:end] = keys, codes, scales
        self.signs[:, at:end] = sign_codes(codes).T
        self.count = end

    def held_bytes(self) -> int:
        """What the loaded rows take in memory (the room past them is allocated but not
        touched, so it is not resident)."""
        per_row = self.keys.itemsize + DIMENSIONS + self.scales.itemsize + self.signs.itemsize * len(self.signs)
        return int(self.count * per_row + self.order.nbytes + self.alive.nbytes)

    def _settle(self, alive: np.ndarray) -> None:
        self.alive = alive
        self.order = np.argsort(self.keys[: self.count], kind="stable")
        self.view = (self.keys[: self.count], self.order, alive)  # one attribute: read whole by other threads

    def rows_of(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every live row of ``keys`` (a version's chunks), as (which of ``keys`` owns
        it, the row): worked out with two binary searches, no Python loop."""
        ordered = self.keys[: self.count][self.order]
        low = np.searchsorted(ordered, keys, side="left")
        counts = np.searchsorted(ordered, keys, side="right") - low
        owner = np.repeat(np.arange(len(keys)), counts)
        first = np.repeat(low - (np.cumsum(counts) - counts), counts)
        rows = self.order[first + np.arange(len(owner))]
        live = self.alive[rows]
        return owner[live], rows[live]

    def rows_loaded(self, keys: np.ndarray) -> np.ndarray:
        """The row of each of ``keys``, live or dead, -1 where there is none."""
        return find(self.keys[: self.count], keys, self.order)

    def refresh(self, store: VectorStore, current: np.ndarray) -> bool:
        """These vectors made equal to the file's, whose keys are now ``current``
        (sorted): the new ones appended, the dropped ones marked. False when a full load
        is due instead (these are then to be dropped): the room is used up, or a quarter
        of the rows are dead (each edit leaves one)."""
        alive = find(current, self.keys[: self.count]) >= 0
        added = current[self.rows_loaded(current) < 0]  # a version once per chunk: each chunk's row
        dead = self.count - int(alive.sum())
        if self.count + len(added) > len(self.keys) or dead > len(current) // 4 + 256:
            return False
        try:
            store.read(added, self._append)
        except _NoRoom:
            return False
        self._settle(np.concatenate([alive, np.ones(self.count - len(alive), dtype=bool)]))
        return True


def find(haystack: np.ndarray, needles: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """The position in ``haystack`` (sorted, or sorted by ``order``) of each needle, -1
    where it is not: a block of needles at a time, so no 100k-long temporaries."""
    out = np.full(len(needles), -1, dtype=np.int64)
    if not len(haystack):
        return out
    for at in range(0, len(needles), READ_ROWS):
        block = needles[at:at + READ_ROWS]
        spot = np.minimum(np.searchsorted(haystack, block, sorter=order), len(haystack) - 1)
        if order is not None:
            spot = order[spot]
        out[at:at + len(block)] = np.where(haystack[spot] == block, spot, -1)
    return out


class _NoRoom(Exception):
    """More vectors arrived than the loaded arrays have room for: load them anew."""


class VectorIndex:
    """The vectors of the indexed memories: ``rids[i]``'s vector is row ``rows[i]`` of
    ``Loaded``'s arrays (shared, not copied, between rebuilds); a memory of several
    chunks is in ``rids`` once per chunk, and scores as its best. ``signs`` holds one
    64-bit word of every row's sign code per line (6 x rows): a search's Hamming
    distances are then six passes over contiguous words."""

    def __init__(self, rids: np.ndarray, rows: np.ndarray, codes: np.ndarray, scales: np.ndarray,
                 signs: np.ndarray) -> None:
        self.rids = rids
        self.rows = rows
        self.codes = codes
        self.scales = scales
        self.signs = signs[:, : int(rows.max()) + 1 if len(rows) else 0]  # the loaded rows, not the room past them

    def __len__(self) -> int:
        return len(self.rids)

    def nearest(self, query: np.ndarray, allowed: Callable[[list[int] | None], set[int]], want: int
                ) -> list[tuple[int, float]]:
        """Memories by cosine to ``query`` (unit float32) of their nearest chunk, best
        first, each once, at least ``want`` of them that ``allowed`` keeps (it gets candidate rids, or None for "every memory
        within the filters", and returns those it keeps). The best few hundred
        candidates are offered to ``allowed`` first, then, if enough pass at that rate,
        the rest; if not, every memory within the filters is scored."""
        if not len(self):
            return []
        if len(self) <= EXACT_MAX:
            chosen, sims = self._best(np.arange(len(self)), query, PREFILTER)
        else:
            chosen, sims = self._best(np.argpartition(self._hamming(query), PREFILTER)[:PREFILTER], query, PREFILTER)
        found: list[tuple[int, float]] = []
        seen: set[int] = set()
        at, step = 0, max(2 * want, 256)
        while at < len(chosen) and len(found) < want:
            rids = self.rids[chosen[at:at + step]].tolist()
            keep = allowed(list(dict.fromkeys(rids)))
            for rid, sim in zip(rids, sims[at:at + step].tolist()):
                if rid in keep and rid not in seen:  # a later chunk of a memory found is no better
                    seen.add(rid)
                    found.append((rid, sim))
            at += len(rids)
            if len(found) * len(chosen) < want * at and len(chosen) < len(self):
                break  # at this rate the rest would not be enough either: every memory within the filters
            step = len(chosen) - at
        if len(found) >= want or len(chosen) == len(self):
            return found
        within = allowed(None)
        rows = np.nonzero(np.isin(self.rids, np.fromiter(within, dtype=np.int64, count=len(within))))[0]
        chosen, sims = self._best(rows, query, len(rows))
        best: dict[int, float] = {}
        for rid, sim in zip(self.rids[chosen].tolist(), sims.tolist()):
            best.setdefault(rid, sim)  # best first: a memory's first is its nearest chunk
            if len(best) == want:
                break
        return list(best.items())

    def _hamming(self, query: np.ndarray) -> np.ndarray:
        """Each memory's Hamming distance between its sign code and the query's: worked
        out over the loaded rows (cheaper than gathering 100k sign codes into the
        memories' order), one 64-bit word at a time over blocks of rows (0.4 ms at 100k;
        a row at a time took 2 ms). Scratch stays small: a server's worker threads each
        keep what their searches used in their own C heap."""
        code = sign_codes(quantize(query[None, :])[0])[0]
        distance = np.zeros(self.signs.shape[1], dtype=np.uint16)
        for at in range(0, len(distance), HAMMING_ROWS):
            part = distance[at:at + HAMMING_ROWS]
            for words, bits in zip(self.signs[:, at:at + HAMMING_ROWS], code):
                part += np.bitwise_count(words ^ bits)
        return np.asarray(distance[self.rows])

    def _best(self, chosen: np.ndarray, query: np.ndarray, most: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``most`` of ``chosen`` (positions in ``rids``) nearest to ``query`` by
        exact cosine, best first, and their cosines. Scored a block at a time: 100k
        codes as float32 at once would be 150 MB."""
        sims = np.empty(len(chosen), dtype=np.float32)
        for at in range(0, len(chosen), SCORE_ROWS):
            rows = self.rows[chosen[at:at + SCORE_ROWS]]
            sims[at:at + len(rows)] = (self.codes[rows].astype(np.float32) @ query) / self.scales[rows]
        top = np.argpartition(-sims, most)[:most] if most < len(sims) else np.arange(len(sims))
        top = top[np.argsort(-sims[top], kind="stable")]
        return chosen[top], sims[top]


def _probe(path: Path) -> sqlite3.Connection:
    """A connection to the index of our own: it reads the memories' file versions and
    tells, by ``PRAGMA data_version``, when another connection changed them."""
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute(f"PRAGMA cache_size = {CACHE_KIB}")
    return conn


class Embedder:
    """Keeps the vectors file equal to the index's memories.

    ``catch_up`` embeds what is missing (on the caller's thread); ``start`` runs it on a
    background thread that ``wake()`` (after an index write) sets going; ``index()`` is
    the in-memory ``VectorIndex`` of the current rows."""

    def __init__(self, index: Index, folder: Path, encoder: Callable[[], Encoder] = shared_encoder) -> None:
        self.source = index
        self.store = VectorStore(folder)
        self.model = MODEL_NAME
        self._encoder = encoder
        self._work = threading.Lock()  # one embedding pass at a time (thread or inline)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._building = threading.Lock()
        self._cached: tuple[Any, VectorIndex] | None = None
        self._loaded: Loaded | None = None
        self._loaded_at = 0.0
        self._loaded_at_version = -1
        self._memories: tuple[Any, np.ndarray, np.ndarray] | None = None  # (index version, rids, keys)
        self._keys: tuple[int, np.ndarray] | None = None  # (vectors file version, its keys)
        self._checked: tuple[Any, np.ndarray, np.ndarray] | None = None  # (versions, missing, unused)
        self._probe = _probe(index.path)  # its data_version sees every commit
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
    def _indexed(self) -> tuple[np.ndarray, np.ndarray]:
        """(rids, file versions as ``DIGEST``) of every indexed memory, read again only
        when the index changed, a block of rows at a time (no 100k-row list)."""
        with self._probe_lock:
            version = self._index_version_locked()
            if self._memories is not None and self._memories[0] == version:
                return self._memories[1], self._memories[2]
            rids, keys = [], []
            for rows in _blocks(self._probe.execute("SELECT rid, sha256 FROM memories")):
                rids.append(np.array([r[0] for r in rows], dtype=np.int64))
                keys.append(digests([r[1] for r in rows]))
            found = (np.concatenate(rids) if rids else np.zeros(0, dtype=np.int64),
                     np.concatenate(keys) if keys else np.zeros(0, dtype=DIGEST))
            self._memories = (version, *found)
            return found

    def _stored_keys(self) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """The vectors file's keys as (keys, the order that sorts them, which are live):
        the loaded vectors' own while they are current (no second copy of 100k keys),
        else read from the file (sorted; every one live)."""
        version = self.store.version()
        loaded = self._loaded
        if loaded is not None and self._loaded_at_version == version:
            return loaded.view
        if self._keys is None or self._keys[0] != version:
            self._keys = (version, self.store.keys())
        return self._keys[1], None, None

    def _gap(self) -> tuple[np.ndarray, np.ndarray]:
        """(file versions without a vector, sorted; vectors no memory has), worked out
        again only when the index or the vectors file changed since the last time
        (every search asks)."""
        versions = self._index_version(), self.store.version()
        checked = self._checked
        if checked is not None and checked[0] == versions:
            return checked[1], checked[2]
        _, wanted = self._indexed()
        have, order, live = self._stored_keys()
        spot = find(have, wanted, order)
        if live is not None and len(have):  # a dead row is no vector of the file's
            spot[(spot >= 0) & ~live[np.maximum(spot, 0)]] = -1
        unused = ~np.isin(have, wanted)  # every chunk's row of a version no memory has
        if live is not None:
            unused &= live
        missing = np.unique(wanted[spot < 0])
        self._checked = (versions, missing, have[unused])
        return missing, have[unused]

    def counts(self) -> tuple[int, int]:
        """(memories in the index, memories without a vector)."""
        missing, _ = self._gap()
        _, keys = self._indexed()
        return len(keys), int(np.isin(keys, missing).sum())

    def catch_up(self, most: int | None = None, progress: Progress | None = None, wait: bool = True) -> int:
        """Embed the memories whose file version has no vector and drop vectors no
        memory has; returns how many were embedded. ``most``: do nothing when more are
        missing (a search leaves those to the background). ``wait=False``: do nothing
        while another pass runs. Stops between batches when the vault closes."""
        if not self._work.acquire(blocking=wait):
            return 0
        try:
            missing, unused = self._gap()
            if not len(missing) and not len(unused):
                return 0
            if most is not None and (len(missing) > most or self._text_size(missing) > INLINE_CHARS):
                return 0
            self.store.drop(set(hexes(unused)))
            todo = hexes(missing)
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
                    self._embed(rows)
                done += len(rows)
                if progress is not None:
                    progress(Step("embedding memories", done, len(todo)))
            self.error = None
            return done
        finally:
            self._work.release()

    def _text_size(self, versions: np.ndarray) -> int:
        """Characters of title and body of these file versions: a search embeds a few
        short memories itself, not a long note of hundreds of chunks."""
        row = self.source.query(
            "SELECT sum(length(title) + length(body)) AS size FROM (SELECT min(title) AS title, min(body) AS body "
            "FROM memories WHERE sha256 IN (SELECT value FROM json_each(?)) GROUP BY sha256)",
            (json.dumps(hexes(versions)),))
        return int(row[0]["size"] or 0) if row else 0

    def _embed(self, rows: list[Any]) -> None:
        """Every chunk of these memories embedded in one encode (its batches spread
        over the encoder's threads) and stored in one transaction."""
        encoder = self._encoder()
        keys: list[str] = []
        pieces: list[list[int]] = []
        for r in rows:
            chunks = encoder.chunks(embedded_text(r["title"], r["body"]), head=r["title"])
            pieces += chunks
            keys += [r["sha256"]] * len(chunks)
        self.store.put(keys, encoder.encode_ids(pieces))

    # ------------------------------------------------------------------ reading
    def _index_version(self) -> tuple[int, int]:
        with self._probe_lock:
            return self._index_version_locked()

    def _index_version_locked(self) -> tuple[int, int]:
        # The epoch changes when the index file was replaced and reopened: so must the probe.
        epoch = getattr(self.source, "_epoch", 0)
        if epoch != self._probe_epoch:
            self._probe.close()
            self._probe = _probe(self.source.path)
            self._probe_epoch = epoch
        return epoch, self._probe.execute("PRAGMA data_version").fetchone()[0]

    def index(self) -> VectorIndex:
        """The vectors of the current rows, rebuilt only when the vectors file or the
        index changed since the last call (two PRAGMAs tell): vectors committed since
        are appended to the loaded ones, the row map is made again when the index
        changed. One thread builds at a time (a search waits for the background
        thread's build rather than load a second copy)."""
        with self._building:
            stored_at = self.store.version()
            # While the background thread works through a large backlog it commits a batch
            # every few seconds; during a pass the loaded vectors serve for
            # RELOAD_WHILE_EMBEDDING seconds rather than be brought up to date after each.
            busy = self._thread is not None and self._work.locked()
            fresh = self._loaded is not None and time.monotonic() - self._loaded_at < RELOAD_WHILE_EMBEDDING
            if self._loaded is None or (self._loaded_at_version != stored_at and not (busy and fresh)):
                self._loaded_at = time.monotonic()
                if self._loaded is None or not self._loaded.refresh(self.store, self.store.keys()):
                    self._loaded = self._cached = None  # the old arrays go before the new ones come
                    self._loaded = Loaded.read(self.store)
                self._loaded_at_version = stored_at
                self._cached = self._keys = None  # the loaded keys serve from now on
            indexed_at = self._index_version()
            cached = self._cached
            if cached is not None and cached[0] == indexed_at:
                return cached[1]
            loaded = self._loaded
            rids, keys = self._indexed()
            owner, rows = loaded.rows_of(keys)
            built = VectorIndex(rids[owner], rows, loaded.codes, loaded.scales, loaded.signs)
            self._cached = (indexed_at, built)
            self._memories = None  # 4 MB at 100k, read again when the index next changes
            return built

    def encode_query(self, text: str) -> np.ndarray:
        return np.asarray(self._encoder().encode([text])[0])
