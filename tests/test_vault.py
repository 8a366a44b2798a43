"""Every Vault operation on real files and a real SQLite index, each scenario ending
with "the index equals a fresh rebuild from the files"."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from agent_memory.note.parse import file_version
from agent_memory.errors import Duplicate, InvalidInput, NotFound, VaultError, VersionConflict
from agent_memory.vault.vault import Vault

from agent_memory.index.facts import racy
from conftest import Clock, assert_index_matches_files, index_snapshot

ACME = "Customer ACME prefers deploys on Fridays."


def write(vault: Vault, rel: str, text: str | bytes) -> Path:
    path = vault.root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def files(vault: Vault) -> dict[str, bytes]:
    """Every file of the vault but the index: what a user would see or commit."""
    return {
        p.relative_to(vault.root).as_posix(): p.read_bytes()
        for p in sorted(vault.root.rglob("*"))
        if p.is_file() and p.relative_to(vault.root).parts[0] != ".index"
    }


def paths(vault: Vault) -> list[str]:
    return sorted(p for p in files(vault) if not p.startswith("."))


def listed(vault: Vault, **filters) -> list[str]:
    return sorted(m["path"] for m in vault.list(limit=100, **filters)["memories"])


def found(vault: Vault, query: str, **filters) -> list[str]:
    return sorted(h["path"] for h in vault.search(query, **filters)["hits"])


# --------------------------------------------------------------------------- remember


def test_remember_writes_the_spec_file_under_the_utc_date(vault: Vault, clock: Clock) -> None:
    clock.now = dt.datetime(2026, 7, 20, 5, 0, tzinfo=dt.timezone(dt.timedelta(hours=-4)))  # 09:00 UTC
    result = vault.remember(ACME, namespace="support", tags=["customer", "deploy"], source="user note 2026-07-20",
                            ttl_days=31)
    memory = result["memory"]
    assert result["deduplicated"] is False
    assert memory["path"] == "2026/07/20/customer-acme-prefers-deploys-on-fridays.md"
    assert re.fullmatch(r"[0-9a-hjkmnp-tv-z]{16}", memory["id"])
    assert (vault.root / memory["path"]).read_text() == (
        "---\n"
        f"id: {memory['id']}\n"
        "namespace: support\n"
        "tags: [customer, deploy]\n"
        "created: 2026-07-20T09:00:00Z\n"
        "updated: 2026-07-20T09:00:00Z\n"
        "expires: 2026-08-20T09:00:00Z\n"
        "source: user note 2026-07-20\n"
        "---\n"
        "Customer ACME prefers deploys on Fridays.\n"
    )
    assert memory["version"] == file_version((vault.root / memory["path"]).read_bytes())
    assert (memory["namespace"], memory["tags"], memory["title"]) == ("support", ["customer", "deploy"], ACME)
    assert (memory["created"], memory["expires"], memory["source"]) == (
        "2026-07-20T09:00:00Z", "2026-08-20T09:00:00Z", "user note 2026-07-20")
    assert vault.get(memory["id"]) == memory
    assert_index_matches_files(vault)


def test_remember_dates_the_folder_in_utc_not_local_time(vault: Vault, clock: Clock) -> None:
    clock.now = dt.datetime(2026, 7, 20, 22, 30, tzinfo=dt.timezone(dt.timedelta(hours=-4)))
    memory = vault.remember("Late evening in New York")["memory"]
    assert memory["path"] == "2026/07/21/late-evening-in-new-york.md"
    assert memory["created"] == "2026-07-21T02:30:00Z"
    assert_index_matches_files(vault)


def test_remember_minimal_file_and_title(vault: Vault) -> None:
    plain = vault.remember("Just a fact")["memory"]
    titled = vault.remember("Body text here", title="Deploy rules: Fridays")["memory"]
    assert (vault.root / plain["path"]).read_text() == (
        f"---\nid: {plain['id']}\nnamespace: default\ntags: []\ncreated: 2026-07-20T09:00:00Z\n"
        "updated: 2026-07-20T09:00:00Z\n---\nJust a fact\n"
    )
    assert titled["path"] == "2026/07/20/deploy-rules-fridays.md"
    assert 'title: "Deploy rules: Fridays"\n' in (vault.root / titled["path"]).read_text()
    assert titled["title"] == "Deploy rules: Fridays"
    assert_index_matches_files(vault)


def test_remember_crlf_content_makes_an_lf_file(vault: Vault) -> None:
    memory = vault.remember("Pasted on Windows\r\nsecond line\r\n")["memory"]
    data = (vault.root / memory["path"]).read_bytes()
    assert b"\r" not in data and data.endswith(b"---\nPasted on Windows\nsecond line\n")
    assert memory["content"] == "Pasted on Windows\nsecond line\n"
    assert_index_matches_files(vault)


def test_remember_same_slug_gets_numbered_files(vault: Vault) -> None:
    a = vault.remember("Deploys: Fridays!")["memory"]
    b = vault.remember("Deploys, Fridays?")["memory"]
    c = vault.remember("deploys fridays")["memory"]
    assert [a["path"], b["path"], c["path"]] == [
        "2026/07/20/deploys-fridays.md", "2026/07/20/deploys-fridays-2.md", "2026/07/20/deploys-fridays-3.md"]
    assert len({a["id"], b["id"], c["id"]}) == 3
    assert_index_matches_files(vault)


def test_ids_follow_creation_order_under_a_frozen_clock(vault: Vault) -> None:
    ids = [vault.remember(f"Fact number {n}")["memory"]["id"] for n in range(30)]
    assert ids == sorted(ids) and len(set(ids)) == 30
    assert_index_matches_files(vault)


# --------------------------------------------------------------------------- dedup


def test_exact_duplicate_in_the_namespace_is_not_stored_twice(vault: Vault, clock: Clock) -> None:
    first = vault.remember(ACME, namespace="support", tags=["customer"])["memory"]
    before = files(vault)
    again = vault.remember("  customer acme   PREFERS deploys\non fridays.  ", namespace="support", tags=["Customer"])
    assert again["deduplicated"] is True
    assert again["memory"]["id"] == first["id"]
    assert files(vault) == before  # nothing new to merge: nothing written
    clock.advance(hours=1)
    merged = vault.remember(ACME, namespace="support", tags=["deploy", "CUSTOMER"])
    assert merged["deduplicated"] is True and merged["memory"]["id"] == first["id"]
    assert merged["memory"]["tags"] == ["customer", "deploy"]
    text = (vault.root / first["path"]).read_text()
    assert "tags: [customer, deploy]\n" in text and "updated: 2026-07-20T10:00:00Z\n" in text
    assert paths(vault) == [first["path"]]
    assert_index_matches_files(vault)


def test_same_content_in_another_namespace_is_a_new_memory(vault: Vault) -> None:
    a = vault.remember(ACME, namespace="support")
    b = vault.remember(ACME, namespace="sales")
    assert b["deduplicated"] is False and b["memory"]["id"] != a["memory"]["id"]
    assert len(paths(vault)) == 2
    assert_index_matches_files(vault)


def test_different_content_is_not_a_duplicate(vault: Vault) -> None:
    vault.remember(ACME)
    assert vault.remember(ACME + " Mostly.")["deduplicated"] is False
    assert_index_matches_files(vault)


def test_a_fact_remembered_just_after_a_person_emptied_its_note_is_written_again(vault: Vault) -> None:
    """An empty file looks like an editor mid-save, so for two seconds its old row
    stands. Remembering the same fact then must not answer "already stored": the old
    row is no proof the fact is written anywhere any more."""
    made = vault.remember(ACME)["memory"]
    (vault.root / made["path"]).write_text("")  # emptied a moment ago
    again = vault.remember(ACME)
    assert again["deduplicated"] is False and again["memory"]["path"] != made["path"]
    assert (vault.root / again["memory"]["path"]).read_text().endswith(ACME + "\n")


def test_dedup_checks_the_file_a_human_changed_since_it_was_indexed(vault: Vault) -> None:
    edited = vault.remember(ACME, tags=["customer"])["memory"]
    deleted = vault.remember("Second fact about ACME", tags=["customer"])["memory"]
    path = vault.root / edited["path"]
    path.write_text(path.read_text().replace("Fridays", "Mondays"))  # no reconcile: the index is stale
    (vault.root / deleted["path"]).unlink()
    again = vault.remember(ACME, tags=["deploy"])
    assert again["deduplicated"] is False and again["memory"]["content"] == ACME + "\n"
    back = vault.remember("Second fact about ACME", tags=["new"])
    assert back["deduplicated"] is False and back["memory"]["tags"] == ["new"]
    assert found(vault, "fridays") == [again["memory"]["path"]]
    assert found(vault, "mondays") == [edited["path"]]
    assert_index_matches_files(vault)


def test_update_is_not_refused_as_a_duplicate_of_a_file_that_changed(vault: Vault) -> None:
    a = vault.remember(ACME)["memory"]
    b = vault.remember("Something else")["memory"]
    (vault.root / a["path"]).unlink()
    assert vault.update(b["id"], expected_version=vault.get(b["id"])["version"], content=ACME)["changed"] is True
    assert_index_matches_files(vault)


def test_dedup_finds_a_hand_written_file_with_the_same_content(vault: Vault) -> None:
    write(vault, "people/acme.md", "---\ntags: [customer]\n---\n" + ACME + "\n")
    vault.reconcile()
    result = vault.remember(ACME, tags=["deploy"])
    assert result["deduplicated"] is True and result["memory"]["id"] == "people/acme.md"
    assert (vault.root / "people/acme.md").read_text().startswith("---\ntags: [customer, deploy]\n")
    assert_index_matches_files(vault)


# --------------------------------------------------------------------------- update


HAND_WRITTEN = (
    "---\n"
    "title: Priya   # who she is\n"
    "zeta: 1\n"
    "aliases:\n"
    "  - Pri\n"
    "# a comment line\n"
    "tags:\n"
    "  - person\n"
    "alpha: [x, y]\n"
    "created: 2026-07-01T11:00:00+02:00\n"
    "updated: 2026-07-01T11:00:00+02:00\n"
    "---\n"
    "Priya leads billing at ACME.\n"
    "\n"
    "She prefers written questions.\n"
)
UPDATED_NOW = "updated: 2026-07-20T09:00:00Z\n"


def _hand(vault: Vault, text: str = HAND_WRITTEN) -> str:
    write(vault, "people/priya.md", text)
    vault.reconcile()
    return "people/priya.md"


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"add_tags": ["Lead"]}, HAND_WRITTEN.replace("  - person\n", "  - person\n  - lead\n")),
        ({"remove_tags": ["PERSON"]}, HAND_WRITTEN.replace("tags:\n  - person\n", "tags: []\n")),
        ({"add_tags": ["lead"], "remove_tags": ["person"]}, HAND_WRITTEN.replace("  - person\n", "  - lead\n")),
        ({"source": "call with Priya"}, HAND_WRITTEN.replace("---\nPriya", "source: call with Priya\n---\nPriya")),
        ({"namespace": "people"}, HAND_WRITTEN.replace("---\nPriya", "namespace: people\n---\nPriya")),
        ({"title": "Priya Rao"}, HAND_WRITTEN.replace("title: Priya   # who she is\n", "title: Priya Rao\n")),
        ({"content": "Priya left ACME in July."},
         HAND_WRITTEN[: HAND_WRITTEN.index("Priya leads")] + "Priya left ACME in July.\n"),
    ],
    ids=["add tag", "remove tag", "add and remove", "source", "namespace", "title", "content"],
)
def test_update_rewrites_only_the_keys_that_change(vault: Vault, change: dict, expected: str) -> None:
    rel = _hand(vault)
    result = vault.update(rel, **change, expected_version=vault.get(rel)["version"])
    assert result["changed"] is True
    expected = expected.replace("updated: 2026-07-01T11:00:00+02:00\n", UPDATED_NOW)
    assert (vault.root / rel).read_text() == expected
    assert result["memory"]["version"] == file_version(expected.encode())
    assert result["memory"]["id"] == rel  # no id was written into a human's file
    assert_index_matches_files(vault)


def test_a_ttl_on_a_persons_note_is_refused_and_the_file_left_alone(vault: Vault) -> None:
    rel = _hand(vault)
    with pytest.raises(InvalidInput, match="never expires; ttl_days is refused"):
        vault.update(rel, ttl_days=2)
    assert (vault.root / rel).read_text() == HAND_WRITTEN


def test_replacing_a_body_needs_the_version_the_caller_read(vault: Vault) -> None:
    memory = vault.remember(ACME)["memory"]
    path = vault.root / memory["path"]
    path.write_bytes(path.read_bytes().replace(b"Fridays", b"Fridays (said Priya)"))  # a person's edit
    memory = vault.get(memory["id"])
    before = path.read_bytes()
    with pytest.raises(InvalidInput, match="needs the version you read"):
        vault.update(memory["id"], content="ACME deploys on Mondays")
    with pytest.raises(InvalidInput, match="needs the version you read"):
        vault.update(memory["id"], tags=["a"])
    assert path.read_bytes() == before
    changed = vault.update(memory["id"], content="ACME deploys on Mondays", expected_version=memory["version"])
    copies = [e for e in vault.trash_list() if e["reason"] == "replaced"]
    assert [c["source"] for c in copies] == [memory["path"]]
    assert (vault.root / copies[0]["trash"]).read_bytes() == before
    assert changed["memory"]["content"] == "ACME deploys on Mondays\n"
    assert_index_matches_files(vault)


def test_append_and_exact_once_replace_need_no_version_and_keep_every_other_byte(vault: Vault) -> None:
    original = "\ufeff" + HAND_WRITTEN.replace("\n", "\r\n")
    rel = _hand(vault, original)
    vault.update(rel, append="She is in Lisbon in August.")
    text = (vault.root / rel).read_bytes().decode("utf-8")
    assert text.endswith("She prefers written questions.\r\nShe is in Lisbon in August.\r\n")
    vault.update(rel, replace_old="Lisbon", replace_new="Porto")
    after = (vault.root / rel).read_bytes().decode("utf-8")
    def unstamped(t: str) -> str:
        return re.sub(r"updated: [^\r\n]*", "updated: …", t)

    assert unstamped(after) == unstamped(text).replace("Lisbon", "Porto")
    with pytest.raises(InvalidInput, match="does not occur"):
        vault.update(rel, replace_old="Madrid", replace_new="Rome")
    vault.update(rel, append="Porto again.")
    with pytest.raises(InvalidInput, match="occurs 2 times"):
        vault.update(rel, replace_old="Porto", replace_new="Rome")
    with pytest.raises(InvalidInput, match="one body edit at a time"):
        vault.update(rel, append="x", replace_old="Porto", replace_new="Rome")
    assert vault.trash_list() == []  # merges keep no version copy: nothing was replaced
    assert_index_matches_files(vault)


def test_update_effects_are_visible(vault: Vault, clock: Clock) -> None:
    memory = vault.remember(ACME, namespace="support", tags=["customer"], source="chat")["memory"]
    clock.advance(days=1)
    result = vault.update(memory["id"], expected_version=vault.get(memory["id"])["version"], content="ACME now deploys on Thursdays.", add_tags=["deploy"],
                          remove_tags=["customer"], namespace="sales", source="", ttl_days=10)
    changed = result["memory"]
    assert (changed["id"], changed["path"]) == (memory["id"], memory["path"])
    assert changed["content"] == "ACME now deploys on Thursdays.\n"
    assert (changed["namespace"], changed["tags"], changed["source"]) == ("sales", ["deploy"], "")
    assert (changed["created"], changed["updated"], changed["expires"]) == (
        "2026-07-20T09:00:00Z", "2026-07-21T09:00:00Z", "2026-07-31T09:00:00Z")
    assert found(vault, "thursdays", namespace="sales") == [memory["path"]]
    assert found(vault, "fridays") == []
    assert listed(vault, namespace="support") == []
    assert listed(vault, tags=["deploy"]) == [memory["path"]]
    assert "source:" not in (vault.root / memory["path"]).read_text()
    cleared = vault.update(memory["id"], ttl_days=0)["memory"]
    assert cleared["expires"] is None and "expires:" not in (vault.root / memory["path"]).read_text()
    assert_index_matches_files(vault)


def test_update_without_a_real_change_writes_nothing(vault: Vault) -> None:
    rel = _hand(vault)
    result = vault.update(rel, expected_version=vault.get(rel)["version"], add_tags=["person"], remove_tags=["absent"], content="Priya leads billing at ACME.\n\n"
                          "She prefers written questions.", title="Priya")
    assert result["changed"] is False
    assert (vault.root / rel).read_text() == HAND_WRITTEN
    assert_index_matches_files(vault)


def test_update_keeps_crlf_and_bom(vault: Vault) -> None:
    original = "\ufeff" + HAND_WRITTEN.replace("\n", "\r\n")
    rel = _hand(vault, original)
    vault.update(rel, expected_version=vault.get(rel)["version"], add_tags=["lead"], content="Line one\nLine two")
    data = (vault.root / rel).read_bytes().decode("utf-8")
    head = original[: original.index("Priya leads")]
    expected = head.replace("  - person\r\n", "  - person\r\n  - lead\r\n").replace(
        "updated: 2026-07-01T11:00:00+02:00\r\n", UPDATED_NOW.replace("\n", "\r\n")) + "Line one\r\nLine two\r\n"
    assert data == expected
    assert vault.get(rel)["tags"] == ["person", "lead"]
    assert_index_matches_files(vault)


def test_update_by_id_and_by_path_with_dot_slash(vault: Vault) -> None:
    memory = vault.remember(ACME)["memory"]
    vault.update(memory["id"], add_tags=["a"])
    vault.update("./" + memory["path"], add_tags=["b"])
    assert vault.get(memory["id"])["tags"] == ["a", "b"]
    assert_index_matches_files(vault)


def test_update_refuses_a_duplicate_and_names_the_other(vault: Vault) -> None:
    a = vault.remember(ACME, namespace="support")["memory"]
    b = vault.remember("Something else entirely", namespace="support")["memory"]
    c = vault.remember(ACME, namespace="sales")["memory"]
    before = files(vault)
    with pytest.raises(Duplicate) as caught:
        vault.update(b["id"], expected_version=vault.get(b["id"])["version"], content="customer acme prefers DEPLOYS on fridays.")
    assert a["id"] in str(caught.value) and caught.value.other_id == a["id"]
    with pytest.raises(Duplicate) as caught:
        vault.update(c["id"], namespace="support")
    assert caught.value.other_id == a["id"]
    assert files(vault) == before
    assert vault.update(b["id"], expected_version=vault.get(b["id"])["version"], content=ACME, namespace="ops")["changed"] is True  # no twin in "ops"
    assert_index_matches_files(vault)


def test_update_with_the_expected_version(vault: Vault) -> None:
    memory = vault.remember(ACME)["memory"]
    result = vault.update(memory["id"], add_tags=["x"], expected_version=memory["version"])
    assert result["changed"] is True
    with pytest.raises(VersionConflict):
        vault.update(memory["id"], add_tags=["y"], expected_version=memory["version"])  # now stale
    assert vault.get(memory["id"])["tags"] == ["x"]
    assert_index_matches_files(vault)


def test_update_refuses_when_a_human_edited_the_file_since_it_was_read(vault: Vault) -> None:
    memory = vault.remember(ACME)["memory"]
    path = vault.root / memory["path"]
    path.write_bytes(path.read_bytes() + b"\nA human added this line.\n")
    edited = path.read_bytes()
    with pytest.raises(VersionConflict, match="changed on disk"):
        vault.update(memory["id"], content="Overwrite it", expected_version=memory["version"])
    with pytest.raises(VersionConflict):
        vault.forget(memory["id"], expected_version=memory["version"])
    assert path.read_bytes() == edited
    fresh = vault.get(memory["id"])
    assert "A human added this line." in fresh["content"]
    assert vault.update(memory["id"], add_tags=["ok"], expected_version=fresh["version"])["changed"] is True
    assert_index_matches_files(vault)


def test_get_sees_a_human_edit_at_once(vault: Vault) -> None:
    memory = vault.remember(ACME)["memory"]
    text = (vault.root / memory["path"]).read_text().replace("Fridays", "Mondays")
    write(vault, memory["path"], text)
    assert vault.get(memory["id"])["content"] == "Customer ACME prefers deploys on Mondays.\n"
    assert found(vault, "mondays") == [memory["path"]]
    assert_index_matches_files(vault)


# --------------------------------------------------------------------------- forget


def test_forget_moves_the_file_to_the_trash(vault: Vault) -> None:
    memory = vault.remember(ACME, tags=["customer"])["memory"]
    keep = vault.remember("Another fact about ACME")["memory"]
    original = (vault.root / memory["path"]).read_bytes()
    result = vault.forget(memory["id"])
    assert result == {"id": memory["id"], "path": memory["path"], "title": memory["title"],
                      "trashed_to": ".trash/" + memory["path"]}
    assert not (vault.root / memory["path"]).exists()
    assert (vault.root / ".trash" / memory["path"]).read_bytes() == original
    with pytest.raises(NotFound, match="expired or been forgotten"):
        vault.get(memory["id"])
    with pytest.raises(NotFound):
        vault.get(memory["path"])
    with pytest.raises(NotFound):
        vault.forget(memory["id"])
    assert found(vault, "acme") == [keep["path"]]
    assert listed(vault) == [keep["path"]]
    assert listed(vault, tags=["customer"]) == []
    assert_index_matches_files(vault)


def test_forget_the_same_path_twice_numbers_the_trash_copy(vault: Vault) -> None:
    first = vault.remember(ACME)["memory"]
    vault.forget(first["id"])
    second = vault.remember(ACME)["memory"]
    assert second["path"] == first["path"]
    assert vault.forget(second["id"])["trashed_to"] == ".trash/" + first["path"].replace(".md", "-2.md")
    assert_index_matches_files(vault)


def test_forget_with_the_expected_version(vault: Vault) -> None:
    memory = vault.remember(ACME)["memory"]
    with pytest.raises(VersionConflict):
        vault.forget(memory["id"], expected_version="0" * 64)
    assert (vault.root / memory["path"]).exists()
    vault.forget(memory["id"], expected_version=memory["version"])
    assert paths(vault) == []
    assert_index_matches_files(vault)


# --------------------------------------------------------------------------- TTL


def test_expired_memories_are_never_returned_from_the_instant_they_expire(vault: Vault, clock: Clock) -> None:
    short = vault.remember("Zebra crossing closed today", ttl_days=1)["memory"]
    long = vault.remember("Zebra enclosure moved north")["memory"]
    assert short["expires"] == "2026-07-21T09:00:00Z"
    clock.now = dt.datetime(2026, 7, 21, 8, 59, 59, tzinfo=dt.timezone.utc)
    assert found(vault, "zebra") == sorted([short["path"], long["path"]])
    assert vault.get(short["id"])["id"] == short["id"]
    clock.advance(seconds=1)
    assert found(vault, "zebra") == [long["path"]]
    assert found(vault, "crossing closed") == []
    assert listed(vault) == [long["path"]]
    assert vault.list()["total"] == 1
    for call in (vault.get, vault.forget, lambda key: vault.update(key, add_tags=["x"])):
        for key in (short["id"], short["path"]):
            with pytest.raises(NotFound):
                call(key)
    assert (vault.root / short["path"]).exists()  # reads need no sweep to be right
    assert_index_matches_files(vault)


def test_reconcile_sweeps_expired_files_to_the_trash(vault: Vault, clock: Clock) -> None:
    short = vault.remember("Zebra crossing closed today", ttl_days=0.5)["memory"]
    # An `expires:` property on a person's note (a passport's date) is only a property:
    # TTL applies to the tool's own memories alone (SPEC §3).
    write(vault, "notes/passport.md", "---\nexpires: 2024-03-01\n---\nPassport number and renewal notes.\n")
    write(vault, "notes/zettel.md", "---\nid: 202401011200\nexpires: 2024-03-01\n---\nA Zettelkasten note.\n")
    # Sixteen hex digits, as some templates write: the tool's id alphabet, but no time of
    # the tool's (its first ten characters would be a date centuries away). Before, this
    # note was taken for the tool's and moved to the trash.
    write(vault, "notes/card.md", "---\nid: 3f2a9c1b7d4e6f80\nexpires: 2024-03-01\n---\nThe library card.\n")
    kept = vault.remember("Zebra enclosure moved north")["memory"]
    vault.reconcile()
    assert found(vault, "passport renewal") == ["notes/passport.md"]
    clock.advance(days=1)
    report = vault.reconcile()
    assert report["expired"] == 1
    assert paths(vault) == sorted([kept["path"], "notes/card.md", "notes/passport.md", "notes/zettel.md"])
    assert sorted(p for p in files(vault) if p.startswith(".trash/") and p.endswith(".md")) == [".trash/" + short["path"]]
    assert vault.gc(older_than_days=0)["removed"] == [".trash/" + short["path"]]
    assert found(vault, "passport renewal") == ["notes/passport.md"]
    assert vault.get("notes/passport.md")["expires"] is None
    assert_index_matches_files(vault)


def test_the_expiry_sweep_moves_only_a_file_that_still_says_it_expired(vault: Vault, clock: Clock) -> None:
    """A person kept a memory (removed its expires: line) and the index has not seen that
    yet (no watcher, no walk since: an open Vault, then gc). Before, the sweep trusted the
    index and moved the file to the trash."""
    made = vault.remember("Zebra crossing closed this week", ttl_days=1)["memory"]
    path = vault.root / made["path"]
    path.write_text("".join(line for line in path.read_text().splitlines(keepends=True)
                            if not line.startswith("expires:")))
    clock.advance(days=2)
    assert vault.gc()["expired_moved"] == 0
    assert path.exists() and vault.get(made["id"])["expires"] is None
    assert_index_matches_files(vault)


def test_the_expiry_sweep_leaves_a_persons_symlink_to_an_expired_memory_in_place(vault: Vault, clock: Clock) -> None:
    """A link moved into .trash/ would point nowhere (and could never be restored): the
    file it names is swept under its own name, the link stays where the person put it."""
    made = vault.remember("Zebra crossing closed this week", ttl_days=1)["memory"]
    (vault.root / "shortcuts").mkdir()
    link = vault.root / "shortcuts" / "zebra.md"
    link.symlink_to(Path("..") / made["path"])
    old = dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc).timestamp()
    os.utime(vault.root / made["path"], (old, old))
    vault.reindex()  # rows oldest first: the link (dated by its file's mtime, 2020) before the dated path
    clock.advance(days=2)
    vault.reconcile()
    assert link.is_symlink()  # left alone (it now points at nothing: the file it named expired)
    trashed = [p for p in files(vault) if p.startswith(".trash/")]
    assert ".trash/" + made["path"] in trashed and not any((vault.root / p).is_symlink() for p in trashed)
    assert vault.search("zebra crossing")["hits"] == []


def test_an_expired_memory_does_not_block_remembering_it_again(vault: Vault, clock: Clock) -> None:
    first = vault.remember(ACME, ttl_days=1)["memory"]
    clock.advance(days=2)
    again = vault.remember(ACME)
    assert again["deduplicated"] is False and again["memory"]["id"] != first["id"]
    assert_index_matches_files(vault)


# --------------------------------------------------------------------------- tags and namespaces


def test_tags_are_case_insensitive(vault: Vault) -> None:
    memory = vault.remember(ACME, tags=["Customer", "#DEPLOY", "customer"])["memory"]
    write(vault, "notes/billing.md", "---\ntags: [Billing, ACME]\n---\nInvoices go out monthly. #Finance\n")
    vault.reconcile()
    assert memory["tags"] == ["customer", "deploy"]
    assert "tags: [customer, deploy]\n" in (vault.root / memory["path"]).read_text()
    assert listed(vault, tags=["CUSTOMER"]) == [memory["path"]]
    assert listed(vault, tags=["customer", "Deploy"]) == [memory["path"]]
    assert listed(vault, tags=["billing"]) == ["notes/billing.md"]
    assert listed(vault, tags=["finance", "acme"]) == ["notes/billing.md"]
    assert found(vault, "acme", tags=["DEPLOY"]) == [memory["path"]]
    assert found(vault, "invoices", tags=["#billing"]) == ["notes/billing.md"]
    vault.update(memory["id"], remove_tags=["CUSTOMER"])
    assert listed(vault, tags=["customer"]) == []
    assert_index_matches_files(vault)


@pytest.mark.parametrize(
    "given", [["customer", "deploy"], "customer,deploy", "customer, deploy", ["customer, deploy"], ["customer,", "#deploy"]]
)
def test_tags_as_a_list_or_comma_separated(vault: Vault, given) -> None:
    assert vault.remember(ACME, tags=given)["memory"]["tags"] == ["customer", "deploy"]
    assert_index_matches_files(vault)


def test_namespaces_filter_list_and_search(vault: Vault) -> None:
    support = vault.remember("ACME deploy window is Friday", namespace="support")["memory"]
    sales = vault.remember("ACME renewal is in March", namespace="sales")["memory"]
    plain = vault.remember("ACME office moved")["memory"]
    assert listed(vault, namespace="support") == [support["path"]]
    assert listed(vault, namespace="default") == [plain["path"]]
    assert listed(vault) == sorted([support["path"], sales["path"], plain["path"]])
    assert found(vault, "acme", namespace="sales") == [sales["path"]]
    assert found(vault, "acme", namespace="nowhere") == []
    assert_index_matches_files(vault)


def test_list_pages_newest_first(vault: Vault, clock: Clock) -> None:
    made = []
    for n in range(5):
        made.append(vault.remember(f"Fact number {n}")["memory"]["path"])
        clock.advance(minutes=1)
    page = vault.list(limit=2)
    assert [m["path"] for m in page["memories"]] == made[::-1][:2]
    assert (page["total"], page["count"], page["next_offset"]) == (5, 2, 2)
    last = vault.list(limit=2, offset=4)
    assert [m["path"] for m in last["memories"]] == made[:1] and "next_offset" not in last
    assert_index_matches_files(vault)


# --------------------------------------------------------------------------- hand-written files


def test_a_hand_written_file_without_id_has_its_path_as_id(vault: Vault) -> None:
    path = write(vault, "people/priya.md", "# Priya\nPriya leads billing at ACME. #person\n")
    march = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.timezone.utc).timestamp()
    os.utime(path, (march, march))
    assert vault.reconcile()["added"] == 1
    memory = vault.get("people/priya.md")
    assert (memory["id"], memory["path"], memory["title"], memory["tags"]) == (
        "people/priya.md", "people/priya.md", "Priya", ["person"])
    assert (memory["created"], memory["updated"]) == ("2026-03-01T12:00:00Z", "2026-03-01T12:00:00Z")
    [hit] = vault.search("who leads billing")["hits"]
    assert (hit["id"], hit["path"]) == ("people/priya.md", "people/priya.md")
    vault.update("people/priya.md", add_tags=["acme"])
    assert path.read_text() == "---\ntags: [acme]\n---\n# Priya\nPriya leads billing at ACME. #person\n"
    os.utime(path, (march, march))  # the file is its only date (no git here): a person's touch
    vault.reindex()
    changed = vault.get("people/priya.md")
    assert (changed["tags"], changed["created"], changed["age"]) == (["acme", "person"], "2026-03-01T12:00:00Z", "4 months ago")
    assert vault.forget("people/priya.md")["trashed_to"] == ".trash/people/priya.md"
    assert paths(vault) == []
    assert_index_matches_files(vault)


def test_get_by_path_finds_a_file_the_index_has_not_seen_yet(vault: Vault) -> None:
    write(vault, "inbox/new.md", "Dropped in by a human a moment ago.\n")
    assert vault.get("inbox/new.md")["content"] == "Dropped in by a human a moment ago.\n"
    assert_index_matches_files(vault)


def test_two_files_claiming_one_id(vault: Vault) -> None:
    write(vault, "b/copy.md", "---\nid: shared01\ncreated: 2026-07-02T00:00:00Z\n---\nThe later copy.\n")
    write(vault, "a/orig.md", "---\nid: shared01\ncreated: 2026-07-01T00:00:00Z\n---\nThe original.\n")
    write(vault, "z/tie.md", "---\nid: tie01\ncreated: 2026-07-01T00:00:00Z\n---\nTie z.\n")
    write(vault, "y/tie.md", "---\nid: tie01\ncreated: 2026-07-01T00:00:00Z\n---\nTie y.\n")
    vault.reconcile()
    assert vault.get("shared01")["path"] == "a/orig.md"  # earliest created
    assert vault.get("tie01")["path"] == "y/tie.md"  # then the smallest path
    assert listed(vault) == ["a/orig.md", "b/copy.md", "y/tie.md", "z/tie.md"]  # both stay
    assert vault.get("b/copy.md")["id"] == "shared01"
    vault.update("shared01", add_tags=["owner"])
    assert "owner" not in (vault.root / "b/copy.md").read_text()
    vault.forget("shared01")
    assert vault.get("shared01")["path"] == "b/copy.md"
    assert_index_matches_files(vault)


def test_broken_yaml_is_indexed_from_its_body_reported_and_never_rewritten(vault: Vault) -> None:
    broken = b"---\ntags: [customer, deploy\nid: x1\n---\nACME wants a call before every release.\n"
    write(vault, "notes/broken.md", broken)
    report = vault.reconcile()
    assert [p["path"] for p in report["problems"]] == ["notes/broken.md"]
    assert "broken YAML" in report["problems"][0]["problem"]
    assert found(vault, "acme release call") == ["notes/broken.md"]
    memory = vault.get("notes/broken.md")
    assert memory["id"] == "notes/broken.md" and memory["problems"]
    with pytest.raises(InvalidInput, match=r"notes/broken\.md.*fix the file by hand"):
        vault.update("notes/broken.md", add_tags=["x"])
    with pytest.raises(InvalidInput, match="fix the file by hand"):
        vault.update("notes/broken.md", expected_version=vault.get("notes/broken.md")["version"], content="Replaced")
    vault.reindex()
    vault.reconcile()
    assert (vault.root / "notes/broken.md").read_bytes() == broken
    assert_index_matches_files(vault)


@pytest.mark.parametrize(
    "text",
    ["---\n- a list\n---\nListy body words\n", "---\njust a scalar\n---\nListy body words\n",
     "---\non: push\n2024: year\nyes: no\n---\nListy body words\n", "\ufeff---\r\ntags: [a]\r\n---\r\nListy body words\r\n",
     "---\n---\nListy body words\n", "---\nid: x\nListy body words\n"],
    ids=["list", "scalar", "non-string keys", "bom crlf", "empty", "unclosed"],
)
def test_odd_front_matter_never_crashes_and_is_searchable(vault: Vault, text: str) -> None:
    write(vault, "odd.md", text)
    vault.reconcile()
    assert found(vault, "listy body words") == ["odd.md"]
    assert vault.get("odd.md")["path"] == "odd.md"
    assert (vault.root / "odd.md").read_bytes() == text.encode("utf-8")
    assert_index_matches_files(vault)


def test_conflict_markers_are_flagged(vault: Vault) -> None:
    write(vault, "c.md", "---\nid: c1\n---\n<<<<<<< HEAD\nFridays\n=======\nThursdays\n>>>>>>> origin/main\n")
    vault.reconcile()
    assert vault.get("c1")["conflict"] is True
    assert_index_matches_files(vault)


# --------------------------------------------------------------------------- the index is a cache


def _results(vault: Vault) -> tuple:
    return (vault.search("acme deploy"), vault.search("priya"), vault.list(limit=100))


def _some_memories(vault: Vault) -> None:
    vault.remember(ACME, namespace="support", tags=["customer"])
    vault.remember("ACME deploy freeze in December", tags=["deploy"])
    write(vault, "people/priya.md", "# Priya\nPriya handles ACME billing. [[acme-billing]]\n")
    vault.reconcile()


def test_deleting_the_index_loses_nothing(vault: Vault, vault_dir: Path, clock: Clock) -> None:
    _some_memories(vault)
    before = _results(vault)
    vault.close()
    shutil.rmtree(vault_dir / ".index")
    with Vault(vault_dir, clock=clock) as reopened:
        assert _results(reopened) == before
        assert_index_matches_files(reopened)


def test_a_schema_version_mismatch_rebuilds(vault: Vault, vault_dir: Path, clock: Clock) -> None:
    _some_memories(vault)
    before = _results(vault)
    db = vault.index.path
    vault.close()
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 9999")
    conn.close()
    with Vault(vault_dir, clock=clock) as reopened:
        assert reopened.index.rebuilt_schema is True
        assert reopened.index.query("PRAGMA user_version")[0][0] != 9999
        assert _results(reopened) == before
        assert_index_matches_files(reopened)


def test_reconcile_picks_up_what_a_human_did(vault: Vault) -> None:
    keep = vault.remember("Unchanged fact")["memory"]
    edit = vault.remember("Fact to edit by hand")["memory"]
    move = vault.remember("Fact to move by hand")["memory"]
    gone = vault.remember("Fact to delete by hand")["memory"]
    write(vault, "inbox/new.md", "A new hand-written note about walruses.\n")
    text = (vault.root / edit["path"]).read_text().replace("edit by hand", "edit by hand, about narwhals")
    write(vault, edit["path"], text)
    (vault.root / "archive").mkdir()
    os.rename(vault.root / move["path"], vault.root / "archive/moved.md")
    (vault.root / gone["path"]).unlink()
    report = vault.reconcile()
    assert (report["added"], report["updated"], report["removed"], report["unchanged"]) == (2, 1, 2, 1)
    assert found(vault, "walruses") == ["inbox/new.md"]
    assert found(vault, "narwhals") == [edit["path"]]
    assert vault.get(move["id"])["path"] == "archive/moved.md"
    with pytest.raises(NotFound):
        vault.get(gone["id"])
    assert vault.get(keep["id"])["path"] == keep["path"]
    assert vault.reconcile()["unchanged"] == 4
    assert_index_matches_files(vault)


def test_reconcile_drops_a_deleted_folder(vault: Vault) -> None:
    write(vault, "projects/a.md", "Project alpha notes\n")
    write(vault, "projects/sub/b.md", "Project beta notes\n")
    vault.reconcile()
    shutil.rmtree(vault.root / "projects")
    assert vault.reconcile()["removed"] == 2
    assert listed(vault) == []
    assert_index_matches_files(vault)


def test_a_touch_only_change_is_not_a_reparse(vault: Vault, parse_calls: list[str]) -> None:
    memory = vault.remember(ACME)["memory"]
    path = vault.root / memory["path"]
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    parse_calls.clear()
    report = vault.reconcile()
    assert (report["updated"], report["unchanged"]) == (0, 1)
    assert parse_calls == []
    assert vault.index.by_path(memory["path"])["mtime_ns"] == path.stat().st_mtime_ns
    assert vault.reconcile()["unchanged"] == 1 and parse_calls == []
    assert_index_matches_files(vault)


def test_same_size_new_bytes_is_a_reparse(vault: Vault, parse_calls: list[str]) -> None:
    memory = vault.remember(ACME)["memory"]
    path = vault.root / memory["path"]
    stat = path.stat()
    path.write_bytes(path.read_bytes().replace(b"Fridays", b"Mondays"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    parse_calls.clear()
    assert vault.reconcile()["updated"] == 1
    assert parse_calls == [memory["path"]]
    assert found(vault, "mondays") == [memory["path"]]
    assert_index_matches_files(vault)


def _same_size_and_mtime(path: Path, old: bytes, new: bytes) -> None:
    """Give ``path`` the bytes ``new`` the way ``cp -p`` from a backup does: same size,
    and the mtime it had, so only ctime (and, for a rename, the inode) tells."""
    assert len(old) == len(new) and old != new
    stat = path.stat()
    backup = path.with_name("backup.bin")
    backup.write_bytes(new)
    os.utime(backup, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    subprocess.run(["cp", "-p", str(backup), str(path)], check=True)
    backup.unlink()
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)


def test_cp_p_with_the_same_size_and_mtime_is_caught(vault: Vault, parse_calls: list[str]) -> None:
    memory = vault.remember(ACME)["memory"]
    path = vault.root / memory["path"]
    old = path.read_bytes()
    _same_size_and_mtime(path, old, old.replace(b"Fridays", b"Mondays"))
    parse_calls.clear()
    assert vault.reconcile()["updated"] == 1
    assert parse_calls == [memory["path"]]
    assert found(vault, "mondays") == [memory["path"]]
    assert_index_matches_files(vault)


def test_a_renamed_in_copy_with_the_same_size_and_mtime_is_caught(vault: Vault) -> None:
    # rsync -a: a temp file with the new bytes and the old mtime, renamed over the note.
    memory = vault.remember(ACME)["memory"]
    path = vault.root / memory["path"]
    stat = path.stat()
    temp = path.with_name(".acme.tmp")
    temp.write_bytes(path.read_bytes().replace(b"Fridays", b"Sundays"))
    os.utime(temp, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(temp, path)
    assert path.stat().st_ino != stat.st_ino
    assert vault.reconcile()["updated"] == 1
    assert found(vault, "sundays") == [memory["path"]]
    assert vault.index.by_path(memory["path"])["inode"] == path.stat().st_ino
    assert_index_matches_files(vault)


def test_a_ctime_only_change_is_hashed_once_then_not_read(vault: Vault, parse_calls: list[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    memory = vault.remember(ACME)["memory"]
    path = vault.root / memory["path"]
    path.chmod(0o600)  # changes ctime only
    reads: list[str] = []
    real = vault.core.files.read
    monkeypatch.setattr(vault.core.files, "read", lambda rel: reads.append(rel) or real(rel))
    parse_calls.clear()
    report = vault.reconcile()
    assert (report["updated"], report["unchanged"]) == (0, 1)
    assert reads == [memory["path"]] and parse_calls == []
    assert vault.index.by_path(memory["path"])["ctime_ns"] == path.stat().st_ctime_ns
    reads.clear()
    assert vault.reconcile()["unchanged"] == 1
    assert reads == [] and parse_calls == []
    assert_index_matches_files(vault)


def test_an_unchanged_vault_is_not_read_on_open(vault: Vault, vault_dir: Path, clock: Clock, parse_calls: list[str]) -> None:
    for n in range(5):
        vault.remember(f"Fact number {n}")
    vault.close()
    parse_calls.clear()
    with Vault(vault_dir, clock=clock) as reopened:
        assert parse_calls == []
        assert reopened.list()["total"] == 5


# --------------------------------------------------------------------------- bad input


BAD_REMEMBER = [
    ({"content": ""}, "empty"),
    ({"content": " \n\t "}, "empty"),
    ({"content": "x" * 100_001}, "100,001 characters"),
    ({"content": "ok", "tags": ["has space"]}, "whitespace"),
    ({"content": "ok", "tags": ["tab\there"]}, "whitespace"),
    ({"content": "ok", "tags": "one, two words"}, "whitespace"),
    ({"content": "ok", "tags": ["t" * 65]}, "65 characters"),
    ({"content": "ok", "tags": [f"t{n}" for n in range(51)]}, "51 tags"),
    ({"content": "ok", "namespace": "two words"}, "Namespace"),
    ({"content": "ok", "namespace": "a/b"}, "Namespace"),
    ({"content": "ok", "ttl_days": -1}, "ttl_days"),
    ({"content": "ok", "ttl_days": 1e9}, "ttl_days"),
    ({"content": "ok", "ttl_days": float("nan")}, "ttl_days"),
    ({"content": "ok", "ttl_days": float("inf")}, "ttl_days"),
]


@pytest.mark.parametrize("kwargs, message", BAD_REMEMBER, ids=[str(i) for i in range(len(BAD_REMEMBER))])
def test_bad_remember_input_writes_nothing(vault: Vault, kwargs: dict, message: str) -> None:
    vault.remember("Something already here", tags=["old"])
    before, index = files(vault), index_snapshot(vault.index.path)
    with pytest.raises(InvalidInput, match=message):
        vault.remember(**kwargs)
    assert files(vault) == before
    assert index_snapshot(vault.index.path) == index


def test_limits_themselves_are_allowed(vault: Vault) -> None:
    memory = vault.remember("x" * 100_000, tags=[f"t{n:02d}" + "x" * 61 for n in range(50)])["memory"]
    assert len(memory["tags"]) == 50 and len(memory["content"]) == 100_001
    assert_index_matches_files(vault)


BAD_UPDATE = [
    ({"content": ""}, "empty"),
    ({"content": "x" * 100_001}, "100,001"),
    ({"add_tags": ["a b"]}, "whitespace"),
    ({"remove_tags": ["a b"]}, "whitespace"),
    ({"add_tags": ["t" * 65]}, "65 characters"),
    ({"add_tags": [f"t{n}" for n in range(50)]}, "51 tags"),  # 50 new ones + the one it has
    ({"namespace": "a b"}, "Namespace"),
    ({"ttl_days": -3}, "ttl_days"),
    ({"ttl_days": float("nan")}, "ttl_days"),
]


@pytest.mark.parametrize("kwargs, message", BAD_UPDATE, ids=[str(i) for i in range(len(BAD_UPDATE))])
def test_bad_update_input_writes_nothing(vault: Vault, kwargs: dict, message: str) -> None:
    memory = vault.remember("Something already here", tags=["old"])["memory"]
    before, index = files(vault), index_snapshot(vault.index.path)
    with pytest.raises(InvalidInput, match=message):
        vault.update(memory["id"], **kwargs)
    assert files(vault) == before
    assert index_snapshot(vault.index.path) == index


def test_dedup_merge_respects_the_tag_limit(vault: Vault) -> None:
    vault.remember(ACME, tags=[f"a{n}" for n in range(30)])
    before = files(vault)
    with pytest.raises(InvalidInput, match="tags"):
        vault.remember(ACME, tags=[f"b{n}" for n in range(30)])
    assert files(vault) == before


def test_a_hand_written_file_over_the_tag_limit_can_still_be_edited_but_not_grown(vault: Vault) -> None:
    write(vault, "many.md", "---\ntags: [" + ", ".join(f"t{n}" for n in range(60)) + "]\n---\nMany tags.\n")
    vault.reconcile()
    assert vault.update("many.md", expected_version=vault.get("many.md")["version"], content="Still many tags.")["changed"] is True
    assert len(vault.update("many.md", remove_tags=["t0"])["memory"]["tags"]) == 59
    with pytest.raises(InvalidInput, match="60 tags"):
        vault.update("many.md", add_tags=["new"])
    assert_index_matches_files(vault)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda v: v.list(limit=0), "limit"),
        (lambda v: v.list(limit=101), "limit"),
        (lambda v: v.list(offset=-1), "offset"),
        (lambda v: v.list(tags=["a b"]), "whitespace"),
        (lambda v: v.search("acme", limit=0), "limit"),
        (lambda v: v.search("acme", limit=101), "limit"),
        (lambda v: v.search("a" * 1001), "1000 characters"),
        (lambda v: v.search("acme", match="most"), "match must be one of auto, all, any"),
        (lambda v: v.search("acme", tags=["a b"]), "whitespace"),
        (lambda v: v.get(""), "empty"),
        (lambda v: v.update("  "), "empty"),
    ],
)
def test_bad_read_input_is_refused_clearly(vault: Vault, call, message: str) -> None:
    vault.remember(ACME)
    with pytest.raises(InvalidInput, match=message):
        call(vault)


def test_query_at_the_limit_is_fine(vault: Vault) -> None:
    assert vault.search("acme " * 200)["count"] == 0


@pytest.mark.parametrize("key", ["01jd8x4k2m9q7r3t", "2026/07/20/nope.md", "nope"])
def test_unknown_ids_are_not_found_with_a_hint(vault: Vault, key: str) -> None:
    for call in (vault.get, vault.forget, lambda k: vault.update(k, add_tags=["x"])):
        with pytest.raises(NotFound, match="use recall or list_memories"):
            call(key)


def test_a_vault_path_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "notes").write_text("I am a file")
    with pytest.raises(VaultError, match="is a file"):
        Vault(tmp_path / "notes")
    with pytest.raises(VaultError, match="is a file"):
        Vault.init(tmp_path / "notes")
    with pytest.raises(VaultError):
        Vault.init(tmp_path / "notes" / "inside")
    assert (tmp_path / "notes").read_text() == "I am a file"


def test_a_missing_vault_says_how_to_create_it(tmp_path: Path) -> None:
    with pytest.raises(VaultError, match="init"):
        Vault(tmp_path / "missing")
    assert not (tmp_path / "missing").exists()


def test_init_writes_a_gitignore_for_the_index_and_keeps_an_existing_one(tmp_path: Path) -> None:
    with Vault.init(tmp_path / "v") as vault:
        assert {".index/", ".trash/", "*.agent-memory.tmp"} <= set((vault.root / ".gitignore").read_text().splitlines())
    (tmp_path / "v/.gitignore").write_text("mine\n")
    Vault.init(tmp_path / "v").close()
    assert (tmp_path / "v/.gitignore").read_text() == "mine\n"


def test_changing_tags_keeps_the_spelling_of_the_others(vault: Vault) -> None:
    (vault.root / "acme.md").write_text("---\ntags: [Customer, ACME-Billing]\n---\nACME pays net 30\n")
    vault.reconcile()
    vault.update("acme.md", add_tags=["finance"])
    assert (vault.root / "acme.md").read_text().startswith("---\ntags: [Customer, ACME-Billing, finance]\n")
    vault.update("acme.md", remove_tags=["acme-billing"])
    assert "tags: [Customer, finance]\n" in (vault.root / "acme.md").read_text()
    assert vault.get("acme.md")["tags"] == ["customer", "finance"]
    assert_index_matches_files(vault)


def test_removing_a_tag_written_in_the_body_is_refused_not_ignored(vault: Vault) -> None:
    (vault.root / "ops.md").write_text("---\ntags: [team]\n---\nThe #ops rota changes on Mondays\n")
    vault.reconcile()
    before = (vault.root / "ops.md").read_bytes()
    with pytest.raises(InvalidInput, match="written in the text of ops.md as #ops"):
        vault.update("ops.md", remove_tags=["ops"], add_tags=["rota"])
    assert (vault.root / "ops.md").read_bytes() == before


def test_tags_written_as_one_comma_item_are_changed_as_the_reader_reads_them(vault: Vault) -> None:
    (vault.root / "c.md").write_text('---\ntags: ["customer, deploy"]\n---\nACME deploys on Fridays\n')
    vault.reconcile()
    assert vault.update("c.md", add_tags=["customer"])["changed"] is False  # already there
    vault.update("c.md", remove_tags=["deploy"])
    assert "tags: [customer]\n" in (vault.root / "c.md").read_text()
    assert vault.get("c.md")["tags"] == ["customer"]
    assert_index_matches_files(vault)


def test_export_pages_neither_repeat_nor_skip_when_a_file_vanished(vault: Vault) -> None:
    made = [vault.remember(f"export item number {i}")["memory"] for i in range(7)]
    (vault.root / made[1]["path"]).unlink()  # gone from disk, still in the index
    seen, offset = [], 0
    while True:
        page = vault.export_page(limit=3, offset=offset)
        seen += [m["path"] for m in page["memories"]]
        if "next_offset" not in page:
            break
        offset = page["next_offset"]
    assert len(seen) == len(set(seen)) == 6
    with pytest.raises(InvalidInput, match="limit must be between 1 and 500"):
        vault.export_page(limit=0)


def test_an_empty_tag_item_is_not_kept_when_tags_change(vault: Vault) -> None:
    (vault.root / "n.md").write_text("---\ntags: [a, null]\n---\nNote with an empty tag item\n")
    vault.reconcile()
    vault.update("n.md", add_tags=["c"])
    assert "tags: [a, c]\n" in (vault.root / "n.md").read_text()


def _fts_segments(db: Path) -> int:
    """Segments in the full-text index, from FTS5's structure record (a 4-byte cookie,
    then the level count and the segment count as varints, both below 128 here)."""
    conn = sqlite3.connect(db)
    try:
        block = conn.execute("SELECT block FROM fts_data WHERE id = 10").fetchone()[0]
    finally:
        conn.close()
    assert block[4] < 128 and block[5] < 128
    return block[5]


def _many_notes(vault_dir: Path, count: int = 1200) -> Path:
    """``notes/n{i}.md`` by hand, each naming ``mark{i}x``, with enough distinct words
    that FTS5 flushes its pending terms more than once while they are loaded."""
    folder = vault_dir / "notes"
    folder.mkdir(parents=True)
    for i in range(count):
        words = " ".join(f"w{(i * 7 + j) % 5000}y" for j in range(120))
        (folder / f"n{i}.md").write_text(f"Note about mark{i}x and the shared topic harbour. {words}\n", encoding="utf-8")
    return folder


def test_a_bulk_load_leaves_one_merged_full_text_segment_and_every_note_findable(vault_dir: Path) -> None:
    folder = _many_notes(vault_dir)
    vault = Vault.init(vault_dir)
    try:
        # One segment, as a search seeks in every segment for each term (at 100k
        # memories 28 segments made searches 1.5-2x slower).
        assert _fts_segments(vault.index.path) == 1
        for i in (0, 599, 1199):
            assert [hit["path"] for hit in vault.search(f"mark{i}x")["hits"]] == [f"notes/n{i}.md"]
        # Edits and deletes after the merge keep the index equal to the files.
        vault.forget("notes/n5.md")
        (folder / "n6.md").write_text("Rewritten by hand: wallaby.\n", encoding="utf-8")
        vault.reconcile_path("notes/n6.md")
        assert vault.search("mark6x")["hits"] == vault.search("mark5x")["hits"] == []
        assert [hit["path"] for hit in vault.search("wallaby")["hits"]] == ["notes/n6.md"]
        assert_index_matches_files(vault)
        vault.reindex()
        assert _fts_segments(vault.index.path) == 1
        for i in range(100, 1100):  # a person's bulk edit (a find-and-replace), folded in by one reconcile
            with open(folder / f"n{i}.md", "a", encoding="utf-8") as handle:
                handle.write("Reviewed by quillon.\n")
        assert vault.reconcile()["updated"] == 1000
        found = vault.search("quillon", limit=100)
        assert _fts_segments(vault.index.path) == 1 and found["count"] == 100 and found["next_offset"] == 100
    finally:
        vault.close()


def _count_merges(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that gets an item each time the full-text index is merged (the merge still runs)."""
    from agent_memory.index.db import Index

    merges: list[int] = []
    merge = Index._merge_segments

    def counted(conn: sqlite3.Connection) -> None:
        merges.append(1)
        merge(conn)

    monkeypatch.setattr(Index, "_merge_segments", staticmethod(counted))
    return merges


def test_a_reconcile_of_a_share_of_the_notes_leaves_one_full_text_segment_and_a_few_edits_merge_nothing(
        vault_dir: Path, monkeypatch) -> None:
    """Folding in 1% of the notes (a person's edits, a pull) wrote a segment or two for
    each changed file, and searches sought in every one of them until FTS5's automerge
    caught up (at 10k, 22 segments and recall 1.5x slower). A reconcile of at least a
    200th of the rows (and 50) ends merged; a handful of edits is left to automerge."""

    folder = _many_notes(vault_dir)
    vault = Vault.init(vault_dir)
    merges = _count_merges(monkeypatch)
    try:
        for i in range(0, 1200, 100):  # 12 of 1,200 changed: below the 50 a merge waits for
            with open(folder / f"n{i}.md", "a", encoding="utf-8") as handle:
                handle.write("Seen again by corvina.\n")
        assert vault.reconcile()["updated"] == 12
        assert merges == [] and _fts_segments(vault.index.path) > 1
        for i in range(1, 1200, 20):  # 60 of 1,200: a 20th
            with open(folder / f"n{i}.md", "a", encoding="utf-8") as handle:
                handle.write("Checked by marisol.\n")
        assert vault.reconcile()["updated"] == 60
        assert merges == [1] and _fts_segments(vault.index.path) == 1
        assert vault.search("marisol", limit=100)["count"] == 60
        assert vault.search("corvina", limit=100)["count"] == 12
        assert_index_matches_files(vault)
    finally:
        vault.close()


def test_a_reconcile_of_several_batches_merges_the_full_text_index_once_when_all_are_in(
        vault_dir: Path, monkeypatch) -> None:
    """A reconcile folds changed files in a batch a transaction; merging after each batch
    rewrote the whole full-text index every time (at a million memories, seconds a
    batch). It is merged once, after the last batch, into one segment."""
    from agent_memory.index import db, reconcile

    folder = _many_notes(vault_dir)
    vault = Vault.init(vault_dir)
    merges = _count_merges(monkeypatch)
    try:
        monkeypatch.setattr(reconcile, "REFRESH_BATCH", 400)  # 1,200 changed files: three batches ...
        monkeypatch.setattr(db, "MERGE_AFTER", 300)  # ... each worth a merge on its own
        for i in range(1200):
            with open(folder / f"n{i}.md", "a", encoding="utf-8") as handle:
                handle.write("Checked by tessera.\n")
        assert vault.reconcile()["updated"] == 1200
        assert merges == [1] and _fts_segments(vault.index.path) == 1
        assert vault.search("tessera", limit=10)["next_offset"] == 10
        assert [hit["path"] for hit in vault.search("mark1199x")["hits"]] == ["notes/n1199.md"]
        vault.remember("A single write after the reconcile: heron.")  # merges nothing more
        assert merges == [1] and vault.search("heron")["count"] == 1
        assert_index_matches_files(vault)
    finally:
        vault.close()


def test_a_reconcile_stopped_part_way_keeps_its_batches_and_leaves_the_merge_to_the_next(
        vault_dir: Path, monkeypatch) -> None:
    """Ctrl-C (or a full disk) during the third batch: the two batches folded in stay, no
    merge holds the person up on the way out, and the next reconcile finishes and merges."""
    from agent_memory.index import db, reconcile

    folder = _many_notes(vault_dir)
    vault = Vault.init(vault_dir)
    merges = _count_merges(monkeypatch)
    refresh_batch = reconcile.Reconciler._refresh_batch
    batches: list[int] = []

    def checked(vault: Vault) -> int:  # memories the full-text index finds "tessera" in
        return vault.index.query("SELECT count(*) FROM fts WHERE fts MATCH 'tessera'")[0][0]

    def interrupted(self: Any, batch: list[str], *args: Any) -> None:
        batches.append(len(batch))
        if len(batches) == 3:
            raise KeyboardInterrupt
        refresh_batch(self, batch, *args)

    try:
        monkeypatch.setattr(reconcile, "REFRESH_BATCH", 400)
        monkeypatch.setattr(db, "MERGE_AFTER", 300)
        for i in range(1200):
            with open(folder / f"n{i}.md", "a", encoding="utf-8") as handle:
                handle.write("Checked by tessera.\n")
        monkeypatch.setattr(reconcile.Reconciler, "_refresh_batch", interrupted)
        with pytest.raises(KeyboardInterrupt):
            vault.reconcile()
        assert merges == [] and checked(vault) == 800  # the two batches folded in before the stop
        monkeypatch.setattr(reconcile.Reconciler, "_refresh_batch", refresh_batch)
        assert vault.reconcile()["updated"] == 400
        assert merges == [1] and _fts_segments(vault.index.path) == 1 and checked(vault) == 1200
        assert_index_matches_files(vault)
    finally:
        vault.close()


def test_a_full_disk_while_merging_the_full_text_index_keeps_every_note_indexed(vault_dir: Path, monkeypatch) -> None:
    from agent_memory.index import loading
    from agent_memory.index.db import Index

    merge = Index._merge_segments

    def merge_on_a_full_disk(conn: sqlite3.Connection) -> None:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")  # no room for the merged copy: SQLITE_FULL
        try:
            merge(conn)
        finally:
            conn.execute("PRAGMA max_page_count = 1073741823")

    monkeypatch.setattr(Index, "_merge_segments", staticmethod(merge_on_a_full_disk))
    # A load buffers 32 MB of postings: at 64 KB these notes' are written out as several segments.
    monkeypatch.setattr(loading, "LOAD_FTS_HASH", 64 * 1024)
    _many_notes(vault_dir)
    vault = Vault.init(vault_dir)
    try:
        assert _fts_segments(vault.index.path) > 1  # the merge failed ...
        assert vault.stats()["total"] == 1200  # ... and the load stands
        assert [hit["path"] for hit in vault.search("mark777x")["hits"]] == ["notes/n777.md"]
        assert_index_matches_files(vault)
    finally:
        vault.close()


def test_a_stat_taken_within_a_coarse_timestamp_tick_is_not_trusted(vault: Vault) -> None:
    """On FAT or a network share, times are whole seconds, ctime too: a note edited twice
    within one tick, to the same size, keeps size, mtime, ctime and inode. A stat taken
    within 2.5 s of such a time is racy (git's rule): the start-up snapshot gives the row
    a stamp no file has, so the walk hands the file back to be hashed. Sub-second times
    are never racy, so here (ext4/tmpfs) an unchanged vault is still not read."""
    second = 1_000_000_000
    now = (time.time_ns() // second) * second
    assert racy(now - second, now - second, now)  # changed within the tick before the stat
    assert racy(now - 10 * second, now, now + second)  # its ctime is recent
    assert not racy(now - 10 * second, now - 10 * second, now)  # the stat came well after the change
    assert not racy(now - 123, now - 123, now)  # sub-second times: any later edit changes them
    path = vault.root / "notes" / "acme.md"
    path.parent.mkdir()
    path.write_text("ACME deploys on Fridays.\n", encoding="utf-8")
    vault.reconcile()
    with vault.index.transaction() as conn:  # the stat a coarse file system would have given
        conn.execute("UPDATE memories SET mtime_ns = ?, ctime_ns = ?, indexed_ns = ?", (now, now, now + second))
    assert dict(vault.index.stamps())["notes/acme.md"] == b"racy"
    with vault.index.transaction() as conn:
        conn.execute("UPDATE memories SET indexed_ns = ?", (now + 10 * second,))
    assert dict(vault.index.stamps())["notes/acme.md"] != b"racy"


def test_a_row_remembers_when_its_file_was_read_not_when_the_row_was_written(vault: Vault) -> None:
    """The racy rule asks whether a save could have followed the read within the file's
    time tick; the row must carry the time of the read. Files are read before the lock
    and the index transaction (a writer waited for, a rebuild's batch of 2,000 files):
    a row stamped when it was written, seconds later, stopped being racy while a
    same-size save made just after the read (on FAT, same mtime, ctime and inode) was
    never indexed. The same holds for a racy row found unchanged and touched."""
    path = vault.root / "notes" / "acme.md"
    path.parent.mkdir()
    path.write_text("ACME deploys on Fridays.\n", encoding="utf-8")
    examined = vault.core.files.examine("notes/acme.md")
    read_by = time.time_ns()
    with vault.core.writing(), vault.core.files.transaction() as conn:
        vault.core.files.refresh(conn, "notes/acme.md", None, examined)
    assert vault.index.by_path("notes/acme.md")["indexed_ns"] <= read_by
    known = vault.index.file_facts()["notes/acme.md"]
    with vault.index.transaction() as conn:
        conn.execute("UPDATE memories SET size = size + 1")  # a stat that differs: the file is read again
    examined = vault.core.files.examine("notes/acme.md", known)
    read_by = time.time_ns()
    with vault.core.writing(), vault.core.files.transaction() as conn:
        vault.core.files.refresh(conn, "notes/acme.md", vault.index.file_facts()["notes/acme.md"], examined)
    row = vault.index.by_path("notes/acme.md")
    assert row["size"] == path.stat().st_size and row["indexed_ns"] <= read_by


# --------------------------------------------------------------------------- rarer refusals and fallbacks


def test_an_interrupted_import_that_cannot_be_finished_does_not_lock_the_vault(
    vault: Vault, caplog: pytest.LogCaptureFixture
) -> None:
    kept = vault.remember("Customer ACME prefers deploys on Fridays")["memory"]
    vault.close()
    staged = vault.root / ".index" / "import"
    (staged / "files").mkdir(parents=True)
    (staged / "files" / "0.md").write_text("a staged file a crash left\n")
    (staged / "manifest.json").write_text("{half a manifest")  # damaged: the import cannot be finished
    with Vault(vault.root, clock=vault.clock) as reopened:
        assert ".index/import was not acted on" in caplog.text
        assert [h["id"] for h in reopened.search("ACME Fridays")["hits"]] == [kept["id"]]
        assert reopened.import_memories([{"content": "A later import"}])["imported"] == 1  # not blocked
    [aside] = (vault.root / ".index" / "set-aside").glob("import-*/record/import")
    assert (aside / "files" / "0.md").read_text() == "a staged file a crash left\n"  # kept for a person to look at


def test_an_open_whose_walk_fails_serves_the_index_it_has(vault: Vault, monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    kept = vault.remember("Customer ACME prefers deploys on Fridays")["memory"]
    vault.close()

    def walk_fails(self: Vault, progress: object = None) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(Vault, "reconcile", walk_fails)
    with Vault(vault.root, clock=vault.clock) as reopened:
        assert "could not bring the index up to date: [Errno 5] Input/output error" in caplog.text
        assert [h["id"] for h in reopened.search("ACME Fridays")["hits"]] == [kept["id"]]
    shutil.rmtree(vault.root / ".index")  # and with no index to fall back on, a clear error
    with pytest.raises(VaultError, match=r"^Cannot index the vault .*: \[Errno 5\] Input/output error"):
        Vault(vault.root, clock=vault.clock)


def test_init_with_a_folder_never_rewrites_an_existing_settings_file(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    (root / ".agent-memory.toml").write_text("[recall]\nsemantic = false\n")
    with pytest.raises(InvalidInput, match=r"\.agent-memory\.toml exists; add \[memories\] folder = 'Agent' to it by hand"):
        Vault.init(root, memories_folder="Agent")
    assert (root / ".agent-memory.toml").read_text() == "[recall]\nsemantic = false\n"


@pytest.mark.parametrize("options, message", [
    ({"semantic": "yes"}, "semantic must be true or false; got 'yes'"),
    ({"since": "last week"}, "since must be a date or timestamp like 2026-07-20; got 'last week'"),
    ({"until": "soon"}, "until must be a date or timestamp like 2026-07-20; got 'soon'"),
])
def test_search_options_a_person_mistypes_are_named(vault: Vault, options: dict, message: str) -> None:
    vault.remember("Customer ACME prefers deploys on Fridays")
    with pytest.raises(InvalidInput, match=re.escape(message)):
        vault.search("ACME", **options)


def test_read_file_refuses_a_named_pipe_without_blocking(vault: Vault) -> None:
    os.mkfifo(vault.root / "pipe.md")
    with pytest.raises(InvalidInput, match="pipe.md is not a regular file; read_file reads text files only"):
        vault.read_file("pipe.md")


def test_update_with_a_whole_tag_set_adds_and_removes_to_match_it(vault: Vault) -> None:
    (vault.root / "db.md").write_text("---\ntags: [db, Ops, weekly]\n---\nThe staging database resets on Sundays\n")
    vault.reconcile()
    version = vault.get("db.md")["version"]
    assert vault.update("db.md", tags=["ops", "staging", "db"], expected_version=version)["changed"] is True
    assert vault.get("db.md")["tags"] == ["db", "ops", "staging"]
    text = (vault.root / "db.md").read_text()
    assert text.startswith("---\ntags: [db, Ops, staging]\n")  # a kept tag keeps its spelling
    assert text.endswith("---\nThe staging database resets on Sundays\n")
    assert_index_matches_files(vault)


@pytest.mark.parametrize("options, message", [
    ({"replace_new": "Mondays"}, "replace_new needs replace_old"),
    ({"append": "   "}, "append is empty"),
    ({"replace_old": "", "replace_new": "x"}, "replace_old is empty"),
])
def test_an_empty_or_half_given_body_edit_is_refused_and_changes_nothing(vault: Vault, options: dict, message: str) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    before = (vault.root / made["path"]).read_bytes()
    with pytest.raises(InvalidInput, match=message):
        vault.update(made["id"], **options)
    assert (vault.root / made["path"]).read_bytes() == before


@pytest.mark.parametrize("ids", [[], [""], "  "])
def test_forget_many_without_ids_says_what_to_give(vault: Vault, ids: object) -> None:
    vault.remember("The staging database resets on Sundays")
    with pytest.raises(InvalidInput, match="Give the ids \\(or vault paths\\) of the memories to forget"):
        vault.forget_many(ids)  # type: ignore[arg-type]
    assert vault.list()["total"] == 1


def test_a_link_to_a_file_whose_name_a_wikilink_cannot_hold_is_refused(vault: Vault) -> None:
    made = vault.remember("The staging database resets on Sundays")["memory"]
    (vault.root / "C# notes.md").write_text("Notes about C#.\n")
    vault.reconcile()
    before = (vault.root / made["path"]).read_bytes()
    with pytest.raises(InvalidInput, match=r"C# notes\.md has a character a wikilink cannot hold \(\[ \] \| # \^\); rename"):
        vault.link(made["id"], "C# notes.md")
    assert (vault.root / made["path"]).read_bytes() == before
