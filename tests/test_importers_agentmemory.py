"""Moving in from AgentMemory (seed 002): its ``.memory/YYYY/MM/DD/<slug>.md`` bodies and
``memories.db`` beside them (summary -> title, keywords -> tags, created_at kept). Its
folder is already in our dated layout and may be the vault itself: then the files are
adopted in place, never imported into themselves."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agent_memory.note.parse import is_tool_id, parse
from agent_memory.errors import InvalidInput
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, run_cli

# Bodies as its insert_memory writes them: the content as given (often a prompt's JSON),
# CRLF from a Windows client, a collision suffix, no front matter.
BODIES = {
    "2026/07/20/deploy-runbook.md": b'{\r\n  "title": "Deploy runbook",\r\n  "steps": [{"order": 1, "instruction": '
                                     b'"build"}, {"order": 2, "instruction": "ship"}]\r\n}\r\n',
    "2026/07/20/deploy-runbook-1.md": "Second run of the deploy: it failed on the migration step. Caf\u00e9 Wi-Fi.\n".encode(),
    "2026/07/21/acme-prefers-fridays.md": b"ACME prefers deploys on Fridays.\n",
}
ROWS = [  # (id, file_path as it stored it, summary, created_at as CURRENT_TIMESTAMP writes it, keywords)
    (1, "{folder}/2026/07/20/deploy-runbook.md", "Deploy runbook: build then ship", "2026-07-20 09:15:00",
     ["deploy", "Run Book"]),
    (2, "2026/07/20/deploy-runbook-1.md", "Deploy failed on migration", "2026-07-20 17:40:02", ["deploy", "incident"]),
    (3, ".memory/2026/07/21/acme-prefers-fridays.md", "ACME deploy day", "2026-07-21 10:00:00", []),
]


def _agentmemory(base: Path, rows: list[tuple] = ROWS) -> Path:
    """Its folder and database as its server leaves them in the working folder ``base``."""
    folder = base / ".memory"
    for rel, data in BODIES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    db = sqlite3.connect(base / "memories.db")
    db.executescript("""
        CREATE TABLE memories (id INTEGER PRIMARY KEY, file_path TEXT UNIQUE, summary TEXT,
          created_at TEXT DEFAULT CURRENT_TIMESTAMP);
        CREATE TABLE keywords (memory_id INTEGER, keyword TEXT, PRIMARY KEY (memory_id, keyword));
        CREATE VIRTUAL TABLE memories_fts USING fts5(summary, keywords);
    """)
    for memory_id, file_path, summary, created, keywords in rows:
        db.execute("INSERT INTO memories VALUES (?, ?, ?, ?)", (memory_id, file_path.format(folder=folder), summary, created))
        db.executemany("INSERT INTO keywords VALUES (?, ?)", [(memory_id, k) for k in keywords])
    db.commit()
    db.close()
    return folder


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.md"))
            if not p.relative_to(root).as_posix().startswith(".")}


def _check_memories(vault: Vault) -> None:
    runbook = vault.get("2026/07/20/deploy-runbook.md")
    assert runbook["title"] == "Deploy runbook: build then ship" and runbook["tags"] == ["deploy", "run-book"]
    assert (runbook["created"], runbook["updated"]) == ("2026-07-20T09:15:00Z", "2026-07-20T09:15:00Z")
    assert is_tool_id(runbook["id"])
    failed = vault.get("2026/07/20/deploy-runbook-1.md")
    assert failed["title"] == "Deploy failed on migration" and failed["created"] == "2026-07-20T17:40:02Z"
    acme = vault.get("2026/07/21/acme-prefers-fridays.md")
    assert acme["title"] == "ACME deploy day" and acme["tags"] == []
    assert vault.search("when does ACME deploy")["hits"][0]["id"] == acme["id"]
    assert vault.search("run-book")["hits"][0]["id"] == runbook["id"]
    assert_index_matches_files(vault)


def test_its_folder_as_the_vault_is_adopted_in_place(tmp_path: Path, clock) -> None:
    folder = _agentmemory(tmp_path)
    vault = Vault.init(folder, clock=clock)  # the vault is AgentMemory's own .memory/
    try:
        assert vault.stats()["total"] == 3  # already memories (ids are their paths) before the import
        result = vault.import_memories(folder, format="agentmemory")
        assert (result["imported"], result["updated"]) == (0, 3)  # no copy of any file
        after = _files(folder)
        assert sorted(after) == sorted(BODIES)  # nothing moved, nothing added
        for rel, data in BODIES.items():
            assert after[rel].endswith(data)  # the body's bytes as they were, CRLF included
            assert parse(after[rel], rel).meta["title"] and after[rel].startswith(b"---")
        _check_memories(vault)

        again = vault.import_memories(tmp_path / "memories.db", format="agentmemory")  # the database this time
        assert (again["imported"], again["updated"], again["unchanged"]) == (0, 0, 3)
        assert _files(folder) == after  # byte-identical
    finally:
        vault.close()


def test_its_folder_elsewhere_is_imported_with_its_layout(vault: Vault, tmp_path: Path) -> None:
    source = _agentmemory(tmp_path / "project")
    originals = _files(source)
    result = vault.import_memories(source, format="agentmemory")
    assert result["imported"] == 3 and sorted(result["paths"]) == sorted(BODIES)
    for rel, data in BODIES.items():  # a new file the tool writes has LF line ends (SPEC §2)
        assert vault.get(rel)["content"].encode() == data.replace(b"\r\n", b"\n")
    assert _files(source) == originals  # the source is only read
    _check_memories(vault)
    before = _files(vault.root)
    assert vault.import_memories(source, format="agentmemory")["unchanged"] == 3 and _files(vault.root) == before

    (source / "2026/07/21/acme-prefers-fridays.md").write_bytes(b"ACME prefers deploys on Fridays, before noon.\n")
    changed = vault.import_memories(source, format="agentmemory")
    assert (changed["updated"], changed["unchanged"]) == (1, 2)
    assert vault.get("2026/07/21/acme-prefers-fridays.md")["content"] == "ACME prefers deploys on Fridays, before noon.\n"
    assert_index_matches_files(vault)


def test_a_row_whose_file_is_missing_writes_nothing(vault: Vault, tmp_path: Path) -> None:
    source = _agentmemory(tmp_path / "project", [*ROWS, (4, "2026/07/22/gone.md", "Gone", "2026-07-22 08:00:00", [])])
    with pytest.raises(InvalidInput, match=r"Memory 4 of .*gone\.md.*Nothing was imported"):
        vault.import_memories(source, format="agentmemory")
    assert list(vault.store.walk()) == []


def test_a_person_edit_between_check_and_write_stands(tmp_path: Path, clock) -> None:
    """All or nothing across a crash: the staged adoption is finished on the next open,
    except where a person saved the file since (their save stands)."""
    folder = _agentmemory(tmp_path)
    vault = Vault.init(folder, clock=clock)
    try:
        from agent_memory.transfer.formats import importer

        plan = vault.maintenance.importing.plan_sync(importer("agentmemory")(folder), clock())
        with vault.core.writing():
            vault.maintenance.staging().stage(plan.files)  # the commit point reached, then a crash
        (folder / "2026/07/21/acme-prefers-fridays.md").write_bytes(b"ACME now deploys on Thursdays.\n")
    finally:
        vault.close()
    reopened = Vault(folder, clock=clock)
    try:
        assert not (folder / ".index" / "import").exists()
        assert reopened.get("2026/07/20/deploy-runbook.md")["title"] == "Deploy runbook: build then ship"
        assert (folder / "2026/07/21/acme-prefers-fridays.md").read_bytes() == b"ACME now deploys on Thursdays.\n"
        assert_index_matches_files(reopened)
    finally:
        reopened.close()


def test_cli_import_from_agentmemory(tmp_path: Path) -> None:
    folder = _agentmemory(tmp_path)
    assert run_cli("init", str(folder)).returncode == 0
    done = run_cli("import", "--from", "agentmemory", str(folder), vault=folder)
    assert done.returncode == 0, done.stderr
    assert "Imported 0, updated 3, unchanged 0, expired 0, links 0" in done.stdout
    again = run_cli("import", "--from", "agentmemory", str(folder), "--json", vault=folder)
    assert json.loads(again.stdout)["unchanged"] == 3 and again.stderr == ""
    missing = run_cli("import", "--from", "agentmemory", str(tmp_path / "nowhere"), vault=folder)
    assert missing.returncode == 1 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr


def test_two_rows_naming_one_file_are_refused_not_half_imported(tmp_path: Path, clock) -> None:
    rows = [*ROWS, (9, "2026/07/21/acme-prefers-fridays.md", "The same file again", "2026-07-22 08:00:00", [])]
    folder = _agentmemory(tmp_path, rows=rows)
    before = _files(folder)
    vault = Vault.init(folder, clock=clock)
    try:
        with pytest.raises(InvalidInput, match="both name the file 2026/07/21/acme-prefers-fridays.md"):
            vault.import_memories(folder, format="agentmemory")
        assert _files(folder) == before
    finally:
        vault.close()


def test_a_body_that_starts_like_front_matter_is_never_rewritten(tmp_path: Path, clock) -> None:
    # The agent stored a YAML document: it starts with '---' but no import wrote it.
    yaml_doc = b"---\ntitle: not front matter, a yaml doc the agent stored\n---\nrest of it\n"
    folder = _agentmemory(tmp_path, rows=[(4, "2026/07/22/yaml-doc.md", "A stored YAML doc", "2026-07-22 08:00:00", [])])
    (folder / "2026/07/22").mkdir(parents=True, exist_ok=True)
    (folder / "2026/07/22/yaml-doc.md").write_bytes(yaml_doc)
    before = _files(folder)
    vault = Vault.init(folder, clock=clock)
    try:
        with pytest.raises(InvalidInput, match="front matter this import did not write"):
            vault.import_memories(folder, format="agentmemory")
        assert _files(folder) == before  # nothing rewritten, nothing added
    finally:
        vault.close()
