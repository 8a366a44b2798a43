"""Writes: remember, update, forget and link, each a change to one file, then its row.

Every write takes the vault's lock, reads the file's current bytes, computes the change
from exactly those bytes and puts the new file in place atomically.
"""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
from collections.abc import Iterable
from typing import Any

from . import graph
from . import note as notes
from .clock import iso
from .core import VaultCore
from .errors import Duplicate, InvalidInput, VersionConflict
from .limits import MAX_TAGS, check_content, check_namespace, check_tags, check_ttl
from .models import ForgetResult, LinkResult, RememberResult, UpdateResult
from .store import dated_folder, make_slug, new_id

_RELATION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")


# Problems note.parse records when it could not read what a file says: a tool changing
# such a file would have to guess, so it is left to a human.
_UNREADABLE = ("broken YAML", "front matter must", "file is not valid")


def _editable(note: notes.Note) -> notes.Note:
    """``note``, unless its front matter could not be read (then InvalidInput)."""
    if any(p.startswith(_UNREADABLE) for p in note.problems):
        raise InvalidInput(
            f"{note.path} has a problem a tool must not guess around ({'; '.join(note.problems)}); "
            "fix the file by hand, then retry."
        )
    return note


# --------------------------------------------------------------------------- locking



class Writes(VaultCore):
    # ------------------------------------------------------------------ writes
    def _twin(self, namespace: str, content_hash: str, now: str, exclude_path: str = "") -> sqlite3.Row | None:
        """The memory already holding this content, checked against its file: a human may
        have edited or deleted it since it was indexed (dedup must not swallow a new fact)."""
        twin = self.index.find_content(namespace, content_hash, now, exclude_path)
        while twin is not None and self.reconcile_path(twin["path"]) != "unchanged":
            twin = self.index.find_content(namespace, content_hash, now, exclude_path)
        return twin

    def remember(
        self,
        content: str,
        namespace: str = "default",
        tags: Iterable[str] | str | None = (),
        title: str = "",
        source: str = "",
        ttl_days: float = 0,
    ) -> RememberResult:
        """Store a fact as a new file, unless the same content is already in the namespace."""
        content = check_content(content)
        namespace = check_namespace(namespace)
        tag_list = check_tags(tags)
        ttl = check_ttl(ttl_days) or 0
        title = (title or "").strip()
        with self._writing():
            now = self.now()
            existing = self._twin(namespace, notes.content_hash(content), iso(now))
            if existing is not None:
                return self._merge_tags_into(existing, tag_list)
            fields = {
                "id": new_id(int(now.timestamp() * 1000)),
                "namespace": namespace,
                "title": title or None,
                "tags": tag_list,
                "created": iso(now),
                "updated": iso(now),
                "expires": iso(now + dt.timedelta(days=ttl)) if ttl else None,
                "source": (source or "").strip() or None,
            }
            data = notes.render_new(fields, content).encode("utf-8")
            slug = make_slug(title or notes.derive_title(content, ""))
            rel = self.store.create(dated_folder(now), slug, data)
            with self.index.transaction() as conn:
                self._refresh(conn, rel, None)
            return RememberResult(memory=self.get(rel), deduplicated=False)

    def _merge_tags_into(self, row: sqlite3.Row, tags: list[str]) -> RememberResult:
        current = row["tags"].split()
        if all(t in current for t in tags):
            return RememberResult(memory=self.get(row["path"]), deduplicated=True)
        result = self.update(row["path"], add_tags=tags)
        return RememberResult(memory=result["memory"], deduplicated=True)

    def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        add_tags: Iterable[str] | str | None = (),
        remove_tags: Iterable[str] | str | None = (),
        namespace: str | None = None,
        source: str | None = None,
        title: str | None = None,
        ttl_days: float | None = None,
        expected_version: str | None = None,
    ) -> UpdateResult:
        """Change a memory in place, rewriting only the front-matter keys that change."""
        new_body = check_content(content) if content is not None else None
        adding, removing = check_tags(add_tags), check_tags(remove_tags)
        new_namespace = check_namespace(namespace) if namespace is not None else None
        ttl = check_ttl(ttl_days)
        with self._writing():
            row, data = self._load(memory_id)
            version = notes.file_version(data)
            if expected_version and expected_version != version:
                raise VersionConflict(memory_id, expected_version, version)
            note = _editable(notes.parse(data, row["path"]))
            now = self.now()
            changes: dict[str, Any] = {}
            tags = _retag(note, adding, removing)
            if tags is not None:
                if len(tags) > MAX_TAGS and len(tags) > len(notes.as_tag_list(note.meta.get("tags"))):
                    raise InvalidInput(
                        f"{row['path']} would have {len(tags)} tags; the limit is {MAX_TAGS} per memory. "
                        "Remove some with remove_tags."
                    )
                changes["tags"] = tags
            if new_namespace is not None and new_namespace != note.namespace:
                changes["namespace"] = new_namespace
            if source is not None and source.strip() != note.source:
                changes["source"] = source.strip() or None
            if title is not None and title.strip() != str(note.meta.get("title") or ""):
                changes["title"] = title.strip() or None
            if ttl is not None:
                expires = iso(now + dt.timedelta(days=ttl)) if ttl else None
                if expires != note.expires:
                    changes["expires"] = expires
            body_changed = new_body is not None and new_body.replace("\r\n", "\n") != note.body.replace("\r\n", "\n").strip("\n")
            if body_changed or "namespace" in changes:
                other = self._twin(
                    changes.get("namespace", note.namespace),
                    notes.content_hash(new_body if body_changed else note.body),
                    iso(now),
                    exclude_path=row["path"],
                )
                if other is not None:
                    raise Duplicate(memory_id, other["id"])
            if not changes and not body_changed:
                return UpdateResult(memory=self._memory(row["path"], data, row), changed=False)
            if "created" not in note.meta:  # its creation time came from the mtime, which this write resets
                changes["created"] = row["created"]
            changes["updated"] = iso(now)
            text = notes.patch(data.decode("utf-8"), changes, body=new_body if body_changed else None)
            self.store.replace(row["path"], text.encode("utf-8"))
            with self.index.transaction() as conn:
                self._refresh(conn, row["path"], None)
            return UpdateResult(memory=self.get(row["path"]), changed=True)

    def forget(self, memory_id: str, expected_version: str | None = None) -> ForgetResult:
        """Move a memory's file to ``.trash/``; nothing is deleted outright."""
        with self._writing():
            row, data = self._load(memory_id)
            version = notes.file_version(data)
            if expected_version and expected_version != version:
                raise VersionConflict(memory_id, expected_version, version)
            trashed = self.store.trash(row["path"])
            with self.index.transaction() as conn:
                self.index.delete(conn, row["path"])
            return ForgetResult(id=row["id"], path=row["path"], title=row["title"], trashed_to=trashed)


    # ------------------------------------------------------------------ links, context, files
    def link(self, memory_id: str, target_id: str, relation: str = "related_to") -> LinkResult:
        """Add ``"[[target]]"`` to the source file's front-matter list ``relation``.

        That is the SPEC §5 form (``related_to: ["[[acme-billing]]"]``), a property
        Obsidian draws as links. Only that key's lines change (not even ``updated``);
        a link that is already there, in any spelling that resolves to the target,
        changes nothing.
        """
        relation = (relation or "").strip()
        if not _RELATION_NAME.fullmatch(relation) or relation in notes.RESERVED_KEYS:
            raise InvalidInput(
                f"Relation {relation!r} cannot be used: give one word such as related_to or depends_on "
                "(letters, digits, '_' or '-', up to 64 characters), not one of the reserved keys "
                f"{', '.join(notes.RESERVED_KEYS)}."
            )
        with self._writing():
            source, data = self._load(memory_id)
            target = self._resolve(target_id)
            if target["path"] == source["path"]:
                raise InvalidInput(f"A memory cannot be linked to itself ({source['path']}); give another target_id.")
            note = _editable(notes.parse(data, source["path"]))
            items = self._relation_items(note.meta.get(relation), source["path"], relation)
            links = graph.Links(self.index, iso(self.now()))
            already = any(
                (found := links.resolve(written, source["path"])) is not None and found["rid"] == target["rid"]
                for item in items
                if isinstance(item, str)
                for written in notes.wikilinks(item)
            )
            wikilink = f"[[{self._link_text(target)}]]"
            if not already:
                text = notes.patch(data.decode("utf-8"), {relation: [*items, wikilink]})
                self.store.replace(source["path"], text.encode("utf-8"))
                with self.index.transaction() as conn:
                    self._refresh(conn, source["path"], None)
                source = self.index.by_path(source["path"]) or source
            return LinkResult(
                source=self._summary(source), target=self._summary(target), relation=relation,
                link=wikilink, changed=not already,
            )

    @staticmethod
    def _relation_items(value: Any, path: str, relation: str) -> list[Any]:
        """What a relation property holds now, as a list to append to."""
        if value is None:
            return []
        if isinstance(value, str):
            return [value]
        if isinstance(value, list) and all(isinstance(v, (str, int, float)) or v is None for v in value):
            return [v for v in value if v is not None]
        raise InvalidInput(
            f"{path} already has a {relation!r} key that is not a list of links; "
            "choose another relation name or edit that key by hand."
        )

    def _link_text(self, target: sqlite3.Row) -> str:
        """The target's file name without ``.md``, or its vault path when the name repeats
        (Obsidian would otherwise resolve the name to another file)."""
        name = target["path"].rsplit("/", 1)[-1][:-3]
        same_name = self.index.query("SELECT count(*) FROM memories WHERE name_key = ?", (target["name_key"],))[0][0]
        text = name if same_name <= 1 else target["path"][:-3]
        if any(c in text for c in "[]|#^"):
            raise InvalidInput(
                f"{target['path']} has a character a wikilink cannot hold ([ ] | # ^); rename the file, then link again."
            )
        return text



def _retag(note: notes.Note, adding: list[str], removing: list[str]) -> list[Any] | None:
    """The front matter's new tags list, or None when it stays as it is.

    Tags nobody asked to change keep their spelling (``Customer`` stays ``Customer``;
    tags compare case-insensitively). A tag written only in the body (``#ops``) cannot
    be removed by rewriting the front matter: that is refused, not silently ignored.
    """
    value = note.meta.get("tags")
    written: list[Any] = []  # one entry per tag, as the reader splits them ("a, b" in a list is two)
    for item in value if isinstance(value, list) else [value]:
        if item is None:
            continue  # an empty list item is no tag (the reader skips it too)
        pieces = notes.split_tags([item]) if isinstance(item, str) else [item]
        written.extend(pieces if isinstance(value, list) else notes.as_tag_list(value))
    names = [notes.normalise_tag(str(t)) for t in written]
    inline_only = [t for t in removing if t not in names and t in note.tags]
    if inline_only:
        raise InvalidInput(
            f"Tag {inline_only[0]!r} is written in the text of {note.path} as #{inline_only[0]}, not in its "
            "tags property; change the content to remove it. Nothing was changed."
        )
    kept = [t for t, name in zip(written, names) if name not in removing]
    added = [t for t in adding if t not in names]
    if kept == written and not added:
        return None
    return kept + added


