"""The one rule for opening a file the tool keeps in the vault (``disk/nofollow.py``):
a symlink planted at its name is never followed, a named pipe is never waited on, and
only a regular file is read, only so far."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_memory.disk import nofollow
from conftest import deadline

PRIVATE = b"someone's own file, outside the vault\n"


@pytest.fixture
def private(tmp_path: Path) -> Path:
    """A file of a person's that a planted symlink points at."""
    path = tmp_path / "private.txt"
    path.write_bytes(PRIVATE)
    return path


def _without_waiting(work: Callable[[], object], fifo: Path) -> object:
    """``work``'s result, run in a thread: fail (instead of hanging the suite) if it waits
    on the pipe. A reader stuck opening it is let go by opening the pipe's other end."""
    result: list[object] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(work())
        except BaseException as exc:  # noqa: BLE001 - raised again in the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(deadline(60))
    if thread.is_alive():
        os.close(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))  # a writer: the waiting open returns
        thread.join()
        pytest.fail(f"waited on the named pipe {fifo.name} for a writer")
    if errors:
        raise errors[0]
    return result[0]


@pytest.mark.parametrize("read", [nofollow.read_regular, nofollow.read_record, nofollow.open_read],
                         ids=["read_regular", "read_record", "open_read"])
def test_a_symlink_to_a_real_file_is_refused_not_read(tmp_path: Path, private: Path, read: Callable[[Path], object],
                                                      ) -> None:
    link = tmp_path / "records.jsonl"
    link.symlink_to(private)
    with pytest.raises(OSError) as raised:
        read(link)
    assert raised.value.errno == errno.ELOOP


@pytest.mark.parametrize("flags", [os.O_WRONLY | os.O_APPEND | os.O_CREAT, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                                   os.O_RDWR | os.O_CREAT], ids=["append", "truncate", "lock"])
def test_a_write_through_a_symlink_is_refused_and_its_target_untouched(tmp_path: Path, private: Path,
                                                                       flags: int) -> None:
    link = tmp_path / "journal.jsonl"
    link.symlink_to(private)
    with pytest.raises(OSError) as raised:
        nofollow.open_write(link, flags)
    assert raised.value.errno == errno.ELOOP
    assert private.read_bytes() == PRIVATE and link.is_symlink()


def test_a_symlink_to_nowhere_is_refused_not_created_through(tmp_path: Path) -> None:
    link = tmp_path / "stale"
    link.symlink_to(tmp_path / "made-elsewhere")
    with pytest.raises(OSError) as raised:
        nofollow.open_write(link, os.O_WRONLY | os.O_CREAT)
    assert raised.value.errno == errno.ELOOP
    assert not (tmp_path / "made-elsewhere").exists()


def test_a_new_file_is_created_with_its_mode_and_never_over_one_there(tmp_path: Path) -> None:
    path = tmp_path / ".entry.tmp"
    os.close(nofollow.open_write(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    assert path.stat().st_mode & 0o777 == 0o600 & ~_umask()
    with pytest.raises(FileExistsError):
        nofollow.open_write(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)


def test_a_named_pipe_is_not_waited_on_and_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "ledger.jsonl"
    os.mkfifo(fifo)
    assert _without_waiting(lambda: nofollow.read_regular(fifo, 1 << 16), fifo) is None

    def record() -> object:
        with pytest.raises(ValueError, match="not a regular file"):
            nofollow.read_record(fifo)
        return True

    assert _without_waiting(record, fifo) is True


def test_a_named_pipe_opened_to_write_without_waiting_fails_at_once(tmp_path: Path) -> None:
    """What the stale mark asks (``O_NONBLOCK`` among its flags): no reader, no wait."""
    fifo = tmp_path / "stale"
    os.mkfifo(fifo)

    def write() -> object:
        with pytest.raises(OSError) as raised:
            nofollow.open_write(fifo, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK)
        return raised.value.errno

    assert _without_waiting(write, fifo) == errno.ENXIO


def test_a_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "git-pending.jsonl"
    folder.mkdir()
    assert nofollow.read_regular(folder) is None
    with pytest.raises(ValueError, match="not a regular file"):
        nofollow.read_record(folder)


def test_an_oversized_file_is_read_only_one_byte_past_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_bytes(b"x" * 100_000)
    assert nofollow.read_regular(path, 10) == b"x" * 11  # over the limit: the caller says so
    with pytest.raises(ValueError, match="too large for a record"):
        nofollow.read_record(path, 10)


def test_a_plain_file_reads_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "trash.jsonl"
    data = bytes(range(256)) * 1000  # past one read's 64 KiB
    path.write_bytes(data)
    assert nofollow.read_regular(path) == data
    assert nofollow.read_regular(path, len(data)) == data
    assert nofollow.read_record(path) == data
    (tmp_path / "empty").write_bytes(b"")
    assert nofollow.read_regular(tmp_path / "empty", 10) == b"" == nofollow.read_record(tmp_path / "empty")


def test_a_file_whose_stat_says_less_than_it_holds_is_read_to_its_end() -> None:
    """A /proc-like file says it is empty: its bytes are read all the same, to the limit."""
    status = Path("/proc/self/status")
    if not status.exists():
        pytest.skip("no /proc here")
    assert status.stat().st_size == 0
    assert b"Name:" in (nofollow.read_regular(status) or b"")
    assert len(nofollow.read_regular(status, 5) or b"") == 6
    with pytest.raises(ValueError, match="too large for a record"):  # a record is never handed back over its limit
        nofollow.read_record(status, 5)


def test_a_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        nofollow.read_regular(tmp_path / "gone")
    with pytest.raises(FileNotFoundError):
        nofollow.read_record(tmp_path / "gone")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_pipe_planted_as_the_watchers_lock_never_hangs_opening_the_vault(tmp_path: Path) -> None:
    """Every command asks whether a watcher holds ``.index/watcher.lock``: opening a FIFO
    there to read waited for a writer forever, before anything was recalled."""
    from agent_memory.vault.vault import Vault

    root = tmp_path / "vault"
    with Vault.init(root) as vault:
        vault.remember("Customer ACME prefers deploys on Fridays")
    lock = root / ".index" / "watcher.lock"
    os.mkfifo(lock)

    def recall() -> object:
        with Vault(root) as vault:
            return vault.search("ACME deploys")["count"]

    assert _without_waiting(recall, lock) == 1
