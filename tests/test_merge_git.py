"""The merge driver with real git: a bare remote, two clones that each ran
`agent-memory git setup`, edits on both sides, `git pull` (a merge or a rebase) that
runs the driver as git runs it (through sh, as a subprocess), and what a person finds
afterwards: the merged file, git's verdict, `doctor`."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import Clock, run_cli

from agent_memory.note.parse import Note, parse
from agent_memory.cli.app import cli
from agent_memory.vault.vault import Vault

pytestmark = pytest.mark.usefixtures("git_isolated")

UTC = dt.UTC




def git(repo: Path, *args: str, check: bool = True, who: str = "Ada") -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", f"user.name={who}", "-c", f"user.email={who.lower()}@example.com",
         "-c", "init.defaultBranch=main", "-c", "pull.rebase=false", *args],
        capture_output=True, text=True, check=False,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stdout}{done.stderr}")
    return done


def setup_driver(vault: Path) -> dict:
    done = CliRunner().invoke(cli, ["--dir", str(vault), "git", "setup", "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.output)


class Team:
    """A bare remote and two clones, Alice's and Bob's, each a vault at the repository's
    root with the driver set up; Alice's first commit holds the vault's .gitignore and
    .gitattributes."""

    def __init__(self, root: Path) -> None:
        self.remote = root / "remote.git"
        git(root, "init", "-q", "--bare", str(self.remote))
        self.alice = root / "alice"
        git(root, "clone", "-q", str(self.remote), str(self.alice))
        Vault.init(self.alice).close()
        setup_driver(self.alice)
        self.commit(self.alice, "vault")
        git(self.alice, "push", "-q", "origin", "HEAD:main")
        self.bob = root / "bob"
        git(root, "clone", "-q", str(self.remote), str(self.bob))
        setup_driver(self.bob)

    def commit(self, repo: Path, message: str) -> None:
        git(repo, "add", "-A", ".")
        git(repo, "commit", "-q", "-m", message)

    def share(self, repo: Path, message: str) -> None:
        """Commit in ``repo`` and push."""
        self.commit(repo, message)
        git(repo, "push", "-q", "origin", "HEAD:main")

    def pull(self, repo: Path, *options: str) -> subprocess.CompletedProcess[str]:
        return git(repo, "pull", "-q", *options, "origin", "main", check=False, who="Bob")


@pytest.fixture
def team(tmp_path: Path) -> Team:
    return Team(tmp_path)


def vault_at(repo: Path, hour: int) -> Vault:
    return Vault(repo, clock=Clock(dt.datetime(2026, 7, 20, hour, 0, tzinfo=UTC)))


def shared_memory(team: Team, content: str = "ACME deploys on Fridays.\nNever after 16:00.\nAlways with a rollback plan.\nAsk Priya first.",
                  tags: tuple[str, ...] = ("acme", "deploy")) -> str:
    """A memory Alice writes and pushes and Bob pulls; its path."""
    with vault_at(team.alice, 9) as vault:
        path = vault.remember(content, tags=list(tags), title="ACME deploys")["memory"]["path"]
    team.share(team.alice, "remember: ACME deploys")
    assert team.pull(team.bob).returncode == 0
    return path


def committed_on_both_clones(team: Team, path: str, alice: dict, bob: dict) -> None:
    """Alice updates ``path`` (at 10:00) and pushes; Bob updates it too (at 11:00) and
    commits, not pulled yet."""
    with vault_at(team.alice, 10) as vault:
        vault.update(path, **alice)
    team.share(team.alice, "update")
    with vault_at(team.bob, 11) as vault:
        vault.update(path, **bob)
    team.commit(team.bob, "update")


def edited_on_both_clones(team: Team, path: str, alice: dict, bob: dict) -> subprocess.CompletedProcess[str]:
    """``committed_on_both_clones``, then Bob pulls: the pull."""
    committed_on_both_clones(team, path, alice, bob)
    return team.pull(team.bob)


def read(repo: Path, path: str) -> Note:
    return parse((repo / path).read_bytes(), path)


def tagged_on_both_clones(team: Team) -> str:
    """One memory that Alice tags "friday" (shared) and Bob tags "ops" (committed, not pulled yet)."""
    path = shared_memory(team)
    committed_on_both_clones(team, path, {"add_tags": ["friday"]}, {"add_tags": ["ops"]})
    return path


def test_tags_added_on_both_clones_merge_cleanly_with_the_later_updated(team: Team) -> None:
    path = tagged_on_both_clones(team)
    pulled = team.pull(team.bob)
    assert pulled.returncode == 0, pulled.stderr
    merged = read(team.bob, path)
    assert set(merged.tags) == {"acme", "deploy", "friday", "ops"}
    assert merged.updated == "2026-07-20T11:00:00Z" and merged.created == "2026-07-20T09:00:00Z"
    assert not merged.conflict and not merged.problems
    assert git(team.bob, "status", "--porcelain").stdout == ""  # a merge commit, nothing left to resolve
    assert len(git(team.bob, "log", "--format=%H", "-1", "--merges").stdout.split()) == 1


def test_a_tag_removed_on_one_clone_stays_removed(team: Team) -> None:
    path = shared_memory(team, tags=("acme", "deploy", "legacy"))
    assert edited_on_both_clones(team, path, {"remove_tags": ["legacy"]}, {"add_tags": ["ops"]}).returncode == 0
    assert read(team.bob, path).tags == ["acme", "deploy", "ops"]


def test_different_body_lines_merge_cleanly(team: Team) -> None:
    path = shared_memory(team)
    pulled = edited_on_both_clones(team, path, {"replace_old": "Never after 16:00.", "replace_new": "Never after 15:00."},
                                   {"replace_old": "Ask Priya first.", "replace_new": "Ask Priya or Sam first."})
    assert pulled.returncode == 0
    body = read(team.bob, path).body
    assert "Never after 15:00." in body and "Ask Priya or Sam first." in body and "16:00" not in body


def test_both_clones_appending_keep_both_lines(team: Team) -> None:
    path = shared_memory(team)
    pulled = edited_on_both_clones(team, path, {"append": "Alice: confirmed for July."}, {"append": "Bob: the CFO agrees."})
    assert pulled.returncode == 0
    body = read(team.bob, path).body
    assert body.endswith("Ask Priya first.\nBob: the CFO agrees.\nAlice: confirmed for July.\n")


def test_the_same_line_edited_differently_is_a_conflict_with_both_texts(team: Team) -> None:
    path = shared_memory(team)
    memory_id = read(team.alice, path).id
    pulled = edited_on_both_clones(
        team, path, {"replace_old": "Never after 16:00.", "replace_new": "Never after 15:00."},
        {"replace_old": "Never after 16:00.", "replace_new": "Never after 17:00.", "add_tags": ["ops"]})
    assert pulled.returncode != 0 and "CONFLICT" in pulled.stdout + pulled.stderr
    assert "agent-memory merge-file" in pulled.stderr  # the driver says what conflicted
    text = (team.bob / path).read_text()
    assert "Never after 17:00." in text and "Never after 15:00." in text
    assert "<<<<<<< ours" in text and "\n=======\n" in text and ">>>>>>> theirs" in text
    merged = read(team.bob, path)
    assert merged.conflict and merged.id == memory_id and "ops" in merged.tags  # the keys still merged
    assert "U" in git(team.bob, "status", "--porcelain", path).stdout[:2]  # git calls it unmerged
    doctor = run_cli("--json", "doctor", vault=team.bob)
    assert doctor.returncode == 1
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["conflict markers"]["items"] == [path]


def test_a_front_matter_value_changed_on_both_sides_is_a_conflict_doctor_flags(team: Team) -> None:
    path = shared_memory(team)
    memory_id = read(team.alice, path).id
    pulled = edited_on_both_clones(team, path, {"title": "ACME deploys on Fridays"},
                                   {"title": "ACME: Friday deploys", "add_tags": ["ops"]})
    assert pulled.returncode != 0
    text = (team.bob / path).read_text()
    assert "<<<<<<< ours\ntitle: \"ACME: Friday deploys\"\n=======\ntitle: ACME deploys on Fridays\n>>>>>>> theirs\n" in text
    merged = read(team.bob, path)
    assert merged.conflict and merged.id == memory_id and merged.title == "ACME: Friday deploys"
    assert set(merged.tags) == {"acme", "deploy", "ops"}
    shown = run_cli("--json", "show", memory_id, vault=team.bob)
    assert shown.returncode == 0 and json.loads(shown.stdout)["conflict"] is True
    doctor = json.loads(run_cli("--json", "doctor", vault=team.bob).stdout)
    assert {c["name"]: c for c in doctor["checks"]}["conflict markers"]["items"] == [path]


HAND_WRITTEN = """---
# Priya's page, kept by hand
owner: priya
tags:
  - people
  - billing   # since 2025
created: 2026-07-01T09:00:00+02:00
updated: 2026-07-01T09:00:00Z
status: active
---
Priya owns billing.
"""


def test_a_hand_written_note_keeps_its_unknown_keys_comments_and_order(team: Team) -> None:
    (team.alice / "people").mkdir()
    (team.alice / "people" / "priya.md").write_text(HAND_WRITTEN)
    team.share(team.alice, "priya")
    assert team.pull(team.bob).returncode == 0
    path = team.alice / "people" / "priya.md"
    path.write_text(HAND_WRITTEN.replace("  - billing   # since 2025\n", "  - billing   # since 2025\n  - finance\n")
                    .replace("updated: 2026-07-01T09:00:00Z", "updated: 2026-07-03T09:00:00Z"))
    team.share(team.alice, "priya: finance")
    (team.bob / "people" / "priya.md").write_text(
        HAND_WRITTEN.replace("created: 2026-07-01T09:00:00+02:00", "created: 2026-06-30T08:00:00Z")
        .replace("updated: 2026-07-01T09:00:00Z", "updated: 2026-07-02T09:00:00Z")
        .replace("status: active\n", "status: active\npriority: high\n"))
    team.commit(team.bob, "priya: priority")
    assert team.pull(team.bob).returncode == 0
    assert (team.bob / "people" / "priya.md").read_text() == """---
# Priya's page, kept by hand
owner: priya
tags:
  - people
  - billing   # since 2025
  - finance
created: 2026-06-30T08:00:00Z
updated: 2026-07-03T09:00:00Z
status: active
priority: high
---
Priya owns billing.
"""


def test_a_rebase_runs_the_driver_too(team: Team) -> None:
    path = tagged_on_both_clones(team)
    pulled = team.pull(team.bob, "--rebase")
    assert pulled.returncode == 0, pulled.stderr
    assert set(read(team.bob, path).tags) == {"acme", "deploy", "friday", "ops"}
    assert git(team.bob, "log", "--merges", "--format=%H").stdout == ""  # replayed, no merge commit


def test_a_plain_markdown_file_is_merged_by_git_whole(team: Team) -> None:
    (team.alice / "notes.md").write_text("one\ntwo\nthree\nfour\n")
    team.share(team.alice, "notes")
    assert team.pull(team.bob).returncode == 0
    (team.alice / "notes.md").write_text("ONE\ntwo\nthree\nfour\n")
    team.share(team.alice, "one")
    (team.bob / "notes.md").write_text("one\ntwo\nthree\nFOUR\n")
    team.commit(team.bob, "four")
    assert team.pull(team.bob).returncode == 0
    assert (team.bob / "notes.md").read_text() == "ONE\ntwo\nthree\nFOUR\n"


def test_a_side_with_broken_front_matter_loses_nothing(team: Team) -> None:
    path = shared_memory(team)
    original = (team.alice / path).read_text()
    (team.alice / path).write_text(original.replace("tags: [acme, deploy]", "tags: [acme, deploy"))  # broken YAML
    team.share(team.alice, "broken by hand")
    with vault_at(team.bob, 11) as vault:
        vault.update(path, replace_old="Ask Priya first.", replace_new="Ask Sam first.")
    team.commit(team.bob, "update: Sam")
    pulled = team.pull(team.bob)
    text = (team.bob / path).read_text()
    # git's own line merge of the whole file: the two edits touch different lines
    assert pulled.returncode == 0, pulled.stderr
    assert "tags: [acme, deploy\n" in text and "Ask Sam first." in text


def test_a_driver_that_cannot_run_falls_back_to_gits_merge_not_to_one_side(team: Team) -> None:
    path = shared_memory(team)
    driver = git(team.bob, "config", "merge.agent-memory.driver").stdout.strip()
    assert f"; {sys.executable} -m agent_memory merge-file %O %A %B %L %P" in driver
    git(team.bob, "config", "merge.agent-memory.driver", driver.replace(sys.executable, "/nonexistent/python3", 1))
    pulled = edited_on_both_clones(
        team, path, {"replace_old": "Never after 16:00.", "replace_new": "Never after 15:00.", "add_tags": ["friday"]},
        {"replace_old": "Never after 16:00.", "replace_new": "Never after 17:00.", "add_tags": ["ops"]})
    assert pulled.returncode != 0
    text = (team.bob / path).read_text()
    assert "Never after 15:00." in text and "Never after 17:00." in text and "friday" in text and "ops" in text
    assert "<<<<<<< ours" in text and ">>>>>>> theirs" in text


def test_a_driver_that_fails_without_writing_falls_back_even_when_the_note_shows_a_marker_line(team: Team) -> None:
    """A note about merging may hold a line that starts with <<<<<<< already: a driver
    that exits 1 without writing (a broken install) must still give git's merge, not
    leave our side alone as if the driver had written its conflicts."""
    content = "How to read a conflict:\n<<<<<<< marks our side\nNever after 16:00.\nAsk Priya first."
    path = shared_memory(team, content=content)
    driver = git(team.bob, "config", "merge.agent-memory.driver").stdout.strip()
    git(team.bob, "config", "merge.agent-memory.driver", driver.replace(f"{sys.executable} -m agent_memory", "false", 1))
    pulled = edited_on_both_clones(team, path, {"replace_old": "Never after 16:00.", "replace_new": "Never after 15:00."},
                                   {"replace_old": "Never after 16:00.", "replace_new": "Never after 17:00."})
    assert pulled.returncode != 0
    text = (team.bob / path).read_text()
    assert "Never after 15:00." in text and "Never after 17:00." in text  # both sides, between git's markers
    assert "<<<<<<< ours" in text and ">>>>>>> theirs" in text


def test_a_clone_without_setup_uses_gits_own_merge(team: Team) -> None:
    path = shared_memory(team)
    git(team.bob, "config", "--remove-section", "merge.agent-memory")
    pulled = edited_on_both_clones(team, path, {"add_tags": ["friday"]}, {"add_tags": ["ops"]})
    assert pulled.returncode != 0  # the tags line and the updated line conflict, line by line
    text = (team.bob / path).read_text()
    assert "friday" in text and "ops" in text and "agent-memory merge-file" not in pulled.stderr


def test_the_same_memory_written_on_both_clones_is_kept_once(team: Team) -> None:
    with vault_at(team.alice, 9) as vault:
        first = vault.remember("Deploys are frozen in August.", tags=["deploy"], title="Deploy freeze")["memory"]
    team.share(team.alice, "remember")
    with vault_at(team.bob, 10) as vault:
        second = vault.remember("Deploys are frozen in August.", tags=["freeze"], title="Deploy freeze")["memory"]
    team.commit(team.bob, "remember")
    assert first["path"] == second["path"] and first["id"] != second["id"]
    pulled = team.pull(team.bob)
    assert pulled.returncode == 0, pulled.stderr
    kept = read(team.bob, first["path"])
    assert kept.id == first["id"]  # the earlier created owns the id (SPEC §2)
    assert kept.created == "2026-07-20T09:00:00Z" and kept.updated == "2026-07-20T10:00:00Z"
    assert set(kept.tags) == {"deploy", "freeze"} and not kept.conflict


def test_two_memories_added_at_one_path_are_both_kept(team: Team) -> None:
    with vault_at(team.alice, 9) as vault:
        first = vault.remember("Deploys are frozen in August.", title="Deploy freeze")["memory"]
    team.share(team.alice, "remember")
    with vault_at(team.bob, 10) as vault:
        second = vault.remember("The freeze ends on September 2.", title="Deploy freeze")["memory"]
    team.commit(team.bob, "remember")
    assert first["path"] == second["path"]
    path = first["path"]
    pulled = team.pull(team.bob)
    assert pulled.returncode != 0 and "add/add" in pulled.stdout + pulled.stderr
    text = (team.bob / path).read_text()
    assert text.startswith("<<<<<<< ours\n---\nid: " + second["id"])
    assert "Deploys are frozen in August." in text and "The freeze ends on September 2." in text
    merged = read(team.bob, path)
    assert merged.conflict and merged.id == second["id"]
    # The README's recipe: theirs as <slug>-2.md, ours back in place; both memories stay.
    other = path.removesuffix(".md") + "-2.md"
    (team.bob / other).write_bytes(git(team.bob, "show", f":3:{path}").stdout.encode())
    git(team.bob, "checkout", "--ours", "--", path)
    team.commit(team.bob, "keep both")
    assert read(team.bob, path).id == second["id"] and read(team.bob, other).id == first["id"]
