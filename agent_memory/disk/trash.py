"""The vault's ``.trash/``: what the tool moved there, and only that, may be purged or restored.

``.trash/`` is also Obsidian's own trash folder, so a file found there is not the
tool's to delete. Every file the tool puts there is recorded in a small ledger inside
the folder (``.trash/.agent-memory.jsonl``, one JSON object a line) with the hash of
the bytes it put there: ``gc`` purges a recorded file only while it still holds those
bytes, after its retention, and ``restore`` puts one back where it came from. The
ledger lives beside the files it describes (not in the index, which may be deleted
or live elsewhere); losing it only means nothing is purged.

The ledger is a file in the vault, so any line may come from someone else: a line
acts (``gc``, ``restore``, the trash listing) only while this user's register lists it
(``trust/register.py``), its paths pass the trash rule (``trust/confine.py``) and git does not track
the ledger. Moving a file in is one operation in steps (move, register, ledger line):
if a later step fails the file goes back where it was.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import logging
import os
import stat as stat_kind
from collections.abc import Callable, Iterator
from typing import Any
from pathlib import Path

from . import locking, nofollow, openat
from ..trust import confine
from ..errors import PathRefused, VaultError, disk_error
from ..progress import Every, Progress
from ..trust.register import Register, Tracked, digest, record_id, refusal
from .layout import TRASH_DIRNAME

log = logging.getLogger("agent_memory.disk")

LEDGER_NAME = ".agent-memory.jsonl"
REASONS = ("forgotten", "expired", "replaced", "conflict")


@dataclasses.dataclass(frozen=True)
class Entry:
    """One file the tool put in the trash."""

    trash: str  # vault-relative path inside .trash/
    source: str  # vault-relative path it came from (where restore puts it back)
    id: str
    reason: str  # one of REASONS
    at: str  # canonical UTC time it was put there
    sha256: str  # of the bytes put there: a file holding others is not the tool's any more
    inode: int = 0  # and the file itself: a person's rename (say, Obsidian deleting a note
    ctime_ns: int = 0  # they had moved back) changes its ctime, so it is not the tool's either

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), ensure_ascii=False, sort_keys=True)

    @property
    def record_hash(self) -> str:
        """The hash the register keeps for this line (of its canonical JSON)."""
        return digest(self.to_json().encode("utf-8"))

    @property
    def record(self) -> str:
        """How ``doctor`` names this line."""
        return record_id("trash", self.record_hash)


def _digest(path: Path) -> tuple[os.stat_result, str] | None:
    """The stat and sha256 of the regular file at ``path``, both from one descriptor
    opened without following a link: what a synced folder swaps in between a look at
    the name and the read is never what is hashed. None for anything else there."""
    try:
        fd = nofollow.open_read(path)
    except OSError:
        return None
    try:  # looked at before it is wrapped: a folder cannot be, and would keep the descriptor open
        found = os.fstat(fd)
        if not stat_kind.S_ISREG(found.st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return found, hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:  # unreadable: not known to be the tool's
        return None
    finally:
        os.close(fd)


class Trash:
    """The trash folder of one vault (``root/.trash``), refused when it is a symlink."""

    def __init__(self, root: Path, fsync_dir: Callable[[Path], None], write_temp: Callable[[Path, bytes], Path],
                 changed: Callable[[str, str, str], None] | None = None,
                 memories_folder: Callable[[], str] = str) -> None:
        self.root = root
        self._memories_folder = memories_folder  # its date folders in the trash go once empty, as at the top
        self._changed = changed  # the store's record of what a write did to the vault
        self.folder = root / TRASH_DIRNAME
        self.ledger = self.folder / LEDGER_NAME
        self._fsync_dir = fsync_dir  # the store's: one place bytes reach the disk
        self._write_temp = write_temp
        self.register = Register(root)
        self.tracked = Tracked(root)

    # ------------------------------------------------------------------ safety
    def check(self) -> None:
        """A ``.trash`` that is a symlink (a ``git pull`` can bring one) would send
        forgotten memories out of the vault and let ``gc`` delete files elsewhere."""
        try:
            found = os.lstat(self.folder)
        except FileNotFoundError:
            return
        if stat_kind.S_ISLNK(found.st_mode) or not stat_kind.S_ISDIR(found.st_mode):
            raise VaultError(
                f"{self.folder} is a symlink or not a folder; the tool only moves files into a real .trash/ folder "
                "inside the vault. Replace it with a folder (mkdir) and retry."
            )

    def _inside(self, rel: str) -> Path:
        """The absolute path of a trash entry: the trash rule (``confine.trash_path``: in
        the real ``.trash/`` folder, no symlinked folder on the way)."""
        return confine.trash_path(self.root, rel)

    def _make_folder(self, folder: Path) -> None:
        """Create a folder inside the trash, refusing a symlinked folder on the way (one
        arriving by ``git pull`` would send forgotten memories out of the vault)."""
        for part in (*reversed(folder.relative_to(self.folder).parents), folder.relative_to(self.folder)):
            step = self.folder / part
            if step.is_symlink():
                raise PathRefused(f"{step.relative_to(self.root).as_posix()} is a symlink: not in the vault's .trash/ "
                                  "folder. Replace it with a real folder and retry.")
        folder.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ the ledger
    def entries(self) -> list[Entry]:
        """Every recorded entry, oldest first (a damaged line is skipped, not fatal)."""
        try:
            fd = nofollow.open_read(self.ledger)
            try:  # a folder planted there cannot be wrapped, and would keep the descriptor open
                with os.fdopen(fd, "rb", closefd=False) as handle:
                    lines = handle.read().decode("utf-8").splitlines()
            finally:
                os.close(fd)
        except FileNotFoundError:
            return []
        except (OSError, UnicodeError) as exc:
            raise VaultError(f"Cannot read the trash ledger {self.ledger}: {exc}. It must be a plain file; move it "
                             "aside and retry.") from exc
        out = []
        for line in lines:
            try:
                out.append(Entry(**nofollow.load_json(line)))
            except (ValueError, TypeError):
                continue
        return out

    def _append(self, entry: Entry) -> None:
        """One line at the end of the ledger, fsynced; a line a full disk cut short
        before is ended first, so it damages only itself."""
        fd = nofollow.open_write(self.ledger, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
            size = os.fstat(fd).st_size
            line = (entry.to_json() + "\n").encode("utf-8")
            if size:
                os.lseek(fd, size - 1, os.SEEK_SET)  # (O_APPEND writes at the end whatever the offset)
                if os.read(fd, 1) != b"\n":
                    line = b"\n" + line
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)

    def acts(self, entry: Entry) -> bool:
        """Whether a ledger line may act (``refused`` says why not)."""
        return self.refused(entry) is None

    def refused(self, entry: Entry) -> str | None:
        """Why a ledger line may not act: its paths break the trash rule, git tracks the
        ledger, or this user's register does not list it. None when it may."""
        problem = confine.trash_problem(entry.trash) or confine.memory_problem(entry.source)
        if problem:
            return f"names {entry.trash!r} from {entry.source!r}, which " + problem
        return refusal(self.register, self.tracked, "trash", entry.record_hash, f"{TRASH_DIRNAME}/{LEDGER_NAME}")

    def unlisted(self) -> list[tuple[Entry, str]]:
        """The ledger lines that may not act, with why (``doctor`` lists them)."""
        entries = self.entries()
        if not entries:
            return []
        return [(e, why) for e in entries if (why := self.refused(e)) is not None]

    def adopt(self, entry: Entry) -> None:
        """A person decided a ledger line is theirs (``doctor --apply``): list it, after
        the trash rule."""
        self._inside(entry.trash)
        confine.memory_path(self.root, entry.source)
        self.register.enter("trash", entry.record_hash)

    def drop_line(self, entry: Entry) -> None:
        """Remove one line from the ledger (``doctor --discard``); its file stays where it is."""
        self._rewrite([e for e in self.entries() if e != entry])
        self.register.done("trash", entry.record_hash)

    def _rewrite(self, keep: list[Entry]) -> None:
        """The ledger whole, atomically, through a temp file of an unguessable name that
        must not exist: a name a plant can take (a symlink in ``.trash/``) is never written."""
        tmp = self._write_temp(self.folder, "".join(e.to_json() + "\n" for e in keep).encode("utf-8"))
        try:
            os.replace(tmp, self.ledger)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def _still_ours(self, entry: Entry) -> bool:
        """The entry's file is the one the tool put there, unchanged: same bytes, and (where
        recorded) the same inode and ctime, so a person's file at that path never counts."""
        held = _digest(self.root / entry.trash)
        if held is None:
            return False
        found, sha256 = held
        if entry.inode and (found.st_ino, found.st_ctime_ns) != (entry.inode, entry.ctime_ns):
            return False
        return sha256 == entry.sha256

    def live(self) -> list[Entry]:
        """Entries that may act and whose file is still there as the tool put it, newest first."""
        return [e for e in reversed(self.entries()) if self._still_ours(e) and self.acts(e)]

    # ------------------------------------------------------------------ putting things in
    def _free_name(self, source: str, reason: str, now: str) -> Path:
        """``.trash/<source>`` for a forgotten or expired memory (numbered if taken); a
        version or conflict copy says so and when: ``<stem>.replaced-20260720T090000Z.md``."""
        stem, suffix = (source[:-3], ".md") if source.endswith(".md") else (source, "")
        if reason in ("replaced", "conflict"):
            stem += f".{reason}-{now.replace('-', '').replace(':', '')}"
        for n in range(1, 10_000):
            target = self.folder / (f"{stem}{suffix}" if n == 1 else f"{stem}-{n}{suffix}")
            if not os.path.lexists(target):
                return target
        raise VaultError(f"Too many copies of {source} in the trash; run `agent-memory gc`.")

    def move_in(self, path: Path, source: str, memory_id: str, reason: str, now: str) -> str:
        """Move ``path`` (a file in the vault, or a displaced temp file) to the trash as a
        copy of ``source``; returns its vault-relative trash path."""
        try:
            return self._move_in(path, source, memory_id, reason, now)
        except OSError as exc:
            raise disk_error(exc, f"move {source} to the trash") from exc

    def _move_in(self, path: Path, source: str, memory_id: str, reason: str, now: str) -> str:
        self.check()
        target = self._free_name(source, reason, now)
        self._make_folder(target.parent)
        rel = target.relative_to(self.root).as_posix()
        # Noted first in this user's register: a process killed between the move and the
        # ledger line is finished or undone by the next write (``finish_interrupted``).
        # Not fsynced (two more flushes per forget): a power cut in that window can still
        # leave the file in .trash/ without its line, as before there was a note.
        intent = self.register.intend({"op": "trash", "from": str(path), "to": rel, "source": source,
                                       "id": memory_id, "reason": reason, "at": now}, durable=False)
        try:
            try:
                locking.move_no_replace(path, target)  # never over a file already in the trash
            except FileExistsError:
                return self._move_in(path, source, memory_id, reason, now)
            try:
                self._record(target, rel, source, memory_id, reason, now)
            except BaseException as exc:
                self._move_back(target, path, rel, source, exc)  # never a file in the trash that nothing records
                raise
        finally:
            self.register.drop_intent(intent)
        if self._changed is not None and path == self.root / source:  # a memory left the vault (not a parked copy)
            self._changed(source, reason, rel)
        return rel

    def finish_interrupted(self) -> list[str]:
        """Moves into the trash a crash cut between the move and the ledger line (their
        intents are in this user's register): a file that landed without its line goes
        back where it came from, or, where that name is taken now, gets its line. Returns
        the trash paths looked at. Never raises: one odd intent must not stop every write."""
        done = []
        for noted, intent in self.register.intents():
            try:
                if intent.get("op") == "trash":
                    self._finish_one(intent)
                    done.append(str(intent.get("to")))
            except (OSError, VaultError, ValueError, TypeError) as exc:
                log.warning("could not finish a move into the trash a crash interrupted (%s); it is noted in %s",
                            exc, noted)
                continue
            self.register.drop_intent(noted)
        return done

    def _finish_one(self, intent: dict[str, Any]) -> None:
        rel, origin = str(intent["to"]), Path(str(intent["from"]))
        target = self._inside(rel)
        if not os.path.lexists(target) or any(e.trash == rel for e in self.entries()):
            return  # never moved, or recorded: nothing to do
        if not os.path.lexists(origin) and origin.parent.is_dir():
            locking.move_no_replace(target, origin)  # undone: the vault as it was
            self._fsync_dir(origin.parent)
            return
        self._record(target, rel, str(intent["source"]), str(intent["id"]), str(intent["reason"]), str(intent["at"]))

    def _record(self, target: Path, rel: str, source: str, memory_id: str, reason: str, now: str) -> None:
        """Enter a file just moved in: in the register, then its ledger line."""
        # The bytes that moved, read where they are now: a save that replaced the file
        # just before the move is what moved, and must count as the tool's to put back.
        held = _digest(target)
        if held is None:
            raise VaultError(f"{rel} is no longer a file in the trash; nothing was recorded for it.")
        found, sha256 = held
        entry = Entry(trash=rel, source=source, id=memory_id, reason=reason, at=now, sha256=sha256,
                      inode=found.st_ino, ctime_ns=found.st_ctime_ns)
        # A version copy is a spare (the memory itself stays): its entry's name need not
        # be made durable; a forgotten memory or a displaced save is the only copy.
        self.register.enter("trash", entry.record_hash, durable=reason != "replaced")
        try:
            self._append(entry)
            self._fsync_dir(target.parent)
        except BaseException:
            self.register.done("trash", entry.record_hash)
            raise

    def _move_back(self, target: Path, path: Path, rel: str, source: str, why: BaseException) -> None:
        """Put a file whose record could not be written back where it was."""
        try:
            locking.move_no_replace(target, path)
        except OSError as exc:
            raise VaultError(
                f"{source} was moved to {rel}, but it could not be recorded there ({why}) nor put back "
                f"({exc.strerror or exc}); move it back by hand (mv {rel} {source})."
            ) from why

    def copy_in(self, data: bytes, source: str, memory_id: str, reason: str, now: str) -> str:
        """Keep ``data`` (e.g. a body about to be replaced) as a trash copy of ``source``."""
        self.check()
        target = self._free_name(source, reason, now)
        here = (self.root / source).parent  # a folder the orphan sweep walks, should a crash come now
        try:
            self._make_folder(target.parent)
            tmp = self._write_temp(here if here.is_dir() else target.parent, data)
        except OSError as exc:
            raise disk_error(exc, f"keep the previous version of {source} in the trash") from exc
        return self.move_in(tmp, source, memory_id, reason, now)

    # ------------------------------------------------------------------ taking things out
    def purge(self, older_than: dt.timedelta, now: dt.datetime,
              progress: Progress | None = None) -> tuple[list[str], int, list[str]]:
        """Delete the tool's own entries older than ``older_than``; returns (removed, kept,
        refused: ledger lines naming a file outside ``.trash/``, left as they are).

        A file in the trash the tool did not put there (Obsidian's, a person's), or one
        that no longer holds the recorded bytes, is never deleted."""
        self.check()
        removed: list[str] = []
        refused: list[str] = []
        keep: list[Entry] = []
        entries = self.entries()
        done: list[Entry] = []
        looked = Every(progress, "emptying the trash", len(entries))
        for n, entry in enumerate(entries, 1):
            looked(n)
            try:
                if not self.acts(entry):
                    raise PathRefused(entry.trash)
                path = self._inside(entry.trash)
            except PathRefused:  # a tampered, planted or replayed line: never followed, never dropped
                refused.append(entry.trash)
                keep.append(entry)
                continue
            try:
                at = dt.datetime.fromisoformat(entry.at)
            except ValueError:
                keep.append(entry)
                continue
            if not os.path.lexists(path):
                done.append(entry)  # restored or removed by hand: the record goes
                continue
            if now - at >= older_than and self._still_ours(entry):
                path.unlink()
                self._tidy(path)
                removed.append(entry.trash)
                done.append(entry)
            else:
                keep.append(entry)
        if len(keep) != len(entries):
            self._rewrite(keep)
        for entry in done:
            self.register.done("trash", entry.record_hash)
        return removed, len(self.live()), refused

    def _tidy(self, path: Path) -> None:
        """The trash's date folders ``path`` (a file taken out or deleted) leaves empty."""
        openat.remove_empty_dated(self.root, path.relative_to(self.root).as_posix(),
                                  (TRASH_DIRNAME, f"{TRASH_DIRNAME}/{self._memories_folder()}".rstrip("/")))

    def find(self, key: str) -> Entry | None:
        """The newest live entry for a memory id, its original path or its trash path."""
        key = key.strip().replace("\\", "/").removeprefix("./")
        for entry in self.live():
            if key in (entry.id, entry.source, entry.trash):
                return entry
        return None

    def find_refused(self, key: str) -> tuple[Entry, str] | None:
        """The newest ledger line for ``key`` that may not act, with why (for a clear error
        where ``find`` finds nothing)."""
        key = key.strip().replace("\\", "/").removeprefix("./")
        for entry, why in reversed(self.unlisted()):
            if key in (entry.id, entry.source, entry.trash):
                return entry, why
        return None

    def take_out(self, entry: Entry, target: Path) -> None:
        """Put an entry back at ``target``, never replacing a file there."""
        path = self._inside(entry.trash)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            locking.move_no_replace(path, target)
            self._fsync_dir(target.parent)
        except FileExistsError:
            raise
        except OSError as exc:
            raise disk_error(exc, f"restore {entry.trash}") from exc
        self._tidy(path)
        if self._changed is not None:
            self._changed(target.relative_to(self.root).as_posix(), "restored", entry.trash)
        self.register.done("trash", entry.record_hash)  # done: a replay of its line never acts again
        try:
            self._rewrite([e for e in self.entries() if e != entry])
        except (OSError, VaultError):
            pass  # the file is back; a line whose file is gone acts no more and goes at the next gc

    def files(self) -> Iterator[Path]:
        """Every file in the trash (the tool's and others'), for counting."""
        for folder, _dirs, names in os.walk(self.folder):
            for name in names:
                if name != LEDGER_NAME:
                    yield Path(folder) / name
