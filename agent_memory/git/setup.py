"""``agent-memory git setup``: the merge driver's line in the vault's ``.gitattributes``
(and, pinned, in ``.git/info/attributes``, which no pull changes) and its command in the
repository's config; ``driver_problem`` is what ``doctor`` says when that is missing or
stale.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
from pathlib import Path
from typing import Any

from ..disk import nofollow
from ..disk.durable import replace_file
from ..errors import VaultError
from .run import DRIVER, DRIVER_NAME, driver_command, first_line, repository, run

ATTRIBUTES_LINE = f"*.md merge={DRIVER}"


def setup(root: Path, python: str | None = None) -> dict[str, Any]:
    """``agent-memory git setup``: ``*.md merge=agent-memory`` in the vault's own
    ``.gitattributes`` (which scopes it to the vault's folder when the vault is a
    subfolder of the repository; other lines kept, never written twice) and the driver
    in the repository's config. Safe to run again: it only changes what differs."""
    task = "set up the merge driver"
    repo = repository(root, task=task, consequence="there is no merge driver to set up",
                      advice="and run `agent-memory git setup` again")
    top, prefix = repo.top, repo.prefix
    attributes = root / ".gitattributes"
    changed = _add_attributes_line(attributes)
    pinned = _pin_attributes(root, prefix, task)
    command = driver_command(python)
    config: dict[str, str] = {}
    for key, value in ((f"merge.{DRIVER}.name", DRIVER_NAME), (f"merge.{DRIVER}.driver", command)):
        done = run(root, "config", "--local", key, value, task=task)
        if done.returncode != 0:
            raise VaultError(f"git could not write {key} to the repository's config: {first_line(done)}.")
        config[key] = value
    return {
        "repository": str(top), "vault_prefix": prefix, "gitattributes": str(attributes),
        "attributes_line": ATTRIBUTES_LINE, "gitattributes_changed": changed, "config": config,
        "info_attributes": str(pinned),
        "note": "Commit .gitattributes so every clone uses the driver; each clone runs `agent-memory git setup` "
                "once, since git never shares its config. The same line in .git/info/attributes, which never "
                "travels, keeps it whatever a pulled .gitattributes says. Merges elsewhere (a hosting site's merge "
                "button, a clone without setup) use git's plain text merge.",
    }


def driver_problem(root: Path) -> str | None:
    """Why the merge driver this vault's ``.gitattributes`` asks for would not run as
    ``git setup`` registers it now (``doctor``): not registered in this clone, an
    interpreter that is gone, or a command an older version wrote. None when it is
    current, or when the vault does not ask for it."""
    try:
        text = _own_text(root / ".gitattributes")  # never through a link (to /dev/zero, say): git ignores one
    except VaultError as exc:
        return str(exc)
    if not any(line.split() == ATTRIBUTES_LINE.split() for line in text.splitlines()):
        return None
    try:
        done = run(root, "config", "--get", f"merge.{DRIVER}.driver", task="read the merge driver")
    except VaultError as exc:
        return str(exc)
    registered = done.stdout.decode("utf-8", "replace").strip()
    if done.returncode != 0 or not registered:
        return ("this clone has no merge driver registered, so git merges memory files as plain text: "
                "run `agent-memory git setup`")
    prefix, _, rest = registered.partition(" -m agent_memory merge-file ")
    interpreter = prefix.removeprefix("h=$(cksum < %A); ")
    try:
        python = shlex.split(interpreter)[0] if rest else ""
    except ValueError:
        python = ""
    if not python or not Path(python).exists():
        return (f"the registered merge driver's interpreter ({interpreter or registered}) is gone, so git falls "
                "back to its plain text merge: run `agent-memory git setup` with this install")
    if registered != driver_command(python):
        return "the registered merge driver was written by an older agent-memory: run `agent-memory git setup`"
    return None


_GLOB = re.compile(r"[\\*?\[]")


def pin_line(prefix: str) -> str:
    """The driver's line for ``$GIT_DIR/info/attributes`` (read from the repository's top,
    above every ``.gitattributes``): the memory files of the vault at ``prefix`` only,
    quoted as git reads a pattern with spaces."""
    if not prefix:
        return ATTRIBUTES_LINE
    pattern = _GLOB.sub(lambda m: "\\" + m[0], prefix) + "**/*.md"
    if any(c in pattern for c in ' "\t') or not pattern.isascii():
        pattern = '"' + pattern.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"{pattern} merge={DRIVER}"


def _pin_attributes(root: Path, prefix: str, task: str) -> Path:
    """Write the driver's line into ``$GIT_DIR/info/attributes`` unless it is its last
    line for these files already: a pulled ``.gitattributes`` cannot change how memory
    files merge in this clone. Returns the file."""
    done = run(root, "rev-parse", "--git-path", "info/attributes", task=task)
    if done.returncode != 0:
        raise VaultError(f"git cannot find the repository's info folder: {first_line(done)}.")
    path = root / done.stdout.decode("utf-8", "surrogateescape").strip()
    line = pin_line(prefix)
    text = _own_text(path)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if lines and lines[-1] == line:
        return path
    if text and not text.endswith("\n"):
        text += "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, (text + line + "\n").encode("utf-8", "surrogateescape"))
    except OSError as exc:
        raise VaultError(f"Cannot write {path}: {exc.strerror or exc}. Nothing else was changed.") from exc
    return path


def _sets_merge_for_md(tokens: list[str]) -> bool:
    return bool(tokens) and tokens[0] == "*.md" and any(t.lstrip("-!").split("=")[0] == "merge" for t in tokens[1:])


def _add_attributes_line(path: Path) -> bool:
    """Append the driver's line to ``.gitattributes`` unless it is there; True if written."""
    text = _own_text(path)
    merge_lines = [line.split() for line in text.splitlines() if _sets_merge_for_md(line.split())]
    if merge_lines and merge_lines[-1] == ATTRIBUTES_LINE.split():
        return False  # already there, and no later line for *.md overrides it
    newline = "\r\n" if "\r\n" in text else "\n"
    if text and not text.endswith("\n"):
        text += newline
    text += ATTRIBUTES_LINE + newline
    try:
        replace_file(path, text.encode("utf-8", "surrogateescape"))
    except OSError as exc:
        raise VaultError(f"Cannot write {path}: {exc.strerror or exc}. Nothing was changed.") from exc
    return True


def _own_text(path: Path) -> str:
    """An attributes file's text ("" when there is none), read only when it is no symlink:
    a symlink there (a pulled ``.gitattributes``, a synced ``.git/``) would
    have its target's bytes, a private file of yours, written back in its place, to be
    committed with the vault."""
    try:
        fd = nofollow.open_read(path)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():
            raise VaultError(f"{path} is a symlink (to {os.readlink(path)}), so git setup leaves it alone: it would "
                             f"copy what the link points to into the vault. Remove it (rm {shlex.quote(str(path))}) "
                             "or make it a regular file, then run git setup again.") from None
        raise VaultError(f"Cannot read {path}: {exc.strerror or exc}.") from exc
    try:
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read().decode("utf-8", "surrogateescape")
    except OSError as exc:  # a folder where the file should be
        raise VaultError(f"Cannot read {path}: {exc.strerror or exc}.") from exc
    finally:
        os.close(fd)
