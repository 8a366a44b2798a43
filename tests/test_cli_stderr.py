"""What the CLI writes on stderr besides its errors: the library's warnings in the CLI's
form (``agent-memory: warning: ...``), and how far long work got: a bar on a terminal,
plain lines when stderr is piped, nothing under --json. Never on stdout."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from agent_memory.cli import output
from agent_memory.cli.output import PlainLines
from agent_memory.progress import Step

from conftest import run_cli, run_with_terminal_stderr

NO_REPOSITORY = "git.commit is on but the vault is not in a git repository; nothing is committed (git init in it to start)."


def commits_on_outside_git(root: Path) -> Path:
    """A vault whose approved settings say to commit each write, in no git repository:
    every write makes the library log a warning (once per open vault)."""
    assert run_cli("init", str(root)).returncode == 0
    (root / ".agent-memory.toml").write_text("[git]\ncommit = true\n")
    assert run_cli("trust", "git.commit", vault=root).returncode == 0
    return root


def warnings_in(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("agent-memory: warning: ")]


# --------------------------------------------------------------------------- the library's warnings


def test_a_library_warning_prints_once_on_stderr_in_the_cli_form(tmp_path: Path) -> None:
    root = commits_on_outside_git(tmp_path / "vault")
    done = run_cli("add", "Deploys happen on Fridays", vault=root)
    assert done.returncode == 0, done.stderr
    assert warnings_in(done.stderr) == [f"agent-memory: warning: {root}: {NO_REPOSITORY}"]
    assert len(done.stdout.split()) == 1  # stdout: the new id alone, for $(agent-memory add ...)


def test_under_json_the_warning_stays_on_stderr_and_stdout_is_json(tmp_path: Path) -> None:
    root = commits_on_outside_git(tmp_path / "vault")
    done = run_cli("add", "Deploys happen on Fridays", "--json", vault=root)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["memory"]["title"] == "Deploys happen on Fridays"
    assert warnings_in(done.stderr) == [f"agent-memory: warning: {root}: {NO_REPOSITORY}"]


def test_the_installed_command_prints_the_warning_once(tmp_path: Path) -> None:
    """A real process, where Python's last-resort handler would print a bare copy of a
    record nobody handled: the CLI's line replaces it, it does not come beside it."""
    root = commits_on_outside_git(tmp_path / "vault")
    done = run_cli("add", "Deploys happen on Fridays", vault=root, console_script=True)
    assert done.returncode == 0, done.stderr
    assert warnings_in(done.stderr) == [f"agent-memory: warning: {root}: {NO_REPOSITORY}"]
    assert done.stderr.count(NO_REPOSITORY) == 1


def test_a_warning_naming_a_path_cannot_send_terminal_escapes(tmp_path: Path) -> None:
    root = commits_on_outside_git(tmp_path / "vault\x1b]0;owned\x07")  # a folder name that retitles the window
    done = run_cli("add", "Deploys happen on Fridays", vault=root)
    assert done.returncode == 0, done.stderr
    assert warnings_in(done.stderr) == [f"agent-memory: warning: {tmp_path}/vault]0;owned: {NO_REPOSITORY}"]
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr


def test_the_handler_lasts_as_long_as_the_command(tmp_path: Path) -> None:
    """A program that runs the click group in process keeps its logging as it was."""
    library = logging.getLogger("agent_memory")
    before = list(library.handlers)
    root = commits_on_outside_git(tmp_path / "vault")
    assert run_cli("add", "Deploys happen on Fridays", vault=root).returncode == 0
    assert run_cli("show", "no-such-memory", vault=root).returncode == 1  # an error on the way out too
    assert library.handlers == before


def test_serve_leaves_its_log_to_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server logs on stderr in its own form (time, level, logger): the CLI adds no
    second copy of a library warning there."""
    import agent_memory.server.transport

    def run(*_args: object, **_kwargs: object) -> None:
        logging.getLogger("agent_memory.git").warning("a warning while serving")

    monkeypatch.setattr(agent_memory.server.transport, "run", run)
    run_cli("init", str(tmp_path / "vault"))
    done = run_cli("serve", vault=tmp_path / "vault")
    assert done.returncode == 0 and warnings_in(done.stderr) == []


def test_a_warning_during_a_bar_prints_above_it_not_into_it(tmp_path: Path) -> None:
    commits_on_outside_git(tmp_path / ".memory")  # the console script finds ./.memory
    source = tmp_path / "items.json"
    source.write_text(json.dumps([{"content": f"Fact number {n}"} for n in range(3)]))
    done, terminal = run_with_terminal_stderr("import", str(source), cwd=tmp_path)
    assert done.returncode == 0, terminal
    assert b"Importing memories" in terminal
    # The bar's line is cleared first (erase line), so the warning starts a line of its own.
    assert b"\x1b[2Kagent-memory: warning: " in terminal
    assert done.stdout.decode().startswith("Imported 3,")


# --------------------------------------------------------------------------- progress


class Ticks:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def steps_at(lines: PlainLines, clock: Ticks, timed: list[tuple[float, Step]]) -> None:
    for at, step in timed:
        clock.now = 100.0 + at
        lines(step)


def test_work_done_within_the_interval_prints_no_line(capsys: pytest.CaptureFixture[str]) -> None:
    clock = Ticks()
    lines = PlainLines(clock, every=3)
    steps_at(lines, clock, [(0.5, Step("indexing files", 500, 1038)), (1.0, Step("indexing files", 1000, 1038)),
                            (2.9, Step("indexing files", 1038, 1038))])
    lines.close()
    assert capsys.readouterr() == ("", "")


def test_long_work_prints_a_line_at_most_every_interval_and_the_final_count(capsys: pytest.CaptureFixture[str]) -> None:
    clock = Ticks()
    lines = PlainLines(clock, every=3)
    steps_at(lines, clock, [(1, Step("indexing files", 100, 1038)), (3.5, Step("indexing files", 400, 1038)),
                            (4, Step("indexing files", 500, 1038)), (6, Step("indexing files", 700, 1038)),
                            (7, Step("indexing files", 900, 1038)), (7.2, Step("indexing files", 1038, 1038))])
    lines.close()
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == ["indexing files: 400/1038", "indexing files: 900/1038", "indexing files: 1038/1038"]


def test_a_phase_that_printed_gets_its_last_count_when_the_next_begins(capsys: pytest.CaptureFixture[str]) -> None:
    """Counts without a total (``indexing files: 700``) too; a later phase keeps the pace."""
    clock = Ticks()
    lines = PlainLines(clock, every=3)
    steps_at(lines, clock, [(3, Step("reading the export", 500)), (4, Step("reading the export", 700)),
                            (4.5, Step("embedding memories", 1, 50)), (8, Step("embedding memories", 40, 50))])
    lines.close()  # the work ends before the last phase reached its total
    assert capsys.readouterr().err.splitlines() == [
        "reading the export: 500", "reading the export: 700", "embedding memories: 40/50"]


def test_a_closed_stderr_stops_the_lines_not_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """stderr piped into a program that exited: the library's loop must go on (a
    progress callable never raises), and no line is tried again."""

    class Gone:
        tries = 0

        def write(self, _text: str) -> int:
            Gone.tries += 1
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self) -> None:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stderr", Gone())
    clock = Ticks()
    lines = PlainLines(clock, every=0)
    steps_at(lines, clock, [(1, Step("indexing files", 1, 3)), (2, Step("indexing files", 2, 3)),
                            (3, Step("embedding memories", 3, 3))])
    lines.close()
    assert Gone.tries == 1


def test_a_piped_reindex_prints_plain_lines_on_stderr_and_its_result_on_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_cli("init", str(tmp_path / "vault"))
    for n in range(3):
        run_cli("add", f"Fact number {n}", vault=tmp_path / "vault")
    quick = run_cli("reindex", vault=tmp_path / "vault")
    assert (quick.returncode, quick.stdout, quick.stderr) == (0, "Indexed 3 files (0 expired moved to .trash/).\n", "")

    monkeypatch.setattr(output, "LINE_EVERY", 0.0)  # as if each step came after a long wait
    slow = run_cli("reindex", vault=tmp_path / "vault")
    assert slow.stdout == "Indexed 3 files (0 expired moved to .trash/).\n"
    assert slow.stderr == "indexing files: 3/3\n"
    as_json = run_cli("reindex", "--json", vault=tmp_path / "vault")
    assert json.loads(as_json.stdout)["added"] == 3 and as_json.stderr == ""


def test_a_piped_import_prints_plain_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_cli("init", str(tmp_path / "vault"))
    source = tmp_path / "items.json"
    source.write_text(json.dumps([{"content": f"Fact number {n}"} for n in range(4)]))
    monkeypatch.setattr(output, "LINE_EVERY", 0.0)
    done = run_cli("import", str(source), vault=tmp_path / "vault")
    assert done.returncode == 0, done.stderr
    assert done.stderr == "importing memories: 4/4\n"
    assert done.stdout.startswith("Imported 4,")
