"""What the machine itself does, measured beside agent-memory in the same run: the floors
the speed targets are ratios to. Frozen: ``scale.py`` checks this file's SHA-256 against
the value recorded when the references were written, before any tuning, so a reference
cannot be slowed down to make a ratio hold. Change it only on purpose, with the new hash
and the reason recorded in benchmarks/RESULTS.md.

- ``plain_loop``: a full reindex's floor. One Python loop: walk the folders, read each
  ``.md`` file, split its front matter from its body at the fences, insert path, front
  matter and body into a plain FTS5 table (the index's tokenizer), in one transaction.
  No YAML, no title, tags, links or stat bookkeeping.
- ``bare_start``: a command's fixed cost's floor: a bare interpreter importing sqlite3.
- ``plain_table`` + ``bare_queries``: recall's floor. The plain loop's table kept on disk,
  and one FTS5 statement a question: the words quoted and AND-ed (or OR-ed), ranked by
  bm25, ``LIMIT`` rows of path, front matter and a ``snippet()`` of the body (what a hit
  needs to be shown), fetched whole.
- ``fsync_floor``: a write's floor. A new ~500-byte file created in one folder, written,
  fsynced, closed, and the folder fsynced: the least a durable save can do.
- ``raw_writes``: an import's floor. One file a text written (no fsync), then one
  ``syncfs`` of their file system (``os.sync`` where there is none).

Times are CPU seconds (user + system) of this process or of the child: the machine is
shared, and wall time moves with a neighbour's load. The two disk floors are wall seconds:
their cost is waiting on the disk, which CPU time does not see.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

TOKENIZER = "porter unicode61 remove_diacritics 2"


def cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def plain_loop(root: Path) -> int:
    """Walk, read, split at the fences and insert into plain FTS5, in one loop; the count."""
    with tempfile.TemporaryDirectory() as scratch:
        conn = sqlite3.connect(Path(scratch) / "plain.sqlite3", isolation_level=None)
        conn.execute(f"CREATE VIRTUAL TABLE notes USING fts5(path, fm, body, tokenize='{TOKENIZER}')")
        conn.execute("BEGIN")
        count = 0
        stack = [(str(root), "")]
        while stack:
            folder, prefix = stack.pop()
            for entry in os.scandir(folder):
                if entry.is_dir(follow_symlinks=False):
                    if not entry.name.startswith("."):
                        stack.append((entry.path, prefix + entry.name + "/"))
                elif entry.name.endswith(".md"):
                    with open(entry.path, "rb") as handle:
                        text = handle.read().decode("utf-8", "replace")
                    fm, body = "", text
                    if text.startswith("---\n"):
                        end = text.find("\n---\n", 3)
                        if end != -1:
                            fm, body = text[4:end], text[end + 5:]
                    conn.execute("INSERT INTO notes (path, fm, body) VALUES (?, ?, ?)", (prefix + entry.name, fm, body))
                    count += 1
        conn.execute("COMMIT")
        conn.close()
    return count


def child_cpu(command: list[str]) -> float:
    """CPU seconds (user + system) a child process spent, from its own rusage."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{command} exited with {process.returncode}")
    return usage.ru_utime + usage.ru_stime


def bare_start(python: str = sys.executable) -> float:
    """A bare interpreter importing sqlite3: CPU seconds of one run."""
    return child_cpu([python, "-c", "import sqlite3"])


def plain_table(root: Path, database: Path) -> int:
    """The plain loop's FTS5 table, built the same way but kept at ``database``; the count."""
    conn = sqlite3.connect(database, isolation_level=None)
    conn.execute(f"CREATE VIRTUAL TABLE notes USING fts5(path, fm, body, tokenize='{TOKENIZER}')")
    conn.execute("BEGIN")
    count = 0
    stack = [(str(root), "")]
    while stack:
        folder, prefix = stack.pop()
        for entry in os.scandir(folder):
            if entry.is_dir(follow_symlinks=False):
                if not entry.name.startswith("."):
                    stack.append((entry.path, prefix + entry.name + "/"))
            elif entry.name.endswith(".md"):
                with open(entry.path, "rb") as handle:
                    text = handle.read().decode("utf-8", "replace")
                fm, body = "", text
                if text.startswith("---\n"):
                    end = text.find("\n---\n", 3)
                    if end != -1:
                        fm, body = text[4:end], text[end + 5:]
                conn.execute("INSERT INTO notes (path, fm, body) VALUES (?, ?, ?)", (prefix + entry.name, fm, body))
                count += 1
    conn.execute("COMMIT")
    conn.close()
    return count


def bare_queries(database: Path, questions: list[str], joiner: str = " AND ", limit: int = 10) -> float:
    """CPU seconds to answer every question with one bare FTS5 statement each."""
    conn = sqlite3.connect(database)
    sql = ("SELECT path, fm, snippet(notes, 2, '[', ']', '…', 16) FROM notes WHERE notes MATCH ? "
           "ORDER BY bm25(notes) LIMIT ?")
    before = cpu_self()
    for question in questions:
        words = ['"' + word.replace('"', '""') + '"' for word in question.split()]
        conn.execute(sql, (joiner.join(words), limit)).fetchall()
    spent = cpu_self() - before
    conn.close()
    return spent


def fsync_floor(folder: Path, count: int, size: int = 500) -> float:
    """Wall seconds for ``count`` durable saves: create, write, fsync, close, fsync the folder."""
    import time

    folder.mkdir(parents=True, exist_ok=True)
    data = (b"x" * (size - 1)) + b"\n"
    start = time.perf_counter()
    for number in range(count):
        fd = os.open(folder / f"floor-{number}.md", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        folder_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(folder_fd)
        finally:
            os.close(folder_fd)
    return time.perf_counter() - start


def raw_writes(folder: Path, texts: list[str]) -> float:
    """Wall seconds to write one file a text, unsynced, then one sync of their file system."""
    import time

    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for number, text in enumerate(texts):
        with open(folder / f"raw-{number}.md", "w", encoding="utf-8") as handle:
            handle.write(text)
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True) if sys.platform.startswith("linux") else None
    if libc is not None:
        fd = os.open(folder, os.O_RDONLY)
        try:
            libc.syncfs(fd)
        finally:
            os.close(fd)
    else:
        os.sync()
    return time.perf_counter() - start
