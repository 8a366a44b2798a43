"""The index is a cache and the disk can misbehave: the vault keeps working."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_memory import store as store_module
from agent_memory.errors import InvalidInput
from agent_memory.vault import Vault

from conftest import assert_index_matches_files


def test_a_corrupt_index_file_is_rebuilt_from_the_files(vault: Vault) -> None:
    memory = vault.remember("Customer ACME prefers deploys on Fridays")["memory"]
    db = vault.index.path
    vault.close()
    db.write_bytes(b"this is not a database, a sync tool wrote half a copy" * 100)
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)

    reopened = Vault(vault.root, clock=vault.clock)
    try:
        assert [h["id"] for h in reopened.search("ACME Fridays")["hits"]] == [memory["id"]]
        assert_index_matches_files(reopened)
    finally:
        reopened.close()


def test_a_corrupt_index_does_not_break_the_cli(vault: Vault) -> None:
    vault.remember("Globex wants incident summaries")
    vault.close()
    vault.index.path.write_bytes(b"\x00garbage" * 500)
    done = subprocess.run([sys.executable, "-m", "agent_memory", "--dir", str(vault.root), "search", "Globex"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Globex wants incident summaries" in done.stdout


def test_a_read_only_vault_with_expired_memories_can_still_be_searched(
    vault: Vault, clock, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    vault.remember("a short-lived fact about parking", ttl_days=1)
    kept = vault.remember("a lasting fact about parking")["memory"]
    vault.close()
    clock.advance(days=2)

    def read_only(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(store_module.os, "rename", read_only)
    reopened = Vault(vault.root, clock=clock)
    try:
        assert "read-only" in capsys.readouterr().err
        assert [h["id"] for h in reopened.search("parking")["hits"]] == [kept["id"]]
        assert len(list(reopened.store.walk())) == 2  # nothing moved, nothing lost
    finally:
        reopened.close()


def test_remember_works_where_hard_links_are_not_supported(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(store_module.os, "link", no_links)
    first = vault.remember("Same title here", title="Same title")["memory"]
    second = vault.remember("Other content, same title", title="Same title")["memory"]
    assert first["path"].endswith("/same-title.md") and second["path"].endswith("/same-title-2.md")
    assert vault.get(first["id"])["content"].strip() == "Same title here"
    leftovers = [p for p in vault.root.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []
    assert_index_matches_files(vault)


def test_an_expired_owner_does_not_hide_a_live_copy_of_its_id(vault: Vault, clock) -> None:
    owner = vault.remember("the original, short lived", ttl_days=1)["memory"]
    text = (vault.root / owner["path"]).read_text()
    copy = text.replace("the original, short lived", "a hand-made copy that lasts").replace(
        next(line for line in text.splitlines() if line.startswith("expires:")) + "\n", ""
    )
    clock.advance(hours=1)
    (vault.root / "copy.md").write_text(copy.replace(owner["created"], "2026-07-20T09:30:00Z"))
    vault.reconcile()
    assert vault.get(owner["id"])["path"] == owner["path"]  # earliest created owns the id
    clock.advance(days=1)
    assert vault.get(owner["id"])["path"] == "copy.md"


def test_limit_must_be_a_real_number(vault: Vault) -> None:
    with pytest.raises(InvalidInput, match="limit must be between 1 and 100"):
        vault.search("anything", limit=True)  # type: ignore[arg-type]
