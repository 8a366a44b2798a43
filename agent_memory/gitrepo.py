"""The vault's git repository: running git safely, finding the repository, and
``agent-memory git setup`` (the merge driver's ``.gitattributes`` line and config).

git always runs as ``git -C <folder>`` without a shell, with a timeout,
``GIT_OPTIONAL_LOCKS=0`` and config that keeps fsmonitor, external diffs and signatures
off, whatever the repository's own config says.
"""

from __future__ import annotations

import os
import secrets
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from .errors import VaultError
from .store import TMP_SUFFIX

GIT_TIMEOUT = 30.0  # seconds for one git command
DRIVER = "agent-memory"  # the merge driver's name in .gitattributes and in merge.<name>.* config
ATTRIBUTES_LINE = f"*.md merge={DRIVER}"
DRIVER_NAME = "agent-memory: memory files merged key by key (tags as sets, the later updated)"

# Settings that would make a command run programs or change output, whatever the repository says.
SAFE_CONFIG = (
    "-c", "core.quotePath=false", "-c", "core.fsmonitor=false", "-c", "log.showSignature=false",
    "-c", "color.ui=false", "-c", "diff.external=", "-c", "log.follow=false", "-c", "diff.relative=false",
)


def env() -> dict[str, str]:
    environ = dict(os.environ)
    environ.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", LC_ALL="C", GIT_PAGER="cat", PAGER="cat")
    environ.pop("GIT_INDEX_FILE", None)  # a caller's temporary index is no business of ours
    return environ


def run(folder: Path, *args: str, task: str, retry: str = "", stdin: bytes | None = None,
        ) -> subprocess.CompletedProcess[bytes]:
    """``git -C folder args``; ``task`` says what git was asked to do, for the error when
    git is missing or too slow (``read the history``), ``retry`` what to try then."""
    try:
        return subprocess.run(
            ["git", "-C", str(folder), *SAFE_CONFIG, *args], input=stdin, capture_output=True,
            timeout=GIT_TIMEOUT, env=env(), check=False,
        )
    except FileNotFoundError:
        raise VaultError(f"git is not installed (or not on PATH), so agent-memory cannot {task}.") from None
    except subprocess.TimeoutExpired:
        raise VaultError(
            f"git took more than {GIT_TIMEOUT:.0f} s to {task}; nothing was changed." + (f" {retry}" if retry else "")
        ) from None


def first_line(data: bytes) -> str:
    lines = data.decode("utf-8", "replace").strip().splitlines()
    if not lines:
        return "git failed"
    for prefix in ("fatal: ", "error: "):
        if lines[0].startswith(prefix):
            return lines[0][len(prefix):]
    return lines[0]


def repository(root: Path, *, task: str = "read the history",
               consequence: str = "its memories have no history",
               advice: str = "and commit it to get one") -> tuple[Path, str]:
    """The top folder of the repository holding ``root`` and ``root``'s prefix in it
    (``''`` at the root, ``'notes/.memory/'`` in a subfolder). A vault not in git is a
    clear error: ``consequence`` says what that means for the command, ``advice`` what
    to do after putting the vault in git."""
    done = run(root, "rev-parse", "--show-toplevel", "--show-prefix", task=task)
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace")
        if "not a git repository" in message:
            raise VaultError(
                f"The vault {root} is not in a git repository, so {consequence}. "
                f"Keep the vault in git (`git init` in it, or in a folder above it) {advice}."
            )
        raise VaultError(f"git cannot read the vault's repository: {first_line(done.stderr)}.")
    lines = done.stdout.decode("utf-8", "surrogateescape").split("\n")
    return Path(lines[0]), (lines[1] if len(lines) > 1 else "")


def replace_file(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all: a temp file beside it (fsynced), then a rename.

    A crash or an error leaves the old file as it was, never a truncated one."""
    tmp = path.with_name(f".{secrets.token_hex(6)}{TMP_SUFFIX}")
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError:
        mode = 0o644
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        tmp.unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------- git setup


def driver_command(python: str | None = None) -> str:
    """The merge driver's command line, run by git through ``sh``.

    The interpreter is named by its absolute path: GUI clients and Obsidian Git do not
    have the venv on their PATH. If the driver cannot run at all (the interpreter or the
    package is gone: exit 126/127, or Python's exit 1 leaving %A as it was) git's own
    text merge runs instead (``git merge-file``), so the result is the usual conflict
    markers with both sides, never our side alone. Exit 1 with %A changed (markers
    written) is the driver's own "conflicts remain": a file is compared by ``cksum``
    before and after, not searched for markers, since a note may hold a line that
    starts with ``<<<<<<<`` already."""
    interpreter = shlex.quote(python or sys.executable)
    return (
        f"h=$(cksum < %A); {interpreter} -m agent_memory merge-file %O %A %B %L %P"
        " || { s=$?; [ \"$s\" -eq 1 ] && [ \"$(cksum < %A)\" != \"$h\" ] && exit 1;"
        " git merge-file --marker-size=%L -L ours -L base -L theirs %A %O %B; }"
    )


def setup(root: Path, python: str | None = None) -> dict[str, Any]:
    """``agent-memory git setup``: ``*.md merge=agent-memory`` in the vault's own
    ``.gitattributes`` (which scopes it to the vault's folder when the vault is a
    subfolder of the repository; other lines kept, never written twice) and the driver
    in the repository's config. Safe to run again: it only changes what differs."""
    task = "set up the merge driver"
    top, prefix = repository(root, task=task, consequence="there is no merge driver to set up",
                             advice="and run `agent-memory git setup` again")
    attributes = root / ".gitattributes"
    changed = _add_attributes_line(attributes)
    command = driver_command(python)
    config: dict[str, str] = {}
    for key, value in ((f"merge.{DRIVER}.name", DRIVER_NAME), (f"merge.{DRIVER}.driver", command)):
        done = run(root, "config", "--local", key, value, task=task)
        if done.returncode != 0:
            raise VaultError(f"git could not write {key} to the repository's config: {first_line(done.stderr)}.")
        config[key] = value
    return {
        "repository": str(top), "vault_prefix": prefix, "gitattributes": str(attributes),
        "attributes_line": ATTRIBUTES_LINE, "gitattributes_changed": changed, "config": config,
        "note": "Commit .gitattributes so every clone uses the driver; each clone runs `agent-memory git setup` "
                "once, since git never shares its config. Merges elsewhere (a hosting site's merge button, a clone "
                "without setup) use git's plain text merge.",
    }


def driver_problem(root: Path) -> str | None:
    """Why the merge driver this vault's ``.gitattributes`` asks for would not run as
    ``git setup`` registers it now (``doctor``): not registered in this clone, an
    interpreter that is gone, or a command an older version wrote. None when it is
    current, or when the vault does not ask for it."""
    try:
        text = (root / ".gitattributes").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
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


def _sets_merge_for_md(tokens: list[str]) -> bool:
    return bool(tokens) and tokens[0] == "*.md" and any(t.lstrip("-!").split("=")[0] == "merge" for t in tokens[1:])


def _add_attributes_line(path: Path) -> bool:
    """Append the driver's line to ``.gitattributes`` unless it is there; True if written."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    except OSError as exc:
        raise VaultError(f"Cannot read {path}: {exc.strerror or exc}.") from exc
    text = data.decode("utf-8", "surrogateescape")
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
