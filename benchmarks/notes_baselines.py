"""The baselines of the real-notes benchmark (``benchmarks/notes.py``), written once and
frozen by hash before any ranking was tuned: ``notes.py`` prints this file's sha256 and
says when it differs from the one recorded there. Change nothing here to help a ranking;
a fix is a new baseline with a new hash, said so in benchmarks/README.md.

Every baseline sees the same notes: the corpus folder's ``*.md`` files (no folder or file
starting with a dot), each as its title (the file name without ``.md``, as Obsidian shows
it) and its body (the text after the front matter; the front matter itself, aliases
included, is not indexed). Each returns the paths of at most ``LIMIT`` notes, best first.

- ``Fts5Or``: plain SQLite FTS5 over (title, body), default ``unicode61`` tokenizer, the
  question's words OR-ed with English stop words removed, ordered by ``bm25()`` with
  equal column weights.
- ``Bm25sStemmed``: ``bm25s`` (Lucene BM25, k1 1.5, b 0.75, its own tokenizer) over
  title + body, with PyStemmer's English Snowball stemmer and the same stop words. Needs
  ``pip install bm25s PyStemmer`` (or ``pip install -e '.[bench]'``).
- ``Dense``: agent-memory's own encoder (``agent_memory.embed``, all-MiniLM-L6-v2, the
  semantic extra's model), cosine between the question and every chunk of every note; a
  note scores its best chunk. Chunks: the body's tokens (the model's tokenizer, no
  truncation) cut into windows that fit the model's 256 tokens with the title in front
  (``title\\n`` + window), consecutive windows overlapping by ``OVERLAP`` tokens, so every
  word of every note is embedded.
"""

from __future__ import annotations

import hashlib
import importlib
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import frontmatter
import yaml

LIMIT = 10
OVERLAP = 32  # tokens shared by consecutive chunks of a long note

# NLTK's English stop words: the common list, so "how do I" drops out of a question while
# "get", "shortcut" or "text" stay.
STOP_WORDS = frozenset("""
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
she her hers herself it its itself they them their theirs themselves what which who whom
this that these those am is are was were be been being have has had having do does did
doing a an the and but if or because as until while of at by for with about against
between into through during before after above below to from up down in out on off over
under again further then once here there when where why how all any both each few more
most other some such no nor not only own same so than too very s t can will just don
should now d ll m o re ve y ain aren couldn didn doesn hadn hasn haven isn ma mightn mustn
needn shan shouldn wasn weren won wouldn
""".split())

_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Note:
    path: str  # relative to the corpus folder, with forward slashes
    lang: str  # the top folder (en, de, ja, ru, zh, ar)
    title: str
    body: str
    permalink: str  # the same page in every language has the same one


def read_notes(folder: Path) -> list[Note]:
    """Every note of the corpus, sorted by path."""
    notes = []
    for file in sorted(folder.rglob("*.md")):
        rel = file.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts):
            continue
        text = file.read_text(encoding="utf-8")
        try:
            post = frontmatter.loads(text)
            meta, body = dict(post.metadata), post.content
        except (yaml.YAMLError, ValueError, TypeError):
            meta, body = {}, text
        notes.append(Note(path=rel.as_posix(), lang=rel.parts[0], title=file.stem, body=body,
                          permalink=str(meta.get("permalink") or "")))
    return notes


def query_words(question: str) -> list[str]:
    """The question's words, lower-cased, stop words removed, each once, in order."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(question.lower()):
        if word not in STOP_WORDS:
            seen.setdefault(word)
    return list(seen)


class Fts5Or:
    """Plain FTS5: every question word OR-ed, bm25 over title and body."""

    name = "fts5-or"

    def __init__(self, notes: list[Note]) -> None:
        self.paths = [n.path for n in notes]
        self.db = sqlite3.connect(":memory:")
        self.db.execute("CREATE VIRTUAL TABLE docs USING fts5(title, body)")
        self.db.executemany("INSERT INTO docs(rowid, title, body) VALUES (?, ?, ?)",
                            [(i, n.title, n.body) for i, n in enumerate(notes)])

    def search(self, question: str, limit: int = LIMIT) -> list[str]:
        words = query_words(question)
        if not words:
            return []
        expr = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = self.db.execute("SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?",
                               (expr, limit)).fetchall()
        return [self.paths[r[0]] for r in rows]


class Bm25sStemmed:
    """bm25s with PyStemmer's English stemmer; import errors tell the caller what to install."""

    name = "bm25s-stem"

    def __init__(self, notes: list[Note]) -> None:
        import bm25s
        import Stemmer

        self._bm25s = bm25s
        self.stemmer = Stemmer.Stemmer("english")
        self.paths = [n.path for n in notes]
        tokens = bm25s.tokenize([f"{n.title}\n{n.body}" for n in notes], stopwords=sorted(STOP_WORDS),
                                stemmer=self.stemmer, show_progress=False)
        self.retriever = bm25s.BM25()
        self.retriever.index(tokens, show_progress=False)

    def search(self, question: str, limit: int = LIMIT) -> list[str]:
        words = self._bm25s.tokenize([question], stopwords=sorted(STOP_WORDS), stemmer=self.stemmer,
                                     show_progress=False, return_ids=False)
        if not words[0]:
            return []
        found, scores = self.retriever.retrieve(words, k=min(limit, len(self.paths)), show_progress=False)
        return [self.paths[int(i)] for i, s in zip(found[0], scores[0]) if s > 0]


def _module(*names: str) -> Any:
    """The first of these modules that imports: the encoder's module by its path after
    the package's planned move into ``semantic/`` or before it, so neither needs an edit
    here (an edit would change this file's frozen hash)."""
    for name in names[:-1]:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not name.startswith(exc.name):
                raise
    return importlib.import_module(names[-1])


def chunk_texts(note: Note, tokenize: Callable[[str], Any], max_tokens: int) -> list[str]:
    """The texts embedded for one note: ``title\\n`` + a window of the body's tokens,
    windows overlapping by ``OVERLAP`` tokens, each fitting ``max_tokens`` with the
    model's two special tokens and the title. A note with no body is its title."""
    head = f"{note.title}\n"
    room = max(64, max_tokens - 2 - len(tokenize(head).ids))
    encoding = tokenize(note.body)
    offsets = encoding.offsets
    if not offsets:
        return [note.title]
    chunks = []
    start = 0
    while True:
        end = min(start + room, len(offsets))
        chunks.append(head + note.body[offsets[start][0]:offsets[end - 1][1]])
        if end == len(offsets):
            return chunks
        start = end - OVERLAP


class Dense:
    """Cosine over MiniLM vectors of every chunk; a note scores its best chunk.
    ``cache``: a folder to keep the chunk vectors in (keyed by the model's files and the
    chunk texts), since embedding ~9,000 chunks takes minutes."""

    name = "dense-minilm"

    def __init__(self, notes: list[Note], cache: Path | None = None,
                 progress: Callable[[int, int], None] | None = None) -> None:
        import numpy as np
        from tokenizers import Tokenizer

        embed = _module("agent_memory.semantic.embed", "agent_memory.embed")
        max_tokens = embed.MAX_TOKENS
        self._np = np
        self.encoder = embed.shared_encoder()
        folder = _module("agent_memory.semantic.model_files", "agent_memory.model_files").model_dir()
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.no_truncation()
        tokenizer.no_padding()

        def tokenize(text: str) -> Any:
            return tokenizer.encode(text, add_special_tokens=False)

        self.paths = [n.path for n in notes]
        texts: list[str] = []
        owner: list[int] = []
        for i, note in enumerate(notes):
            for text in chunk_texts(note, tokenize, max_tokens):
                texts.append(text)
                owner.append(i)
        self.owner = np.asarray(owner, dtype=np.int64)
        self.chunks = len(texts)
        key = hashlib.sha256()
        for name in ("config.json", "tokenizer.json", "model.safetensors"):
            key.update(hashlib.sha256((folder / name).read_bytes()).digest())
        key.update(f"{max_tokens} {OVERLAP}".encode())
        for text in texts:
            key.update(hashlib.sha256(text.encode()).digest())
        stored = cache / f"notes-dense-{key.hexdigest()[:24]}.npy" if cache else None
        self.cached = bool(stored and stored.is_file())
        if stored and self.cached:
            self.vectors = np.load(stored)
            return
        parts = []
        step = 256
        for start in range(0, len(texts), step):
            parts.append(self.encoder.encode(texts[start:start + step]))
            if progress:
                progress(min(start + step, len(texts)), len(texts))
        self.vectors = np.concatenate(parts) if parts else np.zeros((0, 384), dtype=np.float32)
        if stored:
            stored.parent.mkdir(parents=True, exist_ok=True)
            np.save(stored, self.vectors)

    def search(self, question: str, limit: int = LIMIT) -> list[str]:
        np = self._np
        scores = self.vectors @ self.encoder.encode([question])[0]
        best = np.full(len(self.paths), -np.inf, dtype=np.float32)
        np.maximum.at(best, self.owner, scores)
        order = np.argsort(-best, kind="stable")[:limit]
        return [self.paths[int(i)] for i in order]
