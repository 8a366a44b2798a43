"""Moving in from memory-mcp (seed 001): its memories (hash, tags, memory_type,
importance, times) and relationships, as its tools return them and as its SQLite file."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from agent_memory.note.parse import parse
from agent_memory.errors import InvalidInput
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, run_cli


def _hash(content: str, tags: list[str]) -> str:
    return hashlib.sha256((content + "\0" + ",".join(sorted(tags))).encode()).hexdigest()


def _memory(content: str, tags: list[str], kind: str, importance: int, created: str, updated: str | None = None) -> dict:
    """One memory as search_memories / get_memory return it (its MemorySchema)."""
    return {"hash": _hash(content, tags), "content": content, "tags": tags, "memory_type": kind,
            "importance": importance, "created_at": created, "updated_at": updated or created}


PNPM = _memory("Use pnpm, not npm, in the web repo", ["tooling", "web"], "decision", 8, "2026-02-01T10:00:00.123Z",
               "2026-02-02T08:30:00.000Z")
CACHE = _memory("The CI cache broke after the switch to pnpm", ["ci", "incident"], "error", 6, "2026-02-03T10:00:00.000Z")
LESSON = _memory("Pin the package manager version in CI images", ["ci"], "lesson", 9, "2026-02-04T16:45:10.000Z")
GENERAL = _memory("Standup is at 09:30 Lisbon time", ["team"], "general", 0, "2025-11-30T09:00:00.000Z")
MEMORIES = [PNPM, CACHE, LESSON, GENERAL]
# as get_relationships returns them (its RelationshipWithMemorySchema), and recall's graph edges
RELATIONSHIPS = [
    {"from_hash": CACHE["hash"], "to_hash": PNPM["hash"], "relation_type": "caused_by", "created_at": "2026-02-03T10:05:00Z",
     "linked_hash": PNPM["hash"], "linked_content": PNPM["content"], "linked_tags": PNPM["tags"]},
    {"from_hash": LESSON["hash"], "to_hash": CACHE["hash"], "relation_type": "derived.from"},
    {"from_hash": LESSON["hash"], "to_hash": PNPM["hash"], "relation_type": "supports"},
]


def _sqlite(path: Path, memories: list[dict], relationships: list[dict]) -> Path:
    """Its database, with the tables its db/index.ts creates."""
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE memories (hash TEXT PRIMARY KEY NOT NULL, content TEXT NOT NULL, tags TEXT NOT NULL DEFAULT '[]',
          memory_type TEXT NOT NULL DEFAULT 'general', importance INTEGER NOT NULL DEFAULT 0,
          created_at TEXT NOT NULL, updated_at TEXT NOT NULL) STRICT;
        CREATE VIRTUAL TABLE memories_fts USING fts5(content, tags, content='memories', content_rowid='rowid');
        CREATE TABLE relationships (from_hash TEXT NOT NULL REFERENCES memories(hash) ON DELETE CASCADE,
          to_hash TEXT NOT NULL REFERENCES memories(hash) ON DELETE CASCADE, relation_type TEXT NOT NULL,
          created_at TEXT NOT NULL, PRIMARY KEY (from_hash, to_hash, relation_type)) STRICT;
    """)
    db.executemany("INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?, ?)",
                   [(m["hash"], m["content"], json.dumps(m["tags"]), m["memory_type"], m["importance"], m["created_at"],
                     m["updated_at"]) for m in memories])
    db.executemany("INSERT INTO relationships VALUES (?, ?, ?, ?)",
                   [(r["from_hash"], r["to_hash"], r["relation_type"], "2026-02-05T00:00:00Z") for r in relationships])
    db.commit()
    db.close()
    return path


def _files(vault: Vault) -> dict[str, bytes]:
    return {rel: (vault.root / rel).read_bytes() for rel, _ in vault.store.walk()}


def _check_round_trip(vault: Vault, result: dict) -> None:
    """Every memory with its dates, type, importance, tags and relationships."""
    assert (result["imported"], result["links"]) == (4, 3)
    by_content = {vault.get(i)["content"].strip(): vault.get(i) for i in result["ids"]}
    pnpm = by_content[PNPM["content"]]
    assert (pnpm["created"], pnpm["updated"]) == ("2026-02-01T10:00:00Z", "2026-02-02T08:30:00Z")
    assert pnpm["path"].startswith("2026/02/01/") and pnpm["tags"] == ["tooling", "web"]
    assert (pnpm["front_matter"]["type"], pnpm["front_matter"]["importance"]) == ("decision", 8)
    lesson = by_content[LESSON["content"]]
    assert lesson["front_matter"]["relation_types"] == {"derived_from": "derived.from"}  # given back on export
    edges = {(e["relation"], e["target"]) for e in vault.related(lesson["id"])["edges"] if e["source"] == lesson["id"]}
    cache = by_content[CACHE["content"]]
    assert edges == {("derived_from", cache["id"]), ("supports", pnpm["id"])}
    assert {(e["relation"], e["target"]) for e in vault.related(cache["id"])["edges"]
            if e["source"] == cache["id"]} == {("caused_by", pnpm["id"])}
    assert by_content[GENERAL["content"]]["front_matter"]["importance"] == 0
    assert vault.stats()["types"] == {"decision": 1, "error": 1, "lesson": 1, "general": 1}
    hits = vault.search("package manager CI", min_importance=9)["hits"]
    assert [h["id"] for h in hits] == [lesson["id"]]
    assert_index_matches_files(vault)


def test_memories_and_relationships_as_its_tools_return_them(vault: Vault, tmp_path: Path) -> None:
    source = tmp_path / "memories.json"
    source.write_text(json.dumps({"memories": MEMORIES, "relationships": RELATIONSHIPS}))
    _check_round_trip(vault, vault.import_memories(source, format="memory-mcp"))


def test_its_sqlite_file(vault: Vault, tmp_path: Path) -> None:
    database = _sqlite(tmp_path / "memory.db", MEMORIES, RELATIONSHIPS)
    _check_round_trip(vault, vault.import_memories(database, format="memory-mcp"))


def test_imported_again_unchanged_is_left_alone_and_changed_is_updated(vault: Vault, tmp_path: Path, clock) -> None:
    database = _sqlite(tmp_path / "memory.db", MEMORIES, RELATIONSHIPS)
    first = vault.import_memories(database, format="memory-mcp")
    before = _files(vault)
    again = vault.import_memories(database, format="memory-mcp")
    assert (again["imported"], again["updated"], again["unchanged"], again["links"]) == (0, 0, 4, 0)
    assert _files(vault) == before

    raised = dict(CACHE, importance=10, memory_type="lesson", updated_at="2026-02-10T00:00:00.000Z")
    extra = [{"from_hash": GENERAL["hash"], "to_hash": LESSON["hash"], "relation_type": "related_to"}]
    changed = _sqlite(tmp_path / "changed.db", [PNPM, raised, LESSON, GENERAL], RELATIONSHIPS + extra)
    result = vault.import_memories(changed, format="memory-mcp")
    assert (result["imported"], result["updated"], result["unchanged"], result["links"]) == (0, 2, 2, 1)
    cache = vault.get(next(i for i in first["ids"] if vault.get(i)["content"].strip() == CACHE["content"]))
    assert (cache["front_matter"]["importance"], cache["front_matter"]["type"]) == (10, "lesson")
    assert cache["updated"] == "2026-02-10T00:00:00Z" and cache["created"] == "2026-02-03T10:00:00Z"
    assert len(_files(vault)) == 4
    assert_index_matches_files(vault)


def test_relationships_in_a_later_batch_link_memories_of_an_earlier_one(vault: Vault) -> None:
    vault.import_memories([PNPM, CACHE], format="memory-mcp")
    later = vault.import_memories([LESSON, *RELATIONSHIPS], format="memory-mcp")
    assert (later["imported"], later["updated"], later["links"]) == (1, 1, 3)  # CACHE gains caused_by
    cache = vault.search("CI cache broke")["hits"][0]
    assert [e["relation"] for e in vault.related(cache["id"])["edges"] if e["source"] == cache["id"]] == ["caused_by"]
    assert_index_matches_files(vault)


def test_a_bad_memory_writes_nothing(vault: Vault) -> None:
    with pytest.raises(InvalidInput, match="importance must be a number from 0 to 10"):
        vault.import_memories([PNPM, dict(CACHE, importance=11)], format="memory-mcp")
    with pytest.raises(InvalidInput, match="Relationship 1 needs from_hash"):
        vault.import_memories([PNPM, {"from_hash": PNPM["hash"]}], format="memory-mcp")
    assert list(vault.store.walk()) == []


def test_a_database_that_is_not_memory_mcps_is_refused(vault: Vault, tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    sqlite3.connect(other).executescript("CREATE TABLE notes (id INTEGER, body TEXT); INSERT INTO notes VALUES (1, 'x');")
    with pytest.raises(InvalidInput, match="not a memory-mcp database"):
        vault.import_memories(other, format="memory-mcp")
    assert list(vault.store.walk()) == []


def test_cli_import_from_memory_mcp(vault: Vault, tmp_path: Path) -> None:
    database = _sqlite(tmp_path / "memory.db", MEMORIES, RELATIONSHIPS)
    done = run_cli("import", "--from", "memory-mcp", str(database), vault=vault.root)
    assert done.returncode == 0, done.stderr
    assert "Imported 4, updated 0, unchanged 0, expired 0, links 3; skipped 0 duplicates." in done.stdout
    assert done.stderr == ""  # no terminal: no progress bar
    again = run_cli("import", "--from", "memory-mcp", str(database), "--json", vault=vault.root)
    assert again.returncode == 0 and again.stderr == ""
    assert {k: v for k, v in json.loads(again.stdout).items() if k not in ("ids", "paths")} == {
        "imported": 0, "updated": 0, "unchanged": 4, "duplicates": 0, "expired": 0, "links": 0, "kept": 0, "forgotten": 0}
    piped = run_cli("import", "--from", "memory-mcp", "-", "--json", vault=vault.root,
                    stdin=json.dumps([dict(LESSON, importance=7)]))  # its tools' JSON on standard input
    assert piped.returncode == 0, piped.stderr
    assert (json.loads(piped.stdout)["updated"], json.loads(piped.stdout)["unchanged"]) == (1, 0)
    vault.reindex()
    first = parse((vault.root / min(_files(vault))).read_bytes(), "x.md")
    assert first.id.startswith("mm-")
    assert_index_matches_files(vault)


@pytest.mark.anyio
async def test_import_memories_takes_memory_mcp_over_the_real_client(vault: Vault) -> None:
    from mcp import Client

    from agent_memory.server.app import build_server

    async with Client(build_server(vault)) as client:
        done = await client.call_tool("import_memories", {"items": [PNPM, CACHE, RELATIONSHIPS[0]], "format": "memory-mcp"})
        assert done.is_error is False, done.content[0].text
        assert (done.structured_content["imported"], done.structured_content["links"]) == (2, 1)
        again = await client.call_tool("import_memories", {"items": [PNPM, CACHE, RELATIONSHIPS[0]], "format": "memory-mcp"})
        assert again.structured_content["unchanged"] == 2
    assert_index_matches_files(vault)


def test_a_bad_memory_in_a_second_import_leaves_every_file_as_it_was(vault: Vault, tmp_path: Path) -> None:
    vault.import_memories([PNPM, CACHE, *RELATIONSHIPS[:1]], format="memory-mcp")
    before = _files(vault)
    cache = vault.get("mm-" + CACHE["hash"][:16])
    path = vault.root / cache["path"]
    with pytest.raises(InvalidInput, match="Item 2: importance must be a number from 0 to 10"):
        vault.import_memories([dict(PNPM, importance=3), CACHE, dict(LESSON, importance=-1)], format="memory-mcp")
    assert _files(vault) == before  # the update of the first one did not happen either
    text = path.read_text()
    path.write_text(text.replace(text[text.index("caused_by:"):text.index("\n---")], "caused_by: {odd: mapping}"))
    with pytest.raises(InvalidInput, match="already has a 'caused_by' key that is not a list"):
        vault.import_memories([*MEMORIES, *RELATIONSHIPS], format="memory-mcp")
    assert len(_files(vault)) == 2
    vault.reconcile()  # the hand edit, as a watcher would fold it in
    assert_index_matches_files(vault)
