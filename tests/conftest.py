"""Shared fixtures: every test gets its own HOME and vault; nothing touches the real home."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from agent_memory.index.derived import DERIVED
from agent_memory.note import parse as parsing
from agent_memory.note.parse import Note
from agent_memory.vault.vault import Vault

# Columns that must be equal between a live index and a fresh rebuild (rid is an
# internal row number and may differ).
_COMPARED = (
    "path, id, own_id, namespace, title, tags, body, created, updated, expires, source, "
    "content_hash, size, mtime_ns, ctime_ns, inode, sha256, problems, conflict, meta"
)


SHM_NEEDED = 2 << 30  # the suite's files at their peak, with room: a container's 64 MB /dev/shm is not enough


def _free_bytes(folder: Path) -> int:
    stats = os.statvfs(folder)
    return stats.f_bavail * stats.f_frsize


def pytest_configure(config: pytest.Config) -> None:
    """Temporary folders in memory (``/dev/shm``) unless TMPDIR says where.

    Every test writes real files and a real SQLite index, and every write is made
    durable with fsync as in use; on a disk other work shares, those fsyncs were a
    third of the suite's time and most of its variance. On tmpfs the same calls run
    and cost nothing. ``TMPDIR=/tmp python -m pytest`` runs it on the disk."""
    shm = Path("/dev/shm")
    if ("TMPDIR" not in os.environ and config.option.basetemp is None and shm.is_dir() and os.access(shm, os.W_OK)
            and _free_bytes(shm) >= SHM_NEEDED):
        import tempfile

        os.environ["TMPDIR"] = str(shm)  # the tests' subprocesses inherit it
        tempfile.tempdir = None  # read TMPDIR again: pytest's tmp_path_factory asks tempfile


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AGENT_MEMORY_DIR", str(home / ".memory"))
    monkeypatch.delenv("AGENT_MEMORY_INDEX_DIR", raising=False)
    monkeypatch.delenv("AGENT_MEMORY_TOKEN", raising=False)
    # This user's state (the register of open operations, approved settings) stays in the
    # test's own home, like everything else.
    monkeypatch.delenv("AGENT_MEMORY_STATE_DIR", raising=False)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
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
        conn.execute("BEGIN")  # one read transaction: every table as of one moment, while a watcher writes
        return {
            "memories": conn.execute(f"SELECT {_COMPARED} FROM memories ORDER BY path").fetchall(),
            "tags": conn.execute(
                "SELECT m.path, t.tag FROM tags t JOIN memories m ON m.rid = t.rid ORDER BY 1, 2"
            ).fetchall(),
            "counts": conn.execute("SELECT memories FROM counts").fetchall(),
            "names": conn.execute(
                "SELECT m.path, n.key FROM names n JOIN memories m ON m.rid = n.rid ORDER BY 1, 2"
            ).fetchall(),
            "links": conn.execute(
                "SELECT m.path, l.relation, l.target FROM links l JOIN memories m ON m.rid = l.src ORDER BY 1, 2, 3"
            ).fetchall(),
            "props": conn.execute(
                "SELECT m.path, p.key, p.value FROM props p JOIN memories m ON m.rid = p.rid ORDER BY 1, 2, 3"
            ).fetchall(),
            "prop_keys": conn.execute(
                "SELECT m.path, k.key FROM prop_keys k JOIN memories m ON m.rid = k.rid ORDER BY 1, 2"
            ).fetchall(),
            "derived": conn.execute("SELECT name FROM derived ORDER BY 1").fetchall(),
            "deriving": conn.execute("SELECT name FROM deriving ORDER BY 1").fetchall(),
            "words": conn.execute("SELECT term, doc, cnt FROM words_vocab ORDER BY 1").fetchall(),
        }
    finally:
        conn.close()


def assert_index_matches_files(vault: Vault) -> None:
    """The index must equal a fresh rebuild from the files alone, and FTS must be intact.
    The tables built on first use (``Index.derive``) are compared as the live index has
    them (kept by its writes since it built them) against the rebuild's built afterwards,
    then every one of them built on both."""
    import shutil
    import tempfile

    vault.index.ensure_current()
    while True:  # a build part-way (left by a stopped one, or a watcher's under way): finished first, the
        live = index_snapshot(vault.index.path)  # part its writes kept must equal a rebuild's build
        if not live["deriving"]:
            break
        for (name,) in live["deriving"]:
            vault.index.derive(name)
    built = [name for (name,) in live["derived"]]
    fresh_dir = Path(tempfile.mkdtemp(prefix="fresh-index-"))
    try:
        fresh = Vault(vault.root, index_dir=fresh_dir, clock=vault.clock, sync=False)
        try:
            fresh.reindex(sweep=False)
            for name in built:
                fresh.index.derive(name)
            rebuilt = index_snapshot(fresh_dir / "index.sqlite3")
            assert live == rebuilt, "index differs from a rebuild from the files"
            for name in DERIVED:
                fresh.index.derive(name)
                vault.index.derive(name)
            rebuilt = index_snapshot(fresh_dir / "index.sqlite3")
        finally:
            fresh.close()
    finally:
        shutil.rmtree(fresh_dir, ignore_errors=True)
    assert index_snapshot(vault.index.path) == rebuilt, "derived tables differ from a rebuild's"
    vault.index.query("INSERT INTO fts (fts, rank) VALUES ('integrity-check', 1)")
    vault.index.query("INSERT INTO words (words) VALUES ('integrity-check')")


@pytest.fixture
def parse_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every file parse (a spy: the real parser still runs)."""
    calls: list[str] = []
    real = parsing.parse

    def spy(data: bytes, path: str) -> Note:
        calls.append(path)
        return real(data, path)

    monkeypatch.setattr(parsing, "parse", spy)
    return calls


# --------------------------------------------------------------------------- waiting

# Every deadline in the suite is scaled by this one variable (default 1), so a slow or
# crowded machine can stretch them all without editing a test:
#   AGENT_MEMORY_TEST_DEADLINE_SCALE=4 python -m pytest
# A deadline only bounds how long a test waits for something that should happen; no test
# asserts how fast anything is (speed is measured in benchmarks/, against a same-run reference).
DEADLINE_SCALE = float(os.environ.get("AGENT_MEMORY_TEST_DEADLINE_SCALE") or 1)
T = TypeVar("T")


def deadline(seconds: float) -> float:
    """``seconds`` scaled by ``AGENT_MEMORY_TEST_DEADLINE_SCALE``: every hang guard in the
    suite (a subprocess's ``timeout``, a thread's ``join``) goes through here."""
    return seconds * DEADLINE_SCALE


def wait_until(condition: Callable[[], T], what: str, seconds: float = 120.0, every: float | None = None) -> T:
    """Poll ``condition`` until it returns something truthy and return that; fail naming
    ``what`` after the (scaled) deadline. The one way the suite waits for something.
    Polls back off from 1 ms to 50 ms, or come ``every`` seconds (to act the moment a
    file appears)."""
    limit = deadline(seconds)
    end = time.monotonic() + limit
    pause = every or 0.001
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {limit:g} s waiting until {what}")
        time.sleep(pause)
        if every is None:
            pause = min(pause * 2, 0.05)


async def wait_until_async(condition: Callable[[], Awaitable[T]], what: str, seconds: float = 120.0) -> T:
    """``wait_until`` for a condition that must be awaited (an MCP call): the event loop
    runs while it waits."""
    import anyio

    limit = deadline(seconds)
    end = time.monotonic() + limit
    while True:
        value = await condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {limit:g} s waiting until {what}")
        await anyio.sleep(0.05)


CONSOLE_SCRIPT = Path(sys.executable).with_name("agent-memory")


PROGRESS_LINE = re.compile(r"[^:\n]+: \d+(/\d+)?")


@dataclass
class CliResult:
    """What a CLI run left: the exit code and the two streams, apart (the fields of a
    ``subprocess.CompletedProcess``, whichever way the command ran)."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def said(self) -> list[str]:
        """What the command told the person on stderr, without the progress lines long
        work prints after a few seconds (``phase: done/total``): a busy machine makes
        short work long, and those lines are not what a test about messages counts."""
        return [line for line in self.stderr.strip().splitlines() if not PROGRESS_LINE.fullmatch(line)]


def run_cli(
    *args: str,
    vault: Path | None = None,
    cwd: Path | None = None,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    color: bool = False,
    spawn: bool = False,
    console_script: bool = False,
    timeout: float = 120,
) -> CliResult:
    """The CLI as a user runs it: ``vault`` is passed as ``--dir``; without it the vault
    is found from ``cwd``. No AGENT_MEMORY_* variable but AGENT_MEMORY_MODEL is set unless ``env`` sets it.

    In process by default, through click's runner: stdout and stderr apart, the exit
    code that ``sys.exit`` or an error gives, and an exception no command should let
    escape fails the test (a subprocess would print its traceback). ``spawn`` runs
    ``python -m agent_memory`` in a subprocess instead, ``console_script`` the installed
    ``agent-memory`` script: for the few tests that prove the real entry points."""
    command = ["--dir", str(vault)] if vault is not None else []
    command += args
    # The model setting stays (isolated_home's "no model": lexical, as before the extra).
    unset = {k: None for k in os.environ if k.startswith("AGENT_MEMORY") and k != "AGENT_MEMORY_MODEL"}
    if spawn or console_script:
        program = [str(CONSOLE_SCRIPT)] if console_script else [sys.executable, "-m", "agent_memory"]
        environ = {k: v for k, v in {**os.environ, **unset, **(env or {})}.items() if v is not None}
        done = subprocess.run([*program, *command], cwd=cwd, env=environ, input=stdin, capture_output=True, text=True,
                              timeout=deadline(timeout))
        return CliResult(done.returncode, done.stdout, done.stderr)
    from click.testing import CliRunner

    from agent_memory.cli.app import cli
    from agent_memory.cli.options import GlobalOptions

    threads = set(threading.enumerate())
    with contextlib.chdir(cwd or os.getcwd()):
        result = CliRunner().invoke(cli, command, input=stdin, env={**unset, **(env or {})}, color=color,
                                    obj=GlobalOptions(), prog_name="agent-memory", catch_exceptions=False,
                                    terminal_width=80)  # as on a pipe: help is wrapped the same everywhere
    left = [t.name for t in set(threading.enumerate()) - threads]
    assert not left, f"agent-memory {' '.join(args)} left threads running: {left}"  # a process would have ended
    return CliResult(result.exit_code, result.stdout, result.stderr)


def run_with_terminal_stderr(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[bytes], bytes]:
    """Run the installed console script with stderr on a pseudo-terminal, as in a user's
    shell (a subprocess: only a real terminal shows the progress bar); stdout is piped.
    Returns the finished process and every byte the terminal received."""
    import pty

    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "AGENT_MEMORY_DIR"}
    env.update(TERM="xterm", COLUMNS="100")
    try:
        done = subprocess.run([str(CONSOLE_SCRIPT), *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=slave,
                              timeout=deadline(120))
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
    return done, b"".join(chunks)


def cli_ok(*args: str, **options: Any) -> str:
    """``run_cli`` for a command that must succeed: its stdout."""
    result = run_cli(*args, **options)
    assert result.returncode == 0, result.stderr
    return result.stdout


def wait_listening(process: subprocess.Popen[str], address: str, port: int, seconds: float = 120) -> int:
    """Wait until a server subprocess accepts connections on ``address:port``; fail with
    its stderr if it exits first, or kill it if it never listens. Returns the port."""
    import socket

    def listening() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"server exited: {process.stderr.read() if process.stderr else ''}")
        try:
            socket.create_connection((address, port), timeout=0.2).close()
        except OSError:
            return False
        return True

    try:
        wait_until(listening, f"the server listens on {address}:{port}", seconds)
    except AssertionError:
        process.kill()
        raise
    return port


def symlink_swapped_before_publish(monkeypatch: pytest.MonkeyPatch, folder: Path, elsewhere: Path) -> None:
    """An import's planned folder replaced by a link to ``elsewhere`` the moment before
    its staged files are published (another process's doing)."""
    from agent_memory.disk.staging import Staging

    publish = Staging.publish

    def swapped_first(self: Staging, *args: Any, **kwargs: Any) -> Any:
        os.rmdir(folder)
        os.symlink(elsewhere, folder, target_is_directory=True)
        return publish(self, *args, **kwargs)

    monkeypatch.setattr(Staging, "publish", swapped_first)


def person_saves_before_the_swap(line: str = "A line a person just typed.\n", path: Path | None = None):
    """``locking.swap`` as it is now, except that a person saves the target (``path``, or
    any) once, just before the tool's swap: a save landing between the tool's check and
    its write. Once only: the tool's own swap back is no save."""
    from agent_memory.disk import locking

    real_swap = locking.swap
    saved: list[int] = []

    def swap(tmp: Path, target: Path) -> bool:
        if not saved and (path is None or target == path):
            saved.append(target.write_text(target.read_text() + line))
        return real_swap(tmp, target)

    return swap


@contextlib.asynccontextmanager
async def mcp_client(vault: Vault, **options: Any) -> AsyncIterator[Any]:
    """The MCP server over ``vault``, through the real SDK client, in memory (``options``
    go to ``mcp.Client``, e.g. ``mode="legacy"``)."""
    from mcp import Client

    from agent_memory.server.app import build_server

    async with Client(build_server(vault), **options) as connected:
        yield connected


@pytest.fixture
async def client(vault: Vault) -> AsyncIterator[Any]:
    """``mcp_client`` over the test's ``vault``."""
    async with mcp_client(vault) as connected:
        yield connected


async def tool_ok(client: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed: its structured result, which its text block (what
    a model without structured output reads) must hold as the same JSON."""
    import json

    result = await client.call_tool(tool, arguments)
    assert result.is_error is False, result.content[0].text
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def tool_error(client: Any, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail: the error text the model sees (no structured result)."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error is True and result.structured_content is None, result.content[0].text
    return result.content[0].text


# --------------------------------------------------------------------------- git and watchers

WATCH_DEADLINE = deadline(120)  # generous: a busy machine; a healthy start takes milliseconds


@pytest.fixture
def git_isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """git as the tests run it: no repository above the test's folder, no system
    config, and none of the caller's GIT_DIR/GIT_WORK_TREE/GIT_INDEX_FILE."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def team_git(git_isolated: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """git as a team's tests run it (``gitteam.py``): isolated, no global config, every
    commit by one author."""
    from gitteam import AUTHOR

    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    for name, value in AUTHOR.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def watch(vault: Vault) -> Iterator[Callable[..., Any]]:
    """Start watchers (each back once its start-up sweep is done, so every later change
    reaches the index through its event); every one is stopped and joined, and no
    thread is left behind."""
    from agent_memory.watch.watcher import Watcher

    before = set(threading.enumerate())
    started: list[Watcher] = []

    def start(target: Vault = vault, **kwargs: Any) -> Watcher:
        watcher = Watcher(target, **kwargs)
        started.append(watcher)
        watcher.start()
        assert watcher.swept.wait(WATCH_DEADLINE), "the watcher's start-up sweep did not finish"
        return watcher

    try:
        yield start
    finally:
        for watcher in started:
            watcher.stop()
        leftover = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        assert not leftover, f"threads still running after stop(): {leftover}"


class Served:
    """``agent-memory serve --http --port 0 …`` as a real process: the port it logged,
    and its log (stderr, read as it comes on a thread)."""

    SCRIPT = Path(sys.executable).with_name("agent-memory")

    def __init__(self, vault_dir: Path, *args: str, host: str = "127.0.0.1", env: dict[str, str] | None = None,
                 seconds: float = 120) -> None:
        import re

        environment = {k: v for k, v in os.environ.items() if k != "AGENT_MEMORY_TOKEN"}
        self.process = subprocess.Popen(
            [str(self.SCRIPT), "serve", "--http", "--host", host, "--port", "0", "--dir", str(vault_dir), *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={**environment, **(env or {})},
        )
        self._lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

        def listening() -> re.Match[str] | None:
            if self.process.poll() is not None:
                raise AssertionError(f"server exited:\n{self.stop(check=False)}")
            return re.search(r"serving .* on http://(\S+):(\d+)/mcp", self.log())

        try:
            found = wait_until(listening, "the server logs where it listens", seconds)
        except AssertionError:
            self.process.kill()
            raise
        self.host, self.port = found.group(1), int(found.group(2))
        self.url = f"http://{self.host}:{self.port}/mcp"

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._lines.append(line)

    def log(self) -> str:
        return "".join(self._lines)

    def wait_log(self, text: str, seconds: float = 120) -> None:
        wait_until(lambda: text in self.log(), f"the server logs {text!r}", seconds)

    def stop(self, check: bool = True) -> str:
        """SIGTERM: uvicorn shuts the app down and the server exits cleanly (status 0, no
        traceback), as a service manager expects. Returns the whole log."""
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(timeout=deadline(120))
        self._reader.join(timeout=deadline(120))
        log = self.log()
        if check:
            assert self.process.returncode == 0, log
            assert "Traceback" not in log, log
        return log


@pytest.fixture(scope="session")
def model_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The semantic model's weights, found once per session: AGENT_MEMORY_MODEL, else the
    installed model package extracted into a session folder (never the real home). A
    missing extra or missing weights skip the test, and fail it where CI sets
    AGENT_MEMORY_TEST_SEMANTIC=required."""
    from agent_memory.semantic.status import extra_installed

    required = os.environ.get("AGENT_MEMORY_TEST_SEMANTIC") == "required"
    if not extra_installed():
        if required:
            raise RuntimeError("AGENT_MEMORY_TEST_SEMANTIC=required, but the semantic extra is not installed")
        pytest.skip('the semantic extra is not installed (pip install "agent-memory[semantic]")')
    from agent_memory.semantic import model_files

    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("model-cache"))
    try:
        return model_files.model_dir()
    except model_files.ModelMissing as exc:
        if required:
            raise
        pytest.skip(f"the all-MiniLM-L6-v2 weights are not installed: {exc}")
    finally:
        if old is None:
            del os.environ["XDG_CACHE_HOME"]
        else:
            os.environ["XDG_CACHE_HOME"] = old


def read_all(master: int) -> bytes:
    """Everything a pseudo-terminal's other end wrote, once it closed (Linux ends the
    read with EIO when the last writer is gone)."""
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            return shown
        if not chunk:
            return shown
        shown += chunk


def obsidian_like(root: Path, home: str) -> Path:
    """An Obsidian-like vault at ``root`` (its ``.obsidian/`` folder, no index yet):
    ``en/Plugins/Slides.md`` and ``en/Home.md`` holding ``home``."""
    (root / ".obsidian").mkdir(parents=True)
    (root / "en" / "Plugins").mkdir(parents=True)
    (root / "en" / "Plugins" / "Slides.md").write_text("# Slides\nPresent a note as slides.\n")
    (root / "en" / "Home.md").write_text(home)
    return root
