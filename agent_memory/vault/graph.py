"""The MCP reference memory server's knowledge graph, kept as notes of this vault.

An entity is one note in the ``knowledge-graph`` namespace: its exact name and type in
the ``entity`` front-matter key (``{"name", "entityType", "order"}``), its observations
as the body's ``-`` items (``note.observations``: any string comes back exactly). A
relation is an entry of a note's ``relations`` key (``{"from", "to", "relationType",
"order"}``): in the note of its ``from`` entity, else of its ``to`` entity, else in the
graph's note of loose relations. Both keys hold mappings, which the vault never reads as
links, so a relation type is never a key and cannot collide with a reserved one, and no
name becomes a link. ``order`` keeps the order the reference server keeps (creation).

The operations follow the reference server's rules one for one (what a batch skips,
what it refuses, what a search matches), so the same calls give the same answers; the
differences are in docs/moving-in.md. Every write goes through the vault's checked
write under its lock: a person's save that lands meanwhile stands.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import TypedDict

from ..clock import iso
from ..disk.layout import dated_folder, make_slug, new_id
from ..errors import InvalidInput
from ..note import observations as obs
from ..note.parse import Note, parse
from ..note.patch import patch
from ..note.render import render_new
from ..transfer.items import bounded_title
from .core import Core
from .writes import Writes

log = logging.getLogger("agent_memory.graph")

NAMESPACE = "knowledge-graph"
LOOSE_ID = "kg-loose-relations"
LOOSE_TITLE = "Knowledge graph: relations between entities not in the graph"


class Entity(TypedDict):
    name: str
    entityType: str
    observations: list[str]


Relation = TypedDict("Relation", {"from": str, "to": str, "relationType": str})


class Graph(TypedDict):
    entities: list[Entity]
    relations: list[Relation]


class ObservationsAdded(TypedDict):
    entityName: str
    addedObservations: list[str]


@dataclass
class _Node:
    """One note of the graph as read: its entity (if it is one) and the relations it holds."""

    path: str
    note: Note
    entity: Entity | None = None
    order: int = 0
    relations: list[tuple[int, Relation]] = field(default_factory=list)


def relation_key(r: Relation) -> tuple[str, str, str]:
    return r["from"], r["to"], r["relationType"]


class KnowledgeGraph:
    """The reference server's nine operations over one vault's notes."""

    def __init__(self, core: Core, writes: Writes) -> None:
        self.core = core
        self.writes = writes

    # ------------------------------------------------------------------ reading
    def _nodes(self) -> list[_Node]:
        return read_nodes(self.core)

    def read_graph(self) -> Graph:
        """Every entity and relation, in the order they were made."""
        return graph_of_nodes(self._nodes())

    def search_nodes(self, query: str) -> Graph:
        """Entities whose name, type or an observation holds ``query`` (any case), and the
        relations with either end among them — the reference server's search."""
        obs.check_text(query, "query")
        q = query.lower()
        graph = self.read_graph()
        found = [e for e in graph["entities"] if q in e["name"].lower() or q in e["entityType"].lower()
                 or any(q in o.lower() for o in e["observations"])]
        return _with_relations(found, graph["relations"])

    def open_nodes(self, names: list[str]) -> Graph:
        """The named entities (in graph order) and the relations with either end among them."""
        graph = self.read_graph()
        wanted = set(names)
        return _with_relations([e for e in graph["entities"] if e["name"] in wanted], graph["relations"])

    # ------------------------------------------------------------------ writing
    def create_entities(self, entities: list[Entity]) -> list[Entity]:
        """New entities, one note each; a name the graph has is skipped (returned: those made)."""
        for e in entities:
            check_entity(e)
            self._guard({"the name": e["name"], "the entityType": e["entityType"],
                         "the observations": "\n".join(e["observations"])})
        with self.core.writing():
            nodes = self._nodes()
            names = {n.entity["name"] for n in nodes if n.entity is not None}
            order = next_order(nodes)
            made: list[Entity] = []
            for e in entities:
                if e["name"] in names:
                    continue
                names.add(e["name"])
                self._new_note(e["name"], {"name": e["name"], "entityType": e["entityType"], "order": order},
                               obs.write(e["observations"]))
                order += 1
                made.append(Entity(name=e["name"], entityType=e["entityType"], observations=list(e["observations"])))
            return made

    def create_relations(self, relations: list[Relation]) -> list[Relation]:
        """New relations; one the graph has is skipped (returned: those made)."""
        for r in relations:
            check_relation(r)
            self._guard({"the relation": " ".join((r["from"], r["relationType"], r["to"]))})
        with self.core.writing():
            nodes = self._nodes()
            have = {relation_key(r) for n in nodes for _, r in n.relations}
            new = [Relation(**{"from": r["from"], "to": r["to"], "relationType": r["relationType"]})
                   for r in relations if relation_key(r) not in have]
            order = next_order(nodes)
            by_home: dict[str, list[dict[str, Any]]] = {}
            for r in new:
                by_home.setdefault(self._home(nodes, r), []).append({**r, "order": order})
                order += 1
            for path, entries in by_home.items():
                self._edit(path, lambda note, body, entries=entries: (
                    {"relations": [*relation_list(note), *entries]}, None))
            return new

    def add_observations(self, additions: list[dict[str, Any]]) -> list[ObservationsAdded]:
        """Observations added to existing entities (those they hold already skipped); an
        unknown entity refuses the whole call."""
        for a in additions:
            obs.check_text(a["entityName"], "entityName")
            for text in a["contents"]:
                obs.check_text(text, "an observation")
            self._guard({"the observations": "\n".join(a["contents"])})
        with self.core.writing():
            entities = self._entities()
            current: dict[str, list[str]] = {}
            results: list[ObservationsAdded] = []
            for a in additions:
                name = a["entityName"]
                if name not in entities:
                    raise InvalidInput(f"Entity with name {name} not found")
                have = current.setdefault(name, list(entities[name][1]["observations"]))
                fresh = [c for c in a["contents"] if c not in have]
                have.extend(fresh)
                results.append(ObservationsAdded(entityName=name, addedObservations=fresh))
            for name, after in current.items():
                path, entity = entities[name]
                extra = after[len(entity["observations"]):]
                if extra:
                    self._edit(path, lambda note, body, extra=extra: ({}, obs.added(body, extra)))
            return results

    def delete_entities(self, names: list[str]) -> None:
        """The named entities' notes to the trash, and every relation from or to them."""
        for name in names:
            obs.check_text(name, "an entity name")
        gone = set(names)
        with self.core.writing():
            for node in self._nodes():
                if node.entity is not None and node.entity["name"] in gone:
                    self.writes.forget(node.path)
                elif any(r["from"] in gone or r["to"] in gone for _, r in node.relations):
                    self._drop_relations(node.path, lambda r: r["from"] in gone or r["to"] in gone)

    def delete_observations(self, deletions: list[dict[str, Any]]) -> None:
        """Every copy of the given observations off the given entities; unknown ones are ignored."""
        for d in deletions:
            obs.check_text(d["entityName"], "entityName")
            for text in d["observations"]:
                obs.check_text(text, "an observation")
        with self.core.writing():
            entities = self._entities()
            for d in deletions:
                if d["entityName"] in entities and set(d["observations"]) & set(
                        entities[d["entityName"]][1]["observations"]):
                    gone = set(d["observations"])
                    self._edit(entities[d["entityName"]][0], lambda note, body, gone=gone: ({}, obs.removed(body, gone)))
                    entities = self._entities()

    def delete_relations(self, relations: list[Relation]) -> None:
        """The given relations off the graph; unknown ones are ignored."""
        for r in relations:
            check_relation(r)
        gone = {relation_key(r) for r in relations}
        with self.core.writing():
            for node in self._nodes():
                if any(relation_key(r) in gone for _, r in node.relations):
                    self._drop_relations(node.path, lambda r: relation_key(r) in gone)

    def _guard(self, fields: dict[str, str]) -> None:
        """The vault's credential guard (refused, or logged in ``secrets.mode = "warn"``:
        the reference's answers have no place for a warning)."""
        for warning in self.core.guard_credentials(fields):
            log.warning("%s", warning)

    # ------------------------------------------------------------------ notes
    def _entities(self) -> dict[str, tuple[str, Entity]]:
        """Each entity's note path and entity (the first note that names it)."""
        out: dict[str, tuple[str, Entity]] = {}
        for node in sorted(self._nodes(), key=lambda n: (n.order, n.path)):
            if node.entity is not None:
                out.setdefault(node.entity["name"], (node.path, node.entity))
        return out

    def _home(self, nodes: list[_Node], r: Relation) -> str:
        """Where a new relation is written: its ``from`` entity's note, else its ``to``
        entity's, else the note of loose relations (made when first needed)."""
        for end in ("from", "to"):
            for node in nodes:
                if node.entity is not None and node.entity["name"] == r[end]:
                    return node.path
        row = self.core.index.by_id(LOOSE_ID, iso(self.core.now()))
        if row is not None and row["namespace"] == NAMESPACE:
            return str(row["path"])
        return self._new_note(LOOSE_TITLE, None, "", note_id=LOOSE_ID)

    def _new_note(self, title: str, entity: dict[str, Any] | None, body: str, note_id: str | None = None) -> str:
        now = self.core.now()
        fields = note_fields(title, entity, now, note_id)
        data = render_new(fields, body).encode("utf-8")
        rel, published = self.core.store.place(None, note_folder(self.core, now), make_slug(fields["title"]), data)
        self.core.files.index_new(rel, data, published)
        return rel

    def _edit(self, path: str, change: Any) -> None:
        """One checked write of ``path``: ``change(note, body)`` gives the front-matter
        changes and the new body (None: as it is), from the bytes the write replaces."""
        row, data, note = self.writes.checked(path, None)
        changes, body = change(note, note.body)
        changes = {**changes, "updated": iso(self.core.now())}
        text = patch(data.decode("utf-8"), changes, body)
        self.writes.put(row["path"], data, text)

    def _drop_relations(self, path: str, drop: Any) -> None:
        def change(note: Note, body: str) -> tuple[dict[str, Any], None]:
            kept = [r for r in relation_list(note) if not drop(r)]
            return {"relations": kept or None}, None
        self._edit(path, change)


# ---------------------------------------------------------------------- the notes
def read_nodes(core: Core) -> list[_Node]:
    """Every note of the graph's namespace that holds part of it, as read from disk."""
    core.check_index()
    rows = core.index.query("SELECT path FROM memories WHERE namespace = ? ORDER BY path", (NAMESPACE,))
    nodes = []
    for row in rows:
        read = core.files.read(row["path"])
        if read is not None:
            node = node_of(row["path"], parse(read[0], row["path"]))
            if node is not None:
                nodes.append(node)
    return nodes


def note_fields(title: str, entity: dict[str, Any] | None, now: Any, note_id: str | None = None) -> dict[str, Any]:
    """The front matter of a new note of the graph (an entity's, or the loose relations')."""
    return {
        "id": note_id or new_id(int(now.timestamp() * 1000)),
        "namespace": NAMESPACE,
        "title": entity_title(title),
        "tags": [],
        "created": iso(now),
        "updated": iso(now),
        "entity": entity,
    }


def entity_title(name: str) -> str:
    """A note's title from an entity's name: its words, cut to the title bound (the name
    stays whole in ``entity``, which export gives back)."""
    return bounded_title(" ".join(name.split())) or "entity"


def note_folder(core: Core, now: Any) -> str:
    """Where a new note of the graph goes: today's folder (under the memories folder)."""
    return "/".join(p for p in (core.settings.memories_folder, dated_folder(now)) if p)


# ---------------------------------------------------------------------- pure helpers
def check_entity(e: Entity) -> None:
    obs.check_text(e["name"], "an entity name")
    obs.check_text(e["entityType"], "an entityType")
    for text in e["observations"]:
        obs.check_text(text, "an observation")


def check_relation(r: Relation) -> None:
    for key in ("from", "to", "relationType"):
        obs.check_text(r[key], key)


def relation_list(note: Note) -> list[dict[str, Any]]:
    value = note.meta.get("relations")
    return [r for r in value if _is_relation(r)] if isinstance(value, list) else []


def _is_relation(r: Any) -> bool:
    return (isinstance(r, dict) and all(isinstance(r.get(k), str) for k in ("from", "to", "relationType"))
            and isinstance(r.get("order"), int) and not isinstance(r.get("order"), bool))


def node_of(path: str, note: Note) -> _Node | None:
    """A note's part of the graph; None when it has none (or a person broke it: logged)."""
    if note.unreadable:
        log.warning("%s: skipped from the knowledge graph: %s", path, "; ".join(note.problems))
        return None
    entity = note.meta.get("entity")
    node = _Node(path=path, note=note)
    if isinstance(entity, dict):
        if (isinstance(entity.get("name"), str) and isinstance(entity.get("entityType"), str)
                and isinstance(entity.get("order"), int)):
            node.entity = Entity(name=entity["name"], entityType=entity["entityType"],
                                 observations=obs.read(note.body))
            node.order = entity["order"]
        else:
            log.warning("%s: its entity key needs a name, an entityType and an order; skipped", path)
    for r in relation_list(note):
        node.relations.append((r["order"], Relation(**{"from": r["from"], "to": r["to"],
                                                       "relationType": r["relationType"]})))
    return node if node.entity is not None or node.relations else None


def graph_of_nodes(nodes: list[_Node]) -> Graph:
    ordered = sorted((n for n in nodes if n.entity is not None), key=lambda n: (n.order, n.path))
    relations = sorted(((o, n.path, i, r) for n in nodes for i, (o, r) in enumerate(n.relations)),
                       key=lambda t: t[:3])
    return Graph(entities=[n.entity for n in ordered if n.entity is not None], relations=[t[3] for t in relations])


def _with_relations(entities: list[Entity], relations: list[Relation]) -> Graph:
    names = {e["name"] for e in entities}
    return Graph(entities=entities, relations=[r for r in relations if r["from"] in names or r["to"] in names])


def next_order(nodes: Iterable[_Node]) -> int:
    return 1 + max((o for n in nodes for o in _orders(n)), default=0)


def _orders(node: _Node) -> Iterator[int]:
    if node.entity is not None:
        yield node.order
    yield from (o for o, _ in node.relations)


# ---------------------------------------------------------------------- memory.jsonl
def read_jsonl(text: str, where: str) -> Graph:
    """A reference server's ``memory.jsonl`` as it reads one: a JSON object per non-blank
    line, ``"type": "entity"`` or ``"relation"`` (other lines skipped, as it skips them)."""
    graph = Graph(entities=[], relations=[])
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{where} line {number} is not JSON ({exc.msg}); nothing was imported.") from exc
        except RecursionError:
            raise InvalidInput(f"{where} line {number} nests lists or objects too deeply to read; nothing was "
                               "imported.") from None
        add_record(graph, item, f"{where} line {number}")
    return graph


def add_record(graph: Graph, item: Any, where: str) -> bool:
    """One memory.jsonl record into ``graph``, checked as the reference's tools check
    them; False when it is neither an entity nor a relation (the reference skips it)."""
    if not isinstance(item, dict):
        return False
    if item.get("type") == "entity":
        entity = {k: item.get(k) for k in ("name", "entityType", "observations")}
        if not (isinstance(entity["name"], str) and isinstance(entity["entityType"], str)
                and isinstance(entity["observations"], list)
                and all(isinstance(o, str) for o in entity["observations"])):
            raise InvalidInput(f"{where}: an entity needs a name, an entityType and a list of "
                               "observations (text); nothing was imported.")
        graph["entities"].append(Entity(**entity))  # type: ignore[typeddict-item]
        return True
    if item.get("type") == "relation":
        if not all(isinstance(item.get(k), str) for k in ("from", "to", "relationType")):
            raise InvalidInput(f"{where}: a relation needs from, to and relationType (text); "
                               "nothing was imported.")
        graph["relations"].append(Relation(**{k: item[k] for k in ("from", "to", "relationType")}))  # type: ignore[typeddict-item]
        return True
    return False


def to_jsonl(graph: Graph) -> str:
    """The graph as the reference server writes ``memory.jsonl``: entities then relations,
    compact JSON, one per line, no newline at the end."""
    return records_jsonl([*({"type": "entity", **e} for e in graph["entities"]),
                          *({"type": "relation", **r} for r in graph["relations"])])


def records_jsonl(records: Iterable[dict[str, Any]]) -> str:
    """memory.jsonl records as the reference server writes them (its ``JSON.stringify``):
    compact JSON, one a line, no newline at the end."""
    return "\n".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in records)
