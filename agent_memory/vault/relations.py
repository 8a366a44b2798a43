"""Removing a relation that ``link`` wrote: ``unlink``.

The change goes through the same safe write as every tool edit (``Writes._checked``
reads settled bytes, ``Writes._put`` swaps the new file in only if it still holds
them), and rewrites only the relation's lines: linking, then unlinking, gives the
file its bytes back.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from ..recall import graph
from ..note.links import wikilinks
from ..note.parse import Note, RESERVED_KEYS
from ..note.patch import patch
from ..clock import iso
from .core import VaultCore
from ..errors import InvalidInput, NotFound
from ..index.db import link_key
from ..models import UnlinkResult
from .writes import Writes, _RELATION_NAME


class Links(VaultCore):
    if TYPE_CHECKING:  # Vault composes this with Writes, whose safe write it uses
        def _checked(self, memory_id: str, expected_version: str | None) -> tuple[sqlite3.Row, bytes, Note]: ...
        def _put(self, rel: str, checked: bytes, text: str) -> sqlite3.Row | None: ...

    def unlink(self, memory_id: str, target_id: str, relation: str = "related_to") -> UnlinkResult:
        """Remove from ``memory_id``'s front-matter property ``relation`` every link that
        resolves to ``target_id`` (in any spelling: name, path, ``|alias``, ``#heading``).

        The property goes when its last link does. A target that no longer exists is
        matched by the link's text, so a broken link can be removed too. Unlinking what
        is not linked changes nothing. Links in the body text are the person's prose:
        they are not touched (edit the content for those)."""
        relation = (relation or "").strip()
        if not _RELATION_NAME.fullmatch(relation) or relation in RESERVED_KEYS:
            raise InvalidInput(
                f"Relation {relation!r} cannot be unlinked: give the one-word relation the link was made with "
                "(related_to, depends_on…), not one of the reserved keys."
            )
        with self._writing():
            source, data, note = self._checked(memory_id, None)
            target: sqlite3.Row | None
            try:
                target = self._resolve(target_id)
            except NotFound:
                target = None  # gone: match the link by what it says
            items = Writes._relation_items(note.meta.get(relation), source["path"], relation)
            links = graph.LinkGraph(self.index, iso(self.now()))

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
                self._put(source["path"], data, patch(data.decode("utf-8"), {relation: value}))
                source = self.index.by_path(source["path"]) or source
            return UnlinkResult(
                source=self._summary(source), target=self._summary(target) if target is not None else None,
                relation=relation, removed=removed, changed=bool(removed),
            )
