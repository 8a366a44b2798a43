"""Finding the vault from where a person stands (SPEC §1), what a write says it wrote,
and a vault's .index/ never showing up in git status."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agent_memory.vault.vault import Vault

from conftest import CliResult, run_cli


def run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> CliResult:
    """The CLI started in ``cwd`` with no AGENT_MEMORY_DIR: discovery decides."""
    return run_cli(*args, cwd=cwd, env=env)


def ok(result: CliResult) -> CliResult:
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false",
         "-c", "init.defaultBranch=main", *args],
        cwd=cwd, capture_output=True, text=True,
    )
    assert done.returncode == 0, f"git {' '.join(args)} failed: {done.stderr}"
    return done.stdout


@pytest.fixture
def notes(isolated_home: Path) -> Path:
    """An Obsidian vault a person keeps in git, never touched by agent-memory."""
    root = isolated_home / "notes"
    (root / ".obsidian").mkdir(parents=True)
    (root / ".obsidian/app.json").write_text("{}\n")
    (root / "Projects").mkdir()
    (root / "Projects/Kessel Run.md").write_text("Body of the spaceport note.\n")
    (root / ".gitignore").write_text(".obsidian/workspace.json\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "notes")
    return root


def test_add_inside_an_obsidian_vault_writes_there_and_says_where(notes: Path, isolated_home: Path) -> None:
    done = ok(run(notes / "Projects", "add", "Deploys happen on Fridays"))
    memory_id = done.stdout.strip()  # stdout is the id alone, for scripts
    [line] = done.stderr.splitlines()
    rel = line.removeprefix("Wrote ").removesuffix(f" in {notes}")
    assert line == f"Wrote {rel} in {notes}" and rel.endswith(".md") and "/" in rel
    assert f"id: {memory_id}" in (notes / rel).read_text()
    assert not (isolated_home / ".memory").exists()


def test_write_commands_print_the_vault_relative_path(notes: Path) -> None:
    rel = "Projects/Kessel Run.md"
    edited = ok(run(notes, "edit", rel, "--append", "It is short.")).stdout
    assert edited == f"Updated {rel}\n"  # a path id is printed once
    listed = ok(run(notes, "list")).stdout
    assert listed.count(rel) == 1
    forgot = ok(run(notes, "forget", rel)).stdout
    assert forgot.startswith(f"Forgot {rel}: moved to .trash/")
    export = notes / "export.json"
    ok(run(notes, "add", "Priya prefers written questions"))
    ok(run(notes, "export", "-o", str(export)))
    other = notes.parent / "other"
    Vault.init(other).close()
    imported = ok(run(other, "import", str(export))).stdout
    [written] = [line.removeprefix("  wrote ") for line in imported.splitlines() if line.startswith("  wrote ")]
    assert (other / written).read_text().endswith("Priya prefers written questions\n")
    as_json = json.loads(ok(run(other, "import", str(export), "--json")).stdout)
    assert as_json["paths"] == [] and as_json["duplicates"] == 1


def test_no_vault_lists_where_it_looked(isolated_home: Path) -> None:
    (isolated_home / "code/app").mkdir(parents=True)
    for command in (["list"], ["add", "a fact"], ["search", "fact"]):
        done = run(isolated_home / "code/app", *command)
        assert done.returncode == 1
        assert f"looked for .memory/, .obsidian/ or a vault's .index/ in {isolated_home / 'code/app'}" in done.stderr
        assert "--dir PATH" in done.stderr and "Traceback" not in done.stderr and done.stdout == ""
    assert not (isolated_home / ".memory").exists()


def test_an_existing_vault_opened_without_init_stays_clean_in_git(notes: Path) -> None:
    ok(run(notes, "search", "spaceport"))
    assert (notes / ".index/.gitignore").read_text() == "*\n"
    assert git(notes, "status", "--porcelain", "--untracked-files=all") == ""


def test_the_vaults_own_index_folder_is_ignored_when_the_database_lives_elsewhere(
        notes: Path, tmp_path: Path) -> None:
    ok(run(notes, "add", "Stored while the index is elsewhere", env={"AGENT_MEMORY_INDEX_DIR": str(tmp_path / "indexes")}))
    assert (notes / ".index/write.lock").exists() and not (notes / ".index/index.sqlite3").exists()
    status = git(notes, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert len(status) == 1 and status[0].startswith("?? ") and status[0].endswith(".md")  # the memory, nothing else
    [external] = (tmp_path / "indexes").iterdir()
    assert (external / ".gitignore").read_text() == "*\n"


def test_an_index_gitignore_a_person_wrote_is_kept(notes: Path) -> None:
    (notes / ".index").mkdir()
    (notes / ".index/.gitignore").write_text("# mine\n*\n")
    ok(run(notes, "list"))
    assert (notes / ".index/.gitignore").read_text() == "# mine\n*\n"
