"""Running git for the tool, safely, and finding the vault's repository: the one runner
(``run``) every git command goes through, and the one finder (``find_repo``).

git always runs as ``git -C <folder>`` without a shell, with a timeout, no standard input
but what is given, ``GIT_OPTIONAL_LOCKS=0``, literal pathspecs, and config that keeps
hooks, fsmonitor, pagers, editors, external diffs and signatures off, whatever the
repository's own config says: a ``.git/`` synced from elsewhere (a shared folder) must
not turn into code that the tool's own git commands run. Programs named in the
repository's own config (filters, merge drivers, ``uploadpack``...) are replaced as well
(``repository_overrides``), and our merge driver is pinned to this install's command;
what a person configured for reaching the remote (``core.sshCommand``, credential
helpers) is theirs and is used by ``sync``'s fetch and push. A repository that belongs to
another user is refused, as git's ``safe.directory`` rule does.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..disk import nofollow
from ..errors import GitError

GIT_TIMEOUT = 30.0  # seconds for one git command that reads
LOCAL_TIMEOUT = 120.0  # a commit runs the repository's hooks, which may be slow
DRIVER = "agent-memory"  # the merge driver's name in .gitattributes and in merge.<name>.* config
DRIVER_NAME = "agent-memory: memory files merged key by key (tags as sets, the later updated)"
TEXT_MERGE = "git merge-file --marker-size=%L %A %O %B"  # git's own line merge, as a merge driver
COMMIT_TASK = "commit or sync the vault"
GITFILE_LIMIT = 1 << 20  # bytes of a `.git` file, as git reads it at most
COMMIT_RETRY = "Retry, or run the step by hand to see what it waits for."

# No hooks: os.devnull is no folder, so git finds no hook in it.
HOOKS_OFF = ("-c", f"core.hooksPath={os.devnull}")
# Settings that would make a command run programs or change output, whatever the repository says.
BASE_CONFIG = (
    "-c", "core.quotePath=false", "-c", "core.fsmonitor=false", "-c", "log.showSignature=false",
    "-c", "color.ui=false", "-c", "diff.external=", "-c", "log.follow=false", "-c", "diff.relative=false",
    "-c", "core.pager=cat", "-c", "core.editor=true", "-c", "sequence.editor=true",
    "-c", "protocol.ext.allow=never", "-c", "submodule.recurse=false", "-c", "fetch.recurseSubmodules=false",
    # status and diff look inside a submodule's work tree by running git there, which reads
    # that repository's own config (a filter a synced folder planted with it): never.
    "-c", "diff.ignoreSubmodules=all",
)
SAFE_CONFIG = (*BASE_CONFIG, *HOOKS_OFF)
# The environment of a git that runs us (the merge driver) names its repository: a
# command run outside any repository (``git merge-file`` on temp files) takes none of it.
_REPOSITORY_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_PREFIX", "GIT_INDEX_FILE")


def git_env() -> dict[str, str]:
    """The environment every git command runs with: no prompts, no pager or editor, C
    messages, no optional locks, no caller's temporary index or external diff."""
    environ = dict(os.environ)
    environ.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", LC_ALL="C", GIT_PAGER="cat", PAGER="cat",
                   GIT_EDITOR="true", GIT_SEQUENCE_EDITOR="true", GIT_LITERAL_PATHSPECS="1",
                   GIT_MERGE_AUTOEDIT="no")
    environ.pop("GIT_INDEX_FILE", None)  # a caller's temporary index is no business of ours
    environ.pop("GIT_EXTERNAL_DIFF", None)
    return environ


def run(folder: Path, *args: str, task: str, retry: str = "", timeout: float = GIT_TIMEOUT,
        config: tuple[str, ...] = SAFE_CONFIG, env: dict[str, str] | None = None, optional_locks: bool = False,
        stdin: bytes | None = None, outside_repository: bool = False) -> subprocess.CompletedProcess[bytes]:
    """``git -C folder args``. ``task`` says what git was asked to do, for the error when
    git is missing or too slow (``read the history``), ``retry`` what to try then;
    ``env`` adds to the environment, ``optional_locks`` lets git take its optional locks
    (commands that write), ``outside_repository`` drops a calling git's repository."""
    if not outside_repository:
        refuse_special_files(folder)
    environment = git_env()
    if optional_locks:
        environment.pop("GIT_OPTIONAL_LOCKS", None)
    if outside_repository:
        for name in _REPOSITORY_ENV:
            environment.pop(name, None)
    environment.update(env or {})
    try:
        return subprocess.run(["git", "-C", str(folder), *config, *args], capture_output=True, input=stdin,
                              stdin=None if stdin is not None else subprocess.DEVNULL, timeout=timeout,
                              env=environment, check=False)
    except FileNotFoundError:
        raise GitError(f"git is not installed (or not on PATH), so agent-memory cannot {task}.") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took more than {timeout:.0f} s to {task} and was stopped; nothing else was "
                       "done." + (f" {retry}" if retry else "")) from None


# The files of a git folder git reads to find the repository, its state and its refs. A
# named pipe there (a synced folder carries pipes; so can a device or a socket) makes git
# wait on it for ever (git 2.39: rev-parse, status, log, commit): the tool's git stopped
# only at its timeout, and every command of a vault in that repository took 30-120 s.
_READ_BY_GIT = ("config", "config.worktree", "commondir", "HEAD", "index", "packed-refs", "ORIG_HEAD", "FETCH_HEAD",
                "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD", "AUTO_MERGE", "shallow")


def refuse_special_files(folder: Path) -> None:
    """Raise ``GitError`` before any git command runs in ``folder`` when the git folder
    of its repository holds, where git reads, a file that is no regular file (a named
    pipe, a device, a socket), naming it and what to do."""
    for git_dir in _git_folders(folder):
        found = next(_special_files(git_dir), None)
        if found is not None:
            raise GitError(
                f"{found} is a named pipe or another special file, not a file git keeps, so agent-memory runs no git "
                "command in this repository (git would wait on it for ever). A synced folder can bring one: remove it "
                "(a branch's ref comes back with git fetch, or from another clone), then retry."
            )


def _git_folders(folder: Path) -> list[Path]:
    """The git folders a git command in ``folder`` reads: ``GIT_DIR``'s, else that of the
    first ``.git`` above it (the folder, or the one a ``.git`` file names), with the
    common folder a linked worktree's ``commondir`` names. Read as untrusted."""
    if os.environ.get("GIT_DIR"):
        found = [folder / os.environ["GIT_DIR"]]  # relative: to the folder git runs in (-C)
    else:
        found = []
        for above in (folder, *folder.parents):
            marker = above / ".git"
            if marker.is_dir():
                found = [marker]
                break
            if os.path.lexists(marker):
                named = gitfile_target(marker)
                found = [] if named is None else [named]
                break
    try:
        common = nofollow.read_record(found[0] / "commondir", limit=GITFILE_LIMIT).decode("utf-8", "replace").strip()
        found.append(found[0] / common)
    except (IndexError, OSError, ValueError):
        pass  # none: the git folder is the common one
    return found


def _special_files(git_dir: Path) -> Iterator[Path]:
    """The files git reads in ``git_dir`` (``_READ_BY_GIT``, every ref under ``refs/``)
    that are pipes, devices or sockets, links to one included; a regular file costs no
    stat (the folder's listing says what it is)."""
    for name in _READ_BY_GIT:
        if _special(git_dir / name):
            yield git_dir / name
    folders = [git_dir / "refs"]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(Path(entry.path))
                    elif not entry.is_file(follow_symlinks=False) and _special(Path(entry.path)):
                        yield Path(entry.path)
        except OSError:
            continue  # no refs folder, or not a folder: git finds no refs there either


def _special(path: Path) -> bool:
    try:
        mode = os.stat(path).st_mode
    except OSError:  # absent, a dangling link, a loop: nothing git would wait on
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode)


def first_line(done: subprocess.CompletedProcess[bytes]) -> str:
    """git's message, one line: its first ``error:``/``fatal:`` line, else its first line."""
    lines = [line.strip() for line in (done.stderr or done.stdout).decode("utf-8", "replace").splitlines() if line.strip()]
    for n, line in enumerate(lines):
        if line.startswith(("fatal:", "error:")):
            text = line.split(":", 1)[1].strip()
            if text.endswith(":"):  # "...would be overwritten by merge:" and the files on the next lines
                names = [x for x in lines[n + 1 : n + 4] if not x.startswith(("Please", "Aborting", "hint:"))]
                text = f"{text} {', '.join(names)}".rstrip(": ")
            return text
    return lines[0] if lines else f"exit status {done.returncode}"


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
# other than ours is git's own text merge, signing programs are git's defaults. Section and
# key names are compared in any case, as git does; a subsection (a driver's name) exactly,
# as git does too: ``merge.Agent-Memory.driver`` is another driver than ours. (What
# reaches the remote, core.sshCommand and credential helpers, is the person's and is left
# alone; a local remote's upload/receive-pack program is named on the command line by
# ``sync``, as the first value in the config would win over ``-c``.)
_PROGRAM_KEYS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"filter\..+\.(?:clean|smudge|process)", re.IGNORECASE), ""),
    (re.compile(r"filter\..+\.required", re.IGNORECASE), "false"),
    (re.compile(r"merge\.(.+)\.driver", re.IGNORECASE), TEXT_MERGE),
    (re.compile(r"gpg\.program|gpg\.openpgp\.program", re.IGNORECASE), "gpg"),
    (re.compile(r"gpg\.x509\.program", re.IGNORECASE), "gpgsm"),
    (re.compile(r"gpg\.ssh\.program", re.IGNORECASE), "ssh-keygen"),
    (re.compile(r"gpg\.ssh\.defaultkeycommand|core\.alternaterefscommand", re.IGNORECASE), ""),
)
_REPOSITORY_SCOPES = ("local", "worktree")
_overrides: dict[Path, tuple[object, tuple[Path, ...], object, tuple[str, ...]]] = {}
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
    Read again when those files change, included files too (a tracked file a team's
    clones include can change with any pull); ``config_files`` may name more files whose
    change means reading again (``HEAD``, for ``includeIf "onbranch:…"``)."""
    stamp = _config_stamp(config_files)
    with _overrides_lock:
        cached = _overrides.get(folder)
        if cached is not None and cached[0] == stamp and _config_stamp(cached[1]) == cached[2]:
            return cached[3]
    done = run(folder, "config", "--list", "--show-scope", "--show-origin", "-z", task="read the repository's config")
    tokens = done.stdout.decode("utf-8", "surrogateescape").split("\0") if done.returncode == 0 else []
    out: list[str] = []
    included: list[Path] = []
    for scope, origin, entry in zip(tokens[::3], tokens[1::3], tokens[2::3], strict=False):
        if scope not in _REPOSITORY_SCOPES:
            continue
        if origin.startswith("file:") and (folder / origin[5:]) not in (*config_files, *included):
            included.append(folder / origin[5:])
        key = entry.split("\n", 1)[0]
        for pattern, value in _PROGRAM_KEYS:
            match = pattern.fullmatch(key)
            if match and not (match.groups() and match[1] == keep):
                out += ["-c", f"{key}={value}"]
                break
    result = tuple(out)
    with _overrides_lock:
        _overrides[folder] = (stamp, tuple(included), _config_stamp(tuple(included)), result)
    return result


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


# An operation in progress: the file git keeps for it, what it is, and how a person ends it.
_OPERATIONS = (
    ("rebase-merge", "a rebase", "git rebase --continue, or git rebase --abort"),
    ("rebase-apply", "a rebase or git am", "git rebase --continue (git am --continue), or --abort"),
    ("MERGE_HEAD", "a merge", "resolve the conflicts, git add the files and git commit, or git merge --abort"),
    ("CHERRY_PICK_HEAD", "a cherry-pick", "git cherry-pick --continue, or git cherry-pick --abort"),
    ("REVERT_HEAD", "a revert", "git revert --continue, or git revert --abort"),
)


# Our merge driver as this install runs it, whatever a .git/config synced from elsewhere says.
_DRIVER_PIN = ("-c", f"merge.{DRIVER}.name={DRIVER_NAME}", "-c", f"merge.{DRIVER}.driver={driver_command()}")


@dataclass(frozen=True)
class Repo:
    """The repository a vault is in: its top folder, the vault's prefix in it (``''`` at
    the top, ``'notes/.memory/'`` in a subfolder) and its git folder."""

    vault: Path
    top: Path
    prefix: str
    git_dir: Path
    config_files: tuple[Path, ...] = ()  # the repository's own config files (.git/config, config.worktree)
    hooks: bool = False  # the repository's hooks run (``git.hooks = true``, approved)

    def run(self, *args: str, timeout: float = LOCAL_TIMEOUT, env: dict[str, str] | None = None,
            optional_locks: bool = False, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        """``git -C <vault> <args>``: no shell, literal pathspecs, a timeout, no prompts,
        no hooks (unless opted in) and no program the repository's own config names but
        our merge driver, pinned to this install's command."""
        config = (*BASE_CONFIG, *(() if self.hooks else HOOKS_OFF), *_DRIVER_PIN,
                  *repository_overrides(self.vault, (*self.config_files, self.git_dir / "HEAD"), keep=DRIVER))
        return run(self.vault, *args, task=COMMIT_TASK, retry=COMMIT_RETRY, timeout=timeout, env=env,
                   optional_locks=optional_locks, config=config, stdin=stdin)

    def ok(self, *args: str, **kwargs: Any) -> str:
        """Run git; its stdout, or ``GitError`` with git's first line."""
        done = self.run(*args, **kwargs)
        if done.returncode != 0:
            raise GitError(f"git {args[0]} failed in {self.top}: {first_line(done)}.")
        return done.stdout.decode("utf-8", "surrogateescape")

    def busy_marker(self) -> str | None:
        """What a person (or another program) is in the middle of, or None."""
        found = self.operation()
        return found[0] if found else None

    def operation(self) -> tuple[str, str] | None:
        for name, what, how in _OPERATIONS:
            if (self.git_dir / name).exists():
                return what, how
        return None

    def in_scope(self, subfolder_allowed: bool) -> str | None:
        """Why commits and sync must leave this vault alone, or None."""
        if not self.prefix or subfolder_allowed:
            return None
        return (f"the vault is the folder {self.prefix.rstrip('/')} inside the git repository {self.top}, not its top "
                "folder, so agent-memory neither commits nor syncs it (that would commit to, rebase or push the "
                "repository's branch). Set [git] subfolder = true in the vault's .agent-memory.toml to allow it; "
                "a value this clone has not approved yet (one a pull brought, or written since) takes effect once "
                "you run `agent-memory trust git.subfolder`")


def find_repo(vault: Path, *, task: str = COMMIT_TASK) -> Repo | None:
    """The repository holding ``vault``, or None when it is not in one (``task``: what
    git was asked for, for the error when it cannot say)."""
    done = run(vault, "rev-parse", "--show-toplevel", "--show-prefix", "--absolute-git-dir",
               "--git-path", "config", "--git-path", "config.worktree", task=task)
    if done.returncode != 0:
        if b"not a git repository" in done.stderr:
            return None
        refused = dubious_owner(done.stderr)
        if refused:
            raise GitError(refused + ".")
        raise GitError(f"git cannot read the vault's repository: {first_line(done)}.")
    top, prefix, git_dir, config, worktree = (done.stdout.decode("utf-8", "surrogateescape").split("\n") + [""] * 5)[:5]
    if not _holds_repository(Path(top), Path(git_dir)):
        raise GitError(
            f"The git repository {git_dir} names {top} as its work tree (core.worktree), not the folder it is in, "
            "so agent-memory runs no git command in it: a pull would write files there. If you did not set that, "
            f"remove it: git --git-dir {shlex.quote(git_dir)} config --unset core.worktree."
        )
    return Repo(vault=vault, top=Path(top), prefix=prefix, git_dir=Path(git_dir),
                config_files=(vault / config, vault / worktree))


def _holds_repository(top: Path, git_dir: Path) -> bool:
    """Whether the work tree git reports is where its repository is: ``top/.git`` is the
    git folder, or a file naming it (a linked worktree, a submodule, a clone with
    ``--separate-git-dir``). ``core.worktree`` in a ``.git/config`` synced from elsewhere
    can name any other folder, and every checkout would write there."""
    marker = top / ".git"
    try:
        if marker.is_dir():
            return os.path.samefile(marker, git_dir)
    except OSError:
        return False
    named = gitfile_target(marker)
    try:
        return named is not None and os.path.samefile(named, git_dir)
    except OSError:
        return False


def gitfile_target(marker: Path) -> Path | None:
    """The git folder a ``.git`` file names (``gitdir: <path>``, relative to its folder);
    None for anything else. Read as untrusted (a synced folder can plant ``.git``): never
    through a symlink, never waiting on a pipe, at most a few KB, as git reads it."""
    try:
        line = nofollow.read_record(marker, limit=GITFILE_LIMIT).decode("utf-8", "replace").strip()
    except (OSError, ValueError):
        return None
    if not line.startswith("gitdir:"):
        return None
    return marker.parent / line[len("gitdir:"):].strip()


def repository(root: Path, *, task: str = "read the history",
               consequence: str = "its memories have no history",
               advice: str = "and commit it to get one") -> Repo:
    """``find_repo``, where a vault not in git is a clear error: ``consequence`` says what
    that means for the command, ``advice`` what to do after putting the vault in git."""
    found = find_repo(root, task=task)
    if found is None:
        raise GitError(
            f"The vault {root} is not in a git repository, so {consequence}. "
            f"Keep the vault in git (`git init` in it, or in a folder above it) {advice}."
        )
    return found
