"""`agent-memory git setup`: the .gitattributes line (scoped to the vault, other lines
kept, never twice), the driver in the repository's config with the absolute
interpreter (quoted when its path has spaces), and a clear error outside git."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import run_cli

from agent_memory.disk import store
from agent_memory.git import setup as git_setup
from agent_memory.git.run import DRIVER_NAME, driver_command
from agent_memory.cli.app import cli
from agent_memory.vault.vault import Vault

pytestmark = pytest.mark.usefixtures("git_isolated")




def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=Ada", "-c", "user.email=ada@example.com", *args],
                          capture_output=True, text=True, check=True).stdout


def setup(vault: Path, *extra: str) -> tuple[int, str]:
    done = CliRunner().invoke(cli, ["--dir", str(vault), "git", "setup", *extra])
    return done.exit_code, done.output


def test_setup_at_the_repository_root_writes_the_attribute_and_the_driver(tmp_path: Path) -> None:
    repo = tmp_path / "team"
    repo.mkdir()
    git(repo, "init", "-q")
    Vault.init(repo).close()
    (repo / ".gitattributes").write_text("*.png binary\n*.md text eol=lf")  # no final newline
    code, output = setup(repo, "--json")
    assert code == 0, output
    result = json.loads(output)
    assert result["gitattributes_changed"] is True and result["vault_prefix"] == ""
    assert Path(result["repository"]).resolve() == repo.resolve()
    assert (repo / ".gitattributes").read_text() == "*.png binary\n*.md text eol=lf\n*.md merge=agent-memory\n"
    driver = git(repo, "config", "merge.agent-memory.driver").strip()
    assert f"; {shlex.quote(sys.executable)} -m agent_memory merge-file %O %A %B %L %P" in driver
    assert Path(sys.executable).is_absolute()
    assert git(repo, "config", "merge.agent-memory.name").strip() == DRIVER_NAME
    assert git(repo, "check-attr", "merge", "--", "2026/07/20/a.md").strip().endswith("merge: agent-memory")
    code, output = setup(repo)  # again: nothing doubled
    assert code == 0 and "already has *.md merge=agent-memory" in output
    assert (repo / ".gitattributes").read_text().count("merge=agent-memory") == 1
    assert git(repo, "config", "--get-all", "merge.agent-memory.driver").count("\n") == 1


def test_a_later_line_that_overrides_the_driver_gets_it_appended_again(tmp_path: Path) -> None:
    repo = tmp_path / "team"
    repo.mkdir()
    git(repo, "init", "-q")
    Vault.init(repo).close()
    (repo / ".gitattributes").write_text("*.md merge=agent-memory\n*.md merge=union\n")
    assert setup(repo)[0] == 0
    assert (repo / ".gitattributes").read_text() == "*.md merge=agent-memory\n*.md merge=union\n*.md merge=agent-memory\n"
    assert git(repo, "check-attr", "merge", "--", "a.md").strip().endswith("merge: agent-memory")


def test_a_vault_in_a_subfolder_gets_the_attribute_for_its_folder_only(tmp_path: Path) -> None:
    repo = tmp_path / "code"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README.md").write_text("# code\n")
    vault = repo / "docs" / ".memory"
    Vault.init(vault).close()
    code, output = setup(vault, "--json")
    assert code == 0, output
    result = json.loads(output)
    assert result["vault_prefix"] == "docs/.memory/" and result["gitattributes"] == str(vault / ".gitattributes")
    assert not (repo / ".gitattributes").exists()
    assert git(repo, "check-attr", "merge", "--", "docs/.memory/2026/07/20/a.md").strip().endswith("agent-memory")
    assert git(repo, "check-attr", "merge", "--", "README.md").strip().endswith("unspecified")
    assert git(repo, "check-attr", "merge", "--", "docs/guide.md").strip().endswith("unspecified")


def test_a_vault_not_in_git_is_a_one_line_error(tmp_path: Path) -> None:
    vault = tmp_path / ".memory"
    Vault.init(vault).close()
    done = run_cli("git", "setup", vault=vault)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0 and "is not in a git repository" in done.stderr
    assert "agent-memory git setup" in done.stderr
    assert not (vault / ".gitattributes").exists()


def test_an_interpreter_path_with_spaces_is_quoted_and_runs(tmp_path: Path) -> None:
    """A driver registered with an interpreter in a folder with a space still runs: a
    clean merge of two tag additions, done by git through sh."""
    folder = tmp_path / "Program Files" / "py"
    folder.mkdir(parents=True)
    python = folder / "python"
    python.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} \"$@\"\n")
    python.chmod(0o755)
    repo = tmp_path / "team"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    Vault.init(repo).close()
    git_setup.setup(repo, python=str(python))
    assert f"; '{python}' -m agent_memory merge-file" in git(repo, "config", "merge.agent-memory.driver")
    note = "---\nid: 0000000000000aaa\ntags: [a]\n---\nBody.\n"
    (repo / "n.md").write_text(note)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one")
    git(repo, "checkout", "-q", "-b", "side")
    (repo / "n.md").write_text(note.replace("[a]", "[a, b]"))
    git(repo, "commit", "-q", "-am", "b")
    git(repo, "checkout", "-q", "main")
    (repo / "n.md").write_text(note.replace("[a]", "[a, c]"))
    git(repo, "commit", "-q", "-am", "c")
    git(repo, "merge", "-q", "side")
    assert (repo / "n.md").read_text() == note.replace("[a]", "[a, c, b]")


def test_doctor_says_when_this_clone_would_not_run_the_current_merge_driver(tmp_path: Path) -> None:
    repo = tmp_path / "team"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    Vault.init(repo).close()

    def driver_check() -> str | None:
        result = run_cli("doctor", vault=repo)
        found = [line for line in result.stdout.splitlines() if "merge driver" in line]
        return found[0] if found else None

    assert driver_check() is None  # the vault does not ask for the driver: nothing to say
    assert setup(repo)[0] == 0
    assert driver_check() is None  # registered by this install: current
    git(repo, "config", "--unset", "merge.agent-memory.driver")  # a fresh clone: .gitattributes came, the config did not
    assert "no merge driver registered" in (driver_check() or "")
    old = (f"{sys.executable} -m agent_memory merge-file %O %A %B %L %P || {{ s=$?; [ \"$s\" -eq 1 ] && "
           "grep -q '^<<<<<<<' %A && exit 1; git merge-file --marker-size=%L -L ours -L base -L theirs %A %O %B; }")
    git(repo, "config", "merge.agent-memory.driver", old)
    assert "older agent-memory" in (driver_check() or "")
    git(repo, "config", "merge.agent-memory.driver", driver_command("/gone/venv/bin/python"))
    assert "is gone" in (driver_check() or "")
    assert run_cli("doctor", vault=repo).returncode == 1
    assert setup(repo)[0] == 0 and driver_check() is None  # git setup again fixes it


# ---------------------------------------------------------------- when setup cannot be done


def _repo_vault(tmp_path: Path) -> Path:
    repo = tmp_path / "team"
    repo.mkdir()
    git(repo, "init", "-q")
    Vault.init(repo).close()
    return repo


def _one_line_error(done) -> str:
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().count("\n") == 0, done.stderr
    return done.stderr.strip()


def test_setup_without_git_on_the_path_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _repo_vault(tmp_path)
    empty = tmp_path / "no-programs"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    message = _one_line_error(run_cli("git", "setup", vault=repo))
    assert "git is not installed (or not on PATH), so agent-memory cannot set up the merge driver." in message
    assert not (repo / ".gitattributes").exists()


def test_setup_with_a_damaged_git_file_names_gits_reason(tmp_path: Path) -> None:
    vault = tmp_path / ".memory"
    Vault.init(vault).close()
    (vault / ".git").write_text("not a gitdir line\n")
    message = _one_line_error(run_cli("git", "setup", vault=vault))
    assert "git cannot read the vault's repository: invalid gitfile format" in message
    assert not (vault / ".gitattributes").exists()


def test_setup_names_a_gitattributes_it_cannot_read(tmp_path: Path) -> None:
    repo = _repo_vault(tmp_path)
    (repo / ".gitattributes").mkdir()  # a folder where the file should be
    message = _one_line_error(run_cli("git", "setup", vault=repo))
    assert "Cannot read" in message and ".gitattributes: Is a directory." in message
    assert "merge.agent-memory" not in git(repo, "config", "--list", "--local")


def test_a_failed_gitattributes_write_leaves_the_old_file_and_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _repo_vault(tmp_path)
    (repo / ".gitattributes").write_text("*.png binary\n")

    def full(_fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store.os, "fsync", full)
    message = _one_line_error(run_cli("git", "setup", vault=repo))
    assert message.endswith(".gitattributes: No space left on device. Nothing was changed.")
    assert (repo / ".gitattributes").read_text() == "*.png binary\n"
    assert sorted(p.name for p in repo.iterdir() if p.name.endswith(".tmp")) == []


def test_setup_while_another_git_holds_the_config_lock_says_so(tmp_path: Path) -> None:
    repo = _repo_vault(tmp_path)
    (repo / ".git" / "config.lock").write_text("")  # another git command writing the config
    message = _one_line_error(run_cli("git", "setup", vault=repo))
    assert "git could not write merge.agent-memory.name to the repository's config:" in message
    assert "could not lock config file" in message
