"""``Vault`` is a façade: each of its methods hands the call to the one part that does the
job. A parameter a part takes and the façade does not (or a default that differs) would
be a change nobody can reach through ``Vault``: the two signatures must agree."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from agent_memory.git.sync import GitSync
from agent_memory.index.reconcile import Reconciler
from agent_memory.vault.core import Core
from agent_memory.vault.maintenance import Maintenance
from agent_memory.vault.moves import Moves
from agent_memory.vault.reads import Reads
from agent_memory.vault.relations import Relations
from agent_memory.vault.vault import Vault
from agent_memory.vault.writes import Writes

DELEGATED: dict[str, Callable[..., Any]] = {
    "get": Core.get, "semantic_on": Core.semantic_on,
    "list": Reads.list, "recent_activity": Reads.recent_activity, "search": Reads.search, "related": Reads.related, "history": Reads.history,
    "retrieve_context": Reads.retrieve_context, "read_file": Reads.read_file, "complete_ids": Reads.complete_ids,
    "remember": Writes.remember, "remember_many": Writes.remember_many, "update": Writes.update, "forget": Writes.forget, "forget_many": Writes.forget_many,
    "link": Relations.link, "unlink": Relations.unlink,
    "move": Moves.move, "finish_interrupted_move": Moves.finish_interrupted_move,
    "undo_recorded_move": Moves.undo_recorded_move,
    "stats": Maintenance.stats, "export_memories": Maintenance.export_memories, "export_page": Maintenance.export_page,
    "import_memories": Maintenance.import_memories, "finish_interrupted_import": Maintenance.finish_interrupted_import,
    "gc": Maintenance.gc, "trash_list": Maintenance.trash_list, "restore": Maintenance.restore,
    "reconcile": Reconciler.reconcile, "reconcile_path": Reconciler.reconcile_path, "reindex": Reconciler.reindex,
    "sweep_expired": Reconciler.sweep_expired,
    "sync": GitSync.sync, "sync_preview": GitSync.sync_preview,
}


def _parameters(function: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    found = list(inspect.signature(function).parameters.values())
    if found and found[0].name == "self":
        found = found[1:]
    return [(p.name, p.kind, p.default) for p in found]


@pytest.mark.parametrize("name", sorted(DELEGATED))
def test_each_vault_method_takes_what_its_part_takes(name: str) -> None:
    assert _parameters(getattr(Vault, name)) == _parameters(DELEGATED[name])


def test_every_public_method_of_a_job_is_reachable_from_the_vault() -> None:
    """What a front end may call is on ``Vault``; the rest of a job's public names are
    what the other jobs use of it (the checked write, the settled read...)."""
    shared = {"checked", "put", "resolve", "load", "settled", "summary", "memory", "writing", "check_index",
              "guard_credentials", "now", "close", "expiring", "staging", "estimate_tokens"}
    for part in (Reads, Writes, Relations, Moves, Maintenance, Reconciler, GitSync):
        public = {n for n, v in vars(part).items() if callable(v) and not n.startswith("_")}
        assert public - shared - set(DELEGATED) == set(), part.__name__
