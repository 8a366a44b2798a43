"""Nothing a person wrote is lost, moved or leaked: full disks, vanished vaults, two index
locations, symlinked control folders, files swapped at read time, crash leftovers,
read-only vaults."""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agent_memory.disk import store as store_module
from agent_memory.errors import InvalidInput, PathRefused, ReadOnlyFile, SavedMeanwhile, VaultError, VaultGone
from agent_memory.index.db import Index
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, run_cli, person_saves_before_the_swap, deadline, wait_until


def md_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md") if ".trash" not in p.parts)


# ----------------------------------------------------------------------------- 8. a full disk


def _forget_on_a_full_disk(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A memory remembered, then forgotten while its index write fails (a full disk)."""
    gone = vault.remember("The VPN needs the hardware key")["memory"]

    def full(*_args: object, **_kwargs: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Index, "delete", full)
    with pytest.raises(VaultError, match="index could not be updated .*nothing is lost"):
        vault.forget(gone["id"])
    monkeypatch.undo()
    return dict(gone)


def test_a_failed_index_write_marks_the_index_stale_and_the_next_open_rebuilds_it(
    vault: Vault, clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = vault.remember("The staging database resets on Sundays")["memory"]
    gone = _forget_on_a_full_disk(vault, monkeypatch)
    assert (vault.root / ".index" / "stale").exists()
    assert not (vault.root / gone["path"]).exists()  # the file did move to the trash
    vault.close()
    with Vault(vault.root, clock=clock) as reopened:
        assert not (vault.root / ".index" / "stale").exists()
        assert [h["id"] for h in reopened.search("staging database")["hits"]] == [kept["id"]]
        assert reopened.search("hardware key")["count"] == 0
        assert_index_matches_files(reopened)


def test_a_stale_mark_planted_as_a_link_is_never_written_through_nor_obeyed(
    vault: Vault, clock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``.index/stale`` is a record the tool leaves itself; a clone can bring a link there
    (force-added): the mark of a failed index write never writes through it, and a link
    is no mark: the next open does not rebuild for it, nor remove it."""
    private = tmp_path / "private.txt"
    private.write_text("someone's own file\n")
    mark = vault.root / ".index" / "stale"
    mark.symlink_to(private)
    _forget_on_a_full_disk(vault, monkeypatch)
    assert private.read_text() == "someone's own file\n"
    vault.close()
    rebuilds: list[int] = []
    replace_all = Index.replace_all
    monkeypatch.setattr(Index, "replace_all", lambda self, *a, **k: rebuilds.append(1) or replace_all(self, *a, **k))
    with Vault(vault.root, clock=clock) as reopened:
        assert rebuilds == [] and mark.is_symlink()
        assert reopened.search("hardware key")["count"] == 0  # the walk found the forgotten file gone
    assert private.read_text() == "someone's own file\n"


def test_a_stale_mark_planted_as_a_pipe_never_hangs_a_failed_write(
    vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A FIFO at ``.index/stale`` (a synced folder can bring one): opening it to write
    would wait for a reader forever, with the vault's write lock held."""
    import threading

    mark = vault.root / ".index" / "stale"
    os.mkfifo(mark)
    done = threading.Event()

    def failing_write() -> None:
        try:
            _forget_on_a_full_disk(vault, monkeypatch)
        finally:
            done.set()

    worker = threading.Thread(target=failing_write, daemon=True)
    worker.start()
    finished = done.wait(timeout=60)
    if not finished:  # unblock the write the old code hung in, so the suite goes on
        os.close(os.open(mark, os.O_RDONLY | os.O_NONBLOCK))
        done.wait(timeout=60)
    worker.join(timeout=60)
    assert finished, "a failed index write hung opening the FIFO planted at .index/stale"
    assert stat.S_ISFIFO(os.lstat(mark).st_mode)


def test_a_rebuild_on_a_full_disk_says_no_file_was_touched(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    """``reindex`` writes no file: its full-disk error must not claim one was written
    (an agent told "the file was written" after a failed remember does not retry)."""
    kept = vault.remember("The staging database resets on Sundays")["memory"]

    def full(*_args: object, **_kwargs: object) -> int:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Index, "replace_all", full)
    with pytest.raises(VaultError, match="files are as they were, but the index could not be updated") as raised:
        vault.reindex()
    assert "file was written" not in str(raised.value)
    monkeypatch.undo()
    assert (vault.root / kept["path"]).exists()
    assert (vault.root / ".index" / "stale").exists()


def test_opening_on_a_full_disk_warns_in_one_line_and_still_reads(
    vault: Vault, clock, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture
) -> None:
    kept = vault.remember("The staging database resets on Sundays")["memory"]
    vault.close()
    (vault.root / "by-hand.md").write_text("A note written while the disk was full\n")

    def full(*_args: object, **_kwargs: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Index, "upsert", full)
    with Vault(vault.root, clock=clock) as reopened:
        [warning] = caplog.records
        said = warning.getMessage()
        assert "could not bring the index up to date" in said and "\n" not in said and warning.exc_info is None
        assert "Traceback" not in capsys.readouterr().err
        assert [h["id"] for h in reopened.search("staging database")["hits"]] == [kept["id"]]


def test_cli_reads_never_print_a_traceback_on_a_broken_index(tmp_path: Path) -> None:
    root = tmp_path / ".memory"
    run_cli("init", vault=root)
    run_cli("add", "The staging database resets on Sundays", vault=root)
    (root / ".index" / "index.sqlite3").write_bytes(b"this is not a database" * 100)
    for wal in (root / ".index").glob("index.sqlite3-*"):
        wal.unlink()
    for command in (["search", "staging"], ["list"], ["stats"]):
        result = run_cli(*command, vault=root)
        assert "Traceback" not in result.stderr, (command, result.stderr)
        assert len(result.said) <= 2, (command, result.stderr)


# ----------------------------------------------------------------------------- 9. the vault vanishes


def test_a_vault_renamed_under_a_running_process_is_reported_not_recreated(vault: Vault) -> None:
    vault.remember("Written before the move")
    moved = vault.root.with_name("moved")
    vault.root.rename(moved)
    try:
        with pytest.raises(VaultGone, match="moved or deleted"):
            vault.remember("Written after the move")
        with pytest.raises(VaultGone):
            vault.search("written")
        assert not vault.root.exists()  # the old path was not recreated
    finally:
        moved.rename(vault.root)


# ----------------------------------------------------------------------------- 10. one lock, two index places


def test_processes_with_and_without_an_index_dir_never_store_one_fact_twice(tmp_path: Path) -> None:
    root = tmp_path / "v"
    Vault.init(root).close()
    # Every process opens the vault (and reconciles) before any of them writes: the
    # worst case for a process whose index is elsewhere than the others'.
    script = (
        "import sys, time, pathlib\nfrom agent_memory.vault.vault import Vault\n"
        "with Vault(sys.argv[1]) as v:\n"
        "    pathlib.Path(sys.argv[2]).touch()\n"
        "    while not pathlib.Path(sys.argv[3]).exists(): time.sleep(0.01)\n"
        "    v.remember('The release train leaves on Thursdays')\n"
    )
    go = tmp_path / "go"
    env_elsewhere = {**os.environ, "AGENT_MEMORY_INDEX_DIR": str(tmp_path / "cache")}
    env_home = {k: v for k, v in os.environ.items() if k != "AGENT_MEMORY_INDEX_DIR"}
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(root), str(tmp_path / f"ready-{n}"), str(go)],
                         env=env_elsewhere if n % 2 else env_home, stderr=subprocess.PIPE)
        for n in range(8)
    ]
    wait_until(lambda: len(list(tmp_path.glob("ready-*"))) == len(procs), "every process has opened the vault",
               seconds=120)
    go.touch()
    errors = []
    for proc in procs:
        _, err = proc.communicate(timeout=deadline(120))
        errors.append((proc.returncode, err.decode()[-2000:]))
    assert all(code == 0 for code, _ in errors), [e for e in errors if e[0] != 0]  # every process's own words
    assert len(md_files(root)) == 1, md_files(root)


def test_the_package_imports_without_fcntl(tmp_path: Path) -> None:
    """Windows has no fcntl: the package must still import and work in one process."""
    code = (
        "import sys\nsys.modules['fcntl'] = None\n"
        "from agent_memory.vault.vault import Vault\n"
        f"v = Vault.init({str(tmp_path / 'v')!r})\n"
        "print(v.remember('Works without fcntl')['memory']['id'])\n"
        "print(v.search('fcntl')['count'])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=deadline(120))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "1"


# ----------------------------------------------------------------------------- 11. symlinked control folders


@pytest.mark.parametrize("name", [".trash", ".index", ".prompts"])
def test_a_symlinked_control_folder_is_refused_and_nothing_outside_is_touched(tmp_path: Path, name: str) -> None:
    root = tmp_path / "v"
    Vault.init(root).close()
    outside = tmp_path / "docs"
    outside.mkdir()
    (outside / "thesis.docx").write_bytes(b"four years of work")
    if name == ".index":
        import shutil

        shutil.rmtree(root / ".index")
    (root / name).symlink_to(outside, target_is_directory=True)
    with pytest.raises(VaultError, match=f"{name} is a symlink"):
        Vault(root)
    assert sorted(p.name for p in outside.iterdir()) == ["thesis.docx"]


def test_a_symlinked_folder_inside_the_trash_is_never_written_or_purged_through(vault: Vault, clock) -> None:
    outside = vault.root.parent / "taxes"
    outside.mkdir()
    (outside / "taxes.pdf").write_bytes(b"receipts")
    made = vault.remember("A fact to forget")["memory"]
    (vault.root / ".trash").mkdir(exist_ok=True)
    (vault.root / ".trash" / "2026").symlink_to(outside, target_is_directory=True)
    with pytest.raises(Exception, match="not in the vault's .trash"):
        vault.forget(made["id"])
    assert (vault.root / made["path"]).exists()
    clock.advance(days=400)
    vault.gc(older_than_days=0)
    assert sorted(p.name for p in outside.iterdir()) == ["taxes.pdf"]


def test_a_lock_file_that_is_a_folder_is_a_clear_error(vault: Vault) -> None:
    lock = vault.root / ".index" / "write.lock"
    lock.unlink(missing_ok=True)
    lock.mkdir()
    with pytest.raises(VaultError, match="lock file .* is not a regular file; remove it"):
        vault.remember("Anything")


# ----------------------------------------------------------------------------- 12. read-time confinement


def test_export_never_follows_a_memory_replaced_by_a_symlink(vault: Vault, tmp_path: Path) -> None:
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY MATERIAL\n")
    made = vault.remember("An ordinary memory")["memory"]
    (vault.root / made["path"]).unlink()
    (vault.root / made["path"]).symlink_to(secret)
    exported = vault.export_memories()
    assert all("PRIVATE KEY" not in m["content"] for m in exported)


def swapped_for_a_symlink_on_open(vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> str:
    """A memory whose folder is swapped for a symlink to a folder outside the vault (where
    a file of that name holds ``text``) just before the store opens it; its path."""
    made = vault.remember("An ordinary memory")["memory"]
    folder = (vault.root / made["path"]).parent
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / Path(made["path"]).name).write_text(text)
    real_open = os.open

    def swap_then_open(path: object, flags: int, *args: object) -> int:
        if str(path).endswith(made["path"]) and folder.is_dir() and not folder.is_symlink():
            folder.rename(folder.with_name("real"))
            folder.symlink_to(elsewhere, target_is_directory=True)
        return real_open(path, flags, *args)

    monkeypatch.setattr(store_module.os, "open", swap_then_open)
    return made["path"]


def test_a_folder_swapped_for_a_symlink_between_check_and_open_is_refused(
    vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = swapped_for_a_symlink_on_open(vault, tmp_path, monkeypatch, "---\nid: x\n---\nPRIVATE KEY MATERIAL\n")
    assert vault.store.read(path) is None


def test_read_file_refuses_a_folder_swapped_for_a_symlink_between_check_and_open(
    vault: Vault, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """read_file hands a file to the model: like every read, the file it opened must be
    where it was checked to be. Before, it checked the path, then opened it again, so a
    folder swapped for a symlink in between served a file from outside the vault."""
    path = swapped_for_a_symlink_on_open(vault, tmp_path, monkeypatch, "PRIVATE KEY MATERIAL\n")
    with pytest.raises(PathRefused):
        vault.read_file(path)


# ----------------------------------------------------------------------------- small items


def test_our_orphaned_temp_files_are_removed_on_open_and_nobody_elses(vault: Vault, clock) -> None:
    folder = vault.root / "2026"
    folder.mkdir()
    ours_old, ours_young = folder / ".0123456789ab.agent-memory.tmp", folder / ".ba9876543210.agent-memory.tmp"
    theirs = folder / ".draft.md.tmp"
    for path in (ours_old, ours_young, theirs):
        path.write_bytes(b"half a file")
    an_hour_ago = time.time() - 3600
    for path in (ours_old, theirs):
        os.utime(path, (an_hour_ago, an_hour_ago))
    vault.close()
    Vault(vault.root, clock=clock).close()
    assert not ours_old.exists() and ours_young.exists() and theirs.exists()


def test_the_write_lock_and_import_staging_stay_in_the_vault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_INDEX_DIR", str(tmp_path / "cache"))
    with Vault.init(tmp_path / "v") as vault:
        vault.import_memories([{"content": f"Imported fact {n}"} for n in range(3)])
        assert (vault.root / ".index" / "write.lock").is_file()
        assert not (vault.root / ".index" / "import").exists()  # finished and cleaned up
        assert len(md_files(vault.root)) == 3


def test_a_read_only_vault_can_still_be_searched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    source = tmp_path / "src"
    Vault.init(source).close()
    (source / "note.md").write_text("The staging database resets on Sundays\n")
    import shutil

    shutil.rmtree(source / ".index")
    mounted = tmp_path / "ro"
    mounted.mkdir()
    done = subprocess.run(["mount", "--bind", str(source), str(mounted)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"a read-only bind mount is not possible here: {done.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mounted)], check=True, capture_output=True)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        with Vault(mounted) as vault:
            assert "read-only" in caplog.text
            assert [h["path"] for h in vault.search("staging database")["hits"]] == ["note.md"]
            with pytest.raises(VaultError, match="read-only"):
                vault.remember("A new fact")
        assert (tmp_path / "cache" / "agent-memory").is_dir()
    finally:
        subprocess.run(["umount", str(mounted)], capture_output=True)


def test_a_tool_edit_after_a_person_saved_meanwhile_keeps_their_save(vault: Vault,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_memory.disk import locking

    made = vault.remember("The staging database resets on Sundays")["memory"]
    path = vault.root / made["path"]
    monkeypatch.setattr(locking, "swap", person_saves_before_the_swap("Saved by a person at this very moment.\n"))
    with pytest.raises(SavedMeanwhile):
        vault.update(made["id"], add_tags=["ops"])
    monkeypatch.undo()
    assert path.read_text().endswith("Saved by a person at this very moment.\n")
    assert "ops" not in vault.get(made["id"])["tags"]
    assert_index_matches_files(vault)


def test_without_an_atomic_swap_a_differing_file_is_still_never_overwritten(
    vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_memory.disk import locking

    made = vault.remember("The staging database resets on Sundays")["memory"]
    path = vault.root / made["path"]
    real_read = store_module._regular_bytes

    def no_swap(_a: Path, _b: Path) -> bool:
        path.write_text(path.read_text() + "Saved by a person.\n")  # lands before the last check
        return False  # as on NFS, FUSE or Windows

    monkeypatch.setattr(locking, "swap", no_swap)
    with pytest.raises(SavedMeanwhile):
        vault.update(made["id"], add_tags=["ops"])
    assert path.read_text().endswith("Saved by a person.\n")
    monkeypatch.setattr(locking, "swap", lambda _a, _b: False)
    assert vault.update(made["id"], add_tags=["ops"])["changed"] is True  # the fallback still writes
    assert "ops" in vault.get(made["id"])["tags"] and path.read_text().endswith("Saved by a person.\n")
    assert real_read is store_module._regular_bytes
    assert_index_matches_files(vault)


def test_disk_errors_name_the_cause(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_module.Store, "write_temp", full)
    with pytest.raises(VaultError, match="the disk is full"):
        vault.remember("A fact for a full disk")
    assert md_files(vault.root) == []


# ----------------------------------------------------------------------------- 13/14. readers never queue


def test_a_slow_read_does_not_make_another_reader_wait(vault: Vault) -> None:
    """Each thread reads on its own connection (the server runs tools in threads). Shown
    by order, not by time: the slow read is held inside SQLite (in a function its query
    calls) until the other search has answered, so a search that waited for it would
    never answer."""
    import threading

    vault.remember("The staging database resets on Sundays")
    inside, release = threading.Event(), threading.Event()
    slow_rows: list[object] = []

    def hold() -> int:
        inside.set()
        release.wait(deadline(120))
        return 1

    def slow() -> None:
        vault.index._reader().create_function("hold", 0, hold)
        slow_rows.extend(vault.index.query("SELECT hold() FROM memories"))

    worker = threading.Thread(target=slow)
    worker.start()
    try:
        assert inside.wait(deadline(120)), "the slow read never started"
        found: list[int] = []
        searcher = threading.Thread(target=lambda: found.append(vault.search("staging database")["count"]))
        searcher.start()
        searcher.join(deadline(120))
        assert found == [1], "the search waited for the slow read"
        assert not slow_rows, "the slow read ended before the search answered"
    finally:
        release.set()
        worker.join(deadline(120))
    assert [tuple(r) for r in slow_rows] == [(1,)]  # the slow read finished too, without an error


def test_reading_threads_that_come_and_go_leave_no_open_connections(vault: Vault) -> None:
    """The server's worker threads exit when idle: their connections must go with them."""
    import gc
    import threading

    vault.remember("The staging database resets on Sundays")

    def open_files() -> int:
        return len(os.listdir("/proc/self/fd"))

    if not Path("/proc/self/fd").is_dir():
        pytest.skip("no /proc/self/fd on this system to count open files")
    vault.search("staging")
    before = open_files()
    for _ in range(100):
        worker = threading.Thread(target=lambda: vault.search("staging"))
        worker.start()
        worker.join()
    gc.collect()
    assert open_files() <= before + 2


def test_restore_never_writes_where_a_tampered_ledger_points(vault: Vault, tmp_path: Path) -> None:
    import json

    from agent_memory.errors import PathRefused

    made = vault.remember("A fact to forget")["memory"]
    trashed = vault.forget(made["id"])["trashed_to"]
    ledger = vault.root / ".trash" / ".agent-memory.jsonl"
    for source in ("../outside.md", ".git/hooks/pre-commit"):
        entry = json.loads(ledger.read_text().splitlines()[-1])
        entry["source"] = source
        ledger.write_text(json.dumps(entry) + "\n")
        with pytest.raises(PathRefused, match="nothing was restored"):
            vault.restore(trashed)
    assert not (vault.root.parent / "outside.md").exists() and not (vault.root / ".git").exists()


def test_gc_keeps_a_note_a_person_trashed_again_at_the_same_path(vault: Vault, clock) -> None:
    made = vault.remember("A fact forgotten, then wanted back")["memory"]
    trashed = vault.root / vault.forget(made["id"])["trashed_to"]
    (vault.root / made["path"]).parent.mkdir(parents=True)  # its emptied day went with it
    (vault.root / made["path"]).write_bytes(trashed.read_bytes())  # the person copies it back...
    trashed.unlink()
    os.rename(vault.root / made["path"], trashed)  # ...and later deletes it in Obsidian, to the same place
    clock.advance(days=60)
    assert vault.gc()["removed"] == []
    assert trashed.exists()


# ----------------------------------------------------------------------------- review findings


def test_an_error_after_the_swap_keeps_the_displaced_save(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    """The swap already happened: whatever it displaced must never be deleted."""
    from agent_memory.disk import locking

    made = vault.remember("The staging database resets on Sundays")["memory"]
    path = vault.root / made["path"]
    real_swap, real_bytes = locking.swap, store_module._regular_bytes

    def disk_fails(_path: Path) -> bytes:
        raise OSError(errno.EIO, "Input/output error")

    def person_saves_then_swap(tmp: Path, target: Path) -> bool:
        target.write_text(target.read_text() + "A person's save.\n")
        swapped = real_swap(tmp, target)
        monkeypatch.setattr(store_module, "_regular_bytes", disk_fails)  # after the swap: reading what it displaced fails
        return swapped

    monkeypatch.setattr(locking, "swap", person_saves_then_swap)
    with pytest.raises(VaultError, match="was written, but then"):
        vault.update(made["id"], add_tags=["ops"])
    monkeypatch.undo()
    kept = vault.store.settle_parked(grace=0)
    assert len(kept) == 1 and (vault.root / kept[0]).read_text().endswith("A person's save.\n")
    assert "ops" in path.read_text()
    assert real_bytes is store_module._regular_bytes


def test_a_parked_save_swapped_for_a_link_to_a_pipe_is_never_read(
        vault: Vault, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What a write displaced waits in ``.index/parked/`` until it is settled, which hashes
    it: a synced folder that swapped it for a link to a pipe (or to ``/dev/zero``) made
    that hash wait for ever. The link is now never read: it holds nobody's save, so it
    goes, and the record with it."""
    from agent_memory.disk import locking
    from test_nofollow import _without_waiting

    made = vault.remember("The staging database resets on Sundays")["memory"]
    real_swap = locking.swap

    def disk_fails(_path: Path) -> bytes:
        raise OSError(errno.EIO, "Input/output error")

    def person_saves_then_swap(tmp: Path, target: Path) -> bool:
        target.write_text(target.read_text() + "A person's save.\n")
        swapped = real_swap(tmp, target)
        monkeypatch.setattr(store_module, "_regular_bytes", disk_fails)
        return swapped

    monkeypatch.setattr(locking, "swap", person_saves_then_swap)
    with pytest.raises(VaultError, match="was written, but then"):
        vault.update(made["id"], add_tags=["ops"])
    monkeypatch.undo()
    [parked] = [p for p in vault.store.parked_files() if p.suffix == ".md"]
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    parked.unlink()
    parked.symlink_to(fifo)  # what a synced folder puts in its place
    kept = _without_waiting(lambda: vault.store.settle_parked(grace=0), fifo)
    assert kept == [] and stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert vault.store.parked_files() == []  # settled: the link and its record are gone


def test_two_saves_during_one_write_keep_the_newest_as_the_file(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_memory.disk import locking

    made = vault.remember("The staging database resets on Sundays")["memory"]
    path = vault.root / made["path"]
    real_swap = locking.swap
    calls: list[int] = []

    def two_saves(tmp: Path, target: Path) -> bool:
        calls.append(1)
        if len(calls) == 1:
            target.write_text(target.read_text() + "First save.\n")
        if len(calls) == 2:  # lands on the tool's file, before the swap back
            target.write_text(target.read_text().replace("tags: [ops]", "tags: []") + "Second save.\n")
        return real_swap(tmp, target)

    monkeypatch.setattr(locking, "swap", two_saves)
    with pytest.raises(SavedMeanwhile):
        vault.update(made["id"], add_tags=["ops"])
    monkeypatch.undo()
    assert path.read_text().endswith("Second save.\n")
    conflicts = [(vault.root / e["trash"]).read_text() for e in vault.trash_list() if e["reason"] == "conflict"]
    # The older save, and a copy of the newest (the tool's version was the file for a moment).
    assert sorted(text.rsplit("\n", 2)[-2] for text in conflicts) == ["First save.", "Second save."]


def test_editing_a_memory_that_is_a_symlink_changes_the_file_it_points_to(vault: Vault) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    (vault.root / "shortcut.md").symlink_to(vault.root / made["path"])
    vault.reconcile()
    vault.update("shortcut.md", append="Ask Priya first.")
    assert (vault.root / "shortcut.md").is_symlink()
    assert (vault.root / made["path"]).read_text().endswith("Ask Priya first.\n")


def test_forget_of_a_memory_that_is_a_symlink_is_refused_and_moves_nothing(vault: Vault) -> None:
    """A link moved into .trash/ would point nowhere (it is relative to where it was), and
    the trash keeps only files it can put back. Before, forget moved the link there,
    then failed reading it back (FileNotFoundError, a traceback), and the link was in the
    trash for good: restore could not find it."""
    made = vault.remember("The staging database resets on Sundays")["memory"]
    (vault.root / "shortcuts").mkdir()
    link = vault.root / "shortcuts" / "staging.md"
    link.symlink_to(os.path.relpath(vault.root / made["path"], link.parent))
    vault.reconcile()
    for call in (lambda: vault.forget("shortcuts/staging.md"), lambda: vault.forget_many(["shortcuts/staging.md"])):
        with pytest.raises(InvalidInput, match="is a symlink"):
            call()
    assert link.is_symlink() and link.read_text() == (vault.root / made["path"]).read_text()
    assert not (vault.root / ".trash").exists() or not any((vault.root / ".trash").rglob("*.md"))
    assert vault.forget(made["id"])["path"] == made["path"]  # the file itself can be forgotten


def test_forget_never_trashes_a_save_made_after_its_check(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    path = vault.root / made["path"]
    real_move_in = vault.store.trash.move_in

    def person_saves_first(source: Path, *args: object) -> str:
        if source == path:
            path.write_text(path.read_text() + "Saved just now.\n")
        return real_move_in(source, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(vault.store.trash, "move_in", person_saves_first)
    with pytest.raises(SavedMeanwhile):
        vault.forget(made["id"], expected_version=made["version"])
    assert path.read_text().endswith("Saved just now.\n")
    assert_index_matches_files(vault)


def test_forget_puts_back_a_save_that_lands_as_the_file_moves_to_the_trash(vault: Vault,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A person's save between the trash's look at the file and its move: what moved is
    the save. Before, the trash recorded the bytes it had looked at, so the save in the
    trash was not the tool's: forget could not put it back, said "saved meanwhile", and
    left the vault without the note (restore could not find it either)."""
    from agent_memory.disk import locking

    made = vault.remember("The staging database resets on Sundays")["memory"]
    path = vault.root / made["path"]
    real_move = locking.move_no_replace

    def person_saves_as_it_moves(source: Path, target: Path) -> None:
        if source == path and not target.parent.samefile(path.parent):
            path.write_text(path.read_text() + "Saved just now.\n")
        real_move(source, target)

    monkeypatch.setattr(locking, "move_no_replace", person_saves_as_it_moves)
    with pytest.raises(SavedMeanwhile):
        vault.forget(made["id"], expected_version=made["version"])
    monkeypatch.undo()
    assert path.read_text().endswith("Saved just now.\n")
    assert vault.trash_list() == []
    assert_index_matches_files(vault)


def test_an_import_into_a_symlinked_folder_is_refused_before_anything_is_staged(vault: Vault, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (vault.root / "2024").symlink_to(elsewhere, target_is_directory=True)
    items = [{"content": "An old fact", "created": "2024-03-01T09:00:00Z"},
             {"content": "Another old fact", "created": "2024-03-02T09:00:00Z"}]
    with pytest.raises(Exception, match="symlink"):
        vault.import_memories(items)
    assert list(elsewhere.iterdir()) == [] and md_files(vault.root) == []
    assert not (vault.root / ".index" / "import").exists()
    vault.close()
    Vault(vault.root).close()  # and the vault still opens


def test_a_temp_file_a_kill_left_in_parked_is_removed_by_a_later_write(vault: Vault) -> None:
    vault.remember("A fact")
    parked = vault.root / ".index" / "parked"
    parked.mkdir(parents=True, exist_ok=True)
    left = parked / ".0123456789ab.agent-memory.tmp"
    left.write_bytes(b"half of a new file")
    an_hour_ago = time.time() - 3600
    os.utime(left, (an_hour_ago, an_hour_ago))
    vault.remember("Another fact")
    assert not left.exists()


def test_a_read_only_note_is_left_as_it_is_by_every_edit(vault: Vault) -> None:
    """A person who made a note read-only (chmod a-w, a file manager's read-only box)
    said "don't change this": the swap could still replace it (its folder is writable),
    but an editor would refuse, and so does every tool edit, with a clear error."""
    (vault.root / "people").mkdir()
    (vault.root / "notes").mkdir()
    note = vault.root / "people" / "priya.md"
    note.write_text("---\ntags: [team]\n---\nPriya leads billing.\n", encoding="utf-8")
    linking = vault.root / "notes" / "hub.md"
    linking.write_text("See [[priya]] and [her page](../people/priya.md).\n", encoding="utf-8")
    vault.reconcile()
    note.chmod(0o444)
    before = note.read_bytes()
    for edit in (lambda: vault.update("people/priya.md", add_tags=["billing"]),
                 lambda: vault.update("people/priya.md", append="More."),
                 lambda: vault.link("people/priya.md", "notes/hub.md")):
        with pytest.raises(ReadOnlyFile, match="read-only"):
            edit()
    assert note.read_bytes() == before and stat.S_IMODE(note.stat().st_mode) == 0o444
    # The same fact remembered again is found, and the protected file keeps its tags.
    again = vault.remember("Priya leads billing.", tags=["new"])
    assert again["deduplicated"] and "read-only" in again["warnings"][0] and note.read_bytes() == before
    # A rename whose link rewrites reach a read-only note changes nothing at all.
    linking.chmod(0o444)
    note.chmod(0o644)
    with pytest.raises(ReadOnlyFile, match="notes/hub.md"):
        vault.move("people/priya.md", "people/priya-raman.md")
    assert note.exists() and linking.read_text() == "See [[priya]] and [her page](../people/priya.md).\n"
    linking.chmod(0o644)
    assert vault.update("people/priya.md", add_tags=["billing"])["changed"]  # writable again: edits work
    vault.reconcile()  # the chmods changed ctimes, which only a look at the files folds in
    assert_index_matches_files(vault)
