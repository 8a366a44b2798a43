"""What the CLI writes on stderr besides its errors: how far long work got, a bar on a
terminal, plain lines when stderr is piped, nothing under --json. Never on stdout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_memory.cli import output
from agent_memory.cli.output import PlainLines
from agent_memory.progress import Step

from conftest import run_cli


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
