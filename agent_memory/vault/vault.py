"""The one object every front end talks to: ``Vault``, the façade over a vault's jobs.

It opens the vault (``Core``), builds each job with what it uses, and lists the whole
library in one place: every method is a line that hands the call to the job that does
it. The files are the truth: every write goes to a file first, then the index is
refreshed from the bytes actually on disk (``index/reconcile.py``).
"""

from __future__ import annotations

import builtins
import datetime as dt
import logging
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Self

from ..clock import Clock, utcnow
from ..disk.layout import GITIGNORE
from ..disk.store import Store
from ..errors import InvalidInput, VaultError
from ..git.commits import GitState
from ..git.dates import GitDates
from ..git.run import find_repo
from ..git.sync import GitSync
from ..index.reconcile import STALE_MARK
from ..log import configured, show_warnings_on_stderr
from ..models import (ContextResult, ExportPage, FileContent, ForgetBatchResult, ForgetResult, GcResult, HistoryResult,
                      ImportResult, LinkResult, ListResult, ActivityResult, Memory, MoveResult, ReconcileReport, RelatedResult,
                      RememberBatchResult, RememberResult, RestoreResult, SearchResult, Stats, SyncPreview, SyncResult,
                      TrashEntry, UnlinkResult,
                      UpdateResult)
from ..progress import Progress
from ..recall.rank import RecallConfig
from ..settings import SETTINGS_FILE, Settings, checked_value
from ..watch import vouch
from .core import Core
from .maintenance import TRASH_DAYS, Maintenance
from .moves import Moves
from .reads import MAX_READ_BYTES, Reads
from .relations import Relations
from .writes import Writes

log = logging.getLogger("agent_memory.vault")


class Vault:
    """A vault folder and its index. Open it, use it, ``close()`` it.

    Its parts, each built with what it uses: ``core`` (the folder, index, lock,
    settings and lookups every part shares), ``reads`` (list, search, related, history,
    context, files), ``writes`` (remember, update, forget), ``relations`` (link,
    unlink), ``moves`` (move, and undoing one a crash interrupted), ``maintenance``
    (stats, export, import, the trash), ``reconciler`` (the files into the index) and
    ``git`` (``sync``; tool writes as commits through ``git_state``).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        index_dir: str | os.PathLike[str] | None = None,
        clock: Clock = utcnow,
        sync: bool = True,
        progress: Progress | None = None,
    ) -> None:
        """Open the vault at ``root``; ``sync`` brings its index up to date first, and
        ``progress`` hears how far that got when it is long work (the first index of a
        vault, a rebuild)."""
        if not configured():  # nobody decided where warnings go: stderr, rather than lost
            show_warnings_on_stderr()
        # The core runs the vault's whole reconcile when another process replaced the index
        # or wrote through another one (looked up when it runs: ``reconcile`` below), and
        # hands each successful write's files to git's commit journal.
        self.core = core = Core(root, index_dir=index_dir, clock=clock, reconcile=lambda: self.reconcile(),
                                written=lambda changes: self.git_state.note_write(changes))
        self.root, self.store, self.index, self.index_dir = core.root, core.store, core.index, core.index_dir
        self.read_only, self.vectors, self.clock = core.read_only, core.vectors, core.clock
        self.git_state = GitState(core)
        self.reconciler = core.reconciler
        self.reads = Reads(core)
        self.writes = Writes(core)
        self.relations = Relations(core, self.writes)
        self.moves = Moves(core, reconcile=lambda: self.reconcile())
        self.maintenance = Maintenance(core)
        self.git_dates = GitDates(core, lambda: find_repo(core.root))
        self.git = GitSync(core, self.git_state, reconcile=lambda: self.reconcile(),
                           reconcile_path=self.reconciler.reconcile_path, dates=self.git_dates.refresh)
        if sync:
            self._sync_on_open(progress)

    def _sync_on_open(self, progress: Progress | None = None) -> None:
        """Finish what a crash interrupted (an import, a failed index write), then
        reconcile, unless a healthy watcher vouches for the index (``vouch.py``: then
        only a move a crash interrupted is undone and expired memories are tidied). A
        read-only vault or a full disk still lets reads work: they filter expired
        memories anyway, so failing to tidy must not stop a search."""
        if not self.read_only:
            try:
                self.finish_interrupted_import()
            except (VaultError, sqlite3.Error, OSError, ValueError, KeyError) as exc:
                # One import a crash left that cannot be finished must not lock the vault:
                # its staged files stay in .index/import/ for a person to look at.
                log.warning("could not finish an interrupted import: %s", exc)
        try:
            stale = self.store.control_dir / STALE_MARK
            if stale.is_file() and not stale.is_symlink():  # a link or a folder there is no mark this tool left
                self.reindex(progress=progress)
                stale.unlink(missing_ok=True)
            elif self._watcher_vouches():
                self.git_dates.refresh()
                self.finish_interrupted_move()
                if self.reconciler.expiring():
                    self.sweep_expired()
            else:
                self.reconcile(progress)
        except (VaultError, sqlite3.Error, OSError) as exc:
            if not self.index.any_memory():
                raise VaultError(f"Cannot index the vault {self.root}: {exc}") from exc
            log.warning("could not bring the index up to date: %s", exc)

    def _watcher_vouches(self) -> bool:
        """Whether a live, healthy watcher of this vault keeping this very index has
        confirmed it holds every change made until now. Never for a read-only vault
        (its index is in a cache folder) or an index this open had to create afresh."""
        if self.read_only or self.index.rebuilt_schema or self.index.discarded_corrupt:
            return False
        return vouch.vouched(self.store.control_dir, self.root, self.index.path)

    @classmethod
    def init(cls, root: str | os.PathLike[str], *, memories_folder: str | None = None,
             index_dir: str | os.PathLike[str] | None = None, clock: Clock = utcnow, sync: bool = True) -> Self:
        """Create the vault folder (and its .gitignore) if needed, then open it.

        ``memories_folder`` writes the ``memories.folder`` setting (where new memories'
        dated layout goes) into a new ``.agent-memory.toml``; an existing one is not
        rewritten (that is the person's file: the error says which line to add)."""
        path = Path(root).expanduser().absolute()
        if path.exists() and not path.is_dir():
            raise VaultError(f"{path} is a file, not a folder; choose another path for the vault.")
        if memories_folder is not None:
            folder = checked_value("memories.folder", memories_folder)
            if (path / SETTINGS_FILE).exists():
                raise InvalidInput(f"{path / SETTINGS_FILE} exists; add [memories] folder = {folder!r} to it by hand.")
        try:
            path.mkdir(parents=True, exist_ok=True)
            gitignore = path / ".gitignore"
            if not gitignore.exists():
                Store(path).write_new_file(".gitignore", GITIGNORE.encode())
            if memories_folder is not None:
                Store(path).write_new_file(SETTINGS_FILE, f'[memories]\nfolder = "{folder}"\n'.encode())
        except OSError as exc:
            raise VaultError(f"Cannot create a vault at {path}: {exc.strerror or exc}.") from exc
        return cls(path, index_dir=index_dir, clock=clock, sync=sync)

    # ------------------------------------------------------------------ the open vault
    @property
    def settings(self) -> Settings:
        """``.agent-memory.toml`` as this clone approved it (``Core.settings``)."""
        return self.core.settings

    @property
    def is_obsidian_vault(self) -> bool:
        """Whether Obsidian opens this folder as a vault (it holds ``.obsidian/``)."""
        return (self.root / ".obsidian").is_dir()

    @property
    def git_commit(self) -> bool | None:
        """Commit tool writes: True (``serve --git-commit``), or None to follow ``git.commit``."""
        return self.git_state.commit

    @git_commit.setter
    def git_commit(self, value: bool | None) -> None:
        self.git_state.commit = value

    def now(self) -> dt.datetime:
        return self.core.now()

    def semantic_on(self, asked: bool | None = None) -> bool:
        """Whether recall uses embeddings (``Core.semantic_on``)."""
        return self.core.semantic_on(asked)

    def keep_vectors(self) -> None:
        """A long-running process (server, watcher): embed new and changed memories in
        the background from now on, when semantic recall is on."""
        if self.semantic_on():
            self.vectors.keep_current()

    def close(self) -> None:
        self.core.close()
        self.git_state.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ reads
    def get(self, memory_id: str) -> Memory:
        """One memory, as its file is now (``Core.get``)."""
        return self.core.get(memory_id)

    def list(self, namespace: str | None = None, tags: Iterable[str] | str | None = (), limit: int = 20,
             offset: int = 0, path_prefix: str | None = None, type: str | None = None,
             min_importance: float | None = None, max_importance: float | None = None,
             since: str | None = None, until: str | None = None, where: Any = None, *,
             progress: Progress | None = None) -> ListResult:
        """Memories newest first (``Reads.list``); ``progress`` hears a filter's one-time
        build after a rebuild (``index.derived``)."""
        return self.reads.list(namespace, tags, limit, offset, path_prefix, type, min_importance, max_importance,
                               since, until, where, progress=progress)

    def recent_activity(self, timeframe: str = "7d", until: str | None = None, namespace: str | None = None,
                        type: str | None = None, limit: int = 20, offset: int = 0) -> ActivityResult:
        """What changed in a time frame, the latest change first (``Reads.recent_activity``)."""
        return self.reads.recent_activity(timeframe, until, namespace, type, limit, offset)

    def search(self, query: str, namespace: str | None = None, tags: Iterable[str] | str | None = (), limit: int = 10,
               match: str = "auto", since: str | None = None, until: str | None = None,
               path_prefix: str | None = None, offset: int = 0, profile: str | None = None,
               config: RecallConfig | None = None, explain: bool = False, depth: int = 0, type: str | None = None,
               min_importance: float | None = None, max_importance: float | None = None,
               semantic: bool | None = None, where: Any = None, *, progress: Progress | None = None) -> SearchResult:
        """Plain-question recall (``Reads.search``); ``progress`` hears a filter's or the
        spelling vocabulary's one-time build after a rebuild (``index.derived``)."""
        return self.reads.search(query, namespace, tags, limit, match, since, until, path_prefix, offset, profile,
                                 config, explain, depth, type, min_importance, max_importance, semantic, where,
                                 progress=progress)

    def related(self, memory_id: str, depth: int = 1, direction: str = "both", limit: int = 100) -> RelatedResult:
        """Memories linked to this one (``Reads.related``)."""
        return self.reads.related(memory_id, depth, direction, limit)

    def history(self, memory_id: str, limit: int = 20) -> HistoryResult:
        """The commits that changed this memory's file (``Reads.history``)."""
        return self.reads.history(memory_id, limit)

    def retrieve_context(self, query: str, token_budget: int = 4000, strategy: str = "relevance",
                         namespace: str | None = None, tags: Iterable[str] | str | None = (), type: str | None = None,
                         min_importance: float | None = None, max_importance: float | None = None, *,
                         progress: Progress | None = None) -> ContextResult:
        """Whole memories that together fit ``token_budget`` (``Reads.retrieve_context``)."""
        return self.reads.retrieve_context(query, token_budget, strategy, namespace, tags, type, min_importance,
                                           max_importance, progress=progress)

    @staticmethod
    def estimate_tokens(text: str) -> int:
        """The budget estimate ``retrieve_context`` uses (``Reads.estimate_tokens``)."""
        return Reads.estimate_tokens(text)

    def read_file(self, path: str, max_bytes: int = MAX_READ_BYTES) -> FileContent:
        """A text file inside the vault, as it is on disk (``Reads.read_file``)."""
        return self.reads.read_file(path, max_bytes)

    def complete_ids(self, prefix: str, limit: int = 20) -> builtins.list[str]:
        """Live memory ids and paths that start with ``prefix`` (``Reads.complete_ids``)."""
        return self.reads.complete_ids(prefix, limit)

    # ------------------------------------------------------------------ writes
    def remember(self, content: str, namespace: str = "default", tags: Iterable[str] | str | None = (),
                 title: str = "", source: str = "", ttl_days: float = 0, type: str | None = None,
                 importance: float | str | None = None) -> RememberResult:
        """Store a fact as a new file (``Writes.remember``)."""
        return self.writes.remember(content, namespace, tags, title, source, ttl_days, type, importance)

    def remember_many(self, items: Any) -> RememberBatchResult:
        """Remember several facts, each on its own (``Writes.remember_many``)."""
        return self.writes.remember_many(items)

    def update(self, memory_id: str, *, content: str | None = None, append: str | None = None,
               replace_old: str | None = None, replace_new: str | None = None,
               tags: Iterable[str] | str | None = None, add_tags: Iterable[str] | str | None = (),
               remove_tags: Iterable[str] | str | None = (), namespace: str | None = None,
               source: str | None = None, title: str | None = None, ttl_days: float | None = None,
               type: str | None = None, importance: float | str | None = None,
               expected_version: str | None = None, prepend: str | None = None,
               replace_section: str | None = None, section_content: str | None = None) -> UpdateResult:
        """Change a memory in place (``Writes.update``)."""
        return self.writes.update(memory_id, content=content, append=append, replace_old=replace_old,
                                  replace_new=replace_new, tags=tags, add_tags=add_tags, remove_tags=remove_tags,
                                  namespace=namespace, source=source, title=title, ttl_days=ttl_days, type=type,
                                  importance=importance, expected_version=expected_version, prepend=prepend,
                                  replace_section=replace_section, section_content=section_content)

    def forget(self, memory_id: str, expected_version: str | None = None) -> ForgetResult:
        """Move a memory's file to ``.trash/`` (``Writes.forget``)."""
        return self.writes.forget(memory_id, expected_version)

    def forget_many(self, memory_ids: Iterable[str] | str, expected_version: str | None = None,
                    dry_run: bool = False) -> ForgetBatchResult:
        """Forget several memories, all or nothing (``Writes.forget_many``)."""
        return self.writes.forget_many(memory_ids, expected_version, dry_run)

    def link(self, memory_id: str, target_id: str, relation: str = "related_to") -> LinkResult:
        """Add a relation to a memory's front matter (``Relations.link``)."""
        return self.relations.link(memory_id, target_id, relation)

    def unlink(self, memory_id: str, target_id: str, relation: str = "related_to") -> UnlinkResult:
        """Remove a relation from a memory's front matter (``Relations.unlink``)."""
        return self.relations.unlink(memory_id, target_id, relation)

    def move(self, memory_id: str, new_path: str) -> MoveResult:
        """Rename or move a note and rewrite every link to it (``Moves.move``)."""
        return self.moves.move(memory_id, new_path)

    # ------------------------------------------------------------------ owning the vault
    def stats(self, progress: Progress | None = None) -> Stats:
        """Totals and health at a glance (``Maintenance.stats``)."""
        return self.maintenance.stats(progress)

    def export_memories(self, namespace: str | None = None, format: str | None = None,
                        progress: Progress | None = None) -> builtins.list[Any]:
        """Every live memory as written (``Maintenance.export_memories``)."""
        return self.maintenance.export_memories(namespace, format, progress)

    def export_page(self, namespace: str | None = None, limit: int = 100, offset: int = 0) -> ExportPage:
        """One page of the export (``Maintenance.export_page``)."""
        return self.maintenance.export_page(namespace, limit, offset)

    def import_memories(self, items: Any, progress: Progress | None = None, format: str | None = None) -> ImportResult:
        """Import a batch, all or nothing (``Maintenance.import_memories``)."""
        return self.maintenance.import_memories(items, progress, format)

    def finish_interrupted_import(self) -> int:
        """Finish or drop an import a crash interrupted (``Maintenance.finish_interrupted_import``)."""
        return self.maintenance.finish_interrupted_import()

    def gc(self, older_than_days: float = TRASH_DAYS, progress: Progress | None = None) -> GcResult:
        """Empty the trash of the tool's old entries (``Maintenance.gc``)."""
        return self.maintenance.gc(older_than_days, progress)

    def trash_list(self) -> builtins.list[TrashEntry]:
        """What the tool put in the trash and can restore (``Maintenance.trash_list``)."""
        return self.maintenance.trash_list()

    def restore(self, key: str) -> RestoreResult:
        """Put a memory back from the trash (``Maintenance.restore``)."""
        return self.maintenance.restore(key)

    # ------------------------------------------------------------------ the index and the files
    def reconcile(self, progress: Progress | None = None) -> ReconcileReport:
        """Make the index match the files (``Reconciler.reconcile``), after undoing a
        move a crash interrupted (``Moves.finish_interrupted_move``)."""
        self.moves.finish_interrupted_move()
        self.git_dates.refresh()  # before the walk: files it reads take git's dates
        return self.reconciler.reconcile(progress)

    def reconcile_path(self, rel: str) -> str:
        """Fold one changed path into the index (``Reconciler.reconcile_path``)."""
        return self.reconciler.reconcile_path(rel)

    def reindex(self, *, sweep: bool = True, progress: Progress | None = None) -> ReconcileReport:
        """Rebuild the index from the files alone (``Reconciler.reindex``); then, with
        semantic recall on, embed every memory whose vector is missing (a file's vector
        depends on its bytes only, so unchanged files keep theirs). ``progress`` gets a
        ``Step`` as files are read ("indexing files") and memories embedded ("embedding
        memories")."""
        self.git_dates.refresh()
        report = self.reconciler.reindex(sweep=sweep, progress=progress)
        if self.semantic_on():
            report["embedded"] = self.vectors.rebuild(progress)
        return report

    def sweep_expired(self) -> int:
        """Move memories whose ``expires`` has passed to the trash (``Reconciler.sweep_expired``)."""
        return self.reconciler.sweep_expired()

    def finish_interrupted_move(self) -> builtins.list[str]:
        """Undo a move a crash interrupted (``Moves.finish_interrupted_move``)."""
        return self.moves.finish_interrupted_move()

    def undo_recorded_move(self, folder: Path, raw: bytes | None) -> builtins.list[str]:
        """Undo the move a journal records (``Moves.undo_recorded_move``)."""
        return self.moves.undo_recorded_move(folder, raw)

    # ------------------------------------------------------------------ git
    def sync(self, share_hand: bool = False) -> SyncResult:
        """Commit, pull, reindex what changed, push (``GitSync.sync``); ``share_hand``
        commits hand changes too (``sync --all``)."""
        return self.git.sync(share_hand)

    def sync_preview(self, share_hand: bool = False) -> SyncPreview:
        """What ``sync`` would commit now (``GitSync.sync_preview``): ``sync --dry-run``."""
        return self.git.sync_preview(share_hand)
