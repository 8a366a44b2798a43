"""The command line behaves like a tool: no command prints help to a person at a
terminal and serves stdio to an MCP client; options that mean nothing are not offered;
summaries name what they did with plurals right; long lists page past the library's
cap; no namespace noise; titles as written; forgetting twice says how to restore."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

from agent_memory.vault.vault import Vault

from conftest import CONSOLE_SCRIPT, deadline, read_all, run_cli
from test_server_stdio import HANDSHAKE, serve_raw


def _with_terminal(which: str, vault: Path) -> tuple[int, bytes, bytes]:
    """``agent-memory --dir vault`` with no command, ``which`` ("stdin" or "stdout") on a
    pseudo-terminal and the other streams on pipes; returns the exit code, what reached
    stdout (the terminal's bytes when stdout is the terminal) and stderr."""
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_MEMORY")}
    streams = {"stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE, which: slave}
    try:
        done = subprocess.run([str(CONSOLE_SCRIPT), "--dir", str(vault)], env=env, stderr=subprocess.PIPE,
                              timeout=deadline(120), **streams)
        os.close(slave)
        shown = read_all(master) if which == "stdout" else b""
    finally:
        os.close(master)
    return done.returncode, done.stdout if which != "stdout" else shown, done.stderr


def test_no_command_at_a_terminal_prints_help_and_serves_nothing(tmp_path: Path) -> None:
    Vault.init(tmp_path / "vault").close()
    for which in ("stdin", "stdout"):
        code, out, err = _with_terminal(which, tmp_path / "vault")
        assert code == 0, err
        assert b"Usage: agent-memory [OPTIONS] COMMAND" in out or b"Usage: agent-memory [OPTIONS] [COMMAND]" in out
        assert b"serving" not in err, f"with {which} on a terminal the server must not start"


def test_no_command_on_pipes_serves_stdio(tmp_path: Path) -> None:
    Vault.init(tmp_path / "vault").close()
    replies, stderr = serve_raw(tmp_path / "vault", HANDSHAKE)
    assert replies[0]["result"]["serverInfo"] and "serving" in stderr


def test_serve_offers_no_json(tmp_path: Path) -> None:
    done = run_cli("serve", "--json", vault=tmp_path)
    assert done.returncode == 2 and "No such option '--json'" in done.stderr
    assert "--json" not in run_cli("serve", "--help").stdout


def test_plurals_and_no_default_namespace_noise(vault: Vault) -> None:
    vault.remember("Only one fact here")
    vault.close()
    assert f"Indexed 1 file in {vault.root} (0 expired memories moved to .trash/)." in \
        run_cli("reindex", vault=vault.root).stdout
    assert "[  ok] index: In sync (1 memory)." in run_cli("doctor", vault=vault.root).stdout
    listed = run_cli("list", vault=vault.root).stdout
    assert listed.startswith("1. Only one fact here  (") and "[default]" not in listed
    run_cli("add", "A support fact", "-n", "support", vault=vault.root)
    assert "A support fact  [support]" in run_cli("list", vault=vault.root).stdout


def test_gc_says_one_file(vault: Vault, clock) -> None:
    vault.forget(vault.remember("The staging database resets on Sundays")["memory"]["id"])
    vault.close()
    done = run_cli("gc", "--older-than", "0", vault=vault.root)
    assert "Removed 1 file from the trash (older than 0 days); kept 0; moved 0 expired memories there." in done.stdout


def test_titles_keep_underscores_inside_words(vault: Vault) -> None:
    made = vault.remember("we name things in snake_case and _stress_ words")["memory"]
    assert made["title"] == "we name things in snake_case and stress words"
    vault.close()
    assert "snake_case" in run_cli("list", vault=vault.root).stdout


def test_list_pages_past_the_librarys_cap_and_all_lists_everything(vault: Vault) -> None:
    for n in range(130):
        (vault.root / f"note {n:03}.md").write_text(f"Note number {n}.\n")
    vault.close()
    many = json.loads(run_cli("list", "--limit", "120", "--json", vault=vault.root).stdout)
    assert many["count"] == 120 and many["next_offset"] == 120 and many["total"] == 130
    assert len({m["path"] for m in many["memories"]}) == 120
    every = json.loads(run_cli("list", "--all", "--json", vault=vault.root).stdout)
    assert every["count"] == 130 and "next_offset" not in every
    assert run_cli("list", "--all", vault=vault.root).stdout.rstrip().endswith("1-130 of 130")


def test_forgetting_a_forgotten_memory_says_how_to_restore_it(vault: Vault) -> None:
    made = vault.remember("The office plant needs water on Mondays")["memory"]
    vault.close()
    assert run_cli("forget", made["id"], vault=vault.root).returncode == 0
    again = run_cli("forget", made["id"], vault=vault.root)
    assert again.returncode == 1
    assert "was forgotten already" in again.stderr and f"`agent-memory restore {made['id']}`" in again.stderr
    assert run_cli("restore", made["id"], vault=vault.root).returncode == 0


def test_import_summary_names_the_file_and_the_format(vault: Vault, tmp_path: Path) -> None:
    source = tmp_path / "memory.jsonl"
    source.write_text(json.dumps({"type": "entity", "name": "Priya", "entityType": "person",
                                  "observations": ["Prefers written questions"]}) + "\n")
    vault.close()
    done = run_cli("import", "--from", "mcp-knowledge-graph", str(source), vault=vault.root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].endswith("skipped 0 duplicates (from memory.jsonl, --from mcp-knowledge-graph).")
