"""Semantic recall at scale: a script, not a test (needs the semantic extra and its model).

    python benchmarks/semantic_scale.py --n 100000
    python benchmarks/semantic_scale.py --n 100000 --keep /tmp/scale-100k   # reuse the files

Generates the vault ``scale.py`` generates. Embedding 100,000 memories with the real
model takes over an hour on 2 shared cores, so the encoder's throughput is measured on a
sample and every memory then gets one of the sample's real vectors plus noise, written
into the vectors file (``vectors.VectorStore``): a search's cost does not depend on
which memory has which vector, and the questions still find some above the floor. Then:
recall latency with semantic recall on, query encoding included (questions no memory
answers word for word, so the semantic ranking is what runs; questions some memory
answers completely, which never encode), with a namespace filter, the encode alone,
the vectors' size on disk and in memory, and the peak RSS of this process (a vault,
the model and every vector loaded: what a server holds).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as agent_memory.semantic does before numpy loads

import numpy as np
from scale import generate, question

from agent_memory.semantic import embed, vectors
from agent_memory.vault.vault import Vault

SAMPLE = 256  # memories embedded with the real model, for its throughput


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000, help="memories to generate (default 10,000)")
    parser.add_argument("--queries", type=int, default=200, help="queries per kind")
    parser.add_argument("--keep", type=Path, default=None, help="generate into (or reuse) this folder")
    args = parser.parse_args()

    root = args.keep or Path(tempfile.mkdtemp(prefix="agent-memory-semantic-scale-"))
    if not any(root.glob("20*")):
        root.mkdir(parents=True, exist_ok=True)
        print(f"generating {args.n:,} memories in {root} …", file=sys.stderr)
        generate(root, args.n)
    rows: list[tuple[str, str, str]] = []
    vault = Vault(root)
    try:
        shas = sorted({row[0] for row in vault.index.query("SELECT sha256 FROM memories")})
        bodies = [row[0] for row in vault.index.query("SELECT body FROM memories LIMIT ?", (SAMPLE,))]
        encoder = embed.shared_encoder()
        t0 = time.perf_counter()
        real = encoder.encode(bodies)
        rate = len(bodies) / (time.perf_counter() - t0)
        rows.append(("embedding (real model, one thread)", f"{rate:.0f} memories/s", f"100k in {100_000 / rate / 60:.0f} min"))

        store = vectors.VectorStore(vault.index_dir)
        store.clear()
        rng = np.random.default_rng(5)
        for start in range(0, len(shas), 1000):  # in chunks: no 150 MB array of floats at once
            chunk = shas[start:start + 1000]
            fake = real[np.arange(start, start + len(chunk)) % len(real)]
            fake = fake + 0.3 * rng.standard_normal(fake.shape).astype(np.float32) / np.sqrt(embed.DIMENSIONS)
            store.put(chunk, fake / np.linalg.norm(fake, axis=1, keepdims=True))
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # a rerun's clear and rewrite left it in the WAL
        rows.append(("vectors file (int8 + scale per memory)", f"{store.size_bytes() / 1e6:.1f} MB", ""))
        store.close()
        del shas, real  # the scaffolding's 100k strings are not what a server holds

        status = vault.stats()["semantic"]
        assert status["current"], status
        t0 = time.perf_counter()
        embedder = vault.vectors.embedder()
        loaded = embedder.index()  # type: ignore[union-attr]
        load_s = time.perf_counter() - t0
        held = embedder._loaded.held_bytes() + loaded.rids.nbytes + loaded.rows.nbytes  # type: ignore[union-attr]
        rows.append(("vectors in memory (codes, signs, keys, row map)", f"{held / 1e6:.1f} MB, loaded in {load_s:.2f} s", ""))

        qrng = random.Random(3)
        partial = [question(qrng, 4) + " zzznothing" for _ in range(args.queries)]
        complete = [question(qrng, 2) for _ in range(args.queries)]
        encode = []
        for q in partial[:50]:
            t0 = time.perf_counter()
            encoder.encode([q])
            encode.append(time.perf_counter() - t0)
        rows.append(("query encode alone", f"p50 {pct(encode, .5) * 1000:.1f} ms", ""))
        for label, queries, kwargs, target in (
            ("recall, semantic ranking (no complete hit)", partial, {}, "p50 ≤ 20 ms"),
            ("recall, all terms in a memory (no encode)", complete, {}, ""),
            ("recall, semantic + namespace filter", partial[:100], {"namespace": "support"}, ""),
        ):
            times, semantic = [], 0
            for q in queries:
                t0 = time.perf_counter()
                found = vault.search(q, limit=10, **kwargs)
                times.append(time.perf_counter() - t0)
                semantic += any(hit.get("found_by") == "semantic" for hit in found["hits"])
            result = (f"p50 {pct(times, .5) * 1000:.1f} ms / p95 {pct(times, .95) * 1000:.1f} ms "
                      f"({semantic} of {len(queries)} ranked by meaning)")
            rows.append((label, result, target))
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        rows.append(("peak RSS (vault + model + vectors)", f"{rss:,.0f} MB", "≤ 250 MB"))
    finally:
        vault.close()

    print(f"\nsemantic recall at {args.n:,} memories (one run)\n")
    width = max(len(r[0]) for r in rows)
    vwidth = max(len(r[1]) for r in rows)
    print(f"| {'measure'.ljust(width)} | {'result'.ljust(vwidth)} | target |")
    print(f"|{'-' * (width + 2)}|{'-' * (vwidth + 2)}|--------|")
    for name, value, target in rows:
        print(f"| {name.ljust(width)} | {value.ljust(vwidth)} | {target} |")


if __name__ == "__main__":
    main()
