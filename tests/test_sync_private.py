"""``sync`` never commits or pushes files under the vault's ``.index/`` or ``.trash/`` that
git tracks (a teammate force-added them), never pulls commits that would overwrite them,
and names them. Real git: a bare remote, a teammate's clone, the victim's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_memory.vault.vault import Vault

from conftest import run_cli
from gitteam import Team, git, make_team


pytestmark = pytest.mark.usefixtures("team_git")


@pytest.fixture
def team(tmp_path: Path) -> Team:
    return make_team(tmp_path)


def plant(team: Team) -> list[str]:
    """The teammate force-adds a move journal aimed at the victim's hooks and a trash file."""
    move = team.mate / ".index" / "move"
    move.mkdir(parents=True)
    (move / "manifest.json").write_text(json.dumps({"moves": [{"old": ".git/hooks/post-merge", "new": "payload.md"}]}))
    (team.mate / "payload.md").write_text("#!/bin/sh\necho pwned\n")
    (team.mate / "payload.md").chmod(0o755)
    (team.mate / ".trash").mkdir(exist_ok=True)
    (team.mate / ".trash" / "old.md").write_text("A trashed note from the teammate.\n")
    team.push("planted", ".index/move/manifest.json", ".trash/old.md")
    return [".index/move/manifest.json", ".trash/old.md"]


def test_sync_refuses_to_pull_files_under_index_or_trash_and_names_them(team: Team) -> None:
    (team.victim / ".trash").mkdir(exist_ok=True)
    (team.victim / ".trash" / "old.md").write_text("The victim's own trashed note.\n")
    index_before = (team.victim / ".index" / "index.sqlite3").read_bytes() if (
        team.victim / ".index" / "index.sqlite3").exists() else None
    planted = plant(team)
    done = run_cli("sync", vault=team.victim)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert all(p in done.stderr for p in planted) and "Nothing was pulled or pushed" in done.stderr
    assert "planted" not in team.victim_log()
    assert (team.victim / ".trash" / "old.md").read_text() == "The victim's own trashed note.\n"  # not overwritten
    assert not (team.victim / ".index" / "move").exists()
    assert not (team.victim / ".git" / "hooks" / "post-merge").exists()
    if index_before is not None:
        assert (team.victim / ".index" / "index.sqlite3").read_bytes() == index_before


def test_sync_never_pushes_files_under_index_or_trash_a_person_committed(team: Team) -> None:
    assert run_cli("add", "Written before the mistake.", vault=team.victim).returncode == 0
    (team.victim / ".trash").mkdir(exist_ok=True)
    (team.victim / ".trash" / "forgotten.md").write_text("Forgotten on purpose.\n")
    git(team.victim, "add", "-f", ".trash/forgotten.md", ".index/writes.json")
    git(team.victim, "commit", "-q", "-m", "oops, the trash")
    done = run_cli("sync", vault=team.victim)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "Cannot push" in done.stderr and ".trash/forgotten.md" in done.stderr and "git rm -r --cached" in done.stderr
    assert not any(p.startswith((".trash/", ".index/")) for p in team.remote_files())
    assert "oops, the trash" not in team.remote_log()
    git(team.victim, "rm", "-r", "-q", "--cached", ".index", ".trash")
    git(team.victim, "commit", "-q", "-m", "untrack them")
    synced = run_cli("sync", vault=team.victim)
    assert synced.returncode == 0, synced.stderr
    assert not any(p.startswith((".trash/", ".index/")) for p in team.remote_files())
    assert (team.victim / ".trash" / "forgotten.md").exists()  # the file stays on disk, out of git


def test_files_already_tracked_there_are_named_and_left_out_of_the_tools_commits(team: Team) -> None:
    (team.mate / ".index" / "writes.json").write_text('{"from": "the teammate"}\n')
    (team.mate / ".Trash").mkdir()
    (team.mate / ".Trash" / "old.md").write_text("the trash, as macOS spells it\n")
    team.push("track the write counter", ".index/writes.json", ".Trash/old.md")
    git(team.victim, "pull", "-q")  # the person pulled by hand: now git tracks it here too
    memory = json.loads(run_cli("--json", "add", "Deploys need two approvals.", vault=team.victim).stdout)["memory"]
    assert git(team.victim, "status", "--porcelain", "--", ".index/writes.json").startswith(" M")  # the tool wrote it
    synced = run_cli("--json", "sync", vault=team.victim)
    assert synced.returncode == 0, synced.stderr
    result = json.loads(synced.stdout)
    assert result["tracked_private"] == [".Trash/old.md", ".index/writes.json"] and result["pushed"] == 1
    assert git(team.remote, "show", "main:.index/writes.json") == '{"from": "the teammate"}\n'  # ours never pushed
    assert memory["path"] in team.remote_files()
    human = run_cli("sync", vault=team.victim)
    assert "git tracks .Trash/old.md, .index/writes.json" in human.stderr
    assert "take them out of git: git rm -r --cached .Trash .index, then commit" in human.stderr  # as spelled there
    with Vault(team.victim) as victim:
        assert victim.get(memory["id"])["title"] == "Deploys need two approvals."
