"""The tool's own git runs safely: a ``.git/`` synced from elsewhere (hooks, a config
naming programs) and a pulled ``.gitattributes`` never make agent-memory's git commands
run a program or silently change how memories merge; a repository another user owns is
refused. Real git (a bare remote, a teammate's clone, the victim's), the CLI as a user
runs it."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from agent_memory.vault.vault import Vault

from conftest import run_cli
from gitteam import Team, git, make_team

HOOKS = ("pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-merge", "post-checkout",
         "post-rewrite", "pre-rebase", "reference-transaction", "pre-push", "pre-auto-gc", "pre-merge-commit")


pytestmark = pytest.mark.usefixtures("team_git")


@pytest.fixture
def team(tmp_path: Path) -> Team:
    return make_team(tmp_path)


@pytest.fixture
def ran(tmp_path: Path) -> Path:
    """The file every planted program appends its name to: it must stay absent."""
    return tmp_path / "ran"


def program(ran: Path, label: str) -> str:
    return f"echo {label} >> {shlex.quote(str(ran))}"


def plant_hooks(repo: Path, ran: Path) -> None:
    hooks = repo / ".git" / "hooks"
    for name in HOOKS:
        (hooks / name).write_text(f"#!/bin/sh\n{program(ran, name)}\nexit 0\n")
        (hooks / name).chmod(0o755)


def shared_memory(team: Team) -> str:
    """A memory both clones have: written by the teammate, synced by the victim."""
    with Vault(team.mate) as mate:
        memory = mate.remember("The staging database is rebuilt nightly.", title="Staging db")["memory"]
    team.push("remember: Staging db")
    assert run_cli("sync", vault=team.victim).returncode == 0
    return memory["id"]


def edit_both_sides(team: Team, memory_id: str) -> None:
    """The teammate tags the memory and pushes; the victim tags it too (a merge to make)."""
    with Vault(team.mate) as mate:
        mate.update(memory_id, add_tags=["ops"])
    team.push("tag ops")
    assert run_cli("edit", memory_id, "--add-tag", "db", vault=team.victim).returncode == 0


# --------------------------------------------------------------------------- hooks


def test_the_repositorys_hooks_never_run_for_the_tools_git_unless_opted_in(team: Team, ran: Path) -> None:
    memory_id = shared_memory(team)
    plant_hooks(team.victim, ran)
    edit_both_sides(team, memory_id)
    synced = run_cli("sync", vault=team.victim)
    assert synced.returncode == 0, synced.stderr
    assert run_cli("history", memory_id, vault=team.victim).returncode == 0
    assert not ran.exists(), ran.read_text()
    assert team.remote_log()[0].startswith("update: Staging db")  # the sync itself went through
    with Vault(team.victim) as victim:
        assert set(victim.get(memory_id)["tags"]) == {"ops", "db"}
    # A pulled "hooks = true" is no opt-in until this clone approves it.
    (team.mate / ".agent-memory.toml").write_text("[git]\ncommit = true\nhooks = true\n")
    team.push("turn hooks on")
    assert run_cli("sync", vault=team.victim).returncode == 0
    assert run_cli("edit", memory_id, "--add-tag", "nightly", vault=team.victim).returncode == 0
    assert run_cli("sync", vault=team.victim).returncode == 0
    assert not ran.exists(), ran.read_text()
    assert run_cli("trust", "git.hooks", vault=team.victim).returncode == 0
    assert run_cli("edit", memory_id, "--add-tag", "rebuilt", vault=team.victim).returncode == 0
    assert run_cli("sync", vault=team.victim).returncode == 0
    assert {"pre-commit", "post-commit", "pre-push"} <= set(ran.read_text().split())  # opted in: they run


# --------------------------------------------------------------------------- programs in .git/config


def test_programs_a_synced_git_config_names_never_run(team: Team, ran: Path) -> None:
    (team.mate / ".gitattributes").write_text("*.md filter=evil diff=evil merge=agent-memory\nnotes.txt merge=evil\n")
    (team.mate / "notes.txt").write_text("one\ntwo\nthree\n")
    team.push("attributes")
    memory_id = shared_memory(team)
    edit_both_sides(team, memory_id)
    (team.mate / "notes.txt").write_text("one\ntwo\nthree\nfour\n")
    team.push("notes")
    (team.victim / "notes.txt").write_text("zero\none\ntwo\nthree\n")
    git(team.victim, "commit", "-qam", "notes here")  # (before the plant: a person's own git runs it too)
    config = {  # what a .git/config synced through a shared folder could say
        "core.fsmonitor": program(ran, "fsmonitor"),
        "core.pager": program(ran, "pager"),
        "core.editor": program(ran, "editor"),
        "sequence.editor": program(ran, "sequence-editor"),
        "diff.external": program(ran, "diff-external"),
        "diff.evil.textconv": program(ran, "textconv"),
        "diff.evil.command": program(ran, "diff-command"),
        "filter.evil.clean": program(ran, "clean") + "; cat",
        "filter.evil.smudge": program(ran, "smudge") + "; cat",
        "filter.evil.process": program(ran, "process"),
        "filter.evil.required": "true",
        "merge.agent-memory.driver": program(ran, "our-driver-replaced") + "; exit 0",
        "merge.evil.driver": program(ran, "merge-driver") + "; exit 0",
        "remote.origin.uploadpack": program(ran, "uploadpack") + "; git-upload-pack",
        "remote.origin.receivepack": program(ran, "receivepack") + "; git-receive-pack",
        "core.alternateRefsCommand": program(ran, "alternate-refs"),
        "gpg.program": program(ran, "gpg"),
    }
    for key, value in config.items():
        git(team.victim, "config", key, value)
    for command in (("sync",), ("history", memory_id), ("doctor",), ("sync",)):
        done = run_cli(*command, vault=team.victim)
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    assert not ran.exists(), ran.read_text()
    with Vault(team.victim) as victim:
        assert set(victim.get(memory_id)["tags"]) == {"ops", "db"}  # merged by our driver, not the planted one
    assert (team.victim / "notes.txt").read_text() == "zero\none\ntwo\nthree\nfour\n"  # git's own text merge
    assert "notes here" in team.remote_log()


def test_an_ext_url_a_synced_config_plants_is_never_run(team: Team, ran: Path) -> None:
    git(team.victim, "config", "protocol.ext.allow", "always")
    git(team.victim, "config", f"url.ext::sh -c {program(ran, 'ext').replace(' ', '% ')}.insteadOf", str(team.remote))
    assert run_cli("add", "Written before the sync.", vault=team.victim).returncode == 0
    done = run_cli("sync", vault=team.victim)
    assert done.returncode == 1 and "Cannot reach the remote" in done.stderr
    assert not ran.exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="giving a repository to another user needs root (chown)")
def test_a_repository_another_user_owns_is_refused_with_what_to_do(team: Team) -> None:
    memory_id = shared_memory(team)
    for folder, dirs, files in os.walk(team.victim / ".git"):
        for name in (folder, *(os.path.join(folder, n) for n in dirs + files)):
            os.lchown(name, 4242, 4242)
    os.lchown(team.victim, 4242, 4242)
    for command in (("sync",), ("history", memory_id), ("git", "setup")):
        done = run_cli(*command, vault=team.victim)
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert "belongs to another user" in done.stderr and "safe.directory" in done.stderr


@pytest.mark.parametrize("planted", ["refs/heads/main", "packed-refs", "index"])
def test_a_named_pipe_in_the_git_folder_is_refused_not_waited_on(team: Team, planted: str) -> None:
    """A synced folder carries named pipes: git waits on one in its refs or its index for
    ever, so the tool's git stopped only at its timeout (30-120 s), for every command of
    the vault. Commands that need git say which file to remove; the others work."""
    memory_id = shared_memory(team)
    git(team.victim, "pack-refs", "--all")  # every ref in packed-refs: a pipe there is read by every command
    path = team.victim / ".git" / planted
    path.unlink(missing_ok=True)  # the branch's ref: found in the pipe before packed-refs
    os.mkfifo(path)
    for command in (("sync",), ("history", memory_id)):
        done = run_cli(*command, vault=team.victim)
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert f"{path} is a named pipe" in done.stderr and "remove it" in done.stderr
    listed = run_cli("--json", "list", vault=team.victim)
    assert listed.returncode == 0, listed.stderr
    assert [m["id"] for m in json.loads(listed.stdout)["memories"]] == [memory_id]


# --------------------------------------------------------------------------- merge attributes


def test_git_setup_pins_the_driver_where_it_never_travels(tmp_path: Path) -> None:
    repo = tmp_path / "code"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    vault = repo / "docs" / "team notes"
    Vault.init(vault).close()
    for _ in range(2):  # safe to run again
        assert run_cli("git", "setup", vault=vault).returncode == 0
    pinned = (repo / ".git" / "info" / "attributes").read_text()
    assert pinned.count('"docs/team notes/**/*.md" merge=agent-memory') == 1
    (repo / "elsewhere.md").write_text("x\n")
    (vault / "a").mkdir()
    (vault / "a" / "note.md").write_text("x\n")
    (repo / ".gitattributes").write_text("*.md merge=union\n")  # a pulled line
    shown = git(repo, "check-attr", "merge", "--", "docs/team notes/a/note.md", "elsewhere.md")
    assert shown.splitlines() == ["docs/team notes/a/note.md: merge: agent-memory", "elsewhere.md: merge: union"]


@pytest.mark.parametrize("line", ["*.md merge=union", "*.md merge=binary", "*.md -merge", "2026/** merge=evil"])
def test_sync_refuses_to_pull_a_gitattributes_that_changes_how_memories_merge(team: Team, line: str) -> None:
    memory_id = shared_memory(team)
    edit_both_sides(team, memory_id)
    (team.mate / ".gitattributes").write_text(line + "\n")
    team.push("merge memories differently")
    done = run_cli("sync", vault=team.victim)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "git would merge memory files another way" in done.stderr and "agent-memory git setup" in done.stderr
    assert "merge memories differently" not in team.victim_log()  # nothing pulled
    assert team.remote_log()[0] == "merge memories differently"  # nor pushed
    assert run_cli("git", "setup", vault=team.victim).returncode == 0
    synced = run_cli("sync", vault=team.victim)
    assert synced.returncode == 0, synced.stderr
    with Vault(team.victim) as victim:
        memory = victim.get(memory_id)
        assert set(memory["tags"]) == {"ops", "db"} and not memory.get("conflict")
