"""Paths as a person types them on the command line, the way git reads them: from the
current folder inside the vault, ``:/path`` from the vault root; a bare ``mv`` target
renames in place; two readings that both name a file are refused by a changing command
and named; a memory not found names where it was looked for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import obsidian_like, run_cli


@pytest.fixture
def obsidian(tmp_path: Path) -> Path:
    """An Obsidian-like vault: notes in folders, one name at two depths, a link to each."""
    root = obsidian_like(tmp_path / "notes", "See [[Slides]] and [[en/Plugins/Slides|the slides]].\n")
    (root / "Plugins").mkdir()
    (root / "Plugins" / "Canvas.md").write_text("A canvas at the vault root.\n")
    return root


def cli(cwd: Path, *args: str):
    return run_cli(*args, cwd=cwd)


def test_a_path_is_read_from_the_current_folder_inside_the_vault(obsidian: Path) -> None:
    done = cli(obsidian / "en", "show", "Plugins/Slides.md", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["path"] == "en/Plugins/Slides.md"
    # From a deeper folder, the file name alone; the vault-root form with :/
    assert json.loads(cli(obsidian / "en" / "Plugins", "show", "Slides.md", "--json").stdout)["path"] == \
        "en/Plugins/Slides.md"
    assert json.loads(cli(obsidian / "en", "show", ":/Plugins/Canvas.md", "--json").stdout)["path"] == \
        "Plugins/Canvas.md"


def test_a_vault_relative_path_still_works_when_the_current_folder_has_no_such_file(obsidian: Path) -> None:
    done = cli(obsidian / "en", "show", "Plugins/Canvas.md", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["path"] == "Plugins/Canvas.md"


def test_not_found_says_where_it_looked(obsidian: Path) -> None:
    done = cli(obsidian / "en", "show", "Plugins/Nope.md")
    assert done.returncode == 1
    assert "en/Plugins/Nope.md from the current folder" in done.stderr
    assert f"Plugins/Nope.md from the vault root {obsidian}" in done.stderr


def test_a_changing_command_refuses_two_readings_and_names_both(obsidian: Path) -> None:
    (obsidian / "en" / "Plugins" / "Canvas.md").write_text("A canvas under en/.\n")
    before = {p: p.read_bytes() for p in obsidian.rglob("*.md")}
    done = cli(obsidian / "en", "forget", "Plugins/Canvas.md")
    assert done.returncode == 1
    assert "en/Plugins/Canvas.md" in done.stderr and ":/Plugins/Canvas.md" in done.stderr
    assert {p: p.read_bytes() for p in obsidian.rglob("*.md")} == before
    # A command that only reads takes the reading from here, as git does.
    assert json.loads(cli(obsidian / "en", "show", "Plugins/Canvas.md", "--json").stdout)["path"] == \
        "en/Plugins/Canvas.md"
    # Saying which one goes through.
    done = cli(obsidian / "en", "forget", ":/Plugins/Canvas.md")
    assert done.returncode == 0, done.stderr
    assert not (obsidian / "Plugins" / "Canvas.md").exists() and (obsidian / "en/Plugins/Canvas.md").exists()


def test_mv_with_a_bare_name_renames_in_place(obsidian: Path) -> None:
    done = cli(obsidian, "mv", "Slides", "Presentations")
    assert done.returncode == 0, done.stderr
    assert (obsidian / "en" / "Plugins" / "Presentations.md").is_file()
    assert not (obsidian / "Presentations.md").exists()
    assert (obsidian / "en" / "Home.md").read_text() == \
        "See [[Presentations]] and [[en/Plugins/Presentations|the slides]].\n"


def test_mv_target_with_a_folder_is_from_the_current_folder_or_the_root(obsidian: Path) -> None:
    (obsidian / "en" / "Archive").mkdir()
    done = cli(obsidian / "en", "mv", "Plugins/Slides.md", "Archive/")
    assert done.returncode == 0, done.stderr
    assert (obsidian / "en" / "Archive" / "Slides.md").is_file()
    done = cli(obsidian / "en" / "Archive", "mv", "Slides.md", ":/Plugins/")
    assert done.returncode == 0, done.stderr
    assert (obsidian / "Plugins" / "Slides.md").is_file()


def test_mv_target_whose_two_readings_both_exist_is_refused(obsidian: Path) -> None:
    done = cli(obsidian / "en", "mv", ":/Plugins/Canvas.md", "Plugins/Board.md")
    assert done.returncode == 1
    assert "en/Plugins/Board.md" in done.stderr and ":/Plugins/Board.md" in done.stderr
    assert (obsidian / "Plugins" / "Canvas.md").is_file()


def test_list_path_is_a_folder_from_here(obsidian: Path) -> None:
    done = cli(obsidian / "en", "list", "--path", "Plugins", "--json")
    assert [m["path"] for m in json.loads(done.stdout)["memories"]] == ["en/Plugins/Slides.md"]
    done = cli(obsidian / "en", "list", "--path", ":/Plugins", "--json")
    assert [m["path"] for m in json.loads(done.stdout)["memories"]] == ["Plugins/Canvas.md"]


def test_forgetting_a_forgotten_note_from_a_subfolder_says_how_to_restore_it(obsidian: Path) -> None:
    assert cli(obsidian / "en", "forget", "Plugins/Slides.md").returncode == 0
    again = cli(obsidian / "en", "forget", "Plugins/Slides.md")
    assert again.returncode == 1
    assert "en/Plugins/Slides.md was forgotten already" in again.stderr
    assert "`agent-memory restore :/en/Plugins/Slides.md` brings it back" in again.stderr
    assert cli(obsidian / "Plugins", "restore", ":/en/Plugins/Slides.md").returncode == 0
    assert (obsidian / "en" / "Plugins" / "Slides.md").is_file()


def test_restore_takes_the_old_path_from_here(obsidian: Path) -> None:
    assert cli(obsidian / "en", "forget", "Plugins/Slides.md").returncode == 0
    done = cli(obsidian / "en", "restore", "Plugins/Slides.md")
    assert done.returncode == 0, done.stderr
    assert (obsidian / "en" / "Plugins" / "Slides.md").is_file()


def test_ids_and_paths_outside_the_vault_are_as_typed(obsidian: Path, tmp_path: Path) -> None:
    added = cli(obsidian / "en", "add", "A fact about deploys").stdout.strip()
    shown = json.loads(cli(obsidian / "en" / "Plugins", "show", added, "--json").stdout)
    assert shown["id"] == added
    done = run_cli("show", "en/Plugins/Slides.md", "--json", vault=obsidian, cwd=tmp_path)
    assert json.loads(done.stdout)["path"] == "en/Plugins/Slides.md"
