"""The CLI as a hurried person types it: several words without quotes, a path from the
folder above the vault, an output file in a folder that is not there, a vault they may
not write, Ctrl-C. Each gets what they meant, or one line saying what to do next;
never a traceback, never a lost file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli


@pytest.fixture
def vault_dir(tmp_path: Path) -> Path:
    root = tmp_path / "project" / ".memory"
    assert run_cli("init", str(root), cwd=tmp_path).returncode == 0
    return root


def test_several_words_to_search_are_one_question(vault_dir: Path) -> None:
    run_cli("add", "ACME billing goes through Dana; deploy on Fridays", vault=vault_dir)
    unquoted = run_cli("search", "deploy", "billing", "--json", vault=vault_dir)
    assert unquoted.returncode == 0, unquoted.stderr
    quoted = run_cli("search", "deploy billing", "--json", vault=vault_dir)
    assert json.loads(unquoted.stdout) == json.loads(quoted.stdout)
    assert json.loads(unquoted.stdout)["terms"] == ["deploy", "billing"]
    # Options may stand between the words, as anywhere on a command line.
    between = run_cli("search", "deploy", "--limit", "5", "billing", "--json", vault=vault_dir)
    assert json.loads(between.stdout)["terms"] == ["deploy", "billing"]


def test_several_words_to_add_are_one_memory(vault_dir: Path) -> None:
    done = run_cli("add", "Priya", "works", "CET", "hours", "-t", "people", "--json", vault=vault_dir)
    assert done.returncode == 0, done.stderr
    memory = json.loads(done.stdout)["memory"]
    assert memory["content"].strip() == "Priya works CET hours" and memory["tags"] == ["people"]
    # stdin still reads with no words, or with -
    piped = run_cli("add", "--json", vault=vault_dir, stdin="From a pipe.\n")
    assert json.loads(piped.stdout)["memory"]["content"].strip() == "From a pipe."
    batch = run_cli("add", "two", "words", "--batch", "-", vault=vault_dir, stdin="[]")
    assert batch.returncode == 1 and "Give CONTENT or --batch FILE, not both." in batch.stderr


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    """An Obsidian vault in a folder of its own, run from the folder above it."""
    root = tmp_path / "notes"
    (root / ".obsidian").mkdir(parents=True)
    (root / "en" / "Plugins").mkdir(parents=True)
    (root / "en" / "Plugins" / "Slides.md").write_text("# Slides\nPresent a note as slides.\n")
    (root / "en" / "Home.md").write_text("See [[Slides]].\n")
    return root


@pytest.mark.parametrize("typed", ["notes/en/Plugins/Slides.md", "./notes/en/Plugins/Slides.md",
                                   "notes/en/Plugins/Slides"])
def test_a_path_from_the_folder_above_the_vault_names_that_file(notes: Path, typed: str) -> None:
    done = run_cli("show", typed, "--json", vault=notes, cwd=notes.parent)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["path"] == "en/Plugins/Slides.md"


def test_the_vault_folders_own_name_in_front_works_for_every_kind_of_path(notes: Path) -> None:
    above = notes.parent
    found = run_cli("search", "slides", "--path", "notes/en/Plugins", "--json", vault=notes, cwd=above)
    assert [hit["path"] for hit in json.loads(found.stdout)["hits"]] == ["en/Plugins/Slides.md"]
    moved = run_cli("mv", "notes/en/Plugins/Slides.md", "notes/en/Plugins/Presentations.md", vault=notes, cwd=above)
    assert moved.returncode == 0, moved.stderr
    assert (notes / "en" / "Plugins" / "Presentations.md").is_file()
    assert (notes / "en" / "Home.md").read_text() == "See [[Presentations]].\n"
    gone = run_cli("forget", "notes/en/Plugins/Presentations.md", vault=notes, cwd=above)
    assert gone.returncode == 0, gone.stderr
    back = run_cli("restore", "notes/en/Plugins/Presentations.md", vault=notes, cwd=above)
    assert back.returncode == 0, back.stderr
    assert (notes / "en" / "Plugins" / "Presentations.md").is_file()


def test_a_typo_in_a_path_from_above_names_both_places_looked(notes: Path) -> None:
    done = run_cli("show", "notes/en/Plugins/Slide.md", vault=notes, cwd=notes.parent)
    assert done.returncode == 1
    assert "en/Plugins/Slide.md from the current folder" in done.stderr
    assert f"notes/en/Plugins/Slide.md from the vault root {notes}" in done.stderr
