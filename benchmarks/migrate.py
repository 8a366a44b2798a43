"""Moving in from another memory server, measured: per source, items in, items out, strings
changed on the way (want 0) and answers that differ from the real peer's (want 0).

- knowledge-graph: a graph of 200 entities, 485 observations and 302 relations (names and
  observations with spaces at the ends, newlines, ``---``, ``# ``, ``[[links]]``,
  duplicates...) made by the real reference server (``@modelcontextprotocol/server-memory``
  from .ci/node, over stdio); its ``memory.jsonl`` imported by ``serve --compat
  knowledge-graph``'s first start; the vault's jsonl compared with the peer's file; the
  peer reloaded from the vault's jsonl and both asked the same read_graph, open_nodes and
  search_nodes questions. A second row takes the general importer's path into a fresh
  vault: ``import --from mcp-knowledge-graph`` of the peer's file, then what ``export
  --format mcp-knowledge-graph`` writes, compared and reloaded the same way.
- memory-vault: an mcp-memory-vault export of 300 memories imported, then read back
  through ``serve --compat memory-vault``'s export_memories (no peer to ask: the seed is
  known by its tool table only).

    python benchmarks/migrate.py [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from agent_memory.server.app import build_server
from agent_memory.server.compat.knowledge_graph import import_on_start
from agent_memory.vault.graph import records_jsonl, to_jsonl
from agent_memory.vault.vault import Vault

PEER = (Path(__file__).resolve().parent.parent / ".ci" / "node" / "node_modules" / "@modelcontextprotocol"
        / "server-memory" / "dist" / "index.js")
ODD = ["  padded  ", "two\nlines", "---", "# heading", "    four", "", "see [[Other]]", "#tag", "back\\slash",
       "tab\there", "trailing ", "ünï 🎉", "a](b)"]


def graph(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    names = [f"Entity {n}" if n % 7 else f"  Entity {n} / odd: [[x]] | y  " for n in range(200)]
    entities = []
    left = 485
    for n, name in enumerate(names):
        count = min(left, 2 + (n % 3)) if n < 199 else left
        left -= count
        observations = [rng.choice(ODD) + f" fact {n}.{k}" if k % 2 else rng.choice(ODD) for k in range(count)]
        entities.append({"name": name, "entityType": rng.choice(["person", "org", " project ", "Thing"]),
                         "observations": observations})
    relations: list[dict[str, Any]] = []
    while len(relations) < 302:
        relation = {"from": rng.choice(names), "to": rng.choice(names),
                    "relationType": rng.choice(["works at", "id", "knows", "2nd-cousin", "tags"])}
        if relation not in relations:
            relations.append(relation)
    return entities, relations


async def answer(client: Client, tool: str, arguments: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, arguments)
    return bool(result.is_error), result.structured_content, [b.text for b in result.content]  # type: ignore[union-attr]


def questions(entities: list[dict[str, Any]], rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
    names = [e["name"] for e in entities]
    asked: list[tuple[str, dict[str, Any]]] = [("read_graph", {})]
    asked += [("open_nodes", {"names": rng.sample(names, 3)}) for _ in range(6)]
    asked += [("search_nodes", {"query": q}) for q in ("entity 1", "PERSON", "[[", "  ", "fact 3", "odd:", "🎉", "zzz")]
    return asked


async def peer_graph(work: Path, rng: random.Random) -> tuple[Path, list[dict[str, Any]], list[dict[str, Any]]]:
    """The real reference server's memory.jsonl of a generated graph: (file, entities, relations)."""
    entities, relations = graph(rng)
    memory_file = work / "memory.jsonl"
    peer = StdioServerParameters(command="node", args=[str(PEER)], env={"MEMORY_FILE_PATH": str(memory_file)})
    async with Client(peer) as client:
        await client.call_tool("create_entities", {"entities": entities})
        await client.call_tool("create_relations", {"relations": relations})
    return memory_file, entities, relations


async def compared(work: Path, source: str, how: str, original: str, out: str, vault: Vault,
                   entities: list[dict[str, Any]], relations: list[dict[str, Any]], rng: random.Random) -> dict[str, Any]:
    """One row: the vault's jsonl against the peer's file, then the peer reloaded from the
    vault's jsonl and ``serve --compat knowledge-graph`` over the vault asked the same questions."""
    lines_in, lines_out = original.split("\n"), out.split("\n")
    changed = sum(1 for a, b in zip(lines_in, lines_out) if a != b) + abs(len(lines_in) - len(lines_out))
    reloaded = work / f"reloaded-{how}.jsonl"
    reloaded.write_text(out, encoding="utf-8")
    differing = 0
    asked = questions(entities, rng)
    peer = StdioServerParameters(command="node", args=[str(PEER)], env={"MEMORY_FILE_PATH": str(reloaded)})
    async with Client(peer) as theirs, Client(build_server(vault, compat="knowledge-graph")) as ours:
        mine = (await answer(ours, "read_graph", {}))[1]
        for tool, arguments in asked:
            differing += await answer(theirs, tool, arguments) != await answer(ours, tool, arguments)
    observations = sum(len(e["observations"]) for e in entities)
    return {"source": source, "path": how, "items_in": f"{len(entities)} entities, {observations} observations, "
            f"{len(relations)} relations", "items_out": f"{len(mine['entities'])} entities, "
            f"{sum(len(e['observations']) for e in mine['entities'])} observations, {len(mine['relations'])} relations",
            "strings_changed": changed, "answers_asked": len(asked), "answers_differing": differing}


async def knowledge_graph(work: Path, rng: random.Random) -> list[dict[str, Any]]:
    """Two rows, one per way in: serve --compat's first start (MEMORY_FILE_PATH) and the
    general importer (import --from mcp-knowledge-graph, then export --format
    mcp-knowledge-graph), each into a vault of its own."""
    if shutil.which("node") is None or not PEER.exists():
        return [{"source": "knowledge-graph", "skipped": f"the reference server is not installed at {PEER}"}]
    memory_file, entities, relations = await peer_graph(work, rng)
    original = memory_file.read_text(encoding="utf-8")
    rows = []
    vault = Vault.init(work / "vault")
    try:
        import_on_start(vault, str(memory_file))
        async with Client(build_server(vault, compat="knowledge-graph")) as ours:
            out = to_jsonl((await answer(ours, "read_graph", {}))[1])
        rows.append(await compared(work, "knowledge-graph", "serve --compat first start", original, out, vault,
                                   entities, relations, random.Random(rng.random())))
    finally:
        vault.close()
    vault = Vault.init(work / "vault-import")
    try:
        vault.import_memories(memory_file, format="mcp-knowledge-graph")
        out = records_jsonl(vault.export_memories(format="mcp-knowledge-graph"))  # what export -o writes
        rows.append(await compared(work, "knowledge-graph", "import --from, export --format", original, out, vault,
                                   entities, relations, random.Random(rng.random())))
    finally:
        vault.close()
    return rows


async def memory_vault(work: Path, rng: random.Random) -> dict[str, Any]:
    export = [{"id": n + 1, "content": f"Fact {n}: {rng.choice(ODD[1:]).strip() or 'plain'} about customer {n % 17}",
               "namespace": rng.choice(["default", "support", "ops"]), "tags": sorted({rng.choice(["a", "b", "c"])}),
               "source": "bench", "created_at": "2026-07-20T09:00:00Z", "updated_at": "2026-07-21T09:00:00Z",
               "expires_at": None} for n in range(300)]
    vault = Vault.init(work / "vault-mv")
    try:
        async with Client(build_server(vault, compat="memory-vault")) as client:
            counts = (await client.call_tool("import_memories", {"memories": export})).structured_content
            back = (await client.call_tool("export_memories", {})).structured_content
    finally:
        vault.close()
    assert isinstance(back, dict) and isinstance(counts, dict)
    seen = {(m["content"], m["namespace"], tuple(m["tags"]), m["source"]) for m in back["memories"]}
    changed = sum(1 for m in export if (m["content"], m["namespace"], tuple(m["tags"]), m["source"]) not in seen)
    return {"source": "memory-vault", "items_in": len(export), "items_out": back["count"],
            "strings_changed": changed, "answers_differing": "n/a (no peer to run: known by its tool table)"}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="migrate-") as folder:
        work = Path(folder) / "knowledge_graph"
        work.mkdir()
        for row in await knowledge_graph(work, random.Random(args.seed)):
            print(json.dumps(row, ensure_ascii=False), flush=True)
        work = Path(folder) / "memory_vault"
        work.mkdir()
        print(json.dumps(await memory_vault(work, random.Random(args.seed)), ensure_ascii=False), flush=True)


if __name__ == "__main__":
    sys.exit(anyio.run(main))
