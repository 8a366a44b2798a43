"""Attacks on a shared vault's trust boundary, end to end: a teammate with push rights
(a bare remote, the teammate's clone, the victim's), a synced folder, or a person's own
slip that the tool must not carry to the remote. The CLI runs as a subprocess, as a
person runs it."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from agent_memory.trust import credentials

from conftest import run_cli
from gitteam import Team, git, make_team, token


pytestmark = pytest.mark.usefixtures("team_git")


@pytest.fixture
def team(tmp_path: Path) -> Team:
    return make_team(tmp_path)


def everything_pushed(team: Team) -> bytes:
    """Every blob of every commit the remote holds, as bytes."""
    out = b""
    for line in git(team.remote, "rev-list", "--objects", "--all").splitlines():
        sha = line.split(" ", 1)[0]
        out += git_bytes(team.remote, "cat-file", "-p", sha)
    return out


def a_fresh_clone_with_a_link(team: Team, tmp_path: Path, name: str, target: Path) -> Path:
    """A newcomer's fresh clone of a remote the teammate pushed ``.index/<name>`` to,
    force-added as a symlink to ``target``."""
    (team.mate / ".index").mkdir(exist_ok=True)
    (team.mate / ".index" / name).unlink(missing_ok=True)
    (team.mate / ".index" / name).symlink_to(target)
    team.push(f"{name}, shared", f".index/{name}")
    newcomer = tmp_path / "newcomer"
    git(tmp_path, "clone", "-q", str(team.remote), str(newcomer))
    return newcomer


def git_bytes(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-16", "utf-32"])
def test_a_token_saved_as_utf16_or_utf32_is_neither_committed_nor_pushed(team: Team, encoding: str) -> None:
    """Windows PowerShell's ``>`` and Notepad's "Unicode" save text as UTF-16: a token
    in such a file is still a token once git pushes it."""
    secret = token(7)
    [fingerprint] = [f.fingerprint for f in credentials.find_credentials(secret)]
    bom = "\ufeff" if encoding not in ("utf-16", "utf-32") else ""  # these write their own
    (team.victim / "deploy-notes.txt").write_bytes(f"{bom}Deploy notes\r\nThe token is {secret}\r\n".encode(encoding))
    (team.victim / "plain.md").write_text("A plain note of mine.\n")
    synced = run_cli("--json", "sync", "--all", vault=team.victim, spawn=True)
    assert synced.returncode == 0, synced.stderr
    result = json.loads(synced.stdout)
    assert result["withheld"] == [f"deploy-notes.txt: GitHub token (line 2, fingerprint {fingerprint})"]
    assert result["hand_shared"] == ["added plain.md"]
    assert "deploy-notes.txt" not in team.remote_files() and "plain.md" in team.remote_files()
    pushed = everything_pushed(team)
    assert not [form for form in ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be") if secret.encode(form) in pushed]
    assert git(team.victim, "status", "--porcelain", "--", "deploy-notes.txt") == "?? deploy-notes.txt\n"


def test_git_setup_never_copies_the_file_a_pulled_gitattributes_symlink_names(team: Team, tmp_path: Path) -> None:
    """A teammate pushes ``.gitattributes`` as a symlink to a private file of the victim's;
    ``git setup`` (which every clone runs once, and ``doctor`` asks for) read it through
    the link and wrote it back as the vault's own ``.gitattributes``, to be committed."""
    private = tmp_path / "diary.txt"
    private.write_text("Dear diary, the safe's code is 4711.\n")
    (team.mate / ".gitattributes").unlink()
    (team.mate / ".gitattributes").symlink_to(private)
    team.push("attributes, shared")
    assert run_cli("sync", vault=team.victim, spawn=True).returncode == 0
    assert (team.victim / ".gitattributes").is_symlink()  # git checks the link out as it is
    done = run_cli("git", "setup", vault=team.victim, spawn=True)
    assert done.returncode == 1
    assert done.stderr.startswith("Error: ") and len(done.said) == 1
    assert ".gitattributes is a symlink" in done.stderr and "rm " in done.stderr
    assert (team.victim / ".gitattributes").is_symlink()  # left as it was
    assert private.read_text() == "Dear diary, the safe's code is 4711.\n"
    assert git(team.victim, "config", "--get-regexp", r"merge\.", check=False) == ""  # nothing registered either


@pytest.mark.parametrize("folder", [".Trash", ".INDEX", ".trash.", ".index ", ".\u200ctrash"])
def test_sync_refuses_to_pull_the_trash_or_index_in_another_spelling(team: Team, folder: str) -> None:
    """macOS and Windows compare names without case (Windows drops trailing dots and
    spaces, HFS+ ignores zero-width characters): a pulled ``.Trash/old.md`` lands in this
    clone's ``.trash/`` there, overwriting what it holds. Refused as ``.trash/old.md`` is."""
    (team.mate / folder).mkdir()
    (team.mate / folder / "old.md").write_text("The teammate's version of a trashed note.\n")
    team.push("planted, spelled otherwise")
    done = run_cli("sync", vault=team.victim, spawn=True)
    assert done.returncode == 1 and len(done.said) == 1
    assert f"{folder}/old.md" in done.stderr and "Nothing was pulled or pushed" in done.stderr
    assert f"git rm -r --cached {shlex.quote(folder)}," in done.stderr  # the folder as spelled
    assert "planted, spelled otherwise" not in team.victim_log()
    assert not (team.victim / folder).exists()


def test_sync_never_pushes_the_trash_committed_in_another_spelling(team: Team) -> None:
    (team.victim / ".Trash").mkdir()
    (team.victim / ".Trash" / "forgotten.md").write_text("Forgotten on purpose.\n")
    git(team.victim, "add", ".Trash/forgotten.md")
    git(team.victim, "commit", "-q", "-m", "the trash, committed")
    done = run_cli("sync", vault=team.victim, spawn=True)
    assert done.returncode == 1 and "Cannot push" in done.stderr and ".Trash/forgotten.md" in done.stderr
    assert "the trash, committed" not in team.remote_log()


def test_sync_all_leaves_a_trash_folder_in_another_spelling_uncommitted(team: Team) -> None:
    """What sync refuses to push it never commits in the first place."""
    (team.victim / ".Trash").mkdir()
    (team.victim / ".Trash" / "forgotten.md").write_text("Forgotten on purpose.\n")
    (team.victim / "kept.md").write_text("A note of mine.\n")
    done = run_cli("--json", "sync", "--all", vault=team.victim, spawn=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["hand_shared"] == ["added kept.md"]
    assert not any(p.startswith(".Trash/") for p in team.remote_files())


def test_sync_all_never_pushes_a_file_whose_name_holds_a_passwords_value(team: Team) -> None:
    """The tool never names a file with the value after a credential word; a file a
    person named so is not committed under that name either (its commit message was
    already redacted: the name itself went out)."""
    (team.victim / "The wifi password is hunter2.md").write_text("Ask at the front desk for the guest network.\n")
    (team.victim / "The deploy token is in the team password manager.md").write_text("Ask Priya.\n")
    done = run_cli("--json", "sync", "--all", vault=team.victim, spawn=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["hand_shared"] == ["added The deploy token is in the team password manager.md"]
    [withheld] = result["withheld"]
    assert withheld.startswith("The wifi password is [redacted]: its name holds the value after a credential word")
    assert "hunter2" not in done.stdout + done.stderr
    assert "hunter2" not in git(team.remote, "log", "--all", "--name-only", "--format=%B")
    human = run_cli("sync", "--all", vault=team.victim, spawn=True)
    assert "rename the file" in human.stderr and "hunter2" not in human.stdout + human.stderr


def test_sync_runs_nothing_a_planted_submodules_own_config_names(team: Team, tmp_path: Path) -> None:
    """A teammate pushes a submodule entry (a gitlink); a synced folder then fills its
    folder with a repository whose own config names a clean filter for its files. git
    status looks inside a submodule by running git there, which read that config: the
    tool's sync ran the planted program."""
    ran = tmp_path / "ran"
    planted = tmp_path / "planted"
    planted.mkdir()
    git(planted, "init", "-q", "-b", "main")
    (planted / "notes.txt").write_text("Some notes.\n")
    (planted / ".gitattributes").write_text("* filter=evil\n")
    git(planted, "add", "-A")
    git(planted, "commit", "-q", "-m", "notes")
    (team.mate / ".gitmodules").write_text('[submodule "shared"]\n\tpath = shared\n\turl = ./shared\n')
    git(team.mate, "add", ".gitmodules")
    git(team.mate, "update-index", "--add", "--cacheinfo", f"160000,{git(planted, 'rev-parse', 'HEAD').strip()},shared")
    git(team.mate, "commit", "-q", "-m", "a submodule")
    git(team.mate, "push", "-q")
    assert run_cli("sync", vault=team.victim, spawn=True).returncode == 0
    (team.victim / "shared").rmdir()  # the synced folder brings the submodule's repository
    git(planted, "config", "filter.evil.clean", f"sh -c 'echo clean >> {shlex.quote(str(ran))}; cat'")
    planted.rename(team.victim / "shared")
    os.utime(team.victim / "shared" / "notes.txt", (1, 1))  # its stat changed: git reads it again, through the filter
    (team.victim / "mine.md").write_text("A note of mine.\n")
    for command in (("sync", "--dry-run"), ("sync",), ("sync", "--all")):
        done = run_cli(*command, vault=team.victim, spawn=True)
        assert done.returncode == 0, done.stderr
        assert not ran.exists(), f"agent-memory {' '.join(command)} ran {ran.read_text()!r}"
    assert "mine.md" in team.remote_files()


def test_doctor_never_reads_through_a_pulled_gitattributes_symlink(team: Team, tmp_path: Path) -> None:
    """A pushed ``.gitattributes`` that links to ``/dev/zero`` (or a pipe, here) made
    ``doctor`` read it to its end: forever. git itself never follows that link."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    (team.mate / ".gitattributes").unlink()
    (team.mate / ".gitattributes").symlink_to(pipe)
    team.push("attributes, as a link")
    assert run_cli("sync", vault=team.victim, spawn=True).returncode == 0
    done = run_cli("doctor", vault=team.victim, spawn=True)
    assert "[fail] merge driver: " in done.stdout and ".gitattributes is a symlink" in done.stdout


def test_a_sync_conflict_never_reads_through_a_pulled_symlink(team: Team, tmp_path: Path) -> None:
    """The teammate replaces a note the victim edited with a symlink to ``/dev/zero`` (a
    pipe here): sync's conflict message read the conflicted file to describe it, through
    the link, forever."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    (team.mate / "notes.md").write_text("The first version.\n")
    team.push("a note")
    git(team.victim, "pull", "-q")
    (team.victim / "notes.md").write_text("The victim's version.\n")
    git(team.victim, "commit", "-q", "-am", "the victim's edit")
    (team.mate / "notes.md").unlink()
    (team.mate / "notes.md").symlink_to(pipe)
    team.push("the note, as a link")
    done = run_cli("sync", vault=team.victim, spawn=True)
    assert done.returncode == 1 and len(done.said) == 1
    assert "notes.md holds a symlink, not read" in done.stderr and "git show :3:notes.md" in done.stderr


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors through /proc")
def test_a_folder_planted_where_a_record_or_the_trash_ledger_should_be_leaves_no_descriptor_open(tmp_path: Path) -> None:
    """A synced folder puts a folder where a record is read (the git journal, the trash
    ledger): each read is refused, and none may keep a descriptor open, or a server that
    meets it on every call runs out of them ("too many open files")."""
    from agent_memory.disk.trash import LEDGER_NAME
    from agent_memory.errors import VaultError
    from agent_memory.disk.nofollow import read_record
    from agent_memory.vault.vault import Vault

    vault = Vault.init(tmp_path / "vault")
    try:
        (vault.root / ".trash" / LEDGER_NAME).mkdir(parents=True)
        (vault.root / ".index" / "git-pending.jsonl").mkdir()
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(20):
            with pytest.raises((OSError, ValueError)):
                read_record(vault.root / ".index" / "git-pending.jsonl")
            with pytest.raises(VaultError, match="It must be a plain file"):
                vault.trash_list()  # `agent-memory trash`, the trash listing
        assert len(os.listdir("/proc/self/fd")) == before
    finally:
        vault.close()


def test_a_remote_on_a_shared_drive_runs_none_of_its_hooks_for_sync(team: Team, tmp_path: Path) -> None:
    """A team's remote is a bare repository on a shared drive: anyone who can push there
    can write its ``hooks/`` and its config too. git runs the remote's hooks (and the
    program its config names for alternates) on this machine, as this user, when it
    pushes to a remote that is a path: sync ran them."""
    ran = tmp_path / "ran"
    for hook in ("pre-receive", "update", "post-receive", "post-update", "reference-transaction"):
        (team.remote / "hooks" / hook).write_text(f"#!/bin/sh\necho {hook} >> {shlex.quote(str(ran))}\n")
        (team.remote / "hooks" / hook).chmod(0o755)
    git(team.remote, "config", "core.alternateRefsCommand", f"echo alternates >> {shlex.quote(str(ran))}")
    assert run_cli("add", "Deploys go out on Tuesdays.", vault=team.victim, spawn=True).returncode == 0
    done = run_cli("sync", vault=team.victim, spawn=True)
    assert done.returncode == 0, done.stderr
    assert team.remote_log()[0] == "remember: Deploys go out on Tuesdays."
    assert not ran.exists(), f"sync ran {ran.read_text()!r}"


@pytest.mark.parametrize("path", ["GIT~1/hooks.md", "notes\u200c/../x.md", "a:b.md", "minutes/\x1b]52;c;cHduZWQ=\x07.md",
                                  "\uff0egit/config.md"])
def test_import_keeps_an_exported_path_only_when_the_path_rule_allows_it(tmp_path: Path, path: str) -> None:
    """An export file is someone else's: its paths pass the one path rule every record's
    paths pass (``confine.memory_problem``), not a looser one: an 8.3 short name is
    ``.git`` on Windows, a colon an NTFS stream, a control character a terminal escape.
    Such an item is laid out by its date, as a new memory is."""
    from agent_memory.vault.vault import Vault

    Vault.init(tmp_path / "vault").close()
    export = tmp_path / "export.json"
    export.write_text(json.dumps([{"path": path, "front_matter": {"created": "2026-07-01T10:00:00Z"},
                                   "content": "Minutes of the planning meeting.\n"}]))
    done = run_cli("import", str(export), vault=tmp_path / "vault", spawn=True)
    assert done.returncode == 0, done.stderr
    found = sorted(p.relative_to(tmp_path / "vault").as_posix() for p in (tmp_path / "vault").rglob("*.md"))
    assert found == ["2026/07/01/minutes-of-the-planning-meeting.md"]


def test_a_tool_write_a_pulled_gitignore_hides_is_named_and_committed_once_it_is_not(team: Team) -> None:
    """A teammate pushes a ``.gitignore`` line that covers the dated folders: git status no
    longer lists new memories, and sync said "committed 0 tool writes" while the victim's
    memories silently stopped being shared. Such a write is named every sync, and
    committed once the line is gone."""
    (team.mate / ".gitignore").write_text((team.mate / ".gitignore").read_text() + "20*/\n")
    team.push("ignore the dated folders")
    assert run_cli("sync", vault=team.victim, spawn=True).returncode == 0
    added = json.loads(run_cli("--json", "add", "We ship on Fridays.", vault=team.victim, spawn=True).stdout)
    path = added["memory"]["path"]
    for _ in range(2):  # every time, not once
        done = run_cli("sync", vault=team.victim, spawn=True)
        assert done.returncode == 0, done.stderr
        assert f"not committed or pushed: {path}: git ignores it (.gitignore:" in done.stderr
        assert "fingerprint" not in done.stderr
    preview = json.loads(run_cli("--json", "sync", "--dry-run", vault=team.victim, spawn=True).stdout)
    assert [item.split(": ", 1)[0] for item in preview["withheld"]] == [path]
    assert path not in team.remote_files()
    (team.mate / ".gitignore").write_text((team.mate / ".gitignore").read_text().replace("20*/\n", ""))
    team.push("stop ignoring them")
    assert run_cli("sync", vault=team.victim, spawn=True).returncode == 0  # commits come before the pull
    done = run_cli("sync", vault=team.victim, spawn=True)
    assert done.returncode == 0 and "not committed" not in done.stderr, done.stderr
    assert path in team.remote_files()


def test_a_planted_index_file_symlink_never_lets_the_index_change_the_database_it_names(team: Team, tmp_path: Path) -> None:
    """A teammate force-adds ``.index/index.sqlite3`` as a symlink to a database of the
    victim's (an editor's state, a browser's bookmarks); a fresh clone checks it out as
    it is. SQLite opens through the link, and the index, finding no schema of its own,
    dropped every table in that database to make its own."""
    import sqlite3

    bookmarks = tmp_path / "bookmarks.db"
    with contextlib.closing(sqlite3.connect(bookmarks)) as conn, conn:
        conn.execute("CREATE TABLE bookmarks (url TEXT)")
        conn.execute("INSERT INTO bookmarks VALUES ('https://example.com')")
    newcomer = a_fresh_clone_with_a_link(team, tmp_path, "index.sqlite3", bookmarks)
    assert (newcomer / ".index" / "index.sqlite3").is_symlink()
    done = run_cli("list", vault=newcomer, spawn=True)
    error = done.stderr.strip().splitlines()[-1]  # after the newcomer's "not approved" warning
    assert done.returncode == 1 and error.startswith("Error: ")
    assert "index.sqlite3 is a symlink" in error and "rm " in error
    with contextlib.closing(sqlite3.connect(bookmarks)) as conn:
        assert conn.execute("SELECT url FROM bookmarks").fetchall() == [("https://example.com",)]
    (newcomer / ".index" / "index.sqlite3").unlink()  # as the error says: the index is rebuilt
    assert run_cli("add", "The index is ours again.", vault=newcomer, spawn=True).returncode == 0


def test_a_planted_write_counter_symlink_never_hangs_a_write(team: Team, tmp_path: Path) -> None:
    """``.index/writes.json`` (each index's write count) force-added as a symlink to
    ``/dev/zero`` (a pipe here): every write read it to its end, under the vault's lock,
    forever."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    newcomer = a_fresh_clone_with_a_link(team, tmp_path, "writes.json", pipe)
    done = run_cli("add", "Written in a fresh clone.", vault=newcomer, spawn=True)
    assert done.returncode == 0, done.stderr
    assert "Written in a fresh clone." in run_cli("list", vault=newcomer, spawn=True).stdout
    assert (newcomer / ".index" / "writes.json").is_symlink()  # never written through either


def test_a_bearer_token_pasted_in_a_curl_command_is_neither_pushed_nor_remembered(team: Team) -> None:
    """An opaque API token after ``Authorization: Bearer`` (a curl command pasted into a
    note) has no vendor prefix, and no credential word with ``:`` or ``=`` before it."""
    secret = "Zq81kXv0mT4rB7nW2cY6pL9sD3fH5jG0aQ"
    pasted = f'curl -H "Authorization: Bearer {secret}" https://api.example.com/v1/reports\n'
    (team.victim / "api-notes.md").write_text("# Reports API\n\n" + pasted)
    done = run_cli("--json", "sync", "--all", vault=team.victim, spawn=True)
    assert done.returncode == 0, done.stderr
    [withheld] = json.loads(done.stdout)["withheld"]
    assert withheld.startswith("api-notes.md: bearer token (line 3, fingerprint sha256:")
    assert secret not in done.stdout + done.stderr and "api-notes.md" not in team.remote_files()
    refused = run_cli("add", pasted, vault=team.victim, spawn=True)
    assert refused.returncode == 1 and "bearer token" in refused.stderr and secret not in refused.stderr
    for prose in ("Authorization: Bearer YOUR_TOKEN_HERE", "Authorization: Bearer $API_TOKEN",
                  "She was the bearer of bad news about release 2.4.1 yesterday."):
        assert not credentials.find_credentials(prose), prose
