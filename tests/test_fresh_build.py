"""kill -9 of a real rebuild of an index with no rows (a first index, a deleted ``.index/``),
which commits its rows in steps into tables of its own and swaps them in at the end
(``loading.fresh_load``): whatever the point it dies at, a reader never sees part of the
index, and the next open gives the whole one.

Each test runs ``agent-memory reindex`` in a child whose steps are small (a step of rows
every ``STEP`` files, in batches of ``BATCH``) and which kills itself (SIGKILL) or pauses
at an exact point, counted by wrapping what still runs there; the kill lands where the
test says on any machine, however busy.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent_memory.errors import VaultError
from agent_memory.index.loading import FRESH
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, deadline, wait_until

FILES = 90  # all of them found by one search (of at most 100 hits)
BATCH, STEP = 10, 30
CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    from pathlib import Path
    from agent_memory.index import db, loading
    from agent_memory.cli import main
    root, point, at, flag = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    loading.STEP_ROWS = int(sys.argv[5])
    db.Index.load_fresh.__defaults__ = (int(sys.argv[6]),)
    calls = 0

    def stop():
        if flag.name == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        flag.with_name("paused").touch()  # pause, as told, until the parent says go
        while not flag.with_name("go").exists():
            time.sleep(0.01)

    def counted(name, before):
        real = getattr(db.Index, name) if hasattr(db.Index, name) else getattr(loading, name)

        def wrapped(*args, **kwargs):
            global calls
            if point == name:
                calls += 1
                if before and calls == at:
                    stop()
            result = real(*args, **kwargs)
            if point == name and not before and calls == at:
                stop()
            return result
        return wrapped

    db.Index._insert = counted("_insert", before=True)  # a batch of rows about to go in
    db.Index._merge_segments = staticmethod(counted("_merge_segments", before=True))  # the swap committed
    loading.swap_in = counted("swap_in", before=False)  # the swap done, not yet committed
    sys.argv = ["agent-memory", "--dir", root, "reindex"]
    main()
    """
)


def write_vault(root: Path) -> None:
    for k in range(FILES):
        folder = root / "2026" / f"{k // 28 + 1:02d}" / f"{k % 28 + 1:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"n{k}.md").write_text(f"---\ntags: [t{k % 7}]\naliases: [Alias {k}]\n---\n"
                                         f"Note {k} about the kettle [[n{(k + 1) % FILES}]].\n", encoding="utf-8")


def child(root: Path, point: str, at: int, flag: str) -> subprocess.Popen[str]:
    """``agent-memory reindex`` of ``root``'s deleted index in a child that, at the
    ``at``-th call of ``point``, kills itself (``flag`` "kill") or pauses."""
    return subprocess.Popen([sys.executable, "-c", CHILD, str(root), point, str(at), str(root.parent / flag),
                             str(STEP), str(BATCH)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def live_and_fresh(root: Path) -> tuple[int, int]:
    """The rows of the live table and of the fresh one (0 when there is none), as a reader
    of the file sees them: committed."""
    conn = sqlite3.connect(root / ".index" / "index.sqlite3")
    try:
        live = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        fresh = conn.execute(f"SELECT count(*) FROM sqlite_master WHERE name = 'memories{FRESH}'").fetchone()[0]
        rows = conn.execute(f"SELECT count(*) FROM memories{FRESH}").fetchone()[0] if fresh else 0
        return live, rows
    finally:
        conn.close()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_vault(tmp_path / "vault")
    return tmp_path / "vault"


# (what it wraps, which call, the rows a reader of the killed file finds in the live table and the fresh one)
KILLS = {
    "before any row": ("_insert", 1, 0, 0),
    "after two steps of rows": ("_insert", 7, 0, 2 * STEP),
    "in the swap, uncommitted": ("swap_in", 1, 0, FILES),
    "after the swap, before the merge": ("_merge_segments", 1, FILES, 0),
}


@pytest.mark.parametrize("where", KILLS)
def test_a_first_rebuild_killed_at_any_point_is_rebuilt_whole_on_the_next_open(root: Path, where: str) -> None:
    point, at, live, fresh = KILLS[where]
    killed = child(root, point, at, "kill")
    _out, err = killed.communicate(timeout=deadline(300))
    assert killed.returncode == -signal.SIGKILL, f"exit {killed.returncode}: {err}"
    # A reader of the file as the kill left it: the index before (empty) or the whole one.
    assert live_and_fresh(root) == (live, fresh)
    with Vault(root) as vault:
        assert vault.search("kettle", limit=100)["count"] == FILES
        assert vault.index.query(f"SELECT name FROM sqlite_master WHERE name LIKE '%{FRESH}%'") == []
        assert vault.index.query("PRAGMA integrity_check")[0][0] == "ok"
        assert_index_matches_files(vault)


@pytest.mark.parametrize("where", [where for where, (*_, fresh) in KILLS.items() if fresh])
def test_the_tables_a_killed_first_rebuild_left_are_dropped_by_the_next_open(root: Path, where: str) -> None:
    """Opened without a rebuild (the MCP server opens so, and reconciles later): the
    killed build's tables, up to a whole vault's rows, are dropped at once, their pages
    free for the index's next rows, not kept in the file until the next rebuild."""
    point, at, _live, fresh = KILLS[where]
    killed = child(root, point, at, "kill")
    _out, err = killed.communicate(timeout=deadline(300))
    assert killed.returncode == -signal.SIGKILL, f"exit {killed.returncode}: {err}"
    assert live_and_fresh(root) == (0, fresh)
    with Vault(root, sync=False) as vault:
        assert vault.index.query(f"SELECT name FROM sqlite_master WHERE name LIKE '%{FRESH}%'") == []
        assert vault.index.query("PRAGMA freelist_count")[0][0] > 0
        assert vault.list(limit=100)["total"] == 0  # the index before the build, as a reader saw it
    with Vault(root) as vault:
        assert vault.search("kettle", limit=100)["count"] == FILES
        assert vault.index.query("PRAGMA integrity_check")[0][0] == "ok"
        assert_index_matches_files(vault)


def test_an_open_while_another_process_holds_the_vault_lock_leaves_the_fresh_tables(root: Path) -> None:
    """Another process holding the vault's lock may be the build that fills those tables
    (between two of its steps no SQLite transaction shows it): the open leaves them, and
    does not wait; the first open after the lock is free drops them."""
    point, at, _live, fresh = KILLS["after two steps of rows"]
    killed = child(root, point, at, "kill")
    _out, err = killed.communicate(timeout=deadline(300))
    assert killed.returncode == -signal.SIGKILL, f"exit {killed.returncode}: {err}"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys
        from pathlib import Path
        from agent_memory.disk.locking import WriteLock
        with WriteLock(Path(sys.argv[1])).hold():
            print("held", flush=True)
            sys.stdin.read()
        """), str(root / ".index" / "write.lock")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with Vault(root, sync=False) as vault:
            assert vault.list(limit=100)["total"] == 0
        assert live_and_fresh(root) == (0, fresh)
    finally:
        holder.communicate("", timeout=deadline(60))
    with Vault(root, sync=False):
        pass
    assert live_and_fresh(root) == (0, 0)


def test_a_reader_during_a_first_rebuild_sees_no_part_of_it_and_a_command_waits_for_the_whole(root: Path) -> None:
    """Paused after two steps of rows are committed: a reader of the index finds it empty,
    as before the rebuild, and a search started then waits for the rebuild's lock and
    answers from the whole index."""
    building = child(root, "_insert", 7, "pause")
    try:
        wait_until(lambda: (root.parent / "paused").exists() or building.poll() is not None, "the rebuild pauses")
        assert building.poll() is None, building.communicate()
        assert live_and_fresh(root) == (0, 2 * STEP)
        with Vault(root, sync=False) as reader:  # reads that need no write (the rebuild holds the lock)
            assert reader.list(limit=100)["total"] == 0
            assert reader.index.query("SELECT count(*) FROM fts WHERE fts MATCH 'kettle'")[0][0] == 0
        assert live_and_fresh(root) == (0, 2 * STEP)  # the open left the build's tables to it
        search = subprocess.Popen([sys.executable, "-m", "agent_memory", "--dir", str(root), "--json", "search",
                                   "kettle", "--limit", "100"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        (root.parent / "go").touch()
        out, err = search.communicate(timeout=deadline(300))
        assert search.returncode == 0, err
        assert json.loads(out)["count"] == FILES
    finally:
        (root.parent / "go").touch()
        building.communicate(timeout=deadline(300))
    assert building.returncode == 0
    with Vault(root) as vault:
        assert vault.search("kettle", limit=100)["count"] == FILES
        assert_index_matches_files(vault)


def test_a_first_rebuild_meeting_a_full_disk_says_so_and_the_next_one_is_whole(root: Path) -> None:
    """SQLite's "database or disk is full" while the rows go in: the error
    says so, the index stays as it was (empty, its settings as before), and the next
    rebuild drops what the failed one committed and builds the whole index."""
    big = root / "2026" / "12" / "01"
    big.mkdir(parents=True)
    for k in range(28):
        (big / f"big{k}.md").write_text(f"Big note {k}. " + "printer words " * 3000, encoding="utf-8")
    with Vault(root, sync=False) as vault:
        conn = vault.index.conn
        cache, pages = conn.execute("PRAGMA cache_size").fetchone()[0], conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + 40}")
        try:
            with pytest.raises(VaultError, match="disk is full"):
                vault.reindex()
        finally:
            conn.execute("PRAGMA max_page_count = 4294967294")
        assert conn.execute("PRAGMA cache_size").fetchone()[0] == cache
        assert vault.list(limit=100)["total"] == 0
        assert vault.index.query(f"SELECT count(*) FROM sqlite_master WHERE name = 'memories{FRESH}'")[0][0] == 1
        vault.reindex()
        assert vault.list(limit=100)["total"] == FILES + 28
        assert vault.index.query(f"SELECT name FROM sqlite_master WHERE name LIKE '%{FRESH}%'") == []
        assert_index_matches_files(vault)
