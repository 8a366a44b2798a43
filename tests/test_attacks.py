"""Attacks on a shared vault that got past the guards once, each kept as a test: a
teammate with push rights, a synced folder (``.git/`` included) or a local process does
what it can, and the victim runs agent-memory as a person does. Real git (a bare remote,
the teammate's clone, the victim's), real files, the CLI and the library in process."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from conftest import run_cli
from gitteam import AUTHOR, Team, git, make_team


@pytest.fixture(autouse=True)
def isolated_git(git_isolated: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    for name, value in AUTHOR.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def team(tmp_path: Path) -> Team:
    return make_team(tmp_path)


@pytest.fixture
def ran(tmp_path: Path) -> Path:
    """The file every planted program appends its name to: it must stay absent."""
    return tmp_path / "ran"


def program(ran: Path, label: str) -> str:
    return f"echo {label} >> {shlex.quote(str(ran))}"


# --------------------------------------------------------------------------- a synced .git/config


def test_a_merge_driver_named_like_ours_in_another_case_never_runs(team: Team, ran: Path) -> None:
    """git's subsection names are case-sensitive: ``merge.Agent-Memory.driver`` is another
    driver than ours, and a pulled ``.gitattributes`` can name it for a file that is not a
    memory (which the merge-attribute check does not look at)."""
    (team.victim / "notes.txt").write_text("one\n")
    git(team.victim, "add", "notes.txt")
    git(team.victim, "commit", "-qm", "notes")
    git(team.victim, "push", "-q")
    git(team.mate, "pull", "-q")
    with (team.mate / ".gitattributes").open("a") as attributes:
        attributes.write("notes.txt merge=Agent-Memory\n")
    (team.mate / "notes.txt").write_text("one\nfrom the teammate\n")
    team.push("notes, merged another way")
    (team.victim / "notes.txt").write_text("one\nfrom the victim\n")
    git(team.victim, "commit", "-qam", "notes here")
    git(team.victim, "config", "merge.Agent-Memory.driver", program(ran, "driver") + "; cp %B %A; exit 0")
    done = run_cli("sync", vault=team.victim)
    assert "Traceback" not in done.stderr, done.stderr
    assert not ran.exists(), ran.read_text()
