"""An import that is all or nothing, even across a crash.

The files of an import are first written into the vault's own ``.index/import/``
(``files/<n>.md``, each fsynced), then a manifest naming where each goes is put in
place atomically: that rename is the commit point. Publishing links each staged file
to its free name in the vault and then removes the staged name. On the next open after
a crash, an import without a manifest is dropped (nothing of it reached the vault) and
one with a manifest is finished. A file published just before the crash still shares
its inode with its staged name, so it is found there and never published twice. The
staging lives in the vault's own ``.index/`` (never in a database that may be elsewhere
or deleted), and recovery removes only files the import itself staged.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from .errors import VaultError
from .store import Store

STAGING_DIRNAME = "import"
MANIFEST = "manifest.json"


class Staging:
    """The staging folder of one vault's imports."""

    def __init__(self, control_dir: Path, publish: Callable[[Path, str, str], str],
                 write_temp: Callable[[Path, bytes], Path], root: Path) -> None:
        self.folder = control_dir / STAGING_DIRNAME
        self.files = self.folder / "files"
        self._publish = publish  # Store.publish: a staged file to its free name
        self._write_temp = write_temp
        self._root = root
        self._ours = False  # whether this import made the staging folder (only then may clear() remove it)

    def pending(self) -> bool:
        return self.folder.exists()

    def stage(self, plans: list[tuple[str, bytes]], on_write: Callable[[int], None] | None = None) -> None:
        """Write every file of the import, then the manifest (the commit point)."""
        if self.pending():
            raise VaultError(f"An earlier import is still staged in {self.folder}; reopen the vault to finish it.")
        self._ours = True  # under the vault's lock, with no staging folder: what appears now is this import's
        self.files.mkdir(parents=True)
        items = []
        for n, (rel, data) in enumerate(plans):
            tmp = self._write_temp(self.files, data)
            os.rename(tmp, self.files / f"{n}.md")
            items.append({"n": n, "path": rel})
            if on_write is not None:
                on_write(n + 1)
        Store._fsync_dir(self.files)  # every staged name is durable before the commit point...
        manifest = self._write_temp(self.folder, json.dumps({"items": items}).encode("utf-8"))
        os.rename(manifest, self.folder / MANIFEST)
        Store._fsync_dir(self.folder)  # ...and the commit point before any file reaches the vault

    def publish(self, on_publish: Callable[[int], None] | None = None) -> list[str]:
        """Publish every staged file not yet in the vault; returns all their vault paths."""
        items = json.loads((self.folder / MANIFEST).read_text(encoding="utf-8"))["items"]
        published: list[str] = []
        for done, item in enumerate(items, 1):
            staged = self.files / f"{item['n']}.md"
            rel = item["path"]
            folder, name = rel.rsplit("/", 1) if "/" in rel else ("", rel)
            try:
                found = os.stat(staged)
            except FileNotFoundError:
                continue  # published, and its staged name removed, before a crash
            where = self._already_published(found, folder, name[:-3]) if found.st_nlink > 1 else None
            published.append(where or self._publish(staged, folder, name[:-3]))
            staged.unlink()
            if on_publish is not None:
                on_publish(done)
        return published

    def _already_published(self, staged: os.stat_result, folder: str, slug: str) -> str | None:
        """Where a staged file was linked before a crash: the name sharing its inode."""
        base = self._root / folder
        for n in range(1, 10_000):
            name = f"{slug}.md" if n == 1 else f"{slug}-{n}.md"
            try:
                there = os.stat(base / name)
            except FileNotFoundError:
                return None
            if (there.st_dev, there.st_ino) == (staged.st_dev, staged.st_ino):
                return f"{folder}/{name}" if folder else name
        return None

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
        published = self.publish()
        self._remove()
        return published
