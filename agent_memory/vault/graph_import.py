"""``import --from mcp-knowledge-graph``: a reference server's graph into the vault's graph
notes, the very notes ``serve --compat knowledge-graph`` reads and writes (``vault.graph``:
one note format, one encoding), so that export gives the same records back exactly.

Importing is a sync, like every importer's: entities are matched by exact name (the
k-th entity of a name to the k-th note of that name, as the reference keeps duplicates
a file holds), relations by how many of each the vault already has. Each note keeps in
``imported_hash`` what the last import wrote, so a re-import never undoes a person:
the source unchanged since, the note stands as they left it; the note unchanged since,
it follows the source; both changed, the person's note stands (``kept``). A note with no
such base (made by ``serve --compat``) only gains the observations it lacks. An entity
forgotten here since an earlier import is not brought back. A note the earlier, lossy
mapping wrote (its id the entity's, outside the graph's namespace) is upgraded in place
when it is as that import left it (its old body to the trash), else left and counted as
kept. Every file is computed before anything is written and published as one staged
import (``Maintenance``): all or nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..disk.layout import make_slug
from ..disk.staging import StagedFile
from ..errors import InvalidInput
from ..note import observations as obs
from ..note.links import BODY_LINK_RELATION
from ..note.parse import Note
from ..note.patch import patch
from ..note.render import render_new
from ..transfer.importers._source import read_text
from ..transfer.importers.knowledge_graph import entity_id
from ..transfer.importing import Importing, SyncPlan
from ..transfer.items import IMPORT_BASE, as_list, import_digest
from ..clock import iso
from .core import Core
from .graph import (LOOSE_ID, LOOSE_TITLE, NAMESPACE, Entity, Graph, Relation, _Node, add_record, check_entity,
                    check_relation, entity_title, next_order, note_fields, note_folder, read_jsonl, read_nodes, relation_key,
                    relation_list)


def graph_source(source: Any) -> Graph:
    """The graph a source holds: a ``memory.jsonl`` (path), ``read_graph``'s answer (a
    path to it saved, or the object), or the list of records (an MCP caller's data)."""
    text = read_text(source, "JSON lines")
    if text is not None:
        if text.lstrip().startswith("{") and '"entities"' in text:
            try:
                whole = json.loads(text)  # read_graph's answer saved as one JSON object
            except (json.JSONDecodeError, RecursionError):
                whole = None
            if isinstance(whole, dict):
                return graph_source(whole)
        return read_jsonl(text, os.fspath(source))
    if isinstance(source, dict) and set(source) <= {"entities", "relations"}:
        entities, relations = source.get("entities") or [], source.get("relations") or []
        if isinstance(entities, list) and isinstance(relations, list):
            source = [*entities, *relations]
    if not isinstance(source, list):
        raise InvalidInput("An mcp-knowledge-graph import is the list of memory.jsonl records "
                           "({type: entity|relation, ...}) or read_graph's answer; nothing was imported.")
    graph = Graph(entities=[], relations=[])
    for n, record in enumerate(source, 1):
        if isinstance(record, dict) and "type" not in record and ("name" in record or "from" in record):
            # read_graph's records have no type: theirs is told by their keys
            record = {"type": "relation" if "from" in record else "entity", **record}
        if not add_record(graph, record, f"Record {n}"):
            raise InvalidInput(f"Record {n} is not an entity or a relation ({{\"type\": \"entity\", ...}}); "
                               "nothing was imported.")
    return graph


def entity_digest(entity: Entity) -> str:
    """What an import wrote of an entity, as one short digest (the next import's base)."""
    payload = json.dumps([entity["name"], entity["entityType"], entity["observations"]], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


@dataclass
class _New:
    """A note the import makes: an entity's (or the loose relations')."""

    title: str
    entity: dict[str, Any] | None
    observations: list[str]
    note_id: str
    base: str | None
    relations: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Edit:
    """An existing note the import changes: front-matter changes and the body (None: kept)."""

    data: bytes
    note: Note
    changes: dict[str, Any] = field(default_factory=dict)
    body: str | None = None


class GraphImport:
    """One import of a graph, planned over the vault's graph as it is now."""

    def __init__(self, core: Core, importing: Importing, now: dt.datetime) -> None:
        self.core = core
        self.importing = importing
        self.now = now
        self.plan = SyncPlan()
        self.nodes = read_nodes(core)
        self.order = next_order(self.nodes)
        self.forgotten = {e.id for e in core.store.trash.entries() if e.reason == "forgotten"}
        self.by_name: dict[str, list[_Node]] = {}
        for node in sorted((n for n in self.nodes if n.entity is not None), key=lambda n: (n.order, n.path)):
            assert node.entity is not None
            self.by_name.setdefault(node.entity["name"], []).append(node)
        self.homes: dict[str, str] = {name: found[0].path for name, found in self.by_name.items()}
        self.gone: set[str] = set()
        self.new: dict[str, _New] = {}  # by the key it is staged under (its note id)
        self.edits: dict[str, _Edit] = {}  # by path

    def run(self, graph: Graph) -> SyncPlan:
        """Every file the import writes, computed before anything is written."""
        for n, e in enumerate(graph["entities"], 1):
            self._checked(f"Entity {n}", lambda e=e: check_entity(e), {"the name": e["name"],
                          "the entityType": e["entityType"], "the observations": "\n".join(e["observations"])})
        for n, r in enumerate(graph["relations"], 1):
            self._checked(f"Relation {n}", lambda r=r: check_relation(r),
                          {"the relation": " ".join((r["from"], r["relationType"], r["to"]))})
        seen: Counter[str] = Counter()
        for e in graph["entities"]:
            self._entity(e, seen[e["name"]])
            seen[e["name"]] += 1
        self._relations(graph["relations"])
        self._stage()
        return self.plan

    def _checked(self, where: str, check: Any, fields: dict[str, str]) -> None:
        try:
            check()
            self.core.guard_credentials(fields)
        except InvalidInput as exc:
            raise type(exc)(f"{where}: {exc} Nothing was imported.") from exc

    # ------------------------------------------------------------------ entities
    def _entity(self, e: Entity, k: int) -> None:
        theirs = entity_digest(e)
        found = self.by_name.get(e["name"], [])
        if k < len(found):
            self._sync(found[k], e, theirs)
            return
        note_id = entity_id(e["name"]) if k == 0 else f"{entity_id(e['name'])}-{k + 1}"
        row = self.core.index.by_id(note_id, iso(self.now))
        if row is not None and row["namespace"] != NAMESPACE:
            self._upgrade(row["path"], e, theirs)
            return
        if row is not None:  # its note is here, but under another name now: a person renamed it
            if self.importing.readable(row["path"]) is not None:  # (one that cannot be read is refused, saying why)
                self.plan.kept += 1
            return
        if note_id in self.forgotten:
            self.plan.forgotten += 1  # forgotten here: an import does not bring it back (restore does)
            self.gone.add(e["name"])
            return
        entity = {"name": e["name"], "entityType": e["entityType"], "order": self._next()}
        self.new[note_id] = _New(e["name"], entity, list(e["observations"]), note_id, theirs)
        self.homes.setdefault(e["name"], note_id)

    def _sync(self, node: _Node, e: Entity, theirs: str) -> None:
        """An entity the vault's graph has: three-way, with what the last import wrote as the base."""
        assert node.entity is not None
        mine = node.entity
        base = node.note.meta.get(IMPORT_BASE)
        if entity_digest(mine) == theirs or base == theirs:
            self.plan.unchanged += 1  # the same, or the source unchanged since: the note stands as it is
            return
        if base is not None and entity_digest(mine) != base:
            self.plan.kept += 1  # a person changed it since, and the source changed too: theirs stands
            return
        if base is None:  # no base (made by serve --compat): only what the note lacks is added
            have = list(mine["observations"])
            missing: list[str] = []
            for o in e["observations"]:
                if o not in have:
                    have.append(o)
                    missing.append(o)
            if not missing:
                self.plan.unchanged += 1
                return
            edit = self._edit(node.path)
            edit.body = obs.added(edit.note.body, missing)
            if have == e["observations"] and mine["entityType"] == e["entityType"]:
                edit.changes[IMPORT_BASE] = theirs
            return
        edit = self._edit(node.path)
        if mine["entityType"] != e["entityType"]:
            edit.changes["entity"] = {"name": e["name"], "entityType": e["entityType"], "order": node.order}
        if mine["observations"] != e["observations"]:
            edit.body = obs.added(obs.removed(edit.note.body, set(mine["observations"])), e["observations"])
        edit.changes[IMPORT_BASE] = theirs

    def _upgrade(self, path: str, e: Entity, theirs: str) -> None:
        """A note the earlier mapping wrote: upgraded in place where it is as that import left it."""
        edit = self._edit(path)
        note = edit.note
        kind = note.meta.get("type")
        scalars = {"type": kind} if kind not in (None, "") else {}
        was = import_digest(note.body, scalars, as_list(note.meta.get("tags")), as_list(note.meta.get("aliases")))
        if note.meta.get(IMPORT_BASE) != was:
            self.plan.kept += 1  # a person edited it since: it stays as they left it
            self.edits.pop(path)
            return
        old_links = {prop for prop, _ in note.links if prop != BODY_LINK_RELATION}
        edit.changes.update({prop: None for prop in sorted(old_links)})
        edit.changes.update({"namespace": NAMESPACE, "relation_types": None, "title": entity_title(e["name"]),
                             "entity": {"name": e["name"], "entityType": e["entityType"], "order": self._next()},
                             IMPORT_BASE: theirs})
        edit.body = obs.write(e["observations"])
        self.homes.setdefault(e["name"], path)

    def _edit(self, path: str) -> _Edit:
        if path not in self.edits:
            read = self.importing.readable(path)
            if read is None:
                raise InvalidInput(f"{path} went away while the import read it; import again.")
            self.edits[path] = _Edit(read[1], read[2])
        return self.edits[path]

    def _next(self) -> int:
        self.order += 1
        return self.order - 1

    # ------------------------------------------------------------------ relations
    def _relations(self, relations: list[Relation]) -> None:
        """Each relation the vault has fewer copies of than the source, in its ``from``
        entity's note, else its ``to`` entity's, else the note of loose relations."""
        have = Counter(relation_key(r) for n in self.nodes for _, r in n.relations)
        wanted: Counter[tuple[str, str, str]] = Counter()
        for r in relations:
            key = relation_key(r)
            wanted[key] += 1
            if wanted[key] <= have[key] or r["from"] in self.gone or r["to"] in self.gone:
                continue
            home = self.homes.get(r["from"]) or self.homes.get(r["to"]) or self._loose()
            entry = {"from": r["from"], "to": r["to"], "relationType": r["relationType"], "order": self._next()}
            if home in self.new:
                self.new[home].relations.append(entry)
            else:
                edit = self._edit(home)
                edit.changes.setdefault("relations", list(relation_list(edit.note))).append(entry)
            self.plan.links += 1

    def _loose(self) -> str:
        row = self.core.index.by_id(LOOSE_ID, iso(self.now))
        if row is not None and row["namespace"] == NAMESPACE:
            return str(row["path"])
        self.new.setdefault(LOOSE_ID, _New(LOOSE_TITLE, None, [], LOOSE_ID, None))
        return LOOSE_ID

    # ------------------------------------------------------------------ files
    def _stage(self) -> None:
        taken: set[str] = set()
        folder = note_folder(self.core, self.now)
        if folder and not self.importing.plain_folder(folder):
            raise InvalidInput(f"{folder}/ in the vault is (or goes through) a symlink; imports are not written "
                               "through symlinks. Replace it with a real folder. Nothing was imported.")
        for new in self.new.values():
            fields = note_fields(new.title, new.entity, self.now, new.note_id)
            if new.relations:
                fields["relations"] = new.relations
            if new.base is not None:
                fields[IMPORT_BASE] = new.base
            rel = self.importing.free_path(f"{folder}/{make_slug(fields['title'])}.md".lstrip("/"), taken)
            self.plan.files.append(StagedFile(rel, render_new(fields, obs.write(new.observations)).encode("utf-8")))
        for path, edit in self.edits.items():
            changes = {**edit.changes, "updated": iso(self.now)}
            text = patch(edit.data.decode("utf-8"), changes, edit.body)
            self.plan.files.append(StagedFile(path, text.encode("utf-8"), edit.data))


def plan_graph_import(core: Core, importing: Importing, graph: Graph, now: dt.datetime) -> SyncPlan:
    """The files importing ``graph`` writes (``GraphImport``)."""
    return GraphImport(core, importing, now).run(graph)
