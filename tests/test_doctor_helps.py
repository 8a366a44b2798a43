"""``doctor`` on a vault a person lives in: broken note links apart from missing
attachments, grouped by the note that holds them, the first few listed and all with
``--all``; the index called out of sync only when no command would catch up by itself;
exit 0 when nothing needs attention (warnings included), 1 when something does."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_memory.cli.vault import SHOWN
from agent_memory.watch import vouch
from agent_memory.watch.watcher import Watcher
from agent_memory.vault.vault import Vault
from tests.conftest import run_cli
from tests.test_sync import DEADLINE, hand_note, wait_until
from tests.test_vouch import edit_unseen, vouches


def checks_of(done) -> dict:
    return {c["name"]: c for c in json.loads(done.stdout)["checks"]}


def test_missing_attachments_are_a_warning_apart_from_broken_note_links(vault: Vault) -> None:
    (vault.root / "Home.md").write_text("![[diagram.png]] ![[Document.pdf#height=400]] [[Version 1.2]]\n")
    (vault.root / "Version 1.2.md").write_text("Release notes.\n")
    done = run_cli("doctor", vault=vault.root)
    assert done.returncode == 0, done.stdout  # attachments missing: worth a look, no problem
    assert "[warn] missing attachments: 2 links in 1 note point to attachments" in done.stdout
    assert "[  ok] broken links: no link points to a missing note" in done.stdout
    (vault.root / "Version 1.2.md").rename(vault.root / "Version 1.3.md")  # a rename by hand breaks a link
    done = run_cli("--json", "doctor", vault=vault.root)
    assert done.returncode == 1
    checks = checks_of(done)
    assert checks["broken links"]["groups"] == {"Home.md": ["Home.md: links_to -> [[Version 1.2]]"]}
    assert checks["missing attachments"]["ok"] and checks["missing attachments"]["items"] == [
        "Home.md: links_to -> [[diagram.png]]", "Home.md: links_to -> [[Document.pdf]]"]


def test_broken_links_are_grouped_by_note_counted_and_all_listed_with_all(vault: Vault) -> None:
    for n in range(SHOWN + 3):
        (vault.root / f"note {n:02}.md").write_text(f"See [[gone {n} a]] and [[gone {n} b]].\n")
    done = run_cli("doctor", vault=vault.root)
    assert done.returncode == 1
    assert f"broken links: {2 * (SHOWN + 3)} links in {SHOWN + 3} notes point to no note." in done.stdout
    lines = done.stdout.splitlines()
    first = lines.index("       note 00.md")
    assert lines[first + 1:first + 3] == ["         [[gone 0 a]]", "         [[gone 0 b]]"]
    assert "note 12.md" not in done.stdout
    assert "… and 3 more notes (`agent-memory doctor --all` lists them all)" in done.stdout
    every = run_cli("doctor", "--all", vault=vault.root).stdout
    assert all(f"       note {n:02}.md" in every for n in range(SHOWN + 3)) and "more notes" not in every
    checks = sum(line.startswith("[") for line in done.stdout.splitlines())
    assert done.stdout.rstrip().endswith(f"1 of {checks} checks failed: broken links.")


def test_a_hand_edit_without_a_watcher_is_no_problem(vault: Vault) -> None:
    vault.remember("The VPN needs the hardware key")
    (vault.root / "hand.md").write_text("Written by hand while nothing watched.\n")
    done = run_cli("doctor", vault=vault.root)
    assert done.returncode == 0, done.stdout
    assert "[  ok] index: 1 file changed since the last index: the next command folds it in by itself." in done.stdout
    assert "out of sync" not in done.stdout.lower()


def test_out_of_sync_when_a_watcher_vouches_for_an_index_that_differs(
    vault: Vault, watch: Callable[..., Watcher], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(vouch, "COOKIE_WAIT", DEADLINE)
    (vault.root / "plants.md").write_text(hand_note("Water the fern on Mondays."))
    watch(sweep_interval=3600)
    wait_until(lambda: vouches(vault), "the watcher vouches for the index")
    edit_unseen(vault, "plants.md", tmp_path / "outside", hand_note("Water the fern on Thursdays."))
    done = run_cli("doctor", vault=vault.root)
    assert done.returncode == 1
    [line] = [ln for ln in done.stdout.splitlines() if ln.startswith("[fail] index:")]
    assert "Out of sync: 1 file differs from the index" in line and "commands will not catch up by themselves" in line
    assert "stale: plants.md" in done.stdout
