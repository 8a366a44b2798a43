"""``doctor`` on a broken installation or vault: each fault is one failing line saying what
to do, the exit code is 1, and nothing on disk changes."""

from __future__ import annotations

import importlib.metadata
import json
import sqlite3
from pathlib import Path

import pytest

from agent_memory.vault import doctor
from agent_memory.vault.vault import Vault

from conftest import run_cli


def files_of(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def checks_of(done) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads(done.stdout)["checks"]}


def test_doctor_on_a_file_instead_of_a_vault_fails_and_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("not a vault\n")
    done = run_cli("doctor", vault=path)
    assert done.returncode == 1
    assert f"[fail] vault: {path} is a file, not a folder" in done.stdout
    assert path.read_text() == "not a vault\n"


def test_doctor_names_a_broken_settings_file_and_still_checks_the_rest(vault: Vault) -> None:
    vault.remember("The VPN needs the hardware key")
    vault.close()
    (vault.root / ".agent-memory.toml").write_text("[recall\nsemantic = \n")
    before = files_of(vault.root)
    done = run_cli("--json", "doctor", vault=vault.root)
    assert done.returncode == 1
    checks = checks_of(done)
    assert not checks["files"]["ok"] and any(".agent-memory.toml" in item for item in checks["files"]["items"])
    assert checks["index"]["ok"] and checks["duplicate ids"]["ok"]  # the rest still ran
    assert checks["saves kept aside"]["detail"] == "none" and not checks["saves kept aside"]["warn"]
    assert files_of(vault.root) == before


def test_doctor_says_how_to_fix_an_unreadable_index_and_does_not_touch_it(vault: Vault) -> None:
    vault.remember("The VPN needs the hardware key")
    vault.close()
    db = vault.index.path
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"half a copy from a sync tool" * 200)
    before = files_of(vault.root)
    done = run_cli("doctor", vault=vault.root)
    assert done.returncode == 1
    [line] = [ln for ln in done.stdout.splitlines() if ln.startswith("[fail] index:")]
    assert "cannot be read" in line and line.endswith("Delete the folder and run `agent-memory reindex`.")
    assert files_of(vault.root) == before


def test_doctor_names_an_index_of_another_schema_version_which_the_next_command_rebuilds(vault: Vault) -> None:
    vault.remember("The VPN needs the hardware key")
    vault.close()
    conn = sqlite3.connect(vault.index.path)
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    done = run_cli("--json", "doctor", vault=vault.root)
    assert done.returncode == 0  # no problem: any command catches up by itself
    index = checks_of(done)["index"]
    assert index["ok"] and index["warn"] and index["detail"].startswith("The index has schema version 1 ")
    assert index["detail"].endswith("the next command rebuilds it.")


def test_doctor_fails_sqlite_when_it_cannot_make_a_full_text_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python whose SQLite lacks FTS5 (some distributions' builds) is named, not crashed on."""
    real_connect = sqlite3.connect

    def without_virtual_tables(*args: object, **kwargs: object) -> sqlite3.Connection:
        conn = real_connect(*args, **kwargs)  # type: ignore[arg-type]
        conn.set_authorizer(lambda action, *_: sqlite3.SQLITE_DENY if action == sqlite3.SQLITE_CREATE_VTABLE
                            else sqlite3.SQLITE_OK)
        return conn

    monkeypatch.setattr(doctor.sqlite3, "connect", without_virtual_tables)
    check = doctor.check_sqlite()
    assert not check.ok and check.detail.startswith(f"SQLite {sqlite3.sqlite_version} without a usable FTS5:")


def test_doctor_fails_mcp_when_the_sdk_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    real_version = importlib.metadata.version

    def version(name: str) -> str:
        if name == "mcp":
            raise importlib.metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr(doctor.importlib.metadata, "version", version)
    check = doctor.check_mcp()
    assert not check.ok and check.detail == "the mcp package is not installed: reinstall agent-memory"


def test_a_link_written_with_md_to_a_file_named_x_md_md_is_not_broken(vault: Vault) -> None:
    (vault.root / "draft.md.md").write_text("A file saved twice with the extension.\n")
    (vault.root / "hub.md").write_text("See [[draft.md]] and [[missing.md]].\n")
    check = {c.name: c for c in doctor.check_vault(vault.root)}["broken links"]
    assert check.items == ["hub.md: links_to -> [[missing.md]]"]
