"""The merge of two versions of a memory file, over bytes (``agent_memory.git.merge``): the
set merge of list keys, the time keys, conflicts written as markers, the body's merge
(git merge-file for real), the fall-backs, add/add, and the driver's file handling."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_memory.git import merge as merging
from agent_memory.note.parse import parse
from agent_memory.disk import store
from agent_memory.git.merge import MergeFailed, merge, merge_list, run_driver

BASE = """---
id: 01jd8x4k2m9q7r3t
namespace: default
title: ACME deploys
tags: [acme, deploy]
created: 2026-07-20T09:00:00Z
updated: 2026-07-20T09:00:00Z
owner: priya  # who to ask
status: open
---
ACME deploys on Fridays.
Never after 16:00.
Always with a rollback plan.
Ask Priya first.
"""


def edit(text: str, *pairs: tuple[str, str]) -> bytes:
    for old, new in pairs:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text.encode()


@pytest.mark.parametrize(("key", "base", "ours", "theirs", "expected"), [
    ("tags", ["a"], ["a", "b"], ["a", "c"], ["a", "b", "c"]),  # both add
    ("tags", ["a", "b"], ["a", "b", "c"], ["a"], ["a", "c"]),  # theirs removes b, ours adds c
    ("tags", ["a", "b"], ["a"], ["a", "b", "c"], ["a", "c"]),  # ours removes b: it stays removed
    ("tags", ["a", "b"], ["b"], ["a"], []),  # each removes one
    ("tags", ["a"], ["a", "Ops"], ["a", "ops"], ["a", "Ops"]),  # tags compare case-insensitively
    ("tags", "a, b", ["a", "b", "c"], "a b d", ["a", "b", "c", "d"]),  # Obsidian's string of tags
    ("tags", merging._MISSING, ["x"], ["y"], ["x", "y"]),  # no ancestor: the union
    ("aliases", ["Pri"], ["Pri", "P."], "Pri, Priya", ["Pri", "P.", "Priya"]),
    ("related_to", ["[[a]]"], ["[[a]]", "[[b]]"], "[[c]]", ["[[b]]", "[[c]]"]),  # a relation as a string
])
def test_merge_list(key: str, base: object, ours: object, theirs: object, expected: list[str]) -> None:
    assert merge_list(key, base, ours, theirs) == expected


@pytest.mark.parametrize(("key", "values", "expected"), [
    ("tags", ("a", "a b"), True),
    ("aliases", (["x"], "y"), True),
    ("related_to", ("[[a]]", "[[b]]"), True),
    ("reviewers", (["sam"], ["sam", "ana"]), True),
    ("status", ("open", "done"), False),
    ("title", ("[[a]]", "[[b]]"), False),  # a reserved key is a value, links or not
    ("importance", (3, 5), False),
    ("tags", ({"a": 1}, ["a"]), False),  # a mapping is not a set of tags
])
def test_which_keys_merge_as_sets(key: str, values: tuple[object, ...], expected: bool) -> None:
    assert merging.is_list_key(key, *values) is expected


def test_tags_added_on_both_sides_the_later_updated_the_earlier_created_and_every_other_byte_kept() -> None:
    ours = edit(BASE, ("tags: [acme, deploy]", "tags: [acme, deploy, friday]"),
                ("updated: 2026-07-20T09:00:00Z", "updated: 2026-07-21T09:00:00Z"))
    theirs = edit(BASE, ("tags: [acme, deploy]", "tags: [acme, ops]"),
                  ("created: 2026-07-20T09:00:00Z", "created: 2026-07-19T08:00:00Z"),
                  ("updated: 2026-07-20T09:00:00Z", "updated: 2026-07-20T10:00:00Z"))
    result = merge(BASE.encode(), ours, theirs)
    assert result.clean and result.how == "key by key"
    assert result.data == edit(BASE, ("tags: [acme, deploy]", "tags: [acme, friday, ops]"),
                               ("created: 2026-07-20T09:00:00Z", "created: 2026-07-19T08:00:00Z"),
                               ("updated: 2026-07-20T09:00:00Z", "updated: 2026-07-21T09:00:00Z"))


def test_their_side_changes_are_patched_in_as_they_wrote_them() -> None:
    ours = edit(BASE, ("status: open", "status: open\nreviewed: yes"))
    theirs = edit(BASE, ("owner: priya  # who to ask\n", ""),  # removed a key
                  ("tags: [acme, deploy]", "tags:\n  - acme\n  - deploy  # since July\n  - billing"),
                  ("status: open", "status: open\npriority: 'high'  # set by Sam"))  # added one
    result = merge(BASE.encode(), ours, theirs)
    assert result.clean
    assert result.data == edit(BASE, ("owner: priya  # who to ask\n", ""),
                               ("tags: [acme, deploy]", "tags:\n  - acme\n  - deploy  # since July\n  - billing"),
                               ("status: open", "status: open\nreviewed: yes\npriority: 'high'  # set by Sam"))


def test_a_comment_one_side_adds_to_the_front_matter_is_never_dropped() -> None:
    """A comment carries no value, so a merge of values alone would drop it. Before, each
    of these merged clean without the comment a person had written."""
    comment_line = edit(BASE, ("status: open", "# Sam: close this after the audit\nstatus: open"))
    body_edit = edit(BASE, ("Ask Priya first.", "Ask Priya or Sam first."))
    result = merge(BASE.encode(), body_edit, comment_line)  # apart: one clean line merge
    assert result.clean and result.data == edit(BASE, ("status: open", "# Sam: close this after the audit\nstatus: open"),
                                                ("Ask Priya first.", "Ask Priya or Sam first."))
    tagged = edit(BASE, ("tags: [acme, deploy]", "tags: [acme, deploy, friday]"))
    commented = edit(BASE, ("tags: [acme, deploy]", "tags: [acme, deploy]  # Priya's tags, ask her"))
    for ours, theirs in ((tagged, commented), (commented, tagged)):
        result = merge(BASE.encode(), ours, theirs)
        assert b"# Priya's tags, ask her" in result.data and b"friday" in result.data
        assert not result.clean  # the same line changed two ways: a person decides, with both in the file


def test_a_value_changed_on_both_sides_is_a_conflict_around_its_lines() -> None:
    ours = edit(BASE, ("status: open", "status: done"), ("tags: [acme, deploy]", "tags: [acme, deploy, x]"))
    theirs = edit(BASE, ("status: open", "status: doing"))
    result = merge(BASE.encode(), ours, theirs, path="2026/07/20/acme-deploys.md")
    assert result.conflicts == ["front matter: status"]
    assert b"<<<<<<< ours\nstatus: done\n=======\nstatus: doing\n>>>>>>> theirs\n---\n" in result.data
    merged = parse(result.data, "2026/07/20/acme-deploys.md")
    assert merged.conflict and not merged.unreadable
    assert merged.id == "01jd8x4k2m9q7r3t" and merged.meta["status"] == "done" and "x" in merged.tags


def test_a_value_removed_on_one_side_and_changed_on_the_other_is_a_conflict() -> None:
    ours = edit(BASE, ("owner: priya  # who to ask\n", ""))
    theirs = edit(BASE, ("owner: priya", "owner: sam"))
    result = merge(BASE.encode(), ours, theirs)
    assert result.conflicts == ["front matter: owner"]
    assert b"status: open\n<<<<<<< ours\n=======\nowner: sam  # who to ask\n>>>>>>> theirs\n---\n" in result.data


def test_the_marker_size_git_asks_for_is_used() -> None:
    ours, theirs = edit(BASE, ("status: open", "status: a")), edit(BASE, ("status: open", "status: b"))
    result = merge(BASE.encode(), ours, theirs, marker_size=9)
    assert b"\n<<<<<<<<< ours\n" in result.data and b"\n>>>>>>>>> theirs\n" in result.data


def test_different_body_lines_merge_and_the_same_line_is_a_conflict_with_both_texts() -> None:
    ours = edit(BASE, ("Never after 16:00.", "Never after 15:00."))
    theirs = edit(BASE, ("Ask Priya first.", "Ask Sam first."))
    clean = merge(BASE.encode(), ours, theirs)
    assert clean.clean and clean.data == edit(BASE, ("Never after 16:00.", "Never after 15:00."),
                                              ("Ask Priya first.", "Ask Sam first."))
    conflicted = merge(BASE.encode(), ours, edit(BASE, ("Never after 16:00.", "Never after 17:00.")))
    assert conflicted.conflicts == ["body: 1 conflict"]
    assert b"<<<<<<< ours\nNever after 15:00.\n=======\nNever after 17:00.\n>>>>>>> theirs\n" in conflicted.data


def test_text_appended_on_both_sides_keeps_both_ours_first() -> None:
    ours = (BASE + "Alice: confirmed.\n").encode()
    theirs = (BASE + "Bob: the CFO agrees.\nBob: twice.\n").encode()
    result = merge(BASE.encode(), ours, theirs)
    assert result.clean and result.data == (BASE + "Alice: confirmed.\nBob: the CFO agrees.\nBob: twice.\n").encode()


def test_crlf_and_a_bom_stay_as_written() -> None:
    base = "\ufeff" + BASE.replace("\n", "\r\n")
    ours = edit(base, ("tags: [acme, deploy]", "tags: [acme, deploy, a]"))
    theirs = edit(base, ("tags: [acme, deploy]", "tags: [acme, deploy, b]"), ("status: open", "status: shut"))
    result = merge(base.encode(), ours, theirs)
    assert result.clean
    assert result.data == edit(base, ("tags: [acme, deploy]", "tags: [acme, deploy, a, b]"), ("status: open", "status: shut"))


@pytest.mark.parametrize("broken", [
    "one\ntwo\nthree\nfour\n",  # no front matter: a plain note
    BASE.replace("tags: [acme, deploy]", "tags: [acme, deploy"),  # broken YAML
    BASE.replace("ACME", "<<<<<<< HEAD\nACME", 1).replace("Never", "=======\nNEVER\n>>>>>>> x\nNever", 1),  # markers
])
def test_what_cannot_be_read_key_by_key_is_merged_by_git_whole(broken: str) -> None:
    lines = broken.splitlines(keepends=True)
    ours = "".join(["FIRST\n", *lines[1:]]).encode()
    theirs = "".join([*lines[:-1], "LAST\n"]).encode()
    result = merge(broken.encode(), ours, theirs)
    assert result.how == "whole file" and result.clean
    assert result.data == "".join(["FIRST\n", *lines[1:-1], "LAST\n"]).encode()


def test_a_side_that_is_not_utf8_is_merged_by_git_whole() -> None:
    base = BASE.encode()
    ours = base.replace(b"Ask Priya first.", b"Ask Priy\xe9 first.")
    theirs = base.replace(b"ACME deploys on Fridays.", b"ACME deploys on Thursdays.")
    result = merge(base, ours, theirs)
    assert result.how == "whole file" and result.clean and b"Priy\xe9" in result.data and b"Thursdays" in result.data


def test_binary_data_is_refused_not_guessed() -> None:
    with pytest.raises(MergeFailed, match="binary"):
        merge(b"a\0b\n", b"a\0c\n", b"a\0d\n")


def new_memory(memory_id: str, created: str, body: str, tags: str = "[]") -> bytes:
    return (f"---\nid: {memory_id}\nnamespace: default\ntitle: Deploy freeze\ntags: {tags}\n"
            f"created: {created}\nupdated: {created}\n---\n{body}\n").encode()


def test_the_same_memory_added_on_both_sides_is_kept_once_by_its_id_owner() -> None:
    ours = new_memory("0000000000000bbb", "2026-07-20T10:00:00Z", "Deploys are frozen in August.", "[freeze]")
    theirs = new_memory("0000000000000aaa", "2026-07-20T09:00:00Z", "deploys are  frozen in August.", "[deploy]")
    result = merge(b"", ours, theirs)
    assert result.clean and "kept 0000000000000aaa (theirs)" in result.how
    assert result.data == new_memory("0000000000000aaa", "2026-07-20T09:00:00Z", "deploys are  frozen in August.",
                                     "[deploy, freeze]").replace(b"updated: 2026-07-20T09:00:00Z",
                                                                 b"updated: 2026-07-20T10:00:00Z")


def test_one_memory_written_twice_keeps_what_a_person_added_to_the_other_copy() -> None:
    """Before, only tags, aliases, relations and updated came over from the copy that
    does not own the id: a person's key on it (reviewed: yes) or its comment was dropped."""
    owner = new_memory("0000000000000aaa", "2026-07-20T09:00:00Z", "Deploys are frozen in August.")
    reviewed = new_memory("0000000000000bbb", "2026-07-20T10:00:00Z", "Deploys are frozen in August.").replace(
        b"tags: []\n", b"tags: []\nreviewed: yes  # Priya, on the phone\n")
    result = merge(b"", reviewed, owner)
    assert result.clean and "kept 0000000000000aaa" in result.how
    assert result.data == owner.replace(b"updated: 2026-07-20T09:00:00Z\n",  # the later updated, the key as written
                                        b"updated: 2026-07-20T10:00:00Z\nreviewed: yes  # Priya, on the phone\n")
    two_ways = owner.replace(b"tags: []\n", b"tags: []\nreviewed: no\n")
    result = merge(b"", reviewed, two_ways)
    assert result.how == "both kept" and result.data.count(b"reviewed:") == 2
    commented = owner.replace(b"tags: []\n", b"tags: []\n# ask Priya before lifting it\n")
    result = merge(b"", new_memory("0000000000000bbb", "2026-07-20T10:00:00Z", "Deploys are frozen in August."),
                   commented)
    assert b"# ask Priya before lifting it" in result.data


def test_two_memories_added_at_one_path_are_both_kept_whole() -> None:
    ours = new_memory("0000000000000bbb", "2026-07-20T10:00:00Z", "The freeze ends on September 2.")
    theirs = new_memory("0000000000000aaa", "2026-07-20T09:00:00Z", "Deploys are frozen in August.")
    result = merge(None, ours, theirs)
    assert result.conflicts == ["two memories added at one path"]
    assert result.data == b"<<<<<<< ours\n" + ours + b"=======\n" + theirs + b">>>>>>> theirs\n"
    parsed = parse(result.data, "2026/07/20/deploy-freeze.md")
    assert parsed.conflict and parsed.id == "0000000000000bbb" and "Deploys are frozen in August." in parsed.body


def test_one_memory_added_on_both_sides_merges_key_by_key() -> None:
    ours = new_memory("0000000000000aaa", "2026-07-20T09:00:00Z", "Deploys are frozen.", "[a]")
    theirs = new_memory("0000000000000aaa", "2026-07-20T09:00:00Z", "Deploys are frozen.", "[b]")
    result = merge(b"", ours, theirs)
    assert result.clean and result.data == ours.replace(b"tags: [a]", b"tags: [a, b]")


def write_sides(tmp_path: Path, base: bytes, ours: bytes, theirs: bytes) -> tuple[Path, Path, Path]:
    paths = tmp_path / "O", tmp_path / "A", tmp_path / "B"
    for path, data in zip(paths, (base, ours, theirs), strict=True):
        path.write_bytes(data)
    return paths


def test_the_driver_writes_the_merge_into_ours_and_exits_by_the_result(tmp_path: Path) -> None:
    ours = edit(BASE, ("tags: [acme, deploy]", "tags: [acme, deploy, a]"))
    theirs = edit(BASE, ("tags: [acme, deploy]", "tags: [acme, deploy, b]"))
    o, a, b = write_sides(tmp_path, BASE.encode(), ours, theirs)
    assert run_driver(o, a, b, 7, "x.md") == 0
    assert a.read_bytes() == edit(BASE, ("tags: [acme, deploy]", "tags: [acme, deploy, a, b]"))
    a.write_bytes(edit(BASE, ("status: open", "status: a")))
    b.write_bytes(edit(BASE, ("status: open", "status: b")))
    assert run_driver(o, a, b, 7, "x.md") == 1 and b"=======\nstatus: b\n" in a.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["A", "B", "O"]  # no temp file left beside %A


def test_a_bug_in_the_merge_falls_back_to_gits_whole_file_merge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(merging, "merge_body", broken)
    ours = edit(BASE, ("tags: [acme, deploy]", "tags: [acme, deploy, a]"))
    theirs = edit(BASE, ("tags: [acme, deploy]", "tags: [acme, deploy, b]"))
    o, a, b = write_sides(tmp_path, BASE.encode(), ours, theirs)
    assert run_driver(o, a, b, 7, "x.md") == 1
    text = a.read_text()
    assert "tags: [acme, deploy, a]\n=======\ntags: [acme, deploy, b]\n" in text  # both sides, markers
    assert "RuntimeError: a bug; merged as plain text" in capsys.readouterr().err


def test_when_nothing_can_be_merged_ours_is_left_untouched(tmp_path: Path) -> None:
    o, a, b = write_sides(tmp_path, b"a\0b\n", b"a\0c\n", b"a\0d\n")
    assert run_driver(o, a, b, 7, "x.md") == 2
    assert a.read_bytes() == b"a\0c\n"  # git reports a conflict and keeps every side in its index


def test_a_failed_write_leaves_ours_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    ours = edit(BASE, ("tags: [acme, deploy]", "tags: [acme, deploy, a]"))
    o, a, b = write_sides(tmp_path, BASE.encode(), ours, edit(BASE, ("status: open", "status: shut")))
    monkeypatch.setattr(store.os, "replace", refuse)
    assert run_driver(o, a, b, 7, "x.md") == 2
    assert a.read_bytes() == ours  # git then reports a conflict, with every side in its index
    assert sorted(p.name for p in tmp_path.iterdir()) == ["A", "B", "O"]


# ---------------------------------------------------------------- one side unchanged, and no git


def test_a_side_that_did_not_change_takes_the_other_sides_bytes_exactly() -> None:
    changed = edit(BASE, ("status: open", "status: shut")).replace(b"\n", b"\r\n")  # as a Windows editor saved it
    assert merge(BASE.encode(), BASE.encode(), changed).data == changed
    assert merge(BASE.encode(), changed, BASE.encode()).data == changed


def test_the_driver_without_git_leaves_ours_untouched_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "no-programs"
    empty.mkdir()
    ours = edit(BASE, ("Never after 16:00.", "Never after 15:00."))
    theirs = edit(BASE, ("Ask Priya first.", "Ask Priya or Bo first."))  # body lines: git merge-file merges them
    o, a, b = write_sides(tmp_path, BASE.encode(), ours, theirs)
    monkeypatch.setenv("PATH", str(empty))
    assert run_driver(o, a, b, 7, "x.md") == 2
    assert a.read_bytes() == ours
    assert "agent-memory merge-file: x.md: git is not installed (or not on PATH)" in capsys.readouterr().err


def test_the_driver_falling_back_without_git_still_leaves_ours_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("a bug")

    empty = tmp_path / "no-programs"
    empty.mkdir()
    monkeypatch.setattr(merging, "merge_body", broken)
    monkeypatch.setenv("PATH", str(empty))
    ours = edit(BASE, ("tags: [acme, deploy]", "tags: [acme, deploy, a]"))
    o, a, b = write_sides(tmp_path, BASE.encode(), ours, edit(BASE, ("status: open", "status: shut")))
    assert run_driver(o, a, b, 7, "x.md") == 2
    assert a.read_bytes() == ours
    assert "x.md: git is not installed" in capsys.readouterr().err


def test_the_driver_given_a_version_that_is_gone_leaves_ours_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ours = edit(BASE, ("status: open", "status: a"))
    o, a, b = write_sides(tmp_path, BASE.encode(), ours, BASE.encode())
    b.unlink()
    assert run_driver(o, a, b, 7, "x.md") == 2
    assert a.read_bytes() == ours
    assert "agent-memory merge-file: cannot read the versions of x.md:" in capsys.readouterr().err
