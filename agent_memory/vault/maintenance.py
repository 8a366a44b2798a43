"""Owning a vault: stats, export and import, and emptying the trash."""

from __future__ import annotations

import dataclasses
import json
import datetime as dt
import os
import sqlite3
from typing import TYPE_CHECKING, Any

from ..note import parse
from ..note.links import BODY_LINK_RELATION
from ..note.parse import Note, content_hash
from ..note.patch import patch
from ..note.render import render_front_matter, render_new, to_utc
from ..transfer.formats import EXPORT_FORMATS, importer
from ..transfer.items import exported_file, exported_front_matter, import_path, new_fields, own_id, twin_id
from ..recall import graph
from ..recall.sql import Filters
from ..trust import confine
from ..transfer.importers.knowledge_graph import entity_name, observations, records, relation_type
from ..clock import iso
from ..progress import Every, Progress
from .core import _UNREAD
from ..errors import InvalidInput, NotFound, PathRefused, disk_error
from ..transfer.importing import Importing, SyncPlan
from ..index.db import SCHEMA_VERSION, TOKENIZER, FileFacts
from ..limits import (MAX_BATCH, check_content, check_import_data, check_limit, check_offset, check_text,
                     namespace_filter)
from ..models import ExportedMemory, ExportPage, GcResult, ImportResult, RestoreResult, Stats, TrashEntry
from ..disk.staging import NotPublished, Staging
from ..disk.trash import LEDGER_NAME

TRASH_DAYS = 30
SEARCH_MODE = (
    f"sqlite fts5 ({TOKENIZER}) with CJK bigrams; all terms, else IDF-weighted coverage; "
    "bm25 (title and tags above body); recency; prefix and typo fallbacks"
)


class Maintenance(Importing):
    if TYPE_CHECKING:  # Vault composes this with Reconcile, whose sweep moves expired memories to the trash
        def sweep_expired(self) -> int: ...

    # ------------------------------------------------------------------ owning the vault
    def stats(self) -> Stats:
        """Totals and health at a glance (also the MCP ``memory_stats`` tool)."""
        self._check_index()
        now = iso(self.now())
        namespaces = self.index.namespace_counts(now)
        oldest, newest = self.index.created_range(now)
        return Stats(
            vault=str(self.root),
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
            semantic=self.vectors.status(self.semantic_on()),
        )

    def export_memories(self, namespace: str | None = None, format: str | None = None) -> list[Any]:
        """Every live memory as written: its path, all front-matter keys, the body.

        ``format="mcp-knowledge-graph"``: the MCP reference memory server's memory.jsonl
        records instead (``transfer.importers.knowledge_graph.records``): one entity per memory,
        named by its first alias (where importing one keeps the entity's name) or its
        title, ``type`` as ``entityType``, the body's items as observations, and every
        link property to another memory as a relation, its type given back from
        ``relation_types`` where the property name had to differ."""
        self._check_index()
        rows = self.index.live_rows(iso(self.now()), namespace_filter(namespace))
        if format is None or format == "json":
            return self._exported(rows)
        if format not in EXPORT_FORMATS:
            raise InvalidInput(f"Unknown export format {format!r}; use json or {', '.join(EXPORT_FORMATS)}.")
        return self._knowledge_graph(rows)

    def _knowledge_graph(self, rows: list[sqlite3.Row]) -> list[dict[str, Any]]:
        links = graph.LinkGraph(self.index, iso(self.now()))
        read: list[tuple[sqlite3.Row, Note]] = []
        names: dict[int, str] = {}
        for row in rows:
            found = self._read(row["path"])
            if found is None:
                continue
            note = parse.parse(found[0], row["path"])
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
        return records(entities)

    def export_page(self, namespace: str | None = None, limit: int = 100, offset: int = 0) -> ExportPage:
        """One page of the export, read from disk page by page (an MCP call's worth)."""
        self._check_index()
        check_offset(offset)
        namespace = namespace_filter(namespace)
        now = iso(self.now())
        total = self.index.count(Filters(namespace=namespace or None), now)
        check_limit(limit, most=MAX_BATCH)
        rows = self.index.live_rows(now, namespace or None, limit, offset)
        page = self._exported(rows)  # a file gone since it was indexed is left out...
        result = ExportPage(total=total, count=len(page), offset=offset, memories=page)
        if offset + len(rows) < total:  # ...but still counts, so the next page does not repeat one
            result["next_offset"] = offset + len(rows)
        return result

    def _exported(self, rows: list[sqlite3.Row]) -> list[ExportedMemory]:
        out: list[ExportedMemory] = []
        for row in rows:
            read = self._read(row["path"])
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
        if format is not None:
            items = importer(format)(items)
        if not isinstance(items, list):
            raise InvalidInput("Import expects a JSON array of memories (as written by export).")
        check_import_data(items)  # no NUL, no nesting past MAX_NESTING, anywhere it would be written
        with self._writing():
            # Under the lock no other import runs: a staging folder now is one a crash left.
            # Finish or drop it first (a long-running server would otherwise refuse imports).
            self.finish_interrupted_import()
            now = self.now()
            if format is not None:
                plan = self._plan_sync(items, now)
            else:
                plans, duplicates, expired = self._plan_import(items, now)
                plan = SyncPlan(files=[(rel, data, None) for rel, data in plans], duplicates=duplicates, expired=expired)
            staging = self._staging()
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
            # file's stat, not read back (one that changed since is: ``_refresh`` checks).
            examined = {rel: (self._note_for(rel, plan.files[n][1], stat), FileFacts.read(plan.files[n][1], stat))
                        for n, rel, stat in published if stat is not None}
            done = {rel for _n, rel, _stat in published}
            with self._index_write() as conn:
                for _n, rel, _stat in published:
                    self._refresh(conn, rel, None, examined.get(rel, _UNREAD))
                for rel, _data, old in plan.files:
                    if old is not None and rel not in done:  # a person's save stood instead: index that
                        self._refresh(conn, rel, None)
            rows = self.index.query(
                "SELECT path, id FROM memories WHERE path IN (SELECT value FROM json_each(?))",
                (json.dumps([rel for _n, rel, _stat in published]),))
            ids = {row["path"]: row["id"] for row in rows}
        written = [rel for _n, rel, _stat in published if rel in ids]
        updated = sum(1 for n, _rel, _stat in published if plan.files[n][2] is not None)
        return ImportResult(imported=len(published) - updated, updated=updated, unchanged=plan.unchanged,
                            duplicates=plan.duplicates, expired=plan.expired, links=plan.links, kept=plan.kept,
                            forgotten=plan.forgotten,
                            ids=[ids[rel] for rel in written], paths=written)

    def _plan_import(self, items: list[Any], now: dt.datetime) -> tuple[list[tuple[str, bytes]], int, int]:
        """Every item checked and its file computed, before anything is written:
        (files, duplicates, expired)."""
        plans: list[tuple[str, bytes]] = []
        seen: set[tuple[str, str]] = set()
        seen_ids: set[str] = set()
        plain: dict[str, bool] = {}  # folders checked once per import here; publishing checks each again
        duplicates = expired = 0
        for n, item in enumerate(items):
            where = f"Item {n}"
            if not isinstance(item, dict):
                raise InvalidInput(f"{where} is not an object; nothing was imported.")
            try:
                check_text(item.get("path"), "path")
                exported = exported_file(item)
                if exported is not None:  # an export's raw text: the file exactly as it was
                    check_content(exported.body)
                    meta, namespace, content = exported.meta, exported.namespace, exported.body
                    data = item["raw"].encode("utf-8")
                    expires = exported.expires
                    memory_id = exported.id if exported.own_id else None
                    self.guard_credentials({"the file text": item["raw"]})
                else:
                    content = check_content(item.get("content"))  # type: ignore[arg-type]
                    if "front_matter" in item:  # an export: its front matter is the file's, as written
                        meta, namespace = exported_front_matter(item["front_matter"])
                        content = item["content"]  # byte for byte: export -> import -> export is stable
                        data = render_front_matter(meta, content).encode("utf-8")
                    else:  # a hand-made item {content, namespace, tags, title, source, created, ...}
                        meta = new_fields(item, now)
                        namespace = meta["namespace"]
                        data = render_new(meta, content).encode("utf-8")  # the file remember would write
                    written = meta.get("expires")
                    expires = None if written in (None, "") else to_utc(written)
                    memory_id = own_id(meta)
                    self.guard_credentials({"the content": content, "the front matter": json.dumps(meta, default=str)})
            except (InvalidInput, ValueError) as exc:  # the same kind of error, naming the item
                kind = type(exc) if isinstance(exc, InvalidInput) else InvalidInput
                raise kind(f"{where}: {exc} Nothing was imported.") from exc
            if expires is not None and expires <= iso(now):
                expired += 1
                continue
            key = (namespace, content_hash(content))
            by_id = item.get("unique_by") == "id" and memory_id is not None  # an importer's: entities are told apart by name
            if not by_id and (key in seen or self.index.find_content(namespace, key[1], iso(now)) is not None):
                duplicates += 1
                continue
            if memory_id is not None and memory_id in seen_ids:
                # An earlier item of this import claimed the id with other content: both are
                # kept, this one under an id derived from the id and its content.
                memory_id = twin_id(memory_id, content)
                data = _with_id(data, memory_id)
                meta = {**meta, "id": memory_id}
            if memory_id is not None and (memory_id in seen_ids or self.index.by_id(memory_id, iso(now)) is not None):
                duplicates += 1  # an older copy of a live memory: a second file would claim its id
                continue
            seen.add(key)
            if memory_id is not None:
                seen_ids.add(memory_id)
            rel = import_path(self.store, item.get("path"), meta, content, now)
            folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
            if folder and folder not in plain:
                plain[folder] = self._plain_folder(folder)
            if folder and not plain[folder]:
                raise InvalidInput(f"{where}: {folder}/ in the vault is (or goes through) a symlink; imports are not "
                                   "written through symlinks. Replace it with a real folder. Nothing was imported.")
            plans.append((rel, data))
        return plans, duplicates, expired

    def _staging(self) -> Staging:
        return Staging(self.store, self._replace_imported)

    def finish_interrupted_import(self) -> int:
        """An import a crash interrupted: finished if it was fully staged, else dropped."""
        with self._writing():
            published = self._staging().recover()
            if published:
                with self._index_write() as conn:
                    for rel in published:
                        self._refresh(conn, rel, None)
        return len(published)

    def gc(self, older_than_days: float = TRASH_DAYS) -> GcResult:
        """Empty the trash of what the tool put there longer than ``older_than_days`` ago.

        Only the tool's own entries go (``.trash/`` is also Obsidian's trash: a note a
        person deleted there is theirs), and only while they hold the bytes the tool put
        there."""
        if not isinstance(older_than_days, (int, float)) or older_than_days < 0:
            raise InvalidInput("older_than_days must be 0 or more.")
        with self._writing():
            moved = self.sweep_expired()
            removed, kept, refused = self.store.trash.purge(dt.timedelta(days=older_than_days), self.now())
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
        with self._writing():
            entry = self.store.trash.find(key)
            if entry is None:
                refused = self.store.trash.find_refused(key)
                if refused is None:
                    raise NotFound(key)
                # The ledger is a file in the vault: a sync tool or a pull can bring any line.
                raise PathRefused(f"The trash ledger's line for {key!r} ({refused[0].record}) {refused[1]}; nothing "
                                  "was restored. `agent-memory doctor` lists it, and can apply it if it is yours.")
            try:
                confine.memory_path(self.root, entry.source)
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
            with self._index_write() as conn:
                self._refresh(conn, entry.source, None)
            row = self.index.by_path(entry.source)
        return RestoreResult(path=entry.source, id=row["id"] if row else entry.id, restored_from=entry.trash,
                             reason=entry.reason)


def _with_id(data: bytes, memory_id: str) -> bytes:
    """A file's bytes with its ``id`` set to ``memory_id`` (only that key rewritten)."""
    text = data.decode("utf-8")
    return patch(text, {"id": memory_id}).encode("utf-8")
