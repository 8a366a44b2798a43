"""Links, the graph walk, retrieve_context and read_file: through the library, on real
files; plus the `link` command through the console entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_memory.errors import InvalidInput, NotFound, PathRefused
from agent_memory.vault.vault import Vault

from conftest import CliResult, assert_index_matches_files, run_cli


def write(vault: Vault, rel: str, text: str) -> str:
    path = vault.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    vault.reconcile_path(rel)
    return rel


def remember(vault: Vault, content: str, **kwargs: object) -> dict:
    return vault.remember(content, **kwargs)["memory"]  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- link


def test_link_writes_a_wikilink_property_and_changes_nothing_else(vault: Vault) -> None:
    source = write(vault, "notes/acme.md", "---\nid: acme1\n# a comment a human wrote\nowner: Priya\ntags:\n  - customer\n---\nACME deploys on Fridays.\n")
    target = write(vault, "notes/acme-billing.md", "ACME billing runs on Stripe.\n")
    before = (vault.root / source).read_bytes()

    result = vault.link("acme1", target)

    after = (vault.root / source).read_bytes()
    assert result["changed"] is True and result["link"] == "[[acme-billing]]"
    assert after == before.replace(b"  - customer\n", b'  - customer\nrelated_to: ["[[acme-billing]]"]\n')
    assert result["source"]["version"] == vault.get("acme1")["version"] != result["target"]["version"]
    assert vault.get("acme1")["relations"] == {"related_to": ["acme-billing"]}
    assert_index_matches_files(vault)


def test_link_twice_or_spelled_differently_changes_nothing(vault: Vault) -> None:
    a = remember(vault, "ACME prefers Friday deploys")
    write(vault, "notes/acme-billing.md", "ACME billing runs on Stripe.\n")
    vault.link(a["id"], "notes/acme-billing.md")
    path = vault.root / a["path"]
    once = path.read_bytes()
    assert vault.link(a["id"], "notes/acme-billing.md")["changed"] is False
    assert path.read_bytes() == once

    b = write(vault, "b.md", "---\nsee_also: \"[[notes/acme-billing|the billing note]]\"\n---\nB\n")
    before = (vault.root / b).read_bytes()
    assert vault.link(b, "notes/acme-billing.md", relation="see_also")["changed"] is False
    assert (vault.root / b).read_bytes() == before


def test_link_appends_to_a_block_list_and_turns_a_single_link_into_a_list(vault: Vault) -> None:
    for name in ("x", "y", "z"):
        write(vault, f"{name}.md", f"{name} body\n")
    block = write(vault, "block.md", "---\nrelated_to:\n  - \"[[x]]\"\nkeep: me\n---\nbody\n")
    vault.link(block, "y.md")
    assert (vault.root / block).read_text() == '---\nrelated_to:\n  - "[[x]]"\n  - "[[y]]"\nkeep: me\n---\nbody\n'

    single = write(vault, "single.md", "---\nrelated_to: \"[[x]]\"\n---\nbody\n")
    vault.link(single, "z.md")
    assert (vault.root / single).read_text() == '---\nrelated_to: ["[[x]]", "[[z]]"]\n---\nbody\n'
    assert_index_matches_files(vault)


def test_link_adds_front_matter_to_a_file_without_any(vault: Vault) -> None:
    plain = write(vault, "people/priya.md", "Priya owns billing.\n")
    write(vault, "billing.md", "Billing runbook\n")
    vault.link(plain, "billing.md", relation="owns")
    assert (vault.root / plain).read_text() == '---\nowns: ["[[billing]]"]\n---\nPriya owns billing.\n'
    assert [n["path"] for n in vault.related(plain, direction="out")["nodes"]] == [plain, "billing.md"]


def test_link_uses_the_path_when_the_file_name_is_not_unique(vault: Vault) -> None:
    write(vault, "team-a/notes.md", "Team A notes\n")
    write(vault, "team-b/notes.md", "Team B notes\n")
    source = write(vault, "index.md", "The index\n")
    result = vault.link(source, "team-b/notes.md")
    assert result["link"] == "[[team-b/notes]]"
    out = vault.related(source, direction="out")
    assert [n["path"] for n in out["nodes"]] == ["index.md", "team-b/notes.md"]


def test_link_refusals_leave_the_file_alone(vault: Vault) -> None:
    a = remember(vault, "Alpha fact")
    b = remember(vault, "Beta fact")
    path = vault.root / a["path"]
    before = path.read_bytes()
    with pytest.raises(NotFound, match="use recall or list_memories"):
        vault.link("no-such-id", b["id"])
    with pytest.raises(NotFound):
        vault.link(a["id"], "no-such-target")
    with pytest.raises(InvalidInput, match="itself"):
        vault.link(a["id"], a["path"])
    for relation in ("tags", "has space", "", "x" * 65, "1st"):
        with pytest.raises(InvalidInput, match="cannot be used"):
            vault.link(a["id"], b["id"], relation=relation)
    assert path.read_bytes() == before

    odd = write(vault, "odd.md", "---\nrelated_to: {a: 1}\n---\nOdd\n")
    with pytest.raises(InvalidInput, match="not a list of links"):
        vault.link(odd, b["id"])
    assert (vault.root / odd).read_text() == "---\nrelated_to: {a: 1}\n---\nOdd\n"


# ----------------------------------------------------------------------------- related


@pytest.fixture
def web(vault: Vault) -> Vault:
    """a -> b (front matter), b -> c (body link by name), c -> d (body link by path),
    e -> a (backlink), and a title that matches a link target but is no file of it."""
    write(vault, "a.md", "---\nid: A\nrelated_to: [\"[[b]]\"]\n---\nAlpha\n")
    write(vault, "notes/b.md", "---\nid: B\n---\nBeta mentions [[c|see c]] and [[missing]].\n")
    write(vault, "notes/c.md", "---\nid: C\n---\nGamma links to [[deep/d#Heading]].\n")
    write(vault, "deep/d.md", "---\nid: D\n---\nDelta\n")
    write(vault, "e.md", "---\nid: E\nparent: \"[[a]]\"\n---\nEpsilon\n")
    write(vault, "title-trap.md", "---\nid: T\ntitle: b\n---\nA note titled b, not named b.\n")
    return vault


def edges(result: dict) -> set[tuple[str, str, str]]:
    return {(e["source"], e["relation"], e["target"]) for e in result["edges"]}


def distances(result: dict) -> dict[str, int]:
    return {n["id"]: n["distance"] for n in result["nodes"]}


def test_related_out_follows_front_matter_and_body_links_by_name_and_path(web: Vault) -> None:
    result = web.related("A", depth=3, direction="out")
    assert distances(result) == {"A": 0, "B": 1, "C": 2, "D": 3}
    assert edges(result) == {("A", "related_to", "B"), ("B", "links_to", "C"), ("C", "links_to", "D")}
    assert result["aborted"] is False and result["count"] == 3


def test_related_in_gives_backlinks_and_both_combines(web: Vault) -> None:
    assert distances(web.related("A", direction="in")) == {"A": 0, "E": 1}
    assert edges(web.related("B", direction="in")) == {("A", "related_to", "B")}
    both = web.related("B", depth=2, direction="both")
    assert distances(both) == {"B": 0, "A": 1, "C": 1, "E": 2, "D": 2}
    assert ("E", "parent", "A") in edges(both)


def test_related_depth_zero_and_bounds(web: Vault) -> None:
    assert distances(web.related("A", depth=0)) == {"A": 0}
    for bad in ({"depth": 4}, {"depth": -1}, {"direction": "sideways"}, {"limit": 0}, {"limit": 501}):
        with pytest.raises(InvalidInput):
            web.related("A", **bad)  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        web.related("nope")


def test_related_stops_at_the_visit_cap_and_says_so(vault: Vault) -> None:
    write(vault, "hub.md", "---\nid: HUB\n---\nThe hub\n")
    for n in range(12):
        write(vault, f"spoke-{n}.md", f"Spoke {n} points at [[hub]]\n")
    capped = vault.related("HUB", direction="in", limit=5)
    assert capped["aborted"] is True and "limit" in capped["note"]
    assert len(capped["nodes"]) == 5
    assert {e["target"] for e in capped["edges"]} == {"HUB"}
    assert {e["source"] for e in capped["edges"]} <= {n["id"] for n in capped["nodes"]}
    full = vault.related("HUB", direction="in", limit=13)
    assert full["aborted"] is False and full["count"] == 12


def test_same_name_link_prefers_the_linking_files_folder(vault: Vault) -> None:
    write(vault, "x/readme.md", "---\nid: XR\n---\nX readme\n")
    write(vault, "y/readme.md", "---\nid: YR\n---\nY readme\n")
    write(vault, "y/page.md", "---\nid: YP\n---\nSee [[readme]]\n")
    assert distances(vault.related("YP", direction="out")) == {"YP": 0, "YR": 1}
    assert distances(vault.related("XR", direction="in")) == {"XR": 0}


def test_expired_memories_are_not_reached(vault: Vault, clock) -> None:
    short = remember(vault, "Temporary workaround", ttl_days=1)
    keeper = remember(vault, "Keeper fact")
    vault.link(keeper["id"], short["id"])
    assert vault.related(keeper["id"])["count"] == 1
    clock.advance(days=2)
    assert vault.related(keeper["id"])["count"] == 0


# ----------------------------------------------------------------------------- retrieve_context


def test_retrieve_context_returns_whole_memories_within_the_budget(vault: Vault) -> None:
    small = remember(vault, "ACME deploys on Fridays.", title="ACME deploys")
    big = remember(vault, "ACME runbook. " + "Step and check. " * 200, title="ACME runbook")
    result = vault.retrieve_context("ACME", token_budget=100)
    assert [m["id"] for m in result["memories"]] == [small["id"]]
    assert result["memories"][0]["content"] == "ACME deploys on Fridays.\n" == vault.get(small["id"])["content"]
    expected = -(-len("ACME deploys\nACME deploys on Fridays.\n") // 4)
    assert result["memories"][0]["estimated_tokens"] == expected == result["estimated_tokens"]
    assert result["truncated"] is True and result["omitted"] == 1 and "token_budget" in result["hint"]
    assert "characters / 4" in result["estimate"]

    roomy = vault.retrieve_context("ACME", token_budget=10_000)
    assert {m["id"] for m in roomy["memories"]} == {small["id"], big["id"]}
    assert roomy["truncated"] is False and roomy["estimated_tokens"] <= 10_000


def test_retrieve_context_strategies(vault: Vault, clock) -> None:
    old = remember(vault, "Deploy checklist: old and important", title="old")
    write(vault, "ranked.md", "---\nimportance: 5\nupdated: 2026-07-01\n---\nDeploy checklist ranked by hand\n")
    clock.advance(days=1)
    new = remember(vault, "Deploy checklist: newest", title="new")
    for n in range(2):
        write(vault, f"fan-{n}.md", f"fan {n} of [[{old['path'][:-3]}]]\n")
    recency = vault.retrieve_context("deploy checklist", strategy="recency")
    assert recency["memories"][0]["id"] == new["id"]
    importance = vault.retrieve_context("deploy checklist", strategy="importance")
    assert [m["path"] for m in importance["memories"]][:2] == ["ranked.md", old["path"]]
    newest = vault.retrieve_context("", token_budget=50)
    assert newest["memories"] and newest["memories"][0]["id"] != old["id"]
    with pytest.raises(InvalidInput, match="strategy"):
        vault.retrieve_context("x", strategy="random")
    with pytest.raises(InvalidInput, match="token_budget"):
        vault.retrieve_context("x", token_budget=0)


def test_retrieve_context_with_nothing_found_says_so(vault: Vault) -> None:
    remember(vault, "Unrelated")
    result = vault.retrieve_context("zebra migration")
    assert result["count"] == 0 and result["memories"] == [] and "Nothing matched" in result["hint"]


# ----------------------------------------------------------------------------- read_file


def test_read_file_reads_text_inside_the_vault(vault: Vault) -> None:
    memory = remember(vault, "Priya owns billing")
    whole = vault.read_file(memory["path"])
    assert whole["content"] == (vault.root / memory["path"]).read_text()
    assert whole["memory_id"] == memory["id"] and whole["version"] == memory["version"]
    assert vault.read_file(str(vault.root / memory["path"]))["path"] == memory["path"]
    (vault.root / ".prompts").mkdir()
    (vault.root / ".prompts" / "mine.md").write_text("---\nname: mine\n---\nHi\n")
    assert vault.read_file(".prompts/mine.md")["memory_id"] is None
    (vault.root / "notes.txt").write_text("plain text, not a memory")
    assert vault.read_file("notes.txt")["content"] == "plain text, not a memory"


def test_read_file_refuses_escapes_hidden_folders_and_symlinks_out(vault: Vault, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("token=abc")
    (vault.root / ".git").mkdir()
    (vault.root / ".git" / "config").write_text("[remote]\nurl = https://user:token@example\n")
    (vault.root / "link-out.md").symlink_to(secret)
    (vault.root / "dir-out").symlink_to(tmp_path)
    refused = ["../secret.txt", str(secret), "link-out.md", "dir-out/secret.txt", ".git/config",
               ".index/index.sqlite3", "sub/../../secret.txt", ".gitignore"]
    for path in refused:
        with pytest.raises(PathRefused):
            vault.read_file(path)


def test_read_file_refuses_binary_oversize_folders_and_missing_files(vault: Vault) -> None:
    (vault.root / "image.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (vault.root / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    (vault.root / "big.md").write_bytes(b"x" * 1_000_001)
    (vault.root / "folder").mkdir()
    with pytest.raises(InvalidInput, match="binary"):
        vault.read_file("image.md")
    with pytest.raises(InvalidInput, match="binary"):
        vault.read_file("latin1.md")
    with pytest.raises(InvalidInput, match="1,000,001 bytes.*1,000,000"):
        vault.read_file("big.md")
    with pytest.raises(InvalidInput, match="is a folder"):
        vault.read_file("folder")
    with pytest.raises(InvalidInput, match="empty"):
        vault.read_file("  ")


def test_read_file_answers_exists_false_for_a_missing_file_inside_the_vault(vault: Vault) -> None:
    for path in ("nope.md", "2026/01/01/never-written.md", str(vault.root / "people" / "nobody.md")):
        answer = vault.read_file(path)
        assert answer["exists"] is False and answer["content"] == "" and answer["memory_id"] is None
    assert vault.read_file("people/nobody.md")["path"] == "people/nobody.md"
    memory = remember(vault, "Priya owns billing")
    assert vault.read_file(memory["path"])["exists"] is True
    with pytest.raises(PathRefused):  # missing or not, outside the vault stays refused
        vault.read_file("../nope.md")
    with pytest.raises(PathRefused):
        vault.read_file(".git/nope")


def test_complete_ids_offers_ids_and_paths_by_prefix(web: Vault) -> None:
    assert sorted(web.complete_ids("notes/")) == ["notes/b.md", "notes/c.md"]
    assert "D" in web.complete_ids("D") and "deep/d.md" in web.complete_ids("deep")


# ----------------------------------------------------------------------------- CLI


def cli(*args: str, vault_dir: Path) -> CliResult:
    return run_cli(*args, vault=vault_dir)


def test_cli_link_command(vault: Vault) -> None:
    a = remember(vault, "ACME prefers Friday deploys")
    b = write(vault, "acme-billing.md", "ACME billing\n")
    done = cli("link", a["id"], b, "--relation", "depends_on", vault_dir=vault.root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"Linked {a['path']} -depends_on-> [[acme-billing]]"
    assert 'depends_on: ["[[acme-billing]]"]' in (vault.root / a["path"]).read_text()
    again = cli("link", a["id"], b, "-r", "depends_on", "--json", vault_dir=vault.root)
    assert again.returncode == 0 and json.loads(again.stdout)["changed"] is False
    missing = cli("link", a["id"], "nope", vault_dir=vault.root)
    assert missing.returncode == 1 and "not found" in missing.stderr and missing.stdout == ""
    vault.reconcile()
    assert_index_matches_files(vault)
