"""``serve --compat knowledge-graph`` against the real MCP reference memory server.

The same script of calls goes to ``@modelcontextprotocol/server-memory`` (node, over
stdio, through the SDK client) and to this server in memory; every answer and, after
every step, read_graph, open_nodes and search_nodes must be identical. CI installs the
peer (.ci/run); where it is missing the differential tests fail when ``CI`` is set and
skip (saying why) otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from agent_memory.note import observations as obs
from agent_memory.note.parse import parse
from agent_memory.server.app import build_server
from agent_memory.server.compat.knowledge_graph import import_on_start
from agent_memory.vault.graph import NAMESPACE, read_jsonl, to_jsonl
from agent_memory.vault.vault import Vault

pytestmark = pytest.mark.anyio

PEER_VERSION = "2026.8.31"
PEER = (Path(__file__).resolve().parent.parent / ".ci" / "node" / "node_modules" / "@modelcontextprotocol"
        / "server-memory" / "dist" / "index.js")
NODE = shutil.which("node")


def peer_or_skip() -> list[str]:
    """The command that runs the reference server; a missing peer fails in CI, else skips."""
    missing = ("node is not installed" if NODE is None else
               f"the reference server is not installed at {PEER} (npm install --prefix .ci/node "
               f"@modelcontextprotocol/server-memory@{PEER_VERSION})" if not PEER.exists() else "")
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the differential test, but {missing}")
        pytest.skip(missing)
    version = json.loads((PEER.parent.parent / "package.json").read_text())["version"]
    assert version == PEER_VERSION, f"the differential test is pinned to {PEER_VERSION}; found {version}"
    return [str(NODE), str(PEER)]


AWKWARD = ["  padded  ", "line one\nline two", "---", "# not a title", "    four spaces", "", "dup", "dup",
           "[[Acme Corp]] is a link elsewhere", "[text](http://example.com)", "#tag here", "back\\slash \\n",
           "\ttab\t", "trailing  ", "sep\u2028arator", "C:\\path\\x", "\\", "ünïcode 🎉 日本", "a ] ( b", "x](y)"]

SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("create_entities", {"entities": [
        {"name": "Alice", "entityType": "person", "observations": ["Works at Acme", "likes tea"]},
        {"name": "  padded  ", "entityType": "Thing", "observations": AWKWARD},
        {"name": "a/b:c|d]]", "entityType": " odd type ", "observations": []},
        {"name": "Acme Corp", "entityType": "organization", "observations": ["Makes anvils"]},
    ]}),
    ("create_entities", {"entities": [{"name": "Alice", "entityType": "robot", "observations": ["ignored"]},
                                      {"name": "Bob", "entityType": "person", "observations": ["dup", "dup"]}]}),
    ("create_relations", {"relations": [
        {"from": "Alice", "to": "Acme Corp", "relationType": "works at"},
        {"from": "  padded  ", "to": "Alice", "relationType": "id"},
        {"from": "Ghost", "to": "Nobody", "relationType": "haunts"},
        {"from": "Bob", "to": "Alice", "relationType": "tags"},
        {"from": "Alice", "to": "Bob", "relationType": "knows"},
        {"from": "Alice", "to": "Acme Corp", "relationType": "works at"},
    ]}),
    ("create_relations", {"relations": [{"from": "Alice", "to": "Acme Corp", "relationType": "works at"},
                                        {"from": "Carol", "to": "Alice", "relationType": "manages"}]}),
    ("add_observations", {"observations": [
        {"entityName": "Alice", "contents": ["likes tea", "new one", "new one", "[[x]]"]},
        {"entityName": "Alice", "contents": ["new one", "third"]},
        {"entityName": "a/b:c|d]]", "contents": ["", "---"]},
    ]}),
    ("add_observations", {"observations": [{"entityName": "Bob", "contents": ["should not land"]},
                                           {"entityName": "Nobody", "contents": ["x"]}]}),
    ("delete_observations", {"deletions": [{"entityName": "Bob", "observations": ["dup"]},
                                           {"entityName": "Nobody", "observations": ["x"]},
                                           {"entityName": "  padded  ", "observations": ["---", "missing"]}]}),
    ("delete_relations", {"relations": [{"from": "Bob", "to": "Alice", "relationType": "tags"},
                                        {"from": "no", "to": "such", "relationType": "relation"}]}),
    ("create_entities", {"entities": [{"name": "Carol", "entityType": "person", "observations": ["Manager"]}]}),
    ("delete_entities", {"entityNames": ["Bob", "Ghost", "not there"]}),
    ("create_entities", {"entities": [{"name": "Bob", "entityType": "person", "observations": ["back again"]}]}),
    ("create_relations", {"relations": [{"from": "Bob", "to": "Carol", "relationType": "reports to"}]}),
]

QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("read_graph", {}),
    ("open_nodes", {"names": ["Alice", "  padded  ", "Nobody", "Carol"]}),
    ("open_nodes", {"names": []}),
    ("open_nodes", {"names": ["padded"]}),
    *[("search_nodes", {"query": q}) for q in ("alice", "PERSON", "new one", "", " ", "[[", "line one\nline",
                                                "ODD TYPE ", "日本", "acme", "zzz", "dup")],
]


async def answers(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[bool, Any, list[str]]:
    result = await client.call_tool(tool, arguments)
    texts = [block.text for block in result.content]  # type: ignore[union-attr]
    return bool(result.is_error), result.structured_content, texts


async def test_every_answer_equals_the_reference_servers(vault: Vault, tmp_path: Path) -> None:
    command = peer_or_skip()
    memory_file = tmp_path / "peer" / "memory.jsonl"
    memory_file.parent.mkdir()
    params = StdioServerParameters(command=command[0], args=command[1:], env={"MEMORY_FILE_PATH": str(memory_file)})
    compared = 0
    async with Client(params) as peer, Client(build_server(vault, compat="knowledge-graph")) as ours:
        for n, (tool, arguments) in enumerate(SCRIPT):
            theirs, mine = await answers(peer, tool, arguments), await answers(ours, tool, arguments)
            assert mine == theirs, f"step {n} {tool}"
            for query, query_arguments in QUERIES:
                assert await answers(ours, query, query_arguments) == await answers(peer, query, query_arguments), (
                    f"after step {n} ({tool}): {query} {query_arguments}")
                compared += 1
        theirs_resource = await peer.read_resource("memory://knowledge-graph")
        mine_resource = await ours.read_resource("memory://knowledge-graph")
        assert json.loads(mine_resource.contents[0].text) == json.loads(theirs_resource.contents[0].text)  # type: ignore[union-attr]
        graph = (await answers(peer, "read_graph", {}))[1]
    assert compared == len(SCRIPT) * len(QUERIES)
    assert any(e["name"] == "  padded  " and e["observations"] == [o for o in AWKWARD if o != "---"]
               for e in graph["entities"])
    # the peer's own file is this graph's jsonl, byte for byte
    assert to_jsonl(graph) == memory_file.read_text(encoding="utf-8")


async def test_the_peers_file_imports_exactly_and_once(vault: Vault, tmp_path: Path) -> None:
    """jsonl made by the real server in; read_graph equals its; jsonl out equals its file;
    a second start imports nothing; the reloaded peer answers as this server does."""
    command = peer_or_skip()
    memory_file = tmp_path / "memory.jsonl"
    params = StdioServerParameters(command=command[0], args=command[1:], env={"MEMORY_FILE_PATH": str(memory_file)})
    async with Client(params) as peer:
        for tool, arguments in SCRIPT:
            await peer.call_tool(tool, arguments)
        theirs = (await answers(peer, "read_graph", {}))[1]
    said = import_on_start(vault, str(memory_file))
    assert said is not None and "imported" in said and "6 new entities" in said
    async with Client(build_server(vault, compat="knowledge-graph")) as ours:
        mine = (await answers(ours, "read_graph", {}))[1]
    assert mine == theirs
    assert to_jsonl(mine) == memory_file.read_text(encoding="utf-8")
    # export's reference format gives the same records (CLI: export --format mcp-knowledge-graph)
    assert vault.export_memories(format="mcp-knowledge-graph") == [
        json.loads(line) for line in memory_file.read_text(encoding="utf-8").split("\n")]
    files_before = sorted(p.read_bytes() for p in vault.root.rglob("*.md"))
    again = import_on_start(vault, str(memory_file))
    assert again is not None and "has not changed" in again
    memory_file.write_text(memory_file.read_text(encoding="utf-8") + "\n", encoding="utf-8")  # changed bytes, same graph
    assert "0 new entities, 0 updated, 6 unchanged" in (import_on_start(vault, str(memory_file)) or "")
    assert sorted(p.read_bytes() for p in vault.root.rglob("*.md")) == files_before
    # and back: the vault's jsonl loaded by the real server answers every query as this server does
    exported = tmp_path / "exported.jsonl"
    exported.write_text(to_jsonl(mine), encoding="utf-8")
    params = StdioServerParameters(command=command[0], args=command[1:], env={"MEMORY_FILE_PATH": str(exported)})
    async with Client(params) as peer, Client(build_server(vault, compat="knowledge-graph")) as ours:
        for query, query_arguments in QUERIES:
            assert await answers(ours, query, query_arguments) == await answers(peer, query, query_arguments)


# ----------------------------------------------------------------------------- without the peer

def test_any_observation_round_trips_and_none_is_markdown_the_vault_acts_on() -> None:
    strings = [*AWKWARD, "\x01\x0b\x0c\x1c\x85", "\\s\\u0041\\[", " ", "  ", "\u3000wide\u3000", "\r\n", "a\rb",
               "<<<<<<< HEAD", "- nested", "1. numbered", "> quote", "![[embed]]", "tag#inside", "\ufeffbom"]
    body = obs.write(strings)
    assert obs.read(body) == strings
    note = parse(("---\ntitle: T\n---\n" + body).encode(), "n.md")
    assert note.links == [] and note.tags == [] and note.title == "T" and not note.conflict
    assert all(not line.endswith((" ", "\t")) for line in body.split("\n")), "an editor would trim these"
    assert len(body.split("\n")) == len(strings) + 1


def test_a_persons_lines_stay_when_observations_change() -> None:
    body = "My own paragraph.\n\n- one\n- two\n\n## Later\ntext\n"
    added = obs.added(body, ["three"])
    assert added == "My own paragraph.\n\n- one\n- two\n- three\n\n## Later\ntext\n"
    assert obs.removed(added, {"one", "three"}) == "My own paragraph.\n\n- two\n\n## Later\ntext\n"


@pytest.mark.parametrize("bad", ["nul\x00here", "half \ud800 pair"])
async def test_nul_and_lone_surrogates_are_refused_in_one_line(vault: Vault, bad: str) -> None:
    async with Client(build_server(vault, compat="knowledge-graph")) as ours:
        for tool, arguments in [
            ("create_entities", {"entities": [{"name": bad, "entityType": "t", "observations": []}]}),
            ("create_entities", {"entities": [{"name": "ok", "entityType": "t", "observations": [bad]}]}),
            ("create_relations", {"relations": [{"from": "ok", "to": "x", "relationType": bad}]}),
        ]:
            is_error, _, texts = await answers(ours, tool, arguments)
            assert is_error and "\n" not in texts[0] and "cannot keep" in texts[0], texts
        assert (await answers(ours, "read_graph", {}))[1] == {"entities": [], "relations": []}


async def test_entities_are_notes_a_person_can_read_and_edit(vault: Vault) -> None:
    async with Client(build_server(vault, compat="knowledge-graph")) as ours:
        await ours.call_tool("create_entities", {"entities": [
            {"name": "  Ada: the [[first]] | programmer  ", "entityType": "person", "observations": ["# x", "[[y]]"]}]})
        await ours.call_tool("create_relations", {"relations": [
            {"from": "  Ada: the [[first]] | programmer  ", "to": "Engine", "relationType": "id"}]})
        files = [p for p in vault.root.rglob("*.md") if not any(part.startswith(".") for part in p.relative_to(vault.root).parts)]
        assert len(files) == 1, files
        text = files[0].read_text(encoding="utf-8")
        assert "- \\# x\n- \\[\\[y\\]\\]\n" in text
        note = parse(files[0].read_bytes(), "x.md")
        assert note.links == [] and note.namespace == NAMESPACE and note.tags == []
        assert note.meta["entity"]["name"] == "  Ada: the [[first]] | programmer  "
        assert vault.get(note.id)["id"] == note.id  # an ordinary memory of the vault too
        # a person adds a line of their own and an observation by hand
        files[0].write_text(text + "\nWritten by hand.\n- added by hand\n", encoding="utf-8")
        vault.reconcile()
        await ours.call_tool("add_observations", {"observations": [
            {"entityName": "  Ada: the [[first]] | programmer  ", "contents": ["from the tool"]}]})
        graph = (await answers(ours, "read_graph", {}))[1]
        assert graph["entities"][0]["observations"] == ["# x", "[[y]]", "added by hand", "from the tool"]
        assert graph["relations"] == [{"from": "  Ada: the [[first]] | programmer  ", "to": "Engine",
                                       "relationType": "id"}]
        assert "Written by hand." in files[0].read_text(encoding="utf-8")
        await ours.call_tool("delete_entities", {"entityNames": ["  Ada: the [[first]] | programmer  "]})
        assert not files[0].exists() and list((vault.root / ".trash").rglob("*.md")), "kept in the trash"


async def test_tools_match_the_reference_servers_names_and_arguments(vault: Vault) -> None:
    async with Client(build_server(vault, compat="knowledge-graph")) as ours:
        tools = {t.name: t for t in (await ours.list_tools()).tools}
        resources = [str(r.uri) for r in (await ours.list_resources()).resources]
    assert sorted(tools) == sorted(["create_entities", "create_relations", "add_observations", "delete_entities",
                                    "delete_observations", "delete_relations", "read_graph", "search_nodes",
                                    "open_nodes"])
    assert resources == ["memory://knowledge-graph"]
    args = {name: sorted(t.input_schema.get("properties", {})) for name, t in tools.items()}
    assert args == {"create_entities": ["entities"], "create_relations": ["relations"],
                    "add_observations": ["observations"], "delete_entities": ["entityNames"],
                    "delete_observations": ["deletions"], "delete_relations": ["relations"], "read_graph": [],
                    "search_nodes": ["query"], "open_nodes": ["names"]}


def test_jsonl_reads_as_the_reference_reads_it() -> None:
    text = ('{"type":"entity","name":" a ","entityType":"t","observations":["x","x"]}\n\n'
            '{"type":"other"}\n{"type":"relation","from":" a ","to":"b","relationType":"r"}')
    graph = read_jsonl(text, "memory.jsonl")
    assert graph == {"entities": [{"name": " a ", "entityType": "t", "observations": ["x", "x"]}],
                     "relations": [{"from": " a ", "to": "b", "relationType": "r"}]}
    assert to_jsonl(graph) == text.replace('\n\n{"type":"other"}', "")


def test_serve_compat_imports_memory_file_path_once_and_says_so_on_stderr(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_server_stdio import HANDSHAKE, serve_raw

    memory_file = tmp_path / "memory.jsonl"
    memory_file.write_text('{"type":"entity","name":" Ann ","entityType":"person","observations":["[[x]]",""]}\n'
                           '{"type":"relation","from":" Ann ","to":"Bo","relationType":"knows"}', encoding="utf-8")
    monkeypatch.setenv("MEMORY_FILE_PATH", str(memory_file))
    read = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_graph", "arguments": {}}}
    replies, stderr = serve_raw(tmp_path / "vault", [*HANDSHAKE, read], "serve", "--compat", "knowledge-graph")
    graph = next(r for r in replies if r.get("id") == 2)["result"]["structuredContent"]
    assert graph == {"entities": [{"name": " Ann ", "entityType": "person", "observations": ["[[x]]", ""]}],
                     "relations": [{"from": " Ann ", "to": "Bo", "relationType": "knows"}]}
    assert "1 new entities, 0 updated, 0 unchanged, 0 kept as edited here, 1 relations written" in stderr
    replies, stderr = serve_raw(tmp_path / "vault", [*HANDSHAKE, read], "serve", "--compat", "knowledge-graph")
    assert "has not changed: nothing to import" in stderr
    assert next(r for r in replies if r.get("id") == 2)["result"]["structuredContent"] == graph


def test_a_changed_memory_file_updates_what_nobody_edited_and_keeps_what_a_person_did(
        vault: Vault, tmp_path: Path) -> None:
    """$MEMORY_FILE_PATH goes in as `import --from mcp-knowledge-graph` does: a later
    version of the file updates the entities nobody touched here, and a person's edit of
    an entity's note stands (counted as kept), byte for byte."""
    memory_file = tmp_path / "memory.jsonl"
    memory_file.write_text('{"type":"entity","name":"Ann","entityType":"person","observations":["likes tea"]}\n'
                           '{"type":"entity","name":"Bo","entityType":"person","observations":["owns a boat"]}',
                           encoding="utf-8")
    assert "2 new entities" in (import_on_start(vault, str(memory_file)) or "")
    ann = next(p for p in vault.root.rglob("*.md") if "likes tea" in p.read_text(encoding="utf-8"))
    ann.write_text(ann.read_text(encoding="utf-8").replace("likes tea", "likes strong tea"), encoding="utf-8")
    edited = ann.read_bytes()
    memory_file.write_text('{"type":"entity","name":"Ann","entityType":"person","observations":["likes green tea"]}\n'
                           '{"type":"entity","name":"Bo","entityType":"person","observations":["owns two boats"]}',
                           encoding="utf-8")
    said = import_on_start(vault, str(memory_file)) or ""
    assert "0 new entities, 1 updated" in said and "1 kept as edited here" in said
    assert ann.read_bytes() == edited
    notes = [p.read_text(encoding="utf-8") for p in vault.root.rglob("*.md")
             if not any(part.startswith(".") for part in p.relative_to(vault.root).parts)]
    assert any("owns two boats" in text for text in notes) and not any("owns a boat" in text for text in notes)


def test_the_import_record_planted_as_a_link_is_neither_read_nor_written_through(
        vault: Vault, tmp_path: Path) -> None:
    """The record of which $MEMORY_FILE_PATH version went in lives in the vault's index
    folder, which a clone can bring a link into: the import neither takes it for its own
    record nor writes through it; the link is replaced by the record."""
    private = tmp_path / "private.json"
    private.write_text(json.dumps({"keep": "someone's own file"}), encoding="utf-8")
    record = vault.core.index_dir / "knowledge-graph-import.json"
    record.symlink_to(private)
    memory_file = tmp_path / "memory.jsonl"
    memory_file.write_text('{"type":"entity","name":"Ann","entityType":"person","observations":["likes tea"]}',
                           encoding="utf-8")
    assert "1 new entities" in (import_on_start(vault, str(memory_file)) or "")
    assert json.loads(private.read_text(encoding="utf-8")) == {"keep": "someone's own file"}
    assert not record.is_symlink() and str(memory_file) in json.loads(record.read_text(encoding="utf-8"))
    assert "has not changed" in (import_on_start(vault, str(memory_file)) or "")


async def test_without_compat_the_tools_are_this_servers_own(vault: Vault) -> None:
    async with Client(build_server(vault)) as ours:
        names = {t.name for t in (await ours.list_tools()).tools}
    assert "remember" in names and "read_graph" not in names


async def test_the_credential_guard_runs_on_every_write(vault: Vault) -> None:
    token = "token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    async with Client(build_server(vault, compat="knowledge-graph")) as ours:
        await ours.call_tool("create_entities", {"entities": [{"name": "CI", "entityType": "t", "observations": []}]})
        for tool, arguments in [
            ("create_entities", {"entities": [{"name": "X", "entityType": "t", "observations": [token]}]}),
            ("add_observations", {"observations": [{"entityName": "CI", "contents": [token]}]}),
            ("create_relations", {"relations": [{"from": "CI", "to": token, "relationType": "uses"}]}),
        ]:
            is_error, _, texts = await answers(ours, tool, arguments)
            assert is_error and "token" in texts[0].lower(), texts
        assert (await answers(ours, "read_graph", {}))[1] == {
            "entities": [{"name": "CI", "entityType": "t", "observations": []}], "relations": []}


async def test_a_persons_save_during_a_graph_write_stands(vault: Vault, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_memory.disk import locking
    from conftest import person_saves_before_the_swap

    async with Client(build_server(vault, compat="knowledge-graph")) as ours:
        await ours.call_tool("create_entities", {"entities": [{"name": "Ann", "entityType": "p", "observations": ["a"]}]})
        note = next(p for p in vault.root.rglob("*.md") if ".index" not in p.parts)
        monkeypatch.setattr(locking, "swap", person_saves_before_the_swap("- typed by a person\n", path=note))
        is_error, _, texts = await answers(ours, "add_observations",
                                           {"observations": [{"entityName": "Ann", "contents": ["from the tool"]}]})
        monkeypatch.undo()
        assert is_error and "\n" not in texts[0]
        assert note.read_text(encoding="utf-8").endswith("- a\n- typed by a person\n")
        graph = (await answers(ours, "read_graph", {}))[1]
        assert graph["entities"][0]["observations"] == ["a", "typed by a person"]
        again = await answers(ours, "add_observations",
                              {"observations": [{"entityName": "Ann", "contents": ["from the tool"]}]})
        assert again[1] == {"results": [{"entityName": "Ann", "addedObservations": ["from the tool"]}]}
