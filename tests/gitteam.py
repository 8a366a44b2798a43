"""A team around one vault, with real git: a bare remote, a teammate's clone that pushes
(a vault at its top) and the victim's clone, for the tests of what a shared vault must
never do to the one who pulls it."""

from __future__ import annotations

import random
import string
import subprocess
from dataclasses import dataclass
from pathlib import Path

from agent_memory.trust import approvals
from agent_memory.git.setup import ATTRIBUTES_LINE
from agent_memory.vault.vault import Vault

AUTHOR = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.com",
          "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.com"}


def git(repo: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout


def token(seed: int = 1) -> str:
    """A GitHub token's shape (random, never a real one)."""
    rng = random.Random(seed)
    return "gh" + "p_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))


@dataclass
class Team:
    remote: Path
    mate: Path  # the teammate's clone: pushes whatever it likes
    victim: Path  # the clone whose person runs agent-memory

    def push(self, message: str, *force: str) -> None:
        """The teammate commits everything, and force-adds the ``force`` paths git would
        ignore (.index/, .trash/), and pushes."""
        git(self.mate, "add", "-A")
        if force:
            git(self.mate, "add", "-f", "--", *force)
        git(self.mate, "commit", "-q", "-m", message)
        git(self.mate, "pull", "-q", "--rebase")  # what the victim pushed meanwhile
        git(self.mate, "push", "-q")

    def remote_log(self) -> list[str]:
        return git(self.remote, "log", "--format=%s", "main").splitlines()

    def remote_files(self) -> list[str]:
        return git(self.remote, "ls-tree", "-r", "--name-only", "main").splitlines()

    def victim_log(self) -> list[str]:
        return git(self.victim, "log", "--format=%s").splitlines()


def make_team(tmp_path: Path, settings: str = "[git]\ncommit = true\n") -> Team:
    """The team, its vault's settings committed by the teammate; the victim's clone has
    approved them (its person turned commits on knowingly)."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    mate = tmp_path / "mate"
    mate.mkdir()
    git(mate, "init", "-q", "-b", "main")
    Vault.init(mate).close()
    (mate / ".agent-memory.toml").write_text(settings)
    (mate / ".gitattributes").write_text(ATTRIBUTES_LINE + "\n")  # as `git setup` writes it; each clone's own config aside
    git(mate, "add", "-A")
    git(mate, "commit", "-q", "-m", "a vault")
    git(mate, "remote", "add", "origin", str(remote))
    git(mate, "push", "-q", "-u", "origin", "main")
    victim = tmp_path / "victim"
    git(tmp_path, "clone", "-q", str(remote), str(victim))
    if settings:
        approvals.approve(victim)
    return Team(remote, mate, victim)
