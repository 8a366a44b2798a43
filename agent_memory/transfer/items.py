"""Import items -> files: the checks and the front matter each item gets (pure).

An item is either an export's (``{path, front_matter, content, raw}``: its raw text
written back byte for byte; without one, or with front_matter or content edited since,
the file is written from those fields) or made by hand (``{content, namespace, tags, ...}``: written as ``remember``
would write it). ``Vault.import_memories`` adds what needs the vault: duplicates, ids
already taken, and writing everything or nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from typing import Any

from ..trust import confine, credentials
from ..note import parse
from ..note.links import RELATION_NAME, wikilinks
from ..note.parse import Note, RESERVED_KEYS, content_hash, derive_title, is_tool_id, shorten
from ..note.render import NEW_FILE_ORDER, to_utc
from ..note.tags import normalise_tag
from ..errors import InvalidInput
from ..limits import MAX_TITLE, check_namespace, check_tags, check_text, check_written_tags, long_name
from ..disk.layout import TRASH_DIRNAME, dated_folder, derived_id, is_memory_path, make_slug, new_id
from ..disk.store import Store

# A front-matter key import may write as it is: a YAML plain scalar that reads back as
# itself (no ': ', ' #', leading indicator, newline or trailing space), in any script.
_PLAIN_KEY = re.compile(r"[^\W][\w .\-/+@]*(?<! )")


_NOT_IN_LINK = re.compile(r"[\[\]|#^\n]")  # would end or split a [[wikilink]]


def own_id(meta: dict[str, Any]) -> str | None:
    """The id a front matter claims, read as the reader reads it (None: the path is the id)."""
    raw = meta.get("id")
    if not isinstance(raw, (str, int)) or not str(raw).strip():
        return None
    return str(raw).strip()


_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def twin_id(memory_id: str, content: str) -> str:
    """The id of an item that claims ``memory_id`` after an earlier item of the same
    import did, with other content: derived from the id and the content's hash, so both
    memories are kept and importing the same data again finds this one (no third copy).
    An id in the tool's own format gives one in that format, of the same time (so a TTL
    still applies); any other id gets ``-`` and 8 hex digits."""
    digest = content_hash(content)
    if is_tool_id(memory_id):
        millis = 0
        for char in memory_id[:10]:
            millis = (millis << 5) | _CROCKFORD.index(char)
        return derived_id(millis, f"{memory_id}:{digest}")
    return f"{memory_id}-{digest[:8]}"


def exported_file(item: dict[str, Any]) -> Note | None:
    """An export item's ``raw`` text (the file as it was) parsed, to be written back byte
    for byte: comments, block lists, ``archived: no``, offsets, CRLF and a BOM all kept.
    None when the item has no raw text, or when its ``front_matter`` or ``content`` no
    longer say what the raw text says (a person edited the backup: those fields win)."""
    if "raw" not in item:
        return None
    raw = item["raw"]
    if not isinstance(raw, str):
        raise InvalidInput("raw must be text (the file as it was exported).")
    check_text(raw, "raw")
    path = item.get("path")
    note = parse.parse(raw.encode("utf-8"), path if isinstance(path, str) and path else "imported.md")
    if "content" in item and item["content"] != note.body:
        return None
    if "front_matter" in item and item["front_matter"] != json.loads(json.dumps(note.meta, default=str)):
        return None
    check_namespace(note.namespace)
    check_written_tags(note.tags)
    return note


def exported_front_matter(front_matter: Any) -> tuple[dict[str, Any], str]:
    """An export's front matter, checked before it is written as it is; and its namespace."""
    if not isinstance(front_matter, dict):
        raise InvalidInput("front_matter must be an object.")
    meta = dict(front_matter)
    for name in meta:
        if not isinstance(name, str) or not _PLAIN_KEY.fullmatch(name):
            raise InvalidInput(
                f"front_matter key {name!r} is not a plain name (letters, digits, spaces, "
                "'_', '-', '.', '/', '+' or '@', not starting with a symbol); rename it."
            )
    written = meta.get("namespace")  # read as the reader reads it: a number is its digits
    namespace = check_namespace(str(written) if isinstance(written, int) else written)
    check_written_tags(meta.get("tags"))
    for key in ("created", "updated", "expires"):
        if meta.get(key) not in (None, ""):
            to_utc(meta[key])
    return meta, namespace


# The time keys of mcp-memory-vault's export: a hand-made item would drop them silently
# (everything dated today, an expired item back for good), so they are refused instead.
_FOREIGN_TIMES = ("created_at", "updated_at", "expires_at")


def new_fields(item: dict[str, Any], now: dt.datetime) -> dict[str, Any]:
    """A hand-made item's front matter: the fields remember writes, checked as it checks
    them; times from the item, else the vault's clock (which also dates the id)."""
    foreign = [key for key in _FOREIGN_TIMES if key in item]
    if foreign:
        raise InvalidInput(f"This item has {', '.join(foreign)}, as an mcp-memory-vault export does: import it "
                           "with format mcp-memory-vault (CLI: import --from mcp-memory-vault FILE) so its times "
                           "are kept; nothing was imported.")
    created = _item_time(item, "created") or to_utc(now)
    return {
        "id": own_id(item) or new_id(int(now.timestamp() * 1000)),
        "namespace": check_namespace(item.get("namespace")),
        "title": _item_text(item, "title"),
        "tags": check_tags(item.get("tags")),
        "created": created,
        "updated": _item_time(item, "updated") or created,
        "expires": _item_time(item, "expires"),
        "source": _item_text(item, "source"),
        **_item_extras(item),
    }


def bounded_title(title: str) -> str:
    """A title a source gave, cut to ``MAX_TITLE`` as a derived title is cut ("…"): the
    bound remember and update hold a title to, which an import holds a peer's to too."""
    return shorten(title, MAX_TITLE - 1)


def title_in_bound(item: dict[str, Any]) -> dict[str, Any]:
    """A hand-made item whose title is over ``MAX_TITLE`` (a peer's long summary or
    name) with the title cut (``bounded_title``) and the whole of it kept at the top of
    the content, where a person reads it and search finds it, unless the content holds it
    already; any other item as it is."""
    title, content = item.get("title"), item.get("content")
    if not isinstance(title, str) or len(title.strip()) <= MAX_TITLE or not isinstance(content, str):
        return item
    whole = title.strip()
    kept = content if whole in content else f"{whole}\n\n{content}"
    return {**item, "title": bounded_title(whole), "content": kept}


def _item_extras(item: dict[str, Any]) -> dict[str, Any]:
    """What an importer adds to a hand-made item (agent_memory/transfer/importers/): ``aliases``,
    ``type``, ``importance`` (0-10) and ``links`` ({relation: [target note names]}, written as
    one wikilink property per relation, as ``link_memories`` writes them)."""
    extras: dict[str, Any] = {}
    aliases = item.get("aliases")
    if aliases not in (None, [], ""):
        if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
            raise InvalidInput(f"aliases must be a list of names; got {aliases!r}.")
        extras["aliases"] = [check_text(a, "alias") for a in aliases]
    kind = _item_text(item, "type")
    if kind is not None:
        extras["type"] = kind
    importance = item.get("importance")
    if importance is not None:
        if isinstance(importance, bool) or not isinstance(importance, (int, float)) or not 0 <= importance <= 10:
            raise InvalidInput(f"importance must be a number from 0 to 10; got {importance!r}.")
        extras["importance"] = importance
    extras.update(link_fields(item.get("links") or {}, item.get("relation_types")))
    return extras


def link_fields(links: Any, originals: Any) -> dict[str, Any]:
    """``{relation: [note names]}`` as front-matter properties of wikilinks (one per
    relation, as ``link_memories`` writes them), and ``relation_types``: the source's
    names of relations where they differ from the property's, to give them back."""
    if not isinstance(links, dict):
        raise InvalidInput("links must be an object of {relation: [note names]}.")
    extras: dict[str, Any] = {}
    for relation, targets in links.items():
        if not isinstance(relation, str) or not RELATION_NAME.fullmatch(relation) or relation in RESERVED_KEYS:
            raise InvalidInput(f"Relation {relation!r} is not a relation name (letters, digits, '_' or '-', "
                               "up to 64 characters, not a reserved key).")
        if not isinstance(targets, list) or not all(isinstance(t, str) and t.strip() and not _NOT_IN_LINK.search(t)
                                                    for t in targets):
            raise InvalidInput(f"links[{relation!r}] must be a list of note names.")
        if targets:
            extras[relation] = [f"[[{check_text(t, 'link target')}]]" for t in targets]
    if originals:
        if not isinstance(originals, dict) or not all(isinstance(v, str) and k in links for k, v in originals.items()):
            raise InvalidInput("relation_types must map a relation in links to its name in the source.")
        kept = {k: v for k, v in originals.items() if k in extras}
        if kept:
            extras["relation_types"] = kept
    return extras


# What a source says about a memory it gave before, and how it is folded into the file:
# these are set from the source where it gives them (a scalar); lists only gain.
_SOURCE_SCALARS = ("namespace", "title", "created", "updated", "expires", "source", "type", "importance")
_TIMES = ("created", "updated", "expires")


# The front-matter key an import writes: a digest of what it set (body, the scalars its
# source gives, tags, aliases), the base of the next import's three-way decision.
IMPORT_BASE = "imported_hash"


def _given(item: dict[str, Any], key: str) -> bool:
    """Whether the source says anything about ``key`` (a knowledge graph has no times)."""
    return ("expires" in item) if key == "expires" else item.get(key) not in (None, "")


def _current(note: Note, key: str) -> Any:
    """The file's value of a source scalar, as compared with the source's."""
    current = note.namespace if key == "namespace" else note.meta.get(key)
    if key in _TIMES and current not in (None, ""):
        try:
            current = to_utc(current)
        except ValueError:
            pass
    return current


def import_digest(body: str | None, scalars: dict[str, Any], tags: list[Any], aliases: list[Any]) -> str:
    """What an import set, as one short digest: equal digests, the same memory."""
    payload = {"body": plain(body or ""), "scalars": scalars,
               "tags": sorted({normalise_tag(str(t)) for t in tags if t is not None}),
               "aliases": sorted({str(a).casefold() for a in aliases if a is not None})}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str, ensure_ascii=False).encode()).hexdigest()[:16]


def source_digest(fields: dict[str, Any], item: dict[str, Any], content: str | None) -> str:
    """The digest of what the source says now (what a clean import of it writes)."""
    scalars = {key: fields.get(key) for key in _SOURCE_SCALARS if _given(item, key)}
    return import_digest(content, scalars, as_list(fields.get("tags")), as_list(fields.get("aliases")))


def _file_digest(note: Note, item: dict[str, Any]) -> str:
    scalars = {key: _current(note, key) for key in _SOURCE_SCALARS if _given(item, key)}
    return import_digest(note.body, scalars, as_list(note.meta.get("tags")), as_list(note.meta.get("aliases")))


def resync(note: Note, fields: dict[str, Any], item: dict[str, Any], content: str | None,
           now: dt.datetime) -> tuple[dict[str, Any], str | None, bool]:
    """What an import of a memory already in the vault changes in its file: (front-matter
    changes for ``patch``, the new body or None, whether a person's edits were
    kept over the source's). Empty, None and False: unchanged.

    Three-way, with what the last import wrote (``imported_hash``) as the base, so a
    re-import never undoes a person: the source unchanged since then, the file is left as
    it is now (a link the source gained is added); the file unchanged since then, the source's changes are applied (the body
    and the scalars it gives; a time it does not have, like a knowledge graph's, leaves
    the file's) and tags, aliases, links and relation names are added; both changed, the
    person's file stands and only links are added (``kept``). Without a base (a file
    adopted in place, or imported before there was one), only what the file lacks is
    filled in, and the id where it has none. ``updated`` moves to now when something
    changed and the source gives no update time of its own."""
    meta = note.meta
    base = meta.get(IMPORT_BASE)
    theirs = source_digest(fields, item, content)
    if base == theirs:  # the source has not changed since this file was imported: only new links
        return _links_gained(note, fields), None, False
    if base is not None and _file_digest(note, item) != base:
        return _links_gained(note, fields), None, True  # a person edited it since: theirs stands
    fill_only = base is None
    changes: dict[str, Any] = {}
    if not note.own_id:
        changes["id"] = fields["id"]
    for key in _SOURCE_SCALARS:
        if not _given(item, key):  # the source has no such thing: the file's stands
            continue
        value = fields.get(key)
        if value is None and key != "expires":
            continue
        current = _current(note, key)
        if fill_only and current not in (None, ""):
            continue  # no base to tell a person's value from an old import's: the file's stands
        if key == "importance" and not isinstance(current, bool) and isinstance(current, (int, float)):
            same = current == value
        else:
            same = current == value or (current in (None, "") and value is None)
        if not same:
            changes[key] = value
    for key in ("tags", "aliases"):
        added = _gained(note, key, fields.get(key) or [], normalise_tag if key == "tags" else str.casefold)
        if added is not None:
            changes[key] = added
    changes.update(_links_gained(note, fields))
    body = content if content is not None and plain(content) != plain(note.body) else None
    if fill_only and body is not None and plain(note.body):
        body = None  # a body the file already has is never replaced without a base
    if (body is not None or len(changes) > (0 if note.own_id else 1)) and item.get("updated") in (None, ""):
        changes.setdefault("updated", to_utc(now))
    scalars = {key: changes[key] if key in changes else _current(note, key)
               for key in _SOURCE_SCALARS if _given(item, key)}
    after = import_digest(body if body is not None else note.body, scalars,
                          as_list(changes.get("tags", meta.get("tags"))), as_list(changes.get("aliases", meta.get("aliases"))))
    if after == theirs:
        changes[IMPORT_BASE] = theirs  # the file now says what the source says: the next import's base
    order = {key: n for n, key in enumerate(NEW_FILE_ORDER)}  # keys a file lacks are added in this order
    return dict(sorted(changes.items(), key=lambda kv: order.get(kv[0], len(order)))), body, False


def _links_gained(note: Note, fields: dict[str, Any]) -> dict[str, Any]:
    """The relation properties (and original relation names) the source adds to the file."""
    meta = note.meta
    changes: dict[str, Any] = {}
    for key, value in fields.items():
        if key in RESERVED_KEYS or key in _SOURCE_SCALARS or key == IMPORT_BASE:
            continue
        if key == "relation_types":
            written = meta.get(key)
            had: dict[str, Any] = written if isinstance(written, dict) else {}
            if any(had.get(k) != v for k, v in value.items()):
                changes[key] = {**had, **value}
            continue
        added = _gained(note, key, value, link_target_key)  # a relation: its wikilinks
        if added is not None:
            changes[key] = added
    return changes


def _gained(note: Note, name: str, new: list[Any], key: Any) -> list[Any] | None:
    """The file's ``name`` list (or one value, as written) with what ``new`` adds; None: nothing added."""
    current = note.meta.get(name)
    if current is not None and not isinstance(current, (list, str, int, float)):
        raise InvalidInput(f"{note.path} already has a {name!r} key that is not a list, so the import cannot add "
                           "to it; rename or fix that key by hand, then import again.")
    written = as_list(current)
    have = {key(str(v)) for v in written if v is not None}
    added = [v for v in new if key(str(v)) not in have]
    return [*written, *added] if added else None


def link_target_key(link: str) -> str:
    """A wikilink as compared for "already linked": its target, case-insensitively."""
    found = wikilinks(link)
    return (found[0] if found else link).strip().casefold()


def plain(body: str) -> str:
    """A body as compared for "did it change": line endings and outer blank lines aside."""
    return body.replace("\r\n", "\n").strip("\n")


def as_list(value: Any) -> list[Any]:
    """A front-matter value as the list it is read as (one value: a list of one)."""
    return [] if value is None else value if isinstance(value, list) else [value]


def _item_time(item: dict[str, Any], key: str) -> str | None:
    value = item.get(key)
    return None if value in (None, "") else to_utc(value)


def _item_text(item: dict[str, Any], key: str) -> str | None:
    value = item.get(key)
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{key} must be text; got {value!r}.")
    return value.strip() or None


def import_path(store: Store, path: Any, meta: dict[str, Any], content: str, now: dt.datetime) -> str:
    """Keep an exported path when it is a safe vault-relative memory path with no
    symlinked folder on its way, else lay the memory out by its creation date like a new one."""
    if isinstance(path, str):
        rel = path.replace("\\", "/").strip("/")
        safe = (is_memory_path(rel) and confine.memory_problem(rel) is None  # the one path rule
                and not rel.startswith(TRASH_DIRNAME + "/") and long_name(rel) is None)
        if safe and credentials.redact_for_names(rel) == rel and store.unaliased(rel):  # a name never carries one
            return rel
    created = dt.datetime.fromisoformat(to_utc(meta.get("created") or to_utc(now)))
    title = str(meta.get("title") or "") or derive_title(credentials.redact_for_names(content), "")
    return f"{dated_folder(created)}/{make_slug(title)}.md"  # make_slug leaves out credentials
