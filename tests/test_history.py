"""A memory's history from real git repositories: the vault at the root and in a
subfolder, renames followed, a memory not committed, a vault not in git, the CLI and
the MCP tool through the real in-memory client."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from agent_memory.errors import VaultError
from agent_memory.vault.vault import Vault

from conftest import cli_ok, mcp_client, run_cli, tool_error, tool_ok

pytestmark = pytest.mark.usefixtures("git_isolated")




def git(repo: Path, *args: str, author: str = "Ada Lovelace", email: str = "ada@example.com") -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME=author, GIT_AUTHOR_EMAIL=email, GIT_COMMITTER_NAME=author,
               GIT_COMMITTER_EMAIL=email)
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True)
    return done.stdout


def new_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    return path


def commit_all(repo: Path, message: str, **who: str) -> None:
    git(repo, "add", "-A", ".")
    git(repo, "commit", "-q", "-m", message, **who)


def test_history_at_the_repository_root_newest_first_with_what_changed(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "team")
    with Vault.init(repo) as vault:
        memory = vault.remember("ACME deploys on Fridays.", tags=["acme"], title="ACME deploys")["memory"]
        commit_all(repo, "remember: ACME deploys")
        vault.update(memory["id"], append="Not before 10:00.", add_tags=["deploys"])
        commit_all(repo, "update: ACME deploys\n\nThey asked twice.", author="Grace Hopper", email="grace@example.com")
        result = vault.history(memory["id"])
    assert result["memory_id"] == memory["id"] and result["path"] == memory["path"]
    assert Path(result["repository"]).resolve() == repo.resolve()
    assert result["count"] == 2 and result["truncated"] is False and "note" not in result
    newest, first = result["commits"]
    assert (newest["author"], newest["email"]) == ("Grace Hopper", "grace@example.com")
    assert newest["message"] == "update: ACME deploys\n\nThey asked twice."
    assert newest["status"] == "modified" and newest["path"] == memory["path"]
    assert "tags" in newest["keys_changed"] and "id" not in newest["keys_changed"]
    assert newest["added"][-1] == "Not before 10:00." and newest["lines_added"] >= 1
    assert first["status"] == "added" and first["author"] == "Ada Lovelace"
    assert {"id", "tags", "title"} <= set(first["keys_changed"])
    assert first["removed"] == [] and "ACME deploys on Fridays." in first["added"]
    assert newest["date"] >= first["date"] and len(newest["commit"]) >= 40


def test_history_of_a_vault_in_a_subfolder_follows_renames_and_is_bounded(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "code")
    (repo / "src.py").write_text("print('hi')\n")
    commit_all(repo, "code")
    with Vault.init(repo / "docs" / ".memory") as vault:
        memory = vault.remember("Priya owns billing.", title="Priya")["memory"]
        commit_all(repo, "add priya")
        moved = vault.move(memory["id"], "people/priya.md")
        commit_all(repo, "move priya")
        for n in range(3):
            vault.update(memory["id"], append=f"Fact {n}.")
            commit_all(repo, f"fact {n}")
        (repo / "src.py").write_text("print('bye')\n")
        commit_all(repo, "more code")
        full = vault.history("people/priya.md", limit=100)
        short = vault.history("priya", limit=2)  # a note's name resolves too
    assert moved["new_path"] == "people/priya.md"
    assert [c["message"] for c in full["commits"]] == ["fact 2", "fact 1", "fact 0", "move priya", "add priya"]
    rename = full["commits"][3]
    assert rename["status"] == "renamed" and rename["path"] == "people/priya.md"
    assert rename["old_path"] == memory["path"]  # vault-relative, not docs/.memory/...
    assert full["commits"][4]["path"] == memory["path"]
    assert short["count"] == 2 and short["truncated"] is True and "Raise limit" in short["note"]
    assert [c["message"] for c in short["commits"]] == ["fact 2", "fact 1"]


def test_a_credential_a_person_removed_is_not_handed_out_by_the_history(tmp_path: Path) -> None:
    """git keeps what a person removed; the history shows that it changed, not the token.
    Before, the removed line came back whole, token and all."""
    token = "gh" + "p_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"  # assembled: nothing token-shaped in the file
    repo = new_repo(tmp_path / "team")
    with Vault.init(repo) as vault:
        (repo / "ops.md").write_text(f"# Ops\nThe bot token is {token}\nRotate it in March.\n")
        commit_all(repo, f"ops: the bot token {token}")
        (repo / "ops.md").write_text("# Ops\nThe bot token is in the team vault.\nRotate it in March.\n")
        commit_all(repo, "ops: the token moved to the team vault")
        result = vault.history("ops.md")
    assert token not in json.dumps(result)
    newest, first = result["commits"]
    assert newest["removed"] == ["The bot token is [redacted GitHub token]"]
    assert first["message"] == "ops: the bot token [redacted GitHub token]"


def test_a_credential_in_an_old_file_name_is_not_handed_out_by_the_history(tmp_path: Path) -> None:
    """A file once named with a token (an older import kept an export's path as given, or a
    person pasted one), renamed since: git follows the rename, and the history's old_path
    handed the token to the model whole."""
    token = "gh" + "p_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    repo = new_repo(tmp_path / "team")
    with Vault.init(repo) as vault:
        (repo / f"ops {token}.md").write_text("# Ops\nRotate the bot token in March.\n")
        commit_all(repo, "ops")
        git(repo, "mv", f"ops {token}.md", "ops.md")
        commit_all(repo, "ops: a plain name")
        result = vault.history("ops.md")
    assert token not in json.dumps(result)
    renamed = result["commits"][0]
    assert renamed["status"] == "renamed" and renamed["old_path"] == "ops [redacted GitHub token].md"


def test_a_memory_not_committed_has_an_empty_history_that_says_why(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "fresh")
    with Vault.init(repo) as vault:  # no commit at all yet
        first = vault.remember("Nothing committed yet.")["memory"]
        empty = vault.history(first["id"])
        commit_all(repo, "first")
        second = vault.remember("Written after the commit.")["memory"]
        untracked = vault.history(second["id"])
    for result in (empty, untracked):
        assert result["count"] == 0 and result["commits"] == [] and "not committed to git" in result["note"]


def test_a_vault_not_in_git_is_a_clear_error(tmp_path: Path) -> None:
    with Vault.init(tmp_path / "plain") as vault:
        memory = vault.remember("No git here.")["memory"]
        with pytest.raises(VaultError, match="not in a git repository"):
            vault.history(memory["id"])
    done = run_cli("history", memory["id"], vault=tmp_path / "plain")
    assert done.returncode == 1 and "not in a git repository" in done.stderr and done.stdout == ""


def test_history_never_writes_to_the_repository(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "ro")
    with Vault.init(repo) as vault:
        memory = vault.remember("Read me only.")["memory"]
        commit_all(repo, "one")
        before = sorted((p.relative_to(repo / ".git"), p.stat().st_mtime_ns) for p in (repo / ".git").rglob("*"))
        vault.history(memory["id"])
        after = sorted((p.relative_to(repo / ".git"), p.stat().st_mtime_ns) for p in (repo / ".git").rglob("*"))
    assert before == after


def test_cli_history_human_and_json(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "cli")
    with Vault.init(repo) as vault:
        memory = vault.remember("The VPN needs a token.", title="VPN")["memory"]
    commit_all(repo, "remember: VPN")
    human = cli_ok("history", memory["id"], vault=repo)
    assert "remember: VPN" in human and "Ada Lovelace" in human and "added" in human
    data = json.loads(cli_ok("history", memory["path"], "--json", "--dir", str(repo), "--limit", "1"))
    assert data["count"] == 1 and data["commits"][0]["message"] == "remember: VPN"
    bad = run_cli("history", memory["id"], "--limit", "0", vault=repo)
    assert bad.returncode == 1 and "limit must be between 1 and 100" in bad.stderr


@pytest.mark.anyio
async def test_memory_history_tool_through_the_client(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "mcp")
    vault = Vault.init(repo / "vault")
    try:
        memory = vault.remember("Deploys need two approvals.", title="Approvals")["memory"]
        commit_all(repo, "remember: Approvals")
        async with mcp_client(vault) as client:
            data = await tool_ok(client, "memory_history", memory_id=memory["id"], limit=5)
            assert data["count"] == 1 and data["commits"][0]["message"] == "remember: Approvals"
            assert data["commits"][0]["path"] == memory["path"]
            assert "not found" in await tool_error(client, "memory_history", memory_id="01nope")
    finally:
        vault.close()
