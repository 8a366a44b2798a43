"""An import that is all or nothing, even across a crash.

The files of an import are first written into the vault's own ``.index/import/``
(``files/<n>.md``), made durable together (``Store.durable_together``: one ``syncfs``
on Linux, else an fsync of each file and of the folder), then a manifest naming where
each goes is put in place atomically: that rename is the commit point. Publishing moves
each staged file to its free name in the vault in one step (``locking.move_no_replace``:
on Linux a rename that never replaces; elsewhere a hard link, the staged names removed
once every published file is durable), then makes them durable together. On the next
open after a crash, an import without a manifest is dropped (nothing of it reached the
vault) and one with a manifest is finished. Where publishing is a link, a file published
before the crash still shares its inode with its staged name, so it is found there and
never published twice (nor when a process that had the vault open forgot or edited it
since: the inode's other link, or its id under its name, tells). The
staging lives in the vault's own ``.index/`` (never in a database that may be elsewhere
or deleted), and recovery removes only files the import itself staged.

An import may also update files already in the vault (a source imported again): such an
item is staged with the bytes it replaces (``<n>.old``) and put in place by ``replace``
(the checked swap of every tool edit), which an interrupted import repeats safely: a
file that already holds the new bytes is done, one a person saved since stays theirs.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from . import note as notes
from .errors import VaultError
from .store import Store

STAGING_DIRNAME = "import"
MANIFEST = "manifest.json"


def _own_id(path: Path) -> str:
    """The id a file's front matter gives itself ("" for none, or unreadable)."""
    try:
        note = notes.parse(path.read_bytes(), path.name)
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

    def pending(self) -> bool:
        return self.folder.exists()

    def stage(self, plans: list[tuple[str, bytes, bytes | None]], on_write: Callable[[int], None] | None = None) -> None:
        """Write every file of the import, make them durable together, then the
        manifest (the commit point). Each plan is ``(path, bytes, None)`` for a new file,
        or ``(path, bytes, old bytes)`` to update the file at ``path`` if it still holds
        the old bytes."""
        if self.pending():
            raise VaultError(f"An earlier import is still staged in {self.folder}; reopen the vault to finish it.")
        self._ours = True  # under the vault's lock, with no staging folder: what appears now is this import's
        self.files.mkdir(parents=True)
        items = []
        with self._store.durable_together():  # every staged file and name is durable before the commit point...
            for n, (rel, data, replaced) in enumerate(plans):
                entry: dict[str, object] = {"n": n, "path": rel}
                if replaced is not None:
                    old = self._store._write_temp(self.files, replaced)
                    os.rename(old, self.files / f"{n}.old")
                    entry["replaces"] = True
                tmp = self._store._write_temp(self.files, data)
                os.rename(tmp, self.files / f"{n}.md")
                items.append(entry)
                if on_write is not None:
                    on_write(n + 1)
            self._store._fsync_dir(self.files)
        manifest = self._store._write_temp(self.folder, json.dumps({"items": items}).encode("utf-8"))
        os.rename(manifest, self.folder / MANIFEST)
        self._store._fsync_dir(self.folder)  # ...and the commit point before any file reaches the vault

    def publish(self, on_publish: Callable[[int], None] | None = None, *,
                after_crash: bool = False) -> list[tuple[int, str, os.stat_result | None]]:
        """Publish every staged file not yet in the vault, then make them durable
        together; returns each one's item number, vault path and the stat of the file
        published (``Store.place``; None: read it back before indexing it).

        Staged names are removed only once every published file is durable (where
        publishing is a rename they are gone at once). ``after_crash``: a crash
        interrupted publishing (``recover``): any item still staged may have reached
        the vault already, so each is looked for there first."""
        items = json.loads((self.folder / MANIFEST).read_text(encoding="utf-8"))["items"]
        published: list[tuple[int, str, os.stat_result | None]] = []
        done_with: list[Path] = []
        with self._store.durable_together():
            for done, item in enumerate(items, 1):
                staged = self.files / f"{item['n']}.md"
                rel = item["path"]
                folder, name = rel.rsplit("/", 1) if "/" in rel else ("", rel)
                try:
                    found = os.stat(staged)
                except FileNotFoundError:
                    continue  # published, and its staged name removed, before a crash
                if item.get("replaces"):  # an update: the checked swap, safe to repeat after a crash
                    replaced = self._put_replacement(staged, rel)
                    if replaced:
                        published.append((item["n"], replaced, None))
                    if on_publish is not None:
                        on_publish(done)
                    continue
                where = self._already_published(staged, found, folder, name[:-3]) if after_crash else None
                stat = None
                if where is None:
                    where, stat = self._store.place(staged, folder, name[:-3])
                if where:  # "": published before a crash, then forgotten or edited: it stays as it is now
                    published.append((item["n"], where, stat))
                done_with.append(staged)
                if on_publish is not None:
                    on_publish(done)
        for staged in done_with:
            staged.unlink(missing_ok=True)  # renamed into the vault (or linked, where there is no rename)
        return published

    def _put_replacement(self, staged: Path, rel: str) -> str:
        """An update: the new bytes in place of the checked ones (see ``replace``)."""
        old = staged.with_suffix(".old")
        if self._replace is None:
            raise VaultError("This import updates files; it needs a vault to put them in place.")
        where = self._replace(rel, staged.read_bytes(), old.read_bytes())
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

    def _remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def recover(self) -> list[str]:
        """After a crash: finish an import that reached its manifest (returns the paths it
        published), drop one that did not (returns [])."""
        if not self.pending():
            return []
        if not (self.folder / MANIFEST).exists():
            self._remove()
            return []
        published = self.publish(after_crash=True)
        self._remove()
        return [rel for _n, rel, _stat in published]
