"""A running watcher vouches for the index, so a command skips its start-up walk; any
doubt means the walk. Real watchdog observers (each stopped and joined), real files,
real processes; every test ends with the next open seeing every change.

Some edits are made through a hard link outside the vault: inotify reports an event to
the folder the file was written through, so such an edit is one the watch cannot see,
which is what a lost event looks like. Those are the edits only a walk can find."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_memory.watch import vouch
from agent_memory.watch.watcher import Watcher
from agent_memory.vault.vault import Vault
from tests.conftest import assert_index_matches_files, run_cli
from tests.test_sync import DEADLINE, hand_note, wait_until




@pytest.fixture
def patient(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands in this process wait as long as the tests' deadline for the watcher's
    answer: on two shared cores 100 ms can pass unanswered, and that would only mean a
    walk (correct, but then a test could not tell a vouch from a walk)."""
    monkeypatch.setattr(vouch, "COOKIE_WAIT", DEADLINE)


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The full reconciles run by vault opens (a spy: the real one still runs)."""
    calls: list[Path] = []
    real = Vault.reconcile

    def spy(self: Vault, progress: Any = None) -> Any:
        calls.append(self.root)
        return real(self, progress)

    monkeypatch.setattr(Vault, "reconcile", spy)
    return calls


def vouches(vault: Vault) -> bool:
    return vouch.vouched(vault.store.control_dir, vault.root, vault.index.path, wait=DEADLINE)


def edit_unseen(vault: Vault, rel: str, outside: Path, text: str) -> None:
    """Rewrite a memory through a hard link outside the vault: no event reaches the watch.
    The second name goes again after the edit (a memory with two names is one a watcher
    never vouches for: see the test below)."""
    outside.mkdir(exist_ok=True)
    link = outside / rel.replace("/", "_")
    os.link(vault.root / rel, link)
    with open(link, "r+", encoding="utf-8") as handle:
        handle.write(text)
        handle.truncate()
    link.unlink()


def paths_found(root: Path, query: str, **kwargs: Any) -> list[str]:
    with Vault(root, **kwargs) as opened:
        return sorted(h["path"] for h in opened.search(query, match="all", limit=50)["hits"])


def test_without_a_watcher_an_open_walks_and_sees_every_edit(vault: Vault, walks: list[Path]) -> None:
    (vault.root / "a.md").write_text(hand_note("The kettle is in the blue cupboard."))
    (vault.root / "b.md").write_text(hand_note("The spare kettle is in the garage."))
    vault.reconcile()
    (vault.root / "a.md").write_text(hand_note("The kettle moved to the red cupboard."))
    (vault.root / "b.md").unlink()
    (vault.root / "c.md").write_text(hand_note("A third kettle lives at the office."))
    assert not vouches(vault)
    walks.clear()
    assert paths_found(vault.root, "kettle") == ["a.md", "c.md"]
    assert paths_found(vault.root, "red cupboard") == ["a.md"]
    assert walks, "no watcher: the open must walk"


def test_a_live_watcher_vouches_and_the_next_command_sees_an_edit_made_just_before(
    vault: Vault, watch: Callable[..., Watcher], walks: list[Path], patient: None
) -> None:
    (vault.root / "team").mkdir()
    (vault.root / "team" / "ana.md").write_text(hand_note("Ana reviews the billing queue."))
    (vault.root / "team" / "bo.md").write_text(hand_note("Bo reviews the billing reports."))
    # A debounce longer than the test: these edits are still queued when the command
    # opens the vault; its cookie makes the watcher fold them in first.
    watch(debounce=30.0, sweep_interval=3600)
    wait_until(lambda: vouches(vault), "the watcher vouches for the index")
    (vault.root / "team" / "ana.md").write_text(hand_note("Ana reviews the payroll queue now."))
    (vault.root / "team" / "bo.md").unlink()
    (vault.root / "team" / "cy.md").write_text(hand_note("Cy reviews the payroll reports."))
    walks.clear()
    assert paths_found(vault.root, "payroll") == ["team/ana.md", "team/cy.md"]
    assert paths_found(vault.root, "billing") == []
    assert walks == [], "a healthy watcher vouched: the open must not walk"
    assert_index_matches_files(vault)


def test_the_cli_sees_an_edit_made_just_before_it_with_a_watcher_live(vault: Vault, watch: Callable[..., Watcher]) -> None:
    (vault.root / "deploys.md").write_text(hand_note("ACME deploys on Fridays."))
    watch(debounce=30.0, sweep_interval=3600)
    wait_until(lambda: vouches(vault), "the watcher vouches for the index")
    (vault.root / "deploys.md").write_text(hand_note("ACME deploys on Tuesdays now."))
    (vault.root / "rollback.md").write_text(hand_note("ACME rollbacks need two approvals."))
    found = run_cli("search", "ACME", "--json", vault=vault.root)
    assert found.returncode == 0, found.stderr
    assert "Tuesdays" in found.stdout and "rollbacks" in found.stdout and "Fridays" not in found.stdout
    assert (vault.root / ".index" / "cookies").is_dir() and not any((vault.root / ".index" / "cookies").iterdir())


def test_a_watcher_killed_a_moment_ago_vouches_for_nothing(vault: Vault, walks: list[Path], patient: None,
                                                           tmp_path: Path) -> None:
    (vault.root / "notes.md").write_text(hand_note("The router password is on the fridge."))
    vault.reconcile()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_MEMORY")}
    process = subprocess.Popen([sys.executable, "-m", "agent_memory", "--dir", str(vault.root), "watch"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_until(lambda: vouches(vault), "the watcher process vouches for the index")
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=DEADLINE)
        assert process.stderr is not None
        process.stderr.close()
    # It died without a word: its health file still says healthy; its lock is gone.
    assert '"healthy": true' in (vault.root / ".index" / "watcher.json").read_text()
    assert not vouches(vault)
    edit_unseen(vault, "notes.md", tmp_path / "outside", hand_note("The router password is in the drawer."))
    (vault.root / "new.md").write_text(hand_note("The router was replaced in May."))
    walks.clear()
    assert paths_found(vault.root, "router") == ["new.md", "notes.md"]
    assert paths_found(vault.root, "router drawer") == ["notes.md"]
    assert walks, "a dead watcher vouches for nothing: the open must walk"


def test_after_lost_events_the_watcher_does_not_vouch_until_it_has_swept(
    vault: Vault, watch: Callable[..., Watcher], patient: None, tmp_path: Path
) -> None:
    (vault.root / "plants.md").write_text(hand_note("Water the fern on Mondays."))
    watcher = watch(sweep_interval=3600)
    wait_until(lambda: vouches(vault), "the watcher vouches for the index")
    edit_unseen(vault, "plants.md", tmp_path / "outside", hand_note("Water the fern on Thursdays."))
    # What watchdog 7 does on an inotify queue overflow: it logs this warning, nothing else.
    logging.getLogger("watchdog.observers.inotify_c").warning("Inotify queue overflowed; filesystem events were lost")
    assert paths_found(vault.root, "fern thursdays") == ["plants.md"]
    wait_until(lambda: watcher.counts["sweeps"] >= 2 and vouches(vault), "the watcher swept and vouches again")
    assert_index_matches_files(vault)


def test_a_watcher_whose_watch_is_gone_does_not_vouch(vault: Vault, watch: Callable[..., Watcher], patient: None,
                                                      tmp_path: Path) -> None:
    (vault.root / "car.md").write_text(hand_note("The car is parked on level 2."))
    watcher = watch(sweep_interval=3600)
    wait_until(lambda: vouches(vault), "the watcher vouches for the index")
    assert watcher._observer is not None
    watcher._observer.unschedule_all()  # the watch is gone (as when its folder is unmounted)
    health = vault.root / ".index" / "watcher.json"
    wait_until(lambda: '"healthy": false' in health.read_text(), "the watcher notices and says so")
    assert not vouches(vault)
    edit_unseen(vault, "car.md", tmp_path / "outside", hand_note("The car is parked on level 5."))
    assert paths_found(vault.root, "car level 5") == ["car.md"]


@pytest.mark.parametrize("second_name", ["symlink in the vault", "hard link outside"])
def test_a_memory_with_a_second_name_is_never_vouched_for(vault: Vault, watch: Callable[..., Watcher], patient: None,
                                                         tmp_path: Path, second_name: str) -> None:
    """An edit through one name of a file brings an event for that name only: a symlink's
    row, or every row when the edit comes through a hard link from outside, would stay
    as it was while the watcher vouched (until its next sweep). Before, the watcher
    vouched anyway and the next command searched the old text."""
    (vault.root / "shared").mkdir()
    real = vault.root / "shared" / "kettle.md"
    real.write_text(hand_note("The kettle is in the blue cupboard."))
    if second_name == "symlink in the vault":
        os.symlink("shared/kettle.md", vault.root / "kettle.md")
        through, expected = real, ["kettle.md", "shared/kettle.md"]
    else:
        os.link(real, tmp_path / "kettle.md")
        through, expected = tmp_path / "kettle.md", ["shared/kettle.md"]
    watch(sweep_interval=3600)
    with open(through, "r+", encoding="utf-8") as handle:  # in place, as many editors save
        handle.write(hand_note("The kettle moved to the red cupboard."))
        handle.truncate()
    assert paths_found(vault.root, "red cupboard") == expected
    assert paths_found(vault.root, "blue cupboard") == []
    assert not vouches(vault)
    assert_index_matches_files(vault)


def test_a_watcher_of_another_index_does_not_vouch_for_this_one(vault: Vault, watch: Callable[..., Watcher],
                                                                patient: None, tmp_path: Path) -> None:
    (vault.root / "trip.md").write_text(hand_note("The trip to Lisbon is in June."))
    elsewhere = tmp_path / "elsewhere-index"
    assert paths_found(vault.root, "lisbon", index_dir=elsewhere) == ["trip.md"]  # an index of its own, current
    watch(sweep_interval=3600)
    wait_until(lambda: vouches(vault), "the watcher vouches for its index")
    (vault.root / "trip.md").write_text(hand_note("The trip to Porto is in July."))
    wait_until(lambda: vault.index.by_path("trip.md") and "Porto" in vault.index.by_path("trip.md")["body"],
               "the watcher folds the edit into its index")
    assert paths_found(vault.root, "porto", index_dir=elsewhere) == ["trip.md"]
    assert paths_found(vault.root, "lisbon", index_dir=elsewhere) == []


def test_a_second_watcher_leaves_the_vouching_to_the_first(vault: Vault, watch: Callable[..., Watcher],
                                                           patient: None, walks: list[Path]) -> None:
    first = watch(sweep_interval=3600)
    wait_until(lambda: vouches(vault), "the first watcher vouches")
    with Vault(vault.root, sync=False) as other:
        second = watch(other, sweep_interval=3600)
        wait_until(lambda: second.counts["sweeps"] >= 1, "the second watcher has swept")
        (vault.root / "bread.md").write_text(hand_note("Bake the rye bread on Saturdays."))
        walks.clear()
        assert paths_found(vault.root, "rye bread") == ["bread.md"]
        assert walks == []
        first.stop()  # the vouching one goes: nobody vouches, and opens walk again
        assert not vouches(vault)
        (vault.root / "cake.md").write_text(hand_note("Bake the lemon cake on Sundays."))
        assert paths_found(vault.root, "lemon cake") == ["cake.md"]
        assert walks
        second.stop()  # before its vault closes: a watcher must not outlive the vault it feeds


def test_the_file_system_of_a_path_is_its_longest_mount_point() -> None:
    mounts = ("/dev/vda / ext4 rw 0 0\nsrv:/export /mnt/my\\040notes nfs4 rw 0 0\n"
              "C:\\134 /mnt/c 9p rw 0 0\ntmpfs /mnt/cache tmpfs rw 0 0\n")
    assert vouch.filesystem_of(Path("/mnt/my notes/.memory"), mounts) == "nfs4"
    assert vouch.filesystem_of(Path("/mnt/c/Users/ada/vault"), mounts) == "9p"
    assert vouch.filesystem_of(Path("/mnt/cache"), mounts) == "tmpfs"
    assert vouch.filesystem_of(Path("/mnt/cachet/x"), mounts) == "ext4"  # a prefix of a name is not a mount
    assert vouch.filesystem_of(Path("/home/ada"), mounts) == "ext4"


def test_a_watcher_on_a_network_file_system_never_vouches(vault: Vault, watch: Callable[..., Watcher],
                                                          patient: None, walks: list[Path], monkeypatch, tmp_path,
                                                          caplog) -> None:
    """Edits made on another machine (NFS, SMB) or on the Windows side of WSL (9p) send
    no inotify event here: a watcher would vouch for an index that misses them."""
    mounts = tmp_path / "mounts"
    mounts.write_text(f"/dev/vda / ext4 rw 0 0\nsrv:/export {vault.root.resolve()} nfs4 rw 0 0\n")
    monkeypatch.setattr(vouch, "MOUNTS", mounts)
    with caplog.at_level("WARNING", logger="agent_memory.vouch"):
        watcher = watch(sweep_interval=3600)
        wait_until(lambda: watcher.counts["sweeps"] >= 1, "the watcher has swept")
    assert not vouches(vault)
    assert "nfs4 file system" in caplog.text
    edit = vault.root / "bread.md"
    edit.write_text(hand_note("Bake the rye bread on Saturdays."))
    walks.clear()
    assert paths_found(vault.root, "rye bread") == ["bread.md"]
    assert walks  # the command looked at the files itself


# ---------------------------------------------------------------- the voucher's own fallbacks
# A Voucher is the watcher's side alone (a real flock, real files): each doubt below must
# make ``vouched`` answer False, so the command walks, and must never raise.


def healthy_voucher(vault: Vault) -> vouch.Voucher:
    voucher = vouch.Voucher(vault.store.control_dir, vault.root, vault.index.path)
    assert voucher.acquire()
    voucher.report(healthy=True)
    return voucher


def quick_vouch(vault: Vault) -> bool:
    return vouch.vouched(vault.store.control_dir, vault.root, vault.index.path, wait=0.02)


def test_an_unanswered_cookie_means_a_walk_and_leaves_no_cookie_behind(vault: Vault) -> None:
    voucher = healthy_voucher(vault)  # healthy and holding the lock, but nobody reads the cookies
    try:
        assert not quick_vouch(vault)
        assert list((vault.store.control_dir / vouch.COOKIES_DIRNAME).iterdir()) == []
    finally:
        voucher.release()


def test_an_answer_that_comes_after_the_command_gave_up_is_not_left_behind(vault: Vault) -> None:
    """On a busy machine the watcher may answer after the command stopped waiting and
    removed its cookie: that answer must not stay in the cookies folder."""
    voucher = healthy_voucher(vault)
    cookies = vault.store.control_dir / vouch.COOKIES_DIRNAME
    try:
        assert not quick_vouch(vault)  # nobody answered in time; the command removed its cookie
        voucher.answer(f"{os.getpid()}-{'ab' * 8}", ok=True)  # the late answer to a cookie that is gone
        assert list(cookies.iterdir()) == []
        (cookies / f"{os.getpid()}-{'cd' * 8}").touch()  # a cookie still waiting keeps its answer
        voucher.answer(f"{os.getpid()}-{'cd' * 8}", ok=True)
        assert sorted(p.name for p in cookies.iterdir()) == [f"{os.getpid()}-{'cd' * 8}", f"{os.getpid()}-{'cd' * 8}.ack"]
    finally:
        voucher.release()


def test_a_watcher_that_cannot_write_its_answer_makes_commands_walk(
    vault: Vault, watch: Callable[..., Watcher], monkeypatch: pytest.MonkeyPatch, walks: list[Path], tmp_path: Path
) -> None:
    (vault.root / "car.md").write_text(hand_note("The car is parked on level 2."))
    watch(sweep_interval=3600)
    wait_until(lambda: vouches(vault), "the watcher vouches for the index")
    real_write = vouch._write_atomically

    def full_for_answers(path: Path, data: bytes) -> None:
        if path.name.endswith(vouch.ACK_SUFFIX):
            raise OSError(28, "No space left on device")
        real_write(path, data)

    monkeypatch.setattr(vouch, "_write_atomically", full_for_answers)
    edit_unseen(vault, "car.md", tmp_path / "outside", hand_note("The car is parked on level 5."))
    walks.clear()
    assert paths_found(vault.root, "car level 5") == ["car.md"]  # no answer in time: the open walked
    assert walks


def test_a_health_file_that_cannot_be_written_vouches_for_nothing(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(_path: Path, _data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(vouch, "_write_atomically", full)
    voucher = vouch.Voucher(vault.store.control_dir, vault.root, vault.index.path)
    try:
        assert voucher.acquire()  # the watcher still runs and keeps its own index
        voucher.report(healthy=True)
        assert not (vault.store.control_dir / vouch.HEALTH_NAME).exists()
        assert not quick_vouch(vault)
    finally:
        voucher.release()


@pytest.mark.parametrize("health", ["{not json", "[1, 2]", ""])
def test_a_garbled_health_file_vouches_for_nothing(vault: Vault, health: str) -> None:
    voucher = healthy_voucher(vault)
    try:
        (vault.store.control_dir / vouch.HEALTH_NAME).write_text(health)
        assert not quick_vouch(vault)
    finally:
        voucher.release()


def test_a_health_file_of_a_replaced_vault_folder_vouches_for_nothing(vault: Vault, tmp_path: Path) -> None:
    voucher = healthy_voucher(vault)
    try:
        gone = tmp_path / "renamed-away"
        assert vouch.identity_of(gone) is None
        assert not vouch.vouched(vault.store.control_dir, gone, vault.index.path, wait=0.02)
    finally:
        voucher.release()


def test_a_deleted_cookies_folder_means_a_walk_not_an_error(vault: Vault) -> None:
    voucher = healthy_voucher(vault)
    try:
        (vault.store.control_dir / vouch.COOKIES_DIRNAME).rmdir()
        assert not quick_vouch(vault)
        voucher.tidy()  # nor does the watcher's tidying fail on it
    finally:
        voucher.release()


def test_a_second_voucher_never_replaces_the_first_ones_health_or_answers(vault: Vault) -> None:
    first = healthy_voucher(vault)
    try:
        health = (vault.store.control_dir / vouch.HEALTH_NAME).read_bytes()
        second = vouch.Voucher(vault.store.control_dir, vault.root, vault.root / "other-index.sqlite3")
        assert not second.acquire()
        second.report(healthy=False, lost=True)
        second.answer("1-0123456789abcdef", ok=True)
        second.release()
        assert (vault.store.control_dir / vouch.HEALTH_NAME).read_bytes() == health
        assert list((vault.store.control_dir / vouch.COOKIES_DIRNAME).iterdir()) == []
    finally:
        first.release()


def test_release_without_a_health_file_still_releases_the_lock(vault: Vault) -> None:
    voucher = healthy_voucher(vault)
    (vault.store.control_dir / vouch.HEALTH_NAME).unlink()
    voucher.release()
    voucher.release()  # twice is harmless
    assert not vouch._lock_held(vault.store.control_dir)
    again = vouch.Voucher(vault.store.control_dir, vault.root, vault.index.path)
    assert again.acquire()  # the next watcher can take over
    again.release()


def test_tidy_removes_only_cookies_left_long_ago(vault: Vault) -> None:
    voucher = healthy_voucher(vault)
    try:
        cookies = vault.store.control_dir / vouch.COOKIES_DIRNAME
        old, old_ack, fresh = cookies / "1-00000000000000aa", cookies / "1-00000000000000aa.ack", cookies / "2-00bb"
        for path in (old, old_ack, fresh):
            path.write_text("")
        long_ago = time.time() - vouch.STALE_COOKIE_AGE - 5
        for path in (old, old_ack):
            os.utime(path, (long_ago, long_ago))
        voucher.tidy()
        assert sorted(p.name for p in cookies.iterdir()) == [fresh.name]
    finally:
        voucher.release()


def test_a_voucher_cannot_start_where_the_control_folder_cannot_be_made(vault: Vault, tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("a file where .index/ should be\n")
    voucher = vouch.Voucher(blocked, vault.root, vault.index.path)
    assert not voucher.acquire()
    assert blocked.read_text() == "a file where .index/ should be\n"


def test_without_fcntl_nothing_vouches_and_every_open_walks(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows has no flock: no watcher vouches there, even where a lock is held."""
    holder = healthy_voucher(vault)
    try:
        monkeypatch.setattr(vouch, "fcntl", None)
        assert not vouch.Voucher(vault.store.control_dir, vault.root, vault.index.path).acquire()
        assert not quick_vouch(vault)
    finally:
        holder.release()
