"""``search --explain``: the SQL a search ran and where each hit's score came from."""

from __future__ import annotations

import json


from agent_memory.vault.vault import Vault
from conftest import Clock, cli_ok, run_cli


def test_explain_lists_the_statements_that_reproduce_the_hits(vault: Vault) -> None:
    acme = vault.remember("Customer ACME prefers deploys on Fridays")["memory"]
    vault.remember("Globex prefers deploys on Mondays")
    result = vault.search("When does ACME prefer to deploy?", match="all", explain=True)
    explained = result["explain"]
    assert explained["profile"] == result["explain"]["profile"] and explained["statements"]
    # Each statement runs as printed; the one that ranks the memories holding every term
    # finds exactly the hit.
    ran = [vault.index.query(s["sql"], s["params"]) for s in explained["statements"]]
    ranking = [rows for s, rows in zip(explained["statements"], ran) if "hit_rid" in s["sql"]]
    assert len(ranking) == 1
    assert [row["hit_rid"] for row in ranking[0]] == [
        row[0] for row in vault.index.query("SELECT rid FROM memories WHERE id = ?", [acme["id"]])]
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
    out = cli_ok("search", "acme deploys", "--explain", vault=vault.root)
    assert "SELECT rowid FROM fts WHERE fts MATCH ?" in out and 'params ["\\"acme\\""' in out
    assert "score" in out and "bm25" in out
    data = json.loads(cli_ok("--json", "search", "acme deploys", "--explain", vault=vault.root))
    assert data["explain"]["statements"][0]["sql"].startswith(("SELECT", "WITH"))
    assert "profile" not in cli_ok("search", "acme deploys", vault=vault.root)


def test_the_cli_picks_a_profile_and_explain_names_it(vault: Vault) -> None:
    vault.remember("Customer ACME prefers deploys on Fridays")
    assert "profile conversation;" in cli_ok("search", "acme", "--explain", "--profile", "conversation", vault=vault.root)
    assert "profile facts;" in cli_ok("search", "acme", "--explain", vault=vault.root)
    bad = run_cli("search", "acme", "--profile", "chat", vault=vault.root)
    assert bad.returncode == 1 and "profile must be one of facts, conversation" in bad.stderr and bad.stdout == ""
