"""The CLI as a hurried person types it: several words without quotes, a path from the
folder above the vault, an output file in a folder that is not there, a vault they may
not write, Ctrl-C. Each gets what they meant, or one line saying what to do next;
never a traceback, never a lost file."""

from __future__ import annotations

import errno
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import assert_index_matches_files, deadline, obsidian_like, run_cli, wait_until


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
    return obsidian_like(tmp_path / "notes", "See [[Slides]].\n")


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


def test_export_to_a_folder_that_is_not_there_is_one_line(vault_dir: Path, tmp_path: Path) -> None:
    run_cli("add", "A fact worth a backup", vault=vault_dir)
    done = run_cli("export", "-o", str(tmp_path / "no-such-folder" / "backup.json"), vault=vault_dir)
    assert done.returncode == 1
    assert done.stderr.startswith("Error: Cannot write ") and done.stderr.count("\n") == 1, done.stderr
    assert "leave -o out to print to standard output" in done.stderr


def test_export_over_an_older_backup_replaces_it_whole(vault_dir: Path, tmp_path: Path) -> None:
    backup = tmp_path / "backup.json"
    backup.write_text("[]\n")
    run_cli("add", "A fact worth a backup", vault=vault_dir)
    assert run_cli("export", "-o", str(backup), vault=vault_dir).returncode == 0
    assert [item["content"].strip() for item in json.loads(backup.read_text())] == ["A fact worth a backup"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp file left beside it


def test_export_through_a_link_writes_the_file_it_names_and_keeps_its_permissions(vault_dir: Path, tmp_path: Path) -> None:
    """`-o` naming a symlink (a backup folder kept elsewhere) writes the file the link
    names, as a plain write did, and a private backup stays private."""
    target = tmp_path / "elsewhere" / "backup.json"
    target.parent.mkdir()
    target.write_text("[]\n")
    target.chmod(0o600)
    link = tmp_path / "backup.json"
    link.symlink_to(target)
    run_cli("add", "A fact worth a backup", vault=vault_dir)
    assert run_cli("export", "-o", str(link), vault=vault_dir).returncode == 0
    assert link.is_symlink() and link.resolve() == target
    assert [item["content"].strip() for item in json.loads(target.read_text())] == ["A fact worth a backup"]
    assert target.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("command", [("edit", "--add-tag", "friday"), ("link", "--relation", "see_also")])
def test_a_change_in_a_vault_you_may_not_write_is_one_line_and_changes_nothing(
        vault_dir: Path, monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]) -> None:
    memory_id = run_cli("add", "Customer ACME prefers deploys on Fridays", vault=vault_dir).stdout.strip()
    other = run_cli("add", "ACME billing contact is Dana", vault=vault_dir).stdout.strip()
    before = {p: p.read_bytes() for p in vault_dir.rglob("*.md")}
    # What a vault another account owns refuses this user (root may write anywhere, so
    # the refusal is the kernel's answer for anyone else): the folder a change keeps the
    # displaced bytes in cannot be made.
    real_mkdir = Path.mkdir

    def refused(self: Path, *args: object, **kwargs: object) -> None:
        if ".index" in self.parts and not self.is_dir():
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        real_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "mkdir", refused)
    verb, *options = command
    args = [verb, memory_id, *options] if verb == "edit" else [verb, memory_id, other, *options]
    done = run_cli(*args, vault=vault_dir)
    assert done.returncode == 1
    assert done.stderr.startswith("Error: Could not write ") and done.stderr.count("\n") == 1, done.stderr
    assert "permission denied. Nothing was changed" in done.stderr
    assert {p: p.read_bytes() for p in vault_dir.rglob("*.md")} == before


def test_a_system_error_no_check_foresaw_is_one_line_naming_the_file(
        vault_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_memory.vault.vault import Vault

    def failing_disk(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EIO, "Input/output error", str(vault_dir / "2026"))

    monkeypatch.setattr(Vault, "stats", failing_disk)
    done = run_cli("stats", vault=vault_dir)
    assert done.returncode == 1
    assert done.stderr == (f"Error: Input/output error: {vault_dir / '2026'}. Check that this path exists, that you "
                           "may write it and that the disk has room, then retry; `agent-memory doctor` checks the "
                           "vault.\n")


def test_ctrl_c_mid_reindex_says_what_it_left_and_loses_nothing(
        vault_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_memory.note import parse as parsing
    from agent_memory.vault.vault import Vault

    for n in range(20):
        run_cli("add", f"Fact number {n} about the release train", vault=vault_dir)
    before = {p: p.read_bytes() for p in vault_dir.rglob("*.md")}
    real, seen = parsing.parse, []

    def ctrl_c_on_the_tenth(data: bytes, path: str) -> parsing.Note:
        seen.append(path)
        if len(seen) == 10:
            raise KeyboardInterrupt  # what SIGINT raises in the main thread, there
        return real(data, path)

    monkeypatch.setattr(parsing, "parse", ctrl_c_on_the_tenth)
    done = run_cli("reindex", vault=vault_dir)
    monkeypatch.undo()
    assert done.returncode == 130
    assert done.stderr.startswith("Interrupted. Each file is written whole or not at all") and \
        "`agent-memory doctor` shows where things stand" in done.stderr, done.stderr
    assert {p: p.read_bytes() for p in vault_dir.rglob("*.md")} == before
    listed = run_cli("list", "--all", "--json", vault=vault_dir)  # the next command catches up
    assert json.loads(listed.stdout)["total"] == 20
    with Vault(vault_dir) as vault:
        assert_index_matches_files(vault)


def test_ctrl_c_stops_a_server_a_person_started_on_stdio(vault_dir: Path) -> None:
    server = subprocess.Popen([sys.executable, "-m", "agent_memory", "serve", "--dir", str(vault_dir)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        wait_until(lambda: "serving" in server.stderr.readline(), "the server says it serves")
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=deadline(60))
    finally:
        server.kill()
    assert server.returncode == 0, err
    assert err.strip().splitlines()[-1] == "Stopped." and "Traceback" not in err and "Aborted" not in err


@pytest.mark.parametrize(("args", "said"), [
    (("list", "--since", "yesterday"), "Error: --since must be a date or timestamp like 2026-07-20; got 'yesterday'. "
                                       "A span back from now works too: 7d, 24h, 2w."),
    (("list", "--until", "2020"), "Error: --until must be a date or timestamp"),
    (("search", "deploy", "--match", "some"), "Error: --match must be one of auto, all, any; got 'some'."),
    (("search", "deploy", "--profile", "fact"), "Error: --profile must be one of facts, conversation, notes; got 'fact'."),
    (("search", "deploy", "--depth", "7"), "Error: --depth must be between 0 and 3; got 7."),
    (("search", "deploy", "--limit", "0"), "Error: --limit must be between 1 and 100; got 0."),
    (("list", "--offset", "-1"), "Error: --offset must be between 0 and 1,000,000,000; got -1."),
    (("gc", "--older-than", "-3"), "Error: --older-than must be a number of days, 0 or more; got -3.0."),
])
def test_a_bad_option_value_is_named_as_typed(vault_dir: Path, args: tuple[str, ...], said: str) -> None:
    done = run_cli(*args, vault=vault_dir)
    assert done.returncode == 1
    assert done.stderr.startswith(said) and done.stderr.count("\n") == 1, done.stderr


def test_forgetting_several_names_the_cli_commands_for_each_one_not_found(vault_dir: Path) -> None:
    kept = run_cli("add", "A fact to forget", vault=vault_dir).stdout.strip()
    done = run_cli("forget", kept, "nope1", vault=vault_dir)
    assert done.returncode == 1
    assert "agent-memory: error: nope1: Memory 'nope1' not found — it may have expired or been forgotten; use " \
           "`agent-memory search` or `agent-memory list` to find valid ids." in done.stderr, done.stderr


def test_restoring_what_the_trash_does_not_hold_points_at_the_trash_list(vault_dir: Path) -> None:
    kept = run_cli("add", "A fact nobody forgot", vault=vault_dir).stdout.strip()
    for key in ("nope", kept):  # nothing by that name; a memory that is not in the trash at all
        done = run_cli("restore", key, vault=vault_dir)
        assert done.returncode == 1
        assert done.stderr == (f"Error: Nothing in the trash answers to {key!r} (an id, an old path or a path in "
                               ".trash/), so nothing was restored. `agent-memory restore` with no argument lists what "
                               "the trash can give back.\n")


def test_a_mistyped_command_names_the_one_meant(vault_dir: Path) -> None:
    done = run_cli("serach", "deploy", vault=vault_dir)
    assert done.returncode == 2 and "Error: No such command 'serach'. Did you mean 'search'?" in done.stderr


def test_errors_name_what_a_person_types_not_the_mcp_arguments(vault_dir: Path) -> None:
    memory_id = run_cli("add", "# Plan\nShip it.", vault=vault_dir).stdout.strip()
    itself = run_cli("link", memory_id, memory_id, vault=vault_dir)
    assert itself.stderr.endswith("cannot be linked to itself (" + json.loads(
        run_cli("show", memory_id, "--json", vault=vault_dir).stdout)["path"] + "); give another TARGET.\n")
    section = run_cli("edit", memory_id, "--replace-section", "## Status", "Done.", vault=vault_dir)
    assert section.returncode == 1
    assert section.stderr.endswith("Read it with `agent-memory show` to see its headings.\n"), section.stderr


def test_a_typo_in_dir_names_the_vault_beside_it(vault_dir: Path) -> None:
    typo = vault_dir.with_name(".memroy")
    done = run_cli("list", vault=typo)
    assert done.returncode == 1
    assert done.stderr == (f"Error: No vault at {typo}. Did you mean {vault_dir}? Pass --dir {vault_dir} (or to make "
                           f"a new vault there: `agent-memory --dir {typo} init`).\n")
    assert not typo.exists()
    elsewhere = vault_dir.parent / "unrelated"
    assert run_cli("list", vault=elsewhere).stderr == (
        f"Error: No vault at {elsewhere}. Create one with `agent-memory --dir {elsewhere} init`.\n")


@pytest.mark.parametrize("typed", ["./en/Plugins", "en/./Plugins/", "./en//Plugins"])
def test_a_leading_dot_slash_at_the_vault_root_is_the_same_folder(notes: Path, typed: str) -> None:
    listed = run_cli("list", "--path", typed, "--json", vault=notes, cwd=notes)
    assert [m["path"] for m in json.loads(listed.stdout)["memories"]] == ["en/Plugins/Slides.md"]
    found = run_cli("search", "slides", "--path", typed, "--json", vault=notes, cwd=notes)
    assert [hit["path"] for hit in json.loads(found.stdout)["hits"]] == ["en/Plugins/Slides.md"]
    shown = run_cli("show", typed.rstrip("/") + "/Slides.md", "--json", vault=notes, cwd=notes)
    assert json.loads(shown.stdout)["path"] == "en/Plugins/Slides.md"


def test_edit_with_an_editor_that_is_not_there_says_how_to_choose_one(vault_dir: Path) -> None:
    memory_id = run_cli("add", "A fact to open", vault=vault_dir).stdout.strip()
    before = {p: p.read_bytes() for p in vault_dir.rglob("*.md")}
    missing = "no-such-editor-here"
    done = run_cli("edit", memory_id, vault=vault_dir, env={"EDITOR": missing, "VISUAL": missing})
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and done.stderr.endswith(
        "With no change option, edit opens the file in $VISUAL or $EDITOR: set one to an editor you have, or change it "
        "with --append, --content or --replace.\n"), done.stderr
    assert {p: p.read_bytes() for p in vault_dir.rglob("*.md")} == before


def test_serve_on_a_port_another_program_holds_is_one_line(vault_dir: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_cli("serve", "--http", "--port", str(port), vault=vault_dir, spawn=True)
    assert done.returncode == 1, done.stderr
    assert done.stderr == (f"Error: Cannot serve on 127.0.0.1:{port}: another program (perhaps another agent-memory "
                           "serve) is listening there. Stop it, or choose another --port (0: any free one).\n")


def test_serve_on_a_host_name_that_does_not_resolve_is_one_line(vault_dir: Path) -> None:
    done = run_cli("serve", "--http", "--host", "no-such-host.invalid", "--token", "a" * 32, vault=vault_dir,
                   spawn=True)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("Error: Cannot serve on no-such-host.invalid: ") and done.stderr.endswith(
        "Give --host an address of this machine, such as 127.0.0.1.\n"), done.stderr


def test_add_alone_in_a_terminal_says_it_reads_what_is_typed(vault_dir: Path) -> None:
    import os
    import pty

    main, terminal = pty.openpty()
    try:
        os.write(main, b"A fact typed in the terminal\n\x04")  # typed ahead: the terminal keeps it until read
        add = subprocess.Popen([sys.executable, "-m", "agent_memory", "--dir", str(vault_dir), "add"], stdin=terminal,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.close(terminal)
        out, err = add.communicate(timeout=deadline(60))
    finally:
        os.close(main)
    assert add.returncode == 0, err
    assert err.splitlines()[0] == ('Type the memory, then Ctrl-D on a line of its own (or give it as CONTENT: '
                                   'agent-memory add "...").')
    shown = run_cli("show", out.strip(), "--json", vault=vault_dir)
    assert json.loads(shown.stdout)["content"].strip() == "A fact typed in the terminal"


def test_an_export_given_to_add_batch_points_at_import(vault_dir: Path, tmp_path: Path) -> None:
    run_cli("add", "A fact worth a backup", vault=vault_dir)
    backup = tmp_path / "backup.json"
    assert run_cli("export", "-o", str(backup), vault=vault_dir).returncode == 0
    done = run_cli("add", "--batch", str(backup), vault=vault_dir)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1].endswith(
        "It looks like an export's item: `agent-memory import` reads an export back."), done.stderr


@pytest.mark.anyio
async def test_an_export_given_to_remember_many_points_at_import_memories(tmp_path: Path) -> None:
    from agent_memory.vault.vault import Vault

    from conftest import mcp_client, tool_ok

    with Vault.init(tmp_path / "mcp-vault") as vault:
        vault.remember("A fact worth a backup")
        exported = vault.export_memories()
        async with mcp_client(vault) as client:
            result = await tool_ok(client, "remember_many", items=list(exported))
    assert result["results"][0]["error"].endswith(
        "It looks like an export's item: import_memories reads an export back.")


def test_the_version_show_prints_is_one_edit_and_forget_accept(vault_dir: Path) -> None:
    memory_id = run_cli("add", "Deploys happen on Fridays", vault=vault_dir).stdout.strip()
    shown = run_cli("show", memory_id, vault=vault_dir).stdout.splitlines()[2].split()
    assert shown[0] == "version" and len(shown[1]) == 12
    done = run_cli("edit", memory_id, "--append", "Not after 14:00.", "--expected-version", shown[1], vault=vault_dir)
    assert done.returncode == 0, done.stderr
    stale = run_cli("forget", memory_id, "--expected-version", shown[1], vault=vault_dir)  # the edit changed it
    assert stale.returncode == 1 and "changed on disk since you read it" in stale.stderr
    now = run_cli("show", memory_id, vault=vault_dir).stdout.splitlines()[2].split()[1]
    assert run_cli("forget", memory_id, "--expected-version", now, vault=vault_dir).returncode == 0


@pytest.mark.anyio
async def test_text_that_is_no_version_is_refused_as_such_over_mcp(tmp_path: Path) -> None:
    from agent_memory.vault.vault import Vault

    from conftest import mcp_client, tool_error

    with Vault.init(tmp_path / "mcp-vault") as vault:
        made = vault.remember("Deploys happen on Fridays")["memory"]
        before = (vault.root / made["path"]).read_bytes()
        async with mcp_client(vault) as client:
            said = await tool_error(client, "update_memory", memory_id=made["id"], append="More.",
                                    expected_version="abc")
        assert (vault.root / made["path"]).read_bytes() == before
    assert said == ("Error executing tool update_memory: 'abc' is not a version: expected_version takes the "
                    "version get_memory gives (64 hex characters, or its first 12 or more).")


def test_a_folder_or_a_file_that_is_no_note_is_named_as_such(notes: Path) -> None:
    (notes / "SOURCE.txt").write_text("Where these notes came from.\n")
    folder = run_cli("show", "en/Plugins", vault=notes, cwd=notes)
    assert folder.returncode == 1
    assert folder.stderr == ("Error: en/Plugins is a folder, not a note: `agent-memory list --path :/en/Plugins` lists "
                             "the notes in it.\n")
    from_inside = run_cli("forget", "Plugins", vault=notes, cwd=notes / "en")
    assert from_inside.stderr == folder.stderr and (notes / "en" / "Plugins" / "Slides.md").is_file()
    other = run_cli("show", "SOURCE.txt", vault=notes, cwd=notes)
    assert other.stderr == "Error: SOURCE.txt is not a note: only .md files in the vault are memories. Open it with " \
                           "another program.\n"
    hidden = run_cli("show", ".obsidian", vault=notes, cwd=notes)
    assert "not found" in hidden.stderr


def test_a_search_with_no_hit_names_the_filters_it_was_given(vault_dir: Path) -> None:
    run_cli("add", "Deploys happen on Fridays", "-t", "deploy", vault=vault_dir)
    plain = run_cli("search", "invoices", vault=vault_dir)
    assert plain.stdout == "Nothing matched. Try fewer or other words, or browse with `agent-memory list`.\n"
    filtered = run_cli("search", "deploys", "--where", "status=done", "--path", "2026", vault=vault_dir)
    assert filtered.returncode == 0
    assert filtered.stdout == ("Nothing matched. Try fewer or other words, drop a filter (--path, --where), or browse "
                               "with `agent-memory list`.\n")
    over_mcp = json.loads(run_cli("search", "deploys", "-n", "team", "--json", vault=vault_dir).stdout)["hint"]
    assert over_mcp == "Nothing matched. Try fewer or other words, drop a filter (namespace), or browse with list_memories."
