"""Progress on long work through the library's progress interface: the first index of
a vault, reindex, import, export and gc. A bar on a terminal, plain lines on stderr
when piped, nothing extra under --json; the library reports to whoever asks and the
stdio server's stdout holds only the protocol."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_memory.cli import output
from agent_memory.progress import Step
from agent_memory.vault.vault import Vault

from conftest import run_cli, run_with_terminal_stderr


def hand_notes(root: Path, n: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / ".obsidian").mkdir(exist_ok=True)
    for i in range(n):
        (root / f"note {i:04}.md").write_text(f"Note number {i} about deploys.\n")
    return root


def test_the_first_open_reports_the_first_index_through_progress(tmp_path: Path) -> None:
    root = hand_notes(tmp_path / "notes", 1200)
    steps: list[Step] = []
    with Vault(root, progress=steps.append) as vault:
        assert vault.list(limit=1)["total"] == 1200
    assert steps[-1] == Step("indexing files", 1200, 1200)
    assert [s.done for s in steps] == list(range(60, 1201, 60))  # about twenty steps: the bar moves from the start
    steps.clear()
    (root / "note 0000.md").write_text("Changed by hand.\n")
    with Vault(root, progress=steps.append):
        pass
    assert steps == [Step("indexing changed files", 1, 1)]  # later opens: only what changed


def test_a_piped_first_index_export_and_gc_print_plain_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = hand_notes(tmp_path / "notes", 3)
    monkeypatch.setattr(output, "LINE_EVERY", 0.0)  # as if each step came after a long wait
    listed = run_cli("list", vault=root)
    assert listed.returncode == 0 and listed.stderr == "indexing files: 3/3\n"
    assert "indexing" not in listed.stdout
    exported = run_cli("export", vault=root)
    assert exported.stderr == "exporting memories: 3/3\n" and len(json.loads(exported.stdout)) == 3
    with Vault(root) as vault:
        vault.forget("note 0001.md")
    emptied = run_cli("gc", "--older-than", "0", vault=root)
    assert emptied.stderr == "emptying the trash: 1/1\n" and emptied.stdout.startswith("removed ")


def test_under_json_nothing_extra_is_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = hand_notes(tmp_path / "notes", 3)
    monkeypatch.setattr(output, "LINE_EVERY", 0.0)
    listed = run_cli("list", "--json", vault=root)
    assert listed.stderr == "" and json.loads(listed.stdout)["total"] == 3
    emptied = run_cli("gc", "--json", vault=root)
    assert emptied.stderr == "" and json.loads(emptied.stdout)["removed"] == []


def test_the_first_index_shows_a_bar_on_a_terminal(tmp_path: Path) -> None:
    root = hand_notes(tmp_path / "notes", 1200)
    done, terminal = run_with_terminal_stderr("list", "--limit", "1", "--dir", str(root), cwd=tmp_path)
    assert done.returncode == 0, terminal
    assert b"Indexing files" in terminal and b"1200/1200" in terminal  # the phase, done/total
    assert b"Indexing" not in done.stdout and done.stdout.decode().rstrip().endswith("1-1 of 1200; next: --offset 1")
    done, terminal = run_with_terminal_stderr("export", "-o", str(tmp_path / "out.json"), "--dir", str(root),
                                              cwd=tmp_path)
    assert done.returncode == 0, terminal
    assert b"Exporting memories" in terminal and b"Exported 1200 memories (json) to" in terminal
