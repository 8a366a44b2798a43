"""Owning a vault: stats, export and import, and emptying the trash.

Every vault opened finishes an interrupted import here, so the other servers' formats
(``transfer.formats``, ``importers``) and the knowledge graph's notes (``graph``,
``graph_import``) are imported by the methods that convert them, not with this module.
"""

from __future__ import annotations

import dataclasses
import json
import datetime as dt
import os
import sqlite3
from collections.abc import Callable
from typing import Any

from ..note import parse
from ..note.links import BODY_LINK_RELATION
from ..note.parse import Note
from ..trust import credentials
from ..recall import graph
from ..recall.sql import Filters
from ..trust import confine
from ..clock import iso
from ..progress import Every, Progress, Step
from .core import Core
from ..errors import InvalidInput, NotInTrash, PathRefused, disk_error
from ..transfer.importing import Importing, SyncPlan
from ..index.db import SCHEMA_VERSION, TOKENIZER
from ..index.reconcile import collector_paused
from ..limits import MAX_BATCH, check_import_data, check_limit, check_offset, namespace_filter
from ..models import (ChatNote, ExportedMemory, ExportPage, GcResult, ImportResult, RecallProfile, RestoreResult, Stats,
                      TrashEntry)
from ..disk.staging import NotPublished, Staging
from ..disk.trash import LEDGER_NAME
from ..wording import OLDER_THAN_DAYS, said

TRASH_DAYS = 30
SEARCH_MODE = (
    f"sqlite fts5 ({TOKENIZER}) with CJK bigrams; all terms, else IDF-weighted coverage; "
    "bm25 (title and tags above body); recency; prefix and typo fallbacks"
)


class Maintenance:
    """Owning a vault: stats, export, import, the trash (gc, list, restore)."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.store = core.store
        self.index = core.index
        self.files = core.files
        self.importing = Importing(core)

    # ------------------------------------------------------------------ owning the vault
    def stats(self, progress: Progress | None = None) -> Stats:
        """Totals and health at a glance (also the MCP ``memory_stats`` tool). ``progress``
        hears the tag rows' one-time build after a rebuild, if it is needed."""
        self.core.check_index()
        self.index.tagging(progress)
        now = iso(self.core.now())
        namespaces = self.index.namespace_counts(now)
        oldest, newest = self.index.created_range(now)
        return Stats(
            vault=str(self.core.root),
            total=sum(namespaces.values()),
            namespaces=namespaces,
            top_tags=self.index.top_tags(now),
            types=self.index.type_counts(now),
            average_importance=self.index.average_importance(now),
            relations=self.index.relation_counts(now),
            oldest=oldest,
            newest=newest,
            with_ttl=self.index.ttl_count(now),
            parse_problems=self.index.problem_files(),
            conflicts=self.index.conflict_paths(),
            duplicate_ids=self.index.duplicate_ids(),
            trash_files=sum(1 for _ in self.store.trash.files()),
            index_path=str(self.index.path),
            index_bytes=self.index.size_bytes(),
            schema_version=SCHEMA_VERSION,
            search_mode=SEARCH_MODE,
            semantic=self.core.vectors.status(self.core.semantic_on()),
            recall_profile=self._profile(),
        )

    def _profile(self) -> RecallProfile:
        choice = self.core.profile_choice()
        return RecallProfile(name=choice.profile, reason=choice.reason, set_by=choice.set_by)

    def export_memories(self, namespace: str | None = None, format: str | None = None,
                        progress: Progress | None = None) -> list[Any]:
        """Every live memory as written: its path, all front-matter keys, the body.

        ``format="mcp-knowledge-graph"``: the MCP reference memory server's memory.jsonl
        records instead (``transfer.importers.knowledge_graph.records``): one entity per memory,
        named by its first alias (where importing one keeps the entity's name) or its
        title, ``type`` as ``entityType``, the body's items as observations, and every
        link property to another memory as a relation, its type given back from
        ``relation_types`` where the property name had to differ. ``progress`` hears
        the files read ("exporting memories")."""
        self.core.check_index()
        rows = self.index.live_rows(iso(self.core.now()), namespace_filter(namespace))
        reading = Every(progress, "exporting memories", len(rows))
        if format is None or format == "json":
            return self._exported(rows, reading)
        from ..transfer.formats import EXPORT_FORMATS

        if format not in EXPORT_FORMATS:
            raise InvalidInput(f"Unknown export format {format!r}; use json or {', '.join(EXPORT_FORMATS)}.")
        return self._knowledge_graph(rows, reading)

    def _knowledge_graph(self, rows: list[sqlite3.Row], reading: Every) -> list[dict[str, Any]]:
        from ..transfer.importers.knowledge_graph import entity_name, observations, records, relation_type
        from .graph import NAMESPACE as GRAPH_NAMESPACE, graph_of_nodes, node_of

        links = graph.LinkGraph(self.index, iso(self.core.now()))
        read: list[tuple[sqlite3.Row, Note]] = []
        names: dict[int, str] = {}
        kept = []  # the notes of serve --compat knowledge-graph: their exact graph
        for done, row in enumerate(rows, 1):
            reading(done)
            found = self.files.read(row["path"])
            if found is None:
                continue
            note = parse.parse(found[0], row["path"])
            node = node_of(row["path"], note) if note.namespace == GRAPH_NAMESPACE else None
            if node is not None:
                kept.append(node)
                continue
            read.append((row, note))
            names[row["rid"]] = entity_name(note.aliases, note.title)
        entities = []
        for row, note in read:
            name = names[row["rid"]]
            relations = []
            for prop, target in note.links:
                if prop == BODY_LINK_RELATION:
                    continue  # a [[link]] in the text is part of an observation
                to = links.resolve(target, row["path"])
                relations.append((relation_type(prop, note.meta.get("relation_types")),
                                  names.get(to["rid"], to["title"]) if to is not None else target))
            kind = note.meta.get("type")
            entities.append({"name": name, "type": str(kind).strip() if kind not in (None, "") else "memory",
                             "observations": observations(note.body, name), "relations": relations})
        exact = graph_of_nodes(kept)
        others = records(entities)
        return [*({"type": "entity", **e} for e in exact["entities"]), *(r for r in others if r["type"] == "entity"),
                *({"type": "relation", **r} for r in exact["relations"]), *(r for r in others if r["type"] != "entity")]

    def export_page(self, namespace: str | None = None, limit: int = 100, offset: int = 0) -> ExportPage:
        """One page of the export, read from disk page by page (an MCP call's worth)."""
        self.core.check_index()
        check_offset(offset)
        namespace = namespace_filter(namespace)
        now = iso(self.core.now())
        total = self.index.count(Filters(namespace=namespace or None), now)
        check_limit(limit, most=MAX_BATCH)
        rows = self.index.live_rows(now, namespace or None, limit, offset)
        page = self._exported(rows)  # a file gone since it was indexed is left out...
        result = ExportPage(total=total, count=len(page), offset=offset, memories=page)
        if offset + len(rows) < total:  # ...but still counts, so the next page does not repeat one
            result["next_offset"] = offset + len(rows)
        return result

    def _exported(self, rows: list[sqlite3.Row], reading: Every | None = None) -> list[ExportedMemory]:
        out: list[ExportedMemory] = []
        for done, row in enumerate(rows, 1):
            if reading is not None:
                reading(done)
            read = self.files.read(row["path"])
            if read is None:
                continue
            note = parse.parse(read[0], row["path"])
            item = ExportedMemory(id=note.id, path=note.path, front_matter=note.meta, content=note.body)
            try:
                item["raw"] = read[0].decode("utf-8")  # the file as written: import puts it back byte for byte
            except UnicodeDecodeError:
                pass  # not UTF-8: JSON cannot carry it; import writes the fields instead
            out.append(item)
        return out

    def import_memories(self, items: Any, progress: Progress | None = None, format: str | None = None) -> ImportResult:
        """All or nothing: the whole batch is checked first, then written in one go.

        ``format`` names another memory server's data (``transfer.formats.FORMATS``): ``items``
        is then its file (a path) or that data parsed, turned into import items first,
        whose ids are the source's keys: a memory the source gave before is updated in
        place where the source changed it (``transfer/importing.py``), and counted as unchanged
        where it did not.

        Otherwise (this tool's export, or items made by hand), same content in the same
        namespace, or an id that a live memory already has (already in the vault, or
        earlier in the batch: an older copy of a memory edited since), is skipped and
        counted. Already-expired items are counted, not written. A path that is taken
        gets the next free ``-2``-style name; nothing is overwritten.
        """
        if format is None:
            return self._import_items(items, progress, sync=False)
        from ..transfer.formats import GRAPH_FORMAT, importer
        from ..transfer.importers.chats import CHAT_FORMATS
        from .graph_import import graph_source, plan_graph_import

        if format in CHAT_FORMATS:
            return self._import_chats(items, format, progress)
        if format == GRAPH_FORMAT:  # the notes serve --compat knowledge-graph keeps: one exact mapping
            graph = graph_source(items)
            return self._published(lambda now: plan_graph_import(self.core, self.importing, graph, now), progress)
        return self._import_items(importer(format)(items), progress, sync=True)

    def _import_items(self, items: Any, progress: Progress | None, sync: bool) -> ImportResult:
        """One all-or-nothing import of items; ``sync``: their ids are a source's keys."""
        if not isinstance(items, list):
            raise InvalidInput("Import expects a JSON array of memories (as written by export).")
        check_import_data(items)  # no NUL, no nesting past MAX_NESTING, anywhere it would be written

        def planned(now: dt.datetime) -> SyncPlan:
            if sync:
                return self.importing.plan_sync(items, now)
            plans, duplicates, expired = self.importing.plan_import(items, now)
            return SyncPlan(files=plans, duplicates=duplicates, expired=expired)
        return self._published(planned, progress)

    def _published(self, planned: Callable[[dt.datetime], SyncPlan], progress: Progress | None) -> ImportResult:
        """An import's files, planned under the write lock, staged and published in one go
        (the cycle collector paused meanwhile: the batch's objects hold no cycles)."""
        with collector_paused(), self.core.writing():
            # Under the lock no other import runs: a staging folder now is one a crash left.
            # Finish or drop it first (a long-running server would otherwise refuse imports).
            self.finish_interrupted_import()
            plan = planned(self.core.now())
            staging = self.staging()
            total = len(plan.files)

            report = Every(progress, "importing memories", total)

            try:
                staging.stage(plan.files)
            except BaseException as exc:
                staging.clear()  # before the manifest nothing reached the vault
                if isinstance(exc, OSError):
                    raise disk_error(exc, "stage the import") from exc
                raise
            try:
                published = staging.publish(report)  # past the manifest: finished, here or on the next open
            except NotPublished:
                staging.clear()  # taken back: nothing of it is in the vault, nothing is left to finish
                raise
            staging.clear()
            # Indexed in one transaction from the bytes just written and each published
            # file's stat, not read back (one that changed since is: ``refresh`` checks).
            # Parsed before the transaction, not inside it.
            examined = {p.path: self.files.written(p.path, plan.files[p.n].data, p.stat) for p in published
                        if p.stat is not None}
            done = {p.path for p in published}
            with self.index.roomy_cache(), self.files.transaction() as conn:
                self.files.refresh_new(conn, [p.path for p in published], examined)
                for staged in plan.files:
                    if staged.replaces is not None and staged.path not in done:  # a person's save stood: index that
                        self.files.refresh(conn, staged.path, None)
            rows = self.index.query(
                "SELECT path, id FROM memories WHERE path IN (SELECT value FROM json_each(?))",
                (json.dumps([p.path for p in published]),))
            ids = {row["path"]: row["id"] for row in rows}
        written = [p.path for p in published if p.path in ids]
        updated = sum(1 for p in published if plan.files[p.n].replaces is not None)
        return ImportResult(imported=len(published) - updated, updated=updated, unchanged=plan.unchanged,
                            duplicates=plan.duplicates, expired=plan.expired, links=plan.links, kept=plan.kept,
                            forgotten=plan.forgotten,
                            ids=[ids[rel] for rel in written], paths=written)

    def _import_chats(self, path: Any, format: str, progress: Progress | None = None,
                     namespace: str = "default") -> ImportResult:
        """A ChatGPT or Claude export (its zip or ``conversations.json``, or its list of
        conversations already parsed, as an MCP caller sends it): one dated note
        per conversation (``importers.chats``), read one conversation at a time and
        imported in all-or-nothing batches of ``CHAT_BATCH``, so memory stays bounded
        whatever the export's size. Importing it again updates each note where its
        conversation changed. A conversation holding a credential has it redacted
        (listed in ``redacted``); one that still would not pass is left out (``refused``)."""
        from ..transfer.importers.chats import conversations as chat_conversations, note_items

        total = _empty_import()
        redacted: list[ChatNote] = []
        refused: list[ChatNote] = []
        batch: list[dict[str, Any]] = []
        count = 0
        for conversation in chat_conversations(path, format):
            count += 1
            items, found = self._guarded(note_items(conversation, namespace))
            label = ChatNote(conversation=conversation.key, title=conversation.title, kinds=found)
            if items is None:
                refused.append(label)
                continue
            if found:
                redacted.append(label)
            batch += items
            if len(batch) >= CHAT_BATCH:
                _add_up(total, self._import_items(batch, None, sync=True))
                batch = []
                if progress is not None:
                    progress(Step("importing conversations", count, None))
        if batch:
            _add_up(total, self._import_items(batch, None, sync=True))
        if progress is not None:
            progress(Step("importing conversations", count, count))
        total["conversations"] = count
        total["redacted"] = redacted
        total["refused"] = refused
        return total

    def _guarded(self, items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]] | None, list[str]]:
        """A conversation's notes with any credential redacted (the kinds found said), or
        None when one would still be refused: then the conversation is left out alone."""
        settings = self.core.settings
        kinds: list[str] = []
        for item in items:
            for key in ("content", "title"):
                found = credentials.check_text(item[key], settings)
                if found:
                    kinds += [f.kind for f in found]
                    item[key] = credentials.redact(item[key], found)
        if kinds and any(credentials.check_text(item[key], settings) for item in items for key in ("content", "title")):
            return None, list(dict.fromkeys(kinds))
        return items, list(dict.fromkeys(kinds))

    def staging(self) -> Staging:
        return Staging(self.store, self.importing.replace_imported)

    def finish_interrupted_import(self) -> int:
        """An import a crash interrupted: finished if it was fully staged, else dropped."""
        with self.core.writing():
            published = self.staging().recover()
            if published:
                with self.files.transaction() as conn:
                    for rel in published:
                        self.files.refresh(conn, rel, None)
        return len(published)

    def gc(self, older_than_days: float = TRASH_DAYS, progress: Progress | None = None) -> GcResult:
        """Empty the trash of what the tool put there longer than ``older_than_days`` ago.

        Only the tool's own entries go (``.trash/`` is also Obsidian's trash: a note a
        person deleted there is theirs), and only while they hold the bytes the tool put
        there. ``progress`` hears the trash's entries looked at ("emptying the trash")."""
        if not isinstance(older_than_days, (int, float)) or older_than_days < 0:
            raise InvalidInput(said(OLDER_THAN_DAYS, f" must be a number of days, 0 or more; got {older_than_days!r}."))
        with self.core.writing():
            moved = self.core.reconciler.sweep_expired()
            removed, kept, refused = self.store.trash.purge(dt.timedelta(days=older_than_days), self.core.now(),
                                                            progress)
        result = GcResult(removed=removed, kept=kept, expired_moved=moved)
        if refused:
            result["refused"] = refused
            result["note"] = (f"{len(refused)} line(s) of .trash/{LEDGER_NAME} were left alone "
                              f"({', '.join(refused[:3])}): each names a file outside .trash/, or is not in this "
                              "user's register of open operations (a pull or a sync may have brought them). "
                              "`agent-memory doctor` lists them; --apply or --discard decides.")
        return result

    def trash_list(self) -> list[TrashEntry]:
        """What the tool put in the trash and can restore, newest first."""
        return [TrashEntry(**dataclasses.asdict(e)) for e in self.store.trash.live()]  # type: ignore[typeddict-item]

    def restore(self, key: str) -> RestoreResult:
        """Put a forgotten, expired or replaced memory back where it was, by its id, its
        old path or its trash path. Never overwrites: if something is at that path now,
        it is refused with what to do."""
        if not isinstance(key, str) or not key.strip():
            raise InvalidInput("Say what to restore: a memory id, its old path, or its path in .trash/ "
                               "(agent-memory restore lists them).")
        with self.core.writing():
            entry = self.store.trash.find(key)
            if entry is None:
                refused = self.store.trash.find_refused(key)
                if refused is None:
                    raise NotInTrash(key)
                # The ledger is a file in the vault: a sync tool or a pull can bring any line.
                raise PathRefused(f"The trash ledger's line for {key!r} ({refused[0].record}) {refused[1]}; nothing "
                                  "was restored. `agent-memory doctor` lists it, and can apply it if it is yours.")
            try:
                confine.memory_path(self.core.root, entry.source)
            except PathRefused as exc:
                raise PathRefused(f"{entry.trash} is recorded as coming from {entry.source!r}, which is not a place "
                                  f"in the vault a memory can be restored to ({exc}); move the file by hand.") from None
            if os.path.lexists(self.store.abspath(entry.source)):
                raise InvalidInput(
                    f"{entry.source} exists, so {entry.trash} was not restored over it. Move or rename the current "
                    f"file first, then `agent-memory restore {entry.trash}` (by its trash path, so the right copy "
                    "comes back), or open it and copy what you need."
                )
            try:
                self.store.trash.take_out(entry, self.store.abspath(entry.source))
            except FileExistsError:
                raise InvalidInput(f"{entry.source} appeared meanwhile; nothing was restored.") from None
            with self.files.transaction() as conn:
                self.files.refresh(conn, entry.source, None)
            row = self.index.by_path(entry.source)
        return RestoreResult(path=entry.source, id=row["id"] if row else entry.id, restored_from=entry.trash,
                             reason=entry.reason)


CHAT_BATCH = 200  # notes imported (all or nothing) at a time from a chat export


def _empty_import() -> ImportResult:
    return ImportResult(imported=0, updated=0, unchanged=0, duplicates=0, expired=0, links=0, kept=0, forgotten=0,
                        ids=[], paths=[])


def _add_up(total: ImportResult, part: ImportResult) -> None:
    """One batch's counts added to the whole import's."""
    for key in ("imported", "updated", "unchanged", "duplicates", "expired", "links", "kept", "forgotten"):
        total[key] += part[key]
    total["ids"] += part["ids"]
    total["paths"] += part["paths"]
