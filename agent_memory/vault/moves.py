"""Renaming or moving a note and rewriting every wikilink and markdown link to it, as
Obsidian does: ``move``.

All or nothing, even across a crash: the new texts are computed from settled bytes under
the vault's lock, a journal in ``.index/move/`` is written before any file changes, and a
save that lands meanwhile undoes the move (the save stands). Nothing is ever overwritten.
The protocol: docs/design/move-journal.md.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import shutil
import sqlite3
import stat
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

from ..recall import graph
from ..trust import confine, credentials
from ..note import parse
from ..note.links import retarget_links, retarget_markdown_links
from ..note.parse import Note, file_version
from ..clock import iso
from .core import Core
from ..errors import InvalidInput, NotFound, PathRefused, ReadOnlyFile, SavedMeanwhile, VaultError, disk_error
from ..index.rows import link_key
from ..limits import check_names, check_text
from ..models import MoveResult, Rewritten
from ..trust.register import digest, refusal, set_aside
from ..disk.nofollow import load_json, read_record
from ..disk import locking
from ..disk.layout import INDEX_DIRNAME, encodable
from .writes import editable

MOVE_DIRNAME = "move"
MANIFEST = "manifest.json"
DONE = "done"  # in the journal once every file is in place
# Characters Obsidian refuses in a note name, or that a wikilink cannot hold.
_NAME_REFUSED = set('[]|#^\\*"<>:?')


@dataclass
class _File:
    """One file of the move: where it is, the bytes checked, the bytes to write."""

    path: str
    before: bytes
    after: bytes
    links: int


class Moves:
    """move, and undoing a move a crash interrupted (its journal in ``.index/move/``).

    ``reconcile`` is the vault's whole reconcile: a move first folds in the links a
    person typed since the last look."""

    def __init__(self, core: Core, *, reconcile: Callable[[], object]) -> None:
        self.core = core
        self.root = core.root
        self.store = core.store
        self.index = core.index
        self.files = core.files
        self._reconcile = reconcile
        self._moving = False  # this process is inside ``move`` (its journal is no crash's)

    def move(self, memory_id: str, new_path: str) -> MoveResult:
        """Rename or move a note to ``new_path`` (vault-relative; ``.md`` is added if
        missing; a path ending in ``/`` or naming a folder keeps the file name) and
        rewrite every wikilink and markdown link to it. Refused if the new path is taken,
        or names what the file system cannot hold (over 255 bytes, ``.md`` included)."""
        if isinstance(new_path, str):
            check_names(new_path.strip(), "new_path", suffix=".md")
        check_text(new_path, "new_path")
        with self.core.writing():
            self._reconcile()  # links a person typed since the last look are rewritten too
            row = self.core.resolve(memory_id)
            old = row["path"]
            new = self._new_place(old, new_path)
            moved, linking = self._plan(row, new)
            self._moving = True
            try:
                self._carry_out(old, new, moved, linking)
                self.core.store.remove_empty_dated(old)
            finally:
                self._moving = False
                with self.files.transaction() as conn:
                    for rel in (old, new, *(f.path for f in linking)):
                        self.files.refresh(conn, rel, None)
            memory = self.index.by_path(new)
            if memory is None:  # its file vanished the instant it was made
                raise NotFound(new)
            return MoveResult(
                old_id=row["id"], new_id=memory["id"], old_path=old, new_path=new,
                memory=self.core.summary(memory),
                rewritten=[Rewritten(path=f.path, links=f.links) for f in linking if f.links]
                + ([Rewritten(path=new, links=moved.links)] if moved.links else []),
            )

    # ------------------------------------------------------------------ deciding
    def _new_place(self, old: str, wanted: str) -> str:
        """The vault-relative path the note goes to, checked: a memory path (no
        dot-folders, ``..`` or absolute paths), a name a wikilink can hold, free, and
        no symlinked folder on the way."""
        rel = (wanted or "").strip().replace("\\", "/")
        while rel.startswith("./"):
            rel = rel[2:]
        if not rel:
            raise InvalidInput("new_path is empty; give the note's new vault-relative path, e.g. people/priya.md.")
        if rel.endswith("/") or (self.root / rel).is_dir():
            rel = rel.rstrip("/") + "/" + old.rsplit("/", 1)[-1]
        if not rel.endswith(".md"):
            rel += ".md"
        name = rel.rsplit("/", 1)[-1][:-3]
        problem = confine.memory_problem(rel)
        if problem or not encodable(rel):
            raise InvalidInput(
                f"{wanted!r} is not a place for a note ({problem or 'not UTF-8'}): give a vault-relative path of a "
                ".md file outside hidden folders (no '..', no absolute path)."
            )
        refused = sorted(_NAME_REFUSED & set(name))
        if refused or not name.strip() or name != name.strip():
            raise InvalidInput(
                f"{name!r} cannot be a note name: wikilinks and Obsidian refuse {' '.join(refused) or 'outer spaces'}; "
                "choose another name."
            )
        credentials.refuse_in_name(rel, self.core.settings)  # not even in warn mode
        if rel == old:
            raise InvalidInput(f"{old} is already there; give another path.")
        if os.path.lexists(self.root / rel):
            raise InvalidInput(
                f"{rel} already exists; mv never overwrites a file. Choose another name, or move that file first."
            )
        folder = (self.root / rel).parent
        existing = next(f for f in (folder, *folder.parents) if f.exists())
        if existing != self.root and not self.store.unaliased(self.store.relpath(existing)):
            raise VaultError(
                f"{self.store.relpath(existing)}/ in the vault is (or goes through) a symlink; notes are not moved "
                "through symlinks. Replace it with a real folder and retry."
            )
        return rel

    def _plan(self, row: sqlite3.Row, new: str) -> tuple[_File, list[_File]]:
        """The moved file and each linking file, with the bytes checked and the new
        text, computed before anything is written."""
        old = row["path"]
        links = graph.LinkGraph(self.index, iso(self.core.now()))
        others = self.index.query(
            "SELECT count(*) FROM memories WHERE name_key = ? AND path != ?",
            (link_key(new.rsplit("/", 1)[-1]), old),
        )[0][0]
        by_path = others > 0  # the name is taken elsewhere: links name the path, as Obsidian's would

        def rewrite_in(source: str, moved_to: str | None = None) -> Callable[[str], str | None]:
            def new_target(written: str) -> str | None:
                found = links.resolve(written, source)
                if found is not None and found["rid"] != row["rid"] and moved_to is not None:
                    # The moved note's own link, found nearest first: from its new folder the
                    # same name may reach another note (a namesake there). Name this one's path.
                    again = links.resolve(written, moved_to)
                    if again is None or again["rid"] != found["rid"]:
                        return str(found["path"])[:-3] + (written[-3:] if written.casefold().endswith(".md") else "")
                if found is None or found["rid"] != row["rid"]:
                    return None
                suffix = written[-3:] if written.casefold().endswith(".md") else ""
                return (new[:-3] if by_path or "/" in written else new.rsplit("/", 1)[-1][:-3]) + suffix
            return new_target

        def moved_note(source: str, moved_to: str | None = None) -> Callable[[str], str | None]:
            def new_path(target: str) -> str | None:  # a markdown link's note, as a vault path
                found = links.resolve(target, source)
                if found is not None and found["rid"] == row["rid"]:
                    return new
                if found is not None and moved_to is not None:
                    # The moved note's own link, found nearest first: from its new folder the
                    # same text may reach another note (a namesake there). Keep it on this one.
                    again = links.resolve(target, moved_to)
                    if again is None or again["rid"] != found["rid"]:
                        return str(found["path"])
                return None
            return new_path

        sources = sorted({src["path"] for _relation, src in links.incoming(row, 10**9)[0]} - {old})
        linking: list[_File] = []
        for path in sources:
            before = self.core.settled(path)
            note = editable(parse.parse(before, path))
            after, count = retarget_links(before.decode("utf-8"), rewrite_in(path))
            after, markdown = retarget_markdown_links(after, path, moved_note(path))
            count += markdown
            if count:
                _check_rewrite(note, after, path)
                if self.store.read_only(path):  # all or nothing: a protected note's links stay as they are
                    raise ReadOnlyFile(path)
                linking.append(_File(path, before, after.encode("utf-8"), count))
        before = self.core.settled(old)
        after_text, count = retarget_links(before.decode("utf-8", errors="replace"), rewrite_in(old, new))
        # Its own ./ and ../ links are read from its new folder after the move.
        after_text, markdown = retarget_markdown_links(after_text, old, moved_note(old, new), moved_to=new)
        count += markdown
        if count:  # the note links to itself, or relatively to others: that is an edit of it too
            note = editable(parse.parse(before, old))
            _check_rewrite(note, after_text, old)
            if self.store.read_only(old):
                raise ReadOnlyFile(old)
        return _File(old, before, after_text.encode("utf-8") if count else before, count), linking

    # ------------------------------------------------------------------ doing
    def _carry_out(self, old: str, new: str, moved: _File, linking: list[_File]) -> None:
        journal = self._journal(old, new, moved, linking)
        try:
            self._link_new_name(old, new, moved.before)
            if moved.after != moved.before:
                self.store.replace_checked(new, moved.after, moved.before)
            for f in linking:
                self.store.replace_checked(f.path, f.after, f.before)
            self._retire_old_name(old, new, moved.before)
        except BaseException:
            self._undo(journal)
            raise
        # Done: from here a crash leaves the move as it is. Undoing it would take the note
        # from its new place for a spare copy, and a new file under the old name (a person's,
        # before the next open) for the original.
        os.close(os.open(journal / DONE, os.O_WRONLY | os.O_CREAT, 0o644))
        self._forget_record(raw_manifest(journal))
        shutil.rmtree(journal, ignore_errors=True)
        self.store.changed(new, "moved", old)

    def _journal(self, old: str, new: str, moved: _File, linking: list[_File]) -> Path:
        """The originals and a manifest in ``.index/move/``: what undoing needs after a crash.
        The manifest is entered in this user's register before it is written."""
        folder = self.store.control_dir / MOVE_DIRNAME
        if folder.exists():
            raise VaultError(f"An earlier move is still recorded in {folder}; reopen the vault to undo it.")
        folder.mkdir(parents=True)
        try:
            entries = []
            for n, f in enumerate([moved, *linking]):
                tmp = self.store.write_temp(folder, f.before)
                os.replace(tmp, folder / f"{n}.md")
                entries.append({"path": f.path, "before": file_version(f.before),
                                "after": file_version(f.after), "copy": f"{n}.md"})
            manifest = json.dumps({"old": old, "new": new, "files": entries, "record": secrets.token_hex(8)})
            data = manifest.encode("utf-8")
            self.store.register.enter("move", digest(data))
            tmp = self.store.write_temp(folder, data)
            os.replace(tmp, folder / MANIFEST)  # the commit point: from here a crash is undone
            self.store.fsync_dir(folder)
        except BaseException:
            if (folder / MANIFEST).exists():
                self._undo(folder)
            else:
                shutil.rmtree(folder, ignore_errors=True)  # nothing of it reached the vault
                self._forget_record(data if "data" in locals() else None)
            raise
        return folder

    def _forget_record(self, data: bytes | None) -> None:
        if data is not None:
            self.store.register.done("move", digest(data))

    def _link_new_name(self, old: str, new: str, checked: bytes) -> None:
        """Give the file its new name: a hard link (the same file under two names, never
        over an existing one), or a copy where the file system has no hard links."""
        source, target = self.store.abspath(old), self.store.abspath(new)
        made = self.store.folders_missing(target.parent)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():  # the link moves: it must still name its file from the new folder
            written = os.readlink(source)
            leads_to = os.path.join(source.parent, written)
            try:
                os.symlink(written if os.path.isabs(written) else os.path.relpath(leads_to, target.parent), target)
            except FileExistsError as exc:
                raise InvalidInput(f"{new} already exists; mv never overwrites a file.") from exc
            except OSError as exc:
                raise disk_error(exc, f"move {old}") from exc
            if _bytes(target) != checked:
                raise SavedMeanwhile(old)
            self.store.entry_durable(target.parent, made)
            return
        try:
            os.link(source, target, follow_symlinks=False)
        except FileExistsError as exc:
            raise InvalidInput(f"{new} already exists; mv never overwrites a file.") from exc
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS):
                raise disk_error(exc, f"move {old}") from exc
            found = os.stat(source)  # the copy is the person's as the file was: mode and owner from the start
            self.store.write_new_file(new, checked, stat.S_IMODE(found.st_mode), (found.st_uid, found.st_gid))
            os.utime(target, ns=(found.st_atime_ns, found.st_mtime_ns))
            os.chmod(target, found.st_mode & 0o7777)
        if _bytes(target) != checked:  # saved in place between the check and the link
            raise SavedMeanwhile(old)
        # The new name is durable before the old one is taken away: a power cut in between
        # leaves the note under both names, never under neither.
        self.store.entry_durable(target.parent, made)

    def _retire_old_name(self, old: str, new: str, checked: bytes) -> None:
        """Take the old name away, only if it still names the file that was moved: it is
        renamed aside first (atomic), then looked at. A save that replaced it meanwhile
        is put back and the move refused. Aside, it has a name no sweep removes
        (``locking.move_aside``): a crash before the look leaves it beside the old name."""
        source = self.store.abspath(old)
        aside = locking.move_aside(source, source)
        same_file = os.path.samefile(aside, self.store.abspath(new))
        if same_file or _bytes(aside) == checked:
            aside.unlink()  # its bytes live on under the new name
            self.store.fsync_dir(source.parent)
            return
        _put_back(aside, source)
        raise SavedMeanwhile(old)

    # ------------------------------------------------------------------ undoing
    def _undo(self, folder: Path) -> list[str]:
        """Put every file of a recorded move back as it was, where it still holds what
        the move wrote (a save made since stands, and is named in the result). The
        manifest's paths pass the memory rule first (``confine``), and each original's
        copy must hold the bytes the manifest names."""
        raw = raw_manifest(folder)
        if raw is None:
            shutil.rmtree(folder, ignore_errors=True)  # no manifest: nothing of it reached the vault
            return []
        if (folder / DONE).exists():  # every file was in place: the move stands
            self._forget_record(raw)
            shutil.rmtree(folder, ignore_errors=True)
            return []
        manifest = checked_manifest(self.root, folder, raw)
        kept: list[str] = []
        old, new = manifest["old"], manifest["new"]
        moved, *linking = manifest["files"]
        for entry in linking:
            original = journal_copy(folder, entry)
            read = self.files.read(entry["path"])
            if read is None or file_version(read[0]) != entry["after"]:
                continue  # not written yet, or saved since: as it is
            try:
                self.store.replace_checked(entry["path"], original, read[0])
            except SavedMeanwhile:
                kept.append(entry["path"])
        source, target = self.store.abspath(old), self.store.abspath(new)
        if os.path.lexists(target):
            if not os.path.lexists(source):
                _put_back(target, source)  # the old name was already taken away
            elif _same_entry(source, target):
                target.unlink()  # the name this move added to the file
            elif file_version(data := _bytes(target)) in (moved["before"], moved["after"]):
                self.store.park(target, new, data)  # the move's own copy; the original is at the old name
            else:
                kept.append(new)  # not the move's: someone's file, left as it is
        read = self.files.read(old)
        if read is not None and file_version(read[0]) == moved["after"] != moved["before"]:
            self.store.replace_checked(old, journal_copy(folder, moved), read[0])
        _remove_empty_folders(target.parent, self.root)
        self._forget_record(raw)
        shutil.rmtree(folder, ignore_errors=True)
        return kept

    def finish_interrupted_move(self) -> list[str]:
        """Undo a move a crash interrupted (its journal is in ``.index/move/``); the
        files whose save since then stands are returned. A journal this user's register
        does not list (planted, synced in, a replay), or git tracks, is set aside."""
        folder = self.store.control_dir / MOVE_DIRNAME
        if self._moving or self.core.read_only or not os.path.lexists(folder):
            return []
        with self.core.lock.hold():
            if not os.path.lexists(folder):
                return []
            if not confine.real_folder(folder):  # no journal the tool made: never followed, never in the way
                set_aside(self.store.control_dir, "move", digest(b""), [folder], _ORIGIN,
                          "a symlink or a file, not a folder the tool made", move_would(None))
                return []
            raw = raw_manifest(folder)
            if raw is not None and not self._may_undo(folder, raw):
                return []
            try:
                return self.undo_recorded_move(folder, raw)
            except (OSError, VaultError, PathRefused, ValueError, KeyError, TypeError) as exc:
                # Failing again at every open would stop every walk: set the record aside
                # (it keeps every file's original bytes) and let the vault work on.
                self._forget_record(raw)
                set_aside(self.store.control_dir, "move", digest(raw or b""), [folder], _ORIGIN,
                          f"could not be undone ({exc})", move_would(raw))
                return []

    def undo_recorded_move(self, folder: Path, raw: bytes | None) -> list[str]:
        """Undo the move a journal the register lists records (under the vault's lock), and
        bring the index up to date; raises when it cannot."""
        manifest = checked_manifest(self.root, folder, raw) if raw is not None else None
        kept = self._undo(folder)
        if manifest:
            with self.files.transaction() as conn:
                for rel in {manifest["old"], manifest["new"], *(f["path"] for f in manifest["files"])}:
                    self.files.refresh(conn, rel, None)
        return kept

    def _may_undo(self, folder: Path, raw: bytes) -> bool:
        """Whether this user's register lists the journal (and git does not track it);
        if not, it is set aside, untouched."""
        found = digest(raw)
        why = refusal(self.store.register, self.store.tracked, "move", found, _ORIGIN)
        if why is None:
            return True
        set_aside(self.store.control_dir, "move", found, [folder], _ORIGIN, why, move_would(raw))
        return False



_ORIGIN = f"{INDEX_DIRNAME}/{MOVE_DIRNAME}"
_COPY_NAME = re.compile(r"[0-9]{1,6}\.md")


def raw_manifest(folder: Path) -> bytes | None:
    """The journal's manifest as written (None: there is none, or it is no plain file)."""
    try:
        return read_record(folder / MANIFEST)
    except (OSError, ValueError):
        return None


def checked_manifest(root: Path, folder: Path, raw: bytes) -> dict[str, Any]:
    """A journal's manifest, refused (``PathRefused``, ``ValueError``) unless every path
    in it is a memory path (``confine``), every copy a file of the journal holding the
    bytes the manifest names, and the moved note the first file."""
    manifest = load_json(raw)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list) or not manifest["files"]:
        raise ValueError("the manifest is not a move's")
    for rel in (manifest.get("old"), manifest.get("new")):
        confine.memory_path(root, rel)
    first = manifest["files"][0]
    if not isinstance(first, dict) or first.get("path") != manifest["old"]:
        raise ValueError("the manifest's first file is not the moved note")
    for entry in manifest["files"]:
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("before", "after", "copy")):
            raise ValueError("a file of the manifest is not a move's")
        confine.memory_path(root, entry.get("path"))
        if not _COPY_NAME.fullmatch(entry["copy"]):
            raise PathRefused(f"{entry['copy']!r} is not a copy in the move's journal")
        journal_copy(folder, entry)
    return manifest


def journal_copy(folder: Path, entry: dict[str, Any]) -> bytes:
    """A file's original bytes from the move's journal, read as untrusted each time they
    are used (a synced folder can swap the copy for a link after the manifest was
    checked): never through a link, never waiting on a pipe, and only when they are the
    bytes the manifest names (``ValueError`` otherwise)."""
    data = read_record(folder / entry["copy"])
    if file_version(data) != entry["before"]:
        raise ValueError(f"the journal's copy of {entry['path']} does not hold the bytes its manifest names")
    return data


def move_would(raw: bytes | None) -> str:
    """What undoing a move's journal would do, for a person deciding about it."""
    try:
        manifest = load_json(raw or b"")
        old, new, files = manifest["old"], manifest["new"], manifest["files"]
        return (f"undo a move of {old!r} to {new!r}: put {old!r} back from the journal's copy and give "
                f"{max(len(files) - 1, 0)} linking file(s) their links back")
    except (ValueError, TypeError, KeyError):
        return "drop it: it is no journal a move could be undone from"


def _same_entry(a: Path, b: Path) -> bool:
    """Whether two names lead to one file (or are one symlink, hard-linked: a move by an
    earlier version did that, and the link may dangle from its new folder)."""
    first, second = os.lstat(a), os.lstat(b)
    if (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # a dangling link names no file
        return False


def _bytes(path: Path) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _put_back(aside: Path, place: Path) -> None:
    """``aside`` back at ``place``, never over a file that appeared there meanwhile."""
    try:
        os.link(aside, place)
    except FileExistsError:
        raise VaultError(f"{place} appeared while a move was undone; the moved note is kept at {aside}.") from None
    aside.unlink()


def _remove_empty_folders(folder: Path, root: Path) -> None:
    """Folders the move made for the new name, if nothing is in them now."""
    while folder != root and root in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def _check_rewrite(note: Note, after: str, path: str) -> None:
    """A rewritten file must read as it did, but for its links (a name with a quote
    inside a quoted YAML value would break the front matter)."""
    again = parse.parse(after.encode("utf-8"), path)
    if again.unreadable or set(again.meta) != set(note.meta) or {r for r, _ in again.links} != {r for r, _ in note.links}:
        raise InvalidInput(
            f"Rewriting the links in {path} would change how its front matter reads; rename by another name, "
            "or edit the links in that file by hand. Nothing was moved."
        )
