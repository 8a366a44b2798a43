"""``search --explain``: the SQL a search ran and where each hit's score came from."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from agent_memory.cli import Settings, cli
from agent_memory.vault import Vault
from conftest import Clock


def _cli(vault: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--dir", str(vault), *args], obj=Settings())
    assert result.exit_code == 0, result.output
    return result.output


def test_explain_lists_the_statements_that_reproduce_the_hits(vault: Vault) -> None:
    acme = vault.remember("Customer ACME prefers deploys on Fridays")["memory"]
    vault.remember("Globex prefers deploys on Mondays")
    result = vault.search("When does ACME prefer to deploy?", match="all", explain=True)
    explained = result["explain"]
    assert explained["profile"] == result["explain"]["profile"] and explained["statements"]
    # Each statement runs as printed; the term lookup of "acme" finds exactly the hit.
    lookups = [s for s in explained["statements"] if s["params"][:1] == ['"acme"'] and "m.rid" in s["sql"]]
    assert lookups
    rids = {row[0] for row in vault.index.query(lookups[0]["sql"], lookups[0]["params"])}
    assert rids == {row[0] for row in vault.index.query("SELECT rid FROM memories WHERE id = ?", [acme["id"]])}
    assert [s["id"] for s in explained["scores"]] == [h["id"] for h in result["hits"]] == [acme["id"]]
    assert explained["scores"][0]["parts"]["bm25"] == result["hits"][0]["score"]
    assert "explain" not in vault.search("When does ACME prefer to deploy?", match="all")


def test_partial_hits_explain_coverage_context_and_bm25(vault: Vault, clock: Clock) -> None:
    vault.remember("Who runs the billing service?")
    clock.advance(seconds=1)
    vault.remember("Priya, since March")
    result = vault.search("billing owner priya zebra", explain=True)
    assert result["match_mode"] == "any"
    for hit, scored in zip(result["hits"], result["explain"]["scores"]):
        parts = scored["parts"]
        assert set(parts) == {"coverage", "context", "bm25"}
        assert abs(parts["coverage"] + parts["context"] - hit["score"]) < 1e-3


def test_the_cli_prints_the_sql_and_the_score_parts(vault: Vault) -> None:
    vault.remember("Customer ACME prefers deploys on Fridays")
    out = _cli(vault.root, "search", "acme deploys", "--explain")
    assert "SELECT m.rid FROM fts CROSS JOIN memories m" in out and 'params ["\\"acme\\""' in out
    assert "score" in out and "bm25" in out
    data = json.loads(_cli(vault.root, "--json", "search", "acme deploys", "--explain"))
    assert data["explain"]["statements"][0]["sql"].startswith("SELECT")
    assert "profile" not in _cli(vault.root, "search", "acme deploys")


def test_the_cli_picks_a_profile_and_explain_names_it(vault: Vault) -> None:
    vault.remember("Customer ACME prefers deploys on Fridays")
    assert "profile conversation;" in _cli(vault.root, "search", "acme", "--explain", "--profile", "conversation")
    assert "profile facts;" in _cli(vault.root, "search", "acme", "--explain")
    bad = CliRunner().invoke(cli, ["--dir", str(vault.root), "search", "acme", "--profile", "chat"], obj=Settings())
    assert bad.exit_code == 1 and "profile must be one of facts, conversation" in bad.output
