"""What the CLI's human output shows where the library reports more than the common
case: relations, problems and conflict markers in ``show``, the editor for ``edit``,
the trash list of ``restore``, problems in ``reindex`` and ``stats``, what ``gc``
removed, the cap on ``doctor``'s items."""

from __future__ import annotations

import json
import re
from pathlib import Path

from agent_memory.vault.vault import Vault

from conftest import run_cli



def test_show_names_relations_problems_and_conflict_markers(vault: Vault) -> None:
    a = vault.remember("ACME prefers Friday deploys", title="ACME deploys")["memory"]
    b = vault.remember("ACME billing runs on Stripe", title="ACME billing")["memory"]
    vault.link(a["id"], b["id"])
    (vault.root / "odd.md").write_text("---\ntags: [unclosed\n---\nA body people still read.\n")
    (vault.root / "merged.md").write_text("<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> other\n")
    vault.reconcile()
    out = run_cli("show", a["id"], vault=vault.root)
    assert out.returncode == 0, out.stderr
    assert "   related_to: [[acme-billing]]" in out.stdout
    odd = run_cli("show", "odd.md", vault=vault.root).stdout
    assert "   problem: broken YAML" in odd and "A body people still read." in odd
    merged = run_cli("show", "merged.md", vault=vault.root).stdout
    assert "this file holds git conflict markers; resolve them by hand" in merged


def test_edit_without_changes_opens_the_editor_on_the_file_and_the_index_follows(vault: Vault) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    vault.close()
    editor = "sed -i s/Sundays/Mondays/"  # an editor that saves a change and exits
    done = run_cli("edit", made["id"], vault=vault.root, env={"EDITOR": editor, "VISUAL": editor})
    assert done.returncode == 0, done.stderr
    assert f"Edited {made['id']}" in done.stderr
    assert "resets on Mondays" in (vault.root / made["path"]).read_text()
    found = run_cli("--json", "search", "Mondays", vault=vault.root)
    assert [h["id"] for h in json.loads(found.stdout)["hits"]] == [made["id"]]


def test_restore_with_no_argument_lists_what_the_trash_can_give_back(vault: Vault) -> None:
    empty = run_cli("restore", vault=vault.root)
    assert empty.returncode == 0 and empty.stdout.strip() == "Nothing in the trash that the tool put there."
    made = vault.remember("The staging database resets on Sundays")["memory"]
    trashed = vault.forget(made["id"])["trashed_to"]
    listed = run_cli("restore", vault=vault.root)
    assert listed.returncode == 0
    [line] = listed.stdout.splitlines()
    assert f"forgotten  {trashed}  (from {made['path']})" in line


def test_reindex_and_stats_name_the_files_with_problems(vault: Vault) -> None:
    vault.remember("A healthy fact")
    (vault.root / "odd.md").write_text("---\ntags: [unclosed\n---\nbody\n")
    (vault.root / "merged.md").write_text("<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> other\n")
    original = next(vault.root.glob("20*/*/*/*.md"))
    (vault.root / "copy.md").write_bytes(original.read_bytes())
    vault.close()
    reindexed = run_cli("reindex", vault=vault.root)
    assert reindexed.returncode == 0, reindexed.stderr
    assert "  odd.md: broken YAML" in reindexed.stdout
    stats = run_cli("stats", vault=vault.root).stdout
    assert "problem    odd.md: broken YAML" in stats
    assert "conflict   merged.md" in stats
    assert re.search(r"duplicate  \S+: .*copy\.md", stats)


def test_import_of_a_file_that_is_not_there_is_one_line(vault: Vault, tmp_path: Path) -> None:
    done = run_cli("import", str(tmp_path / "nowhere.json"), vault=vault.root)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == f"Error: Cannot read {tmp_path / 'nowhere.json'}: No such file or directory."


def test_gc_lists_each_file_it_removed(vault: Vault, clock) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    trashed = vault.forget(made["id"])["trashed_to"]
    clock.advance(days=40)
    vault.close()
    done = run_cli("gc", "--older-than", "0", vault=vault.root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"removed {trashed}"
    assert not (vault.root / trashed).exists()


def test_doctor_shows_the_first_items_of_a_check_and_says_how_many_more(vault: Vault) -> None:
    from agent_memory.cli.vault import SHOWN

    for n in range(SHOWN + 3):
        (vault.root / f"broken-{n:02}.md").write_text("---\ntags: [unclosed\n---\nbody\n")
    done = run_cli("doctor", vault=vault.root)
    assert done.returncode == 1
    assert "       … and 3 more (`agent-memory doctor --all` lists them all)" in done.stdout
    assert sum(1 for line in done.stdout.splitlines() if "broken YAML" in line) == SHOWN
    every = run_cli("doctor", "--all", vault=vault.root)
    assert sum(1 for line in every.stdout.splitlines() if "broken YAML" in line) == SHOWN + 3
