"""The documented limits (SPEC §8) and the checks of what a caller passes in.

Shared by the library and the MCP server's argument schemas, so each limit is written
once. Every check raises ``InvalidInput`` naming the limit and what to do instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .note.tags import as_tag_list, normalise_tag, split_tags
from .errors import InvalidInput
from .wording import LIMIT, OFFSET, TTL_DAYS, said

MAX_CONTENT = 100_000
MAX_TAGS = 50
MAX_TAG_LEN = 64
# A title and a source are a few words, a name or a URL: what a front matter line holds.
MAX_TITLE = 200
MAX_SOURCE = 500
MAX_LIMIT = 100
# Items in one import_memories / export_memories MCP call (SPEC §8): what a model sends
# or reads in one message. The library and `agent-memory import FILE` take any number
# (a backup can be large) in one all-or-nothing pass.
MAX_BATCH = 500

# Hand-written files (SPEC §8): what one file may cost to read, index and search.
# A file larger than this is skipped (``Store.walk`` tells ``doctor`` why).
MAX_FILE_BYTES = 10 * 1024 * 1024
# The index holds at most this much of a body (UTF-8 bytes, cut before a whole
# character): search and snippets read only that prefix. The file itself is untouched.
MAX_INDEXED_BODY = 256 * 1024
# What the front matter's YAML aliases (``*name``) may add when expanded, in nodes plus
# characters of scalars, beyond what is written. Beyond it the front matter is refused
# as unreadable (a "billion laughs" is a few hundred bytes that expand to gigabytes).
MAX_YAML_ALIAS_EXPANSION = 100_000
# Characters of front matter a note may have for its properties to be read (real notes
# have a few KB; a big graph entity's links a few hundred): beyond it none are read and
# the note is indexed by its body alone. 9.5 MB of YAML cost every rebuild 17 s and 1.4 GB.
MAX_FRONT_MATTER = 1024 * 1024
# Most wall-clock seconds one read query of the index may run before it is interrupted
# (sqlite3's progress handler), so one runaway query cannot hold the index for minutes.
MAX_QUERY_SECONDS = 10.0
# Paging offsets: SQLite's OFFSET is a signed 64-bit integer; no vault comes near this.
MAX_OFFSET = 1_000_000_000
# A TTL shorter than this would expire before the caller could read the memory back.
MIN_TTL_DAYS = 1 / 1440  # one minute
MAX_TTL_DAYS = 36500
# How deep an import's data may nest (lists and objects in one another): an item's values
# become front matter, a few levels at most; deeper data is a mistake or an attack on the
# recursive code that reads and writes it.
MAX_NESTING = 32


def check_text(value: str | None, what: str) -> str | None:
    """Refuse a NUL character in any text a caller passes (an id, a path, a title...):
    no file name, YAML value or SQLite query can hold one faithfully."""
    if isinstance(value, str) and "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL character (\\x00); remove it.")
    return value


MAX_NAME_BYTES = 255  # one file or folder name, in UTF-8: what common file systems hold
MAX_PATH_BYTES = 3072  # a whole vault-relative path: room under PATH_MAX (4096) for the vault's own


def long_name(path: str, suffix: str = "") -> str | None:
    """The first name in ``path`` (``/``-separated) over ``MAX_NAME_BYTES``, the last one
    with ``suffix`` added unless it ends so already; None when every name fits."""
    parts = path.replace("\\", "/").split("/")
    if suffix and parts and not parts[-1].endswith(suffix):
        parts[-1] += suffix
    return next((p for p in parts if len(p.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES), None)


def check_names(path: str, what: str, suffix: str = "") -> str:
    """Refuse a path with a file or folder name the file system cannot hold, in one line
    (the OS would say "File name too long" from deep inside a write)."""
    total = len(path.encode("utf-8", "surrogatepass"))
    if total > MAX_PATH_BYTES:
        raise InvalidInput(f"{what} is {total:,} bytes long; a path holds at most {MAX_PATH_BYTES:,}. Choose a "
                           "shorter one.")
    name = long_name(path, suffix)
    if name is not None:
        size = len(name.encode("utf-8", "surrogatepass"))
        raise InvalidInput(f"{what} has a name of {size} bytes ({name[:24]}…); file and folder names hold at most "
                           f"{MAX_NAME_BYTES} bytes. Choose a shorter name.")
    return path


def load_json(text: str, where: str) -> Any:
    """JSON text parsed; ``InvalidInput`` in one line for a syntax error or for nesting
    deeper than the parser can follow (``[[[[…`` would otherwise be a RecursionError)."""
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{where} is not valid JSON ({exc.msg} at line {exc.lineno}); nothing was imported.") from None
    except RecursionError:
        raise InvalidInput(f"{where} nests lists or objects too deeply to read (at most {MAX_NESTING} levels "
                           "are imported); nothing was imported.") from None


def check_import_data(data: Any, where: str = "The import") -> Any:
    """What an import writes, refused in one line when it nests deeper than
    ``MAX_NESTING`` or holds a NUL character in any text or key (no file name, YAML
    value or SQLite query holds one faithfully). Walked without recursion."""
    stack: list[tuple[Any, int, str]] = [(data, 0, where)]
    while stack:
        value, depth, at = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                raise InvalidInput(f"{at} contains a NUL character (\\x00); remove it. Nothing was imported.")
            continue
        if not isinstance(value, (list, dict)):
            continue
        if depth >= MAX_NESTING:
            raise InvalidInput(f"{at} nests lists or objects more than {MAX_NESTING} levels deep; nothing was imported.")
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and "\x00" in key:
                    raise InvalidInput(f"{at} has a key that contains a NUL character (\\x00); remove it. "
                                       "Nothing was imported.")
                stack.append((item, depth + 1, f"{at}, {str(key)[:40]!r}" if depth else f"{at}"))
        else:
            stack.extend((item, depth + 1, f"Item {n}" if depth == 0 else at) for n, item in enumerate(value))
    return data


def check_short(value: str | None, what: str, most: int) -> str | None:
    """A title or a source: no NUL, at most ``most`` characters (the same bound the MCP
    tools' schemas state), so no caller writes a front matter the tool would then have
    to refuse as too large to read."""
    check_text(value, what)
    if isinstance(value, str) and len(value) > most:
        raise InvalidInput(f"The {what} is {len(value):,} characters; it holds at most {most:,}. Shorten it; put "
                           "the rest in the content.")
    return value


def check_content(content: str) -> str:
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput("Content is empty; give the fact to remember as text.")
    check_text(content, "Content")
    if len(content) > MAX_CONTENT:
        raise InvalidInput(f"Content is {len(content):,} characters; the limit is {MAX_CONTENT:,}. Split it into smaller memories.")
    return content.strip("\r\n")  # "text\r\n" pasted from Windows leaves no stray "\r"


def check_tags(tags: Iterable[str] | str | None) -> list[str]:
    """Tags a caller passes, split as ``split_tags`` splits them (a list, a comma
    string, a list in a string); case-insensitive, and no whitespace inside a tag."""
    listed = isinstance(tags, (list, tuple, set, frozenset)) and all(_is_word(t) for t in tags)
    if not (tags is None or isinstance(tags, str) or listed):
        raise InvalidInput(
            f"Tags must be a list of words or one comma-separated string, e.g. ['billing', 'acme']; got {tags!r}."
        )
    out: list[str] = []
    for raw in split_tags(tags):
        tag = raw.lstrip("#")
        if not tag:
            continue
        check_text(tag, f"Tag {tag!r}")
        if any(c.isspace() for c in tag):
            raise InvalidInput(f"Tag {tag!r} contains whitespace; use '-' or '_' instead (e.g. {'-'.join(tag.split())!r}).")
        _check_tag_length(tag)
        tag = normalise_tag(tag)
        if tag not in out:
            out.append(tag)
    return _check_tag_count(out)


def _check_tag_length(tag: str) -> None:
    if len(tag) > MAX_TAG_LEN:
        raise InvalidInput(f"Tag {tag[:20]!r}… is {len(tag)} characters; the limit is {MAX_TAG_LEN}.")


def _check_tag_count(tags: list[str]) -> list[str]:
    if len(tags) > MAX_TAGS:
        raise InvalidInput(f"{len(tags)} tags given; the limit is {MAX_TAGS} per memory.")
    return tags


def check_written_tags(value: Any) -> list[str]:
    """A front matter's tags as the reader reads them (``[two words]`` is ``two-words``,
    a string splits on commas and spaces), within the limits of a memory. Only the tags
    a caller passes as arguments get ``check_tags``' stricter rules."""
    scalar = (str, int, float)
    if not (value is None or isinstance(value, scalar) or (
        isinstance(value, list) and all(v is None or isinstance(v, scalar) for v in value)
    )):
        raise InvalidInput(f"front_matter tags must be a list or a string, as in a file's tags property; got {value!r}.")
    tags = as_tag_list(value)
    for tag in tags:
        _check_tag_length(tag)
    return _check_tag_count(tags)


def _is_word(value: object) -> bool:
    """Text, or a number a JSON or YAML writer left unquoted (tag ``2024``)."""
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def check_namespace(namespace: str | None) -> str:
    if namespace is not None and not isinstance(namespace, str):
        raise InvalidInput(f"Namespace must be one word of text, e.g. 'support'; got {namespace!r}.")
    value = (namespace or "default").strip()
    check_text(value, f"Namespace {value!r}")
    if any(c.isspace() for c in value) or "/" in value or len(value) > MAX_TAG_LEN:
        raise InvalidInput(f"Namespace {value!r} is not valid: use one word of up to {MAX_TAG_LEN} characters, no '/' or spaces.")
    if value.startswith("."):  # '.', '..', '.git': folder names, hidden or special everywhere
        raise InvalidInput(f"Namespace {value!r} is not valid: a namespace may not start with '.'; use a word such as 'project-x'.")
    return value


def check_ttl(ttl_days: float | None) -> float | None:
    if ttl_days is None:
        return None
    if isinstance(ttl_days, bool) or not isinstance(ttl_days, (int, float)) or not 0 <= ttl_days <= MAX_TTL_DAYS:  # NaN fails every comparison
        raise InvalidInput(said(TTL_DAYS, f" must be between 0 (no expiry) and {MAX_TTL_DAYS}; got {ttl_days!r}."),
                           argument="ttl_days")
    if 0 < ttl_days < MIN_TTL_DAYS:
        raise InvalidInput(
            said(TTL_DAYS, f" {ttl_days!r} is under a minute: the memory would expire before it could be read; "
                 "use 0 (no expiry) or at least one minute (0.0007 days)."), argument="ttl_days"
        )
    return float(ttl_days)


MAX_TYPE_LEN = 64
MAX_IMPORTANCE = 10
# Suggested memory types (SPEC §2); ``type`` is free text, these are what tools offer.
MEMORY_TYPES = ("general", "fact", "plan", "decision", "reflection", "lesson", "error", "preference", "procedure")


def check_type(value: str | None, what: str = "type") -> str | None:
    """A memory's ``type``: free text of one line, stripped ('' stays '': "remove it")."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be text such as {', '.join(MEMORY_TYPES[:4])}…; got {value!r}.")
    check_text(value, what)
    value = value.strip()
    if len(value) > MAX_TYPE_LEN or any(c in value for c in "\r\n"):
        raise InvalidInput(f"{what} must be one line of at most {MAX_TYPE_LEN} characters, e.g. 'decision'; got {value[:20]!r}.")
    return value


def check_importance(value: float | str | None, what: str = "importance") -> int | float | str | None:
    """A memory's ``importance``: a number from 0 to 10 (a whole one is kept whole);
    ``""`` stays ``""``, which ``update`` reads as "remove it" (as ``type=""`` is)."""
    if value is None or value == "":
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_IMPORTANCE:  # NaN fails
        raise InvalidInput(f"{what} must be a number from 0 to {MAX_IMPORTANCE}; got {value!r}.")
    return int(value) if float(value).is_integer() else float(value)


def namespace_filter(namespace: str | None) -> str | None:
    """A namespace to read from: omitted or blank means all; else the rules of writing."""
    if namespace is None or (isinstance(namespace, str) and not namespace.strip()):
        return None
    return check_namespace(namespace)


def check_offset(offset: int) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= MAX_OFFSET:
        raise InvalidInput(said(OFFSET, f" must be between 0 and {MAX_OFFSET:,}; got {offset!r}."))
    return offset


def check_limit(limit: int, most: int = MAX_LIMIT) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= most:
        raise InvalidInput(said(LIMIT, f" must be between 1 and {most}; got {limit!r}."))
    return limit
