"""The vault's git repository: running git safely, finding the repository, and
``agent-memory git setup`` (the merge driver's ``.gitattributes`` line and config).

git always runs as ``git -C <folder>`` without a shell, with a timeout,
``GIT_OPTIONAL_LOCKS=0`` and config that keeps hooks, fsmonitor, pagers, editors,
external diffs and signatures off, whatever the repository's own config says: a
``.git/`` synced from elsewhere (a shared folder) must not turn into code that the
tool's own git commands run. Programs named in the repository's own config (filters,
merge drivers, ``uploadpack``...) are replaced as well (``repository_overrides``); what a
person configured for reaching the remote (``core.sshCommand``, credential helpers) is
theirs and is used by ``sync``'s fetch and push. A repository that belongs to another
user is refused, as git's ``safe.directory`` rule does.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from .errors import VaultError
from .disk.layout import TMP_SUFFIX

GIT_TIMEOUT = 30.0  # seconds for one git command
DRIVER = "agent-memory"  # the merge driver's name in .gitattributes and in merge.<name>.* config
ATTRIBUTES_LINE = f"*.md merge={DRIVER}"
DRIVER_NAME = "agent-memory: memory files merged key by key (tags as sets, the later updated)"

# No hooks: os.devnull is no folder, so git finds no hook in it.
HOOKS_OFF = ("-c", f"core.hooksPath={os.devnull}")
# Settings that would make a command run programs or change output, whatever the repository says.
BASE_CONFIG = (
    "-c", "core.quotePath=false", "-c", "core.fsmonitor=false", "-c", "log.showSignature=false",
    "-c", "color.ui=false", "-c", "diff.external=", "-c", "log.follow=false", "-c", "diff.relative=false",
    "-c", "core.pager=cat", "-c", "core.editor=true", "-c", "sequence.editor=true",
    "-c", "protocol.ext.allow=never", "-c", "submodule.recurse=false", "-c", "fetch.recurseSubmodules=false",
)
SAFE_CONFIG = (*BASE_CONFIG, *HOOKS_OFF)
TEXT_MERGE = "git merge-file --marker-size=%L %A %O %B"  # git's own line merge, as a merge driver


def env() -> dict[str, str]:
    environ = dict(os.environ)
    environ.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", LC_ALL="C", GIT_PAGER="cat", PAGER="cat",
                   GIT_EDITOR="true", GIT_SEQUENCE_EDITOR="true")
    environ.pop("GIT_INDEX_FILE", None)  # a caller's temporary index is no business of ours
    environ.pop("GIT_EXTERNAL_DIFF", None)
    return environ


def dubious_owner(stderr: bytes) -> str | None:
    """The clear refusal for git's "detected dubious ownership" (a repository another user
    owns), or None when git said something else."""
    text = stderr.decode("utf-8", "replace")
    if "dubious ownership" not in text:
        return None
    where = text.split("repository at '", 1)[1].split("'", 1)[0] if "repository at '" in text else "the vault"
    return (f"The git repository {where} belongs to another user, so agent-memory runs no git command in it "
            "(git's safe.directory rule: a repository someone else controls could make git run their programs as "
            f"you). If you trust it, mark it safe: git config --global --add safe.directory {shlex.quote(where)}")


# A key of the repository's own config that names a program git would run for the tool's
# commands, and the value that replaces it: filters pass the bytes through, a merge driver
# other than ours is git's own text merge, signing programs are git's defaults. (What
# reaches the remote, core.sshCommand and credential helpers, is the person's and is left
# alone; a local remote's upload/receive-pack program is named on the command line by
# ``sync``, as the first value in the config would win over ``-c``.)
_PROGRAM_KEYS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"filter\..+\.(?:clean|smudge|process)"), ""),
    (re.compile(r"filter\..+\.required"), "false"),
    (re.compile(r"merge\.(.+)\.driver"), TEXT_MERGE),
    (re.compile(r"gpg\.program|gpg\.openpgp\.program"), "gpg"),
    (re.compile(r"gpg\.x509\.program"), "gpgsm"),
    (re.compile(r"gpg\.ssh\.program"), "ssh-keygen"),
    (re.compile(r"gpg\.ssh\.defaultkeycommand|core\.alternaterefscommand"), ""),
)
_REPOSITORY_SCOPES = ("local", "worktree")
_overrides: dict[Path, tuple[object, tuple[str, ...]]] = {}
_overrides_lock = threading.Lock()


def _config_stamp(files: tuple[Path, ...]) -> object:
    stamps: list[tuple[int, int, int] | None] = []
    for path in files:
        try:
            found = os.stat(path)
        except OSError:
            stamps.append(None)
            continue
        stamps.append((found.st_mtime_ns, found.st_size, found.st_ino))
    return tuple(stamps)


def repository_overrides(folder: Path, config_files: tuple[Path, ...], keep: str = "") -> tuple[str, ...]:
    """``-c`` arguments that replace every program the repository's own config
    (``.git/config``, ``config.worktree`` and what they include) names for git to run;
    ``keep`` is a merge driver left as it is (ours, which the caller pins itself).
    Read again when those files change."""
    stamp = _config_stamp(config_files)
    with _overrides_lock:
        cached = _overrides.get(folder)
        if cached is not None and cached[0] == stamp:
            return cached[1]
    done = run(folder, "config", "--list", "--show-scope", "-z", task="read the repository's config")
    tokens = done.stdout.decode("utf-8", "surrogateescape").split("\0") if done.returncode == 0 else []
    out: list[str] = []
    for scope, entry in zip(tokens[::2], tokens[1::2], strict=False):
        if scope not in _REPOSITORY_SCOPES:
            continue
        key = entry.split("\n", 1)[0]
        for pattern, value in _PROGRAM_KEYS:
            match = pattern.fullmatch(key.lower())
            if match and not (match.groups() and match[1] == keep.lower()):
                out += ["-c", f"{key}={value}"]
                break
    result = tuple(out)
    with _overrides_lock:
        _overrides[folder] = (stamp, result)
    return result


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
        refused = dubious_owner(done.stderr)
        if refused:
            raise VaultError(refused + ".")
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
    pinned = _pin_attributes(root, prefix, task)
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
        raise VaultError(f"git cannot find the repository's info folder: {first_line(done.stderr)}.")
    path = root / done.stdout.decode("utf-8", "surrogateescape").strip()
    line = pin_line(prefix)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    except OSError as exc:
        raise VaultError(f"Cannot read {path}: {exc.strerror or exc}.") from exc
    text = data.decode("utf-8", "surrogateescape")
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
