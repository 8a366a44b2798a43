"""``serve --compat knowledge-graph``: the MCP reference memory server's nine tools and its
``memory://knowledge-graph`` resource, with its names, arguments and result shapes,
over the vault's notes (``vault.graph.KnowledgeGraph``).

Each tool answers as the reference server does: ``structuredContent`` and, as text,
the same value indented by two spaces (the reference's ``JSON.stringify(x, null, 2)``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Annotated, Any

from typing_extensions import TypedDict

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent
from pydantic import Field

from ...disk.nofollow import load_json, read_record
from ...disk.durable import replace_file
from ...errors import AgentMemoryError
from ...transfer.formats import GRAPH_FORMAT
from ...vault.graph import Entity, Graph, KnowledgeGraph, ObservationsAdded, Relation, read_jsonl
from ...vault.vault import Vault

RESOURCE_URI = "memory://knowledge-graph"


class EntityIn(TypedDict):
    name: Annotated[str, Field(description="The name of the entity")]
    entityType: Annotated[str, Field(description="The type of the entity")]
    observations: Annotated[list[str], Field(description="An array of observation contents associated with the entity")]


RelationIn = TypedDict("RelationIn", {
    "from": Annotated[str, Field(description="The name of the entity where the relation starts")],
    "to": Annotated[str, Field(description="The name of the entity where the relation ends")],
    "relationType": Annotated[str, Field(description="The type of the relation")],
})


class ObservationsIn(TypedDict):
    entityName: Annotated[str, Field(description="The name of the entity to add the observations to")]
    contents: Annotated[list[str], Field(description="An array of observation contents to add")]


class DeletionIn(TypedDict):
    entityName: Annotated[str, Field(description="The name of the entity containing the observations")]
    observations: Annotated[list[str], Field(description="An array of observations to delete")]


class Entities(TypedDict):
    entities: list[Entity]


class Relations(TypedDict):
    relations: list[Relation]


class Results(TypedDict):
    results: list[ObservationsAdded]


class Done(TypedDict):
    success: bool
    message: str


def _answer(text_value: Any, structured: dict[str, Any]) -> CallToolResult:
    """The reference server's answer: ``text_value`` as two-space JSON, and ``structured``."""
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(text_value, indent=2, ensure_ascii=False))],
                          structured_content=structured)


def _done(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)],
                          structured_content={"success": True, "message": message})


def graph_of(vault: Vault) -> KnowledgeGraph:
    return KnowledgeGraph(vault.core, vault.writes)


# ----------------------------------------------------------------------------- the tools
def create_entities(vault: Vault, entities: list[EntityIn]) -> Annotated[CallToolResult, Entities]:
    """Create multiple new entities in the knowledge graph"""
    made = graph_of(vault).create_entities([Entity(**e) for e in entities])
    return _answer(made, {"entities": made})


def create_relations(vault: Vault, relations: list[RelationIn]) -> Annotated[CallToolResult, Relations]:
    """Create multiple new relations between entities in the knowledge graph. Relations should be in active voice"""
    made = graph_of(vault).create_relations([Relation(**r) for r in relations])
    return _answer(made, {"relations": made})


def add_observations(vault: Vault, observations: list[ObservationsIn]) -> Annotated[CallToolResult, Results]:
    """Add new observations to existing entities in the knowledge graph"""
    results = graph_of(vault).add_observations([dict(o) for o in observations])
    return _answer(results, {"results": results})


EntityNames = Annotated[list[str], Field(description="An array of entity names to delete")]


def delete_entities(vault: Vault, entityNames: EntityNames) -> Annotated[CallToolResult, Done]:
    """Delete multiple entities and their associated relations from the knowledge graph"""
    graph_of(vault).delete_entities(list(entityNames))
    return _done("Entities deleted successfully")


def delete_observations(vault: Vault, deletions: list[DeletionIn]) -> Annotated[CallToolResult, Done]:
    """Delete specific observations from entities in the knowledge graph"""
    graph_of(vault).delete_observations([dict(d) for d in deletions])
    return _done("Observations deleted successfully")


RelationsGone = Annotated[list[RelationIn], Field(description="An array of relations to delete")]


def delete_relations(vault: Vault, relations: RelationsGone) -> Annotated[CallToolResult, Done]:
    """Delete multiple relations from the knowledge graph"""
    graph_of(vault).delete_relations([Relation(**r) for r in relations])
    return _done("Relations deleted successfully")


def read_graph(vault: Vault) -> Annotated[CallToolResult, Graph]:
    """Read the entire knowledge graph"""
    graph = graph_of(vault).read_graph()
    return _answer(graph, dict(graph))


SearchQuery = Annotated[str, Field(description="The search query to match against entity names, types, and "
                                               "observation content")]


def search_nodes(vault: Vault, query: SearchQuery) -> Annotated[CallToolResult, Graph]:
    """Search for nodes in the knowledge graph based on a query"""
    graph = graph_of(vault).search_nodes(query)
    return _answer(graph, dict(graph))


Names = Annotated[list[str], Field(description="An array of entity names to retrieve")]


def open_nodes(vault: Vault, names: Names) -> Annotated[CallToolResult, Graph]:
    """Open specific nodes in the knowledge graph by their names"""
    graph = graph_of(vault).open_nodes(list(names))
    return _answer(graph, dict(graph))


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    function: Any
    read_only: bool
    destructive: bool
    idempotent: bool


TOOLS = (
    Tool("create_entities", "Create Entities", create_entities, False, False, False),
    Tool("create_relations", "Create Relations", create_relations, False, False, False),
    Tool("add_observations", "Add Observations", add_observations, False, False, False),
    Tool("delete_entities", "Delete Entities", delete_entities, False, True, True),
    Tool("delete_observations", "Delete Observations", delete_observations, False, True, True),
    Tool("delete_relations", "Delete Relations", delete_relations, False, True, True),
    Tool("read_graph", "Read Graph", read_graph, True, False, True),
    Tool("search_nodes", "Search Nodes", search_nodes, True, False, True),
    Tool("open_nodes", "Open Nodes", open_nodes, True, False, True),
)


def _errors_as_results(function: Any) -> Any:
    """``function`` answering a library error as the reference server answers a thrown
    one: a result with ``isError`` and the message alone as its text."""
    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except AgentMemoryError as exc:
            return CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True)
    return call


def register(server: MCPServer, vault: Vault) -> None:
    """The nine tools and the graph resource on ``server``."""
    from ..registry import bound, one_paragraph  # the registry's wrapper: vault filled in, errors as ToolError
    from ..seen import SeenVersions
    from mcp_types import ToolAnnotations

    seen = SeenVersions()
    for tool in TOOLS:
        server.add_tool(bound(_errors_as_results(tool.function), vault, seen), name=tool.name, title=tool.title,
                        description=one_paragraph(tool.function.__doc__),
                        annotations=ToolAnnotations(read_only_hint=tool.read_only, destructive_hint=tool.destructive,
                                                    idempotent_hint=tool.idempotent, open_world_hint=False))

    @server.resource(RESOURCE_URI, name="knowledge-graph", title="Knowledge Graph",
                     description="The full knowledge graph with all entities and relations",
                     mime_type="application/json")
    def knowledge_graph() -> str:
        return json.dumps(graph_of(vault).read_graph(), indent=2, ensure_ascii=False)


def import_on_start(vault: Vault, memory_file: str | None) -> str | None:
    """The reference server's ``$MEMORY_FILE_PATH`` imported as ``agent-memory import
    --from mcp-knowledge-graph`` imports it (one path: all or nothing, a person's edits
    since an earlier import kept), once per version of the file (its sha256 is kept in
    the vault's index folder, which this machine alone writes); what happened, in one
    line for the log (None: no file set)."""
    if not memory_file:
        return None
    path = os.path.abspath(memory_file)
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return f"MEMORY_FILE_PATH {path} does not exist: nothing to import"
    except OSError as exc:
        return f"MEMORY_FILE_PATH {path} could not be read ({exc.strerror}): nothing imported"
    digest = hashlib.sha256(data).hexdigest()
    marker = vault.core.index_dir / "knowledge-graph-import.json"
    try:  # a record this machine writes, read as untrusted: never through a link or a pipe
        done = load_json(read_record(marker, limit=1 << 20))
    except (OSError, ValueError):
        done = {}
    if isinstance(done, dict) and done.get(path) == digest:
        return f"MEMORY_FILE_PATH {path} was imported before and has not changed: nothing to import"
    graph = read_jsonl(data.decode("utf-8", errors="strict"), path)
    result = vault.import_memories(dict(graph), format=GRAPH_FORMAT)
    done = {**(done if isinstance(done, dict) else {}), path: digest}
    replace_file(marker, json.dumps(done, indent=2).encode("utf-8"))  # replaces a planted link, never writes through it
    return (f"imported MEMORY_FILE_PATH {path}: {result['imported']} new entities, {result['updated']} updated, "
            f"{result['unchanged']} unchanged, {result['kept']} kept as edited here, {result['links']} relations "
            "written (a later start imports it again only if the file changes)")
