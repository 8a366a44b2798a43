"""Where things are in a vault: finding the vault (``.memory/``, an Obsidian vault, the
way git finds ``.git``), its index folder, the names the tool keeps for itself
(``.index/``, ``.trash/``, temp files), which paths are memories, and the names of new
ones (ids, slugs, dated folders). Pure rules over names; nothing here writes.
"""

from __future__ import annotations

import datetime as dt
import difflib
import hashlib
import os
import re
import secrets
import threading
import time
from pathlib import Path

from ..errors import NoVault
from ..trust import credentials

VAULT_DIRNAME = ".memory"
INDEX_DIRNAME = ".index"
TMP_SUFFIX = ".agent-memory.tmp"
TRASH_DIRNAME = ".trash"
GITIGNORE = (
    "# agent-memory: the index is a cache rebuilt from the files; the trash and temp files stay local\n"
    f"{INDEX_DIRNAME}/\n{TRASH_DIRNAME}/\n*{TMP_SUFFIX}\n"
)
SLUG_MAX = 60
_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
_last_id = [-1, 0]  # (millisecond, random part) of the last id this process made
_id_lock = threading.Lock()


def new_id(now_ms: int | None = None) -> str:
    """16 chars: 10 of millisecond time (sortable) + 6 random (30 bits).


    Two machines writing one git-synced vault would have to pick the same
    millisecond and the same 30 random bits to collide. Within one process, ids
    of one millisecond count up from the first one's random part (as ULIDs do), so
    a frozen clock or a fast loop can never repeat an id and ids stay in order.
    """
    stamp = int(time.time() * 1000) if now_ms is None else now_ms
    with _id_lock:
        if stamp == _last_id[0] and _last_id[1] < (1 << 30) - 1:
            rand = _last_id[1] + 1
        else:
            rand = int.from_bytes(secrets.token_bytes(4), "big") & ((1 << 29) - 1)  # room to count up
        _last_id[:] = [stamp, rand]
    head = "".join(_CROCKFORD[(stamp >> shift) & 31] for shift in range(45, -1, -5))
    tail = "".join(_CROCKFORD[(rand >> shift) & 31] for shift in range(25, -1, -5))
    return head + tail


def derived_id(now_ms: int, key: str) -> str:
    """An id in ``new_id``'s format whose random part comes from ``key`` (an imported
    memory's key in its source system): importing the same source again gives the same id."""
    rand = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:4], "big") & ((1 << 30) - 1)
    head = "".join(_CROCKFORD[(now_ms >> shift) & 31] for shift in range(45, -1, -5))
    tail = "".join(_CROCKFORD[(rand >> shift) & 31] for shift in range(25, -1, -5))
    return head + tail


def make_slug(text: str) -> str:
    """A file name's stem from a title: never a credential, nor the value after a
    credential word ("The wifi password: hunter2" -> ``the-wifi-password-redacted``)."""
    safe = credentials.redact_for_names(text)
    # "…" (which ends a title cut short, ``derive_title``) is "..." to slugify (NFKD).
    plain = safe.replace("\u2026", "...") if "\u2026" in safe else safe
    if plain.isascii() and "&" not in plain:
        return _ascii_slug(plain) or "memory"
    from slugify import slugify  # only other names need it (a 10 ms import): a read does not load it

    return slugify(safe, max_length=SLUG_MAX, word_boundary=True, save_order=True) or "memory"


_NOT_SLUG = re.compile(r"[^a-z0-9]+")
_DIGIT_COMMA = re.compile(r"(?<=\d),(?=\d)")  # "1,000" is one number: 1000


def _ascii_slug(text: str) -> str:
    """python-slugify's slug (as ``make_slug`` asks for it) of ASCII text without "&",
    where it is this: lower case, "1,000" as "1000", every run of anything but a letter
    or digit one "-", then as many whole words as fit ``SLUG_MAX`` (its ``smart_truncate``:
    the first word cut when it alone does not fit). No transliteration, no entities
    ("&amp;"): what is left of slugify's steps does nothing to such text. A test holds
    it to slugify's output on many texts."""
    words = [word for word in _NOT_SLUG.split(_DIGIT_COMMA.sub("", text.lower())) if word]
    slug = "-".join(words)
    if len(slug) < SLUG_MAX or len(words) == 1:
        return slug[:SLUG_MAX]
    kept: list[str] = []
    length = 0
    for word in words:
        if length + len(word) > SLUG_MAX:
            break
        kept.append(word)
        length += len(word) + 1
    return "-".join(kept) if kept else slug[:SLUG_MAX].strip("-")


def dated_folder(created: dt.datetime) -> str:
    return created.astimezone(dt.timezone.utc).strftime("%Y/%m/%d")


def is_memory_name(name: str) -> bool:
    """A ``.md`` file that is not hidden. That already leaves out every editor dropping
    known (vim ``.x.md.swp`` and ``x.md~``, emacs ``.#x.md`` and ``#x.md#``, JetBrains
    ``x.md___jb_tmp___``, macOS ``._x.md``, LibreOffice ``.~lock.x.md#``, ``x.md.tmp``)."""
    return name.endswith(".md") and not name.startswith(".") and encodable(name)


def encodable(name: str) -> bool:
    """Whether a name (or path) is text: bytes that are not UTF-8 (``caf\\xe9.md`` from a Latin-1
    system) reach Python as surrogates, which SQLite cannot store."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_ignored_dir(name: str) -> bool:
    return name.startswith(".")


def is_memory_path(rel: str) -> bool:
    """A vault-relative path the index should hold (no dot-folders, no droppings).


    Absolute paths (an empty first part) are not: ``get("/home/me/x.md")`` must not
    read, index and return a file from outside the vault."""
    parts = rel.split("/")
    return (
        all(parts)
        and not any(is_ignored_dir(p) or not encodable(p) for p in parts[:-1])
        and is_memory_name(parts[-1])
    )


# What a vault's .index/ holds (the database, or the lock every writer takes): a folder
# named .index without either is someone else's.
_INDEX_MARKS = ("index.sqlite3", "write.lock")


def _vault_at(folder: Path, home: Path) -> Path | None:
    """The vault ``folder`` is or holds: a ``.memory/`` in it, the folder itself when it
    is named ``.memory`` or holds a vault's ``.index/``, or an Obsidian vault (a
    ``.obsidian/`` in it, unless it is the home folder, where Obsidian keeps settings)."""
    if (folder / VAULT_DIRNAME).is_dir():
        return folder / VAULT_DIRNAME
    if folder.name == VAULT_DIRNAME or any((folder / INDEX_DIRNAME / mark).exists() for mark in _INDEX_MARKS):
        return folder
    if (folder / ".obsidian").is_dir() and folder != home:
        return folder
    return None


def near_miss(root: Path) -> Path | None:
    """A vault beside ``root`` (which is none) whose name is close to its name: what a
    ``--dir`` with a typo in it (``.memroy``, ``notse``) most likely meant."""
    try:
        names = [entry.name for entry in os.scandir(root.parent) if entry.is_dir() and entry.name != root.name]
    except OSError:
        return None
    home = Path.home().absolute()
    for name in difflib.get_close_matches(root.name, names, n=3, cutoff=0.7):
        found = _vault_at(root.parent / name, home)
        if found is not None:
            return found
    return None


def find_vault(cwd: Path | None = None) -> tuple[Path | None, list[Path]]:
    """The nearest vault in ``cwd`` or its parents, the way git finds ``.git`` (None when
    there is none), and the folders looked in."""
    here = (cwd or Path.cwd()).absolute()
    home = Path.home().absolute()
    looked: list[Path] = []
    for folder in (here, *here.parents):
        looked.append(folder)
        found = _vault_at(folder, home)
        if found is not None:
            return found, looked
    return None, looked


def locate_vault(explicit: str | os.PathLike[str] | None = None, cwd: Path | None = None) -> Path:
    """``--dir``/``AGENT_MEMORY_DIR`` name the vault itself; else the nearest vault in the
    current folder or its parents (``find_vault``), else ``~/.memory``."""
    chosen = explicit or os.environ.get("AGENT_MEMORY_DIR")
    if chosen:
        return Path(chosen).expanduser().absolute()
    found, _looked = find_vault(cwd)
    return found or Path.home() / VAULT_DIRNAME


def require_vault(explicit: str | os.PathLike[str] | None = None, cwd: Path | None = None) -> Path:
    """``locate_vault``, refusing with ``NoVault`` (naming where it looked) when nothing
    was named and no vault was found, not even ``~/.memory``."""
    path = locate_vault(explicit, cwd)
    if explicit or os.environ.get("AGENT_MEMORY_DIR") or path.is_dir():
        return path
    raise NoVault(find_vault(cwd)[1], path)


def index_folder(root: Path, explicit: str | os.PathLike[str] | None = None) -> Path:
    """Where a vault's index lives: ``explicit`` names the folder itself; else
    ``AGENT_MEMORY_INDEX_DIR`` is a parent folder holding one subfolder per vault
    (named after the vault folder and a hash of its full path, so two vaults never
    share one index); else ``<vault>/.index``."""
    if explicit:
        return Path(explicit).expanduser().absolute()
    parent = os.environ.get("AGENT_MEMORY_INDEX_DIR")
    if not parent:
        return root / INDEX_DIRNAME
    digest = hashlib.sha256(str(root.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return Path(parent).expanduser().absolute() / f"{make_slug(root.name)}-{digest}"


def cache_folder(root: Path) -> Path:
    """Where the index of a vault this process cannot write goes: the user's cache
    folder, one subfolder per vault (so a read-only vault can still be searched)."""
    base = os.environ.get("XDG_CACHE_HOME") or (Path.home() / ".cache")
    digest = hashlib.sha256(str(root.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return Path(base).expanduser().absolute() / "agent-memory" / f"{make_slug(root.name)}-{digest}"
