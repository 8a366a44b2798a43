"""recall's first pass (``Engine.first_pass``) against the general path it short-cuts:
the same hits in the same order, with the same scores, ``complete`` flags, snippets and
highlights, for varied questions on a generated vault of tool memories (every word
present, one missing, typos, prefixes, filters, pages, each match mode and profile)."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import pytest

from agent_memory.disk.layout import new_id
from agent_memory.recall import engine
from agent_memory.recall.rank import CONVERSATION, FACTS, NOTES
from agent_memory.vault.vault import Vault

WORDS = ("deploy release billing invoice postgres cluster backup restore incident outage latency "
         "timeout retry payment refund report dashboard alert oncall rotation sprint roadmap "
         "migration schema staging pipeline docker registry firewall certificate renewal password "
         "policy audit privacy export budget forecast hiring laptop travel conference").split()
NAMES = "acme globex initech umbrella hooli stark".split()
NAMESPACES = ("support", "engineering", "ops")
WEIGHTS = [1 / (rank + 1) for rank in range(len(WORDS))]  # a few words in most memories, most in few


def sentence(rng: random.Random) -> str:
    words = rng.choices(WORDS, weights=WEIGHTS, k=rng.randint(5, 10))
    words.insert(rng.randrange(len(words)), rng.choice(NAMES).capitalize())
    return " ".join(words).capitalize() + "."


def write_vault(root: Path, count: int, supersedes: bool) -> None:
    """``count`` memories in the tool's dated layout, a few of each kind the first pass
    must treat as the general path does: long bodies (a window picked in Python), one
    whose body holds a NUL (SQLite reads its length short), an expired one, and (with
    ``supersedes``) memories replacing others."""
    rng = random.Random(3)
    for i in range(count):
        day = f"2025/{1 + i // 200:02d}/{1 + (i // 8) % 28:02d}"
        stamp = f"2025-{1 + i // 200:02d}-{1 + (i // 8) % 28:02d}T{i % 24:02d}:00:00Z"
        body = " ".join(sentence(rng) for _ in range(rng.randint(1, 4)))
        if i % 97 == 5:
            body = " ".join(sentence(rng) for _ in range(300))  # over 4,096 characters
        if i == 77:
            body = "Billing acme nulword\x00 " + " ".join(sentence(rng) for _ in range(300))
        front = [f"id: {new_id(1_735_689_600_000 + i * 60_000)}", f"namespace: {NAMESPACES[i % 3]}", f"tags: [{', '.join(sorted(set(rng.sample(WORDS[:12], 2))))}]",
                 f"created: {stamp}", f"updated: {stamp if i % 5 else '2025-01-01T00:00:00Z'}"]
        if i == 40:
            front.append("expires: 2025-02-01T00:00:00Z")
        if supersedes and i % 50 == 49:
            front.append(f'supersedes: ["[[memory-{i - 30}]]"]')
        folder = root / day
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"memory-{i}.md").write_text("---\n" + "\n".join(front) + "\n---\n" + body + "\n", encoding="utf-8")


def questions() -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(11)
    kinds: list[dict[str, Any]] = [
        {}, {"match": "all"}, {"match": "any"}, {"namespace": "support"}, {"tags": ["deploy"]}, {"limit": 3},
        {"offset": 5}, {"offset": 10, "limit": 5}, {"namespace": "ops", "tags": ["billing"], "match": "all"},
        {"limit": 50}, {"since": "2025-03-01T00:00:00Z"},
    ]
    out = []
    for i in range(220):
        text = " ".join(rng.choices(WORDS + NAMES, weights=WEIGHTS + [0.05] * len(NAMES), k=rng.choice([1, 2, 2, 3, 4])))
        if i % 6 == 1:
            text += " zzzmissing"  # a word no memory holds
        if i % 9 == 2:
            text = text.replace("e", "a", 1) + " certificat"  # typos, a prefix
        if i % 13 == 3:
            text = "current " + text  # the newest first
        out.append((text, kinds[i % len(kinds)]))
    return [*out, ("nulword", {}), ("nulword billing", {"match": "all"})]  # the body holding a NUL


def searched(vault: Vault, first_pass: bool, monkeypatch: pytest.MonkeyPatch, **options: Any) -> list[Any]:
    """Every question's result, and how it was answered: "first" (the first pass gave
    the page), "on" (the general path went on after it) or "general" (it alone ran)."""
    monkeypatch.setattr(engine, "FIRST_PASS", first_pass)
    answered: list[str] = []
    page = engine.Engine.first_page
    probe = engine.Engine.first_pass

    def first_page(self: engine.Engine, *args: Any) -> engine.Found:
        answered.append("first")
        return page(self, *args)

    def first_pass(self: engine.Engine, *args: Any) -> Any:
        answered.append("on")
        return probe(self, *args)

    monkeypatch.setattr(engine.Engine, "first_page", first_page)
    monkeypatch.setattr(engine.Engine, "first_pass", first_pass)
    out = []
    for text, kind in questions():
        answered.clear()
        result = dict(vault.search(text, **kind, **options))
        out.append((text, kind, result, (answered or ["general"])[-1]))
    return out


@pytest.mark.parametrize("supersedes", [False, True])
@pytest.mark.parametrize("config", [None, CONVERSATION, dataclasses.replace(FACTS, common_df=40),
                                    dataclasses.replace(CONVERSATION, common_df=40), NOTES],
                         ids=["default-facts", "conversation", "facts-common-40", "conversation-common-40", "notes"])
def test_the_first_pass_answers_as_the_general_path_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        supersedes: bool, config: Any) -> None:
    write_vault(tmp_path / "vault", 600, supersedes)
    vault = Vault(tmp_path / "vault")
    try:
        options = {"config": config} if config is not None else {}
        general = searched(vault, False, monkeypatch, **options)
        first = searched(vault, True, monkeypatch, **options)
    finally:
        vault.close()
    for (text, kind, expected, plain), (_, _, got, fast) in zip(general, first):
        assert got == expected, (text, kind)
        # "any" never takes the first pass, nor the notes' one weighted ranking but with "all"
        weighted = config is NOTES and kind.get("match") != "all"
        assert plain == "general" and (fast == "general") == (kind.get("match") == "any" or weighted)
    how = [fast for *_, fast in first]
    if supersedes:  # a replacement may move any hit: the general path goes on from the first pass
        assert how.count("first") == 0 and how.count("on") > (15 if config is NOTES else 150), how
    elif config is NOTES:  # "all" only: the questions that ask for every word
        assert how.count("first") > 5 and how.count("on") > 5, how
    else:  # both branches compared, on many questions each
        assert how.count("first") > 50 and how.count("on") > 50, how
    hits = [hit for _, _, result, _ in first for hit in result["hits"]]
    assert any(hit["complete"] for hit in hits) and any(not hit["complete"] for hit in hits)
    assert any("content" not in hit for hit in hits)  # long bodies among the hits compared
