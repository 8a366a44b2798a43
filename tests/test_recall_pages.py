"""What one recall returns: short memories whole, pages of one ranking, complete hits first."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_memory.errors import InvalidInput
from agent_memory.vault.vault import Vault
from conftest import Clock


def test_a_short_memory_comes_whole_in_its_hit_and_a_long_one_as_a_snippet(vault: Vault) -> None:
    short = "Customer ACME prefers deploys on Fridays.\n\nAsk Priya before a Friday deploy."
    written = vault.remember(short, title="ACME deploys")["memory"]
    vault.remember("ACME deploy runbook. " + "Step by step, check the dashboards. " * 60, title="ACME deploy runbook")
    hits = {h["title"]: h for h in vault.search("acme deploy")["hits"]}
    assert hits["ACME deploys"]["content"] == vault.get(written["id"])["content"]
    assert hits["ACME deploys"]["content"].strip() == short
    assert "content" not in hits["ACME deploy runbook"] and hits["ACME deploy runbook"]["snippet"]


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Vault]:
    """Sixty memories sharing words in different amounts, some written in one instant;
    written once for the module, as every test here only reads them."""
    clock = Clock()
    vault = Vault.init(tmp_path_factory.mktemp("many") / ".memory", clock=clock)
    for n in range(60):
        words = ["billing"] + (["invoice"] if n % 2 else []) + (["stripe"] if n % 3 == 0 else []) + (["refund"] if n % 5 == 0 else [])
        vault.remember(f"Note {n}: " + " ".join(words) + f" item{n}")
        if n % 4:
            clock.advance(minutes=1)
    yield vault
    vault.close()


@pytest.mark.parametrize("question", ["billing invoice stripe refund", "billing", "invoice refund zebra"])
@pytest.mark.parametrize("match", ["auto", "any", "all"])
def test_pages_joined_are_the_one_large_result(many: Vault, question: str, match: str) -> None:
    whole = many.search(question, match=match, limit=100)["hits"]
    joined, offset, pages = [], 0, 0
    while True:
        page = many.search(question, match=match, limit=7, offset=offset)
        joined += page["hits"]
        pages += 1
        if "next_offset" not in page:
            break
        assert page["next_offset"] == offset + 7
        offset = page["next_offset"]
    assert [h["id"] for h in joined] == [h["id"] for h in whole]
    assert pages == len(whole) // 7 + 1
    assert [h["id"] for h in many.search(question, match=match, limit=3)["hits"]] == [h["id"] for h in whole[:3]]


def test_the_last_page_has_no_next_offset_and_past_it_nothing(many: Vault) -> None:
    assert "next_offset" in many.search("refund", limit=5)  # 12 hold it
    last = many.search("refund", limit=5, offset=10)
    assert last["count"] == 2 and "next_offset" not in last
    assert many.search("refund", limit=5, offset=50)["count"] == 0
    with pytest.raises(InvalidInput, match="offset"):
        many.search("refund", offset=-1)


def test_auto_fills_the_page_after_the_complete_hits(many: Vault) -> None:
    result = many.search("stripe refund", limit=20)
    flags = [h["complete"] for h in result["hits"]]
    assert flags[:4] == [True] * 4 and not any(flags[4:]) and len(flags) == 20  # 0, 15, 30, 45 hold both
    assert all(set(h["matched_terms"]) < {"stripe", "refund"} for h in result["hits"][4:])


def test_the_cli_pages_with_offset(many: Vault) -> None:
    from conftest import cli_ok

    def run(*args: str) -> str:
        return cli_ok("search", "refund", "--limit", "5", *args, vault=many.root)

    assert "more: --offset 5" in run()
    last = run("--offset", "10")
    assert last.startswith("11. ") and "more:" not in last
