"""Records the tool did not act on, for ``agent-memory doctor``: listing them, and
applying or discarding one once a person has decided.

A record this user's register does not list (``register.py``) is set aside in
``.index/set-aside/<id>/`` (a move's journal, an import's staging, a parked write, git
journal lines) or, for a trash ledger line, left in the ledger. It may be a plant, or
genuine: written on another of this user's machines, or before this user's state folder
was lost. ``listing`` says what each would do (read-only); ``apply`` enters it in the
register and lets it act, through the same checks as any record (``confine.py``);
``discard`` deletes it (a ledger line only: its file stays in ``.trash/``).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import confine
from ..errors import InvalidInput, PathRefused
from .register import ABOUT, SET_ASIDE_DIRNAME, Register, Tracked, digest, record_id, refusal
from ..disk.layout import INDEX_DIRNAME
from ..disk.layout import TRASH_DIRNAME
from ..disk.nofollow import load_json, read_record
from ..disk.trash import LEDGER_NAME, Entry, Trash

if TYPE_CHECKING:
    from ..vault.vault import Vault

_ID = re.compile(r"(move|import|parked|trash|git-pending)-[0-9a-f]{12}(-[0-9]{1,4})?")
IN_PLACE = "in place: set aside by the next command that meets it"


@dataclasses.dataclass
class Record:
    """One record not acted on: how to name it, what it is, why, what applying would do."""

    id: str
    kind: str
    origin: str  # where the tool found it
    why: str
    would: str
    where: str  # where it is now

    def line(self) -> str:
        return f"{self.id}: {self.origin} ({self.why}); applying it would {self.would} [{self.where}]"


# --------------------------------------------------------------------------- listing (read-only)


def listing(root: Path) -> list[Record]:
    """Every record of the vault the tool does not act on: set aside, still in place, or
    a trash ledger line. Reads only."""
    register, tracked = Register(root), Tracked(root)
    return [*_set_aside(root), *_in_place(root, register, tracked), *_ledger(root)]


def _set_aside(root: Path) -> list[Record]:
    base = root / INDEX_DIRNAME / SET_ASIDE_DIRNAME
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    out = []
    for name in names:
        about = _about(base / name)
        if _ID.fullmatch(name) and about is not None:
            kind = name.split("-")[0] if not name.startswith("git-") else "git-pending"
            out.append(Record(name, kind, _text(about.get("from")), _text(about.get("why")),
                              _would(base / name / "record", kind),
                              f"{INDEX_DIRNAME}/{SET_ASIDE_DIRNAME}/{name}/record"))
    return out


def _would(record: Path, kind: str) -> str:
    """What applying a set-aside record would do, read from the record itself, as applying
    it reads it: its ``about.json`` is a file in the vault too, and a plant's note may say
    anything ("nothing in the vault changes")."""
    from ..git.commits import PENDING_FILE, pending_would
    from ..vault.moves import MANIFEST as MOVE_MANIFEST
    from ..vault.moves import MOVE_DIRNAME, move_would
    from ..disk.staging import MANIFEST as IMPORT_MANIFEST
    from ..disk.staging import STAGING_DIRNAME, import_would
    from ..disk.store import parked_would

    try:
        if kind == "move":
            return move_would(read_record(record / MOVE_DIRNAME / MOVE_MANIFEST))
        if kind == "import":
            return import_would(read_record(record / STAGING_DIRNAME / IMPORT_MANIFEST))
        if kind == "git-pending":
            return pending_would(read_record(record / PENDING_FILE).split(b"\n")[:-1])
        [parked] = [p for p in record.iterdir() if p.suffix == ".json" and not p.is_symlink()]
        return parked_would(read_record(parked))
    except (OSError, ValueError):
        return "do nothing: it holds no record of its kind (discard it)"


def _about(folder: Path) -> dict[str, Any] | None:
    try:
        loaded = load_json(read_record(folder / ABOUT, 1 << 20))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def _text(value: object) -> str:
    """A set-aside folder's own words, shown, never trusted (it is a file in the vault)."""
    return str(value)[:500] if value is not None else "?"


def _in_place(root: Path, register: Register, tracked: Tracked) -> list[Record]:
    """Records still where the tool would look for them that it will not act on."""
    from ..vault.moves import MANIFEST as MOVE_MANIFEST
    from ..vault.moves import MOVE_DIRNAME, move_would
    from ..disk.staging import MANIFEST as IMPORT_MANIFEST
    from ..disk.staging import STAGING_DIRNAME, import_would
    from ..disk.store import parked_would

    control = root / INDEX_DIRNAME
    found: list[tuple[str, str, bytes, str]] = []
    for kind, folder, manifest, would in (("move", MOVE_DIRNAME, MOVE_MANIFEST, move_would),
                                          ("import", STAGING_DIRNAME, IMPORT_MANIFEST, import_would)):
        try:
            raw = read_record(control / folder / manifest)
        except (OSError, ValueError):
            continue
        found.append((kind, f"{INDEX_DIRNAME}/{folder}", raw, would(raw)))
    try:  # (a link there names a person's folder, not the tool's parked files)
        parked_dir = control / "parked"
        parked = sorted(p for p in parked_dir.iterdir() if p.suffix == ".json") if confine.real_folder(parked_dir) else []
    except OSError:
        parked = []
    for path in parked:
        try:
            raw = read_record(path)
        except (OSError, ValueError):
            continue
        found.append(("parked", f"{INDEX_DIRNAME}/parked/{path.name}", raw, parked_would(raw)))
    found.extend(_pending_in_place(control, register, tracked))
    out = []
    for kind, origin, raw, said in found:
        why = refusal(register, tracked, kind, digest(raw), origin)
        if why is not None:
            out.append(Record(record_id(kind, digest(raw)), kind, origin, why, said, IN_PLACE))
    return out


def _pending_in_place(control: Path, register: Register, tracked: Tracked) -> list[tuple[str, str, bytes, str]]:
    """The git journal's lines the register does not list, as the one record they become
    when the committer sets them aside."""
    from ..git.commits import PENDING_FILE, pending_would

    origin = f"{INDEX_DIRNAME}/{PENDING_FILE}"
    try:
        lines = read_record(control / PENDING_FILE).split(b"\n")[:-1]
    except (OSError, ValueError):
        return []
    every = bool(tracked.among([origin]))
    aside = [line for line in lines if every or not register.listed("git-pending", digest(line))]
    if not aside:
        return []
    return [("git-pending", origin, b"".join(line + b"\n" for line in aside), pending_would(aside))]


def _ledger(root: Path) -> list[Record]:
    trash = _trash(root)
    try:
        refused = trash.unlisted()
    except Exception:  # noqa: BLE001 - a ledger that cannot be read is reported by gc and restore
        return []
    return [Record(entry.record, "trash", f"{TRASH_DIRNAME}/{LEDGER_NAME}: {entry.trash}", why,
                   f"let gc delete {entry.trash!r} after its retention and restore put it back at {entry.source!r}",
                   f"{TRASH_DIRNAME}/{LEDGER_NAME}")
            for entry, why in refused]


def _trash(root: Path) -> Trash:
    from ..disk.durable import fsync_folder

    def no_write(_folder: Path, _data: bytes) -> Path:
        raise InvalidInput("reading only")

    return Trash(root, fsync_folder, no_write)


# --------------------------------------------------------------------------- deciding


def gather(vault: Vault) -> None:
    """Set aside every record still in place that the register does not list, so each
    has its one id and place (opening the vault already did this for moves and imports)."""
    vault.finish_interrupted_move()
    vault.store.set_aside_unlisted_parked()
    vault.git_state.pending.read()


def apply(vault: Vault, rid: str) -> str:
    """Let a record a person decided is theirs act: it goes through the checks of its kind
    (``confine``), is entered in this user's register and acts once. Returns what was done."""
    with vault.core.writing():
        gather(vault)
        entry = _ledger_line(vault, rid)
        if entry is not None:
            _not_tracked(vault, f"{TRASH_DIRNAME}/{LEDGER_NAME}")
            vault.store.trash.adopt(entry)
            return (f"{rid}: {entry.trash} is the tool's again: gc deletes it after its retention, "
                    f"`agent-memory restore {entry.trash}` puts it back at {entry.source}")
        folder, kind = _found(vault.root, rid)
        done = _APPLY[kind](vault, folder / "record")
        shutil.rmtree(folder, ignore_errors=True)
        return f"{rid}: {done}"


def discard(vault: Vault, rid: str) -> str:
    """Delete a record a person decided is not theirs (a ledger line: its file stays in
    ``.trash/``, the tool's no more). Returns what was done."""
    with vault.core.writing():
        gather(vault)
        entry = _ledger_line(vault, rid)
        if entry is not None:
            vault.store.trash.drop_line(entry)
            return f"{rid}: its line is gone from the trash ledger; {entry.trash} stays as it is, no file of the tool's"
        folder, _kind = _found(vault.root, rid)
        shutil.rmtree(folder)
        return f"{rid}: deleted"


def _ledger_line(vault: Vault, rid: str) -> Entry | None:
    if not rid.startswith("trash-"):
        return None
    for entry, _why in vault.store.trash.unlisted():
        if entry.record == rid:
            return entry
    raise _unknown(rid)


def _found(root: Path, rid: str) -> tuple[Path, str]:
    if not _ID.fullmatch(rid):
        raise InvalidInput(f"{rid!r} is not a record's id; `agent-memory doctor` lists them (e.g. move-3fa2c1d0e9b8).")
    folder = root / INDEX_DIRNAME / SET_ASIDE_DIRNAME / rid
    if folder.is_symlink() or not (folder / "record").is_dir() or (folder / "record").is_symlink():
        raise _unknown(rid)
    kind = "git-pending" if rid.startswith("git-pending-") else rid.split("-")[0]
    return folder, kind


def _unknown(rid: str) -> InvalidInput:
    return InvalidInput(f"No record {rid!r} is waiting for a decision (applied or discarded already?); "
                        "`agent-memory doctor` lists the records the tool did not act on.")


def _apply_move(vault: Vault, record: Path) -> str:
    from ..vault.moves import MOVE_DIRNAME, checked_manifest, raw_manifest

    journal = record / MOVE_DIRNAME
    raw = raw_manifest(journal)
    if raw is None:
        raise InvalidInput("This record holds no move's manifest; nothing can be undone from it. Discard it.")
    manifest = checked_manifest(vault.root, journal, raw)  # PathRefused: a path no memory may have
    place = _put_back(vault, journal, MOVE_DIRNAME, "move", raw)
    try:
        kept = vault.undo_recorded_move(place, raw)
    except BaseException:
        if place.exists():  # still set aside, under the same id, for the person to look at again
            os.rename(place, journal)
        vault.store.register.done("move", digest(raw))
        raise
    return (f"the move of {manifest['old']} to {manifest['new']} was undone"
            + (f"; saves made since stand in {', '.join(kept)}" if kept else ""))


def _apply_import(vault: Vault, record: Path) -> str:
    from ..disk.staging import MANIFEST, STAGING_DIRNAME, checked_items

    staging = record / STAGING_DIRNAME
    try:
        raw = read_record(staging / MANIFEST)
    except (OSError, ValueError) as exc:
        raise InvalidInput("This record holds no import's manifest; nothing can be finished from it. "
                           "Discard it.") from exc
    try:
        checked_items(staging, vault.root, raw)
    except (ValueError, TypeError, KeyError) as exc:
        raise PathRefused(f"The staged import cannot be finished: {exc}. Nothing was changed; discard it.") from exc
    _put_back(vault, staging, STAGING_DIRNAME, "import", raw)
    published = vault.finish_interrupted_import()
    return f"the staged import was finished: {published} file(s) put in the vault"


def _apply_parked(vault: Vault, record: Path) -> str:
    jsons = [p for p in record.iterdir() if p.suffix == ".json" and not p.is_symlink()]
    if len(jsons) != 1:
        raise InvalidInput("This record holds no parked file's record; discard it.")
    stem = jsons[0].name[:-5]
    raw = read_record(jsons[0])
    _not_tracked(vault, f"{INDEX_DIRNAME}/parked/{stem}.json")
    confine.tool_folder(vault.store.parked_dir)
    for path in record.iterdir():
        if path.name in (f"{stem}.json", f"{stem}.md", f"{stem}.held") and not path.is_symlink():
            target = vault.store.parked_dir / path.name
            if os.path.lexists(target):
                raise InvalidInput(f"{target} exists; nothing was changed.")
            os.rename(path, target)
    vault.store.register.enter("parked", digest(raw), durable=False)
    kept = vault.store.settle_one(stem)
    return "the parked file was settled" + (f": its bytes are kept in {', '.join(kept)}" if kept else " (deleted: "
                                            "it held what a write had checked)")


def _apply_pending(vault: Vault, record: Path) -> str:
    from ..git.commits import PENDING_FILE

    lines = read_record(record / PENDING_FILE).split(b"\n")
    entries = []
    for line in lines:
        try:
            entry = load_json(line)
        except ValueError:
            continue
        paths = entry.get("paths") if isinstance(entry, dict) else None
        if isinstance(paths, list) and isinstance(entry.get("message"), str):
            for path in paths:
                confine.memory_path(vault.root, path)  # PathRefused: nothing is committed from this record
            entries.append({"paths": paths, "message": entry["message"]})
    _not_tracked(vault, f"{INDEX_DIRNAME}/{PENDING_FILE}")
    pending = vault.git_state.pending
    for entry in entries:
        pending.add(entry)
    return f"{len(entries)} write(s) will be committed at the next commit or sync"


def _put_back(vault: Vault, folder: Path, name: str, kind: str, raw: bytes) -> Path:
    """A set-aside journal back where the tool looks for it, entered in the register."""
    place = vault.store.control_dir / name
    _not_tracked(vault, f"{INDEX_DIRNAME}/{name}")
    if os.path.lexists(place):
        raise InvalidInput(f"{place} is in use by another {kind}; finish that one first (reopen the vault), "
                           "then apply this record again.")
    vault.store.register.enter(kind, digest(raw))
    try:
        os.rename(folder, place)
    except OSError:
        vault.store.register.done(kind, digest(raw))
        raise
    return place


def _not_tracked(vault: Vault, origin: str) -> None:
    if vault.store.tracked.among([origin]):
        raise InvalidInput(f"git tracks {origin}, so a record put back there would be set aside again; stop tracking "
                           f"it first (git rm -r --cached {origin}), then apply this record again.")


_APPLY = {"move": _apply_move, "import": _apply_import, "parked": _apply_parked, "git-pending": _apply_pending}
