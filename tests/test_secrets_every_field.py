"""A credential in any one field of a write is refused (or, in warn mode, stored) with
the same words, whichever field holds it, and never reaches a file name: remember's
fields one by one, and each field of an imported item (made by hand, an export's front
matter, an export's raw text). The scans behind it skip work for texts that cannot hold
a credential; these pin what a person sees.

Fake tokens are assembled at run time, so this file holds nothing token-shaped.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path
from typing import Any

import pytest

from agent_memory.trust import approvals, credentials
from agent_memory.errors import SecretRefused
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files

_RNG = random.Random(11)
TOKEN = "gh" + "p_" + "".join(_RNG.choice(string.ascii_letters + string.digits) for _ in range(36))


def md_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md") if ".trash" not in p.parts)


def warn_mode(vault: Vault) -> None:
    (vault.root / ".agent-memory.toml").write_text('[secrets]\nmode = "warn"\n')
    approvals.approve(vault.root)


def refusal(where: str, line: int = 1, secret: str = TOKEN) -> str:
    """The refusal a person reads for the one token in ``where`` (kind, line, fingerprint)."""
    return (f"Refused: found what looks like a credential in {where}: GitHub token (line {line}, fingerprint "
            f"{credentials.fingerprint(secret)}). Nothing was written. Remove the secret and remember where it "
            "lives instead")


def as_written(field: str) -> str:
    """The token as the file holds it: tags are written lower-cased."""
    return TOKEN.lower() if field == "tags" else TOKEN


HAND_MADE: dict[str, tuple[dict[str, Any], str]] = {
    # field -> (the item's fields holding the token, where the refusal says it is)
    "content": ({"content": f"The deploy bot uses {TOKEN} to push."}, "the content"),
    "content, later line": ({"content": f"The deploy bot pushes on Fridays.\nIts token: {TOKEN}"}, "the content"),
    "title": ({"title": f"bot {TOKEN}"}, "the front matter"),
    "source": ({"source": f"pasted {TOKEN}"}, "the front matter"),
    "tags": ({"tags": ["ops", TOKEN]}, "the front matter"),
    "type": ({"type": f"token {TOKEN}"}, "the front matter"),
    "aliases": ({"aliases": [f"bot {TOKEN}"]}, "the front matter"),
    "links": ({"links": {"related_to": [f"bot {TOKEN}"]}}, "the front matter"),
}


@pytest.mark.parametrize("field", list(HAND_MADE))
def test_an_imported_item_with_a_credential_in_any_field_refuses_the_batch_in_the_same_words(
        vault: Vault, field: str) -> None:
    fields, where = HAND_MADE[field]
    line = 2 if field == "content, later line" else 1
    items = [{"content": "A harmless fact."}, {"content": "Another harmless fact."},
             {"content": "The deploy bot pushes on Fridays.", **fields}]
    with pytest.raises(SecretRefused) as refused:
        vault.import_memories(items)
    message = str(refused.value)
    assert message.startswith(f"Item 2: {refusal(where, line, as_written(field))}"), message
    assert message.endswith("Nothing was imported.") and TOKEN not in message
    assert md_files(vault.root) == []
    assert vault.index.query("SELECT count(*) FROM memories")[0][0] == 0


@pytest.mark.parametrize("field", list(HAND_MADE))
def test_in_warn_mode_an_imported_credential_is_stored_but_never_named(vault: Vault, field: str) -> None:
    warn_mode(vault)
    fields, _ = HAND_MADE[field]
    first_line = {"content": f"{TOKEN} pushes on Fridays.\nThe deploy bot.", "title": None}
    for extra in ({}, first_line):
        item = {"content": "The deploy bot pushes on Fridays.", **fields, **extra}
        item = {k: v for k, v in item.items() if v is not None}
        result = vault.import_memories([item])
        assert result["imported"] == 1, result
        [path] = result["paths"]
        assert TOKEN.lower() not in path.lower() and TOKEN[4:20].lower() not in path.lower(), path
        assert (TOKEN if extra else as_written(field)) in (vault.root / path).read_text(encoding="utf-8")
    assert_index_matches_files(vault)


def test_an_exports_front_matter_or_raw_text_with_a_credential_is_refused_in_the_same_words(vault: Vault) -> None:
    clean = vault.remember("The deploy bot pushes on Fridays.", title="Deploy bot")["memory"]
    [item] = vault.export_memories()
    raw = item["raw"]
    cases = [
        ({**item, "path": "a/one.md", "front_matter": {**item["front_matter"], "source": f"pasted {TOKEN}"}},
         refusal("the front matter")),
        ({"path": "a/two.md", "raw": raw.replace("Deploy bot", f"Deploy bot {TOKEN}", 1)},  # the raw text alone
         refusal("the file text", line=raw.split("\n").index("title: Deploy bot") + 1)),
        ({**item, "path": "a/three.md", "content": f"It pushes with\n{TOKEN}", "raw": None},
         refusal("the content", line=2)),
    ]
    before = md_files(vault.root)
    for exported, expected in cases:
        exported = {k: v for k, v in exported.items() if v is not None}
        with pytest.raises(SecretRefused) as refused:
            vault.import_memories([exported])
        assert str(refused.value).startswith(f"Item 0: {expected}"), str(refused.value)
        assert TOKEN not in str(refused.value)
    assert md_files(vault.root) == before == [clean["path"]]


REMEMBERED = {
    "content": ({"content": f"The deploy bot uses {TOKEN}"}, "the content"),
    "title": ({"title": f"bot {TOKEN}"}, "the title"),
    "source": ({"source": f"pasted {TOKEN}"}, "the source"),
    "tags": ({"tags": ["ops", TOKEN]}, "the tags"),
    "type": ({"type": f"bot {TOKEN}"}, "the type"),
}


@pytest.mark.parametrize("field", list(REMEMBERED))
def test_remember_refuses_a_credential_in_any_field_in_the_same_words(vault: Vault, field: str) -> None:
    fields, where = REMEMBERED[field]
    call = {"content": "The deploy bot pushes on Fridays.", **fields}
    with pytest.raises(SecretRefused) as refused:
        vault.remember(**call)
    message = str(refused.value)
    assert message.startswith(refusal(where, 1, as_written(field))), message
    assert TOKEN not in message and md_files(vault.root) == []


def test_a_remembered_credential_never_names_its_file(vault: Vault) -> None:
    """Warn mode stores it; the name comes from the content with the token and a
    password's value redacted, however the first line writes them."""
    warn_mode(vault)
    firsts = [f"{TOKEN} pushes on Fridays", f"**{TOKEN}** pushes", f"The bot token: {TOKEN}",
              "DB_PASSWORD=hunter2 for staging", "the wifi password is now hunter2, ask Bo",
              "Paſſword: hunter2 for the router"]
    for first in firsts:
        result = vault.remember(f"{first}\nMore about the deploy bot.")
        path = result["memory"]["path"]
        assert TOKEN.lower() not in path.lower() and TOKEN[4:20].lower() not in path.lower(), path
        assert "hunter2" not in path, path
    assert len(md_files(vault.root)) == len(firsts)
    assert_index_matches_files(vault)


def test_import_and_remember_name_the_same_text_alike(vault: Vault) -> None:
    """One rule for names: an item imported without a title gets the name remember
    gives the same content, credentials and passwords' values redacted."""
    warn_mode(vault)
    contents = [f"The bot token: {TOKEN} rotates monthly", "DB_PASSWORD=hunter2 for staging, ask Bo",
                "A plain fact about deploys"]
    remembered = [vault.remember(c, namespace="a")["memory"]["path"].rsplit("/", 1)[1] for c in contents]
    result = vault.import_memories([{"content": c, "namespace": "b"} for c in contents])
    imported = [p.rsplit("/", 1)[1] for p in result["paths"]]
    assert [name.split(".md")[0].rsplit("-2", 1)[0] for name in imported] == [
        name.split(".md")[0] for name in remembered], (imported, remembered)
    assert json.dumps(imported).count("hunter2") == 0
