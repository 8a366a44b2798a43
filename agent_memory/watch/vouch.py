"""A running watcher vouches for the index, the way git's fsmonitor does, so a command
that opens the vault can skip its start-up walk.

In the vault's own ``.index/``: ``watcher.lock`` (the watcher's ``flock``),
``watcher.json`` (its health) and ``cookies/`` (a command asks, the watcher answers once
it has folded in every change made before). Any doubt means a full reconcile; vouching
only ever saves a walk. The protocol: docs/design/vouching.md.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import time
from pathlib import Path
from typing import Any

from ..disk import nofollow, openat
from ..disk.layout import INDEX_DIRNAME
from ..trust.confine import real_folder

try:  # POSIX
    import fcntl
except ImportError:  # Windows: no watcher vouches there; every command reconciles
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = "watcher.lock"
HEALTH_NAME = "watcher.json"
COOKIES_DIRNAME = "cookies"
ACK_SUFFIX = ".ack"
COOKIE_WAIT = 0.1  # seconds a command waits for the watcher's answer before it walks itself
COOKIE_POLL = 0.001
STALE_COOKIE_AGE = 60.0  # seconds: a cookie or answer this old was left by a command that died
RECORD_LIMIT = 64 << 10  # bytes of the health file or an answer: they are a few hundred
COOKIE_NAME = re.compile(r"[0-9]+-[0-9a-f]{16}")
# What a command or the watcher leaves in cookies/: a cookie, its answer, an answer's temp file.
_LEFT_BEHIND = re.compile(r"[0-9]+-[0-9a-f]{16}(?:\.ack)?|\.[0-9]+-[0-9a-f]{16}\.ack\.[0-9a-f]{8}\.tmp")

log = logging.getLogger("agent_memory.vouch")


# File systems whose files change where inotify cannot see it (another machine, the
# Windows side of WSL, a host sharing a folder with a VM or container): a watcher there
# misses edits, so it never vouches.
REMOTE_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "virtiofs", "afs", "ceph", "glusterfs", "lustre", "gpfs",
    "davfs", "vboxsf", "vmhgfs", "prl_fs", "fuse.sshfs", "fuse.rclone", "fuse.davfs2", "fuse.s3fs",
    "fuse.gcsfuse", "fuse.vmhgfs-fuse", "fuse.glusterfs", "fuse.cephfs", "fuse.drive", "fuse.onedriver",
})
MOUNTS = Path("/proc/self/mounts")


def filesystem_of(path: Path, mounts: str) -> str | None:
    """The type of the file system ``path`` (absolute, symlinks resolved) lies on, from
    the text of ``/proc/self/mounts`` (the longest mount point holding it)."""
    best, kind = -1, None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])  # \040 is a space
        inside = str(path) == point or str(path).startswith(point.rstrip("/") + "/")
        if inside and len(point) > best:
            best, kind = len(point), fields[2]
    return kind


def remote_filesystem(root: Path) -> str | None:
    """The vault's file system type when edits there can happen out of inotify's sight
    (``REMOTE_FILESYSTEMS``); None on a local one, or where that cannot be told (not
    Linux: other systems' watchers are not trusted with network volumes either way)."""
    try:
        mounts = MOUNTS.read_text(encoding="utf-8", errors="replace")
        kind = filesystem_of(root.resolve(), mounts)
    except (OSError, RuntimeError):
        return None
    return kind if kind in REMOTE_FILESYSTEMS else None


def identity_of(root: Path) -> list[int] | None:
    """The vault folder's (device, inode): a folder renamed or replaced is another vault."""
    try:
        found = os.stat(root)
    except OSError:
        return None
    return [found.st_dev, found.st_ino]


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = nofollow.open_write(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


class Voucher:
    """The watcher's side: hold the lock, keep the health file, answer cookies."""

    def __init__(self, control_dir: Path, root: Path, index_path: Path) -> None:
        self.control_dir = control_dir
        self.cookies = control_dir / COOKIES_DIRNAME
        self._root = root
        self._index = str(index_path)
        self._fd: int | None = None
        self._started = time.time()
        self._generation = 0
        self._reported: tuple[bool, float] | None = None  # (healthy, when) last written

    def acquire(self) -> bool:
        """Take the lock; False if another watcher holds it (it vouches, this one just
        keeps its own index current), the folder cannot be written, or the vault is on a
        file system whose changes inotify may not see (``remote_filesystem``)."""
        if fcntl is None:
            return False
        remote = remote_filesystem(self._root)
        if remote is not None:
            log.warning("the vault is on a %s file system, where edits made elsewhere reach no watcher: commands "
                        "check the files themselves instead of trusting this watcher", remote)
            return False
        try:
            self.cookies.mkdir(parents=True, exist_ok=True)
            fd = nofollow.open_write(self.control_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT)
        except OSError:
            return False
        if not real_folder(self.cookies):  # a link a pull or a synced folder put there: commands walk
            log.warning("%s is a symlink or a file, not the folder the watcher answers commands in; this watcher "
                        "vouches for nothing until it is removed", self.cookies)
            os.close(fd)
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        self.report(healthy=False)
        return True

    def report(self, *, healthy: bool, lost: bool = False) -> None:
        """Replace the health file (``lost``: events may have been lost, a new generation)."""
        if self._fd is None:
            return
        if lost:
            self._generation += 1
        health = {"pid": os.getpid(), "vault": identity_of(self._root), "index": self._index,
                  "started": self._started, "heartbeat": time.time(), "generation": self._generation,
                  "healthy": healthy}
        try:
            _write_atomically(self.control_dir / HEALTH_NAME, json.dumps(health).encode("utf-8"))
        except OSError:
            pass  # a full disk: commands find no fresh health and walk themselves
        self._reported = (healthy, time.monotonic())

    def beat(self, healthy: bool, every: float) -> None:
        """Rewrite the health file if the health changed, or ``every`` seconds anyway."""
        if self._reported is None or self._reported[0] != healthy or time.monotonic() - self._reported[1] >= every:
            self.report(healthy=healthy)

    def answer(self, name: str, ok: bool) -> None:
        """Acknowledge one cookie: everything queued before it is in the index (``ok``),
        or this watcher cannot vouch right now."""
        if self._fd is None or not real_folder(self.cookies):  # swapped for a link since: nothing written through it
            return
        ack = self.cookies / f"{name}{ACK_SUFFIX}"
        try:
            _write_atomically(ack, json.dumps({"ok": ok, "generation": self._generation}).encode("utf-8"))
        except OSError:
            return  # the command waits out its timeout and walks itself
        # A command that gave up waiting (a busy machine) removes its cookie, then its
        # answer: an answer written after that would be left behind. The cookie gone
        # means nobody reads this answer, so it goes too.
        if not (self.cookies / name).exists():
            try:
                os.unlink(ack)
            except OSError:
                pass

    def tidy(self) -> None:
        """Remove cookies and answers left by commands that died while waiting: only names
        the tool gives them, in the real ``cookies/`` folder, opened without following a
        link (a pull can put ``.index/cookies`` there as a link to a person's folder,
        whose old files this would delete)."""
        try:
            fd = os.open(self.cookies, openat.FOLDER_FLAGS)
        except OSError:
            return
        try:
            now = time.time()
            for entry in list(os.scandir(fd)):
                try:
                    if _LEFT_BEHIND.fullmatch(entry.name) and \
                            now - entry.stat(follow_symlinks=False).st_mtime > STALE_COOKIE_AGE:
                        os.unlink(entry.name, dir_fd=fd)
                except OSError:
                    continue
        finally:
            os.close(fd)

    def release(self) -> None:
        """Stop vouching: the health file goes first, then the lock."""
        if self._fd is None:
            return
        try:
            os.unlink(self.control_dir / HEALTH_NAME)
        except OSError:
            pass
        fd, self._fd = self._fd, None
        os.close(fd)  # closing the descriptor releases the flock


def is_cookie(rel: str) -> str | None:
    """The cookie name if a vault-relative path is a command's cookie, else None."""
    prefix, _, name = rel.rpartition("/")
    if prefix == f"{INDEX_DIRNAME}/{COOKIES_DIRNAME}" and COOKIE_NAME.fullmatch(name):
        return name
    return None


def _lock_held(control_dir: Path) -> bool:
    """Whether a live process holds the watcher lock (a shared lock cannot be had)."""
    if fcntl is None:
        return False
    try:
        fd = nofollow.open_read(control_dir / LOCK_NAME)  # a pipe planted there waits for no writer
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # also releases the shared lock, when it was had
    return False


def _read_json(path: Path) -> Any:
    """The watcher's health file or a cookie's answer, read as untrusted: a ``git pull``
    can check a force-added ``.index/watcher.json`` out as a link to ``/dev/zero`` while
    the watcher runs. Never through a link, never waiting on a pipe, at most a few KB
    (``OSError`` or ``ValueError`` otherwise; ``FileNotFoundError`` when there is none)."""
    return json.loads(nofollow.read_record(path, limit=RECORD_LIMIT))


def _health(control_dir: Path) -> dict[str, Any] | None:
    try:
        found = _read_json(control_dir / HEALTH_NAME)
    except (OSError, ValueError, RecursionError):
        return None
    return found if isinstance(found, dict) else None


def vouched(control_dir: Path, root: Path, index_path: Path, wait: float | None = None) -> bool:
    """Whether a live, healthy watcher of this vault and this index confirms that
    everything changed up to now is in the index (see the module docstring). Costs one
    lock probe when no watcher runs; with one, a cookie and its answer (a few ms)."""
    if not _lock_held(control_dir):
        return False
    health = _health(control_dir)
    if (health is None or health.get("healthy") is not True or health.get("index") != str(index_path)
            or health.get("vault") != identity_of(root)):
        return False
    cookies = control_dir / COOKIES_DIRNAME
    if not real_folder(cookies):  # a link: no cookie is left in the folder it names
        return False
    name = f"{os.getpid()}-{secrets.token_hex(8)}"
    cookie, ack = cookies / name, cookies / f"{name}{ACK_SUFFIX}"
    try:
        os.close(nofollow.open_write(cookie, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    except OSError:
        return False
    try:
        deadline = time.monotonic() + (COOKIE_WAIT if wait is None else wait)
        while True:
            try:
                answer = _read_json(ack)
            except FileNotFoundError:
                answer = None
            except (OSError, ValueError, RecursionError):
                return False
            if answer is not None:
                return isinstance(answer, dict) and answer.get("ok") is True and _lock_held(control_dir)
            if time.monotonic() > deadline:
                return False
            time.sleep(COOKIE_POLL)
    finally:
        for path in (cookie, ack):
            try:
                os.unlink(path)
            except OSError:
                pass
