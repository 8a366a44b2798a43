"""The vault's settings file, ``<vault>/.agent-memory.toml`` (SPEC §1): the one loader.

The file is optional and committed with the vault, so everyone who syncs the vault
gets the same behaviour. A typo must never be silently ignored (``secrets.mod = "warn"``
would leave a user believing the guard is relaxed, or worse, the reverse), so unknown
tables and keys and bad values are errors that name the key, the file and what is
allowed — all problems at once, one sentence each.

Every key is declared once, as a field of ``Settings`` carrying its ``Key`` (TOML name,
check, what is allowed). A new key is one new field; the loader, the "did you mean"
suggestions and ``KEYS`` follow from it.

Example::

    [memories]
    folder = "Agent"            # the dated layout of new memories goes under Agent/

    [secrets]
    mode = "refuse"             # or "warn"
    allow = ["sha256:1a5d44a2dca19669"]

    [recall]
    profile = "facts"           # or "conversation", "notes"; unset: chosen from what the vault holds
    semantic = false

    [git]
    commit = false              # true: commit each tool write; "all": sync shares hand changes too
    author = "Agent <agent@example.com>"
    subfolder = false
    hooks = false

Values that loosen a guard (``secrets.mode = "warn"``, ``secrets.allow`` entries,
``git.commit``, ``git.subfolder``, ``git.hooks``) apply only once this clone approved
them (``trust/approvals.py``); ``load_settings`` reads the file as it is.
"""

from __future__ import annotations

import difflib
import re
import stat
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from .trust.credentials import FINGERPRINT_PREFIX, is_fingerprint
from .disk import nofollow
from .errors import SettingsError

SETTINGS_FILE = ".agent-memory.toml"
MAX_SETTINGS_BYTES = 1 << 20  # a settings file is a few lines; anything bigger is a mistake


class _Bad(Exception):
    """A value a check refuses; the message completes "memories.folder = … ": why."""


@dataclass(frozen=True)
class Key:
    """One setting: its dotted TOML name, the check that turns the TOML value into the
    field's value (raising ``_Bad``), and what is allowed, for error messages."""

    name: str
    check: Callable[[Any], Any]
    allowed: str
    secret: bool = False  # never echo the value in errors (it might be a pasted secret)


# --------------------------------------------------------------------------- checks


def _choice(*options: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if not isinstance(value, str) or value not in options:
            raise _Bad("is not allowed")
        return value

    return check


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            raise _Bad("is a string, not a boolean (write it without quotes)")
        raise _Bad("is not a boolean")
    return value


def _bool_or_all(value: Any) -> bool | Literal["all"]:
    if value == "all":
        return "all"
    if not isinstance(value, bool):
        raise _Bad('is not true, false or "all"')
    return value


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DRIVE = re.compile(r"[A-Za-z]:")
_UNPORTABLE = re.compile(r'[<>:"|?*]')  # refused in folder names by Windows (and ':' by macOS Finder)


def _folder(value: Any) -> str:
    """A vault-relative folder, normalised to ``a/b`` ("" = the vault root).

    Refused: absolute paths (``/x``, ``C:\\x``, ``~``), ``..`` (out of the vault), dot
    folders (``.obsidian``, ``.trash``, ``.index`` — ignored or owned by others, so new
    memories there would be invisible or lost), backslashes and ``<>:"|?*`` (a vault
    synced to Windows could not hold the folder) and control characters such as NUL.
    """
    if not isinstance(value, str):
        raise _Bad("is not a string")
    if _CONTROL.search(value):
        raise _Bad("contains a control character (such as NUL)")
    if "\\" in value:
        raise _Bad("contains a backslash; separate folders with '/'")
    if value.startswith(("/", "~")) or _DRIVE.match(value):
        raise _Bad("is an absolute path; give a folder inside the vault, e.g. \"Agent\" (\"\" is the vault root)")
    bad = _UNPORTABLE.search(value)
    if bad:
        raise _Bad(f"contains {bad[0]!r}, which Windows refuses in folder names")
    parts = [p for p in value.split("/") if p]
    for part in parts:
        if part == "..":
            raise _Bad("leaves the vault ('..')")
        if part.startswith("."):
            raise _Bad(f"names a dot-folder ({part!r}), which the vault ignores")
        if part != part.strip():
            raise _Bad(f"has a folder name with leading or trailing spaces ({part!r})")
    return "/".join(parts)


def _fingerprints(value: Any) -> tuple[str, ...]:
    """A list of fingerprints; a bad item is named by position, never by value: an
    item that is not a fingerprint may be the secret itself, pasted by mistake."""
    if not isinstance(value, list):
        raise _Bad("is not a list")
    out: list[str] = []
    for i, item in enumerate(value, 1):
        if not isinstance(item, str) or not is_fingerprint(item.strip().lower()):
            raise _Bad(
                f"has item {i} that is not a fingerprint (not shown: it may be a secret; "
                "copy fingerprints from the refusal message)"
            )
        fp = item.strip().lower()
        if fp not in out:
            out.append(fp)
    return tuple(out)


_AUTHOR = re.compile(r"[^<>\x00-\x1f\x7f]*[^<>\s\x00-\x1f\x7f] <[^<>\s\x00-\x1f\x7f]+>")


def _author(value: Any) -> str:
    if not isinstance(value, str):
        raise _Bad("is not a string")
    author = value.strip()
    if author and not _AUTHOR.fullmatch(author):
        raise _Bad("is not in the form \"Name <email>\"")
    return author


def _key(name: str, default: Any, check: Callable[[Any], Any], allowed: str, *, secret: bool = False) -> Any:
    return field(default=default, metadata={"key": Key(name, check, allowed, secret)})


# --------------------------------------------------------------------------- the keys


@dataclass(frozen=True)
class Settings:
    """A vault's settings; ``Settings()`` is what a vault without the file gets."""

    memories_folder: str = _key(
        "memories.folder", "", _folder, 'a folder inside the vault such as "Agent" ("" is the vault root)'
    )
    secrets_mode: Literal["refuse", "warn"] = _key("secrets.mode", "refuse", _choice("refuse", "warn"), '"refuse" or "warn"')
    secrets_allow: tuple[str, ...] = _key(
        "secrets.allow", (), _fingerprints, f'a list of fingerprints such as ["{FINGERPRINT_PREFIX}1a5d44a2dca19669"]', secret=True
    )
    # None (unset): chosen from what the vault holds (``recall.choice``).
    recall_profile: Literal["facts", "conversation", "notes"] | None = _key(
        "recall.profile", None, _choice("facts", "conversation", "notes"), '"facts", "conversation" or "notes"'
    )
    # None (unset): on when the optional semantic extra is installed (``semantic.status.wanted``).
    recall_semantic: bool | None = _key("recall.semantic", None, _bool, "true or false")
    # True: commit each tool write; "all": and ``sync`` shares hand changes too (``git/hand.py``).
    git_commit: bool | Literal["all"] = _key("git.commit", False, _bool_or_all, 'true, false or "all"')
    git_author: str = _key("git.author", "", _author, 'a string "Name <email>", or "" for git\'s own')
    git_subfolder: bool = _key("git.subfolder", False, _bool, "true or false")
    # The repository's hooks run for the tool's own commits and pulls only when this is true.
    git_hooks: bool = _key("git.hooks", False, _bool, "true or false")
    # serve's tool set: "" its own, else another memory server's (server.app.COMPAT).
    server_compat: str = _key("server.compat", "", _choice("", "knowledge-graph", "memory-mcp", "agentmemory", "memory-vault"),
                              '"knowledge-graph", "memory-mcp", "agentmemory", "memory-vault" or ""')


def _keys() -> dict[str, tuple[str, Key]]:
    out: dict[str, tuple[str, Key]] = {}
    for f in fields(Settings):
        key: Key = f.metadata["key"]
        table, _, leaf = key.name.partition(".")
        # One level of table, and the field named after the key, so both stay greppable.
        assert table and leaf and "." not in leaf and f.name == f"{table}_{leaf}", key.name
        out[key.name] = (f.name, key)
    return out


KEYS: dict[str, tuple[str, Key]] = _keys()  # "memories.folder" -> (field name, Key)
TABLES: tuple[str, ...] = tuple(dict.fromkeys(name.split(".")[0] for name in KEYS))


# --------------------------------------------------------------------------- loading


def _suggest_table(table: str) -> str:
    close = difflib.get_close_matches(table, list(TABLES), n=1, cutoff=0.6)
    return f" — did you mean [{close[0]}]?" if close else "."


def _suggest_key(name: str) -> str:
    """The closest known key: one with the same last part in another table (a bare
    ``folder`` → ``memories.folder``), else the closest whole dotted name, else the
    closest last part (``[secret] mod`` → ``secrets.mode``)."""
    leaf = name.rsplit(".", 1)[-1]
    by_leaf = {k.split(".", 1)[1]: k for k in KEYS}
    close = [by_leaf[leaf]] if leaf in by_leaf else difflib.get_close_matches(name, list(KEYS), n=1, cutoff=0.6)
    if not close:
        leaves = difflib.get_close_matches(leaf, list(by_leaf), n=1, cutoff=0.75)
        close = [by_leaf[leaves[0]]] if leaves else []
    return f" — did you mean {close[0]!r}?" if close else "."


def _printable(text: str) -> str:
    """Control characters escaped and the text shortened: for messages."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)
    return text if len(text) <= 80 else text[:77] + "…"


def _show(value: Any) -> str:
    """A value as TOML would spell it, shortened: for messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _printable('"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"')
    if isinstance(value, dict):
        return "a table"
    return _printable(repr(value))


def _settings_path(root: Path) -> Path | None:
    """The settings file to read, or None when there is none.

    A symlink is followed only when it resolves inside the vault: a settings file that
    points elsewhere (``ln -s ~/.aws/credentials``, or one arriving by ``git pull``)
    is refused, as every other path the vault follows.
    """
    path = root / SETTINGS_FILE
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SettingsError(f"Cannot read the settings file {path}: {exc.strerror or exc}.") from None
    if stat.S_ISLNK(info.st_mode):
        try:
            target = path.resolve(strict=True)
        except (OSError, RuntimeError):
            raise SettingsError(
                f"The settings file {path} is a broken symlink; remove it or point it at a file inside the vault."
            ) from None
        if not target.is_relative_to(root.resolve()):
            raise SettingsError(
                f"The settings file {path} is a symlink to a file outside the vault ({target}); "
                "refused — put the settings in the vault itself."
            )
        return target
    return path


def _read(path: Path, shown: Path) -> str:
    """The file's text: a regular file, at most ``MAX_SETTINGS_BYTES``, UTF-8 (a BOM,
    as Windows editors write, is allowed)."""
    try:  # never through a symlink at its name, nor waiting on a pipe
        data = nofollow.read_regular(path, MAX_SETTINGS_BYTES)
    except OSError as exc:
        raise SettingsError(f"Cannot read the settings file {shown}: {exc.strerror or exc}.") from None
    if data is None:
        raise SettingsError(f"The settings file {shown} is not a regular file; make it a TOML file or remove it.")
    if len(data) > MAX_SETTINGS_BYTES:
        raise SettingsError(f"The settings file {shown} is over {MAX_SETTINGS_BYTES // 1024} KB; it should hold a few lines.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SettingsError(f"The settings file {shown} is not UTF-8 text (line {line}); save it as UTF-8.") from None


_TOML_AT = re.compile(r"\(at line (\d+), column (\d+)\)")


def _parse(text: str, shown: Path) -> dict[str, Any]:
    """The TOML table; a syntax error names the line and column tomllib reports, and
    quotes that line (shortened) so the mistake is visible in the message itself."""
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise SettingsError(f"The settings file {shown} nests arrays or tables too deeply to read; a settings "
                            "file holds a few plain keys.") from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        at = _TOML_AT.search(message)
        if not at:
            raise SettingsError(f"The settings file {shown} is not valid TOML: {message}.") from None
        number = int(at[1])
        lines = text.splitlines()
        line = lines[number - 1].strip() if 1 <= number <= len(lines) else ""
        quoted = f" ({_printable(line)})" if line else ""
        reason = _TOML_AT.sub("", message).strip()
        if reason == "Invalid value":
            reason += ' (text needs quotes: mode = "warn")'
        raise SettingsError(
            f"The settings file {shown} is not valid TOML at line {at[1]}, column {at[2]}{quoted}: {reason}."
        ) from None


def checked_value(name: str, value: Any) -> Any:
    """One setting's value as the settings file would be read (``SettingsError`` if it is
    refused): for commands that write a setting, such as ``init --memories-folder``."""
    key = KEYS[name][1]
    try:
        return key.check(value)
    except _Bad as exc:
        raise SettingsError(f"{name} = {_show(value)}: {exc} (allowed: {key.allowed}).") from None


def load_settings(root: Path) -> Settings:
    """The settings of the vault at ``root``; defaults where the file is missing.

    Raises ``SettingsError`` (an ``InvalidInput``) for a broken file, an unknown table
    or key (with the closest known one), a value of the wrong type or outside what is
    allowed, or a symlink out of the vault. Every problem in the file is reported at
    once, one sentence each, so a user fixes them in one go.
    """
    root = Path(root)
    shown = root / SETTINGS_FILE
    path = _settings_path(root)
    if path is None:
        return Settings()
    data = _parse(_read(path, shown), shown)
    values: dict[str, Any] = {}
    problems: list[str] = []  # one sentence each
    unknown = False
    for table, content in data.items():
        if table not in TABLES:
            unknown = True
            if isinstance(content, dict):
                problems.append(f"Unknown table [{table}]{_suggest_table(table)}")
            else:
                problems.append(f"Unknown key {table!r}{_suggest_key(table)}")
            continue
        if not isinstance(content, dict):
            leaves = ", ".join(k.split(".", 1)[1] for k in KEYS if k.startswith(table + "."))
            problems.append(f"{table!r} = {_show(content)} must be a table [{table}] holding {leaves}.")
            continue
        for leaf, value in content.items():
            name = f"{table}.{leaf}"
            if name not in KEYS:
                unknown = True
                problems.append(f"Unknown key {name!r}{_suggest_key(name)}")
                continue
            field_name, key = KEYS[name]
            try:
                values[field_name] = key.check(value)
            except _Bad as bad:
                shown_value = "" if key.secret else f" = {_show(value)}"
                problems.append(f"{name}{shown_value} {bad}; use {key.allowed}.")
    if problems:
        known = f" Known keys: {', '.join(KEYS)}." if unknown else ""
        raise SettingsError(f"The settings file {shown}: {' '.join(problems)}{known}")
    return Settings(**values)
