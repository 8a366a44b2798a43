"""``unlink`` (CLI ``agent-memory unlink``, MCP ``unlink_memories``): removing a relation
that ``link`` wrote, through the safe write, touching only that property's lines."""

from __future__ import annotations

import json

import pytest
from mcp import Client

from agent_memory.disk import locking
from agent_memory.errors import InvalidInput, NotFound, SavedMeanwhile
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, cli_ok, person_saves_before_the_swap, tool_error, tool_ok


def _pair(vault: Vault) -> tuple[dict, dict]:
    a = vault.remember("ACME prefers Friday deploys")["memory"]
    b = vault.remember("ACME billing runs on Stripe", title="acme billing")["memory"]
    return a, b


def test_link_then_unlink_gives_the_file_its_bytes_back(vault: Vault) -> None:
    a, b = _pair(vault)
    before = (vault.root / a["path"]).read_bytes()
    vault.link(a["id"], b["id"], relation="depends_on")
    assert (vault.root / a["path"]).read_bytes() != before
    result = vault.unlink(a["id"], b["path"], relation="depends_on")
    assert result["changed"] is True and result["removed"] == ["[[acme-billing]]"]
    assert result["target"]["id"] == b["id"] and result["source"]["id"] == a["id"]
    assert (vault.root / a["path"]).read_bytes() == before
    assert vault.related(b["id"], direction="in")["count"] == 0
    assert_index_matches_files(vault)


def test_unlink_keeps_other_links_and_every_other_byte(vault: Vault) -> None:
    text = ("---\n# my links\nrelated_to:\n  - \"[[Acme Billing|billing]]\"  # the invoices\n  - '[[people/priya]]'\n"
            "owner: me\n---\nBody [[acme-billing]] stays.\n")
    (vault.root / "people").mkdir()
    (vault.root / "people" / "priya.md").write_text("Priya.\n")
    (vault.root / "acme billing.md").write_text("Billing.\n")
    (vault.root / "hub.md").write_text(text)
    vault.reconcile()
    result = vault.unlink("hub.md", "acme billing.md")
    assert result["removed"] == ["[[Acme Billing|billing]]"]
    assert (vault.root / "hub.md").read_text() == (
        "---\n# my links\nrelated_to:\n  - '[[people/priya]]'\nowner: me\n---\nBody [[acme-billing]] stays.\n"
    )
    # the body's wikilink is prose: still an edge
    assert [n["path"] for n in vault.related("hub.md", direction="out")["nodes"]][1:] == ["people/priya.md"]
    assert_index_matches_files(vault)


def test_unlinking_what_is_not_linked_changes_nothing(vault: Vault) -> None:
    a, b = _pair(vault)
    before = (vault.root / a["path"]).read_bytes()
    result = vault.unlink(a["id"], b["id"])
    assert result["changed"] is False and result["removed"] == []
    assert (vault.root / a["path"]).read_bytes() == before


def test_a_link_to_a_forgotten_memory_can_be_removed_by_its_text(vault: Vault) -> None:
    a, b = _pair(vault)
    vault.link(a["id"], b["id"])
    vault.forget(b["id"])
    with pytest.raises(NotFound):
        vault.unlink(a["id"], "no-such-note")
    result = vault.unlink(a["id"], "acme-billing")
    assert result["changed"] is True and result["target"] is None
    assert "related_to" not in (vault.root / a["path"]).read_text()
    assert_index_matches_files(vault)


def test_an_item_with_more_than_the_link_is_left_to_a_person(vault: Vault) -> None:
    (vault.root / "b.md").write_text("B.\n")
    (vault.root / "c.md").write_text("C.\n")
    (vault.root / "a.md").write_text('---\nrelated_to: ["see [[b]] and [[c]]"]\n---\nA.\n')
    vault.reconcile()
    with pytest.raises(InvalidInput, match="edit that line by hand"):
        vault.unlink("a.md", "b.md")
    assert (vault.root / "a.md").read_text() == '---\nrelated_to: ["see [[b]] and [[c]]"]\n---\nA.\n'


def test_a_save_during_unlink_stands(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _pair(vault)
    vault.link(a["id"], b["id"])
    monkeypatch.setattr(locking, "swap", person_saves_before_the_swap())
    with pytest.raises(SavedMeanwhile):
        vault.unlink(a["id"], b["id"])
    text = (vault.root / a["path"]).read_text()
    assert "[[acme-billing]]" in text and text.endswith("A line a person just typed.\n")
    assert_index_matches_files(vault)


def test_cli_unlink(vault: Vault) -> None:
    a, b = _pair(vault)
    vault.link(a["id"], b["id"], relation="depends_on")
    out = cli_ok("unlink", a["id"], b["id"], "-r", "depends_on", vault=vault.root)
    assert f"Unlinked {a['path']} -depends_on-> [[acme-billing]]" in out
    assert json.loads(cli_ok("--json", "unlink", a["id"], b["id"], "-r", "depends_on", vault=vault.root))["changed"] is False
    assert "depends_on" not in (vault.root / a["path"]).read_text()


@pytest.mark.anyio
async def test_unlink_memories_over_mcp(vault: Vault, client: Client) -> None:
    a, b = _pair(vault)
    await tool_ok(client, "link_memories", memory_id=a["id"], target_id=b["id"])
    result = await tool_ok(client, "unlink_memories", memory_id=a["id"], target_id=b["id"])
    assert result["removed"] == ["[[acme-billing]]"]
    assert "reserved" in await tool_error(client, "unlink_memories", memory_id=a["id"], target_id=b["id"], relation="tags")
    assert "related_to" not in (vault.root / a["path"]).read_text()
    assert_index_matches_files(vault)
