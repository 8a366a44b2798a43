"""Writes: remember, update and forget, each a change to one file, then its row.

A person's editor and an agent may change one file at the same instant: every edit takes
the vault's lock, reads the file until its bytes settle, computes the change from exactly
those bytes and swaps it in only if the file still holds them; a save that landed
meanwhile stands. The protocol: docs/design/checked-writes.md.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

from ..trust import credentials
from ..note import parse
from ..note.parse import Note, content_hash, derive_title, file_version, is_tool_id
from ..note import sections
from ..note.patch import edit_body, patch
from ..note.render import render_new
from ..note.tags import as_tag_list, normalise_tag, not_tags, split_tags
from ..clock import iso
from .core import Core
from ..index.reconcile import Examined
from ..errors import AgentMemoryError, Duplicate, InvalidInput, ReadOnlyFile, SavedMeanwhile, VersionConflict
from ..wording import (APPEND, EXPECTED_VERSION, GET_MEMORY, IMPORT_MEMORIES, RECALL, REMEMBER, REPLACE, TAG_EDITS,
                       TTL_DAYS, said)
from ..limits import (MAX_BATCH, MAX_SOURCE, MAX_TAGS, MAX_TITLE, check_content, check_importance, check_namespace,
                     check_short, check_tags, check_text, check_ttl, check_type)
from ..models import (FailedItem, ForgetBatchResult, ForgetResult, ForgottenMemory, Memory, RememberBatchResult,
                      RememberedItem, RememberResult, UpdateResult)
from ..disk.layout import dated_folder, make_slug, new_id

def editable(note: Note) -> Note:
    """``note``, unless a tool must not patch it: its front matter could not be read as
    written (decided by the parser's flag, never by its messages), or it holds git
    conflict markers (SPEC §2: refused until resolved)."""
    if note.unreadable:
        raise InvalidInput(
            f"{note.path} has a problem a tool must not guess around ({'; '.join(note.problems)}); "
            "fix the file by hand, then retry."
        )
    if note.conflict:
        raise InvalidInput(
            f"git conflict in {note.path}: resolve it first (keep one side, remove the "
            "<<<<<<< ======= >>>>>>> lines), then retry."
        )
    return note


class Writes:
    """remember, update, forget; and the checked write every tool edit goes through
    (``checked`` then ``put``: docs/design/checked-writes.md)."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.store = core.store
        self.index = core.index
        self.files = core.files

    # ------------------------------------------------------------------ the checked write
    def checked(self, memory_id: str, expected_version: str | None) -> tuple[sqlite3.Row, bytes, Note]:
        """The memory's row, the settled bytes the change is computed from, and their
        note; refused if the caller's version is not those bytes' or the file is not
        one a tool may patch."""
        row, data = self.core.load(memory_id, settle=True)
        version = file_version(data)
        if expected_version and not seen_version(expected_version, version):
            raise VersionConflict(memory_id, expected_version, version)
        return row, data, editable(parse.parse(data, row["path"]))

    def put(self, rel: str, checked: bytes, text: str) -> sqlite3.Row | None:
        """Swap the new text in if the file still holds ``checked``, then index it (from
        the bytes written and the stat of the file swapped in, when it is still that
        file; else read back) and return its row. If a save landed meanwhile, the index
        takes that save instead and the write is refused."""
        if self.store.read_only(rel):
            raise ReadOnlyFile(rel)
        data = text.encode("utf-8")
        published = None
        try:
            published = self.store.replace_checked(rel, data, checked)
        finally:
            examined: Examined | None
            if published is not None:
                examined = self.files.written(rel, data, published)
            else:
                examined = self.files.examine(rel)  # parsed before the index transaction, not inside it
            with self.files.transaction() as conn:
                self.files.refresh(conn, rel, None, examined)
                if published is not None:
                    self.index.note_tool_write(conn, rel, file_version(data))
        return self.index.by_path(rel)

    def _as_written(self, rel: str, data: bytes, row: sqlite3.Row | None, note: Note | None = None) -> Memory:
        """The memory a write just made, from the bytes it wrote (``note``: parsed already)
        when the index row is of those very bytes (else, a save landed since: read the
        file as it is now)."""
        if row is not None and row["sha256"] == file_version(data):
            return self.core.memory(rel, data, row, note)
        return self.core.get(rel)

    # ------------------------------------------------------------------ writes
    def _twin(self, namespace: str, content_hash: str, now: str, exclude_path: str = "") -> sqlite3.Row | None:
        """The memory already holding this content, checked against its file: a human may
        have edited or deleted it since it was indexed (dedup must not swallow a new fact)."""
        twin = self.index.find_content(namespace, content_hash, now, exclude_path)
        while twin is not None:
            state = self.core.reconciler.reconcile_path(twin["path"])
            if state == "unchanged":
                return twin
            if state == "settling":
                # Empty or half-written: an editor mid-save, or a person who emptied it a
                # moment ago. Its old row is no proof the fact is still written anywhere:
                # store it anew (at worst a copy, if the save writes the same text back).
                return None
            twin = self.index.find_content(namespace, content_hash, now, exclude_path)
        return None

    def remember(
        self,
        content: str,
        namespace: str = "default",
        tags: Iterable[str] | str | None = (),
        title: str = "",
        source: str = "",
        ttl_days: float = 0,
        type: str | None = None,
        importance: float | str | None = None,
    ) -> RememberResult:
        """Store a fact as a new file, unless the same content is already in the namespace.
        ``type`` (free text: fact, decision, lesson...) and ``importance`` (0-10) become
        front-matter keys of the new file."""
        content = check_content(content)
        kind = check_type(type) or None
        weight = None if importance == "" else check_importance(importance)  # "" on a new memory: none
        namespace = check_namespace(namespace)
        tag_list = check_tags(tags)
        ttl = check_ttl(ttl_days) or 0
        title = (check_short(title, "title", MAX_TITLE) or "").strip()
        check_short(source, "source", MAX_SOURCE)
        source = (source or "").strip()
        settings = self.core.settings  # read once for the write: its guard and its folder
        warnings = self.core.guard_credentials({"the content": content, "the title": title, "the source": source,
                                           "the tags": " ".join(tag_list), "the namespace": namespace,
                                           "the type": kind or ""}, settings=settings)
        with self.core.writing():
            now = self.core.now()
            existing = self._twin(namespace, content_hash(content), iso(now))
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
                "source": source or None,
                "type": kind,
                "importance": weight,
            }
            data = render_new(fields, content).encode("utf-8")
            # Never a credential, nor a password's value, in a file name: redacted before the
            # title is derived too (its markdown clean-up can glue "DB_PASSWORD" into one word).
            named = title or derive_title(credentials.redact_for_names(content), "")
            slug = make_slug(named)
            folder = "/".join(p for p in (settings.memories_folder, dated_folder(now)) if p)
            rel, published = self.store.place(None, folder, slug, data)
            row, note = self.files.index_new(rel, data, published)
            result = RememberResult(memory=self._as_written(rel, data, row, note), deduplicated=False)
            if warnings:
                result["warnings"] = warnings
            return result

    def remember_many(self, items: Any) -> RememberBatchResult:
        """Remember each item (``{content, namespace, tags, title, source, ttl_days, type,
        importance}``) on its own, as ``remember`` does one: an item that is refused (empty,
        over a limit, holding a credential, an unknown key) is reported with its reason
        and the others are stored. At most ``MAX_BATCH`` items."""
        if not isinstance(items, (list, tuple)) or not items:
            raise InvalidInput("Give the memories as a list of objects, e.g. [{\"content\": \"ACME deploys on Fridays\"}].")
        if len(items) > MAX_BATCH:
            raise InvalidInput(f"The batch has {len(items):,} items; the limit is {MAX_BATCH}. Send it in parts.")
        results: list[RememberedItem] = []
        for index, item in enumerate(items):
            try:
                result = self.remember(**_remember_fields(item))
            except (AgentMemoryError, OSError) as exc:
                results.append(RememberedItem(index=index, ok=False, error=_reason(exc)))
                continue
            memory = result["memory"]
            done = RememberedItem(index=index, ok=True, id=memory["id"], path=memory["path"], title=memory["title"],
                                  version=memory["version"], deduplicated=result["deduplicated"])
            if result.get("warnings"):
                done["warnings"] = result["warnings"]
            results.append(done)
        stored = [r for r in results if r["ok"]]
        return RememberBatchResult(stored=sum(not r.get("deduplicated") for r in stored),
                                   deduplicated=sum(bool(r.get("deduplicated")) for r in stored),
                                   failed=len(results) - len(stored), results=results)

    def _merge_tags_into(self, row: sqlite3.Row, tags: list[str]) -> RememberResult:
        current = row["tags"].split()
        if all(t in current for t in tags):
            return RememberResult(memory=self.core.get(row["path"]), deduplicated=True)
        if self.store.read_only(row["path"]):  # the fact is stored; a protected file keeps its tags
            return RememberResult(memory=self.core.get(row["path"]), deduplicated=True,
                                  warnings=[f"{row['path']} is read-only, so the new tags were not added to it."])
        result = self.update(row["path"], add_tags=tags)
        return RememberResult(memory=result["memory"], deduplicated=True)

    def update(
        self,
        memory_id: str,
        *,
        content: str | None = None,
        append: str | None = None,
        replace_old: str | None = None,
        replace_new: str | None = None,
        tags: Iterable[str] | str | None = None,
        add_tags: Iterable[str] | str | None = (),
        remove_tags: Iterable[str] | str | None = (),
        namespace: str | None = None,
        source: str | None = None,
        title: str | None = None,
        ttl_days: float | None = None,
        type: str | None = None,
        importance: float | str | None = None,
        expected_version: str | None = None,
        prepend: str | None = None,
        replace_section: str | None = None,
        section_content: str | None = None,
    ) -> UpdateResult:
        """Change a memory in place, rewriting only the front-matter keys that change.

        Replacing the whole body (``content``) or the whole tag set (``tags``) needs the
        version the caller read (``expected_version``): without it a line a person saved
        a moment ago would be overwritten unseen. ``append``, an exact-once ``replace``,
        and tag additions and removals merge, and need none; so does ``prepend``, while
        ``replace_section`` (a heading's section, ``note.sections``) overwrites text the
        caller did not quote, so it needs the version as ``content`` does. A replaced
        body's or section's previous bytes are kept in the trash as a version copy."""
        new_body = check_content(content) if content is not None else None
        for text, what in ((append, "append"), (replace_old, "replace_old"), (replace_new, "replace_new"),
                           (expected_version, "expected_version")):
            check_text(text, what)
        check_short(title, "title", MAX_TITLE)
        check_short(source, "source", MAX_SOURCE)
        if (tags is not None or replace_section is not None) and not expected_version:
            what = "a section" if replace_section is not None else "the whole tag set"
            suggestion = said("pass ", EXPECTED_VERSION, " (from ", GET_MEMORY, " or ", RECALL, "), or use ", APPEND,
                              ", ", REPLACE, ", ", TAG_EDITS, ", which need none.")
            raise InvalidInput(said(f"Replacing {what} needs the version you read: ", *suggestion.parts),
                               operation="update_memory", argument="expected_version", suggestion=suggestion)
        edits = _body_edit(new_body, append, replace_old, replace_new)
        structural = _structural_edit(prepend, replace_section, section_content)
        if structural is not None:
            if edits is not None:
                raise InvalidInput("Give one body edit at a time: prepend or replace_section, or one of content, "
                                   "append, replace_old.")
            edits = structural
        whole_set = check_tags(tags) if tags is not None else None
        adding, removing = check_tags(add_tags), check_tags(remove_tags)
        new_namespace = check_namespace(namespace) if namespace is not None else None
        ttl = check_ttl(ttl_days)
        kind = check_type(type)  # '' removes it
        weight = check_importance(importance)
        with self.core.writing():
            row, data, note = self.checked(memory_id, expected_version)
            if new_body is not None and not expected_version:
                self._over_own_write(row["path"], data)
            if ttl is not None and not is_tool_id(note.id):
                raise InvalidInput(
                    said(f"{row['path']} is a note of yours, not a memory the tool made (its id is not in the tool's "
                         "format), so it never expires; ", TTL_DAYS, " is refused. Set an expiry on a memory from ",
                         REMEMBER, "."), operation="update_memory", argument="ttl_days"
                )
            now = self.core.now()
            changes: dict[str, Any] = {}
            if whole_set is not None:
                current = [normalise_tag(t) for t in as_tag_list(note.meta.get("tags"))]
                adding = [*adding, *(t for t in whole_set if t not in current)]
                removing = [*removing, *(t for t in current if t not in whole_set)]
            new_tags = _retag(note, adding, removing)
            if new_tags is not None:
                if len(new_tags) > MAX_TAGS and len(new_tags) > len(as_tag_list(note.meta.get("tags"))):
                    raise InvalidInput(
                        f"{row['path']} would have {len(new_tags)} tags; the limit is {MAX_TAGS} per memory. "
                        "Remove some with remove_tags."
                    )
                changes["tags"] = new_tags
            if new_namespace is not None and new_namespace != note.namespace:
                changes["namespace"] = new_namespace
            if source is not None and source.strip() != note.source:
                changes["source"] = source.strip() or None
            if title is not None and title.strip() != str(note.meta.get("title") or ""):
                changes["title"] = title.strip() or None
            if kind is not None and kind != note.meta.get("type", ""):
                changes["type"] = kind or None
            if weight == "":  # '' removes it
                if "importance" in note.meta:
                    changes["importance"] = None
            elif weight is not None and (weight != note.meta.get("importance")
                                         or isinstance(note.meta.get("importance"), bool)):
                changes["importance"] = weight
            if ttl is not None:
                expires = iso(now + dt.timedelta(days=ttl)) if ttl else None
                if expires != note.expires:
                    changes["expires"] = expires
            text = data.decode("utf-8")
            edited = edits(text, row["path"]) if edits is not None else text
            body_after = parse.parse(edited.encode("utf-8"), row["path"]).body
            body_changed = _plain(body_after) != _plain(note.body)
            if body_changed:
                check_content(body_after)
            if body_changed or "namespace" in changes:
                other = self._twin(
                    changes.get("namespace", note.namespace), content_hash(body_after), iso(now),
                    exclude_path=row["path"],
                )
                if other is not None:
                    raise Duplicate(memory_id, other["id"])
            if not changes and not body_changed:
                return UpdateResult(memory=self.core.memory(row["path"], data, row), changed=False)
            warnings = self.core.guard_credentials({
                "the content": body_after if body_changed else "",
                "the title": changes.get("title") or "", "the source": changes.get("source") or "",
                "the tags": " ".join(t for t in adding if t not in note.tags),
                "the namespace": changes.get("namespace") or "", "the type": changes.get("type") or "",
            }, already=note.body)
            if "updated" in note.meta:  # a note without one keeps its dates in the index (git, else the file)
                changes["updated"] = iso(now)
            if body_changed and (new_body is not None or replace_section is not None):  # kept before the write: a crash or a full disk
                self.store.trash.copy_in(data, row["path"], row["id"], "replaced", iso(now))  # loses nothing
            written = patch(edited if body_changed else text, changes).encode("utf-8")
            new_row = self.put(row["path"], data, written.decode("utf-8"))
            result = UpdateResult(memory=self._as_written(row["path"], written, new_row), changed=True)
            if warnings:
                result["warnings"] = warnings
            return result

    def _over_own_write(self, rel: str, data: bytes) -> None:
        """A body replaced without the version read (the seeds' one-shot ``update_memory``,
        from a later conversation): only while the file holds exactly the tool's own last
        write to it (whatever session made it); the old bytes go to the trash anyway."""
        version = file_version(data)
        if self.index.last_tool_write(rel) != version:
            raise InvalidInput(
                f"{rel} was changed since this tool last wrote it (by a person or another program), so replacing "
                f"its content needs the version you read: call get_memory first, or pass expected_version={version!r} "
                "(its version now) once you have read it; append and replace_old/replace_new need none."
            )

    def forget(self, memory_id: str, expected_version: str | None = None) -> ForgetResult:
        """Move a memory's file to ``.trash/``; nothing is deleted outright."""
        with self.core.writing():
            row, data = self.core.load(memory_id, settle=True)
            version = file_version(data)
            if expected_version and not seen_version(expected_version, version):
                raise VersionConflict(memory_id, expected_version, version)
            self._not_a_link(row["path"])
            trashed = self._trash_checked(row, version)
            return ForgetResult(id=row["id"], path=row["path"], title=row["title"], trashed_to=trashed)

    def forget_many(self, memory_ids: Iterable[str] | str, expected_version: str | None = None,
                    dry_run: bool = False) -> ForgetBatchResult:
        """Forget one or several memories, each on its own: every id is resolved and its
        file moved to the trash by itself, and one that cannot be (not found, a symlink,
        saved meanwhile, a full disk) is listed in ``failed`` with its reason while the
        others go. With one id its error is raised instead, as ``forget``'s. ``dry_run``
        says what would be forgotten (and what would fail) and changes nothing. A batch
        needs no versions: the trash keeps it all."""
        ids = [memory_ids] if isinstance(memory_ids, str) else list(memory_ids or [])
        if not ids or not all(isinstance(i, str) and i.strip() for i in ids):
            raise InvalidInput("Give the ids (or vault paths) of the memories to forget, e.g. ['01m8r9k34bnrxpbt'].")
        for memory_id in ids:
            check_text(memory_id, "memory id")
        check_text(expected_version, "expected_version")
        if expected_version and len(ids) > 1:
            raise InvalidInput(said(EXPECTED_VERSION, " applies to a single memory; forget several without it "
                                    "(forgotten memories stay restorable in .trash/)."),
                               operation="forget", argument="expected_version")
        done: list[ForgottenMemory] = []
        failed: list[FailedItem] = []
        paths: set[str] = set()
        with self.core.writing():
            for memory_id in dict.fromkeys(ids):  # one id named twice goes once
                try:
                    item = self._forget_one(memory_id, expected_version, dry_run, paths)
                except (AgentMemoryError, OSError) as exc:
                    if len(ids) == 1:
                        raise
                    failed.append(FailedItem(memory_id=memory_id, error=_reason(exc)))
                    continue
                if item is not None:
                    done.append(item)
        result = ForgetBatchResult(dry_run=bool(dry_run), count=len(done), memories=done, failed=failed)
        if len(done) == 1 and not failed:  # its fields at the top too, as a single forget's
            for key in ("id", "path", "title", "trashed_to"):
                if key in done[0]:
                    result[key] = done[0][key]
        return result

    def _forget_one(self, memory_id: str, expected_version: str | None, dry_run: bool,
                    paths: set[str]) -> ForgottenMemory | None:
        """One memory of a forget, checked then moved (None: named already, by its other form)."""
        row, data = self.core.load(memory_id, settle=True)
        version = file_version(data)
        if expected_version and not seen_version(expected_version, version):
            raise VersionConflict(memory_id, expected_version, version)
        self._not_a_link(row["path"])
        if row["path"] in paths:
            return None
        paths.add(row["path"])
        if dry_run:
            return ForgottenMemory(id=row["id"], path=row["path"], title=row["title"])
        trashed = self._trash_checked(row, version)
        return ForgottenMemory(id=row["id"], path=row["path"], title=row["title"], trashed_to=trashed)

    def _not_a_link(self, rel: str) -> None:
        """Forget moves files, not links: a symlink moved into ``.trash/`` would point
        nowhere (it is relative to where it was) and could never be put back."""
        path = self.store.abspath(rel)
        if path.is_symlink():
            raise InvalidInput(f"{rel} is a symlink (to {os.readlink(path)}); forget moves files, not links. Forget "
                               "the file it points to, or remove the link by hand. Nothing was forgotten.")

    def _trash_checked(self, row: sqlite3.Row, version: str) -> str:
        """Move a checked memory's file to the trash and drop its row; a save that landed
        after the check is put back and the forget refused."""
        trashed = self.store.trash.move_in(self.store.abspath(row["path"]), row["path"], row["id"], "forgotten",
                                           iso(self.core.now()))
        if file_version(self.store.abspath(trashed).read_bytes()) != version:
            self._put_back(trashed, row["path"])  # a save landed after the check: it stands
        with self.files.transaction() as conn:
            self.index.delete(conn, row["path"])
        self.store.remove_empty_dated(row["path"])
        return trashed

    def _put_back(self, trashed: str, rel: str) -> None:
        """Undo a forget that moved a save made after the check; refuse the forget."""
        entry = self.store.trash.find(trashed)
        if entry is not None:
            try:
                self.store.trash.take_out(entry, self.store.abspath(rel))
            except FileExistsError:  # saved yet again meanwhile: the older save stays restorable
                pass
        with self.files.transaction() as conn:
            self.files.refresh(conn, rel, None)
        raise SavedMeanwhile(rel)


_VERSION_START = re.compile(r"[0-9a-f]{12,64}")


def seen_version(expected: str, version: str) -> bool:
    """Whether the version a caller saw is the file's ``version``: the whole sha256, or
    its first 12 characters or more, as ``agent-memory show`` prints it (git's short
    hashes); those 48 bits tell a save that landed meanwhile as surely. Text that is no
    version at all is refused as such, not reported as a save that landed."""
    if not _VERSION_START.fullmatch(expected.lower()):
        raise InvalidInput(said(f"{expected!r} is not a version: ", EXPECTED_VERSION, " takes the version ", GET_MEMORY,
                                " gives (64 hex characters, or its first 12 or more)."))
    return version.startswith(expected.lower())


_REMEMBER_KEYS = ("content", "namespace", "tags", "title", "source", "ttl_days", "type", "importance")


def _remember_fields(item: Any) -> dict[str, Any]:
    """One batch item as ``remember``'s arguments; anything else is refused by name."""
    if not isinstance(item, dict):
        raise InvalidInput(f"Each item must be an object like {{\"content\": \"...\"}}; got {type(item).__name__}.")
    unknown = [str(key) for key in item if key not in _REMEMBER_KEYS]
    if unknown:
        # An export's items carry path and raw: an import reads them back, keeping both.
        back = (" It looks like an export's item: ", IMPORT_MEMORIES, " reads an export back.") \
            if {"raw", "path"} <= set(item) else ()
        raise InvalidInput(said(f"Unknown key {unknown[0]!r}; an item takes {', '.join(_REMEMBER_KEYS)}.", *back))
    if "content" not in item:
        raise InvalidInput("The item has no content; give the fact to remember as text.")
    fields = {key: value for key, value in item.items() if value is not None}
    fields.setdefault("namespace", "default")
    for key in ("content", "namespace", "title", "source"):
        if not isinstance(fields.get(key, ""), str):
            raise InvalidInput(f"{key} must be text; got {fields[key]!r}.")
    return fields


def _reason(exc: BaseException) -> str:
    """Why one item of a batch failed, in a sentence (a library error says what to do,
    kept as its ``Said`` so the CLI names its own commands in it)."""
    if isinstance(exc, OSError) and not isinstance(exc, AgentMemoryError):
        return f"The file could not be moved ({exc.strerror or exc}); nothing was changed for it. Retry."
    return exc.message if isinstance(exc, AgentMemoryError) and exc.message else str(exc)


def _retag(note: Note, adding: list[str], removing: list[str]) -> list[Any] | None:
    """The front matter's new tags list, or None when it stays as it is.

    Tags nobody asked to change keep their spelling (``Customer`` stays ``Customer``;
    tags compare case-insensitively). A tag written only in the body (``#ops``) cannot
    be removed by rewriting the front matter: that is refused, not silently ignored.
    """
    value = note.meta.get("tags")
    if not_tags(value):  # rewritten as a list, it would become the text of its Python form
        raise InvalidInput(
            f"The tags property of {note.path} holds a mapping or a nested list, which is no tag; changing its tags "
            "would rewrite what it holds. Make it a list of words by hand (tags: [a, b]). Nothing was changed."
        )
    written: list[Any] = []  # one entry per tag, as the reader splits them ("a, b" in a list is two)
    for item in value if isinstance(value, list) else [value]:
        if item is None:
            continue  # an empty list item is no tag (the reader skips it too)
        pieces = split_tags([item]) if isinstance(item, str) else [item]
        written.extend(pieces if isinstance(value, list) else as_tag_list(value))
    names = [normalise_tag(str(t)) for t in written]
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




def _plain(body: str) -> str:
    """A body as compared for "did it change": line endings and outer blank lines aside."""
    return body.replace("\r\n", "\n").strip("\n")


def _structural_edit(prepend: str | None, section: str | None,
                     content: str | None) -> Callable[[str, str], str] | None:
    """A body edit by structure (``note.sections``) as ``edit(text, path) -> text``; None
    when none is asked."""
    for text, what in ((prepend, "prepend"), (section, "replace_section"), (content, "section_content")):
        check_text(text, what)
    if content is not None and section is None:
        raise InvalidInput("section_content needs replace_section: the heading whose section it replaces.")
    if prepend is not None and section is not None:
        raise InvalidInput("Give one body edit at a time; got prepend and replace_section.")
    if prepend is not None:
        if not prepend.strip():
            raise InvalidInput("prepend is empty; give the text to add at the start of the content.")
        return lambda text, _path: sections.prepend(text, prepend)
    if section is None:
        return None
    if content is None:
        raise InvalidInput("replace_section needs section_content: what the section should hold ('' empties it).")
    if content.strip():
        check_content(content)

    def replace(text: str, path: str) -> str:
        try:
            return sections.replace_section(text, section, content)
        except ValueError as exc:
            raise InvalidInput(said(f"In {path}, {exc}. Read it with ", GET_MEMORY, " to see its headings.")) from exc

    return replace


def _body_edit(content: str | None, append: str | None, old: str | None,
               new: str | None) -> Callable[[str, str], str] | None:
    """The one body edit asked for, as ``edit(text, path) -> text``; None when none is.
    More than one at once is refused: their order would be a guess."""
    asked = [name for name, value in (("content", content), ("append", append), ("replace_old", old)) if value is not None]
    if new is not None and old is None:
        raise InvalidInput("replace_new needs replace_old: the exact text to replace (it must occur once).")
    if len(asked) > 1:
        raise InvalidInput(f"Give one body edit at a time; got {' and '.join(asked)}.")
    if content is not None:
        return lambda text, _path: patch(text, {}, body=content)
    if append is not None:
        if not append.strip():
            raise InvalidInput("append is empty; give the text to add at the end of the content.")
        return lambda text, _path: edit_body(text, append=append)
    if old is not None:
        if not old:
            raise InvalidInput("replace_old is empty; give the exact text to replace.")

        def replace(text: str, path: str) -> str:
            try:
                return edit_body(text, old=old, new=new or "")
            except ValueError as exc:
                raise InvalidInput(said(f"In {path}, {exc}. Read it with ", GET_MEMORY, " and quote a unique passage."),
                                   argument="replace_old") from exc

        return replace
    return None
