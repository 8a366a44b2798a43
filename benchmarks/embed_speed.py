"""How long embedding a vault's notes takes: a script, not a test (needs the semantic extra).

    python benchmarks/embed_speed.py /work/shared/corpora/obsidian-help            # every chunk
    python benchmarks/embed_speed.py /work/shared/corpora/obsidian-help --every 20  # a sample

Cuts every note (``*.md``, no dot folders; its title is the file name) into the chunks a
vault embeds (``embed.Encoder.chunks`` over ``vectors.embedded_text``), then encodes the
same chunks twice in one run: with the encoder as it was before this work (the module
read from git at ``--reference``, one forward pass per chunk, exact GELU, one thread) and
with the current one (``Encoder.encode_ids``: sorted by length, batched, on
``embed.THREADS`` threads). Prints CPU time (process time, all threads) and wall time for
each, the load average before and after (the machine may be shared: wall time then
says little, CPU time more), the lowest cosine between the two paths' vectors, and with
``--every`` the times scaled to every chunk.

``--onnx FILE`` also encodes the sample with ONNX Runtime over that model file (an
all-MiniLM-L6-v2 export taking ``input_ids``, ``attention_mask`` and ``token_type_ids``
and returning the last hidden state, e.g. an int8 one), one thread, the same batches and
mean pooling: the faster-runtime question, answered in the same run (``onnxruntime``
is not a dependency; install it beside the extra to ask).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as agent_memory.semantic does before numpy loads

import numpy as np

from agent_memory.semantic import embed
from agent_memory.semantic.vectors import embedded_text

REFERENCE = "3190b96"  # main before chunks and the faster forward pass


def notes(folder: Path) -> list[tuple[str, str]]:
    """(title, body) of every note, by path."""
    found = []
    for path in sorted(folder.rglob("*.md")):
        if any(part.startswith(".") for part in path.relative_to(folder).parts):
            continue
        found.append((path.stem, path.read_text(encoding="utf-8", errors="replace")))
    return found


def reference_encoder(rev: str) -> object:
    """The encoder class as it was at ``rev``, loaded from git (its relative import of
    ``model_files`` pointed at today's, which did not change)."""
    repo = Path(__file__).resolve().parents[1]
    source = subprocess.run(["git", "show", f"{rev}:agent_memory/semantic/embed.py"], cwd=repo, check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType("embed_reference")
    module.__dict__["__package__"] = "agent_memory.semantic"
    exec(compile(source, f"{rev}:embed.py", "exec"), module.__dict__)  # noqa: S102 - our own file at a commit
    return module.Encoder()


def timed(work: object) -> tuple[object, float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    out = work()  # type: ignore[operator]
    return out, time.process_time() - cpu, time.perf_counter() - wall


def onnx_encoder(model: Path, pieces: list[list[int]]) -> np.ndarray:
    """Unit vectors of ``pieces`` by ONNX Runtime over ``model``: one intra-op thread
    without spinning (spinning threads bill CPU for waiting), batched as ``encode_ids``."""
    import onnxruntime  # type: ignore[import-not-found]

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(str(model), options)
    order = sorted(range(len(pieces)), key=lambda i: len(pieces[i]))
    out = np.zeros((len(pieces), embed.DIMENSIONS), dtype=np.float32)
    start = 0
    while start < len(order):
        end = start + 1
        while end < len(order) and (end + 1 - start) * len(pieces[order[end]]) <= embed.BATCH_TOKENS:
            end += 1
        chosen = order[start:end]
        width = len(pieces[chosen[-1]])
        ids = np.zeros((len(chosen), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, i in enumerate(chosen):
            ids[row, : len(pieces[i])] = pieces[i]
            mask[row, : len(pieces[i])] = 1
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        out[chosen] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        start = end
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--every", type=int, default=1, help="encode every Nth chunk only (times scaled up)")
    parser.add_argument("--reference", default=REFERENCE, help="git revision of the reference encoder")
    parser.add_argument("--no-reference", action="store_true", help="time the current encoder only")
    parser.add_argument("--onnx", type=Path, help="also time ONNX Runtime over this model file")
    args = parser.parse_args()

    encoder = embed.Encoder()
    found = notes(args.corpus)
    pieces = [p for title, body in found for p in encoder.chunks(embedded_text(title, body), head=title)]
    sample = pieces[:: args.every]
    tokens = sum(map(len, pieces))
    print(f"{len(found)} notes, {len(pieces)} chunks, {tokens} tokens; encoding {len(sample)} chunks "
          f"({sum(map(len, sample))} tokens), {embed.THREADS} threads, {os.cpu_count()} cores")
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    scale = len(pieces) / len(sample)
    rows = []
    new, cpu, wall = timed(lambda: encoder.encode_ids(sample))
    rows.append(("current (batched, threads)", cpu, wall))
    if not args.no_reference:
        old_encoder = reference_encoder(args.reference)
        old, cpu, wall = timed(lambda: np.concatenate([old_encoder._forward([p]) for p in sample]))  # type: ignore[attr-defined]
        rows.append((f"reference {args.reference} (one pass per chunk)", cpu, wall))
        cosines = (np.asarray(old) * np.asarray(new)).sum(axis=1)
        print(f"agreement: lowest cosine {cosines.min():.5f}, mean {cosines.mean():.6f}")
    if args.onnx:
        other, cpu, wall = timed(lambda: onnx_encoder(args.onnx, sample))
        rows.append((f"onnxruntime {args.onnx.name}, one thread", cpu, wall))
        cosines = (np.asarray(other) * np.asarray(new)).sum(axis=1)
        print(f"onnx agreement with current: lowest cosine {cosines.min():.5f}, mean {cosines.mean():.6f}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    for name, cpu, wall in rows:
        print(f"{name:40s} CPU {cpu:7.1f} s  wall {wall:7.1f} s  ({tokens / scale / cpu:,.0f} tokens per CPU second)"
              + (f"  -> every chunk: CPU {cpu * scale:,.0f} s, wall {wall * scale:,.0f} s" if args.every > 1 else ""))


if __name__ == "__main__":
    main()
