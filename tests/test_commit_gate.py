"""No credential leaves through the tool: every commit it makes (``git.commit`` and
``sync``) leaves out a file holding a credential not in ``secrets.allow`` — a person's
hand edit included — and names it by kind and fingerprint, while the rest goes on; file
names and commit messages never carry a credential nor the value after a credential
word. Real git (a bare remote and two clones), the CLI, the MCP client."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from mcp import Client

from agent_memory.trust import approvals, credentials
from agent_memory.git.commits import Committer
from agent_memory.server.app import build_server
from agent_memory.vault.vault import Vault

from conftest import run_cli
from gitteam import Team, git, make_team, token


pytestmark = pytest.mark.usefixtures("team_git")


@pytest.fixture
def team(tmp_path: Path) -> Team:
    return make_team(tmp_path)


def everything_pushed(team: Team) -> str:
    """Every commit message, path and line the remote holds."""
    return git(team.remote, "log", "-p", "--all", "--format=%B%n%H")


def path_lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def hand_append(vault: Path, rel: str, line: str) -> None:
    path = vault / rel
    path.write_text(path.read_text() + line + "\n")


# --------------------------------------------------------------------------- the gate


def test_a_token_a_person_appended_by_hand_is_neither_committed_nor_pushed(team: Team) -> None:
    secret = token(3)
    [fingerprint] = [f.fingerprint for f in credentials.find_credentials(secret)]
    added = json.loads(run_cli("--json", "add", "Release checklist: tag, build, publish.", vault=team.victim).stdout)
    memory = added["memory"]
    assert run_cli("sync", vault=team.victim).returncode == 0
    hand_append(team.victim, memory["path"], f"CI token for publishing: {secret}")
    assert run_cli("edit", memory["id"], "--add-tag", "release", vault=team.victim).returncode == 0
    assert run_cli("add", "Releases go out on Tuesdays.", vault=team.victim).returncode == 0
    synced = run_cli("sync", vault=team.victim)
    assert synced.returncode == 0, synced.stderr
    said = synced.stdout + synced.stderr
    assert f"not committed or pushed: {memory['path']}: GitHub token (line" in said and fingerprint in said
    assert secret not in said
    pushed = everything_pushed(team)
    assert secret not in pushed and "remember: Releases go out on Tuesdays." in pushed  # the rest went on
    assert git(team.victim, "status", "--porcelain", "--", memory["path"]).startswith(" M")  # kept, uncommitted
    as_json = json.loads(run_cli("--json", "sync", vault=team.victim).stdout)
    line = path_lines(team.victim / memory["path"]).index(f"CI token for publishing: {secret}") + 1
    assert as_json["withheld"] == [f"{memory['path']}: GitHub token (line {line}, fingerprint {fingerprint})"]
    for tag in ("a", "b", "c"):  # more edits while it waits: one journal line, not one per edit
        assert run_cli("edit", memory["id"], "--add-tag", tag, vault=team.victim).returncode == 0
        assert run_cli("sync", vault=team.victim).returncode == 0
    assert len((team.victim / ".index" / "git-pending.jsonl").read_text().splitlines()) == 1
    # The person removes the token: the next sync takes the tag edit that waited.
    path = team.victim / memory["path"]
    path.write_text(path.read_text().replace(f"CI token for publishing: {secret}\n", ""))
    assert run_cli("sync", vault=team.victim).returncode == 0
    assert "release" in git(team.remote, "show", f"main:{memory['path']}") and secret not in everything_pushed(team)


def test_an_approved_fingerprint_is_committed(team: Team) -> None:
    secret = token(4)
    [fingerprint] = [f.fingerprint for f in credentials.find_credentials(secret)]
    memory = json.loads(run_cli("--json", "add", "Docs sample.", vault=team.victim).stdout)["memory"]
    hand_append(team.victim, memory["path"], f"The docs' sample token: {secret}")
    (team.victim / ".agent-memory.toml").write_text(f'[git]\ncommit = true\n[secrets]\nallow = ["{fingerprint}"]\n')
    assert run_cli("edit", memory["id"], "--add-tag", "docs", vault=team.victim).returncode == 0
    assert run_cli("sync", vault=team.victim).returncode == 0
    assert secret not in everything_pushed(team)  # a teammate's (or an unapproved) allow entry lets nothing out
    assert run_cli("trust", "secrets.allow", vault=team.victim).returncode == 0
    assert run_cli("edit", memory["id"], "--add-tag", "sample", vault=team.victim).returncode == 0
    assert run_cli("sync", vault=team.victim).returncode == 0
    assert secret in everything_pushed(team)


@pytest.mark.anyio
async def test_the_committer_behind_the_server_withholds_and_says_it(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    team = make_team(tmp_path)
    secret = token(5)
    caplog.set_level(logging.INFO, "agent_memory.git")
    with Vault(team.victim) as vault, Committer(vault) as committer:
        async with Client(build_server(vault)) as client:
            made = (await client.call_tool("remember", {"content": "Staging runs on port 8443."})).structured_content
            committer.flush()
            rel = made["memory"]["path"]
            hand_append(team.victim, rel, f"admin token {secret}")
            done = await client.call_tool("update_memory", {"memory_id": made["memory"]["id"], "add_tags": ["ops"]})
            assert done.is_error is False
            outcome = committer.flush()
    assert outcome is not None and outcome.withheld and outcome.withheld[0].startswith(f"{rel}: GitHub token")
    assert secret not in git(team.victim, "log", "-p", "--format=%B")
    assert any(f"not committed: {rel}: GitHub token" in r.getMessage() for r in caplog.records)
    assert secret not in caplog.text


# --------------------------------------------------------------------------- names and messages


HOLD_A_VALUE = [
    ("The wifi password: hunter2", "hunter2"),
    ("the token is abc", "abc"),
    ("api key = xyz", "xyz"),
    ("DB_PASSWORD=swordfish for staging", "swordfish"),
    ("MYSQLPASSWORD=swordfish", "swordfish"),
    ("Office PIN is 4711.", "4711"),
    ("the passphrase was correct horse battery staple", "horse"),
    ("secret: we rebrand in May", "rebrand"),
    ("Deploy with " + "gh" + "p_" + "R8x2Kq9ZtB4mW7nL1vC5yH3jF6dS0aPuE2gX", "R8x2Kq9Z"),
]
KEEP_INTACT = [
    "token budget for the summariser",
    "pin numpy below 2.0",
    "secret santa on Friday",
    "the password policy changed",
    "the deploy token is in the team password manager",
    "max_tokens=500 for recall",
    "tokens: 500 per request",
]


@pytest.mark.parametrize(("text", "value"), HOLD_A_VALUE)
def test_a_credential_words_value_is_redacted_from_names(text: str, value: str) -> None:
    shown = credentials.redact_for_names(text)
    assert value not in shown and "[redacted" in shown


@pytest.mark.parametrize("text", KEEP_INTACT)
def test_a_phrase_without_a_value_stays_intact(text: str) -> None:
    assert credentials.redact_for_names(text) == text


@pytest.mark.parametrize(("text", "value"), HOLD_A_VALUE[:-1])  # the last is a credential: refused outright
def test_add_never_puts_the_value_in_a_file_name_or_a_commit_message(team: Team, text: str, value: str) -> None:
    added = run_cli("--json", "add", text, vault=team.victim)
    assert added.returncode == 0, added.stderr
    memory = json.loads(added.stdout)["memory"]
    assert value.lower() not in memory["path"].lower()
    assert (team.victim / memory["path"]).read_text().count(value) == 1  # the content itself is stored as written
    assert run_cli("sync", vault=team.victim).returncode == 0
    message = git(team.remote, "log", "-1", "--format=%B", "main")
    assert message.startswith("remember: ") and value not in message and "[redacted" in message


@pytest.mark.parametrize("text", KEEP_INTACT[:4])
def test_a_title_without_a_value_keeps_its_words_in_name_and_message(team: Team, text: str) -> None:
    memory = json.loads(run_cli("--json", "add", text, vault=team.victim).stdout)["memory"]
    name = memory["path"].rsplit("/", 1)[1]
    assert "redacted" not in name and all(word in name for word in text.lower().split() if word.isalpha())
    assert run_cli("sync", vault=team.victim).returncode == 0
    assert git(team.remote, "log", "-1", "--format=%s", "main").strip() == f"remember: {text}"


def test_the_wifi_password_example(team: Team) -> None:
    memory = json.loads(run_cli("--json", "add", "The wifi password: hunter2", vault=team.victim).stdout)["memory"]
    assert not memory["path"].endswith("the-wifi-password-hunter2.md")
    assert memory["path"].endswith("the-wifi-password-redacted.md")
    assert run_cli("sync", vault=team.victim).returncode == 0
    assert "hunter2" not in git(team.remote, "log", "--format=%B%n%H", "--name-only", "main")
    assert approvals.review(team.victim)[0].approved  # (git.commit, approved when the team was made)
