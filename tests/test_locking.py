"""The portable fallbacks of ``locking``: where the OS cannot swap two files atomically
(no ``renameat2``, or a file system that refuses ``RENAME_EXCHANGE``), where there is no
``RENAME_NOREPLACE`` or no hard links, and a lock file deleted while a process waits on
it. On Linux the fast paths run everywhere else in the suite; here each fallback is
forced and must still keep every byte a person saved ."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
from pathlib import Path

import pytest

from agent_memory.disk import locking
from agent_memory.disk import store as store_module
from agent_memory.errors import SavedMeanwhile, VaultError
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, person_saves_before_the_swap


@pytest.fixture
def no_renameat2(monkeypatch: pytest.MonkeyPatch) -> None:
    """An OS without ``renameat2`` or ``renamex_np`` (older kernels, BSDs, Windows)."""
    monkeypatch.setattr(locking, "_renameat2", None)
    monkeypatch.setattr(locking, "_renamex_np", None)


def refusing_renameat2(refused_flags: set[int], code: int):
    """``renameat2`` as a file system gives it that fails ``refused_flags`` with ``code``
    (the real call for any other flags)."""
    real = locking._renameat2

    def renameat2(dirfd_a: int, a: bytes, dirfd_b: int, b: bytes, flags: int) -> int:
        if flags in refused_flags:
            ctypes.set_errno(code)
            return -1
        return real(dirfd_a, a, dirfd_b, b, flags)

    return renameat2


def trashed(vault: Vault) -> list[str]:
    return sorted(p.read_text() for p in (vault.root / ".trash").rglob("*.md"))


def parked(vault: Vault) -> list[str]:
    folder = vault.store.parked_dir
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_swap_answers_false_where_the_os_has_no_swap(no_renameat2: None, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("A")
    b.write_text("B")
    assert locking.swap(a, b) is False
    assert (a.read_text(), b.read_text()) == ("A", "B")  # nothing was changed


def test_without_a_swap_an_edit_still_lands_and_keeps_the_rest_of_the_file(no_renameat2: None, vault: Vault) -> None:
    made = vault.remember("The staging database resets on Sundays", tags=["db"])["memory"]
    assert vault.update(made["id"], add_tags=["ops"])["changed"] is True
    got = vault.get(made["id"])
    assert got["tags"] == ["db", "ops"] and got["content"].strip() == "The staging database resets on Sundays"
    assert not [n for n in parked(vault) if n.endswith(".held")]  # the memory taken aside is not left there
    assert_index_matches_files(vault)


def test_without_a_swap_a_save_landing_just_before_the_write_is_kept(
    no_renameat2: None, vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    path = vault.root / made["path"]
    monkeypatch.setattr(locking, "swap", person_saves_before_the_swap("Saved by a person.\n"))  # the real swap: False
    with pytest.raises(SavedMeanwhile):
        vault.update(made["id"], add_tags=["ops"])
    assert path.read_text().endswith("Saved by a person.\n")
    assert "ops" not in vault.get(made["id"])["tags"]
    assert_index_matches_files(vault)


def saves_while_the_memory_is_aside(monkeypatch: pytest.MonkeyPatch, path: Path, text: str) -> None:
    """A person's editor saves ``path`` afresh (a new file under the name) at the moment
    the tool has taken the memory aside and reads it back to compare."""
    real_bytes = store_module._regular_bytes
    saved: list[bool] = []

    def regular_bytes(found: Path) -> bytes | None:
        if found.suffix == ".held" and not saved:
            saved.append(True)
            path.write_text(text)
        return real_bytes(found)

    monkeypatch.setattr(store_module, "_regular_bytes", regular_bytes)


def test_without_a_swap_a_save_made_while_the_memory_is_aside_stands(
    no_renameat2: None, vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    path = vault.root / made["path"]
    saves_while_the_memory_is_aside(monkeypatch, path, "---\ntitle: Rewritten by a person\n---\nTheir words.\n")
    with pytest.raises(SavedMeanwhile):
        vault.update(made["id"], add_tags=["ops"])
    assert path.read_text() == "---\ntitle: Rewritten by a person\n---\nTheir words.\n"
    vault.store.settle_parked(grace=0)  # what was aside is kept a while: it may be written into
    assert trashed(vault) == []  # what was aside held only the bytes that were checked: nothing to keep
    assert parked(vault) == []
    assert_index_matches_files(vault)


def test_without_a_swap_a_save_written_into_the_memory_aside_as_another_took_its_name_is_kept(
    no_renameat2: None, vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory is aside and compared (it holds the checked bytes); then, before the
    new file takes the name, an editor that opened the memory earlier writes into it
    in place, and another program saves the name afresh. The fresh save stands, and the
    editor's bytes are kept: the file aside was deleted as "the bytes that were checked",
    and what the editor wrote into it went with it."""
    made = vault.remember("The staging database resets on Sundays")["memory"]
    path = vault.root / made["path"]
    editor = os.open(path, os.O_WRONLY)  # opened before the write, written into later
    real_move = locking.move_no_replace
    saved: list[bool] = []

    def move_no_replace(src: Path, dst: Path) -> None:
        if dst == path and not saved:
            saved.append(True)
            os.ftruncate(editor, 0)
            os.write(editor, b"---\ntitle: Typed in the editor\n---\nWords from the editor.\n")
            path.write_text("---\ntitle: Saved by the sync tool\n---\nWords from elsewhere.\n")
        real_move(src, dst)

    monkeypatch.setattr(locking, "move_no_replace", move_no_replace)
    try:
        with pytest.raises(SavedMeanwhile):
            vault.update(made["id"], add_tags=["ops"])
    finally:
        os.close(editor)
    assert path.read_text() == "---\ntitle: Saved by the sync tool\n---\nWords from elsewhere.\n"
    vault.store.settle_parked(grace=0)
    assert [text for text in trashed(vault) if "Words from the editor." in text], "the editor's save was lost"
    assert parked(vault) == []


def test_without_a_swap_a_save_written_into_the_memory_aside_after_the_write_went_through_is_kept(
    no_renameat2: None, vault: Vault
) -> None:
    """An editor that opened the memory before the write writes into it after the new
    file took the name: its bytes land in the file taken aside, now parked, and are
    kept as a conflict copy when it is settled; the tool's change stands."""
    made = vault.remember("The staging database resets on Sundays")["memory"]
    path = vault.root / made["path"]
    editor = os.open(path, os.O_WRONLY)  # opened before the write, written into after it
    try:
        vault.update(made["id"], add_tags=["ops"])
        os.ftruncate(editor, 0)
        os.write(editor, b"---\ntitle: Typed in the editor\n---\nWords from the editor.\n")
    finally:
        os.close(editor)
    assert "ops" in vault.get(made["id"])["tags"]
    vault.store.settle_parked(grace=0)
    assert [text for text in trashed(vault) if "Words from the editor." in text], "the editor's save was lost"
    assert parked(vault) == []


def test_without_a_swap_two_saves_during_one_write_are_both_kept(
    no_renameat2: None, vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    path = vault.root / made["path"]
    monkeypatch.setattr(locking, "swap", person_saves_before_the_swap("First save.\n"))
    saves_while_the_memory_is_aside(monkeypatch, path, "---\ntitle: Second save\n---\nThe newest words.\n")
    with pytest.raises(SavedMeanwhile):
        vault.update(made["id"], add_tags=["ops"])
    assert path.read_text() == "---\ntitle: Second save\n---\nThe newest words.\n"  # the newest save is the file
    [older] = trashed(vault)
    assert older.endswith("First save.\n")  # and the older one is kept in the trash
    assert parked(vault) == []


def test_a_file_system_refusing_the_exchange_falls_back_and_still_writes(
    vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    monkeypatch.setattr(locking, "_renameat2", refusing_renameat2({2, 1}, errno.EINVAL))  # as some FUSE mounts answer
    assert vault.update(made["id"], add_tags=["ops"])["changed"] is True
    second = vault.remember("The VPN needs the hardware key")["memory"]  # and new files still get their names
    assert "ops" in vault.get(made["id"])["tags"] and vault.get(second["id"])["content"].strip().startswith("The VPN")
    assert_index_matches_files(vault)


def test_an_io_error_from_the_swap_is_one_line_and_changes_nothing(
    vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    path = vault.root / made["path"]
    before = path.read_bytes()
    monkeypatch.setattr(locking, "_renameat2", refusing_renameat2({2}, errno.EIO))
    with pytest.raises(VaultError, match=r"^Could not write .*Input/output error\. Nothing was changed") as caught:
        vault.update(made["id"], add_tags=["ops"])
    assert "\n" not in str(caught.value)
    assert path.read_bytes() == before
    assert parked(vault) == []
    assert_index_matches_files(vault)


def test_an_io_error_naming_a_new_file_is_one_line_and_leaves_no_file(
    vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(locking, "_renameat2", refusing_renameat2({1}, errno.EIO))
    with pytest.raises(VaultError, match=r"^Could not write the memory file: Input/output error\."):
        vault.remember("A fact the disk would not take")
    assert [p for p in vault.root.rglob("*") if p.is_file() and ".index" not in p.parts and p.suffix != ".toml"
            and p.name != ".gitignore"] == []


def test_without_renameat2_hard_links_keep_names_unique(no_renameat2: None, vault: Vault) -> None:
    first = vault.remember("Same title here", title="Same title")["memory"]
    second = vault.remember("Other content, same title", title="Same title")["memory"]
    assert first["path"].endswith("/same-title.md") and second["path"].endswith("/same-title-2.md")
    assert vault.get(first["id"])["content"].strip() == "Same title here"
    assert [p for p in vault.root.rglob("*") if p.name.endswith(".tmp")] == []


def test_without_renameat2_a_failing_link_is_a_disk_error_not_a_lost_file(
    no_renameat2: None, vault: Vault, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(locking.os, "link", full)
    with pytest.raises(VaultError, match="the disk is full"):
        vault.remember("A fact for a full disk")
    assert [p for p in vault.root.rglob("*.md") if ".index" not in p.parts] == []
    assert [p for p in vault.root.rglob("*") if p.name.endswith(".tmp")] == []


def assert_kept_out(path: Path) -> None:
    """Another open file of the lock (another process's) cannot take it now."""
    other = os.open(path, os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(other)


def test_a_lock_file_deleted_while_waiting_is_not_held_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``.index/`` is a cache a person may delete while a process waits for the lock: the
    waiter must end up holding the lock on the file now there, which others take too."""
    path = tmp_path / ".index" / "write.lock"
    real_lock = locking._lock_fd
    deleted: list[bool] = []

    def lock_after_deletion(fd: int) -> None:
        if not deleted:
            deleted.append(True)
            path.unlink()  # deleted while this process waited on the old file
        real_lock(fd)

    monkeypatch.setattr(locking, "_lock_fd", lock_after_deletion)
    lock = locking.WriteLock(path)
    with lock.hold():
        assert path.is_file()
        assert_kept_out(path)
    other = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # and let in once it is released
    finally:
        os.close(other)


def test_a_lock_whose_folder_was_deleted_between_writes_locks_the_file_now_there(tmp_path: Path) -> None:
    """The lock's file stays open between holds; ``.index/`` deleted meanwhile (it is a
    cache) must not leave the next hold locking the old, unlinked file alone."""
    path = tmp_path / ".index" / "write.lock"
    lock = locking.WriteLock(path)
    with lock.hold():
        pass
    (tmp_path / ".index" / ".gitignore").unlink()
    path.unlink()
    (tmp_path / ".index").rmdir()
    with lock.hold():
        assert path.is_file() and (tmp_path / ".index" / ".gitignore").is_file()
        assert_kept_out(path)
    lock.close()


def test_a_lock_file_that_cannot_be_opened_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / ".index" / "write.lock"
    real_open = os.open

    def denied(name: object, flags: int, *args: object, **kwargs: object) -> int:
        if Path(os.fsdecode(name)) == path:  # type: ignore[arg-type]
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(name, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(locking.os, "open", denied)
    lock = locking.WriteLock(path)
    with pytest.raises(VaultError, match=r"^Cannot open the vault's lock file .*write\.lock: Permission denied\.$"), \
            lock.hold():
        pass


def test_a_write_count_file_that_cannot_be_written_costs_nothing(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    """``writes.json`` only saves other processes a reconcile: a full disk there must not
    fail the write a person asked for."""
    real_open, real_truncate, real_pwrite = os.open, os.ftruncate, os.pwrite
    counts = vault.store.control_dir / "writes.json"

    def full_for_counts(name: object, flags: int, *args: object, **kwargs: object) -> int:
        if Path(os.fsdecode(name)) == counts:  # type: ignore[arg-type]
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(name, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(locking.os, "open", full_for_counts)
    first = vault.remember("A fact written while writes.json cannot be")["memory"]
    monkeypatch.setattr(locking.os, "open", real_open)

    def full(fd: int, *args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(locking.os, "ftruncate", full)
    monkeypatch.setattr(locking.os, "pwrite", full)
    second = vault.remember("Another fact while writes.json is full")["memory"]
    monkeypatch.setattr(locking.os, "ftruncate", real_truncate)
    monkeypatch.setattr(locking.os, "pwrite", real_pwrite)
    assert {h["id"] for h in vault.search("fact writes.json")["hits"]} == {first["id"], second["id"]}
    assert_index_matches_files(vault)


def test_a_write_count_file_replaced_or_deleted_between_writes_gets_the_next_count(vault: Vault) -> None:
    """``writes.json`` stays open between writes. Replaced meanwhile (a backup restored,
    a pull: the same bytes in a new file) or deleted, the next write must count itself
    in the file now at that name: a process with an index of its own reads only that
    one, and without the count it would not catch up before its dedup check."""
    counts = vault.store.control_dir / "writes.json"
    mine = str(vault.index.path)
    vault.remember("A first fact, so the count file is open")
    held = counts.read_bytes()
    counts.unlink()
    counts.write_bytes(held)  # the same bytes in a new file
    vault.remember("A second fact, after the count file was replaced")
    assert json.loads(counts.read_bytes())[mine] == json.loads(held)[mine] + 1
    counts.unlink()
    vault.remember("A third fact, after the count file was deleted")
    assert json.loads(counts.read_bytes()) == {mine: 1}


def test_a_control_folder_that_cannot_be_written_gets_no_gitignore_and_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / ".index"
    folder.mkdir()
    real_open = os.open

    def read_only(name: object, flags: int, *args: object, **kwargs: object) -> int:
        if flags & os.O_CREAT:
            raise OSError(errno.EROFS, "Read-only file system")
        return real_open(name, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(locking.os, "open", read_only)
    locking.ignore_folder(folder)  # no error
    assert list(folder.iterdir()) == []


def test_a_c_function_the_system_lacks_is_none_so_callers_take_their_fallback() -> None:
    assert locking.libc_function("agent_memory_no_such_function") is None
    assert locking.libc_function("rename") is not None  # one every libc has, found in the running process


def _waiting_on(pid: int, path: Path) -> bool:
    """Whether process ``pid`` waits for a lock on the file at ``path`` (``/proc/locks``
    lists a waiter with ``->``)."""
    found = os.stat(path)
    inode = f":{found.st_ino} "
    with open("/proc/locks", encoding="ascii") as locks:
        return any("->" in line and f" {pid} " in line and inode in line for line in locks)


@pytest.mark.skipif(not hasattr(os, "fork") or not Path("/proc/locks").exists(), reason="needs fork and /proc/locks")
def test_a_process_forked_between_writes_is_kept_out_while_its_parent_holds_the_lock(tmp_path: Path) -> None:
    """The lock's file stays open between holds, and a fork (``multiprocessing``'s
    default on Linux) shares that open file with the child: a ``flock`` through it in the
    child is the parent's own lock, taken at once while the parent holds it, and the
    child's release would end the parent's. The child must wait its turn."""
    import select
    import time

    path = tmp_path / ".index" / "write.lock"
    lock = locking.WriteLock(path)
    with lock.hold():
        pass
    go_read, go_write = os.pipe()
    in_read, in_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: wait for the parent to hold the lock, then take it
        try:
            os.read(go_read, 1)
            with lock.hold():
                os.write(in_write, b"in")
        finally:
            os._exit(0)
    inside_with_parent = waiting = False
    try:
        with lock.hold():
            os.write(go_write, b"g")
            deadline = time.monotonic() + 60
            while not (inside_with_parent or waiting) and time.monotonic() < deadline:
                inside_with_parent = bool(select.select([in_read], [], [], 0.01)[0])
                waiting = _waiting_on(pid, path)
        assert not inside_with_parent, "the forked child took the lock while its parent held it"
        assert waiting
        assert os.read(in_read, 2) == b"in"  # and it has it once the parent let go
    finally:
        os.waitpid(pid, 0)
        for fd in (go_read, go_write, in_read, in_write):
            os.close(fd)
        lock.close()


def _open_under(folder: Path) -> list[str]:
    """The files this process has open under ``folder``."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # the listing's own descriptor, closed by now
        if target.startswith(f"{folder}{os.sep}"):
            found.append(os.path.relpath(target, folder))
    return sorted(found)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="lists open files through /proc")
def test_a_closed_vault_keeps_no_lock_or_journal_of_its_commits_open(tmp_path: Path, team_git: None) -> None:
    """The locks stay open between writes; closing the vault closes them all, its git
    commits' lock and journal lock too: left to the garbage collector (the vault and its
    git state refer to each other), they stayed open after ``close``, and on Windows an
    open file keeps the folder from being moved or deleted."""
    import gc

    from gitteam import make_team

    team = make_team(tmp_path)
    collecting = gc.isenabled()
    gc.disable()  # what a collection would tidy is not what close does
    try:
        with Vault(team.victim) as vault:
            vault.remember("A fact whose write is committed")
            vault.sync()
        assert _open_under(team.victim) == []
    finally:
        if collecting:
            gc.enable()
