"""A word that matches nothing tries its stem family before typo correction
(``linter`` -> "lint", "linting"), and typo correction leaves identifiers alone:
questions against a real FTS5 index, checked by the memory that comes first."""

from __future__ import annotations

import pytest

from agent_memory.recall.terms import identifier_like, stem_candidates, terms
from agent_memory.vault.vault import Vault


@pytest.fixture
def tools(vault: Vault) -> Vault:
    vault.remember("Run the linting step before pushing a branch.", title="Linting before push")
    vault.remember("The deploy script used the old token until March.", title="Deploy token")
    vault.remember("Scare tactics do not work on the on-call rota.", title="On-call rota")
    vault.remember("Hay que configurar el proxy antes de la demo.", title="Proxy")
    vault.remember("El equipo responde rápido a los incidentes.", title="Incidentes")
    vault.remember("Tag each release with burstmarkerjqq for the dashboard.", title="Release marker")
    vault.remember("Grafana dashboards are rebuilt on Tuesday.", title="Grafana")
    return vault


def test_a_derived_word_finds_its_stem(tools: Vault) -> None:
    result = tools.search("which linter do we use before pushing")
    assert result["hits"][0]["title"] == "Linting before push"
    assert result["hits"][0]["matched_terms"] == ["linter", "pushing"]
    assert "corrected" not in result
    assert tools.search("linters")["hits"][0]["title"] == "Linting before push"


def test_a_stem_needs_a_known_suffix_after_it(tools: Vault) -> None:
    # "scare" is indexed and starts "scarecrow", but "crow" is no suffix.
    result = tools.search("scarecrow")
    assert result["count"] == 0 and "corrected" not in result


def test_spanish_derived_words_find_their_family(tools: Vault) -> None:
    assert tools.search("configuración")["hits"][0]["title"] == "Proxy"
    assert tools.search("rápidamente")["hits"][0]["title"] == "Incidentes"


def test_a_word_that_matches_is_not_stemmed(vault: Vault) -> None:
    vault.remember("The linter config lives in pyproject.", title="Linter config")
    vault.remember("Linting runs in CI.", title="CI")
    assert [h["title"] for h in vault.search("linter")["hits"]] == ["Linter config"]


def test_stem_candidates_are_long_enough_and_end_in_a_suffix() -> None:
    assert stem_candidates("linter")[-1] == "lint"
    assert "create" in stem_candidates("creation")
    assert "run" not in stem_candidates("running")  # too short to trust
    assert "scare" not in stem_candidates("scarecrow")
    assert "configurar" in stem_candidates("configuracion")


def test_identifiers_are_not_corrected(tools: Vault) -> None:
    result = tools.search("burstmarkeriqq")
    assert "corrected" not in result and result["count"] == 0
    mixed = tools.search("GraFanna")
    assert "corrected" not in mixed and mixed["count"] == 0
    assert tools.search("grafanna")["corrected"] == {"grafanna": "grafana"}  # a plain word still is


def test_what_counts_as_an_identifier() -> None:
    assert terms("GraFanna")[0].ident
    flags = {t.text: t.ident for t in terms("burstmarkeriqq grafanna deploy_tokn build42x kuberentes")}
    assert flags == {"burstmarkeriqq": True, "grafanna": False, "deploy": True, "tokn": True,
                     "build42x": True, "kuberentes": False}
    assert identifier_like("xzkrtwq") and identifier_like("aaab") and not identifier_like("strengths")
    assert not identifier_like("rapidamente") and not identifier_like("queue")
    assert not any(map(identifier_like, ("bookkeeping", "skiing", "vacuum", "withhold", "iraq")))
