"""Conflicts explained and nothing hidden: ``sync`` sets a person's uncommitted changes
aside in a stash it names itself, finds conflicts with ``git ls-files -u`` (a file git
could not merge line by line has no markers), says what each file now holds and where
the person's change is, and puts the change back when it can. A conflicted note keeps
its "ours" side's title. Real git: a bare remote, a teammate's clone, and ours."""

from __future__ import annotations

import os
import re
import socket
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_memory.errors import GitError, SyncConflict
from agent_memory.vault.vault import Vault

from gitteam import Team, git, make_team

PRIYA = "# Priya\n\nPriya owns billing.\n"


pytestmark = pytest.mark.usefixtures("team_git")


@pytest.fixture
def team(tmp_path: Path) -> Team:
    team = make_team(tmp_path)
    (team.mate / "people").mkdir()
    (team.mate / "people" / "priya.md").write_text(PRIYA)
    (team.mate / "terms.md").write_text("# Terms\n\nPay in USD.\n")
    (team.mate / "attachments").mkdir()
    (team.mate / "attachments" / "diagram.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00first")
    team.push("shared notes")
    git(team.victim, "pull", "-q")
    return team


def both_change_terms(team: Team) -> None:
    """The teammate pushes EUR; this clone commits GBP locally (not pushed yet)."""
    (team.mate / "terms.md").write_text("# Terms in EUR\n\nPay in EUR, net 30.\n")
    team.push("terms: EUR")
    (team.victim / "terms.md").write_text("# Terms in GBP\n\nPay in GBP.\n")
    git(team.victim, "commit", "-q", "-am", "terms: GBP")


def edit_priya(victim: Path) -> Path:
    """An unrelated uncommitted hand edit."""
    path = victim / "people" / "priya.md"
    path.write_text(PRIYA + "Ask her before changing invoices.\n")
    return path


def after_the_check(monkeypatch: pytest.MonkeyPatch, path: str, person: Callable[[], object]) -> None:
    """The person acts on ``path`` (saves, deletes) the instant after sync has checked the
    file is as the stash found it, before it writes the stashed edit back."""
    from agent_memory.git import stash

    checked = stash._untouched

    def then(*args: object) -> str | None:
        found = checked(*args)  # type: ignore[arg-type]
        if str(args[2]) == path:
            person()
        return found

    monkeypatch.setattr(stash, "_untouched", then)


def test_a_conflict_says_what_the_file_holds_and_puts_an_unrelated_edit_back(team: Team) -> None:
    both_change_terms(team)
    priya = edit_priya(team.victim)
    with Vault(team.victim) as vault, pytest.raises(SyncConflict) as caught:
        vault.sync()
    text = (team.victim / "terms.md").read_text()
    start = re.search(r"^<<<<<<<.*$", text, re.MULTILINE)[0]
    end = re.search(r"^>>>>>>>.*$", text, re.MULTILINE)[0]
    message = str(caught.value)
    assert f"terms.md holds both versions, between the lines {start} and {end}" in message
    assert "Updated upstream" not in message and "Stashed changes" not in message
    # The unrelated edit is back in the file, and no stash is left over to forget.
    assert priya.read_text().endswith("Ask her before changing invoices.\n")
    assert "people/priya.md are back in place" in message
    assert git(team.victim, "stash", "list") == ""
    assert caught.value.result["conflicts"] == ["terms.md"]


def test_a_conflicted_note_keeps_our_sides_title_in_search_and_list(team: Team) -> None:
    both_change_terms(team)
    with Vault(team.victim) as vault:
        with pytest.raises(SyncConflict):
            vault.sync()
        [hit] = vault.search("Pay in EUR")["hits"]
        assert hit["title"] == "Terms in GBP" and hit["path"] == "terms.md"
        listed = {item["path"]: item["title"] for item in vault.list(limit=50)["memories"]}
        assert listed["terms.md"] == "Terms in GBP"
        assert not any(title.startswith("<<<<<<<") for title in listed.values())


def test_an_edit_the_pull_also_changed_stays_in_a_named_stash_during_the_conflict(team: Team) -> None:
    both_change_terms(team)
    (team.mate / "people" / "priya.md").write_text(PRIYA + "She moved to Lisbon.\n")
    team.push("priya moved")
    priya = edit_priya(team.victim)
    with Vault(team.victim) as vault, pytest.raises(SyncConflict) as caught:
        vault.sync()
    stashes = git(team.victim, "stash", "list")
    assert "agent-memory sync" in stashes  # findable, under a name that says whose it is
    assert "Your uncommitted edits to people/priya.md are set aside in stash@{0}" in str(caught.value)
    git(team.victim, "show", "stash@{0}:people/priya.md")  # the edit is in it
    assert "Ask her before changing invoices." in git(team.victim, "show", "stash@{0}:people/priya.md")
    assert "Lisbon" in priya.read_text()  # the file holds the merge's version meanwhile


def test_a_binary_conflict_is_found_without_markers_and_said_as_it_is(team: Team) -> None:
    (team.mate / "attachments" / "diagram.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00theirs")
    team.push("diagram: theirs")
    (team.victim / "attachments" / "diagram.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00ours")
    git(team.victim, "commit", "-q", "-am", "diagram: ours")
    priya = edit_priya(team.victim)
    with Vault(team.victim) as vault, pytest.raises(SyncConflict) as caught:
        vault.sync()
    message = str(caught.value)
    assert caught.value.result["conflicts"] == ["attachments/diagram.png"]
    assert ("attachments/diagram.png holds this clone's version only, without conflict markers (git could not "
            "merge it line by line); the other side is git show :3:attachments/diagram.png") in message
    assert (team.victim / "attachments" / "diagram.png").read_bytes().endswith(b"ours")
    assert priya.read_text().endswith("Ask her before changing invoices.\n")


def test_a_pulled_merge_binary_attribute_is_refused_and_the_persons_line_kept(team: Team) -> None:
    (team.mate / ".gitattributes").write_text("*.md merge=binary\n")
    (team.mate / "people" / "priya.md").write_text(PRIYA + "She moved to Lisbon.\n")
    team.push("merge markdown as binary")
    priya = edit_priya(team.victim)
    head = git(team.victim, "rev-parse", "HEAD")
    with Vault(team.victim) as vault, pytest.raises(GitError, match=r"merge=binary"):
        vault.sync()
    assert priya.read_text().endswith("Ask her before changing invoices.\n")
    assert git(team.victim, "rev-parse", "HEAD") == head and git(team.victim, "stash", "list") == ""


def test_an_edit_that_conflicts_with_the_pull_is_described_with_the_markers_it_has(team: Team) -> None:
    (team.mate / "people" / "priya.md").write_text(PRIYA.replace("billing", "payroll"))
    team.push("priya: payroll")
    priya = team.victim / "people" / "priya.md"
    priya.write_text(PRIYA.replace("billing", "invoicing"))  # uncommitted
    with Vault(team.victim) as vault, pytest.raises(SyncConflict) as caught:
        vault.sync()
    text = priya.read_text()
    assert "payroll" in text and "invoicing" in text
    start = re.search(r"^<<<<<<<.*$", text, re.MULTILINE)[0]
    assert f"people/priya.md holds both versions, between the lines {start}" in str(caught.value)
    assert "agent-memory sync" in git(team.victim, "stash", "list")
    assert "stash@{0}" in str(caught.value)


# --------------------------------------------------------------------------- merges in history


def resolve(team: Team, how: str) -> None:
    """Sync into the conflict, resolve terms.md ``how``, and commit the merge."""
    both_change_terms(team)
    with Vault(team.victim) as vault, pytest.raises(SyncConflict):
        vault.sync()
    terms = team.victim / "terms.md"
    if how in ("ours", "theirs"):
        git(team.victim, "checkout", f"--{how}", "--", "terms.md")
    else:
        terms.write_text("# Terms in EUR\n\nPay in EUR, net 30 (GBP accepted).\n")
    git(team.victim, "add", "terms.md")
    git(team.victim, "commit", "-q", "--no-edit")


@pytest.mark.parametrize(("how", "added", "removed"), [
    ("theirs", ["# Terms in EUR", "Pay in EUR, net 30."], ["# Terms in GBP", "Pay in GBP."]),
    ("hand", ["# Terms in EUR", "Pay in EUR, net 30 (GBP accepted)."], ["# Terms in GBP", "Pay in GBP."]),
    ("ours", [], []),
])
def test_a_resolved_conflict_shows_in_history_as_a_merge(team: Team, how: str, added: list[str],
                                                         removed: list[str]) -> None:
    resolve(team, how)
    with Vault(team.victim) as vault:
        newest = vault.history("terms.md")["commits"][0]
        assert newest["merge"] is True and newest["status"] == "merged"
        assert newest["message"].startswith("Merge remote-tracking branch 'origin/main'")
        assert (newest["added"], newest["removed"]) == (added, removed)  # against the first parent: ours
        messages = [entry["message"] for entry in vault.history("terms.md")["commits"]]
    assert "terms: EUR" in messages and "terms: GBP" in messages


def test_a_merge_that_left_a_memory_alone_is_not_in_its_history(team: Team) -> None:
    resolve(team, "theirs")
    with Vault(team.victim) as vault:
        entries = vault.history("people/priya.md")["commits"]
    assert [entry["message"] for entry in entries] == ["shared notes"]
    assert not any(entry.get("merge") for entry in entries)


def test_a_save_made_while_an_unrelated_edit_is_put_back_stands(
        team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    """During a conflict, sync writes back each stashed edit the pull left alone, once it
    has checked the file is as the stash found it. A save the person made between that
    check and the write was overwritten; now it stands, and the stashed edit stays in
    the stash, named."""
    both_change_terms(team)
    priya = edit_priya(team.victim)
    after_the_check(monkeypatch, "people/priya.md", lambda: priya.write_text(PRIYA + "Saved again just now.\n"))
    with Vault(team.victim) as vault, pytest.raises(SyncConflict) as caught:
        vault.sync()
    assert priya.read_text() == PRIYA + "Saved again just now.\n"
    assert "Your uncommitted edits to people/priya.md are set aside in stash@{0}" in str(caught.value)
    assert "Ask her before changing invoices." in git(team.victim, "show", "stash@{0}:people/priya.md")
    assert not [p.name for p in priya.parent.iterdir() if p.name != "priya.md"]  # no copy left beside it


def test_a_file_deleted_while_an_unrelated_edit_is_put_back_stays_deleted(
        team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    """The person deletes the file between sync's check and its write-back: the swap
    found nothing to swap with, the error escaped as a bare "No such file" instead of
    the conflict, and the stashed copy was left beside it as a hidden temp file. The
    deletion stands, the conflict is reported, and the edit stays in the stash."""
    both_change_terms(team)
    priya = edit_priya(team.victim)
    after_the_check(monkeypatch, "people/priya.md", priya.unlink)
    with Vault(team.victim) as vault, pytest.raises(SyncConflict) as caught:
        vault.sync()
    assert not priya.exists()
    assert "Your uncommitted edits to people/priya.md are set aside in stash@{0}" in str(caught.value)
    assert not list(priya.parent.iterdir())  # no copy left beside it


def test_a_save_then_a_deletion_during_a_write_back_keeps_the_save(
        team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    """The person saves between sync's check and its write-back, then deletes the file
    the write-back just put there: the swap meant to give their save its name back
    found no file, the error escaped, and their save was left as a hidden temp file.
    Their save is back under its name."""
    from agent_memory.git import stash

    both_change_terms(team)
    priya = edit_priya(team.victim)
    checked, blob = stash._untouched, stash._blob

    def then_saved(*args: object) -> str | None:
        found = checked(*args)  # type: ignore[arg-type]
        if str(args[2]) == "people/priya.md":
            priya.write_text(PRIYA + "Saved again just now.\n")
        return found

    def then_deleted(repo: object, path: Path) -> str:
        if path.name != "priya.md" and path.parent == priya.parent and priya.exists():
            priya.unlink()  # the person deletes what the write-back put there
        return blob(repo, path)  # type: ignore[arg-type]

    monkeypatch.setattr(stash, "_untouched", then_saved)
    monkeypatch.setattr(stash, "_blob", then_deleted)
    with Vault(team.victim) as vault, pytest.raises(SyncConflict):
        vault.sync()
    assert priya.read_text() == PRIYA + "Saved again just now.\n"
    assert not [p.name for p in priya.parent.iterdir() if p.name != "priya.md"]


def test_a_staged_new_file_in_a_new_folder_is_put_back_during_a_conflict(team: Team) -> None:
    """A person's new file, staged (git add) in a folder of its own, is set aside with
    the stash, and git removes the emptied folder with it. Writing it back during a
    conflict failed with "No such file" (its folder was gone) instead of the conflict
    report. The folder is made again and the file is back."""
    both_change_terms(team)
    new = team.victim / "projects" / "acme" / "plan.md"
    new.parent.mkdir(parents=True)
    new.write_text("# ACME plan\n\nShip on Friday.\n")
    git(team.victim, "add", "projects/acme/plan.md")
    with Vault(team.victim) as vault, pytest.raises(SyncConflict):
        vault.sync()
    assert new.read_text() == "# ACME plan\n\nShip on Friday.\n"


def test_saves_kept_beside_a_taken_name_in_one_second_are_all_kept(tmp_path: Path) -> None:
    """A save the write-back displaced goes back to its name, or beside it as
    ``<name>.saved-<when>`` when that is taken again; two in one second collided and the
    second raised, leaving it under a hidden temp name."""
    from agent_memory.git import stash

    target = tmp_path / "terms.md"
    target.write_text("the file as it is now\n")
    for n in range(3):
        displaced = tmp_path / f".displaced-{n}.tmp"
        displaced.write_text(f"save {n}\n")
        stash._keep(displaced, target)
    kept = sorted(p.read_text() for p in tmp_path.iterdir())
    assert kept == ["save 0\n", "save 1\n", "save 2\n", "the file as it is now\n"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


class Crash(BaseException):
    """The process dies here (a kill, a power cut): nothing after this step runs."""


def test_a_save_displaced_by_a_write_back_survives_a_crash_and_the_orphan_sweep(
        team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    """The person saves between sync's check and its write-back; the swap takes their save
    aside, and the process dies before it looks at what it took. Their save sat under the
    tool's temp-file name, which every later command deletes once a minute old. It sits
    beside the file as ``<name>.saved-<when>``: kept by the sweep, no memory to the index,
    and named by the next sync as a file of theirs."""
    from agent_memory.disk.store import ORPHAN_AGE
    from agent_memory.git import stash

    both_change_terms(team)
    priya = edit_priya(team.victim)
    after_the_check(monkeypatch, "people/priya.md", lambda: priya.write_text(PRIYA + "Saved again just now.\n"))

    def crash(*args: object, **kwargs: object) -> bool:
        raise Crash

    monkeypatch.setattr(stash, "_done_with", crash)
    with Vault(team.victim) as vault, pytest.raises(Crash):
        vault.sync()
    monkeypatch.undo()
    old = time.time() - ORPHAN_AGE - 60
    for path in priya.parent.iterdir():
        os.utime(path, (old, old), follow_symlinks=False)
    with Vault(team.victim) as vault:
        vault.reconcile()  # what every command's start runs: it sweeps the temp files a crash left
        assert [hit["path"] for hit in vault.search("Saved again")["hits"]] == []  # no second memory
    [kept] = [p for p in priya.parent.iterdir() if p.name != "priya.md"]
    assert kept.read_text() == PRIYA + "Saved again just now.\n"
    assert re.fullmatch(r"priya\.md\.saved-[0-9TZ-]+", kept.name)
    git(team.victim, "checkout", "--theirs", "--", "terms.md")  # the person resolves the conflict
    git(team.victim, "add", "terms.md")
    git(team.victim, "commit", "-q", "--no-edit")
    with Vault(team.victim) as vault:
        result = vault.sync()
    assert f"added people/{kept.name}" in result["hand_not_shared"]


def test_an_executable_file_is_put_back_executable_during_a_conflict(team: Team) -> None:
    """The stashed files are written back as fresh files with the mode of the file they
    replace (or 0644): a new script the person staged, and a file they made executable,
    came back without their execute bit (git records 100755 in the stash)."""
    both_change_terms(team)
    script = team.victim / "tools" / "sync-notes.sh"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\necho synced\n")
    script.chmod(0o755)
    git(team.victim, "add", "tools/sync-notes.sh")
    priya = edit_priya(team.victim)
    priya.chmod(0o755)
    with Vault(team.victim) as vault, pytest.raises(SyncConflict) as caught:
        vault.sync()
    assert "people/priya.md" in str(caught.value) and "back in place" in str(caught.value)
    assert script.read_text() == "#!/bin/sh\necho synced\n" and priya.read_text().endswith("invoices.\n")
    assert script.stat().st_mode & 0o111 and priya.stat().st_mode & 0o111
    assert git(team.victim, "stash", "list") == ""


def test_a_stashed_symlink_stays_in_the_stash_during_a_conflict(team: Team) -> None:
    """A symlink the person staged is in the stash as a link (mode 120000), whose blob is
    the path it points to: written back, it became a regular file holding that path.
    It stays in the stash, named, for ``git stash pop`` to make the link again."""
    both_change_terms(team)
    link = team.victim / "people" / "lead.md"
    link.symlink_to("priya.md")
    git(team.victim, "add", "people/lead.md")
    with Vault(team.victim) as vault, pytest.raises(SyncConflict) as caught:
        vault.sync()
    assert not link.exists() and not link.is_symlink()
    assert "Your uncommitted edits to people/lead.md are set aside in stash@{0}" in str(caught.value)


def put_in_place(kind: str, path: Path) -> None:
    """What a person or a program puts at ``path`` in place of the file: no save in it."""
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        here = os.getcwd()
        os.chdir(path.parent)  # a socket's path must be short: bound by its name alone
        try:
            socket.socket(socket.AF_UNIX).bind(path.name)
        finally:
            os.chdir(here)
    else:  # a link to a file holding what sync checked: the link is no less the person's
        (path.parent / "priya-copy.md").write_bytes((path.parent.parent / ".priya-as-checked").read_bytes())
        path.symlink_to("priya-copy.md")


@pytest.mark.parametrize("kind", ["fifo", "socket", "symlink"])
def test_a_pipe_socket_or_link_put_there_during_a_write_back_stands(
        team: Team, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """Between sync's check and its write-back the file becomes a named pipe, a socket or
    a link. What the write-back displaced was hashed by git through its path: a pipe
    hung sync (git waited for a writer), a link was followed to a file holding the
    checked bytes and removed. What is not a regular file holds no save, and is never
    read: it goes back to its name, and the edit stays in the stash, named."""
    both_change_terms(team)
    priya = edit_priya(team.victim)
    (team.victim / ".priya-as-checked").write_text(PRIYA)  # what the stash leaves in the file
    after_the_check(monkeypatch, "people/priya.md", lambda: put_in_place(kind, priya))
    with Vault(team.victim) as vault, pytest.raises(SyncConflict) as caught:
        vault.sync()
    found = os.lstat(priya).st_mode
    assert {"fifo": stat.S_ISFIFO, "socket": stat.S_ISSOCK, "symlink": stat.S_ISLNK}[kind](found)
    assert "Your uncommitted edits to people/priya.md are set aside in stash@{0}" in str(caught.value)
    assert "Ask her before changing invoices." in git(team.victim, "show", "stash@{0}:people/priya.md")
    assert not [p.name for p in priya.parent.iterdir() if ".saved-" in p.name]
