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
