"""What a person at the terminal reads: errors that name CLI commands, help with an
example for every command and summaries that are not cut off, path ids printed once."""

from __future__ import annotations

import json

import click
import pytest

from agent_memory.cli.app import cli
from agent_memory.cli.words import cli_words
from agent_memory.errors import NotFound
from agent_memory.wording import (APPEND, COMPLETE_FIRST, EXPECTED_VERSION, GET_MEMORY, LIST_MEMORIES, RECALL, REPLACE,
                                   TAG_EDITS, TTL_DAYS, said)
from agent_memory.vault.vault import Vault

from conftest import run_cli

COMMANDS = cli.list_commands(click.Context(cli))  # its commands' modules are imported when asked for


@pytest.mark.parametrize(("message", "shown"), [
    (said("use ", RECALL, " or ", LIST_MEMORIES, " to find valid ids."),
     "use `agent-memory search` or `agent-memory list` to find valid ids."),
    (said("Read it again with ", GET_MEMORY, " and retry."), "Read it again with `agent-memory show` and retry."),
    (said("pass ", EXPECTED_VERSION, " (from ", GET_MEMORY, " or ", RECALL, "), or use ", APPEND, ", ", REPLACE, ", ",
          TAG_EDITS, ", which need none."),
     "pass --expected-version (from `agent-memory show` or `agent-memory search`), or use --append, --replace OLD NEW, "
     "--add-tag/--remove-tag, which need none."),
    (said(TTL_DAYS, " must be between 0 and 36500."), "--ttl-days must be between 0 and 36500."),
    # Plain text is never rewritten, however it reads: only names given as names are.
    ("recall.profile must be facts or conversation.", "recall.profile must be facts or conversation."),
    ("use recall or list_memories", "use recall or list_memories"),
])
def test_library_names_become_cli_words(message: str, shown: str) -> None:
    assert cli_words(message) == shown


def test_a_said_sentence_is_the_mcp_wording_as_a_string() -> None:
    sentence = said("use ", RECALL, " or ", COMPLETE_FIRST, ".")
    assert sentence == "use recall or complete: true, first." and json.loads(json.dumps(sentence)) == sentence
    assert NotFound("x").render({}) == str(NotFound("x"))  # the server's words are str()'s
    assert NotFound("x").suggestion == "use recall or list_memories to find valid ids."
    assert NotFound("x").argument == "memory_id"


def test_a_missing_memory_names_the_cli_commands(vault: Vault) -> None:
    done = run_cli("--dir", str(vault.root), "show", "no-such-memory")
    assert done.returncode == 1
    assert "`agent-memory search` or `agent-memory list`" in done.stderr
    assert "list_memories" not in done.stderr and "recall " not in done.stderr


def test_a_version_conflict_names_the_cli_command(vault: Vault) -> None:
    memory = vault.remember("Customer ACME prefers deploys on Fridays")["memory"]
    done = run_cli("--dir", str(vault.root), "edit", memory["id"], "--content", "Mondays", "--expected-version", "0" * 64)
    assert done.returncode == 1 and "`agent-memory show`" in done.stderr and "get_memory" not in done.stderr


def test_a_search_that_finds_nothing_suggests_the_cli_command(vault: Vault) -> None:
    """The library's hints name MCP tools too; a person reads the command instead, a
    program reading --json gets the library's words as they are."""
    vault.remember("Customer ACME prefers deploys on Fridays")
    done = run_cli("--dir", str(vault.root), "search", "zebra")
    assert done.returncode == 0 and "browse with `agent-memory list`." in done.stdout
    assert "list_memories" not in done.stdout
    as_json = run_cli("--dir", str(vault.root), "search", "zebra", "--json")
    assert "browse with list_memories." in json.loads(as_json.stdout)["hint"]


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_help_has_an_example(name: str) -> None:
    done = run_cli(name, "--help")
    assert done.returncode == 0
    assert "Example" in done.stdout and f"agent-memory {name}" in done.stdout.split("Example", 1)[1]


def test_no_command_summary_is_cut_off() -> None:
    done = run_cli("--help")
    listed = done.stdout.split("Commands:", 1)[1].splitlines()
    assert {line.split()[0] for line in listed if line.strip()} == set(COMMANDS)
    assert [line for line in listed if line.rstrip().endswith("...")] == []


def test_a_path_id_is_printed_once(vault: Vault) -> None:
    (vault.root / "people").mkdir()
    (vault.root / "people/priya.md").write_text("Priya prefers written questions.\n")
    vault.reconcile()
    for args in (["list"], ["show", "people/priya.md"], ["search", "priya"]):
        done = run_cli("--dir", str(vault.root), *args)
        assert done.returncode == 0 and done.stdout.count("people/priya.md") == 1, (args, done.stdout)


def test_a_partial_search_speaks_the_clis_words_and_json_keeps_the_tools(vault: Vault) -> None:
    vault.remember("ACME deploys on Fridays")
    vault.remember("ACME billing runs monthly")
    vault.close()
    shown = run_cli("search", "acme fridays billing", vault=vault.root).stdout
    assert "listed first" in shown or "these match some of them" in shown
    assert "complete: true" not in shown and "matched_terms" not in shown
    as_json = json.loads(run_cli("search", "acme fridays billing", "--json", vault=vault.root).stdout)
    assert "matched_terms" in as_json["note"]  # the JSON (and MCP) result keeps its own vocabulary
