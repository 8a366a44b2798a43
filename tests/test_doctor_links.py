"""``doctor`` names broken links (a wikilink or relation that resolves to no file) and
files holding a credential (by kind and fingerprint, never the value)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_memory.trust import approvals
from agent_memory.trust.credentials import find_credentials
from agent_memory.vault.doctor import check_vault
from agent_memory.vault.vault import Vault

from conftest import run_cli

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "obsidian-help"
AWS_KEY = "AKIA" + "QYLPMN5HHHFPZAM2"  # a made-up key of the real shape


def _checks(root: Path) -> dict:
    return {c.name: c for c in check_vault(root)}


def test_broken_links_are_listed_and_working_ones_are_not(vault: Vault) -> None:
    root = vault.root
    (root / "people").mkdir()
    (root / "people" / "Priya.md").write_text("Priya.\n")
    (root / "diagram.png").write_bytes(b"\x89PNG")
    (root / "hub.md").write_text(
        '---\nrelated_to: ["[[priya]]", "[[Gone Note]]"]\n---\n'
        "[[people/Priya]] [[Priya.md|her]] [[Priya#Role]] ![[diagram.png]] [[hub]]\n"
        "[[Nowhere]] and [[other/Priya]] and `[[in code]]`\n"
    )
    checks = _checks(root)
    assert not checks["broken links"].ok
    assert checks["broken links"].items == [
        "hub.md: related_to -> [[Gone Note]]",
        "hub.md: links_to -> [[Nowhere]]",
        "hub.md: links_to -> [[other/Priya]]",
    ]


def test_a_link_to_a_forgotten_memory_is_broken_until_unlinked(vault: Vault) -> None:
    a = vault.remember("ACME prefers Friday deploys")["memory"]
    b = vault.remember("ACME billing runs on Stripe", title="acme billing")["memory"]
    vault.link(a["id"], b["id"])
    assert _checks(vault.root)["broken links"].ok
    vault.forget(b["id"])
    assert _checks(vault.root)["broken links"].items == [f"{a['path']}: related_to -> [[acme-billing]]"]
    vault.unlink(a["id"], "acme-billing")
    assert _checks(vault.root)["broken links"].ok


def test_a_hand_written_credential_is_named_by_kind_and_fingerprint_never_shown(vault: Vault) -> None:
    (vault.root / "ci.md").write_text(f"The CI uses {AWS_KEY} for uploads.\n")
    (vault.root / "fine.md").write_text("Version 1.2.3, sha 3f786850e387550fdab836ed7e6dc881de23001b.\n")
    [finding] = find_credentials(AWS_KEY)
    check = _checks(vault.root)["credentials"]
    assert not check.ok
    assert check.items == [f"ci.md: {finding.kind} (line 1, fingerprint {finding.fingerprint})"]
    done = run_cli("doctor", vault=vault.root)
    assert done.returncode == 1 and "fingerprint" in done.stdout and AWS_KEY not in done.stdout + done.stderr
    as_json = run_cli("--json", "doctor", vault=vault.root)
    assert AWS_KEY not in as_json.stdout + as_json.stderr and json.loads(as_json.stdout)["ok"] is False
    # approved in the vault's settings: no longer a problem
    (vault.root / ".agent-memory.toml").write_text(f'[secrets]\nallow = ["{finding.fingerprint}"]\n')
    assert not _checks(vault.root)["credentials"].ok  # not until this clone approves it
    approvals.approve(vault.root, ["secrets.allow"])
    assert _checks(vault.root)["credentials"].ok


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"the obsidian-help corpus is not at {CORPUS} (it is not part of the repository)")
def test_on_obsidian_help_no_link_to_an_existing_note_is_called_broken() -> None:
    names = {p.stem.casefold() for p in CORPUS.rglob("*.md")}
    check = _checks(CORPUS)["broken links"]
    assert check.items, "the corpus (without its attachments) has broken links to show"
    for item in check.items:
        target = item.rsplit("[[", 1)[1][:-2]
        assert target.rsplit("/", 1)[-1].casefold().removesuffix(".md") not in names or "/" in target, item
    assert _checks(CORPUS)["credentials"].ok


@pytest.mark.parametrize(("version", "supported"), [
    ("2.3.0", True), ("2.3.1", True), ("2.4.0", True), ("2.10.2", True), ("2.2.0", False), ("1.30.0", False),
    ("3.0.0", False), ("2.3.0rc1", True), ("garbage", False),
])
def test_doctor_accepts_the_mcp_range_the_package_pins(version: str, supported: bool) -> None:
    from agent_memory.vault.doctor import _supported_mcp

    assert _supported_mcp(version) is supported
