"""Moving in from another memory server: its own files, imported with their dates, types
and links (agent_memory/transfer/importers/), through the vault, the CLI and the MCP tool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_memory.cli.transfer import IMPORT_FORMATS
from agent_memory.transfer.formats import IMPORT_FORMATS as ALL_FORMATS
from agent_memory.transfer.importers.knowledge_graph import entity_id, relation_property
from agent_memory.vault import doctor
from agent_memory.vault.graph import NAMESPACE, KnowledgeGraph
from agent_memory.note.links import RELATION_NAME
from agent_memory.note.parse import RESERVED_KEYS, is_tool_id, parse
from agent_memory.errors import InvalidInput
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, run_cli, run_with_terminal_stderr, tool_error, tool_ok

# A memory.jsonl as the MCP reference memory server writes it: one record a line,
# entities and relations mixed, names with characters no file name can hold.
KNOWLEDGE_GRAPH = [
    {"type": "entity", "name": "Priya Shah", "entityType": "person",
     "observations": ["Leads the billing team", "Prefers async standups"]},
    {"type": "entity", "name": "priya shah", "entityType": "person", "observations": []},
    {"type": "entity", "name": "ACME/Corp #1", "entityType": "organization",
     "observations": ["Customer since 2021", "Deploys only on Fridays"]},
    {"type": "entity", "name": "[[Project|Atlas]]", "entityType": "project", "observations": []},
    {"type": "relation", "from": "Priya Shah", "to": "ACME/Corp #1", "relationType": "works at"},
    {"type": "relation", "from": "Priya Shah", "to": "[[Project|Atlas]]", "relationType": "leads"},
    {"type": "relation", "from": "ACME/Corp #1", "to": "[[Project|Atlas]]", "relationType": "funds"},
]


def _jsonl(tmp_path: Path, records: list[dict]) -> Path:
    path = tmp_path / "memory.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_the_cli_knows_every_format() -> None:
    assert IMPORT_FORMATS == ALL_FORMATS


def test_an_unknown_format_is_refused_naming_the_ones_there_are(vault: Vault) -> None:
    with pytest.raises(InvalidInput, match="mcp-knowledge-graph, mcp-memory-vault"):
        vault.import_memories([], format="mem0")


def _graph(vault: Vault) -> dict[str, Any]:
    """The graph serve --compat knowledge-graph answers read_graph with."""
    return dict(KnowledgeGraph(vault.core, vault.writes).read_graph())


def _source_graph(records: list[dict]) -> dict[str, Any]:
    return {"entities": [{k: r[k] for k in ("name", "entityType", "observations")} for r in records if r["type"] == "entity"],
            "relations": [{k: r[k] for k in ("from", "to", "relationType")} for r in records if r["type"] == "relation"]}


def _note_of(vault: Vault, name: str) -> Path:
    """The file of the entity ``name`` (its id is derived from the name)."""
    return vault.root / vault.get(entity_id(name))["path"]


def test_a_knowledge_graph_becomes_the_notes_the_compat_server_keeps(vault: Vault, tmp_path: Path) -> None:
    result = vault.import_memories(_jsonl(tmp_path, KNOWLEDGE_GRAPH), format="mcp-knowledge-graph")
    assert result["imported"] == 4 and result["links"] == 3
    assert sorted(result["paths"]) == ["2026/07/20/acme-corp-1.md", "2026/07/20/priya-shah-2.md",
                                       "2026/07/20/priya-shah.md", "2026/07/20/project-atlas.md"]
    priya = parse(_note_of(vault, "Priya Shah").read_bytes(), "x.md")
    assert priya.namespace == NAMESPACE and priya.meta["entity"] == {"name": "Priya Shah", "entityType": "person",
                                                                      "order": 1}
    assert priya.body == "- Leads the billing team\n- Prefers async standups\n"
    assert [r["relationType"] for r in priya.meta["relations"]] == ["works at", "leads"]  # the source's names
    assert priya.links == []  # a name is never a link: nothing for doctor to find broken
    # the entity differing only in case, and the one named like a wikilink, are their own notes
    assert _graph(vault) == _source_graph(KNOWLEDGE_GRAPH)
    assert vault.search("who leads the billing team")["hits"][0]["id"] == entity_id("Priya Shah")
    assert {c.name: c for c in doctor.check_vault(vault.root)}["broken links"].ok
    assert_index_matches_files(vault)


def _files(vault: Vault) -> dict[str, bytes]:
    return {rel: (vault.root / rel).read_bytes() for rel, _ in vault.store.walk()}


def test_a_knowledge_graph_imported_again_changes_nothing(vault: Vault, tmp_path: Path) -> None:
    source = _jsonl(tmp_path, KNOWLEDGE_GRAPH)
    first = vault.import_memories(source, format="mcp-knowledge-graph")
    assert first["links"] == 3
    before = _files(vault)
    again = vault.import_memories(source, format="mcp-knowledge-graph")
    assert (again["imported"], again["updated"], again["unchanged"], again["links"]) == (0, 0, 4, 0)
    assert _files(vault) == before  # byte for byte, nothing added
    assert_index_matches_files(vault)


def test_an_entity_that_gained_an_observation_is_updated_in_place(vault: Vault, tmp_path: Path, clock) -> None:
    vault.import_memories(_jsonl(tmp_path, KNOWLEDGE_GRAPH), format="mcp-knowledge-graph")
    priya = _note_of(vault, "Priya Shah")
    # a person's own key and comment stay through the update
    priya.write_text(priya.read_text().replace("tags: []\n", "tags: []\nmood: calm  # mine\n"))
    vault.reconcile()
    untouched = _note_of(vault, "[[Project|Atlas]]").read_bytes()
    grown = json.loads(json.dumps(KNOWLEDGE_GRAPH))
    grown[0]["observations"].append("Moved to the Lisbon office")
    grown.append({"type": "relation", "from": "Priya Shah", "to": "priya shah", "relationType": "same as"})
    clock.advance(days=1)
    result = vault.import_memories(_jsonl(tmp_path, grown), format="mcp-knowledge-graph")
    assert (result["imported"], result["updated"], result["unchanged"], result["links"]) == (0, 1, 3, 1)
    note = parse(priya.read_bytes(), "x.md")
    assert note.body.endswith("- Prefers async standups\n- Moved to the Lisbon office\n")
    assert "mood: calm  # mine\n" in priya.read_text()
    assert note.meta["relations"][-1] == {"from": "Priya Shah", "to": "priya shah", "relationType": "same as",
                                          "order": 8}
    assert note.updated == "2026-07-21T09:00:00Z" and note.id == result["ids"][0]
    assert _note_of(vault, "[[Project|Atlas]]").read_bytes() == untouched
    assert any(e["reason"] == "replaced" for e in vault.trash_list())  # the old body stays restorable
    assert _graph(vault) == _source_graph(grown)
    assert_index_matches_files(vault)


def test_importing_again_never_undoes_what_a_person_changed_since(vault: Vault, tmp_path: Path, clock) -> None:
    source = _jsonl(tmp_path, KNOWLEDGE_GRAPH)
    vault.import_memories(source, format="mcp-knowledge-graph")
    priya = _note_of(vault, "Priya Shah")
    priya.write_text(priya.read_text().replace("- Prefers async standups", "- Prefers async standups (Bob: confirmed)"))
    edited = priya.read_bytes()
    vault.reconcile()  # as the watcher folds a person's save in
    # The same source again: nothing to bring, the person's edit stands (no trash copy needed).
    again = vault.import_memories(source, format="mcp-knowledge-graph")
    assert (again["updated"], again["unchanged"], again["kept"]) == (0, 4, 0)
    assert priya.read_bytes() == edited
    # The source changed too: both changed, so the person's file stands, and the import says so.
    grown = json.loads(json.dumps(KNOWLEDGE_GRAPH))
    grown[0]["observations"].append("Moved to the Lisbon office")
    clock.advance(days=1)
    changed = vault.import_memories(_jsonl(tmp_path, grown), format="mcp-knowledge-graph")
    assert (changed["updated"], changed["kept"]) == (0, 1)
    assert priya.read_bytes() == edited
    # A memory nobody touched still follows its source.
    grown[2]["observations"].append("Budget approved in May")
    followed = vault.import_memories(_jsonl(tmp_path, grown), format="mcp-knowledge-graph")
    acme = _note_of(vault, "ACME/Corp #1")
    assert (followed["updated"], followed["kept"]) == (1, 1) and "Budget approved in May" in acme.read_text()
    assert_index_matches_files(vault)


def test_importing_again_does_not_bring_back_what_was_forgotten(vault: Vault, tmp_path: Path) -> None:
    source = _jsonl(tmp_path, KNOWLEDGE_GRAPH)
    vault.import_memories(source, format="mcp-knowledge-graph")
    acme = vault.get(entity_id("ACME/Corp #1"))["path"]
    vault.forget(acme)
    again = vault.import_memories(source, format="mcp-knowledge-graph")
    assert (again["imported"], again["forgotten"]) == (0, 1)
    assert not (vault.root / acme).exists()
    # nor the relation its note held ("funds"): it went with it
    assert [r["relationType"] for r in _graph(vault)["relations"]] == ["works at", "leads"]
    vault.restore(acme)  # restore is the way back; then the import follows it again
    assert vault.import_memories(source, format="mcp-knowledge-graph")["forgotten"] == 0
    assert (vault.root / acme).exists()
    assert _graph(vault) == _source_graph(KNOWLEDGE_GRAPH)
    assert_index_matches_files(vault)


def test_a_relation_in_a_later_batch_joins_the_entities_of_an_earlier_one(vault: Vault) -> None:
    entities = [r for r in KNOWLEDGE_GRAPH if r["type"] == "entity"]
    relations = [r for r in KNOWLEDGE_GRAPH if r["type"] == "relation"]
    vault.import_memories(entities, format="mcp-knowledge-graph")
    priya = _note_of(vault, "Priya Shah")
    before = parse(priya.read_bytes(), "x.md")
    later = vault.import_memories(relations, format="mcp-knowledge-graph")
    assert (later["imported"], later["updated"], later["links"]) == (0, 2, 3)  # Priya and ACME gain relations
    after = parse(priya.read_bytes(), "x.md")
    assert after.body == before.body  # only relations added, observations kept
    assert _graph(vault) == _source_graph(KNOWLEDGE_GRAPH)
    # and the other way round: the relation first, its entities in the next batch
    vault.import_memories([{"type": "relation", "from": "Globex", "to": "Dana Ruiz", "relationType": "employs"}],
                          format="mcp-knowledge-graph")
    vault.import_memories([{"type": "entity", "name": "Dana Ruiz", "entityType": "person", "observations": ["CFO"]}],
                          format="mcp-knowledge-graph")
    graph = KnowledgeGraph(vault.core, vault.writes).open_nodes(["Dana Ruiz"])
    assert graph["relations"] == [{"from": "Globex", "to": "Dana Ruiz", "relationType": "employs"}]
    assert_index_matches_files(vault)


def test_a_knowledge_graph_round_trips_through_export(vault: Vault, tmp_path: Path) -> None:
    vault.import_memories(_jsonl(tmp_path, KNOWLEDGE_GRAPH), format="mcp-knowledge-graph")
    exported = vault.export_memories(format="mcp-knowledge-graph")

    def graph(records: list[dict]) -> tuple[set, set]:
        entities = {(r["name"], r["entityType"], tuple(r["observations"])) for r in records if r["type"] == "entity"}
        relations = {(r["from"], r["to"], r["relationType"]) for r in records if r["type"] == "relation"}
        return entities, relations

    assert graph(exported) == graph(KNOWLEDGE_GRAPH)
    assert [r["type"] for r in exported] == ["entity"] * 4 + ["relation"] * 3  # entities first, as the server writes
    multi = [{"type": "entity", "name": "Runbook", "entityType": "procedure", "observations": ["step one\nthen two", ""]}]
    vault.import_memories(multi, format="mcp-knowledge-graph")
    assert graph(multi)[0] <= graph(vault.export_memories(format="mcp-knowledge-graph"))[0]


def test_cli_export_writes_a_memory_jsonl_that_imports_back(vault: Vault, tmp_path: Path) -> None:
    vault.import_memories(_jsonl(tmp_path, KNOWLEDGE_GRAPH), format="mcp-knowledge-graph")
    out = tmp_path / "out.jsonl"
    done = run_cli("export", "--format", "mcp-knowledge-graph", "-o", str(out), vault=vault.root)
    assert done.returncode == 0, done.stderr
    assert "Exported 4 entities and 3 relations" in done.stderr
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(json.dumps(r, sort_keys=True) for r in lines) == sorted(json.dumps(r, sort_keys=True)
                                                                           for r in vault.export_memories(format="mcp-knowledge-graph"))
    other = Vault.init(tmp_path / "other")
    try:
        assert other.import_memories(out, format="mcp-knowledge-graph")["imported"] == 4
        assert other.export_memories(format="mcp-knowledge-graph") == vault.export_memories(format="mcp-knowledge-graph")
    finally:
        other.close()


def test_two_entities_with_the_same_observations_stay_two(vault: Vault) -> None:
    records = [{"type": "entity", "name": n, "entityType": "team", "observations": ["on call"]} for n in ("Ops", "SRE")]
    result = vault.import_memories(records, format="mcp-knowledge-graph")
    assert result["imported"] == 2
    assert_index_matches_files(vault)


@pytest.mark.parametrize(
    ("kind", "prop"),
    [("works_at", "works_at"), ("works at", "works_at"), ("depends-on", "depends-on"), ("2nd cousin", "rel_2nd_cousin"),
     ("tags", "tags_"), ("is part of!", "is_part_of"), ("", "related_to")],
)
def test_a_relation_type_becomes_a_link_property(kind: str, prop: str) -> None:
    assert relation_property(kind) == prop
    assert RELATION_NAME.fullmatch(prop) and prop not in RESERVED_KEYS


def test_a_bad_knowledge_graph_line_writes_nothing(vault: Vault, tmp_path: Path) -> None:
    path = _jsonl(tmp_path, KNOWLEDGE_GRAPH)
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(InvalidInput, match="line 8 is not JSON \\("):
        vault.import_memories(path, format="mcp-knowledge-graph")
    with pytest.raises(InvalidInput, match="Record 1 is not an entity or a relation"):
        vault.import_memories([{"title": "x"}], format="mcp-knowledge-graph")
    assert list(vault.store.walk()) == []


def test_the_credential_guard_runs_on_a_knowledge_graph(vault: Vault) -> None:
    records = [{"type": "entity", "name": "CI", "entityType": "service", "observations": ["token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"]}]
    with pytest.raises(InvalidInput, match="(?i)token"):
        vault.import_memories(records, format="mcp-knowledge-graph")
    assert list(vault.store.walk()) == []


def test_cli_import_from_knowledge_graph(vault: Vault, tmp_path: Path) -> None:
    source = _jsonl(tmp_path, KNOWLEDGE_GRAPH)
    done = run_cli("import", "--from", "mcp-knowledge-graph", str(source), "--json", vault=vault.root)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["imported"] == 4
    refused = run_cli("import", "--from", "mem0", str(source), vault=vault.root)
    assert refused.returncode != 0 and "mcp-knowledge-graph" in refused.stderr
    vault.reindex()
    assert_index_matches_files(vault)


# mcp-memory-vault's export, as its seed describes it: integer ids, namespaces, tags,
# and canonical UTC (or offset) times, one already expired.
MEMORY_VAULT_EXPORT = {
    "count": 4,
    "memories": [
        {"id": 1, "namespace": "support", "content": "Customer ACME prefers deploys on Fridays",
         "tags": ["customer", "deploy"], "source": "user note 2026-07-20",
         "created_at": "2026-07-20T09:00:00Z", "updated_at": "2026-07-21T10:00:00Z", "expires_at": None},
        {"id": 2, "namespace": "support", "content": "ACME's billing contact is Jane Doe",
         "tags": ["customer", "billing"], "source": "", "created_at": "2026-07-01T08:00:00-08:00",
         "updated_at": "2026-07-01T08:00:00-08:00", "expires_at": None},
        {"id": 3, "namespace": "ops", "content": "Globex staging database resets nightly at 02:00 UTC",
         "tags": ["infra"], "source": "", "created_at": "2026-07-10T00:00:00Z",
         "updated_at": "2026-07-10T00:00:00Z", "expires_at": "2026-08-20T00:00:00Z"},
        {"id": 4, "namespace": "ops", "content": "The old VPN endpoint is vpn1.example.com",
         "tags": ["infra"], "source": "", "created_at": "2025-01-01T00:00:00Z",
         "updated_at": "2025-01-01T00:00:00Z", "expires_at": "2025-06-01T00:00:00Z"},
    ],
}


def test_a_memory_vault_export_keeps_its_dates_and_expiry(vault: Vault, tmp_path: Path, clock) -> None:
    path = tmp_path / "backup.json"
    path.write_text(json.dumps(MEMORY_VAULT_EXPORT))
    result = vault.import_memories(path, format="mcp-memory-vault")
    assert (result["imported"], result["expired"]) == (3, 1)  # the one that expired in 2025 is not back
    by_content = {vault.get(i)["content"].strip(): vault.get(i) for i in result["ids"]}
    acme = by_content["Customer ACME prefers deploys on Fridays"]
    assert (acme["created"], acme["updated"], acme["namespace"]) == ("2026-07-20T09:00:00Z", "2026-07-21T10:00:00Z", "support")
    assert acme["tags"] == ["customer", "deploy"] and acme["front_matter"]["source"] == "user note 2026-07-20"
    assert by_content["ACME's billing contact is Jane Doe"]["created"] == "2026-07-01T16:00:00Z"
    globex = by_content["Globex staging database resets nightly at 02:00 UTC"]
    assert globex["expires"] == "2026-08-20T00:00:00Z" and is_tool_id(globex["id"])  # so the TTL applies
    assert result["paths"][0].startswith("2026/07/20/")
    clock.advance(days=40)  # past 2026-08-20: gone from every read
    assert all(h["id"] != globex["id"] for h in vault.search("Globex staging database")["hits"])
    assert_index_matches_files(vault)


def test_a_memory_vault_export_imported_again_changes_nothing(vault: Vault) -> None:
    first = vault.import_memories(MEMORY_VAULT_EXPORT, format="mcp-memory-vault")
    before = _files(vault)
    again = vault.import_memories(MEMORY_VAULT_EXPORT["memories"], format="mcp-memory-vault")  # the bare array too
    assert (again["imported"], again["updated"], again["unchanged"], again["expired"]) == (0, 0, 3, 1)
    assert len(before) == first["imported"] == 3 and _files(vault) == before
    assert_index_matches_files(vault)


def test_a_memory_vault_export_imported_again_updates_what_changed_there(vault: Vault) -> None:
    vault.import_memories(MEMORY_VAULT_EXPORT, format="mcp-memory-vault")
    before = _files(vault)
    changed = json.loads(json.dumps(MEMORY_VAULT_EXPORT))
    acme = changed["memories"][0]
    acme.update(content="Customer ACME prefers deploys on Fridays before noon", namespace="accounts",
                tags=["customer", "deploy", "schedule"], updated_at="2026-07-25T12:00:00Z")
    result = vault.import_memories(changed, format="mcp-memory-vault")
    assert (result["imported"], result["updated"], result["unchanged"]) == (0, 1, 2)
    memory = vault.get(result["ids"][0])
    assert memory["content"].strip() == "Customer ACME prefers deploys on Fridays before noon"
    assert (memory["namespace"], memory["updated"], memory["created"]) == ("accounts", "2026-07-25T12:00:00Z",
                                                                           "2026-07-20T09:00:00Z")
    assert memory["tags"] == ["customer", "deploy", "schedule"] and memory["path"] in before
    assert {rel: data for rel, data in _files(vault).items() if rel != memory["path"]} == {
        rel: data for rel, data in before.items() if rel != memory["path"]}
    assert_index_matches_files(vault)


def test_a_memory_vault_item_with_a_bad_time_writes_nothing(vault: Vault) -> None:
    bad = {"memories": [MEMORY_VAULT_EXPORT["memories"][0], {"content": "x", "created_at": "yesterday"}]}
    with pytest.raises(InvalidInput, match="Memory 2: created_at 'yesterday' is not a time"):
        vault.import_memories(bad, format="mcp-memory-vault")
    assert list(vault.store.walk()) == []



@pytest.mark.anyio
async def test_import_memories_takes_a_format_over_the_real_client(vault: Vault, client: Any) -> None:
    done = await tool_ok(client, "import_memories", items=KNOWLEDGE_GRAPH, format="mcp-knowledge-graph")
    assert done["imported"] == 4
    vaulted = await tool_ok(client, "import_memories", items=MEMORY_VAULT_EXPORT["memories"], format="mcp-memory-vault")
    assert (vaulted["imported"], vaulted["expired"]) == (3, 1)
    refused = await tool_error(client, "import_memories", items=[{"title": "x"}], format="mcp-knowledge-graph")
    assert "not an entity or a relation" in refused
    assert_index_matches_files(vault)


def test_cli_import_shows_progress_on_a_terminal_but_not_under_json(tmp_path: Path) -> None:
    source = _jsonl(tmp_path, KNOWLEDGE_GRAPH)
    run_cli("init", str(tmp_path / ".memory"))
    done, terminal = run_with_terminal_stderr("import", "--from", "mcp-knowledge-graph", str(source), cwd=tmp_path)
    assert done.returncode == 0, terminal
    assert b"Importing memories" in terminal and b"4/4" in terminal  # done/total
    assert done.stdout.decode().startswith("Imported 4, updated 0, unchanged 0, expired 0, links 3;")
    done, terminal = run_with_terminal_stderr("import", "--from", "mcp-knowledge-graph", str(source), "--json",
                                               cwd=tmp_path)
    assert done.returncode == 0 and terminal == b""
    assert json.loads(done.stdout)["unchanged"] == 4


def test_a_vault_of_its_own_exports_as_a_knowledge_graph(vault: Vault) -> None:
    deploy = vault.remember("Customer ACME prefers deploys on Fridays", title="ACME deploy day", type="preference")
    billing = vault.remember("ACME's billing contact is Jane Doe\n\nShe answers within a day.", namespace="support")
    vault.link(deploy["memory"]["id"], billing["memory"]["id"], "depends_on")
    records = vault.export_memories(format="mcp-knowledge-graph")
    assert {(r["name"], r["entityType"], tuple(r["observations"])) for r in records if r["type"] == "entity"} == {
        ("ACME deploy day", "preference", ("Customer ACME prefers deploys on Fridays",)),
        ("ACME's billing contact is Jane Doe", "memory", ("ACME's billing contact is Jane Doe", "She answers within a day.")),
    }
    assert [r for r in records if r["type"] == "relation"] == [
        {"type": "relation", "from": "ACME deploy day", "to": "ACME's billing contact is Jane Doe", "relationType": "depends_on"}]
    assert [r["name"] for r in vault.export_memories(namespace="support", format="mcp-knowledge-graph")] == [
        "ACME's billing contact is Jane Doe"]
    with pytest.raises(InvalidInput, match="Unknown export format 'mem0'"):
        vault.export_memories(format="mem0")


# ---------------------------------------------------------------- sources an import refuses


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _agentmemory_db(path: Path, create: str) -> Path:
    import sqlite3

    (path.parent / ".memory").mkdir(exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(create)
    conn.close()
    return path


REFUSED = [
    # (format, source: data, or a function of tmp_path making the file, the message)
    ("mcp-knowledge-graph", lambda t: _write(t, "memory.jsonl", b"\xff\xfe not text"), r"memory\.jsonl is not UTF-8 text \(byte 0\), so it cannot be read as JSON lines; save it as UTF-8"),
    ("mcp-knowledge-graph", {"type": "entity"}, r"An mcp-knowledge-graph import is the list of memory\.jsonl records"),
    ("mcp-knowledge-graph", [{"type": "entity", "name": "A", "entityType": "t", "observations": "one text"}], r"Record 1: an entity needs a name, an entityType and a list of observations \(text\)"),
    ("mcp-knowledge-graph", [{"type": "entity", "name": "A", "entityType": 7, "observations": []}], r"Record 1: an entity needs a name, an entityType"),
    ("mcp-knowledge-graph", [{"type": "relation", "from": "A", "to": "B"}], r"Record 1: a relation needs from, to and relationType \(text\)"),
    ("mcp-knowledge-graph", [{"type": "entity", "name": 5, "entityType": "t", "observations": []}], r"Record 1: an entity needs a name"),
    ("mcp-knowledge-graph", [{"type": "entity", "name": "A\x00", "entityType": "t", "observations": []}], r"Entity 1: an entity name holds a NUL character"),
    ("mcp-knowledge-graph", [{"type": "entity", "name": "A", "entityType": "t", "observations": ["\ud800"]}], r"Entity 1: an observation holds an unpaired surrogate"),
    ("mcp-memory-vault", lambda t: _write(t, "export.json", b'{"memories": [}'), r"export\.json is not valid JSON \(.* at line 1\)"),
    ("mcp-memory-vault", {"memories": "not a list"}, r"An mcp-memory-vault import is its export"),
    ("mcp-memory-vault", {"memories": ["just text"]}, r"Memory 1 is not an object"),
    ("memory-mcp", ["just text"], r"Memory 1 is not an object"),
    ("memory-mcp", [{"hash": 12, "content": "x"}], r"Memory 1: hash must be text"),
    ("memory-mcp", "a bare string", r"A memory-mcp import is a list of its memories and relationships"),
    ("memory-mcp", lambda t: _write(t, "memory.db", b"SQLite format 3\x00" + b"\x00" * 200),
     r"Cannot read .*memory\.db as a memory-mcp database: file is not a database"),
    ("agentmemory", [{"content": "parsed data"}], r"An agentmemory import is a folder .* given as a path"),
    ("agentmemory", lambda t: (t / "empty").mkdir() or t / "empty", r"No memories\.db in .*empty or beside it"),
    ("agentmemory", lambda t: (t / "lone").mkdir() or _write(t / "lone", "memories.db", b""),
     r"No \.memory/ folder beside .*memories\.db"),
    ("agentmemory", lambda t: (t / "src").mkdir() or _agentmemory_db(t / "src" / "memories.db", "CREATE TABLE other (x);"),
     r"memories\.db is not AgentMemory's database \(memories and keywords tables\)"),
]


@pytest.mark.parametrize("format, source, message", REFUSED, ids=[f"{f}-{n}" for n, (f, _s, _m) in enumerate(REFUSED)])
def test_a_source_an_importer_cannot_use_is_refused_in_one_line_and_writes_nothing(
    vault: Vault, tmp_path: Path, format: str, source: Any, message: str
) -> None:
    vault.remember("Here before the import.")
    if callable(source):
        source = source(tmp_path)
    with pytest.raises(InvalidInput, match=message) as caught:
        vault.import_memories(source, format=format)
    assert "\n" not in str(caught.value)
    assert len(list(vault.store.walk())) == 1


def test_memory_mcp_tags_stored_as_text_and_items_without_a_hash(vault: Vault) -> None:
    """Its SQLite column holds tags as a JSON array in text; a hand-made item may give
    them comma-separated, and no hash: it is keyed as memory-mcp keys it (content and
    tags), so the same item imported twice is one memory."""
    items = [{"content": "pnpm is the package manager", "tags": '["tooling", "js"]'},
             {"content": "The cache lives in ~/.cache", "tags": "ops, disk"}]
    first = vault.import_memories(items, format="memory-mcp")
    again = vault.import_memories(items, format="memory-mcp")
    assert first["imported"] == 2 and again["imported"] == 0 and again["unchanged"] == 2
    tags = sorted(sorted(vault.get(m["id"])["tags"]) for m in vault.list()["memories"])
    assert tags == [["disk", "ops"], ["js", "tooling"]]
    single = vault.import_memories({"content": "One memory as get_memory returns it"}, format="memory-mcp")
    assert single["imported"] == 1
    assert_index_matches_files(vault)


# ---------------------------------------------------------------- importing again, when the vault changed


def test_a_memory_twice_in_one_export_is_imported_once(vault: Vault) -> None:
    acme = MEMORY_VAULT_EXPORT["memories"][0]
    result = vault.import_memories({"memories": [acme, dict(acme)]}, format="mcp-memory-vault")
    assert (result["imported"], result["duplicates"]) == (1, 1)
    assert len(list(vault.store.walk())) == 1


def test_an_exported_memory_the_vault_already_holds_is_not_copied(vault: Vault) -> None:
    mine = vault.remember("Customer ACME prefers deploys on Fridays", namespace="support")["memory"]
    result = vault.import_memories({"memories": [MEMORY_VAULT_EXPORT["memories"][0]]}, format="mcp-memory-vault")
    assert (result["imported"], result["duplicates"]) == (0, 1)
    assert [m["id"] for m in vault.list()["memories"]] == [mine["id"]]


def test_a_relationship_for_a_memory_that_is_not_here_writes_nothing(vault: Vault) -> None:
    edge = {"from_hash": "a" * 64, "to_hash": "b" * 64, "relation_type": "depends_on"}
    result = vault.import_memories({"memories": [], "relationships": [edge]}, format="memory-mcp")
    assert result["imported"] == 0
    assert list(vault.store.walk()) == []


def test_a_relationship_to_a_memory_the_vault_holds_under_another_id_links_to_it(vault: Vault) -> None:
    """memory-mcp's item matches one of ours by content: it is skipped as a duplicate,
    and a link to it leads to ours instead of nowhere."""
    ours = vault.remember("pnpm is the package manager", title="Package manager")["memory"]
    theirs = {"hash": "c" * 64, "content": "pnpm is the package manager"}
    lock = {"hash": "d" * 64, "content": "The lockfile is pnpm-lock.yaml"}
    edge = {"from_hash": lock["hash"], "to_hash": theirs["hash"], "relation_type": "depends_on"}
    result = vault.import_memories({"memories": [theirs, lock], "relationships": [edge]}, format="memory-mcp")
    assert (result["imported"], result["duplicates"]) == (1, 1)
    [new_id] = [i for i in result["ids"] if i != ours["id"]]
    assert vault.get(new_id)["relations"] == {"depends_on": [ours["path"].rsplit("/", 1)[-1][:-3]]}


def test_importing_again_refuses_to_update_a_file_with_git_conflict_markers(vault: Vault) -> None:
    first = vault.import_memories(MEMORY_VAULT_EXPORT, format="mcp-memory-vault")
    path = vault.root / vault.get(first["ids"][0])["path"]
    body = "Customer ACME prefers deploys on Fridays\n"
    conflicted = path.read_text().replace(body, f"<<<<<<< HEAD\n{body}=======\nACME deploys on Mondays\n>>>>>>> other\n")
    assert conflicted != path.read_text()
    path.write_text(conflicted)  # a git merge that stopped in the body: the front matter (and id) intact
    changed = json.loads(json.dumps(MEMORY_VAULT_EXPORT))
    changed["memories"][0]["content"] = "Customer ACME prefers deploys on Fridays before noon"
    vault.reconcile()
    before = _files(vault)
    with pytest.raises(InvalidInput, match="cannot be updated \\(it holds git conflict markers\\); fix the file by hand"):
        vault.import_memories(changed, format="mcp-memory-vault")
    assert _files(vault) == before and path.read_text() == conflicted


def test_a_save_landing_while_an_import_updates_a_file_stands(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_memory.disk import locking

    from conftest import person_saves_before_the_swap

    first = vault.import_memories(MEMORY_VAULT_EXPORT, format="mcp-memory-vault")
    memory = vault.get(first["ids"][0])
    path = vault.root / memory["path"]
    changed = json.loads(json.dumps(MEMORY_VAULT_EXPORT))
    changed["memories"][0].update(content="Customer ACME prefers deploys on Fridays before noon",
                                  updated_at="2026-07-25T12:00:00Z")
    monkeypatch.setattr(locking, "swap", person_saves_before_the_swap("A line a person typed meanwhile.\n", path=path))
    result = vault.import_memories(changed, format="mcp-memory-vault")
    monkeypatch.undo()
    assert result["updated"] == 0  # the person's save stood: nothing of the import replaced it
    assert path.read_text().endswith("A line a person typed meanwhile.\n")
    assert "before noon" not in path.read_text()
    assert [h["id"] for h in vault.search("person typed meanwhile", match="all")["hits"]] == [memory["id"]]
    assert_index_matches_files(vault)


def test_read_graphs_answer_imports_as_its_jsonl_does(vault: Vault, tmp_path: Path) -> None:
    """The reference server's read_graph answer (entities and relations without "type"),
    as data or saved to a file, imports as the same graph's memory.jsonl does."""
    entities = [{k: v for k, v in r.items() if k != "type"} for r in KNOWLEDGE_GRAPH if r["type"] == "entity"]
    relations = [{k: v for k, v in r.items() if k != "type"} for r in KNOWLEDGE_GRAPH if r["type"] == "relation"]
    answer = {"entities": entities, "relations": relations}
    done = vault.import_memories(answer, format="mcp-knowledge-graph")
    from_jsonl = Vault.init(tmp_path / "other")
    try:
        expected = from_jsonl.import_memories(KNOWLEDGE_GRAPH, format="mcp-knowledge-graph")
        assert (done["imported"], done["links"]) == (expected["imported"], expected["links"]) and done["imported"] > 0
        assert vault.export_memories(format="mcp-knowledge-graph") == from_jsonl.export_memories(
            format="mcp-knowledge-graph")
    finally:
        from_jsonl.close()
    saved = tmp_path / "graph.json"
    saved.write_text(json.dumps(answer, indent=2), encoding="utf-8")
    again = vault.import_memories(saved, format="mcp-knowledge-graph")
    assert again["imported"] == 0 and again["unchanged"] == done["imported"]


def test_a_title_over_the_bound_is_cut_on_import_and_the_whole_of_it_kept(vault: Vault, tmp_path: Path) -> None:
    """A peer's entity name of 1,000 characters, or an item's title as long, was written
    whole as the note's title, which remember and update hold to MAX_TITLE. The title is
    cut as a derived one is ("…"); the name stays whole in the entity (export gives back
    the very file), an item's title whole at the top of its body; importing again adds
    nothing, and the tool edits the notes."""
    from agent_memory.limits import MAX_TITLE

    name = "Project " + "Atlas " * 165  # 998 characters
    graph = _jsonl(tmp_path, [{"type": "entity", "name": name, "entityType": "project", "observations": ["Ships in May"]}])
    items = tmp_path / "items.json"
    items.write_text(json.dumps([{"content": "Ships in June.", "title": "Roadmap " + "Borealis " * 110}]))
    for source, how in ((graph, ["--from", "mcp-knowledge-graph"]), (items, [])):
        for _ in range(2):
            done = run_cli("import", *how, str(source), "--json", vault=vault.root)
            assert done.returncode == 0, done.stderr
    [item_id] = [m["id"] for m in vault.list(limit=50)["memories"] if m["id"] != entity_id(name)]
    memories = [vault.get(entity_id(name)), vault.get(item_id)]
    assert len(vault.list(limit=50)["memories"]) == 2
    for memory, whole in zip(memories, (name.strip(), "Roadmap " + "Borealis " * 110)):
        assert len(memory["title"]) <= MAX_TITLE and memory["title"].endswith("…")
        assert whole.strip().startswith(memory["title"][:-1])
        edited = run_cli("edit", memory["id"], "--append", "Confirmed.", vault=vault.root)
        assert edited.returncode == 0, edited.stderr
    assert memories[1]["content"].startswith("Roadmap " + "Borealis " * 109 + "Borealis\n\nShips in June.")
    out = tmp_path / "out.jsonl"
    assert run_cli("export", "--format", "mcp-knowledge-graph", "-o", str(out), vault=vault.root).returncode == 0
    assert json.loads(out.read_text().splitlines()[0])["name"] == name
