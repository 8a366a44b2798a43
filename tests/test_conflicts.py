"""Git conflicts keep identity (SPEC §2): a file with conflict markers is read by its
first side's front matter (id, namespace, tags), is still found by what either side
says, is flagged ``conflict`` everywhere, and is refused for tool edits until resolved."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from mcp import Client

from agent_memory.note.parse import parse
from agent_memory.vault.doctor import diagnose
from agent_memory.errors import InvalidInput
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, tool_error, tool_ok

OURS = "---\nid: 01bbbbbbbbbbbbbb\nnamespace: billing\ntags: [invoices]\ncreated: 2026-07-20T10:00:00Z\n---\n"
THEIRS = "---\nid: 01aaaaaaaaaaaaaa\nnamespace: ops\ntags: [deploy]\ncreated: 2026-07-20T09:00:00Z\n---\n"

CASES = [
    # name, text, (id, namespace, tags), words that must be in the body
    (
        "add/add: markers inside the front matter (git's default style)",
        "---\n<<<<<<< HEAD\nid: 01bbbbbbbbbbbbbb\nnamespace: billing\ntags: [invoices]\n---\nACME wants invoices monthly.\n"
        "=======\nid: 01aaaaaaaaaaaaaa\nnamespace: ops\ntags: [deploy]\n---\nACME deploys on Fridays.\n>>>>>>> laptop\n",
        ("01bbbbbbbbbbbbbb", "billing", ["invoices"]),
        ("invoices monthly", "deploys on Fridays"),
    ),
    (
        "add/add with diff3: markers before the front matter",
        "<<<<<<< HEAD\n" + OURS + "ACME wants invoices monthly.\n||||||| a7137ae\n=======\n" + THEIRS
        + "ACME deploys on Fridays.\n>>>>>>> laptop\n",
        ("01bbbbbbbbbbbbbb", "billing", ["invoices"]),
        ("invoices monthly", "deploys on Fridays"),
    ),
    (
        "diff3 inside the front matter: the first side, not the common ancestor",
        "---\nnamespace: billing\n<<<<<<< HEAD\nid: 01bbbbbbbbbbbbbb\ntags: [invoices]\n||||||| base\n"
        "id: 01cccccccccccccc\ntags: [old]\n=======\nid: 01aaaaaaaaaaaaaa\ntags: [deploy]\n>>>>>>> laptop\n---\n"
        "Title\n=======\nA setext heading is no conflict separator.\n",
        ("01bbbbbbbbbbbbbb", "billing", ["invoices"]),
        ("setext heading",),
    ),
    (
        "conflict in the body only",
        OURS + "ACME pays\n<<<<<<< HEAD\nmonthly.\n=======\nyearly.\n>>>>>>> origin/main\n",
        ("01bbbbbbbbbbbbbb", "billing", ["invoices"]),
        ("monthly", "yearly"),
    ),
    (
        "CRLF line ends",
        ("<<<<<<< HEAD\n" + OURS + "Ours.\n=======\n" + THEIRS + "Theirs.\n>>>>>>> x\n").replace("\n", "\r\n"),
        ("01bbbbbbbbbbbbbb", "billing", ["invoices"]),
        ("Ours.", "Theirs."),
    ),
]


@pytest.mark.parametrize("text, identity, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_conflicted_file_keeps_its_first_sides_identity(text: str, identity: tuple, words: tuple) -> None:
    note = parse(text.encode("utf-8"), "2026/07/20/acme.md")
    assert (note.id, note.namespace, note.tags) == identity
    assert note.conflict is True and note.own_id is True
    assert note.problems == [] and note.unreadable is False
    for word in words:
        assert word in note.body
    assert "01bbbbbbbbbbbbbb" not in note.body  # the first side's front matter is not body text


def test_half_a_conflict_is_no_conflict_and_reads_as_before() -> None:
    text = "---\nid: a1\n---\n<<<<<<< HEAD\nnever closed\n"
    note = parse(text.encode(), "x.md")
    assert note.conflict is False and note.id == "a1" and note.body == "<<<<<<< HEAD\nnever closed\n"


# --------------------------------------------------------------------------- through the vault


ADD_ADD = CASES[1][1]


def test_conflicted_memory_is_found_by_id_and_words_and_flagged(vault: Vault) -> None:
    (vault.root / "acme.md").write_text(ADD_ADD, encoding="utf-8")
    vault.reconcile()
    memory = vault.get("01bbbbbbbbbbbbbb")  # not "may have expired"
    assert memory["path"] == "acme.md" and memory["conflict"] is True
    assert memory["namespace"] == "billing" and memory["tags"] == ["invoices"]
    for query in ("ACME invoices", "ACME Fridays"):
        [hit] = vault.search(query)["hits"]
        assert hit["id"] == "01bbbbbbbbbbbbbb" and hit["conflict"] is True
    assert vault.search("ACME invoices", namespace="billing", tags=["invoices"])["count"] == 1
    [listed] = vault.list()["memories"]
    assert listed["conflict"] is True
    assert_index_matches_files(vault)


def test_a_clean_memory_says_conflict_false(vault: Vault) -> None:
    made = vault.remember("The VPN gateway is vpn2.example.com.")["memory"]
    assert made["conflict"] is False
    assert vault.search("VPN gateway")["hits"][0]["conflict"] is False
    assert vault.list()["memories"][0]["conflict"] is False


@pytest.mark.parametrize(
    "change",
    [
        lambda v: v.update("01bbbbbbbbbbbbbb", append="more"),
        lambda v: v.update("01bbbbbbbbbbbbbb", add_tags=["x"]),
        lambda v: v.update("acme.md", namespace="other"),
        lambda v: v.link("01bbbbbbbbbbbbbb", "other.md"),
    ],
    ids=["append", "add_tags", "namespace", "link"],
)
def test_tool_edits_of_a_conflicted_file_are_refused(vault: Vault, change) -> None:
    (vault.root / "acme.md").write_text(ADD_ADD, encoding="utf-8")
    (vault.root / "other.md").write_text("Another note.\n", encoding="utf-8")
    vault.reconcile()
    with pytest.raises(InvalidInput, match=r"^git conflict in acme\.md: resolve it first"):
        change(vault)
    assert (vault.root / "acme.md").read_text(encoding="utf-8") == ADD_ADD


def test_doctor_lists_conflicted_files(vault: Vault) -> None:
    (vault.root / "acme.md").write_text(ADD_ADD, encoding="utf-8")
    (vault.root / "clean.md").write_text("Clean.\n", encoding="utf-8")
    vault.reconcile()
    checks = {c.name: c for c in diagnose(vault.root)}
    assert not checks["conflict markers"].ok and checks["conflict markers"].items == ["acme.md"]
    assert checks["files"].ok  # the first side's front matter reads cleanly: no "broken YAML"


async def test_over_mcp_a_conflicted_memory_is_found_and_edits_are_refused(vault: Vault, client: Client) -> None:
    (vault.root / "acme.md").write_text(ADD_ADD, encoding="utf-8")
    vault.reconcile()
    assert (await tool_ok(client, "get_memory", memory_id="01bbbbbbbbbbbbbb"))["conflict"] is True
    found = await tool_ok(client, "recall", query="ACME Fridays")
    assert [h["conflict"] for h in found["hits"]] == [True]
    refused = await tool_error(client, "update_memory", memory_id="01bbbbbbbbbbbbbb", append="x")
    assert "git conflict in acme.md: resolve it first" in refused


pytestmark = pytest.mark.anyio


# --------------------------------------------------------------------------- a real git rebase


def git(cwd: Path, *args: str, ok: tuple[int, ...] = (0,)) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd,
                          capture_output=True, text=True)
    assert done.returncode in ok, done.stderr
    return done.stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize("style", ["merge", "diff3", "zdiff3"])
def test_a_rebase_conflict_keeps_the_upstream_sides_identity(vault: Vault, clock, style: str) -> None:
    """Under ``git rebase`` the first side is upstream; both sides carry the same id,
    and the memory keeps it, with its namespace and tags."""
    root = vault.root
    made = vault.remember("ACME deploys on Fridays.", namespace="ops", tags=["deploy"])["memory"]
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".gitignore", made["path"])
    git(root, "commit", "-qm", "a memory")
    git(root, "checkout", "-qb", "laptop")
    clock.advance(hours=1)  # each side's `updated:` differs too: the front matter is in conflict
    vault.update(made["id"], replace_old="Fridays", replace_new="Thursdays")
    git(root, "commit", "-qam", "laptop says Thursdays")
    git(root, "checkout", "-q", "main")
    vault.reconcile()
    clock.advance(hours=1)
    vault.update(made["id"], replace_old="Fridays", replace_new="Mondays")
    git(root, "commit", "-qam", "main says Mondays")
    git(root, "checkout", "-q", "laptop")
    git(root, "-c", f"merge.conflictStyle={style}", "rebase", "main", ok=(1,))
    text = (root / made["path"]).read_text(encoding="utf-8")
    assert "<<<<<<<" in text and ("|||||||" in text) == (style != "merge")
    vault.reconcile()
    memory = vault.get(made["id"])
    assert (memory["namespace"], memory["tags"], memory["conflict"]) == ("ops", ["deploy"], True)
    assert [h["id"] for h in vault.search("ACME Thursdays")["hits"]] == [made["id"]]
    assert [h["id"] for h in vault.search("ACME Mondays")["hits"]] == [made["id"]]
    with pytest.raises(InvalidInput, match="git conflict in"):
        vault.update(made["id"], append="x")
    assert_index_matches_files(vault)
    json.dumps(memory)  # plain data
