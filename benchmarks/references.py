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

Times are CPU seconds (user + system) of this process or of the child: the machine is
shared, and wall time moves with a neighbour's load.
"""

from __future__ import annotations

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
