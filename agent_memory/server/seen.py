"""What a connection remembers between calls: the last version of each memory it saw.

Replacing a body needs a version the caller saw (SPEC §3): the explicit
``expected_version``, else the one this connection was last handed with the whole
content (get_memory, remember, update_memory, retrieve_context, a recall hit that
carried ``content``). Nothing here knows the SDK: a tool takes a :class:`Seen`, and the
server finds each connection's own through :class:`SeenVersions`.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any


# The most memories one connection remembers the versions of: a connection that lives
# for weeks of recalls must not come to hold a version of every memory in a large vault.
SEEN_LIMIT = 10_000


class Seen:
    """The versions one connection was handed, by memory id and by path (callers pass
    either), for the ``limit`` memories handed over last: past it the oldest is
    forgotten, and replacing its body asks for ``expected_version`` (or a fresh read)."""

    def __init__(self, limit: int = SEEN_LIMIT) -> None:
        self._versions: dict[str, str] = {}  # in the order handed over, oldest first
        self._limit = 2 * limit  # two keys a memory

    def note(self, memory: Mapping[str, Any]) -> None:
        """Remember the version of a memory handed over with its whole content."""
        for key in (memory.get("id"), memory.get("path")):
            if key:
                self._versions.pop(key, None)  # handed over again: the newest now
                self._versions[key] = memory["version"]
        while len(self._versions) > self._limit:
            del self._versions[next(iter(self._versions))]

    def version(self, memory_id: str) -> str | None:
        """The version last handed over for ``memory_id`` (an id or a path, as sent)."""
        return self._versions.get(memory_id.strip().replace("\\", "/").removeprefix("./"))


class SeenVersions:
    """Each connection's :class:`Seen`, for as long as the connection lives.

    A connection is known by its handshake (the SDK's ``client_params``, one object per
    connection). A request without one (the 2026-07-28 protocol, stateless HTTP) stands
    alone: it gets a fresh ``Seen`` that no later call reads, so it needs the explicit
    version, as it should: nothing ties its calls together."""

    def __init__(self) -> None:
        self._by_connection: dict[int, tuple[weakref.ref[Any], Seen]] = {}

    def of(self, handshake: object | None) -> Seen:
        if handshake is None:
            return Seen()
        entry = self._by_connection.get(id(handshake))
        if entry is None or entry[0]() is not handshake:
            self._by_connection = {k: e for k, e in self._by_connection.items() if e[0]() is not None}
            entry = self._by_connection[id(handshake)] = (weakref.ref(handshake), Seen())
        return entry[1]
