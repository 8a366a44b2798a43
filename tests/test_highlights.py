"""Highlights that cannot be taken for markdown: a hit's ``snippet`` is the note's text
as it is and ``highlights`` says where its matches are ([start, end) offsets), in
``search --json`` and over MCP alike; a person's snippet marks matches with bold on a
terminal and ``**…**`` elsewhere, escaping the text's own ``*``, never with brackets."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent_memory.cli.output import marked_snippet
from agent_memory.recall.highlights import split_marks
from agent_memory.recall.terms import MARK_CLOSE, MARK_OPEN
from agent_memory.vault.vault import Vault

from conftest import CONSOLE_SCRIPT, deadline, mcp_client, read_all, run_cli, tool_ok


def bracketed(hit: dict[str, Any]) -> str:
    """The snippet with each highlight in [brackets], as tests read it (never shown)."""
    text, out, pos = hit["snippet"], [], 0
    for start, end in hit["highlights"]:
        out += [text[pos:start], "[", text[start:end], "]"]
        pos = end
    return "".join(out + [text[pos:]])


EMBEDS = "See ![[Document.pdf#height=400]] and [[acme-billing]] for acme billing *rules*.\n"


def test_split_marks_gives_the_text_and_the_ranges() -> None:
    assert split_marks(f"a {MARK_OPEN}b{MARK_CLOSE} [[c]] {MARK_OPEN}d{MARK_CLOSE}") == ("a b [[c]] d", [[2, 3], [10, 11]])
    assert split_marks(f"x{MARK_CLOSE}y{MARK_OPEN}") == ("xy", [])  # stray marks: no range, no text
    assert split_marks(f"{MARK_OPEN}{MARK_CLOSE}z") == ("z", [])
    # offsets in code points, past characters outside the BMP; a second open restarts the match
    assert split_marks(f"😀 {MARK_OPEN}日本{MARK_CLOSE} é{MARK_OPEN}a{MARK_OPEN}bc{MARK_CLOSE}") == ("😀 日本 éabc", [[2, 4], [7, 9]])


def test_hits_carry_the_text_as_written_and_the_matches_as_offsets(vault: Vault) -> None:
    (vault.root / "billing.md").write_text(EMBEDS)
    vault.reconcile()
    [hit] = vault.search("acme")["hits"]
    assert hit["snippet"].strip() == EMBEDS.strip()  # no marker added to the note's own brackets
    assert [hit["snippet"][a:b] for a, b in hit["highlights"]] == ["acme", "acme"]
    [hit] = vault.search("document")["hits"]
    assert [hit["snippet"][a:b] for a, b in hit["highlights"]] == ["Document"]


def test_cjk_matches_are_ranges_too(vault: Vault) -> None:
    vault.remember("私たちの東京オフィスの住所は渋谷です。")
    [hit] = vault.search("東京")["hits"]
    assert [hit["snippet"][a:b] for a, b in hit["highlights"]] == ["東京"]


def test_search_json_carries_highlights_and_the_human_snippet_marks_without_brackets(vault: Vault) -> None:
    (vault.root / "billing.md").write_text(EMBEDS)
    vault.close()
    [hit] = json.loads(run_cli("search", "acme", "--json", vault=vault.root).stdout)["hits"]
    assert [hit["snippet"][a:b] for a, b in hit["highlights"]] == ["acme", "acme"]
    shown = run_cli("search", "acme", vault=vault.root).stdout
    assert "See ![[Document.pdf#height=400]] and [[**acme**-billing]] for **acme** billing \\*rules\\*." in shown


def test_marked_snippet_escapes_the_marker_and_styles_on_a_terminal() -> None:
    assert marked_snippet("a **b** c", [[8, 9]], terminal=False) == "a \\*\\*b\\*\\* **c**"
    assert marked_snippet("a b", [[2, 3]], terminal=True) == "a \x1b[1m\x1b[4mb\x1b[0m"
    assert marked_snippet("a\x1b]52;c;x\x07 b", [[11, 12]], terminal=False) == "a]52;c;x **b**"  # no escape gets out


@pytest.mark.anyio
async def test_mcp_hits_carry_highlights(vault: Vault) -> None:
    (vault.root / "billing.md").write_text(EMBEDS)
    vault.reconcile()
    async with mcp_client(vault) as client:
        found = await tool_ok(client, "recall", query="acme billing")
    [hit] = found["hits"]
    assert {hit["snippet"][a:b] for a, b in hit["highlights"]} == {"acme", "billing"}
    assert "[[acme-billing]]" in hit["snippet"]


def test_a_terminal_shows_matches_in_bold(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    (root / ".obsidian").mkdir(parents=True)
    (root / "billing.md").write_text(EMBEDS)
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_MEMORY")}
    try:
        done = subprocess.run([str(CONSOLE_SCRIPT), "search", "acme", "--dir", str(root)], env=env, stdin=subprocess.DEVNULL,
                              stdout=slave, stderr=subprocess.PIPE, timeout=deadline(120))
        os.close(slave)
        shown = read_all(master)
    finally:
        os.close(master)
    assert done.returncode == 0, done.stderr
    assert b"[[\x1b[1m\x1b[4macme\x1b[0m-billing]]" in shown and b"**acme**" not in shown
