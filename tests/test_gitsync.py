"""Tool writes as git commits and ``agent-memory sync``, against real git: a bare remote
in the test's folder and two clones, writes through the vault and the MCP client, a
person's own work beside them (which is never committed), hooks, odd repository states,
and pulls that bring other clones' memories into the index."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from mcp import Client, StdioServerParameters

from agent_memory.trust import approvals
from agent_memory.cli.app import cli
from agent_memory.errors import GitError, SyncConflict
from agent_memory.git.commits import Committer
from agent_memory.server.app import build_server
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files

AUTHOR = {"GIT_AUTHOR_NAME": "Ada Lovelace", "GIT_AUTHOR_EMAIL": "ada@example.com",
          "GIT_COMMITTER_NAME": "Ada Lovelace", "GIT_COMMITTER_EMAIL": "ada@example.com"}


@pytest.fixture(autouse=True)
def isolated_git(git_isolated: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    for name, value in AUTHOR.items():
        monkeypatch.setenv(name, value)


def git(repo: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout


def commits(repo: Path) -> list[str]:
    return git(repo, "log", "--format=%s").splitlines()


def files_of(repo: Path, rev: str = "HEAD") -> list[str]:
    """The paths a commit changed, with their status letter."""
    return git(repo, "show", "--format=", "--name-status", "--no-renames", rev).split("\n")[:-1]


SETTINGS = "[git]\ncommit = true\n"


def write_settings(vault_dir: Path, text: str) -> None:
    """The vault's settings as this clone's person writes them, and approves them
    (``agent-memory trust``): values that loosen a guard apply only once approved."""
    (vault_dir / ".agent-memory.toml").write_text(text)
    approvals.approve(vault_dir)


def new_vault_repo(path: Path, settings: str = SETTINGS) -> Path:
    """A repository whose top folder is a vault with commits on, its first commit made."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    Vault.init(path).close()
    write_settings(path, settings)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "a vault")
    return path


@pytest.fixture
def team(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A bare remote and two clones of one vault, the first one's branch pushed."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    a = new_vault_repo(tmp_path / "a")
    git(a, "remote", "add", "origin", str(remote))
    git(a, "push", "-q", "-u", "origin", "main")
    git(tmp_path, "clone", "-q", str(remote), str(tmp_path / "b"))
    approvals.approve(tmp_path / "b")  # the second clone's person trusts the team's settings too
    return remote, a, tmp_path / "b"


# --------------------------------------------------------------------------- commits of tool writes


@pytest.mark.anyio
async def test_each_tool_write_through_mcp_is_a_commit_of_only_its_files(tmp_path: Path) -> None:
    repo = new_vault_repo(tmp_path / "team")
    (repo / "lars.md").write_text("Lars owns search.\n")
    git(repo, "add", "lars.md")
    git(repo, "commit", "-q", "-m", "lars")
    (repo / "lars.md").write_text("Lars owns search, and the crawler since May.\n")  # a person's edit, uncommitted
    (repo / "draft.md").write_text("A person's draft, not for committing.\n")  # untracked
    (repo / "notes.txt").write_text("staged by the person\n")
    git(repo, "add", "notes.txt")  # staged, uncommitted: must stay so
    with Vault(repo) as vault, Committer(vault) as committer:
        async with Client(build_server(vault)) as client:
            async def call(tool: str, **arguments: object) -> dict:
                result = await client.call_tool(tool, arguments)
                assert result.is_error is False, result.content[0].text
                committer.flush()
                return result.structured_content

            first = (await call("remember", content="ACME deploys on Fridays.", title="ACME deploys"))["memory"]
            assert commits(repo)[0] == "remember: ACME deploys"
            assert files_of(repo) == [f"A\t{first['path']}"]
            other = (await call("remember", content="Priya owns billing.", title="Priya"))["memory"]
            await call("update_memory", memory_id=first["id"], add_tags=["deploys"])
            assert commits(repo)[0] == "update: ACME deploys" and files_of(repo) == [f"M\t{first['path']}"]
            await call("link_memories", memory_id=first["id"], target_id=other["id"])
            assert commits(repo)[0] == "update: ACME deploys" and files_of(repo) == [f"M\t{first['path']}"]
            moved = await call("move_memory", memory_id=other["id"], new_path="people/priya-rao.md")
            assert commits(repo)[0].startswith(f"move: Priya ({other['path']} -> people/priya-rao.md)")
            assert sorted(files_of(repo)) == sorted([f"M\t{first['path']}", f"D\t{other['path']}",
                                                     "A\tpeople/priya-rao.md"])  # the link to it was rewritten
            await call("forget", memory_id=moved["new_id"])
            assert commits(repo)[0] == "forget: Priya" and files_of(repo) == ["D\tpeople/priya-rao.md"]
            assert len(commits(repo)) == 8
    everything = git(repo, "log", "--format=", "--name-only", "HEAD~7..HEAD")
    assert "draft.md" not in everything and "notes.txt" not in everything
    status = git(repo, "status", "--porcelain")
    assert "?? draft.md" in status and "A  notes.txt" in status and " M lars.md" in status  # as they left it
    author = git(repo, "log", "-1", "--format=%an <%ae>")
    assert author.strip() == "Ada Lovelace <ada@example.com>"  # git's own identity when git.author is unset


def test_writes_close_together_share_one_commit_with_the_author_setting(tmp_path: Path) -> None:
    repo = new_vault_repo(tmp_path / "team", SETTINGS + 'author = "Agent Smith <agent@example.com>"\n')
    with Vault(repo) as vault:
        committer = Committer(vault, window=30.0).start()  # a long quiet spell: only flush ends the batch
        try:
            for n in range(3):
                vault.remember(f"Fact number {n} about the build.", title=f"Fact {n}")
            committer.flush()
        finally:
            committer.stop()
    assert commits(repo)[0] == "remember: Fact 0 (+2 more)" and len(commits(repo)) == 2
    assert len(files_of(repo)) == 3
    body = git(repo, "log", "-1", "--format=%b")
    assert "- remember: Fact 1" in body and "- remember: Fact 2" in body
    assert git(repo, "log", "-1", "--format=%an <%ae>").strip() == "Agent Smith <agent@example.com>"


def test_the_author_setting_is_enough_where_git_has_no_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = new_vault_repo(tmp_path / "team", SETTINGS + 'author = "Agent Smith <agent@example.com>"\n')
    for name in AUTHOR:
        monkeypatch.delenv(name)  # no user.name/user.email anywhere: GIT_CONFIG_GLOBAL is /dev/null
    monkeypatch.delenv("EMAIL", raising=False)
    with Vault(repo) as vault, Committer(vault) as committer:
        vault.remember("Committed on a machine without a git identity.", title="No identity")
        outcome = committer.flush()
    assert outcome is not None and outcome.status == "committed", outcome
    assert git(repo, "log", "-1", "--format=%an <%ae>").strip() == "Agent Smith <agent@example.com>"


def test_a_write_made_without_a_committer_is_committed_by_the_next_one(tmp_path: Path) -> None:
    repo = new_vault_repo(tmp_path / "team")
    with Vault(repo) as vault:
        vault.remember("Written by the CLI, say.", title="Offline")  # noted, not committed
        assert len(commits(repo)) == 1
    with Vault(repo) as vault, Committer(vault) as committer:
        committer.flush()
    assert commits(repo)[0] == "remember: Offline"


def test_commits_are_off_by_default(tmp_path: Path) -> None:
    repo = new_vault_repo(tmp_path / "team", settings="")
    with Vault(repo) as vault, Committer(vault) as committer:
        vault.remember("Nothing commits this.", title="Quiet")
        committer.flush()
        assert len(commits(repo)) == 1
        vault.git_commit = True  # what serve --git-commit sets
        vault.remember("This one is committed.", title="Loud")
        committer.flush()
    assert commits(repo) == ["remember: Loud", "a vault"]


def test_a_failing_pre_commit_hook_is_logged_and_the_write_stands(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    repo = new_vault_repo(tmp_path / "team", SETTINGS + "hooks = true\n")  # this clone opted in to its hooks
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'lint says no' >&2\nexit 1\n")
    hook.chmod(0o755)
    caplog.set_level(logging.INFO, "agent_memory.git")
    with Vault(repo) as vault, Committer(vault) as committer:
        memory = vault.remember("Written while the hook refuses.", title="Refused")["memory"]
        outcome = committer.flush()
        assert outcome is not None and outcome.status == "failed"
        assert (repo / memory["path"]).exists() and vault.get(memory["id"])["title"] == "Refused"
        assert len(commits(repo)) == 1 and "lint says no" in caplog.text
        assert git(repo, "status", "--porcelain", "--", memory["path"]).startswith("??")  # staging given back
        hook.unlink()
        vault.remember("Written once the hook is gone.", title="Accepted")
        committer.flush()
    assert commits(repo)[0] == "remember: Refused (+1 more)" and len(files_of(repo)) == 2


def test_a_detached_head_gets_no_commit_and_one_log_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    repo = new_vault_repo(tmp_path / "team")
    git(repo, "checkout", "-q", "--detach")
    caplog.set_level(logging.INFO, "agent_memory.git")
    with Vault(repo) as vault, Committer(vault) as committer:
        for n in range(3):
            vault.remember(f"Detached write {n}.", title=f"Detached {n}")
            committer.flush()
    assert len(commits(repo)) == 1
    said = [r.getMessage() for r in caplog.records if "detached" in r.getMessage()]
    assert len(said) == 1 and "git switch" in said[0]


def test_a_busy_repository_is_retried_and_a_merge_in_progress_waits(tmp_path: Path) -> None:
    repo = new_vault_repo(tmp_path / "team")
    lock = repo / ".git" / "index.lock"
    lock.write_text("")  # a person's git command running
    with Vault(repo) as vault, Committer(vault) as committer:
        vault.remember("Written while git is busy.", title="Busy")
        outcome = committer.flush()
        assert outcome is not None and outcome.status == "busy" and len(commits(repo)) == 1
        lock.unlink()
        committer.flush()
        assert commits(repo)[0] == "remember: Busy"
        (repo / ".git" / "MERGE_HEAD").write_text(git(repo, "rev-parse", "HEAD"))
        vault.remember("Written during a merge.", title="Merging")
        outcome = committer.flush()
        assert outcome is not None and outcome.status == "busy" and len(commits(repo)) == 2
        (repo / ".git" / "MERGE_HEAD").unlink()
        committer.flush()
    assert commits(repo)[0] == "remember: Merging"


def test_a_vault_in_a_subfolder_commits_only_when_opted_in(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    repo = tmp_path / "code"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "app.py").write_text("print('v1')\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "code")
    (repo / "app.py").write_text("print('v2, unfinished')\n")  # a person's work in progress
    vault_dir = repo / "docs" / ".memory"
    Vault.init(vault_dir).close()
    write_settings(vault_dir, SETTINGS)
    caplog.set_level(logging.INFO, "agent_memory.git")
    with Vault(vault_dir) as vault, Committer(vault) as committer:
        vault.remember("Not committed: the vault is a subfolder.", title="Sub one")
        vault.remember("Nor this.", title="Sub two")
        committer.flush()
        assert commits(repo) == ["code"]
        said = [r.getMessage() for r in caplog.records if "subfolder = true" in r.getMessage()]
        assert len(said) == 1
        with pytest.raises(GitError, match="subfolder = true"):
            vault.sync()
        write_settings(vault_dir, SETTINGS + "subfolder = true\n")
        memory = vault.remember("Committed once opted in.", title="Sub three")["memory"]
        committer.flush()
    assert commits(repo)[0] == "remember: Sub three"
    assert files_of(repo) == [f"A\tdocs/.memory/{memory['path']}"]
    assert git(repo, "status", "--porcelain", "app.py").startswith(" M")  # never committed


def test_a_subfolder_vault_whose_setting_waits_for_approval_is_told_how_to_approve_it(tmp_path: Path) -> None:
    """The setting written but not yet approved by this clone (as a pull brings it): the
    refusal said only "Set [git] subfolder = true", which the person had just done."""
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    vault_dir = repo / ".memory"
    Vault.init(vault_dir).close()
    (vault_dir / ".agent-memory.toml").write_text("[git]\nsubfolder = true\n")
    refused = CliRunner().invoke(cli, ["--dir", str(vault_dir), "sync", "--dry-run"])
    assert refused.exit_code == 1
    assert "once you run `agent-memory trust git.subfolder`" in refused.output
    assert CliRunner().invoke(cli, ["--dir", str(vault_dir), "trust", "git.subfolder"]).exit_code == 0
    again = CliRunner().invoke(cli, ["--dir", str(vault_dir), "sync", "--dry-run"])
    assert "not its top folder" not in again.output


@pytest.mark.anyio
async def test_serve_git_commit_over_stdio_commits_and_flushes_on_exit(tmp_path: Path) -> None:
    repo = new_vault_repo(tmp_path / "team", settings="")
    env = {**AUTHOR, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CEILING_DIRECTORIES": str(tmp_path), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "agent_memory", "serve", "--git-commit",
                                                                 "--dir", str(repo)], env=env)
    async with Client(params) as client:
        result = await client.call_tool("remember", {"content": "Served and committed.", "title": "Served"})
        assert result.is_error is False
    assert commits(repo)[0] == "remember: Served"  # committed by the time the server has exited


# --------------------------------------------------------------------------- sync


def test_sync_brings_another_clones_memory_into_the_index(team: tuple[Path, Path, Path]) -> None:
    _remote, a, b = team
    with Vault(a) as va, Vault(b) as vb:
        memory = va.remember("The staging database is rebuilt every Monday.", title="Staging DB", tags=["db"])["memory"]
        sent = va.sync()
        assert (sent["committed"], sent["pushed"], sent["pulled"]) == (1, 1, 0)
        assert vb.search("when is the staging database rebuilt")["count"] == 0
        got = vb.sync()
        assert (got["pulled"], got["pushed"], got["method"], got["conflicts"]) == (1, 0, "fast-forward", [])
        assert got["indexed"] == 1
        hits = vb.search("when is the staging database rebuilt")["hits"]
        assert [h["id"] for h in hits] == [memory["id"]]
        assert_index_matches_files(vb)
        # Both sides write: the second sync rebases, and each side ends with both.
        vb.update(memory["id"], add_tags=["weekly"])
        va.remember("Deploys freeze on Fridays after 16:00.", title="Freeze")
        vb.sync()
        both = va.sync()
        assert both["method"] == "rebase" and both["pulled"] == 1 and both["pushed"] == 1
        assert "weekly" in va.get(memory["id"])["tags"]
        vb.sync()
        assert vb.search("deploy freeze")["hits"][0]["title"] == "Freeze"
        assert_index_matches_files(va)
        assert_index_matches_files(vb)
    assert git(a, "rev-parse", "HEAD") == git(b, "rev-parse", "HEAD")
    assert git(a, "status", "--porcelain") == "" and git(b, "status", "--porcelain") == ""


def test_sync_keeps_a_persons_uncommitted_edit(team: tuple[Path, Path, Path]) -> None:
    _remote, a, b = team
    with Vault(a) as va:
        mine = va.remember("Priya owns billing.", title="Priya")["memory"]
        va.sync()
    with Vault(b) as vb:
        vb.sync()
        with Vault(a) as va:
            va.remember("Lars owns search.", title="Lars")
            va.sync()
        edited = b / mine["path"]
        edited.write_text(edited.read_text() + "Ask her before changing invoices.\n")  # not committed
        (b / "scratch.md").write_text("A person's scratch note.\n")
        vb.reconcile_path("scratch.md")  # as a running server's watcher would
        result = vb.sync()
        assert result["pulled"] == 1 and result["committed"] == 0
        assert edited.read_text().endswith("Ask her before changing invoices.\n")
        assert (b / "scratch.md").exists()
        assert vb.search("Lars owns search")["hits"][0]["title"] == "Lars"
        assert_index_matches_files(vb)
    status = git(b, "status", "--porcelain")
    assert f" M {mine['path']}" in status and "?? scratch.md" in status
    assert git(b, "stash", "list") == ""


def test_sync_without_a_remote_or_an_upstream_is_one_clear_line(tmp_path: Path) -> None:
    repo = new_vault_repo(tmp_path / "alone")
    with Vault(repo) as vault:
        vault.remember("Nowhere to push this.", title="Alone")
        with pytest.raises(GitError, match="has no remote") as caught:
            vault.sync()
        assert "git remote add origin" in str(caught.value) and "\n" not in str(caught.value)
    git(repo, "remote", "add", "origin", str(tmp_path / "nowhere.git"))
    result = CliRunner().invoke(cli, ["--dir", str(repo), "sync"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: The branch main has no upstream branch to sync with. Set one once: git push -u origin main."
    ]


def test_sync_with_an_unreachable_remote_says_so_and_keeps_the_commits(team: tuple[Path, Path, Path]) -> None:
    remote, a, _b = team
    remote.rename(remote.with_name("moved.git"))
    with Vault(a) as vault:
        vault.remember("Written offline.", title="Offline")
        with pytest.raises(GitError, match="Cannot reach the remote origin"):
            vault.sync()
    assert commits(a)[0] == "remember: Offline"  # committed locally, pushed next time


def test_sync_never_overwrites_a_persons_untracked_file(team: tuple[Path, Path, Path]) -> None:
    _remote, a, b = team
    with Vault(a) as va:
        memory = va.remember("Lunch is at noon.", title="Lunch")["memory"]
        va.sync()
    (b / memory["path"]).parent.mkdir(parents=True, exist_ok=True)
    (b / memory["path"]).write_text("A person's own note that happens to have that name.\n")
    with Vault(b) as vb, pytest.raises(GitError, match="would be overwritten") as caught:
        vb.sync()
    assert memory["path"] in str(caught.value) and "\n" not in str(caught.value)
    assert (b / memory["path"]).read_text() == "A person's own note that happens to have that name.\n"


def test_sync_refuses_a_detached_head(team: tuple[Path, Path, Path]) -> None:
    _remote, a, _b = team
    git(a, "checkout", "-q", "--detach")
    with Vault(a) as vault, pytest.raises(GitError, match="HEAD is detached"):
        vault.sync()


def shared_then_changed_on_a(a: Path, b: Path, content: str, title: str, old: str, new: str) -> dict:
    """A memory clone ``a`` writes and syncs and ``b`` pulls; then ``a`` replaces ``old``
    with ``new`` in it and syncs again, ``b`` not pulled since. The memory."""
    with Vault(a) as va:
        memory = va.remember(content, title=title)["memory"]
        va.sync()
    with Vault(b) as vb:
        vb.sync()
    with Vault(a) as va:
        va.update(memory["id"], replace_old=old, replace_new=new)
        va.sync()
    return memory


def test_sync_conflict_is_left_for_a_person_with_both_texts(team: tuple[Path, Path, Path]) -> None:
    _remote, a, b = team
    memory = shared_then_changed_on_a(a, b, "The on-call phone is in the red drawer.", "On-call phone",
                                      "red drawer", "blue box")
    with Vault(b) as vb:
        vb.update(memory["id"], replace_old="red drawer", replace_new="green shelf")
        with pytest.raises(SyncConflict) as caught:
            vb.sync()
        message = str(caught.value)
        assert memory["path"] in message and "git merge --abort" in message and "\n" not in message
        assert caught.value.result["conflicts"] == [memory["path"]]
        text = (b / memory["path"]).read_text()
        assert "blue box" in text and "green shelf" in text and "<<<<<<<" in text
        assert (b / ".git" / "MERGE_HEAD").exists()  # a merge in progress, for a person to finish
        assert vb.get(memory["id"])["conflict"] is True  # the index saw the markers
        with pytest.raises(GitError, match="a merge is in progress.*git merge --abort"):
            vb.sync()
    result = CliRunner().invoke(cli, ["--dir", str(b), "--json", "sync"])
    assert result.exit_code == 1


@pytest.mark.parametrize("driver", [False, True])
def test_sync_keeps_both_memories_two_clones_added_at_one_path(team: tuple[Path, Path, Path], driver: bool) -> None:
    # The same title on the same day in two clones: the same path, two memories (SPEC §2).
    _remote, a, b = team
    if driver:  # as the README sets a team up: .gitattributes committed once, the driver registered per clone
        assert CliRunner().invoke(cli, ["--dir", str(a), "git", "setup"]).exit_code == 0
        git(a, "add", ".gitattributes")
        git(a, "commit", "-q", "-m", "merge driver")
        git(a, "push", "-q")
        git(b, "pull", "-q")
        assert CliRunner().invoke(cli, ["--dir", str(b), "git", "setup"]).exit_code == 0
    with Vault(a) as va:
        first = va.remember("Deploys are frozen in August.", title="Deploy freeze")["memory"]
        va.sync()
    with Vault(b) as vb:
        second = vb.remember("The freeze ends on September 2.", title="Deploy freeze")["memory"]
        assert first["path"] == second["path"]
        done = vb.sync()
        other = first["path"].removesuffix(".md") + "-2.md"
        assert done["conflicts"] == [] and done["split"] == [other] and done["method"] == "merge"
        assert vb.get(first["path"])["id"] == second["id"]  # ours stays where it was written
        assert vb.get(other)["id"] == first["id"]  # theirs, whole, beside it
        assert "<<<<<<<" not in (b / first["path"]).read_text() + (b / other).read_text()
        assert_index_matches_files(vb)
    assert git(b, "status", "--porcelain") == ""  # the merge was concluded and pushed
    with Vault(a) as va:
        va.sync()
        assert {va.get(first["path"])["id"], va.get(other)["id"]} == {first["id"], second["id"]}
    assert git(a, "rev-parse", "HEAD") == git(b, "rev-parse", "HEAD")


def test_sync_leaves_one_memory_edited_two_ways_at_one_new_path_as_a_conflict(team: tuple[Path, Path, Path]) -> None:
    # Two clones add a file with the same id at one path (a copy edited apart): not two memories.
    _remote, a, b = team
    for clone, text in ((a, "Owner: Priya."), (b, "Owner: Bo.")):
        (clone / "people").mkdir()
        (clone / "people" / "owner.md").write_text(f"---\nid: owner-note\n---\n{text}\n")
        git(clone, "add", "-A")
        git(clone, "commit", "-q", "-m", "owner")
    with Vault(a) as va:
        va.sync()
    with Vault(b) as vb, pytest.raises(SyncConflict):
        vb.sync()
    assert not (b / "people" / "owner-2.md").exists()
    assert "<<<<<<<" in (b / "people" / "owner.md").read_text()


def test_sync_says_how_to_finish_when_a_persons_edit_conflicts_with_the_pull(team: tuple[Path, Path, Path]) -> None:
    _remote, a, b = team
    memory = shared_then_changed_on_a(a, b, "The spare keys hang by the red door.", "Spare keys",
                                      "red door", "blue door")
    with Vault(b) as vb:
        edited = b / memory["path"]
        edited.write_text(edited.read_text().replace("red door", "green door"))  # a person's edit, uncommitted
        with pytest.raises(SyncConflict) as caught:
            vb.sync()
        assert "your uncommitted edits to " + memory["path"] in str(caught.value)
        assert "git stash drop" in str(caught.value) and "merge --abort" not in str(caught.value)
        text = edited.read_text()
        assert "blue door" in text and "green door" in text  # neither side lost
        assert "agent-memory sync" in git(b, "stash", "list")  # and the edit is kept in a stash named for sync
        assert git(b, "rev-parse", "HEAD") == git(a, "rev-parse", "HEAD")  # the pull itself went through


def test_sync_of_an_opted_in_subfolder_vault_indexes_vault_paths(tmp_path: Path) -> None:
    remote = tmp_path / "code.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    first = tmp_path / "code"
    first.mkdir()
    git(first, "init", "-q", "-b", "main")
    (first / "app.py").write_text("print('hi')\n")
    Vault.init(first / "docs" / ".memory").close()
    write_settings(first / "docs" / ".memory", SETTINGS + "subfolder = true\n")
    git(first, "add", "-A")
    git(first, "commit", "-q", "-m", "code and a vault")
    git(first, "remote", "add", "origin", str(remote))
    git(first, "push", "-q", "-u", "origin", "main")
    git(tmp_path, "clone", "-q", str(remote), str(tmp_path / "other"))
    approvals.approve(tmp_path / "other" / "docs" / ".memory")
    with Vault(first / "docs" / ".memory") as va:
        memory = va.remember("The release train leaves on Tuesdays.", title="Release train")["memory"]
        va.sync()
    with Vault(tmp_path / "other" / "docs" / ".memory") as vb:
        result = vb.sync()
        assert result["pulled"] == 1 and result["indexed"] == 1
        assert vb.get(memory["id"])["path"] == memory["path"]  # vault-relative, not docs/.memory/...
        assert_index_matches_files(vb)


def test_sync_json_through_the_cli(team: tuple[Path, Path, Path]) -> None:
    _remote, a, b = team
    with Vault(a) as va:
        va.remember("Backups run at 02:00 UTC.", title="Backups")
    runner = CliRunner()
    sent = runner.invoke(cli, ["--dir", str(a), "sync", "--json"])
    assert sent.exit_code == 0, sent.output
    assert {k: json.loads(sent.output)[k] for k in ("committed", "pushed", "pulled")} == \
        {"committed": 1, "pushed": 1, "pulled": 0}
    got = runner.invoke(cli, ["--dir", str(b), "sync"])
    assert got.exit_code == 0 and "pulled 1 commit (fast-forward)" in got.output


# --------------------------------------------------------------------------- rarer states


def test_commits_on_in_a_vault_not_in_git_log_once_and_every_write_stands(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    Vault.init(tmp_path / "plain").close()
    write_settings(tmp_path / "plain", SETTINGS)
    caplog.set_level(logging.INFO, "agent_memory.git")
    with Vault(tmp_path / "plain") as vault, Committer(vault) as committer:
        made = [vault.remember(f"Fact {n} written outside git.", title=f"Outside {n}")["memory"] for n in range(2)]
        committer.flush()
        assert [vault.get(m["id"])["title"] for m in made] == ["Outside 0", "Outside 1"]
        with pytest.raises(GitError, match=r"is not in a git repository, so there is nothing to sync"):
            vault.sync()
    said = [r.getMessage() for r in caplog.records if "not in a git repository" in r.getMessage()]
    assert len(said) == 1 and "git init" in said[0]


def test_without_git_on_the_path_sync_says_so_and_writes_still_stand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    repo = new_vault_repo(tmp_path / "team")
    empty = tmp_path / "no-programs"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with Vault(repo) as vault, pytest.raises(GitError, match=r"^git is not installed \(or not on PATH\)"):
        vault.sync()
    caplog.set_level(logging.INFO, "agent_memory.git")
    with Vault(repo) as vault:
        memory = vault.remember("Written where git is missing.", title="No git")["memory"]
        assert vault.get(memory["id"])["title"] == "No git" and (repo / memory["path"]).exists()
    assert any("could not note a write" in r.getMessage() and "git is not installed" in r.getMessage()
               for r in caplog.records)


def test_a_damaged_git_file_is_named_not_taken_for_no_repository(tmp_path: Path) -> None:
    Vault.init(tmp_path / "v").close()
    (tmp_path / "v" / ".git").write_text("this is not a gitdir line\n")
    with Vault(tmp_path / "v") as vault, pytest.raises(GitError, match=r"^git cannot read the vault's repository: "):
        vault.sync()
    assert (tmp_path / "v" / ".git").read_text() == "this is not a gitdir line\n"


def test_a_conflicted_stash_pop_holds_commits_back_until_resolved(tmp_path: Path) -> None:
    """Unmerged files with no merge in progress (a ``git stash pop`` that conflicted):
    committing now would commit conflict markers, so the writes wait."""
    repo = new_vault_repo(tmp_path / "team")
    (repo / "plan.md").write_text("v1\n")
    git(repo, "add", "plan.md")
    git(repo, "commit", "-q", "-m", "plan")
    (repo / "plan.md").write_text("v2 stashed\n")
    git(repo, "stash", "-q")
    (repo / "plan.md").write_text("v3 committed\n")
    git(repo, "commit", "-q", "-am", "plan v3")
    git(repo, "stash", "pop", check=False)
    assert git(repo, "ls-files", "-u")
    with Vault(repo) as vault, Committer(vault) as committer:
        vault.remember("Written while a stash pop is unresolved.", title="Held back")
        outcome = committer.flush()
        assert outcome is not None and outcome.status == "refused" and "unresolved merge conflicts" in outcome.message
        assert commits(repo)[0] == "plan v3"
        (repo / "plan.md").write_text("v3 and v2, resolved\n")
        git(repo, "add", "plan.md")
        git(repo, "reset", "-q")
        committer.flush()
    assert commits(repo)[0] == "remember: Held back"


def test_a_write_a_person_already_committed_makes_no_second_commit(tmp_path: Path) -> None:
    repo = new_vault_repo(tmp_path / "team")
    with Vault(repo) as vault:
        vault.remember("Written by the CLI, then committed by hand.", title="By hand")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "my own commit")
    with Vault(repo) as vault, Committer(vault) as committer:
        outcome = committer.flush()
    assert outcome is not None and outcome.status == "nothing"
    assert commits(repo) == ["my own commit", "a vault"]
    assert not (repo / ".index" / "git-pending.jsonl").exists()  # the journal is cleared, not retried forever


def test_a_damaged_journal_line_is_skipped_and_the_others_committed(tmp_path: Path) -> None:
    repo = new_vault_repo(tmp_path / "team")
    with Vault(repo) as vault:
        vault.remember("The first noted write.", title="First")
    with open(repo / ".index" / "git-pending.jsonl", "ab") as journal:
        journal.write(b'{"paths": ["half a line"\n["not", "an", "entry"]\n')
    with Vault(repo) as vault:
        vault.remember("The second noted write.", title="Second")
        with Committer(vault) as committer:
            outcome = committer.flush()
    assert outcome is not None and outcome.status == "committed" and outcome.writes == 2
    assert commits(repo)[0] == "remember: First (+1 more)"


def test_commit_messages_say_what_each_write_did(tmp_path: Path, clock) -> None:
    repo = new_vault_repo(tmp_path / "team")
    with Vault(repo, clock=clock) as vault, Committer(vault) as committer:
        a = vault.remember("Alpha fact about the build.", title="Alpha")["memory"]
        b = vault.remember("Beta fact about the build.", title="Beta")["memory"]
        short = vault.remember("A fact for one day only.", title="Brief", ttl_days=1)["memory"]
        committer.flush()
        vault.forget(a["id"])
        committer.flush()
        vault.restore(a["id"])
        committer.flush()
        vault.forget_many([a["id"], b["id"]])
        committer.flush()
        clock.advance(days=2)
        vault.gc()
        committer.flush()
        assert not (repo / short["path"]).exists()
    assert commits(repo)[:4] == ["expire: Brief", "forget: 2 memories", "restore: Alpha", "forget: Alpha"]


def test_sync_refuses_to_join_unrelated_histories(team: tuple[Path, Path, Path], tmp_path: Path) -> None:
    remote, _a, _b = team
    # A vault started on its own (other settings: not the same first commit), pointed at the team's remote.
    c = new_vault_repo(tmp_path / "c", SETTINGS + "# started apart\n")
    git(c, "remote", "add", "origin", str(remote))
    git(c, "config", "branch.main.remote", "origin")
    git(c, "config", "branch.main.merge", "refs/heads/main")
    with Vault(c) as vault:
        vault.remember("Written in the separate vault.", title="Separate")
        with pytest.raises(GitError, match="have no common history; join them by hand"):
            vault.sync()
    assert git(remote, "log", "--format=%s", "main").splitlines() == ["a vault"]  # nothing was pushed


def test_sync_with_writes_a_hook_refuses_to_commit_pushes_nothing(team: tuple[Path, Path, Path]) -> None:
    remote, a, _b = team
    write_settings(a, SETTINGS + "hooks = true\n")  # this clone opted in to its hooks
    hook = a / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'lint says no' >&2\nexit 1\n")
    hook.chmod(0o755)
    with Vault(a) as vault:
        memory = vault.remember("Written while the hook refuses.", title="Refused")["memory"]
        with pytest.raises(GitError, match=r"^Cannot sync: the pending tool writes could not be committed: "
                                           r"git commit failed: lint says no"):
            vault.sync()
    assert (a / memory["path"]).exists()
    assert git(remote, "log", "--format=%s", "main").splitlines() == ["a vault"]


def test_sync_while_another_git_command_holds_the_index_says_git_is_busy(team: tuple[Path, Path, Path]) -> None:
    remote, a, _b = team
    (a / ".git" / "index.lock").write_text("")
    with Vault(a) as vault:
        vault.remember("Written while git is busy.", title="Busy")
        with pytest.raises(GitError, match=r"^Cannot sync: git is busy in .* \(another git command holds index.lock\)"):
            vault.sync()
    (a / ".git" / "index.lock").unlink()
    with Vault(a) as vault:
        assert vault.sync()["committed"] == 1  # still pending, and taken by the next sync
    assert git(remote, "log", "-1", "--format=%s", "main").strip() == "remember: Busy"


def test_a_missing_identity_names_the_setting_that_fixes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = new_vault_repo(tmp_path / "team")
    git(repo, "config", "user.useConfigOnly", "true")  # as where git cannot guess an e-mail address
    for name in AUTHOR:
        monkeypatch.delenv(name)
    monkeypatch.delenv("EMAIL", raising=False)
    with Vault(repo) as vault, Committer(vault) as committer:
        memory = vault.remember("Written on a machine without a git identity.", title="Anonymous")["memory"]
        outcome = committer.flush()
        assert vault.get(memory["id"])["title"] == "Anonymous"
    assert outcome is not None and outcome.status == "failed"
    assert '[git] author = "Name <email>"' in outcome.message and "git config user.email" in outcome.message
    assert commits(repo) == ["a vault"]


def test_a_push_the_remote_refuses_says_why_and_keeps_the_commit(team: tuple[Path, Path, Path]) -> None:
    """A pre-receive hook or a protected branch refuses the push: that is no race with
    another clone, so sync says what the remote said instead of retrying. (A remote that
    is a path runs its hooks on this machine: for the tool, only with git.hooks approved.)"""
    remote, a, _b = team
    write_settings(a, SETTINGS + "hooks = true\n")
    hook = remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'pushes are frozen today' >&2\nexit 1\n")
    hook.chmod(0o755)
    with Vault(a) as vault:
        vault.remember("Written while pushes are frozen.", title="Frozen")
        with pytest.raises(GitError, match=r"^Cannot push to origin: \[remote rejected\] \(pre-receive hook declined\)\. "
                                           r"The commits are kept locally") as caught:
            vault.sync()
        assert "\n" not in str(caught.value)
    assert commits(a)[0] == "remember: Frozen"
    assert git(remote, "log", "--format=%s", "main").splitlines() == ["a vault"]


def test_a_push_that_loses_a_race_to_another_clone_is_pulled_and_pushed_again(
    team: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_memory.git import sync as gitsync

    remote, a, b = team
    real_push = gitsync._push
    raced: list[bool] = []

    def b_pushes_first(repo, remote_name: str, merge_ref: str, settings):  # another clone pushes between fetch and push
        if not raced:
            raced.append(True)
            with Vault(b) as vb:
                vb.remember("Pushed by the other clone first.", title="Other first")
                vb.sync()
        return real_push(repo, remote_name, merge_ref, settings)

    monkeypatch.setattr(gitsync, "_push", b_pushes_first)
    with Vault(a) as vault:
        vault.remember("Written in clone a.", title="From a")
        result = vault.sync()
        assert result["pushed"] == 1 and result["pulled"] == 1 and result["committed"] == 1
        # What was pulled on the second round is indexed too.
        assert "Other first" in [h["title"] for h in vault.search("pushed other clone", match="all")["hits"]]
    assert git(remote, "log", "--format=%s", "main").splitlines()[:2] == ["remember: From a", "remember: Other first"]


def test_sync_puts_a_staged_edit_back_staged(team: tuple[Path, Path, Path]) -> None:
    """A person who ran ``git add`` on an edit finds it staged after sync, as before it."""
    _remote, a, b = team
    with Vault(a) as va:
        mine = va.remember("Priya owns billing.", title="Priya")["memory"]
        va.sync()
    with Vault(b) as vb:
        vb.sync()
        with Vault(a) as va:
            va.remember("Lars owns search.", title="Lars")
            va.sync()
        edited = b / mine["path"]
        edited.write_text(edited.read_text() + "Ask her before changing invoices.\n")
        git(b, "add", mine["path"])
        assert vb.sync()["pulled"] == 1
    assert edited.read_text().endswith("Ask her before changing invoices.\n")
    assert f"M  {mine['path']}" in git(b, "status", "--porcelain").splitlines()
    assert git(b, "stash", "list") == ""


def test_a_staged_edit_next_to_pulled_lines_comes_back_unstaged_and_whole(team: tuple[Path, Path, Path]) -> None:
    """git cannot restore the staging when the pull changed a line within the staged
    change's context; the edit is still put back (merged line by line), unstaged."""
    _remote, a, b = team
    lines = "".join(f"Line {n} of the runbook.\n" for n in range(1, 9))
    with Vault(a) as va:
        mine = va.remember(lines, title="Runbook")["memory"]
        va.sync()
    with Vault(b) as vb:
        vb.sync()
        pulled = (a / mine["path"]).read_text().replace("Line 2 of", "Line two of")
        (a / mine["path"]).write_text(pulled)
        git(a, "commit", "-qam", "line two by hand")
        git(a, "push", "-q")
        edited = b / mine["path"]
        edited.write_text(edited.read_text().replace("Line 5 of", "Line five of"))
        git(b, "add", mine["path"])
        assert vb.sync()["pulled"] == 1
    text = edited.read_text()
    assert "Line two of" in text and "Line five of" in text
    assert f" M {mine['path']}" in git(b, "status", "--porcelain").splitlines()
    assert git(b, "stash", "list") == ""
