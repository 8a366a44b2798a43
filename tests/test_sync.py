"""The watcher through a real watchdog observer on real files: every way people and
their tools change a vault ends with the index equal to a rebuild from the files and
a search that sees the change. Waits are bounded polls of the index, never sleeps."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_memory.index import reconcile
from agent_memory.watch import watcher
from agent_memory.watch.watcher import Change, Watcher
from agent_memory.vault.vault import Vault
from tests.conftest import assert_index_matches_files, deadline, wait_until

DEADLINE = deadline(120)  # generous: a busy machine; a healthy run takes milliseconds


def hand_note(body: str, *, tags: str = "[]", extra: str = "") -> str:
    """A file as a person writes it: a little front matter, then the text."""
    return f"---\ntags: {tags}\n{extra}---\n{body}\n"


def row(vault: Vault, rel: str) -> Any:
    return vault.index.by_path(rel)


def body_is(vault: Vault, rel: str, text: str) -> bool:
    found = row(vault, rel)
    return found is not None and text in found["body"]


def hits(vault: Vault, query: str, **filters: Any) -> list[str]:
    """Paths of the memories holding every word of ``query``."""
    return [h["path"] for h in vault.search(query, limit=100, match="all", **filters)["hits"]]


def git(cwd: Path, *args: str, ok: tuple[int, ...] = (0,)) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false",
         "-c", "init.defaultBranch=main", *args],
        cwd=cwd, capture_output=True, text=True,
    )
    assert done.returncode in ok, f"git {' '.join(args)} failed: {done.stderr}"
    return done.stdout




@pytest.fixture
def changes() -> list[Change]:
    return []


# --------------------------------------------------------------------------- editing patterns


def test_write_in_place(vault: Vault, watch: Callable[..., Watcher]) -> None:
    watch()
    (vault.root / "people").mkdir()
    path = vault.root / "people" / "priya.md"
    path.write_text(hand_note("Priya prefers tea in the morning."))
    wait_until(lambda: row(vault, "people/priya.md"), "the new file is indexed")
    with open(path, "r+") as handle:  # same inode, rewritten in place
        handle.write(hand_note("Priya prefers coffee in the morning."))
        handle.truncate()
    wait_until(lambda: body_is(vault, "people/priya.md", "coffee"), "the in-place edit is indexed")
    assert hits(vault, "priya coffee") == ["people/priya.md"]
    assert hits(vault, "priya tea") == []
    assert path.read_text() == hand_note("Priya prefers coffee in the morning.")  # never rewritten
    assert_index_matches_files(vault)


def test_a_note_saved_empty_is_folded_in_once_it_stays_empty(vault: Vault, watch: Callable[..., Watcher],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty file can be an editor between its truncate and its write, so for a moment
    the watcher keeps the old row. When the file stays empty no event comes again; before,
    the old text was searched (and a vouching watcher vouched for it) until the next sweep.
    (The moment is 2 s; 0.3 s here, so the test does not wait for it.)"""
    monkeypatch.setattr(reconcile, "SETTLE_GIVE_UP", 0.3)
    monkeypatch.setattr(watcher, "SETTLE_GIVE_UP", 0.3)
    path = vault.root / "errands.md"
    path.write_text(hand_note("Buy the blue paint on Saturday."))
    watch(sweep_interval=3600)
    wait_until(lambda: hits(vault, "blue paint") == ["errands.md"], "the note is indexed")
    path.write_text("")  # a person emptied it on purpose
    wait_until(lambda: hits(vault, "blue paint") == [], "the emptied note is folded in")
    assert_index_matches_files(vault)


def test_atomic_save_temp_then_rename(vault: Vault, watch: Callable[..., Watcher]) -> None:
    path = vault.root / "deploys.md"
    path.write_text(hand_note("ACME deploys on Fridays."))
    watch()
    wait_until(lambda: row(vault, "deploys.md"), "the start-up sweep indexes the file")
    tmp = vault.root / ".deploys.md.tmp-4821"  # VS Code / Sublime style
    tmp.write_text(hand_note("ACME deploys on Tuesdays now."))
    os.replace(tmp, path)
    wait_until(lambda: body_is(vault, "deploys.md", "Tuesdays"), "the renamed-over file is indexed")
    assert hits(vault, "ACME tuesdays") == ["deploys.md"]
    assert_index_matches_files(vault)


def test_vim_style_save_with_backup(vault: Vault, watch: Callable[..., Watcher]) -> None:
    path = vault.root / "server.md"
    path.write_text(hand_note("The build server is called hopper."))
    watch()
    wait_until(lambda: row(vault, "server.md"), "the file is indexed")
    backup = vault.root / "server.md~"
    os.rename(path, backup)  # vim: original becomes the backup...
    (vault.root / "4913").write_text("")  # ...after probing the folder with a file named 4913
    (vault.root / "4913").unlink()
    path.write_text(hand_note("The build server is called lovelace."))  # ...a new file is written...
    backup.unlink()  # ...and the backup deleted
    wait_until(lambda: body_is(vault, "server.md", "lovelace"), "vim's save is indexed")
    assert hits(vault, "build server lovelace") == ["server.md"]
    assert hits(vault, "hopper") == []
    assert_index_matches_files(vault)


def test_obsidian_style_frequent_small_writes(vault: Vault, watch: Callable[..., Watcher]) -> None:
    watch()
    path = vault.root / "meeting.md"
    text = hand_note("Standup notes:", tags="[meeting]")
    path.write_text(text)
    for word in "the release moves to thursday because the database migration is late".split():
        text = text.rstrip("\n") + f" {word}\n"
        path.write_text(text)  # Obsidian rewrites the whole file in place as you type
        time.sleep(0.005)
    wait_until(lambda: body_is(vault, "meeting.md", "migration is late"), "the last write is indexed")
    assert hits(vault, "release thursday migration", tags=["meeting"]) == ["meeting.md"]
    assert path.read_text() == text
    assert_index_matches_files(vault)


def test_jetbrains_safe_write(vault: Vault, watch: Callable[..., Watcher]) -> None:
    path = vault.root / "budget.md"
    path.write_text(hand_note("The Q3 budget is 40k."))
    watch()
    wait_until(lambda: row(vault, "budget.md"), "the file is indexed")
    tmp = vault.root / "budget.md___jb_tmp___"
    old = vault.root / "budget.md___jb_old___"
    tmp.write_text(hand_note("The Q3 budget is 55k."))
    os.rename(path, old)
    os.rename(tmp, path)
    old.unlink()
    wait_until(lambda: body_is(vault, "budget.md", "55k"), "the safe write is indexed")
    assert hits(vault, "budget 55k") == ["budget.md"]
    assert {r["path"] for r in vault.index.query("SELECT path FROM memories")} == {"budget.md"}
    assert_index_matches_files(vault)


def test_file_renamed_keeps_its_id_under_the_new_path(vault: Vault, watch: Callable[..., Watcher]) -> None:
    watcher = watch()
    made = vault.remember("The staging database lives in eu-west.", tags=["infra"])["memory"]
    # A person renames a file that has been there a moment: one created and moved out of a
    # brand-new folder before inotify watches that folder leaves no event at all.
    wait_until(lambda: watcher.counts["unchanged"], "the watcher has seen the tool's own write")
    (vault.root / "infra").mkdir()
    os.rename(vault.root / made["path"], vault.root / "infra" / "staging-db.md")
    wait_until(lambda: row(vault, made["path"]) is None and row(vault, "infra/staging-db.md"),
               "the index follows the rename")
    assert vault.get(made["id"])["path"] == "infra/staging-db.md"
    assert hits(vault, "staging database", tags=["infra"]) == ["infra/staging-db.md"]
    assert_index_matches_files(vault)


def test_folder_created_with_files(vault: Vault, watch: Callable[..., Watcher], tmp_path: Path) -> None:
    watch()
    made = vault.root / "projects" / "alpha" / "notes"
    made.mkdir(parents=True)
    for n in range(10):
        (made / f"note-{n}.md").write_text(hand_note(f"Alpha note {n} about rockets."))
    outside = tmp_path / "outside" / "imported"  # a folder prepared elsewhere, then moved in
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "one.md").write_text(hand_note("Imported note about satellites."))
    (outside / "two.md").write_text(hand_note("Another imported note about satellites."))
    shutil.move(str(outside), str(vault.root / "imported"))
    wait_until(lambda: len(hits(vault, "rockets")) == 10, "all ten new notes are searchable")
    wait_until(lambda: len(hits(vault, "satellites")) == 2, "the moved-in folder is searchable")
    assert sorted(hits(vault, "satellites")) == ["imported/deep/one.md", "imported/two.md"]
    assert_index_matches_files(vault)


def test_folder_moved(vault: Vault, watch: Callable[..., Watcher]) -> None:
    folder = vault.root / "clients" / "acme"
    folder.mkdir(parents=True)
    for n in range(5):
        (folder / f"call-{n}.md").write_text(hand_note(f"Call {n} with ACME about invoices."))
    watch()
    wait_until(lambda: len(hits(vault, "invoices")) == 5, "the folder is indexed")
    (vault.root / "archive").mkdir()
    os.rename(vault.root / "clients", vault.root / "archive" / "clients")
    wait_until(
        lambda: sorted(hits(vault, "invoices")) == [f"archive/clients/acme/call-{n}.md" for n in range(5)],
        "every file is found under its new path",
    )
    assert hits(vault, "invoices", path_prefix="clients/") == []
    assert_index_matches_files(vault)


def test_folder_deleted_and_folder_moved_out(vault: Vault, watch: Callable[..., Watcher], tmp_path: Path) -> None:
    for name in ("old", "gone"):
        (vault.root / name / "sub").mkdir(parents=True)
        for n in range(4):
            (vault.root / name / "sub" / f"{n}.md").write_text(hand_note(f"{name} stuff number {n} zebra"))
    (vault.root / "keep.md").write_text(hand_note("keep this zebra"))
    watch()
    wait_until(lambda: len(hits(vault, "zebra")) == 9, "everything is indexed")
    shutil.rmtree(vault.root / "old")
    os.rename(vault.root / "gone", tmp_path / "moved-out")  # leaves the vault: no per-file events
    wait_until(lambda: hits(vault, "zebra") == ["keep.md"], "both folders' memories are gone")
    assert_index_matches_files(vault)


def test_folder_moved_into_a_dot_folder_leaves_the_index(vault: Vault, watch: Callable[..., Watcher]) -> None:
    (vault.root / "drafts").mkdir()
    (vault.root / "drafts" / "idea.md").write_text(hand_note("An idea about penguins."))
    watch()
    wait_until(lambda: hits(vault, "penguins"), "the draft is indexed")
    (vault.root / ".trash").mkdir(exist_ok=True)
    os.rename(vault.root / "drafts", vault.root / ".trash" / "drafts")  # Obsidian's delete
    wait_until(lambda: not hits(vault, "penguins"), "the trashed folder leaves the index")
    assert (vault.root / ".trash" / "drafts" / "idea.md").exists()
    assert_index_matches_files(vault)


def test_git_checkout_of_fifty_changed_files(vault: Vault, watch: Callable[..., Watcher]) -> None:
    root = vault.root
    git(root, "init", "-q")
    for n in range(50):
        (root / "team" / f"{n:02d}.md").parent.mkdir(exist_ok=True)
        (root / "team" / f"{n:02d}.md").write_text(hand_note(f"Teammate {n} works on the mainline branch.", tags="[main]"))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "main", "--date=2026-01-01T09:00:00Z")
    git(root, "checkout", "-qb", "feature")
    for n in range(50):
        (root / "team" / f"{n:02d}.md").write_text(hand_note(f"Teammate {n} works on the featurebranch.", tags="[feature]"))
    (root / "team" / "only-on-feature.md").write_text(hand_note("Exists only on the featurebranch."))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "feature", "--date=2026-02-01T09:00:00Z")
    vault.reconcile()
    watch(sweep_interval=3600)  # the checkout reaches the index through its events alone
    assert len(hits(vault, "featurebranch")) == 51
    git(root, "checkout", "-q", "main")  # 50 files rewritten and one deleted at once
    wait_until(lambda: len(hits(vault, "mainline")) == 50 and not hits(vault, "featurebranch"),
               "the index follows the checkout")
    assert len(hits(vault, "teammate", tags=["main"])) == 50
    assert hits(vault, "teammate", tags=["feature"]) == []
    # The notes have no dates of their own: theirs come from git, and follow the checkout.
    wait_until(lambda: {vault.get(f"team/{n:02d}.md")["updated"] for n in range(50)} == {"2026-01-01T09:00:00Z"},
               "the notes' dates follow the checkout")
    assert git(root, "status", "--porcelain") == ""  # the tool rewrote nothing
    assert_index_matches_files(vault)


def test_file_made_unparseable_then_fixed(vault: Vault, watch: Callable[..., Watcher]) -> None:
    watch()
    path = vault.root / "oncall.md"
    path.write_text(hand_note("Pager rotation starts on Monday.", tags="[oncall]"))
    wait_until(lambda: row(vault, "oncall.md"), "the file is indexed")
    path.write_text("---\ntags: [oncall\nnamespace: ops\n---\nPager rotation starts on Monday.\n")  # mid-edit
    broken = wait_until(lambda: (r := row(vault, "oncall.md")) is not None and r["problems"] and r,
                        "the broken file is flagged")
    assert "broken YAML" in broken["problems"]
    assert hits(vault, "pager rotation") == ["oncall.md"]  # still found from its body
    path.write_text("---\ntags: [oncall, pager]\nnamespace: ops\n---\nPager rotation starts on Monday.\n")
    fixed = wait_until(lambda: (r := row(vault, "oncall.md")) is not None and not r["problems"] and r,
                       "the fixed file is indexed properly")
    assert fixed["namespace"] == "ops"
    assert hits(vault, "pager rotation", namespace="ops", tags=["pager"]) == ["oncall.md"]
    assert vault.get("oncall.md")["problems"] == []
    assert_index_matches_files(vault)


def test_only_change_is_a_tag(vault: Vault, watch: Callable[..., Watcher]) -> None:
    path = vault.root / "pets.md"
    path.write_text(hand_note("Rex is the office mascot.", tags="[cats]"))
    watch()
    wait_until(lambda: row(vault, "pets.md"), "the file is indexed")
    before = path.stat()
    path.write_text(hand_note("Rex is the office mascot.", tags="[dogs]"))  # same size, same body
    assert path.stat().st_size == before.st_size
    wait_until(lambda: hits(vault, "mascot", tags=["dogs"]), "the new tag is searchable")
    assert hits(vault, "mascot", tags=["cats"]) == []
    assert_index_matches_files(vault)


def test_hand_made_note_in_a_new_folder_is_found_by_id_path(vault: Vault, watch: Callable[..., Watcher]) -> None:
    watch()
    (vault.root / "people").mkdir()
    (vault.root / "people" / "priya.md").write_text("# Priya\nPriya runs the billing team.\n")
    wait_until(lambda: hits(vault, "billing team"), "the note is searchable")
    assert vault.get("people/priya.md")["title"] == "Priya"
    assert_index_matches_files(vault)


# --------------------------------------------------------------------------- the tool's own writes


def test_tool_writes_are_recognised_without_a_reparse(vault: Vault, watch: Callable[..., Watcher],
                                                      changes: list[Change], monkeypatch: pytest.MonkeyPatch,
                                                      parse_calls: list[str]) -> None:
    parsed = parse_calls
    outcomes: list[tuple[str, str]] = []
    real_reconcile_path = vault.reconcile_path

    def recording(rel: str) -> str:
        outcome = real_reconcile_path(rel)
        outcomes.append((rel, outcome))
        return outcome

    monkeypatch.setattr(vault, "reconcile_path", recording)
    watch(on_change=changes.append)
    made = vault.remember("Customer ACME prefers deploys on Fridays.", tags=["deploy"])["memory"]
    vault.update(made["id"], add_tags=["customer"])  # an atomic replace by the tool
    parsed.clear()
    (vault.root / "sentinel.md").write_text("written after the tool's writes\n")
    wait_until(lambda: ("sentinel.md", "added") in outcomes, "the later human file is folded in")
    assert (made["path"], "unchanged") in outcomes  # the watcher saw the tool's file...
    assert made["path"] not in parsed  # ...recognised it by hash, without parsing it
    assert [c.path for c in changes] == ["sentinel.md"]
    assert hits(vault, "ACME deploys", tags=["customer"]) == [made["path"]]
    assert_index_matches_files(vault)


def test_watcher_never_writes_a_file(vault: Vault, watch: Callable[..., Watcher]) -> None:
    odd = "\ufeff---\r\non: yes\r\n2024: [x]\r\ntags: foo, Bar\r\n---\r\nCRLF note with odd keys.\r\n"
    path = vault.root / "odd.md"
    watch()
    path.write_bytes(odd.encode())
    mtime = path.stat().st_mtime_ns
    wait_until(lambda: hits(vault, "CRLF odd keys"), "the odd file is searchable")
    assert path.read_bytes() == odd.encode() and path.stat().st_mtime_ns == mtime
    assert_index_matches_files(vault)


# --------------------------------------------------------------------------- git conflicts and duplicates


def test_git_add_add_conflict_is_indexed_searchable_and_flagged(vault: Vault, watch: Callable[..., Watcher]) -> None:
    root = vault.root
    git(root, "init", "-q")
    git(root, "add", ".gitignore")
    git(root, "commit", "-qm", "init")
    rel = "2026/07/20/acme.md"
    (root / "2026" / "07" / "20").mkdir(parents=True)
    git(root, "checkout", "-qb", "laptop")
    (root / rel).write_text("---\nid: 01aaaaaaaaaaaaaa\ntags: [deploy]\ncreated: 2026-07-20T09:00:00Z\n---\n"
                            "ACME deploys on Fridays.\n")
    git(root, "add", rel)
    git(root, "commit", "-qm", "laptop")
    git(root, "checkout", "-q", "main")
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_text("---\nid: 01bbbbbbbbbbbbbb\ntags: [billing]\ncreated: 2026-07-20T10:00:00Z\n---\n"
                            "ACME wants invoices monthly.\n")
    git(root, "add", rel)
    git(root, "commit", "-qm", "desktop")
    watch()
    wait_until(lambda: body_is(vault, rel, "invoices"), "the desktop's note is indexed")
    git(root, "merge", "laptop", ok=(1,))  # both machines made the same slug on the same day
    assert "<<<<<<<" in (root / rel).read_text()
    wait_until(lambda: (r := row(vault, rel)) is not None and r["conflict"], "the conflict is flagged")
    assert hits(vault, "ACME fridays") == [rel]  # both sides stay findable
    assert hits(vault, "ACME invoices") == [rel]
    assert vault.get(rel)["conflict"] is True
    assert vault.stats()["conflicts"] == [rel]
    assert_index_matches_files(vault)


def test_conflict_in_the_body_is_flagged(vault: Vault, watch: Callable[..., Watcher]) -> None:
    watch()
    text = hand_note("<<<<<<< HEAD\nStandup is at 9.\n=======\nStandup is at 10.\n>>>>>>> origin/main")
    (vault.root / "standup.md").write_text(text)
    wait_until(lambda: (r := row(vault, "standup.md")) is not None and r["conflict"], "the conflict is flagged")
    assert hits(vault, "standup") == ["standup.md"]
    assert vault.get("standup.md")["conflict"] is True
    assert_index_matches_files(vault)


def test_copied_file_keeps_both_and_the_earliest_created_owns_the_id(vault: Vault, watch: Callable[..., Watcher]) -> None:
    watch()
    made = vault.remember("The VPN gateway is vpn2.example.com.", tags=["network"])["memory"]
    original = vault.root / made["path"]
    (vault.root / "copies").mkdir()
    shutil.copy(original, vault.root / "copies" / "vpn.md")  # same id, same created
    (vault.root / "0-early.md").write_text(
        original.read_text().replace(made["created"], "2020-01-01T00:00:00Z").replace("vpn2", "vpn1")
    )
    wait_until(lambda: row(vault, "copies/vpn.md") and row(vault, "0-early.md"), "both copies are indexed")
    assert vault.get(made["id"])["path"] == "0-early.md"  # earliest created wins, not the path
    (vault.root / "0-early.md").unlink()
    wait_until(lambda: row(vault, "0-early.md") is None, "the deleted copy leaves the index")
    assert vault.get(made["id"])["path"] == made["path"]  # same created: the smallest path wins
    assert vault.stats()["duplicate_ids"] == {made["id"]: [made["path"], "copies/vpn.md"]}
    assert sorted(hits(vault, "VPN gateway")) == sorted([made["path"], "copies/vpn.md"])
    assert original.exists() and (vault.root / "copies" / "vpn.md").exists()
    assert_index_matches_files(vault)


# --------------------------------------------------------------------------- missed events, lifecycle


def test_changes_made_while_not_watching_are_caught_on_start(vault: Vault, watch: Callable[..., Watcher],
                                                              changes: list[Change]) -> None:
    (vault.root / "a.md").write_text("alpha one\n")
    (vault.root / "b.md").write_text("bravo one\n")
    vault.reconcile()
    (vault.root / "a.md").write_text("alpha two, longer now\n")  # while nothing watches
    (vault.root / "b.md").unlink()
    (vault.root / "c.md").write_text("charlie\n")
    watch(on_change=changes.append)
    wait_until(lambda: changes, "the start-up sweep reports what it fixed")
    assert changes[0] == Change("sweep", "", "1 added, 1 updated, 1 removed")
    assert hits(vault, "alpha longer") == ["a.md"] and hits(vault, "bravo") == [] and hits(vault, "charlie") == ["c.md"]
    assert_index_matches_files(vault)


def test_periodic_sweep_catches_what_events_missed(vault: Vault, watch: Callable[..., Watcher],
                                                   changes: list[Change], tmp_path: Path) -> None:
    path = vault.root / "quiet.md"
    path.write_text("written quietly\n")
    watcher = watch(on_change=changes.append, sweep_interval=0.2)
    wait_until(lambda: hits(vault, "quietly"), "the file is indexed")
    outside = tmp_path / "elsewhere.md"
    os.link(path, outside)  # a second name outside the vault: writes through it bring no event
    with open(outside, "r+") as handle:
        handle.write("changed behind the watcher's back\n")
    wait_until(lambda: hits(vault, "behind the watcher's back"), "the periodic sweep finds the change")
    # The sweep reports after its commit: searches (on their own connections) may see it first.
    wait_until(lambda: Change("sweep", "", "1 updated") in changes, "the sweep reports it")
    assert Change("updated", "quiet.md") not in changes  # no event saw it: the sweep did
    assert watcher.counts["sweeps"] >= 2
    assert_index_matches_files(vault)


def test_stop_folds_in_pending_paths_and_joins(vault: Vault, watch: Callable[..., Watcher]) -> None:
    watcher = watch(debounce=30.0)  # nothing would be folded in before stop()
    (vault.root / "late.md").write_text("written just before stop\n")
    wait_until(lambda: watcher.pending, "the change is waiting out its debounce")
    watcher.stop()
    assert hits(vault, "written before stop") == ["late.md"]
    assert not any(t.name == "agent-memory-sync" for t in threading.enumerate())
    assert_index_matches_files(vault)


def test_a_watcher_starts_only_once(vault: Vault, watch: Callable[..., Watcher]) -> None:
    watcher = watch()
    with pytest.raises(RuntimeError, match="already started"):
        watcher.start()


# --------------------------------------------------------------------------- several processes


def _spawn(args: list[str], out: Path, err: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(args, stdout=out.open("wb"), stderr=err.open("wb"), env=env)


def test_two_watchers_in_two_processes_do_not_fight(vault: Vault, watch: Callable[..., Watcher],
                                                    changes: list[Change], tmp_path: Path) -> None:
    out, err = tmp_path / "watch.out", tmp_path / "watch.err"
    (vault.root / "seed.md").write_text("there before the watchers\n")
    # As started from a terminal: Ctrl-C raises KeyboardInterrupt. (A process started in the
    # background by a shell without job control, as CI runners and nohup'd runs may be,
    # inherits SIGINT ignored, and Python keeps it so.) faulthandler: a watcher that does
    # not stop is asked for its threads' stacks (below).
    from_a_terminal = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                       "from agent_memory.cli import main; sys.argv[0] = 'agent-memory'; main()")
    other = _spawn([sys.executable, "-c", from_a_terminal, "--dir", str(vault.root), "watch"], out, err,
                   env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    try:
        # Both start-up sweeps are over before the edits begin, so only events report them.
        wait_until(lambda: out.read_text().endswith(" sweep    1 added\n"), "the CLI watcher has swept")
        mine = watch(on_change=changes.append)
        wait_until(lambda: mine.counts["sweeps"], "this watcher has swept")
        path = vault.root / "shared.md"
        edits = 12
        for n in range(edits):
            tmp = vault.root / ".shared.md.tmp"  # atomic saves: no reader ever sees half a file
            tmp.write_text(hand_note(f"Shared note version v{n}x."))
            os.replace(tmp, path)
            wait_until(lambda n=n: body_is(vault, "shared.md", f"v{n}x"), f"version {n} is indexed")
            # both watchers have seen this version before the next one is written
            wait_until(lambda n=n: watched_in(out, changes) >= n + 1, f"version {n} is reported")
        made = vault.remember("Written by an agent while two watchers run.")["memory"]
    finally:
        other.send_signal(2)  # Ctrl-C
        try:
            code = other.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            other.send_signal(signal.SIGABRT)  # faulthandler writes every thread's stack to its stderr
            other.wait(timeout=DEADLINE)
            pytest.fail(f"the CLI watcher did not stop on Ctrl-C; its stderr:\n{err.read_text()}")
    assert code == 0
    logged = out.read_text().splitlines()
    # Each version was folded in by exactly one of the two; the other found it unchanged.
    assert watched_in(out, changes) == edits
    assert not [line for line in logged if made["path"] in line]  # the tool's own write: no change
    assert err.read_text().splitlines() == [f"Watching {vault.root} (Ctrl-C to stop)", "Stopped."]
    assert hits(vault, "shared note v11x") == ["shared.md"]
    assert_index_matches_files(vault)


def watched_in(out: Path, changes: list[Change]) -> int:
    """Changes to shared.md reported by the CLI process plus this one."""
    theirs = [line for line in out.read_text().splitlines() if line.endswith(" shared.md")]
    return len(theirs) + len([c for c in changes if c.path == "shared.md"])


_NO_INOTIFY = r"""
import os, resource, sys, time
from agent_memory.watch.watcher import Watcher
from agent_memory.vault.vault import Vault

vault = Vault(sys.argv[1])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
free = os.dup(0)
os.close(free)
resource.setrlimit(resource.RLIMIT_NOFILE, (free, hard))  # no new file descriptor, so no inotify
watcher = Watcher(vault, sweep_interval=0.2)
try:
    watcher.start()
finally:
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
print("watching" if watcher.watching else "sweeping", flush=True)
(vault.root / "later.md").write_text("written after the watch failed\n")
deadline = time.monotonic() + float(sys.argv[2])
while not vault.search("written after the watch failed")["hits"]:
    if time.monotonic() > deadline:
        sys.exit("not indexed")
    time.sleep(0.01)
watcher.stop()
vault.close()
print("indexed", flush=True)
"""


def test_without_a_watch_it_falls_back_to_sweeps_with_a_warning(vault: Vault) -> None:
    """No file descriptor left for inotify (as when the per-user limit is reached)."""
    done = subprocess.run([sys.executable, "-c", _NO_INOTIFY, str(vault.root), str(DEADLINE)],
                          capture_output=True, text=True, timeout=deadline(120))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["sweeping", "indexed"]
    assert "warning: cannot watch" in done.stderr and "max_user_watches" in done.stderr
    assert hits(vault, "written after the watch failed") == ["later.md"]
    assert_index_matches_files(vault)


def test_a_file_with_broken_yaml_is_reported_as_a_problem_not_added(vault: Vault, watch: Callable[..., Watcher],
                                                                    changes: list[Change]) -> None:
    watcher = watch(on_change=changes.append)
    wait_until(lambda: watcher.counts["sweeps"], "the start-up sweep is done")  # then files come as events
    (vault.root / "good.md").write_text(hand_note("A note that reads fine."))
    (vault.root / "broken.md").write_text("---\ntags: [a, b\n---\nThe list above is never closed.\n")
    wait_until(lambda: {c.path for c in changes} >= {"good.md", "broken.md"}, "both files are reported")
    [broken] = [c for c in changes if c.path == "broken.md"]
    assert broken.action == "problem" and "broken YAML front matter" in broken.detail
    assert {c.action for c in changes if c.path == "good.md"} == {"added"}
    assert row(vault, "broken.md")  # still indexed as far as it can be
    assert_index_matches_files(vault)


# --------------------------------------------------------------------------- the watcher's own failures


@pytest.mark.parametrize("options", [{"debounce": -1}, {"sweep_interval": 0}])
def test_a_watcher_with_impossible_timings_is_refused(vault: Vault, options: dict) -> None:
    with pytest.raises(ValueError, match="debounce must be >= 0 and sweep_interval > 0"):
        Watcher(vault, **options)


def test_a_failing_change_callback_is_named_and_the_watcher_keeps_indexing(
    vault: Vault, watch: Callable[..., Watcher], caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_change: Change) -> None:
        raise RuntimeError("the log pipe is closed")

    watch(on_change=broken)
    (vault.root / "a.md").write_text(hand_note("The kettle is in the blue cupboard."))
    wait_until(lambda: body_is(vault, "a.md", "The kettle is in the blue cupboard."), "the first edit is indexed")
    (vault.root / "a.md").write_text(hand_note("The kettle moved to the red cupboard."))
    wait_until(lambda: body_is(vault, "a.md", "The kettle moved to the red cupboard."), "the next edit is indexed too")
    assert "on_change callback failed: the log pipe is closed" in caplog.text


def test_a_failing_sweep_is_named_and_the_watcher_stops_vouching(
    vault: Vault, watch: Callable[..., Watcher], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from agent_memory.watch import vouch

    watch(sweep_interval=0.2)
    health = vault.store.control_dir / vouch.HEALTH_NAME
    wait_until(lambda: '"healthy": true' in health.read_text(), "the watcher vouches")

    def walk_fails(self: Vault) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(Vault, "reconcile", walk_fails)  # the next periodic sweep's walk fails
    # Commands walk for themselves until a sweep works again.
    wait_until(lambda: '"healthy": false' in health.read_text(), "the watcher says it cannot vouch")
    err = caplog.text
    assert "full reconcile of" in err and "failed: [Errno 5] Input/output error" in err
