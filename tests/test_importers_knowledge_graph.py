"""``import --from mcp-knowledge-graph`` and ``export --format mcp-knowledge-graph``: the
reference server's graph in and out exactly, through the notes ``serve --compat
knowledge-graph`` keeps, and proven against the real reference server (which, as in
tests/test_compat_knowledge_graph.py, fails in CI when missing and skips elsewhere)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from agent_memory.errors import InvalidInput
from agent_memory.note.parse import parse
from agent_memory.server.app import build_server
from agent_memory.transfer.importers.knowledge_graph import entity_id
from agent_memory.transfer.items import import_digest
from agent_memory.vault import doctor
from agent_memory.vault.graph import NAMESPACE, KnowledgeGraph, to_jsonl
from agent_memory.vault.vault import Vault

from conftest import assert_index_matches_files, run_cli
from test_compat_knowledge_graph import AWKWARD, QUERIES, SCRIPT, answers, peer_or_skip

# A memory.jsonl as the reference server writes one (compact, no newline at the end),
# with what the old mapping lost: spaces at either end, [[...]] in observations, a name
# like a wikilink, an entity and a relation twice (the reference keeps what its file holds).
RECORDS: list[dict[str, Any]] = [
    {"type": "entity", "name": "  padded  ", "entityType": " Thing ", "observations": AWKWARD},
    {"type": "entity", "name": "[[Acme|Corp]]", "entityType": "organization", "observations": ["[[Acme Corp]] itself"]},
    {"type": "entity", "name": "Twice", "entityType": "a", "observations": ["first"]},
    {"type": "entity", "name": "Twice", "entityType": "b", "observations": []},
    {"type": "relation", "from": "  padded  ", "to": "[[Acme|Corp]]", "relationType": "works at"},
    {"type": "relation", "from": "Ghost", "to": "Nobody", "relationType": "tags"},
    {"type": "relation", "from": "Ghost", "to": "Nobody", "relationType": "tags"},
    {"type": "relation", "from": "Twice", "to": "  padded  ", "relationType": "id"},
]


def _reference_jsonl(records: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in records)


def _files(vault: Vault) -> dict[str, bytes]:
    return {rel: (vault.root / rel).read_bytes() for rel, _ in vault.store.walk()}


def test_a_memory_jsonl_comes_back_byte_for_byte_and_importing_it_again_changes_nothing(
        vault: Vault, tmp_path: Path) -> None:
    source = tmp_path / "memory.jsonl"
    source.write_text(_reference_jsonl(RECORDS), encoding="utf-8")
    done = run_cli("import", "--from", "mcp-knowledge-graph", str(source), "--json", vault=vault.root)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["imported"] == 5  # four entities and the note of loose relations
    out = tmp_path / "out.jsonl"
    exported = run_cli("export", "--format", "mcp-knowledge-graph", "-o", str(out), vault=vault.root)
    assert exported.returncode == 0, exported.stderr
    assert out.read_bytes() == source.read_bytes()
    vault.reconcile()
    before = _files(vault)
    again = vault.import_memories(source, format="mcp-knowledge-graph")
    assert (again["imported"], again["updated"], again["links"]) == (0, 0, 0)
    assert _files(vault) == before
    # no observation became a link: doctor finds nothing broken after a clean import
    assert {c.name: c for c in doctor.check_vault(vault.root)}["broken links"].ok
    assert_index_matches_files(vault)


@pytest.mark.anyio
async def test_serve_compat_sees_the_imported_graph(vault: Vault) -> None:
    vault.import_memories(RECORDS, format="mcp-knowledge-graph")
    async with Client(build_server(vault, compat="knowledge-graph")) as ours:
        graph = (await answers(ours, "read_graph", {}))[1]
        await ours.call_tool("add_observations", {"observations": [{"entityName": "Twice", "contents": ["later"]}]})
    assert to_jsonl(graph) == _reference_jsonl(RECORDS)
    # what the compat server wrote since is the vault's: the same source again does not undo it
    vault.import_memories(RECORDS, format="mcp-knowledge-graph")
    assert KnowledgeGraph(vault.core, vault.writes).open_nodes(["Twice"])["entities"][0]["observations"] == [
        "first", "later"]


@pytest.mark.anyio
async def test_the_general_importer_round_trips_through_the_real_reference_server(vault: Vault, tmp_path: Path) -> None:
    """The real server's file imported with import --from, exported with export --format,
    loaded by the real server again: its read_graph is the original's, and it answers
    every query as serve --compat knowledge-graph does over the imported vault."""
    command = peer_or_skip()
    memory_file = tmp_path / "memory.jsonl"
    params = StdioServerParameters(command=command[0], args=command[1:], env={"MEMORY_FILE_PATH": str(memory_file)})
    async with Client(params) as peer:
        for tool, arguments in SCRIPT:
            await peer.call_tool(tool, arguments)
        original = (await answers(peer, "read_graph", {}))[1]
    done = run_cli("import", "--from", "mcp-knowledge-graph", str(memory_file), "--json", vault=vault.root)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "exported" / "memory.jsonl"
    out.parent.mkdir()
    assert run_cli("export", "--format", "mcp-knowledge-graph", "-o", str(out), vault=vault.root).returncode == 0
    assert out.read_bytes() == memory_file.read_bytes()
    reloaded = StdioServerParameters(command=command[0], args=command[1:], env={"MEMORY_FILE_PATH": str(out)})
    vault.reconcile()
    async with Client(reloaded) as peer, Client(build_server(vault, compat="knowledge-graph")) as ours:
        assert (await answers(peer, "read_graph", {}))[1] == original
        for query, arguments in QUERIES:
            assert await answers(ours, query, arguments) == await answers(peer, query, arguments), (query, arguments)
    # read_graph's answer, saved as a file, imports as the same graph
    saved = tmp_path / "graph.json"
    saved.write_text(json.dumps(original, indent=2, ensure_ascii=False), encoding="utf-8")
    other = Vault.init(tmp_path / "other")
    try:
        other.import_memories(saved, format="mcp-knowledge-graph")
        assert other.export_memories(format="mcp-knowledge-graph") == vault.export_memories(format="mcp-knowledge-graph")
    finally:
        other.close()


def _old_mapping_note(vault: Vault, name: str, kind: str, body: str) -> Path:
    """A note as the earlier, lossy mapping of this importer wrote one (its import base
    computed as that import computed it)."""
    digest = import_digest(body, {"type": kind}, [], [name])
    path = vault.root / f"{name}.md"
    path.write_text(f"---\nid: {entity_id(name)}\nnamespace: default\ntags: []\ncreated: 2026-07-01T09:00:00Z\n"
                    f"updated: 2026-07-01T09:00:00Z\naliases:\n- {name}\ntype: {kind}\nworks_at:\n- '[[Acme]]'\n"
                    f"relation_types:\n  works_at: works at\nimported_hash: {digest}\n---\n{body}", encoding="utf-8")
    return path


def test_a_note_of_the_old_mapping_is_upgraded_in_place_when_nobody_touched_it(vault: Vault) -> None:
    path = _old_mapping_note(vault, "Priya", "person", "# Priya\n\n- Leads billing\n")
    vault.reconcile()
    records = [{"type": "entity", "name": "Priya", "entityType": "person", "observations": [" Leads billing "]},
               {"type": "relation", "from": "Priya", "to": "Acme", "relationType": "works at"}]
    result = vault.import_memories(records, format="mcp-knowledge-graph")
    assert (result["imported"], result["updated"]) == (0, 1)
    note = parse(path.read_bytes(), "Priya.md")
    assert note.id == entity_id("Priya") and note.namespace == NAMESPACE
    assert "works_at" not in note.meta and "relation_types" not in note.meta and note.links == []
    assert vault.export_memories(format="mcp-knowledge-graph") == records  # once, exactly
    assert any(e["reason"] == "replaced" for e in vault.trash_list())  # the old body stays restorable
    assert vault.import_memories(records, format="mcp-knowledge-graph")["updated"] == 0
    assert_index_matches_files(vault)


def test_a_note_of_the_old_mapping_a_person_edited_is_left_as_it_is(vault: Vault) -> None:
    path = _old_mapping_note(vault, "Priya", "person", "# Priya\n\n- Leads billing\n")
    path.write_text(path.read_text(encoding="utf-8") + "- My own line\n", encoding="utf-8")
    edited = path.read_bytes()
    vault.reconcile()
    records = [{"type": "entity", "name": "Priya", "entityType": "person", "observations": ["Leads billing"]}]
    result = vault.import_memories(records, format="mcp-knowledge-graph")
    assert (result["imported"], result["updated"], result["kept"]) == (0, 0, 1)
    assert path.read_bytes() == edited and len(_files(vault)) == 1  # and no second Priya
    # it still exports as the old mapping exported it
    assert [r["name"] for r in vault.export_memories(format="mcp-knowledge-graph") if r["type"] == "entity"] == ["Priya"]


@pytest.mark.anyio
async def test_an_entity_the_compat_server_made_only_gains_what_it_lacks(vault: Vault) -> None:
    async with Client(build_server(vault, compat="knowledge-graph")) as ours:
        await ours.call_tool("create_entities", {"entities": [
            {"name": "Alice", "entityType": "person", "observations": ["likes tea"]}]})
    path = vault.root / vault.list()["memories"][0]["path"]
    records = [{"type": "entity", "name": "Alice", "entityType": "robot", "observations": ["likes tea", "new"]}]
    assert vault.import_memories(records, format="mcp-knowledge-graph")["updated"] == 1
    graph = KnowledgeGraph(vault.core, vault.writes).read_graph()
    assert graph["entities"] == [{"name": "Alice", "entityType": "person", "observations": ["likes tea", "new"]}]
    after = path.read_bytes()
    assert vault.import_memories(records, format="mcp-knowledge-graph")["updated"] == 0
    assert path.read_bytes() == after


def test_a_symlinked_folder_or_a_credential_writes_nothing(vault: Vault, tmp_path: Path) -> None:
    secret = [{"type": "relation", "from": "CI", "to": "GitHub",
               "relationType": "token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"}]
    with pytest.raises(InvalidInput, match="Relation 1: .*(?i:token)"):
        vault.import_memories(secret, format="mcp-knowledge-graph")
    assert _files(vault) == {}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder = vault.root / "2026" / "07" / "20"  # where today's new notes go
    folder.parent.mkdir(parents=True)
    folder.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(InvalidInput, match="symlink"):
        vault.import_memories(RECORDS, format="mcp-knowledge-graph")
    assert list(elsewhere.iterdir()) == []
    folder.unlink()
    assert _files(vault) == {}


def test_an_entity_a_person_renamed_in_its_note_is_not_made_again(vault: Vault) -> None:
    vault.import_memories(RECORDS, format="mcp-knowledge-graph")
    path = vault.root / vault.get(entity_id("[[Acme|Corp]]"))["path"]
    path.write_text(path.read_text(encoding="utf-8").replace('"name": "[[Acme|Corp]]"', '"name": "Acme Corp"'),
                    encoding="utf-8")
    vault.reconcile()
    before = _files(vault)
    again = vault.import_memories(RECORDS, format="mcp-knowledge-graph")
    assert (again["imported"], again["updated"], again["kept"]) == (0, 0, 1)
    assert _files(vault) == before and not vault.stats()["duplicate_ids"]
    # one the person broke is refused, saying which file and why, and nothing is written
    path.write_text(path.read_text(encoding="utf-8") + "<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> other\n",
                    encoding="utf-8")
    vault.reconcile()
    before = _files(vault)
    with pytest.raises(InvalidInput, match="git conflict markers"):
        vault.import_memories(RECORDS, format="mcp-knowledge-graph")
    assert _files(vault) == before
