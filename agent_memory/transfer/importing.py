"""The vault's part of an import: every item checked and its file computed before
anything is written, for this tool's export and items made by hand (``plan_import``),
and for another memory server's data imported again and again (``plan_sync``): new
memories, and the ones it gave before brought up to date in place.

An importer's items (``importers/``) carry ids derived from the source's own keys
(entity name, hash, row id). A memory with such an id already in the vault, or the
vault's own file an item was read from (AgentMemory's folder may be the vault itself),
is updated through the same checked swap as every tool edit: only the keys that change
are rewritten, unknown keys and untouched body bytes stay, and a replaced body's old
bytes go to the trash. Links name their target by id, so they resolve to the target's
file in this batch or in the vault, whichever batch brought it. New files and updates
are staged together (``disk/staging.py``): all or nothing, even across a crash.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from ..note import parse
from ..note.parse import Note, content_hash
from ..note.patch import patch
from ..note.render import render_front_matter, render_new, to_utc
from ..note.split import split
from .items import (IMPORT_BASE, as_list, exported_file, exported_front_matter, import_path, link_fields, new_fields,
                    own_id, plain, resync, source_digest, title_in_bound, twin_id)
from ..clock import iso
from ..errors import InvalidInput, NotFound, SavedMeanwhile
from ..index.db import Index
from ..index.rows import link_key
from .. import limits
from ..limits import MAX_FILE_BYTES, check_content, check_text
from ..disk.layout import is_memory_path
from ..disk.staging import StagedFile
from ..disk.store import Store
from ..settings import Settings

_NOT_IN_LINK = set("[]|#^\n")


@dataclasses.dataclass
class _Entry:
    """One item of the batch, checked: what it is and where it goes."""

    where: str
    item: dict[str, Any]
    meta: dict[str, Any]
    content: str | None
    rel: str
    existing: tuple[bytes, Note] | None  # the file it updates, as read


class _Checked(NamedTuple):
    """One item of ``plan_import``, checked: its fields, content and file's bytes."""

    where: str
    rel: str  # where its file goes: its own path (an export's) where that is safe, else by date (``import_path``)
    meta: dict[str, Any]
    namespace: str
    content: str
    hash: str
    data: bytes
    memory_id: str | None
    by_id: bool  # an importer's entity: told apart by its id (name), not by its content


@dataclasses.dataclass
class SyncPlan:
    """The files an import writes and its counts."""

    files: list[StagedFile] = dataclasses.field(default_factory=list)
    unchanged: int = 0
    duplicates: int = 0
    expired: int = 0
    links: int = 0
    kept: int = 0  # memories a person edited since the last import: theirs stand, the source's changes are not applied
    forgotten: int = 0  # memories forgotten here since an earlier import: not brought back


def _twin(item: dict[str, Any], claimed: dict[str, str]) -> dict[str, Any]:
    """The item, under an id derived from its id and content (``transfer.twin_id``) when an
    earlier item of the batch claimed that id with other content: both are kept."""
    memory_id = own_id(item)
    content = item.get("content")
    if memory_id is None or not isinstance(content, str) or item.get("placeholder"):
        return item
    first = claimed.setdefault(memory_id, content)
    if plain(first) == plain(content):
        return item
    return {**item, "id": twin_id(memory_id, content)}


class ImportTarget(Protocol):
    """What an import needs of the open vault (``vault.core.Core`` is one)."""

    @property
    def root(self) -> Path: ...
    @property
    def store(self) -> Store: ...
    @property
    def index(self) -> Index: ...
    def settled(self, rel: str) -> bytes: ...
    @property
    def settings(self) -> Settings: ...
    def guard_credentials(self, fields: dict[str, str], already: str = "",
                          settings: Settings | None = None) -> list[str]: ...
    def now(self) -> dt.datetime: ...


class Importing:
    """The vault's part of an import: every item checked and its file computed before
    anything is written (``plan_import`` for this tool's export and items made by hand,
    ``plan_sync`` for another server's data), and an update put in place only over the
    bytes it was computed from (``replace_imported``)."""

    def __init__(self, vault: ImportTarget) -> None:
        self.vault = vault

    def plan_import(self, items: list[Any], now: dt.datetime) -> tuple[list[StagedFile], int, int]:
        """Every item checked and its file computed, before anything is written:
        (files, duplicates, expired). The vault is asked once for the whole batch which
        contents and ids it holds already, not once an item."""
        settings = self.vault.settings
        checked = [self._import_item(n, item, now, settings) for n, item in enumerate(items)]
        live = [c for c in checked if c is not None]
        held = self.vault.index.live_contents([(c.namespace, c.hash) for c in live], iso(now))
        held_ids = self.vault.index.live_ids([c.memory_id for c in live if c.memory_id is not None], iso(now))
        plans: list[StagedFile] = []
        seen: set[tuple[str, str]] = set()
        seen_ids: set[str] = set()
        plain: dict[str, bool] = {}  # folders checked once per import here; publishing checks each again
        expired, duplicates = len(items) - len(live), 0
        for c in live:
            key = (c.namespace, c.hash)
            if not c.by_id and (key in seen or key in held):
                duplicates += 1
                continue
            memory_id, data, meta = c.memory_id, c.data, c.meta
            if memory_id is not None and memory_id in seen_ids:
                # An earlier item of this import claimed the id with other content: both are
                # kept, this one under an id derived from the id and its content.
                memory_id = twin_id(memory_id, c.content)
                data = _with_id(data, memory_id)
                meta = {**meta, "id": memory_id}
                if memory_id in seen_ids or self.vault.index.by_id(memory_id, iso(now)) is not None:
                    duplicates += 1
                    continue
            elif memory_id is not None and memory_id in held_ids:
                duplicates += 1  # an older copy of a live memory: a second file would claim its id
                continue
            seen.add(key)
            if memory_id is not None:
                seen_ids.add(memory_id)
            rel = c.rel
            folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
            if folder and folder not in plain:
                plain[folder] = self.plain_folder(folder)
            if folder and not plain[folder]:
                raise InvalidInput(f"{c.where}: {folder}/ in the vault is (or goes through) a symlink; imports are "
                                   "not written through symlinks. Replace it with a real folder. Nothing was imported.")
            plans.append(StagedFile(rel, data))
        return plans, duplicates, expired

    def _import_item(self, n: int, item: Any, now: dt.datetime, settings: Settings) -> _Checked | None:
        """One item of ``plan_import`` checked and its file's bytes computed; None when it
        has expired already."""
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
                self.vault.guard_credentials({"the file text": item["raw"]}, settings=settings)
            else:
                if "front_matter" not in item:  # a hand-made item {content, namespace, tags, title, source, ...}
                    item = title_in_bound(item)
                content = check_content(item.get("content"))
                if "front_matter" in item:  # an export: its front matter is the file's, as written
                    meta, namespace = exported_front_matter(item["front_matter"])
                    content = item["content"]  # byte for byte: export -> import -> export is stable
                    data = render_front_matter(meta, content).encode("utf-8")
                else:
                    meta = new_fields(item, now)
                    namespace = meta["namespace"]
                    data = render_new(meta, content).encode("utf-8")  # the file remember would write
                written = meta.get("expires")
                expires = None if written in (None, "") else to_utc(written)
                memory_id = own_id(meta)
                self.vault.guard_credentials({"the content": content,
                                              "the front matter": json.dumps(meta, default=str)}, settings=settings)
            readable(data)
        except (InvalidInput, ValueError) as exc:  # the same kind of error, naming the item
            kind = type(exc) if isinstance(exc, InvalidInput) else InvalidInput
            raise kind(f"{where}: {exc} Nothing was imported.") from exc
        if expires is not None and expires <= iso(now):
            return None
        by_id = item.get("unique_by") == "id" and memory_id is not None  # an importer's: entities are told apart by name
        # Its path now, right after the guard scanned its content: naming the file asks
        # for the same scan, which ``find_credentials`` keeps for the last few texts.
        rel = import_path(self.vault.store, item.get("path"), meta, content, now)
        return _Checked(where, rel, meta, namespace, content, content_hash(content), data, memory_id, by_id)

    def plan_sync(self, items: list[Any], now: dt.datetime) -> SyncPlan:
        """Check every item and compute every file, before anything is written."""
        plan = SyncPlan()
        entries: dict[str, _Entry] = {}  # by id
        twins: dict[str, str] = {}  # an item skipped as a duplicate's id -> the id holding its content
        seen: dict[tuple[str, str], str] = {}
        taken: set[str] = set()
        updating: dict[str, str] = {}  # a vault file an item updates -> the item
        forgotten = {e.id for e in self.vault.store.trash.entries() if e.reason == "forgotten"}  # by a tool or a person
        claimed: dict[str, str] = {}  # an id -> the content of the first item that claimed it
        for n, item in enumerate(items):
            where = f"Item {n}"
            if not isinstance(item, dict):
                raise InvalidInput(f"{where} is not an object; nothing was imported.")
            item = _twin(item, claimed)
            try:
                entry = self._sync_entry(where, item, now)
            except (InvalidInput, ValueError) as exc:
                kind = type(exc) if isinstance(exc, InvalidInput) else InvalidInput
                raise kind(f"{where}: {exc} Nothing was imported.") from exc
            if entry is None:  # a placeholder (links only) for a memory that is not here
                continue
            expires = entry.meta.get("expires")
            if entry.existing is None and expires is not None and expires <= iso(now):
                plan.expired += 1
                continue
            memory_id = entry.meta["id"]
            if entry.existing is None and memory_id in forgotten:
                plan.forgotten += 1  # forgotten here: an import does not bring it back (restore does)
                continue
            if memory_id in entries:
                plan.duplicates += 1
                continue
            if entry.existing is None and entry.item.get("unique_by") != "id":
                key = (entry.meta["namespace"], content_hash(entry.content or ""))
                twin = seen.get(key)
                if twin is None:
                    row = self.vault.index.find_content(key[0], key[1], iso(now))
                    twin = row["id"] if row is not None else None
                if twin is not None:
                    twins[memory_id] = twin
                    plan.duplicates += 1
                    continue
                seen[key] = memory_id
            if entry.existing is None:
                entry.rel = self.free_path(entry.rel, taken)
            else:
                other = updating.setdefault(entry.rel, where)
                if other != where:  # one file, two memories of the source: which one it is would be a guess
                    raise InvalidInput(f"{other} and {where} both name the file {entry.rel}; remove one of them from "
                                       "the source, then import again. Nothing was imported.")
            entries[memory_id] = entry
        texts: dict[str, str | None] = {}
        new_paths: dict[str, set[str]] = {}  # the new files by name (as a wikilink compares it)
        for entry in entries.values():
            if entry.existing is None:
                new_paths.setdefault(link_key(entry.rel.rsplit("/", 1)[-1]), set()).add(entry.rel)

        def link_text(target: Any) -> str | None:
            if isinstance(target, str):
                return target
            if not isinstance(target, dict):
                raise InvalidInput(f"a link target must be a note name or {{id, name}}; got {target!r}.")
            wanted = target.get("id")
            if not isinstance(wanted, str):
                return target.get("name") or None
            wanted = twins.get(wanted, wanted)
            if wanted not in texts:
                texts[wanted] = self._link_to(wanted, entries, new_paths, now)
            return texts[wanted] or target.get("name") or None

        for entry in entries.values():
            try:
                self._render(entry, link_text, plan, now)
            except (InvalidInput, ValueError) as exc:
                raise InvalidInput(f"{entry.where}: {exc} Nothing was imported.") from exc
        return plan

    def _sync_entry(self, where: str, item: dict[str, Any], now: dt.datetime) -> _Entry | None:
        """The item checked: the file it updates (adopted, or by id), or where a new one goes."""
        existing = self._adopted(item)
        memory_id = own_id(item)
        if existing is None and memory_id is not None:
            row = self.vault.index.by_id(memory_id, iso(now))
            if row is not None:
                existing = self.readable(row["path"])
        if item.get("placeholder"):  # only there to carry links to a memory another batch brought
            if existing is not None:
                rel, data, note = existing
                links_only: dict[str, Any] = {k: item[k] for k in ("links", "relation_types") if k in item}
                return _Entry(where, links_only, {"id": note.id}, None, rel, (data, note))
            if item.get("content") in (None, ""):
                return None
        item = title_in_bound(item)
        content = check_content(item.get("content"))  # type: ignore[arg-type]
        meta = new_fields({k: v for k, v in item.items() if k not in ("links", "relation_types")}, now)
        if existing is not None:
            rel, data, note = existing
            if note.own_id:
                meta["id"] = note.id  # an adopted file that already had an id of its own keeps it
            self.vault.guard_credentials({"the content": content, "the front matter": json.dumps(meta, default=str)},
                                   already=data.decode("utf-8", "replace"))
            return _Entry(where, item, meta, content, rel, (data, note))
        self.vault.guard_credentials({"the content": content, "the front matter": json.dumps(meta, default=str)})
        rel = import_path(self.vault.store, item.get("path"), meta, content, now)
        folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
        if folder and not self.plain_folder(folder):
            raise InvalidInput(f"{folder}/ in the vault is (or goes through) a symlink; imports are not "
                               "written through symlinks. Replace it with a real folder.")
        return _Entry(where, item, meta, content, rel, None)

    def _render(self, entry: _Entry, link_text: Any, plan: SyncPlan, now: dt.datetime) -> None:
        """The entry's file: new, or the changes to the one it updates (or nothing)."""
        links = entry.item.get("links") or {}
        if not isinstance(links, dict):
            raise InvalidInput("links must be an object of {relation: [note names]}.")
        resolved: dict[str, list[str]] = {}
        for relation, targets in links.items():
            if not isinstance(targets, list):
                raise InvalidInput(f"links[{relation!r}] must be a list of note names.")
            names = [link_text(t) for t in targets]
            resolved[relation] = [t for t in dict.fromkeys(names) if t and not _NOT_IN_LINK & set(t)]
        fields = {**entry.meta, **link_fields(resolved, entry.item.get("relation_types"))}
        relations = [k for k in fields if k in resolved]
        if entry.existing is None:
            fields[IMPORT_BASE] = source_digest(fields, entry.item, entry.content)
            data = readable(render_new(fields, entry.content or "").encode("utf-8"))
            plan.files.append(StagedFile(entry.rel, data))
            plan.links += sum(len(fields[k]) for k in relations)
            return
        old, note = entry.existing
        changes, body, kept = resync(note, fields, entry.item, entry.content, now)
        plan.kept += kept
        if not changes and body is None:
            plan.unchanged += 1
            return
        text = patch(old.decode("utf-8"), changes, body=body)
        plan.files.append(StagedFile(entry.rel, readable(text.encode("utf-8")), old))
        plan.links += sum(len(changes[k]) - len(as_list(note.meta.get(k))) for k in relations if k in changes)

    def _adopted(self, item: dict[str, Any]) -> tuple[str, bytes, Note] | None:
        """The vault's own memory file an item was read from (``origin``), if it is one:
        that file is the memory, to be given its keys in place, never copied into itself."""
        origin = item.get("origin")
        if not isinstance(origin, str) or not origin:
            return None
        try:
            rel = Path(origin).resolve().relative_to(self.vault.store.real_root).as_posix()
        except (OSError, ValueError):
            return None
        if not (is_memory_path(rel) and self.vault.store.inside(rel)):
            return None
        return self.readable(rel)

    def readable(self, rel: str) -> tuple[str, bytes, Note] | None:
        """A memory file's settled bytes and note, refused if a tool must not patch it."""
        try:
            data = self.vault.settled(rel)
        except NotFound:
            return None
        note = parse.parse(data, rel)
        if note.unreadable or note.conflict:
            why = "; ".join(note.problems) if note.unreadable else "it holds git conflict markers"
            raise InvalidInput(f"{rel} is this item's memory but cannot be updated ({why}); fix the file by hand, "
                               "then import again.")
        return rel, data, note

    def plain_folder(self, folder: str) -> bool:
        """Whether the deepest existing part of ``folder`` is a real folder in the vault
        (no symlink on the way): checked before staging, so publishing cannot fail on it."""
        path = self.vault.store.abspath(folder)
        existing = next((p for p in (path, *path.parents) if p.exists() or p == self.vault.root), self.vault.root)
        return existing == self.vault.root or self.vault.store.unaliased(self.vault.store.relpath(existing))

    def free_path(self, rel: str, taken: set[str]) -> str:
        """The first free name for a new file (``-2``, ``-3``… as publishing names them),
        decided now so that links can name it."""
        folder, name = rel.rsplit("/", 1) if "/" in rel else ("", rel)
        slug = name[:-3]
        for n in range(1, 10_000):
            candidate = f"{slug}.md" if n == 1 else f"{slug}-{n}.md"
            full = f"{folder}/{candidate}" if folder else candidate
            if full.casefold() not in taken and not os.path.lexists(self.vault.store.abspath(full)):
                taken.add(full.casefold())
                return full
        raise InvalidInput(f"Too many files named {slug!r} in {folder!r}.")

    def _link_to(self, memory_id: Any, entries: dict[str, _Entry], new_paths: dict[str, set[str]],
                 now: dt.datetime) -> str | None:
        """How a wikilink names the memory with ``memory_id``: its file name, or its path
        where another note has that name; None when no such memory is here."""
        if not isinstance(memory_id, str):
            return None
        if memory_id in entries:
            rel = entries[memory_id].rel
        else:
            row = self.vault.index.by_id(memory_id, iso(now))
            if row is None:
                return None
            rel = row["path"]
        stem = rel.rsplit("/", 1)[-1][:-3]
        key = link_key(stem)
        others = {r["path"] for r in self.vault.index.query("SELECT path FROM memories WHERE name_key = ?", (key,))}
        others |= new_paths.get(key, set())
        return stem if not others - {rel} else rel[:-3]

    def replace_imported(self, rel: str, new: bytes, old: bytes) -> str:
        """Put an import's update in place if the file still holds what was checked;
        returns its path, or "" when a person's save since then stands (or it is gone).
        Also what finishes an update after a crash: one already in place is done."""
        read = self.vault.store.read(rel, MAX_FILE_BYTES)
        if read is None:
            return ""
        if read[0] == new:
            return rel
        if read[0] != old or self.vault.store.read_only(rel):  # a person's save, or their read-only file, stands
            return ""
        before, after = parse.parse(old, rel), parse.parse(new, rel)
        if plain(before.body) != plain(after.body):  # the old body stays restorable
            self.vault.store.trash.copy_in(old, rel, before.id, "replaced", iso(self.vault.now()))
        try:
            self.vault.store.replace_checked(rel, new, old)
        except SavedMeanwhile:
            return ""
        return rel


def readable(data: bytes) -> bytes:
    """``data``, unless its front matter is over ``limits.MAX_FRONT_MATTER``: the tool
    would not read back the properties of a file it wrote (``parse.read_front_matter``)."""
    most = limits.MAX_FRONT_MATTER
    if len(data) > most:  # else its front matter cannot be
        front = split(data.decode("utf-8", "replace")).fm_text
        if front is not None and len(front) > most:
            raise InvalidInput(f"its front matter would be {len(front):,} characters, over the limit of "
                               f"{most:,}; shorten its fields (long text goes in the content).")
    return data


def _with_id(data: bytes, memory_id: str) -> bytes:
    """A file's bytes with its ``id`` set to ``memory_id`` (only that key rewritten)."""
    text = data.decode("utf-8")
    return patch(text, {"id": memory_id}).encode("utf-8")
