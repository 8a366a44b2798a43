"""Dates are never invented: a tool edit of a person's note adds only the keys it names,
and a note without ``created``/``updated`` takes its dates from git's author dates when
the vault is a repository (renames followed, shallow clones said), else from the file."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, run_cli

AUTHOR = {"GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.com",
          "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.com"}
HAND = "# Priya\n\nPriya owns billing.\n"


@pytest.fixture(autouse=True)
def isolated_git(git_isolated: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")
    for name, value in AUTHOR.items():
        monkeypatch.setenv(name, value)


def git(repo: Path, *args: str, date: str | None = None) -> str:
    env = dict(os.environ)
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


def commit_all(repo: Path, message: str, date: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message, date=date)


def hand_repo(path: Path) -> Path:
    """A vault in git whose person wrote people/priya.md in 2020 and edited it in 2021."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    Vault.init(path).close()
    (path / "people").mkdir()
    (path / "people" / "priya.md").write_text(HAND)
    commit_all(path, "priya", "2020-01-02T10:00:00+02:00")
    (path / "people" / "priya.md").write_text(HAND + "Ask her before changing invoices.\n")
    commit_all(path, "priya, more", "2021-03-04T05:06:07Z")
    return path


def dates(vault: Vault, rel: str) -> tuple[str, str]:
    found = vault.get(rel)
    return found["created"], found["updated"]


# --------------------------------------------------------------------------- tool edits add only what they name


def test_a_tag_edit_on_a_hand_note_adds_only_tags(tmp_path: Path) -> None:
    with Vault.init(tmp_path / "v") as vault:
        note = tmp_path / "v" / "people" / "priya.md"
        note.parent.mkdir()
        note.write_text(HAND)
        vault.reconcile()
        vault.update("people/priya.md", add_tags=["billing"])
        assert note.read_text() == "---\ntags: [billing]\n---\n" + HAND
        vault.update("people/priya.md", append="She is in Lisbon.")
        text = note.read_text()
        for key in ("id:", "created:", "updated:", "namespace:"):
            assert key not in text


def test_link_and_append_on_a_hand_note_add_no_dates(tmp_path: Path) -> None:
    with Vault.init(tmp_path / "v") as vault:
        root = tmp_path / "v"
        (root / "priya.md").write_text("---\nrole: owner\n---\nPriya owns billing.\n")
        (root / "billing.md").write_text("Invoices go out monthly.\n")
        vault.reconcile()
        vault.link("priya.md", "billing.md")
        vault.update("priya.md", append="She is in Lisbon.")
        text = (root / "priya.md").read_text()
        assert text.startswith("---\nrole: owner\nrelated_to: [\"[[billing]]\"]\n---\n")
        assert "She is in Lisbon." in text
        for key in ("id:", "created:", "updated:", "namespace:"):
            assert key not in text


def test_a_tool_memory_still_gets_its_updated_stamp(tmp_path: Path) -> None:
    with Vault.init(tmp_path / "v") as vault:
        made = vault.remember("Deploys are on Fridays.", title="Deploys")["memory"]
        before = (tmp_path / "v" / made["path"]).read_text()
        vault.update(made["id"], add_tags=["ops"])
        after = (tmp_path / "v" / made["path"]).read_text()
        assert "updated:" in before and "updated:" in after and "tags: [ops]" in after


def test_without_git_dates_come_from_the_file_and_equal_a_rebuild(tmp_path: Path) -> None:
    """Outside git the file's mtime is the only date a note without its own has; the
    index holds nothing a rebuild from the files would not."""
    with Vault.init(tmp_path / "v") as vault:
        note = tmp_path / "v" / "priya.md"
        note.write_text(HAND)
        os.utime(note, (1_600_000_000, 1_600_000_000))  # 2020-09-13
        vault.reconcile()
        assert dates(vault, "priya.md") == ("2020-09-13T12:26:40Z", "2020-09-13T12:26:40Z")
        vault.update("priya.md", add_tags=["billing"])
        assert "created" not in note.read_text()
        assert_index_matches_files(vault)


# --------------------------------------------------------------------------- dates from git


def test_dates_come_from_git_after_a_checkout(tmp_path: Path) -> None:
    repo = hand_repo(tmp_path / "team")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))  # every file's mtime: now
    with Vault(clone) as vault:
        assert dates(vault, "people/priya.md") == ("2020-01-02T08:00:00Z", "2021-03-04T05:06:07Z")
        assert "ago" in vault.get("people/priya.md")["age"] and "just now" not in vault.get("people/priya.md")["age"]
        vault.update("people/priya.md", add_tags=["billing"])  # a tool edit: only tags, the dates stand
        assert dates(vault, "people/priya.md")[0] == "2020-01-02T08:00:00Z"
    text = (clone / "people" / "priya.md").read_text()
    assert text.startswith("---\ntags: [billing]\n---\n") and "created" not in text


def test_dates_follow_a_rename_and_come_back_after_the_index_is_deleted(tmp_path: Path) -> None:
    repo = hand_repo(tmp_path / "team")
    with Vault(repo) as vault:
        assert dates(vault, "people/priya.md")[0] == "2020-01-02T08:00:00Z"
    git(repo, "mv", "people/priya.md", "people/priya-s.md")
    commit_all(repo, "rename", "2022-05-06T07:08:09Z")
    with Vault(repo) as vault:  # an incremental pass: the rename keeps the first date
        assert dates(vault, "people/priya-s.md") == ("2020-01-02T08:00:00Z", "2021-03-04T05:06:07Z")
    shutil.rmtree(repo / ".index")
    with Vault(repo) as vault:  # rebuilt from git alone
        assert dates(vault, "people/priya-s.md") == ("2020-01-02T08:00:00Z", "2021-03-04T05:06:07Z")


def test_a_note_with_its_own_dates_keeps_them(tmp_path: Path) -> None:
    repo = hand_repo(tmp_path / "team")
    (repo / "own.md").write_text("---\ncreated: 2019-05-05T00:00:00Z\nupdated: 2019-06-06T00:00:00Z\n---\nMine.\n")
    commit_all(repo, "own", "2023-01-01T00:00:00Z")
    with Vault(repo) as vault:
        assert dates(vault, "own.md") == ("2019-05-05T00:00:00Z", "2019-06-06T00:00:00Z")


def test_a_pull_brings_git_dates_to_the_new_note(tmp_path: Path) -> None:
    repo = hand_repo(tmp_path / "team")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    with Vault(clone) as vault:
        vault.reconcile()
    (repo / "lars.md").write_text("Lars owns search.\n")
    commit_all(repo, "lars", "2024-02-02T02:02:02Z")
    git(clone, "pull", "-q")
    with Vault(clone) as vault:
        assert dates(vault, "lars.md") == ("2024-02-02T02:02:02Z", "2024-02-02T02:02:02Z")


def test_a_shallow_clone_says_so_and_falls_back_to_the_file(tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    repo = hand_repo(tmp_path / "team")
    (repo / "lars.md").write_text("Lars owns search.\n")
    commit_all(repo, "lars", "2024-02-02T02:02:02Z")
    clone = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(clone))
    old = clone / "people" / "priya.md"
    os.utime(old, (1_700_000_000, 1_700_000_000))  # 2023-11-14: the file's own date
    with caplog.at_level(logging.WARNING, logger="agent_memory.git"), Vault(clone) as vault:
        # Both files look added by the boundary commit: git cannot say when they were made.
        assert dates(vault, "people/priya.md") == ("2023-11-14T22:13:20Z", "2023-11-14T22:13:20Z")
    assert "shallow clone" in caplog.text
    assert "a shallow clone: notes with no dates of their own" in run_cli("doctor", vault=clone).stdout
    git(clone, "fetch", "-q", "--unshallow")
    with Vault(clone) as vault:
        assert dates(vault, "people/priya.md") == ("2020-01-02T08:00:00Z", "2021-03-04T05:06:07Z")
        assert dates(vault, "lars.md")[0] == "2024-02-02T02:02:02Z"
    assert "a shallow clone" not in run_cli("doctor", vault=clone).stdout


def test_a_shallow_clone_dates_notes_added_after_its_boundary(tmp_path: Path) -> None:
    repo = hand_repo(tmp_path / "team")
    (repo / "lars.md").write_text("Lars owns search.\n")
    commit_all(repo, "lars", "2024-02-02T02:02:02Z")
    clone = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "2", f"file://{repo}", str(clone))
    with Vault(clone) as vault:
        assert dates(vault, "lars.md")[0] == "2024-02-02T02:02:02Z"
        assert dates(vault, "people/priya.md")[0] > "2025"  # older than the boundary: the file's (now)


def test_a_start_with_nothing_new_runs_no_git_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = hand_repo(tmp_path / "team")
    Vault(repo).close()  # the first start reads git's dates
    git(repo, "pack-refs", "--all")  # HEAD's branch now only in packed-refs
    real = subprocess.run
    ran: list[str] = []

    def spy(args, *rest, **kwargs):  # type: ignore[no-untyped-def]
        if args and args[0] == "git":
            ran.append(" ".join(args))
        return real(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "run", spy)
    with Vault(repo) as vault:
        assert dates(vault, "people/priya.md")[0] == "2020-01-02T08:00:00Z"
    assert ran == []
    with Vault.init(tmp_path / "plain") as vault:  # a vault in no repository: none either
        vault.remember("Outside git.", title="Plain")
    assert ran == []
    monkeypatch.setattr(subprocess, "run", real)
    (repo / "lars.md").write_text("Lars owns search.\n")
    commit_all(repo, "lars", "2024-02-02T02:02:02Z")
    monkeypatch.setattr(subprocess, "run", spy)
    with Vault(repo) as vault:  # HEAD moved: the pass runs, over the new commit only
        assert dates(vault, "lars.md")[0] == "2024-02-02T02:02:02Z"
    assert any(" log " in command and ".." in command for command in ran)


def test_a_merge_of_a_rename_and_an_edit_dates_the_note_as_a_rebuild_does(tmp_path: Path) -> None:
    """One side renames a note, the other edits it; after the merge the dates are the
    same whether the pass ran before it (then over the merge) or over the whole history."""
    repo = hand_repo(tmp_path / "team")
    git(repo, "switch", "-q", "-c", "side")
    (repo / "people" / "priya.md").write_text(HAND + "Ask her before changing invoices.\nShe is in Lisbon.\n")
    commit_all(repo, "priya in Lisbon", "2022-02-02T00:00:00Z")
    git(repo, "switch", "-q", "main")
    git(repo, "mv", "people/priya.md", "people/priya-s.md")
    commit_all(repo, "rename", "2021-06-06T00:00:00Z")
    with Vault(repo) as vault:
        assert dates(vault, "people/priya-s.md") == ("2020-01-02T08:00:00Z", "2021-03-04T05:06:07Z")
    git(repo, "merge", "-q", "--no-edit", "side", date="2023-03-03T00:00:00Z")
    assert "Lisbon" in (repo / "people" / "priya-s.md").read_text()
    with Vault(repo) as vault:
        assert dates(vault, "people/priya-s.md") == ("2020-01-02T08:00:00Z", "2023-03-03T00:00:00Z")
        assert_index_matches_files(vault)
    shutil.rmtree(repo / ".index")
    with Vault(repo) as vault:
        assert dates(vault, "people/priya-s.md") == ("2020-01-02T08:00:00Z", "2023-03-03T00:00:00Z")


def test_a_note_a_merge_brings_in_keeps_the_date_it_was_added_on_its_side(tmp_path: Path) -> None:
    """Author dates need not follow the graph (clocks differ between clones): the merge
    that brings a note in says nothing of when it was written."""
    repo = hand_repo(tmp_path / "team")
    git(repo, "switch", "-q", "-c", "side")
    (repo / "lars.md").write_text("Lars owns search.\n")
    commit_all(repo, "lars", "2024-05-05T00:00:00Z")
    git(repo, "switch", "-q", "main")
    (repo / "other.md").write_text("Something else.\n")
    commit_all(repo, "other", "2022-01-01T00:00:00Z")
    git(repo, "merge", "-q", "--no-edit", "side", date="2023-01-01T00:00:00Z")  # a clock behind the side's
    with Vault(repo) as vault:
        assert dates(vault, "lars.md")[0] == "2024-05-05T00:00:00Z"
