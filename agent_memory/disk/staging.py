"""An import that is all or nothing, even across a crash: ``Staging``.

Its files are staged in the vault's own ``.index/import/`` and made durable; a manifest
renamed into place is the commit point; publishing moves each file to its free name (an
update goes through the checked swap), and the next open after a crash drops an import
without a manifest and finishes one with it, if this user's register lists it. The
protocol: docs/design/import-staging.md.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import shutil
from collections.abc import Callable
from typing import Any, NamedTuple, Self
from pathlib import Path

from ..trust import confine
from ..note import parse
from ..errors import InvalidInput, AgentMemoryError, VaultError
from ..trust.register import digest, refusal, set_aside
from . import locking, openat
from .nofollow import load_json, read_record
from .layout import INDEX_DIRNAME
from .store import Store

log = logging.getLogger("agent_memory.disk")


class StagedFile(NamedTuple):
    """One file of an import: where it goes, its bytes, and the bytes it replaces there
    (None: a new file, given the next free name)."""

    path: str
    data: bytes
    replaces: bytes | None = None


class Published(NamedTuple):
    """A file an import put in the vault: its item number, its path, and the stat of the
    file as published (``Store.place``; None: read it back before indexing it)."""

    n: int
    path: str
    stat: os.stat_result | None

STAGING_DIRNAME = "import"


class NotPublished(VaultError):
    """An item of an import could not be put in place; what was placed was taken back."""

MANIFEST = "manifest.json"


def _own_id(path: Path) -> str:
    """The id a file's front matter gives itself ("" for none, or unreadable)."""
    try:
        note = parse.parse(path.read_bytes(), path.name)
    except OSError:
        return ""
    return note.id if note.own_id else ""


class Staging:
    """The staging folder of one vault's imports."""

    def __init__(self, store: Store, replace: Callable[[str, bytes, bytes], str] | None = None) -> None:
        self.folder = store.control_dir / STAGING_DIRNAME
        self.files = self.folder / "files"
        self._store = store  # writes, publishes (a staged file to its free name) and makes durable
        self._root = store.root
        self._replace = replace  # (path, new bytes, bytes checked) -> path, or "" when it was left alone
        self._ours = False  # whether this import made the staging folder (only then may clear() remove it)
        self._record: bytes | None = None  # this import's manifest, as entered in the register
        self._plans: list[StagedFile] = []  # what this import stages, to take it back
        self._items: list[dict[str, Any]] | None = None  # the manifest's items as this process staged them
        self._folders = _Folders(store, self.files)  # where a publishing moves its files (held while it runs)
        self.dropped: list[str] = []  # "path: why" of each item that could not be put in place

    def pending(self) -> bool:
        return os.path.lexists(self.folder)  # a planted link or file too: ``recover`` sets it aside

    def stage(self, plans: list[StagedFile], on_write: Callable[[int], None] | None = None) -> None:
        """Write every file of the import, make them durable together, then the
        manifest (the commit point). A file that ``replaces`` bytes updates the file at
        its path only if it still holds them."""
        if self.pending():
            raise VaultError(f"An earlier import is still staged in {self.folder}; reopen the vault to finish it.")
        for rel, _data, _replaced in plans:  # before anything is written: a path no file system takes fails here
            problem = confine.memory_problem(rel)
            if problem:
                raise InvalidInput(f"The import would write {rel!r}, which {problem}; give that item another path. "
                                   "Nothing was imported.")
        self._ours = True  # under the vault's lock, with no staging folder: what appears now is this import's
        self._plans = plans
        self.files.mkdir(parents=True)
        items = []
        with self._store.durable_together():  # every staged file and name is durable before the commit point...
            for n, (rel, data, replaced) in enumerate(plans):
                entry: dict[str, object] = {"n": n, "path": rel, "sha256": hashlib.sha256(data).hexdigest()}
                if replaced is not None:
                    self._store.write_temp(self.files, replaced, name=f"{n}.old")
                    entry["replaces"] = True
                staged = self._store.write_temp(self.files, data, name=f"{n}.md")  # half written only before the manifest
                self._folders.staged[f"{n}.md"] = _stamp(os.stat(staged))
                items.append(entry)
                if on_write is not None:
                    on_write(n + 1)
            self._store.fsync_dir(self.files)
        record = json.dumps({"items": items, "record": secrets.token_hex(8)}).encode("utf-8")
        self._store.register.enter("import", digest(record))  # listed before it is written
        self._record = record
        self._items = items
        manifest = self._store.write_temp(self.folder, record)
        os.rename(manifest, self.folder / MANIFEST)
        self._store.fsync_dir(self.folder)  # ...and the commit point before any file reaches the vault

    def publish(self, on_publish: Callable[[int], None] | None = None, *,
                after_crash: bool = False) -> list[Published]:
        """Publish every staged file not yet in the vault, then make them durable
        together; returns what was published.

        A published file's staged name goes with its move; the rest of the staging
        folder goes with ``clear`` (or ``recover``), once all of it is durable. The items
        are the manifest's as this process staged them, or else the manifest read and
        checked (``checked_items``: after a crash). ``after_crash``: a crash
        interrupted publishing (``recover``): any item still staged may have reached
        the vault already, so each is looked for there first."""
        items = self._items  # staged by this process, under the lock, moments ago: not read back
        if items is None:
            items = checked_items(self.folder, self._store.root, self._manifest_bytes())
        published: list[Published] = []
        with self._store.durable_together(), self._folders:
            for done, item in enumerate(items, 1):
                staged = self.files / f"{item['n']}.md"
                found = None
                if after_crash:
                    try:
                        found = os.stat(staged)
                    except FileNotFoundError:
                        continue  # published, and its staged name removed, before a crash
                try:
                    outcome = self._publish_one(item, staged, found, after_crash)
                except (OSError, AgentMemoryError) as exc:  # a name the file system refuses, a full disk...
                    if not after_crash:  # all or nothing: what this import put in place is taken back
                        self._take_back(published)
                        raise NotPublished(f"Could not put {item['path']} in the vault ({_why(exc)}); nothing was "
                                         "imported. Free space or give that item another path, then import "
                                         "again.") from exc
                    self.dropped.append(f"{item['path']}: {_why(exc)}")
                    staged.unlink(missing_ok=True)
                    continue
                if outcome is not None:
                    published.append(Published(item["n"], *outcome))
                if on_publish is not None:
                    on_publish(done)
        # A published file's staged name went with its move (``move_no_replace``); what is
        # left (one a crash had published already) goes with the staging folder.
        if self.dropped:
            log.warning("%d imported item(s) could not be put in place and were dropped (import them again once "
                        "fixed): %s", len(self.dropped), "; ".join(self.dropped[:10]))
        return published

    def _take_back(self, published: list[Published]) -> None:
        """Undo what this import put in place so far (a later item failed): a new file is
        removed while it is still the one written, an update swapped back while the file
        still holds the import's bytes. A person's save since stands."""
        for n, rel, _stat in reversed(published):
            data, replaced = self._plans[n].data, self._plans[n].replaces
            path = self._root / rel
            try:
                if replaced is not None:
                    if self._replace is not None:
                        self._replace(rel, replaced, data)
                elif path.read_bytes() == data:
                    path.unlink()
                    self._store.fsync_dir(path.parent)
            except (OSError, AgentMemoryError):
                continue  # changed since, or gone: it stands as it is

    def _publish_one(self, item: dict[str, Any], staged: Path, found: os.stat_result | None,
                     after_crash: bool) -> tuple[str, os.stat_result | None] | None:
        """Put one staged item in place; its vault path and stat (None: nothing to index).
        ``found``: the staged file's stat, after a crash."""
        rel = item["path"]
        folder, name = rel.rsplit("/", 1) if "/" in rel else ("", rel)
        if item.get("replaces"):  # an update: the checked swap, safe to repeat after a crash
            replaced = self._put_replacement(staged, rel, item)
            return (replaced, None) if replaced else None
        if not after_crash:  # into the folder as held open (``_Folders``), which refuses a symlinked one
            return self._folders.place(staged.name, folder, name[:-3])
        # Looked for in the vault first: never through a symlinked folder.
        confine.memory_path(self._root, f"{folder}/x.md" if folder else "x.md")
        assert found is not None
        where = self._already_published(staged, found, folder, name[:-3])
        stat = None
        if where is None:  # (``place`` itself refuses a folder that is, or goes through, a symlink)
            _staged_bytes(staged, item)  # what moves in is still the checked file, not a link swapped in since
            where, stat = self._store.place(staged, folder, name[:-3])
        return (where, stat) if where else None  # "": published before a crash, then forgotten or edited

    def _manifest_bytes(self) -> bytes:
        if self._record is not None:
            return self._record
        return read_record(self.folder / MANIFEST)

    def _put_replacement(self, staged: Path, rel: str, item: dict[str, Any]) -> str:
        """An update: the new bytes in place of the checked ones (see ``replace``)."""
        old = staged.with_suffix(".old")
        if self._replace is None:
            raise VaultError("This import updates files; it needs a vault to put them in place.")
        try:
            replaced = read_record(old)
        except (OSError, ValueError) as exc:
            raise VaultError(f"the bytes item {item['n']} replaces cannot be read ({exc})") from exc
        where = self._replace(rel, _staged_bytes(staged, item), replaced)
        staged.unlink(missing_ok=True)  # done (the swap is durable): a crash from here on does not repeat it
        old.unlink(missing_ok=True)
        return where

    def _already_published(self, path: Path, staged: os.stat_result, folder: str, slug: str) -> str | None:
        """Whether a staged file reached the vault before a crash: the vault path sharing
        its inode; "" when it did but has changed since; None when it never did.

        Publishing (where it is a link, then an unlink) links the staged file to the first
        free name of its slug, so that is where it is. Before the next open a process that had the vault open may have
        forgotten it (the inode moved to ``.trash/``) or edited it (a new file under
        that name, the old inode parked, then deleted): a file of the slug holding the
        staged file's own id, or a second link to the staged inode elsewhere, means it
        was published, and publishing it again would bring back a forgotten memory or
        give one id two files."""
        base = self._root / folder
        own_id = None
        for n in range(1, 10_000):
            name = f"{slug}.md" if n == 1 else f"{slug}-{n}.md"
            try:
                there = os.stat(base / name)
            except FileNotFoundError:
                break
            if (there.st_dev, there.st_ino) == (staged.st_dev, staged.st_ino):
                return f"{folder}/{name}" if folder else name
            if own_id is None:
                own_id = _own_id(path)
            if own_id and _own_id(base / name) == own_id:
                return ""
        return "" if staged.st_nlink > 1 else None

    def clear(self) -> None:
        """Remove this import's staging folder: only files it staged are in it.

        A folder this import did not make is left alone: it is an earlier import that a
        crash interrupted (``stage`` refused to start over it), and once its manifest is
        there removing it would leave that import half published. ``recover`` finishes it."""
        if self._ours:
            self._remove()
            if self._record is not None:
                self._store.register.done("import", digest(self._record))

    def _remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def recover(self) -> list[str]:
        """After a crash: finish an import that reached its manifest (returns the paths it
        published), drop one that did not (returns []). One this user's register does
        not list, that git tracks, or whose manifest fails its checks is set aside."""
        if not self.pending():
            return []
        origin = f"{INDEX_DIRNAME}/{STAGING_DIRNAME}"
        if not confine.real_folder(self.folder):  # no staging the tool made: never followed, never in the way
            set_aside(self._store.control_dir, "import", digest(b""), [self.folder], origin,
                      "a symlink or a file, not a folder the tool made", "do nothing: it is no staged import")
            return []
        try:
            raw = self._manifest_bytes()
        except FileNotFoundError:
            if self._store.tracked.among([origin]):
                set_aside(self._store.control_dir, "import", digest(b""), [self.folder], origin,
                          "tracked by git (a commit brought it)", "nothing: it has no manifest")
            else:
                self._remove()  # staged files only: nothing of it reached the vault
            return []
        found = digest(raw)
        why = refusal(self._store.register, self._store.tracked, "import", found, origin)
        if why is None:
            try:
                checked_items(self.folder, self._root, raw)
            except (ValueError, TypeError, KeyError, AgentMemoryError) as exc:
                why = f"its manifest fails the checks ({_why(exc)})"
        if why is not None:
            set_aside(self._store.control_dir, "import", found, [self.folder], origin, why, import_would(raw))
            return []
        self._record = raw
        published = self.publish(after_crash=True)
        self._remove()
        self._store.register.done("import", found)
        return [p.path for p in published]


class _Folders:
    """The staged files' folder and the vault folders one publishing moves them into,
    each opened once and held (at most ``HELD`` vault folders at a time). A vault folder
    is made where missing (its name made durable in its parent with the batch) and, once
    opened, checked to be where its path says, no symlink on the way (``/proc/self/fd``;
    else the path, as ``Store.place`` checks it): every file moved in through it lands in
    that very folder, whatever is renamed or swapped on its path meanwhile."""

    HELD = 128

    def __init__(self, store: Store, files: Path) -> None:
        self._store = store
        self._files = files
        self._source: int | None = None
        self._held: dict[str, int] = {}  # folder -> its descriptor, the most recently used last
        self.staged: dict[str, tuple[int, ...]] = {}  # each file this process staged, as it was written (``_stamp``)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        for fd in [*self._held.values(), *([] if self._source is None else [self._source])]:
            os.close(fd)
        self._held, self._source = {}, None

    def place(self, staged: str, folder: str, slug: str) -> tuple[str, os.stat_result | None]:
        """``Store.place`` of the staged file named ``staged`` into ``folder``: its first
        free name, never over a file; its path and stat, when still the file staged."""
        if not _DIR_FDS:  # (Windows): by path, each folder checked again for each file
            self._as_staged(os.stat(self._files / staged), staged)
            return self._store.place(self._files / staged, folder, slug)
        if self._source is None:
            self._source = os.open(self._files, openat.FOLDER_FLAGS)
        held = self._folder(folder)
        written = self._as_staged(os.stat(staged, dir_fd=self._source, follow_symlinks=False), staged)
        for n in range(1, 10_000):
            name = f"{slug}.md" if n == 1 else f"{slug}-{n}.md"
            try:
                locking.move_no_replace_at(self._source, staged, held, name)  # fails if the name exists
            except FileExistsError:
                continue
            rel = f"{folder}/{name}" if folder else name
            self._store.changed(rel, "created")
            now = os.stat(name, dir_fd=held, follow_symlinks=False)
            same = (now.st_ino, now.st_dev, now.st_size, now.st_mtime_ns) == (
                written.st_ino, written.st_dev, written.st_size, written.st_mtime_ns)
            return rel, now if same else None
        raise VaultError(f"Too many files named {slug!r} in {folder!r}.")

    def _as_staged(self, found: os.stat_result, staged: str) -> os.stat_result:
        """The staged file's stat, refused unless it is the file this process staged, as
        written: publishing indexes the bytes it staged, not read back."""
        if _stamp(found) != self.staged.get(staged):
            raise VaultError(f"its staged file {staged} was changed after it was staged")
        return found

    def _folder(self, folder: str) -> int:
        fd = self._held.pop(folder, None)
        if fd is None:
            fd = self._open(folder)
            if len(self._held) >= self.HELD:
                os.close(self._held.pop(next(iter(self._held))))
        self._held[folder] = fd
        return fd

    def _open(self, folder: str) -> int:
        store = self._store
        path = store.abspath(folder)
        made = [d for d in (path, *path.parents) if store.root in d.parents and not os.path.lexists(d)]
        if made:  # the way there checked before a folder is made on it, as ``place`` checks it
            existing = made[-1].parent
            if existing != store.root and not store.unaliased(store.relpath(existing)):
                raise VaultError(f"{store.relpath(existing)}/ in the vault is (or goes through) a symlink; new "
                                 "memories are not written through symlinks. Replace it with a real folder and retry.")
            path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, openat.FOLDER_FLAGS)
        try:
            where = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            where = None
        if not (where == str(store.real_root / folder if folder else store.real_root) if where is not None
                else store.unaliased(folder) if folder else True):
            os.close(fd)
            raise VaultError(f"{folder}/ in the vault is (or goes through) a symlink; new memories are not written "
                             "through symlinks. Replace it with a real folder and retry.")
        for new in made:  # a folder made for it (a new day's): its name in its parent, with the batch
            store.fsync_dir(new.parent)
        store.fsync_dir(path)  # the names moved into it, with the batch
        return fd


def _stamp(found: os.stat_result) -> tuple[int, ...]:
    """A staged file as written: a change to it since (its bytes, or another file put in
    its place) changes one of these (the change time no one can set back)."""
    return found.st_ino, found.st_dev, found.st_size, found.st_mtime_ns, found.st_ctime_ns


_DIR_FDS = {os.stat, os.open, os.unlink, os.link, os.rename} <= os.supports_dir_fd  # names inside an open folder
_STAGED_NAME = re.compile(r"[0-9]{1,9}")


def checked_items(folder: Path, root: Path, raw: bytes) -> list[dict[str, Any]]:
    """A manifest's items, refused (``ValueError``, ``PathRefused``) unless each names a
    staged file by number, a memory path (``confine``), and the sha256 of the staged
    file, which a file still staged must hold; an update's replaced bytes are staged too."""
    manifest = load_json(raw)
    items = manifest.get("items") if isinstance(manifest, dict) else None
    if not isinstance(items, list):
        raise TypeError("the manifest has no items")
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("n"), int) or isinstance(item.get("n"), bool) \
                or not _STAGED_NAME.fullmatch(str(item["n"])) or not isinstance(item.get("sha256"), str):
            raise ValueError("an item of the manifest is not an import's")
        problem = confine.memory_problem(item.get("path"))
        if problem:
            raise ValueError(f"item {item['n']} would write {item.get('path')!r}, which {problem}")
        staged = folder / "files" / f"{item['n']}.md"
        try:
            if digest(read_record(staged)) != item["sha256"]:
                raise ValueError(f"item {item['n']}'s staged file does not hold the bytes its manifest names")
        except FileNotFoundError:
            continue  # published before a crash
        except OSError as exc:
            raise ValueError(f"item {item['n']}'s staged file cannot be read ({exc.strerror or exc})") from exc
        if item.get("replaces") is not None and (item["replaces"] is not True or os.path.islink(staged.with_suffix(".old"))
                                                 or not staged.with_suffix(".old").is_file()):
            raise ValueError(f"item {item['n']} replaces a file but its replaced bytes are not staged")
    return items


def _staged_bytes(staged: Path, item: dict[str, Any]) -> bytes:
    """A staged file's bytes as it is used, read as untrusted again (a synced folder can
    swap it for a link after the manifest was checked): never through a link, never
    waiting on a pipe, and only while they are the bytes the manifest names."""
    try:
        data = read_record(staged)
    except (OSError, ValueError) as exc:
        raise VaultError(f"item {item['n']}'s staged file cannot be read ({exc})") from exc
    if digest(data) != item["sha256"]:
        raise VaultError(f"item {item['n']}'s staged file no longer holds the bytes its manifest names")
    return data


def import_would(raw: bytes) -> str:
    """What finishing a staged import would do, for a person deciding about it."""
    try:
        items = load_json(raw)["items"]
        paths = [str(i.get("path")) for i in items]
        updates = sum(1 for i in items if i.get("replaces"))
    except (ValueError, TypeError, KeyError, AttributeError):
        return "drop it: it is no manifest an import could be finished from"
    shown = ", ".join(repr(p) for p in paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
    return f"put {len(paths)} staged file(s) in the vault ({updates} replacing a file there): {shown}"


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)
