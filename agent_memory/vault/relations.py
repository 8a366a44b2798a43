"""Relations between memories: ``link`` adds one to a memory's front matter, ``unlink``
takes it away.

Both go through the same checked write as every tool edit (``Writes.checked`` reads
settled bytes, ``Writes.put`` swaps the new file in only if it still holds them), and
rewrite only the relation's lines: linking, then unlinking, gives the file its bytes back.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ..recall import graph
from ..note.links import RELATION_NAME, wikilinks
from ..note.parse import RESERVED_KEYS
from ..note.patch import patch
from ..clock import iso
from .core import Core
from .writes import Writes
from ..errors import InvalidInput, NotFound
from ..index.rows import link_key
from ..models import LinkResult, UnlinkResult
from ..wording import TARGET_ID, said


def relation_items(value: Any, path: str, relation: str) -> list[Any]:
    """What a relation property holds now, as a list to append to."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) or v is None for v in value):
        return [v for v in value if v is not None]
    raise InvalidInput(
        f"{path} already has a {relation!r} key that is not a list of links; "
        "choose another relation name or edit that key by hand."
    )


class Relations:
    """link and unlink, through the checked write of ``writes``."""

    def __init__(self, core: Core, writes: Writes) -> None:
        self.core = core
        self.index = core.index
        self.writes = writes

    def link(self, memory_id: str, target_id: str, relation: str = "related_to") -> LinkResult:
        """Add ``"[[target]]"`` to the source file's front-matter list ``relation``.

        That is the SPEC §5 form (``related_to: ["[[acme-billing]]"]``), a property
        Obsidian draws as links. Only that key's lines change (not even ``updated``);
        a link that is already there, in any spelling that resolves to the target,
        changes nothing.
        """
        relation = (relation or "").strip()
        if not RELATION_NAME.fullmatch(relation) or relation in RESERVED_KEYS:
            raise InvalidInput(
                f"Relation {relation!r} cannot be used: give one word such as related_to or depends_on "
                "(letters, digits, '_' or '-', up to 64 characters), not one of the reserved keys "
                f"{', '.join(RESERVED_KEYS)}."
            )
        warnings = self.core.guard_credentials({"the relation": relation})  # it becomes a key of the file
        with self.core.writing():
            source, data, note = self.writes.checked(memory_id, None)
            target = self.core.resolve(target_id)
            if target["path"] == source["path"]:
                raise InvalidInput(said(f"A memory cannot be linked to itself ({source['path']}); give another ", TARGET_ID,
                                         "."))
            items = relation_items(note.meta.get(relation), source["path"], relation)
            links = graph.LinkGraph(self.index, iso(self.core.now()))
            already = any(
                (found := links.resolve(written, source["path"])) is not None and found["rid"] == target["rid"]
                for item in items
                if isinstance(item, str)
                for written in wikilinks(item)
            )
            wikilink = f"[[{self._link_text(target)}]]"
            if not already:
                self.writes.put(source["path"], data, patch(data.decode("utf-8"), {relation: [*items, wikilink]}))
                source = self.index.by_path(source["path"]) or source
            result = LinkResult(
                source=self.core.summary(source), target=self.core.summary(target), relation=relation,
                link=wikilink, changed=not already,
            )
            if warnings:
                result["warnings"] = warnings
            return result

    def _link_text(self, target: sqlite3.Row) -> str:
        """The target's file name without ``.md``, or its vault path when the name repeats
        (Obsidian would otherwise resolve the name to another file)."""
        name: str = target["path"].rsplit("/", 1)[-1][:-3]
        same_name = self.index.query("SELECT count(*) FROM memories WHERE name_key = ?", (target["name_key"],))[0][0]
        text = name if same_name <= 1 else target["path"][:-3]
        if any(c in text for c in "[]|#^"):
            raise InvalidInput(
                f"{target['path']} has a character a wikilink cannot hold ([ ] | # ^); rename the file, then link again."
            )
        return text

    def unlink(self, memory_id: str, target_id: str, relation: str = "related_to") -> UnlinkResult:
        """Remove from ``memory_id``'s front-matter property ``relation`` every link that
        resolves to ``target_id`` (in any spelling: name, path, ``|alias``, ``#heading``).

        The property goes when its last link does. A target that no longer exists is
        matched by the link's text, so a broken link can be removed too. Unlinking what
        is not linked changes nothing. Links in the body text are the person's prose:
        they are not touched (edit the content for those)."""
        relation = (relation or "").strip()
        if not RELATION_NAME.fullmatch(relation) or relation in RESERVED_KEYS:
            raise InvalidInput(
                f"Relation {relation!r} cannot be unlinked: give the one-word relation the link was made with "
                "(related_to, depends_on…), not one of the reserved keys."
            )
        with self.core.writing():
            source, data, note = self.writes.checked(memory_id, None)
            target: sqlite3.Row | None
            try:
                target = self.core.resolve(target_id)
            except NotFound:
                target = None  # gone: match the link by what it says
            items = relation_items(note.meta.get(relation), source["path"], relation)
            links = graph.LinkGraph(self.index, iso(self.core.now()))

            def names_target(written: str) -> bool:
                if target is None:
                    return link_key(written) == link_key(target_id)
                found = links.resolve(written, source["path"])
                return found is not None and found["rid"] == target["rid"]

            kept: list[object] = []
            removed: list[str] = []
            for item in items:
                written = wikilinks(item) if isinstance(item, str) else []
                hits = [w for w in written if names_target(w)]
                if not hits:
                    kept.append(item)
                elif len(written) > 1 or not (item.strip().startswith(("[[", "![[")) and item.strip().endswith("]]")):
                    raise InvalidInput(
                        f"In {source['path']}, the {relation} item {item!r} holds more than the one link; "
                        "edit that line by hand. Nothing was changed."
                    )
                else:
                    removed.append(str(item))
            if target is None and not removed:
                raise NotFound(target_id)
            if removed:
                value = kept or None  # the last link takes its property with it
                self.writes.put(source["path"], data, patch(data.decode("utf-8"), {relation: value}))
                source = self.index.by_path(source["path"]) or source
            return UnlinkResult(
                source=self.core.summary(source), target=self.core.summary(target) if target is not None else None,
                relation=relation, removed=removed, changed=bool(removed),
            )
