"""Edits by structure: `prepend` and `replace_section` (update_memory, `edit`), the
heading kept and every other byte of the file as it was, with the version rules of
the other edits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_memory.errors import InvalidInput, VersionConflict
from agent_memory.note.sections import prepend, replace_section
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, cli_ok, run_cli
from conftest import tool_error as fails, tool_ok as ok

pytestmark = pytest.mark.anyio

PLAN = ("\ufeff---\r\nid: plan\r\ncustom: [b, a]  # kept\r\n---\r\n# Q3 plan\r\n\r\nIntro.\r\n\r\n"
        "## Status\r\nDrafting.\r\nStill drafting.\r\n\r\n### Risks\r\nSlips.\r\n\r\n"
        "## Next\r\n```\r\n## Status\r\n```\r\nShip it.\r\n")


def test_replace_section_keeps_the_heading_and_every_other_byte() -> None:
    done = replace_section(PLAN, "## status", "Shipped on Friday.\nAll green.")
    before, after = PLAN.split("## Status\r\n", 1)[0], PLAN.split("## Next", 1)[1]
    assert done == before + "## Status\r\nShipped on Friday.\r\nAll green.\r\n\r\n## Next" + after
    # a deeper heading belongs to the section; the fenced "## Status" is code, not a heading
    assert "### Risks" not in done and done.count("## Status") == 2
    assert replace_section(PLAN, "Risks", "None.").split("### Risks\r\n")[1].startswith("None.\r\n\r\n## Next")
    assert replace_section(PLAN, "### Risks", "") .count("Slips") == 0


@pytest.mark.parametrize(("heading", "reason"), [
    ("## Nope", "no heading '## Nope'"), ("# Status", "no heading '# Status'"), ("  ", "empty"),
])
def test_a_section_that_is_not_there_is_named(heading: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        replace_section(PLAN, heading, "x")


def test_two_headings_of_one_name_need_the_level() -> None:
    text = "# Notes\n\n## Log\na\n\n### Log\nb\n"
    with pytest.raises(ValueError, match="2 headings"):
        replace_section(text, "Log", "x")
    assert replace_section(text, "### Log", "c") == "# Notes\n\n## Log\na\n\n### Log\nc\n"


def test_prepend_goes_after_a_title_heading_and_keeps_the_rest() -> None:
    assert prepend(PLAN, "TL;DR: on track.").endswith("# Q3 plan\r\n\r\nTL;DR: on track.\r\n\r\nIntro.\r\n\r\n"
                                                      + PLAN.split("Intro.\r\n\r\n", 1)[1])
    assert prepend("---\nid: x\n---\nBody.\n", "First.") == "---\nid: x\n---\nFirst.\n\nBody.\n"


def test_prepend_needs_no_version_and_replace_section_needs_the_one_read(vault: Vault) -> None:
    (vault.root / "plan.md").write_bytes(PLAN.encode())
    vault.reindex()
    assert vault.update("plan.md", prepend="TL;DR: on track.")["changed"]
    with pytest.raises(InvalidInput, match="version you read"):
        vault.update("plan.md", replace_section="## Status", section_content="Shipped.")
    seen = vault.get("plan.md")["version"]
    (vault.root / "plan.md").write_bytes((vault.root / "plan.md").read_bytes() + b"A line a person typed.\r\n")
    with pytest.raises(VersionConflict):
        vault.update("plan.md", replace_section="## Status", section_content="Shipped.", expected_version=seen)
    fresh = vault.get("plan.md")["version"]
    before = (vault.root / "plan.md").read_bytes()
    vault.update("plan.md", replace_section="## Status", section_content="Shipped.", expected_version=fresh)
    after = (vault.root / "plan.md").read_bytes()
    assert after.startswith(b"\xef\xbb\xbf---\r\nid: plan\r\ncustom: [b, a]  # kept\r\n")
    assert b"## Status\r\nShipped.\r\n\r\n## Next" in after and after.endswith(b"A line a person typed.\r\n")
    copies = [e for e in vault.trash_list() if e["reason"] == "replaced"]
    assert len(copies) == 1 and (vault.root / copies[0]["trash"]).read_bytes() == before  # the old bytes kept
    assert_index_matches_files(vault)


def test_one_body_edit_at_a_time_and_a_missing_heading_changes_nothing(vault: Vault) -> None:
    made = vault.remember("## Status\nOpen.")["memory"]
    for bad in ({"prepend": "a", "append": "b"}, {"prepend": "a", "replace_section": "Status", "section_content": "x"},
                {"section_content": "x"}, {"replace_section": "Status"}):
        with pytest.raises(InvalidInput):
            vault.update(made["id"], expected_version=made["version"], **bad)
    with pytest.raises(InvalidInput, match="no heading 'Nope'"):
        vault.update(made["id"], replace_section="Nope", section_content="x", expected_version=made["version"])
    assert vault.get(made["id"])["version"] == made["version"]


def test_cli_edit_prepend_and_replace_section(tmp_path: Path) -> None:
    root = tmp_path / ".memory"
    cli_ok("init", str(root))
    (root / "plan.md").write_text("# Plan\n\n## Status\nOpen.\n\n## Owner\nAna\n")
    cli_ok("edit", "plan.md", "--replace-section", "Status", "Done.", vault=root)
    cli_ok("edit", "plan.md", "--prepend", "Summary first.", vault=root)
    # (an edit through the tool dates a hand-written note outside git, as every tool edit does)
    assert (root / "plan.md").read_text().endswith("---\n# Plan\n\nSummary first.\n\n## Status\nDone.\n\n## Owner\nAna\n")
    shown = json.loads(cli_ok("--json", "show", "plan.md", vault=root))
    assert shown["title"] == "Plan"  # the title heading stays first
    bad = run_cli("edit", "plan.md", "--replace-section", "## Missing", "x", vault=root)
    assert bad.returncode == 1 and "no heading" in bad.stderr and "Traceback" not in bad.stderr


async def test_update_memory_sections_over_mcp_with_the_version_read(client: object, vault: Vault) -> None:
    made = (await ok(client, "remember", content="# Deploys\n\n## Window\nFridays.\n\n## Owner\nAna"))["memory"]
    assert "version you read" in await fails(client, "update_memory", memory_id=made["id"],
                                              replace_section="Window", section_content="Thursdays.")
    read = await ok(client, "get_memory", memory_id=made["id"])
    changed = await ok(client, "update_memory", memory_id=made["id"], replace_section="## Window",
                       section_content="Thursdays.", expected_version=read["version"])
    assert changed["memory"]["content"] == "# Deploys\n\n## Window\nThursdays.\n\n## Owner\nAna\n"
    first = await ok(client, "update_memory", memory_id=made["id"], prepend="Changed in July.")
    assert first["memory"]["content"].startswith("# Deploys\n\nChanged in July.\n\n## Window")
