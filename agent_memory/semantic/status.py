"""Whether semantic recall is on for a vault, and its vectors when it is.

Importing this module imports nothing optional: numpy, ``tokenizers`` and the model
load only when a vault with semantic recall on first needs them (``vectors``, ``embed``).
Without the ``semantic`` extra, recall is exactly lexical.

On (``recall.semantic`` unset, or true, and the extra installed) a vault keeps one
vector per memory beside its index (``vectors.VectorStore``). A watcher or server keeps
them current on a background thread (``background``); a one-shot command embeds what
is missing itself when it searches, at most ``INLINE_CATCH_UP`` memories.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InvalidInput
from ..models import SemanticStatus
from ..progress import Progress
from ..recall.sql import Filters

if TYPE_CHECKING:
    from ..index.db import Index
    from .vectors import Embedder

INLINE_CATCH_UP = 64  # memories without a vector a search embeds itself before ranking
SWEEP_WAIT = 120.0  # seconds the vectors wait at most for a watcher's first sweep (``hold``)
EXTRA_MODULES = ("numpy", "tokenizers")
INSTALL_HINT = 'pip install "agent-memory[semantic]"'


@functools.cache
def extra_installed() -> bool:
    """Whether the ``semantic`` extra's packages are importable (checked without importing
    them, once per process: every search asks)."""
    return all(importlib.util.find_spec(name) is not None for name in EXTRA_MODULES)


def wanted(setting: bool | None, asked: bool | None = None) -> bool:
    """Whether a search uses embeddings: the argument, else the vault setting, else
    whether the extra is installed. Asking for it without the extra is an error."""
    on = asked if asked is not None else setting if setting is not None else extra_installed()
    if on and asked and not extra_installed():
        raise InvalidInput(f"semantic recall needs the optional extra: {INSTALL_HINT}; or search with semantic=false.")
    return bool(on and extra_installed())


class Semantic:
    """One vault's vectors: the embedder (made on first use), and why there is none."""

    def __init__(self, index: Index, folder: Path) -> None:
        self.index = index
        self.folder = folder
        self._embedder: Embedder | None = None
        self._lock = threading.Lock()
        self.problem: str | None = None  # why there are no vectors (no model)
        self.background = False
        self._swept = threading.Event()  # cleared while a watcher's first sweep runs
        self._swept.set()

    def hold(self) -> None:
        """A watcher's first sweep is starting: the vectors and the model load after it
        (``release``). They would be read for an index the sweep is changing, and a
        100k-memory server's memory peaked with both at once (the sweep's reads, the
        vectors, the model)."""
        self._swept.clear()

    def release(self) -> None:
        self._swept.set()

    def embedder(self) -> Embedder | None:
        """The embedder, made on first call; None (``problem`` says why) when the model
        is not installed."""
        if self._embedder is None:
            self._swept.wait(SWEEP_WAIT)
        with self._lock:
            if self._embedder is None and self.problem is None:
                from . import model_files

                try:
                    model_files.model_dir()
                except model_files.ModelMissing as exc:
                    self.problem = str(exc)
                    return None
                os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads: see embed.py
                from .vectors import Embedder

                self._embedder = Embedder(self.index, self.folder)
                if self.background:
                    self._embedder.start()
            return self._embedder

    def keep_current(self) -> None:
        """From now on embed changed memories on a background thread (a server or a
        watcher: writes and edits wake it, none waits for it)."""
        self.background = True
        found = self.embedder()
        if found is not None:
            found.start()

    def wake(self) -> None:
        """The index changed: let the background thread catch up (no-op without one)."""
        if self._embedder is not None:
            self._embedder.wake()

    def nearest(self, question: str, allowed: Callable[[Filters, str, list[int] | None], set[int]]
                ) -> Callable[[Filters, str, int], list[tuple[int, float]]] | None:
        """The engine's ``nearest`` for one question (None without a model). The
        question is encoded only when the engine calls it: a question some memory
        answers word for word never waits for the model."""
        found = self.embedder()
        if found is None:
            return None

        def nearest(filters: Filters, now: str, want: int) -> list[tuple[int, float]]:
            found.catch_up(most=INLINE_CATCH_UP, wait=False)
            vectors = found.index()  # before the model loads: what building it reads is freed by then
            return vectors.nearest(found.encode_query(question), lambda rids: allowed(filters, now, rids), want)

        return nearest

    def rebuild(self, progress: Progress | None = None) -> int:
        """Embed every memory without a vector now (``reindex``); returns how many."""
        found = self.embedder()
        return found.catch_up(progress=progress) if found is not None else 0

    def status(self, enabled: bool) -> SemanticStatus:
        out = SemanticStatus(enabled=enabled, installed=extra_installed())
        if not out["installed"]:
            out["hint"] = f"Install the optional extra for recall by meaning: {INSTALL_HINT}"
            return out
        if not enabled:
            return out
        found = self.embedder()
        if found is None:
            out["hint"] = self.problem or ""
            return out
        memories, missing = found.counts()
        out["model"], out["memories"], out["vectors"] = found.model, memories, memories - missing
        out["current"], out["vectors_path"], out["vectors_bytes"] = missing == 0, str(found.store.path), found.store.size_bytes()
        if missing:
            out["hint"] = (f"{missing} memories have no vector yet: a running server or watcher embeds them, "
                           "or run `agent-memory reindex`.")
        if found.error:
            out["error"] = found.error
        return out

    def close(self) -> None:
        with self._lock:
            if self._embedder is not None:
                self._embedder.close()
                self._embedder = None


def vector_summary(status: SemanticStatus) -> str:
    """One line for ``stats`` and ``doctor``."""
    if not status["installed"]:
        return "off (the optional extra is not installed)"
    if not status["enabled"]:
        return "off (recall.semantic = false)"
    if "memories" not in status:
        return f"on, but no model: {status.get('hint', '')}"
    state = "current" if status["current"] else f"{status['memories'] - status['vectors']} missing"
    return f"on: {status['vectors']} of {status['memories']} memories have vectors ({state})"
