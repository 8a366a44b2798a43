"""Recency intent: "current", "latest", "now", "still"... (and "actual", "último",
"ahora", "todavía") put the newest of the memories matching the same terms first, and
are not searched for themselves. Real FTS5 index, questions -> expected first hit."""

from __future__ import annotations

import pytest

from agent_memory.recall.terms import plan
from agent_memory.vault.vault import Vault
from conftest import Clock


@pytest.fixture
def rota(vault: Vault, clock: Clock) -> Vault:
    # The older memory is shorter, so BM25 alone ranks it first.
    vault.remember("Priya handles the VPN rotation.", title="VPN rotation: Priya")
    clock.advance(days=30)
    vault.remember("From this week on the VPN rotation is handled by Omar, who took it over from Priya "
                   "after the reorganisation of the platform team.", title="VPN rotation: Omar")
    clock.advance(days=30)
    vault.remember("La base de datos de pruebas la mantiene Lucía.", title="Pruebas: Lucía")
    clock.advance(days=30)
    vault.remember("Desde marzo la base de datos de pruebas la mantiene Jorge, del equipo de plataforma "
                   "que se encarga de todo lo relacionado con los entornos.", title="Pruebas: Jorge")
    return vault


def test_without_intent_bm25_decides(rota: Vault) -> None:
    assert rota.search("who handles the VPN rotation")["hits"][0]["title"] == "VPN rotation: Priya"


@pytest.mark.parametrize("question", [
    "who handles the VPN rotation now",
    "who is the current VPN rotation handler",
    "latest on VPN rotation",
    "who still handles the VPN rotation",
    "today's VPN rotation",
    "newest VPN rotation owner",
])
def test_recency_words_put_the_newest_first(rota: Vault, question: str) -> None:
    result = rota.search(question)
    assert result["hits"][0]["title"] == "VPN rotation: Omar"
    assert not {"current", "latest", "still", "today", "newest"} & set(result["terms"])


@pytest.mark.parametrize("question", [
    "¿quién mantiene ahora la base de datos de pruebas?",
    "¿quién mantiene todavía la base de datos de pruebas?",
    "responsable actual de la base de datos de pruebas",
    "último responsable de la base de datos de pruebas",
])
def test_spanish_recency_words(rota: Vault, question: str) -> None:
    assert rota.search(question)["hits"][0]["title"] == "Pruebas: Jorge"


def test_newest_only_among_memories_matching_the_same_terms(vault: Vault, clock: Clock) -> None:
    vault.remember("Billing exports run from the reporting replica.", title="exports")
    clock.advance(days=10)
    vault.remember("Billing moved to Stripe.", title="stripe")  # newer, but fewer terms
    clock.advance(days=10)
    vault.remember("Billing page redesign shipped.", title="page")
    result = vault.search("current billing exports replica")
    assert result["hits"][0]["title"] == "exports"
    assert [h["title"] for h in result["hits"][1:]] == ["page", "stripe"]  # equal terms: newest first


def test_intent_words_alone_are_still_searched() -> None:
    assert [t.text for t in plan("latest").terms] == ["latest"]
    assert plan("current budget").newest and not plan("budget").newest
    assert not plan("what happened today").newest and plan("what happened today").words == ["happened", "today"]
