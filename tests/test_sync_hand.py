"""Hand edits are shared, or plainly not: ``sync`` names every file a person changed and
it is not sharing, ``sync --dry-run`` lists what it would commit, and ``sync --all`` (or
``git.commit = "all"``, approved) commits edits, deletes, renames and attachments in one
commit naming them, through the credential gate. Real git: a bare remote and two clones."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_memory.cli.app import cli
from agent_memory.trust import approvals
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files
from gitteam import Team, git, make_team, token


pytestmark = pytest.mark.usefixtures("team_git")


@pytest.fixture
def team(tmp_path: Path) -> Team:
    team = make_team(tmp_path)
    (team.mate / "people").mkdir()
    (team.mate / "people" / "priya.md").write_text("# Priya\n\nPriya owns billing.\n")
    (team.mate / "old.md").write_text("An old note.\n")
    (team.mate / "draft.md").write_text("A draft to rename.\n")
    team.push("notes by hand")
    git(team.victim, "pull", "-q")
    return team


def edit_by_hand(victim: Path) -> None:
    (victim / "people" / "priya.md").write_text("# Priya\n\nPriya owns billing and invoicing.\n")


def test_sync_names_every_hand_edit_it_does_not_share_each_time(team: Team) -> None:
    edit_by_hand(team.victim)
    (team.victim / "inbox.md").write_text("A new note of mine.\n")
    with Vault(team.victim) as vault:
        for _ in range(2):
            result = vault.sync()
            assert result["hand_not_shared"] == ["added inbox.md", "edited people/priya.md"]
            assert "hand_shared" not in result
    assert "invoicing" not in git(team.remote, "show", "main:people/priya.md")
    assert git(team.victim, "status", "--porcelain", "--", "people/priya.md") == " M people/priya.md\n"


def test_sync_all_shares_edits_deletes_renames_and_attachments_in_one_commit(team: Team) -> None:
    victim = team.victim
    edit_by_hand(victim)
    (victim / "old.md").unlink()
    (victim / "draft.md").rename(victim / "final.md")
    (victim / "attachments").mkdir()
    (victim / "attachments" / "diagram.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    (victim / ".obsidian").mkdir()
    (victim / ".obsidian" / "workspace.json").write_text('{"main": {}}')
    (victim / ".obsidian" / "app.json").write_text('{"spellcheck": true}')
    with Vault(victim) as vault:
        result = vault.sync(share_hand=True)
    assert result["hand_shared"] == ["added .obsidian/app.json", "added attachments/diagram.png",
                                     "renamed draft.md -> final.md", "deleted old.md", "edited people/priya.md"]
    assert "hand_not_shared" not in result
    assert team.remote_log()[0] == "by hand: 5 files"
    shown = git(team.remote, "show", "--format=%B", "--name-status", "-M", "main")
    assert "- renamed draft.md -> final.md" in shown and "R100\tdraft.md\tfinal.md" in shown
    files = team.remote_files()
    assert "attachments/diagram.png" in files and "old.md" not in files
    assert ".obsidian/workspace.json" not in files and not any(f.startswith((".index/", ".trash/")) for f in files)
    # The clone is clean but for what is never shared, and nothing is left staged.
    assert git(victim, "status", "--porcelain") == "?? .obsidian/workspace.json\n"
    git(team.mate, "pull", "-q")
    assert "invoicing" in (team.mate / "people" / "priya.md").read_text()


def test_git_commit_all_shares_hand_changes_only_once_approved(team: Team) -> None:
    victim = team.victim
    (team.mate / ".agent-memory.toml").write_text('[git]\ncommit = "all"\n')
    team.push("share hand edits")
    git(victim, "pull", "-q")
    edit_by_hand(victim)
    with Vault(victim) as vault:
        assert vault.sync()["hand_not_shared"] == ["edited people/priya.md"]  # pulled, not approved: ignored
    approvals.approve(victim, ["git.commit"])
    with Vault(victim) as vault:
        assert vault.sync()["hand_shared"] == ["edited people/priya.md"]
    assert team.remote_log()[0] == "by hand: edited people/priya.md"


def test_a_hand_edit_holding_a_credential_is_held_back_and_named(team: Team) -> None:
    victim = team.victim
    edit_by_hand(victim)
    (victim / "keys.md").write_text(f"The deploy token is {token(3)}\n")
    with Vault(victim) as vault:
        result = vault.sync(share_hand=True)
    assert result["hand_shared"] == ["edited people/priya.md"]
    assert [item.split(":")[0] for item in result["withheld"]] == ["keys.md"]
    assert "keys.md" not in team.remote_files()
    assert token(3) not in json.dumps(result)


def test_a_plugin_that_committed_the_hand_edit_first_gets_no_second_commit(team: Team) -> None:
    """The Obsidian Git plugin commits hand edits on its own schedule: what it committed
    is no hand change any more, so sync --all commits nothing twice."""
    victim = team.victim
    edit_by_hand(victim)
    git(victim, "commit", "-q", "-am", "vault backup: 2026-12-05")  # as Obsidian Git does
    with Vault(victim) as vault:
        result = vault.sync(share_hand=True)
    assert "hand_shared" not in result and result["pushed"] == 1
    assert team.remote_log()[:2] == ["vault backup: 2026-12-05", "notes by hand"]


def test_dry_run_lists_what_sync_would_commit_and_changes_nothing(team: Team) -> None:
    victim = team.victim
    edit_by_hand(victim)
    with Vault(victim) as vault:
        vault.remember("Deploys are on Fridays.", title="Deploys")  # a pending tool write (git.commit = true)
        head = git(victim, "rev-parse", "HEAD")
        status = git(victim, "status", "--porcelain")
        preview = vault.sync_preview()
        assert preview["shares_hand_changes"] is False
        assert len(preview["tool_writes"]) == 1 and preview["tool_writes"][0].endswith("deploys.md")
        assert preview["hand_changes"] == ["edited people/priya.md"]
        assert vault.sync_preview(share_hand=True)["shares_hand_changes"] is True
    assert git(victim, "rev-parse", "HEAD") == head and git(victim, "status", "--porcelain") == status


def test_sync_on_the_command_line_names_hand_edits_and_shares_them_with_all(team: Team) -> None:
    victim = team.victim
    edit_by_hand(victim)
    runner = CliRunner()
    dry = runner.invoke(cli, ["--dir", str(victim), "sync", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "not shared: 1 file you changed by hand (agent-memory sync --all shares them):" in dry.output
    assert "edited people/priya.md" in dry.output
    plain = runner.invoke(cli, ["--dir", str(victim), "sync"])
    assert plain.exit_code == 0 and "edited people/priya.md" in plain.output and "not shared" in plain.output
    shared = runner.invoke(cli, ["--dir", str(victim), "sync", "--all"])
    assert shared.exit_code == 0, shared.output
    assert "shared your hand changes: edited people/priya.md" in shared.output
    assert team.remote_log()[0] == "by hand: edited people/priya.md"


def test_a_note_shared_by_sync_all_takes_its_commits_date(team: Team) -> None:
    note = team.victim / "inbox.md"
    note.write_text("A new note of mine.\n")
    os.utime(note, (1_600_000_000, 1_600_000_000))  # its mtime says 2020: the commit's date must win
    with Vault(team.victim) as vault:
        vault.reconcile()
        vault.sync(share_hand=True)
        committed = git(team.victim, "log", "-1", "--format=%at", "--", "inbox.md").strip()
        expected = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(committed)))
        assert vault.get("inbox.md")["created"] == expected
        assert_index_matches_files(vault)
