"""Paths as a person types them, the way git reads them: relative to the current folder
when it is inside the vault, ``:/path`` from the vault root, an absolute path inside the
vault as that file, and so a path from a folder outside the vault into it (``.memory/…``
from the project's folder, as a shell completes it). Ids, note names and MCP arguments
stay as they are (vault-relative).

A command that changes or removes something refuses an argument whose two readings
(from here, from the vault root) both name a file and differ, naming both; a command
that only reads takes the one from here, as git does. A memory that is not found is
reported with the places looked in.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import click

from ..errors import NotFound

ROOT_PREFIX = ":/"
T = TypeVar("T")


@dataclass(frozen=True)
class Reading:
    """What an argument was taken to mean: ``key`` for the vault, and where it looked
    (``here``: the reading from the current folder when that differs from the typed one)."""

    typed: str
    key: str
    here: str | None = None


def _here(root: Path) -> str | None:
    """The current folder relative to the vault root (``""`` at the root), or None when
    it is outside the vault."""
    try:
        cwd = Path.cwd().resolve()
        rel = cwd.relative_to(root.resolve())
    except (OSError, ValueError):
        return None
    return rel.as_posix() if rel.parts else ""


def _inside(rel: str) -> bool:
    return rel not in ("", ".") and not rel.startswith("../") and rel != ".." and not rel.startswith("/")


def _file(root: Path, rel: str) -> bool:
    """Whether ``rel`` (with or without ``.md``) is a file in the vault."""
    for name in (rel, rel + ".md"):
        try:
            if (root / name).is_file():
                return True
        except OSError:
            continue
    return False


def _absolute(root: Path, typed: str) -> str | None:
    """An absolute path inside the vault as a vault-relative one (None otherwise)."""
    try:
        rel = Path(os.path.abspath(typed)).resolve().relative_to(root.resolve())
    except (OSError, ValueError):
        return None
    return rel.as_posix()


def read_path(root: Path, typed: str, *, changes: bool, folder: bool = False) -> Reading:
    """The vault key for a memory or folder argument as typed (see the module's rule).

    ``changes``: the command changes or removes something, so two readings that both
    exist and differ are refused (a ``click.ClickException`` naming both). ``folder``: the
    argument names a folder (``--path``), so the readings are checked as folders."""
    if typed.startswith(ROOT_PREFIX):
        return Reading(typed, typed[len(ROOT_PREFIX):].lstrip("/") or "")
    if os.path.isabs(typed):
        rel = _absolute(root, typed)
        return Reading(typed, rel if rel is not None else typed)
    here = _here(root)
    if here is None:  # outside the vault: a path from here into it (.memory/2026/…) is that file
        mine = _absolute(root, typed)
    elif here:
        mine = posixpath.normpath(posixpath.join(here, typed))
    else:  # at the vault root: the argument as typed, tidied (./en/Plugins is en/Plugins)
        tidy = posixpath.normpath(typed)
        return Reading(typed, tidy if _inside(tidy) else typed)
    if mine is None or not _inside(mine) or mine == typed:
        return Reading(typed, typed)

    def exists(rel: str) -> bool:
        return (root / rel).is_dir() if folder else _file(root, rel)

    if not exists(mine):
        return Reading(typed, typed, here=mine)
    if changes and exists(typed):
        raise click.ClickException(
            f"{typed!r} names two files: {mine} (from the current folder) and {typed} (from the vault root "
            f"{root}). Say which: {ROOT_PREFIX}{mine} or {ROOT_PREFIX}{typed}.")
    return Reading(typed, mine)


def target_path(root: Path, typed: str, source_path: str) -> str:
    """Where ``mv`` puts a note: a bare name (no ``/``) renames it in its own folder (as
    Obsidian's rename does); ``:/path`` is from the vault root; a path with a folder is
    from the current folder when that is inside the vault, or when the path leads from
    outside into it. When the readings differ and
    both folders exist, refused naming both."""
    if typed.startswith(ROOT_PREFIX):
        return typed[len(ROOT_PREFIX):].lstrip("/")
    if os.path.isabs(typed):
        rel = _absolute(root, typed)
        return rel if rel is not None else typed
    if "/" not in typed and typed not in (".", ".."):
        return posixpath.join(posixpath.dirname(source_path), typed)
    here = _here(root)
    if here is None:  # outside the vault: a path from here into it, as an absolute one
        inside = _absolute(root, typed)
        return inside + ("/" if typed.endswith("/") else "") if inside and _inside(inside) else typed
    if not here:
        return typed
    mine = posixpath.normpath(posixpath.join(here, typed)) + ("/" if typed.endswith("/") else "")
    if not _inside(mine.rstrip("/")) or mine == typed:
        return typed

    def folder_of(rel: str) -> bool:
        rel = rel.rstrip("/")
        return (root / (rel if typed.endswith("/") else posixpath.dirname(rel) or ".")).is_dir()

    if folder_of(typed) and folder_of(mine):
        raise click.ClickException(
            f"{typed!r} can be read two ways: {mine} (from the current folder) or {typed} (from the vault root "
            f"{root}). Say which: {ROOT_PREFIX}{mine} or {ROOT_PREFIX}{typed}.")
    return typed if folder_of(typed) and not folder_of(mine) else mine


@contextmanager
def looked_where(root: Path, readings: list[Reading]) -> Iterator[None]:
    """A memory not found names the places looked in: the path from the current folder,
    from the vault root (and as an id or note name)."""
    try:
        yield
    except NotFound as exc:
        reading = next((r for r in readings if exc.memory_id in (r.key, r.typed)), None)
        if reading is None:
            raise
        _not_a_note(root, reading)
        places = [f"{reading.here} from the current folder"] if reading.here else []
        places.append(f"{reading.key} from the vault root {root}" if "/" in reading.key or reading.key.endswith(".md")
                      else f"an id or note name {reading.key!r} in the vault {root}")
        raise NotFound(reading.typed, looked=places) from None


def _not_a_note(root: Path, reading: Reading) -> None:
    """A path not found as a memory that names a folder or a file other than a note:
    say which, and what to do with it, rather than "it may have been forgotten"."""
    for rel in dict.fromkeys(r for r in (reading.here, reading.key) if r and _inside(r)):
        if any(part.startswith(".") for part in rel.split("/")):
            continue  # .obsidian/, .trash/: never memories, and not a folder to list
        try:
            place = root / rel
            if place.is_dir():
                raise click.ClickException(f"{rel} is a folder, not a note: `agent-memory list --path {ROOT_PREFIX}{rel}` "
                                           "lists the notes in it.")
            if place.is_file() and not rel.endswith(".md"):
                raise click.ClickException(f"{rel} is not a note: only .md files in the vault are memories. "
                                           "Open it with another program.")
        except OSError:
            continue


def each(root: Path, typed: list[str], *, changes: bool) -> list[Reading]:
    return [read_path(root, t, changes=changes) for t in typed]


def keys(readings: list[Reading]) -> list[str]:
    return [r.key for r in readings]


def resolved(root: Path, typed: str, *, changes: bool, call: Callable[[str], T]) -> T:
    """``call`` with the vault key for ``typed``, a not-found naming where it looked."""
    reading = read_path(root, typed, changes=changes)
    with looked_where(root, [reading]):
        return call(reading.key)
