"""Attacks on a shared vault's trust boundary, end to end: a teammate with push rights
(a bare remote, the teammate's clone, the victim's), a synced folder, or a person's own
slip that the tool must not carry to the remote. The CLI runs as a subprocess, as a
person runs it."""

from __future__ import annotations

import json
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


def git_bytes(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-16"])
def test_a_token_saved_as_utf16_is_neither_committed_nor_pushed(team: Team, encoding: str) -> None:
    """Windows PowerShell's ``>`` and Notepad's "Unicode" save text as UTF-16: a token
    in such a file is still a token once git pushes it."""
    secret = token(7)
    [fingerprint] = [f.fingerprint for f in credentials.find_credentials(secret)]
    bom = "\ufeff" if encoding != "utf-16" else ""  # utf-16 writes its own
    (team.victim / "deploy-notes.txt").write_bytes(f"{bom}Deploy notes\r\nThe token is {secret}\r\n".encode(encoding))
    (team.victim / "plain.md").write_text("A plain note of mine.\n")
    synced = run_cli("--json", "sync", "--all", vault=team.victim, spawn=True)
    assert synced.returncode == 0, synced.stderr
    result = json.loads(synced.stdout)
    assert result["withheld"] == [f"deploy-notes.txt: GitHub token (line 2, fingerprint {fingerprint})"]
    assert result["hand_shared"] == ["added plain.md"]
    assert "deploy-notes.txt" not in team.remote_files() and "plain.md" in team.remote_files()
    pushed = everything_pushed(team)
    assert secret.encode("utf-16-le") not in pushed and secret.encode("utf-16-be") not in pushed
    assert git(team.victim, "status", "--porcelain", "--", "deploy-notes.txt") == "?? deploy-notes.txt\n"
