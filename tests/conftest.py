"""Shared fixtures: every test gets its own HOME and vault; nothing touches the real home."""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agent_memory import note as notes
from agent_memory.vault import Vault

# Columns that must be equal between a live index and a fresh rebuild (rid is an
# internal row number and may differ).
_COMPARED = (
    "path, id, own_id, namespace, title, tags, body, created, updated, expires, source, "
    "content_hash, size, mtime_ns, ctime_ns, inode, sha256, problems, conflict, meta"
)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AGENT_MEMORY_DIR", str(home / ".memory"))
    monkeypatch.delenv("AGENT_MEMORY_INDEX_DIR", raising=False)
    monkeypatch.delenv("AGENT_MEMORY_TOKEN", raising=False)
    # Where the semantic extra is installed, recall stays lexical in every test but the
    # semantic ones (tests/test_semantic.py points this at the real weights): no model here.
    monkeypatch.setenv("AGENT_MEMORY_MODEL", str(home / "no-model"))
    return home


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Clock:
    """A settable clock, so TTL tests need no sleeping."""

    def __init__(self, start: dt.datetime | None = None) -> None:
        self.now = start or dt.datetime(2026, 7, 20, 9, 0, tzinfo=dt.timezone.utc)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += dt.timedelta(**delta)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def vault_dir(tmp_path: Path) -> Path:
    return tmp_path / ".memory"


@pytest.fixture
def vault(vault_dir: Path, clock: Clock):
    v = Vault.init(vault_dir, clock=clock)
    yield v
    v.close()


def index_snapshot(db_path: Path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(db_path)
    try:
        return {
            "memories": conn.execute(f"SELECT {_COMPARED} FROM memories ORDER BY path").fetchall(),
            "tags": conn.execute(
                "SELECT m.path, t.tag FROM tags t JOIN memories m ON m.rid = t.rid ORDER BY 1, 2"
            ).fetchall(),
            "links": conn.execute(
                "SELECT m.path, l.relation, l.target FROM links l JOIN memories m ON m.rid = l.src ORDER BY 1, 2, 3"
            ).fetchall(),
        }
    finally:
        conn.close()


def assert_index_matches_files(vault: Vault) -> None:
    """The index must equal a fresh rebuild from the files alone, and FTS must be intact."""
    import shutil
    import tempfile

    fresh_dir = Path(tempfile.mkdtemp(prefix="fresh-index-"))
    try:
        fresh = Vault(vault.root, index_dir=fresh_dir, clock=vault.clock, sync=False)
        try:
            fresh.reindex(sweep=False)
        finally:
            fresh.close()
        rebuilt = index_snapshot(fresh_dir / "index.sqlite3")
    finally:
        shutil.rmtree(fresh_dir, ignore_errors=True)
    vault.index.ensure_current()
    live = index_snapshot(vault.index.path)
    assert live == rebuilt, "index differs from a rebuild from the files"
    vault.index.query("INSERT INTO fts (fts, rank) VALUES ('integrity-check', 1)")


@pytest.fixture
def parse_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every file parse (a spy: the real parser still runs)."""
    calls: list[str] = []
    real = notes.parse

    def spy(data: bytes, path: str) -> notes.Note:
        calls.append(path)
        return real(data, path)

    monkeypatch.setattr(notes, "parse", spy)
    return calls


CONSOLE_SCRIPT = Path(sys.executable).with_name("agent-memory")


def run_cli(
    *args: str,
    vault: Path | None = None,
    cwd: Path | None = None,
    stdin: str | None = None,
    console_script: bool = False,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """The CLI in a subprocess, as a user runs it: ``vault`` is passed as ``--dir``;
    without it the vault is found from ``cwd`` (AGENT_MEMORY_DIR is not set).
    ``console_script`` runs the installed ``agent-memory`` instead of ``python -m``."""
    command = [str(CONSOLE_SCRIPT)] if console_script else [sys.executable, "-m", "agent_memory"]
    if vault is not None:
        command += ["--dir", str(vault)]
    # The model setting stays (isolated_home's "no model": lexical, as in process).
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_MEMORY") or k == "AGENT_MEMORY_MODEL"}
    return subprocess.run([*command, *args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True,
                          timeout=timeout)


def wait_listening(process: subprocess.Popen[str], address: str, port: int, seconds: float = 20) -> int:
    """Wait until a server subprocess accepts connections on ``address:port``; fail with
    its stderr if it exits first, or kill it if it never listens. Returns the port."""
    import socket
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited: {process.stderr.read() if process.stderr else ''}")
        try:
            socket.create_connection((address, port), timeout=0.2).close()
            return port
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise AssertionError("server did not start listening")


def person_saves_before_the_swap(line: str = "A line a person just typed.\n", path: Path | None = None):
    """``locking.swap`` as it is now, except that a person saves the target (``path``, or
    any) once, just before the tool's swap: a save landing between the tool's check and
    its write. Once only: the tool's own swap back is no save."""
    from agent_memory import locking

    real_swap = locking.swap
    saved: list[int] = []

    def swap(tmp: Path, target: Path) -> bool:
        if not saved and (path is None or target == path):
            saved.append(target.write_text(target.read_text() + line))
        return real_swap(tmp, target)

    return swap
