"""Links between memories: wikilink targets resolved as Obsidian does, and a bounded
breadth-first walk over them.

The index stores every link as (source row, relation, ``link_key(target)``) — front-matter
relations and body ``[[wikilinks]]`` alike. A target names a file, never a title: by its
vault path (``people/priya``), by a trailing part of it (``sub/priya``), or by its file
name (``priya``). When a name matches several files, the one in the linking file's own
folder wins, then the shortest path, as Obsidian picks.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import Any
from dataclasses import dataclass, field

from ..index.db import Index
from ..index.rows import link_key

MAX_DEPTH = 3
MAX_VISITS = 500
DIRECTIONS = ("out", "in", "both")
_LIVE = "(m.expires IS NULL OR m.expires > ?)"


def _folder(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def key_suffixes(path_key: str) -> list[str]:
    """Every link key that can name this file: ``a/b/c`` -> ``a/b/c``, ``b/c``, ``c``."""
    parts = path_key.split("/")
    return ["/".join(parts[i:]) for i in range(len(parts))]


class LinkGraph:
    """Resolves link targets against the live memories of one index, at one instant."""

    def __init__(self, index: Index, now: str) -> None:
        self.index = index
        self.now = now
        self._resolved: dict[tuple[str, str], sqlite3.Row | None] = {}

    def resolve(self, target: str, source_path: str) -> sqlite3.Row | None:
        """The live memory a link written in ``source_path`` points at, if any."""
        key = link_key(target)
        cache_key = (key, _folder(source_path))
        if cache_key not in self._resolved:
            self._resolved[cache_key] = self._pick(key, source_path)
        return self._resolved[cache_key]

    def _pick(self, key: str, source_path: str) -> sqlite3.Row | None:
        if not key:
            return None
        name = key.rsplit("/", 1)[-1]
        rows = self.index.query(f"SELECT * FROM memories m WHERE m.name_key = ? AND {_LIVE}", (name, self.now))
        exact = [r for r in rows if r["path_key"] == key]
        if exact:
            return exact[0]
        fits = [r for r in rows if "/" not in key or r["path_key"].endswith("/" + key)]
        if not fits:
            return None
        here = _folder(source_path)
        return min(fits, key=lambda r: (_folder(r["path"]) != here, len(r["path"]), r["path"]))

    def outgoing(self, row: sqlite3.Row) -> Iterator[tuple[str, sqlite3.Row]]:
        """(relation, target row) for each resolvable link the memory's file holds."""
        for link in self.index.query("SELECT relation, target FROM links WHERE src = ?", (row["rid"],)):
            target = self.resolve(link["target"], row["path"])
            if target is not None and target["rid"] != row["rid"]:
                yield link["relation"], target

    def incoming(self, row: sqlite3.Row, cap: int) -> tuple[list[tuple[str, sqlite3.Row]], bool]:
        """(relation, source row) for links pointing at the memory: its backlinks.

        Reads at most ``cap`` candidate links; the flag says whether there were more.
        """
        rows = self.index.query(
            "SELECT l.relation AS link_relation, l.target AS link_target, m.* FROM links l "
            f"JOIN memories m ON m.rid = l.src WHERE l.target IN (SELECT value FROM json_each(?)) AND {_LIVE} "
            "ORDER BY m.path, l.relation LIMIT ?",
            (json.dumps(key_suffixes(row["path_key"])), self.now, cap + 1),
        )
        found = []
        for link in rows[:cap]:
            target = self.resolve(link["link_target"], link["path"])
            if target is not None and target["rid"] == row["rid"] and link["rid"] != row["rid"]:
                found.append((link["link_relation"], link))
        return found, len(rows) > cap

    def backlink_count(self, row: sqlite3.Row) -> int:
        found, _ = self.incoming(row, MAX_VISITS)
        return len({source["rid"] for _relation, source in found})


@dataclass
class Walk:
    """What a breadth-first walk reached: rows with their distance, and the edges seen."""

    nodes: dict[int, tuple[sqlite3.Row, int]] = field(default_factory=dict)
    edges: dict[tuple[int, str, int], None] = field(default_factory=dict)
    aborted: bool = False


def walk(links: LinkGraph, start: sqlite3.Row, depth: int, direction: str, max_visits: int) -> Walk:
    """Breadth-first from ``start`` up to ``depth`` hops, visiting at most ``max_visits``
    memories (the start included); ``aborted`` says the cap cut the walk short."""
    return walk_from(links, [start], depth, direction, max_visits)


def walk_from(links: LinkGraph, starts: list[Any], depth: int, direction: str, max_visits: int) -> Walk:
    """``walk`` from several memories at once (a recall's hits, at distance 0): each
    memory reached gets its distance from the nearest start; ``max_visits`` counts the
    starts too."""
    result = Walk(nodes={start["rid"]: (start, 0) for start in starts})
    frontier = list(starts)
    for distance in range(1, depth + 1):
        reached: list[sqlite3.Row] = []
        for row in frontier:
            for edge, other in _neighbours(links, row, direction, max_visits, result):
                if other["rid"] not in result.nodes:
                    if len(result.nodes) >= max_visits:
                        result.aborted = True
                        continue
                    result.nodes[other["rid"]] = (other, distance)
                    reached.append(other)
                result.edges.setdefault(edge)
        frontier = reached
        if not frontier:
            break
    return result


def _neighbours(
    links: LinkGraph, row: sqlite3.Row, direction: str, cap: int, result: Walk
) -> Iterator[tuple[tuple[int, str, int], sqlite3.Row]]:
    if direction in ("out", "both"):
        for relation, target in links.outgoing(row):
            yield (row["rid"], relation, target["rid"]), target
    if direction in ("in", "both"):
        found, more = links.incoming(row, cap)
        if more:
            result.aborted = True
        for relation, source in found:
            yield (source["rid"], relation, row["rid"]), source
