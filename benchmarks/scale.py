"""How agent-memory holds up at scale: a script, not a test.

    python benchmarks/scale.py            # 10,000 memories
    python benchmarks/scale.py --n 100000

Generates a realistic vault (files in the tool's own format, ~500 bytes each, spread
over dated folders, namespaces and tags), then prints one table: full reindex,
nothing-changed start, reconcile after 1% changed, search latency (all-terms and
partial, in the library; CLI wall time), remember/s with fsync, and peak RSS.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import os
import platform
import random
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_memory.note import render_new  # noqa: E402
from agent_memory.store import new_id  # noqa: E402
from agent_memory.vault import Vault  # noqa: E402

WORDS = (
    "deploy release customer billing invoice contract api database postgres index cache queue worker "
    "kubernetes pod node cluster backup restore incident outage latency timeout retry config secret token "
    "review approval payment checkout order shipping refund report dashboard metric alert oncall rotation "
    "meeting friday monday weekly sprint roadmap feature flag migration schema staging production test "
    "flaky runner build pipeline docker image registry network firewall vpn dns certificate renewal "
    "password rotation policy audit compliance gdpr privacy export import sync backup storage bucket "
    "budget quarter forecast hiring interview onboarding laptop office travel conference booth talk"
).split()
NAMES = "acme globex initech umbrella hooli stark wayne wonka tyrell cyberdyne soylent massive".split()
NAMESPACES = ["support", "engineering", "team", "sales", "ops", "default"]
TAGS = WORDS[:40] + NAMES


SYLLABLES = "ka lo mi ser tan vol dre pix qua ben sor lin mat gor fel yun ros tep wid zan".split()


def vocabulary(size: int = 20_000) -> list[str]:
    """Domain words first, then made-up words: ranked for a Zipf draw, like real text."""
    rng = random.Random(11)
    made = {"".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(size * 2)}
    return WORDS + NAMES + sorted(made)[:size]


VOCAB = vocabulary()
ZIPF = list(itertools.accumulate(1 / (rank + 1) ** 1.07 for rank in range(len(VOCAB))))


def sentence(rng: random.Random, words: int) -> str:
    picked = rng.choices(VOCAB, cum_weights=ZIPF, k=words)
    picked.insert(rng.randrange(len(picked)), rng.choice(NAMES).capitalize())
    return " ".join(picked).capitalize() + "."


def generate(root: Path, n: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    start = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    for i in range(n):
        created = start + dt.timedelta(minutes=17 * i)
        stamp = created.strftime("%Y-%m-%dT%H:%M:%SZ")
        body = " ".join(sentence(rng, rng.randint(8, 16)) for _ in range(rng.randint(3, 5)))
        fields = {
            "id": new_id(int(created.timestamp() * 1000)),
            "namespace": rng.choice(NAMESPACES),
            "tags": sorted(set(rng.sample(TAGS, rng.randint(1, 4)))),
            "created": stamp,
            "updated": stamp,
        }
        folder = root / created.strftime("%Y/%m/%d")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"memory-{i}.md").write_text(render_new(fields, body), encoding="utf-8")


def question(rng: random.Random, words: int) -> str:
    """A query drawn like the text: mostly frequent words, now and then a rare one."""
    return " ".join(rng.choices(VOCAB, cum_weights=ZIPF, k=words))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def drop_index(root: Path) -> None:
    shutil.rmtree(root / ".index", ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000, help="memories to generate (default 10,000)")
    parser.add_argument("--queries", type=int, default=300, help="queries per search kind")
    parser.add_argument("--keep", type=Path, default=None, help="generate into (or reuse) this folder")
    args = parser.parse_args()

    root = args.keep or Path(tempfile.mkdtemp(prefix="agent-memory-scale-"))
    if not any(root.glob("20*")):
        root.mkdir(parents=True, exist_ok=True)
        print(f"generating {args.n:,} memories in {root} …", file=sys.stderr)
        generate(root, args.n)
    rows: list[tuple[str, str, str]] = []

    drop_index(root)
    reindex_s = timed(lambda: Vault(root).close())
    rows.append(("full reindex (no index yet)", f"{reindex_s:.2f} s", "≤ 15 s at 100k"))

    start_s = statistics.median(timed(lambda: Vault(root).close()) for _ in range(3))
    rows.append(("start, nothing changed (reconcile)", f"{start_s * 1000:.0f} ms", "≤ 1 s at 100k"))

    files = sorted(root.glob("20*/*/*/*.md"))
    rng = random.Random(1)
    for path in rng.sample(files, max(1, len(files) // 100)):
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("Edited by hand: renewal moved to friday.\n")
    changed_s = timed(lambda: Vault(root).close())
    rows.append((f"start, 1% changed ({len(files) // 100:,} files)", f"{changed_s * 1000:.0f} ms", ""))

    vault = Vault(root)
    qrng = random.Random(3)
    all_q = [question(qrng, 2) for _ in range(args.queries)]
    any_q = [question(qrng, 4) + " zzznothing" for _ in range(args.queries)]
    for label, queries, match, target in (
        ("search all-terms", all_q, "all", "p50 ≤ 2 ms, p95 ≤ 15 ms"),
        ("search partial (OR)", any_q, "auto", "p50 ≤ 10 ms, p95 ≤ 40 ms"),
    ):
        times = []
        for q in queries:
            t0 = time.perf_counter()
            vault.search(q, match=match, limit=10)
            times.append(time.perf_counter() - t0)
        rows.append((label, f"p50 {pct(times, .5) * 1000:.2f} ms / p95 {pct(times, .95) * 1000:.2f} ms", target))
    filtered = []
    for q in all_q[:100]:
        t0 = time.perf_counter()
        vault.search(q, namespace="support", tags=["deploy"], limit=10)
        filtered.append(time.perf_counter() - t0)
    rows.append(("search + namespace + tag filter", f"p50 {pct(filtered, .5) * 1000:.2f} ms / p95 {pct(filtered, .95) * 1000:.2f} ms", ""))
    vault.close()

    script = Path(sys.executable).with_name("agent-memory")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "agent_memory"]
    walls = []
    for q in all_q[:15]:
        t0 = time.perf_counter()
        subprocess.run([*command, "--dir", str(root), "search", q], capture_output=True, check=True)
        walls.append(time.perf_counter() - t0)
    rows.append(("CLI `search` wall time", f"median {statistics.median(walls) * 1000:.0f} ms", "≤ 300 ms at 10k"))

    with tempfile.TemporaryDirectory() as tmp:
        fresh = Vault.init(Path(tmp) / "v")
        count = 500
        t0 = time.perf_counter()
        for i in range(count):
            fresh.remember(f"benchmark fact {i} about {WORDS[i % len(WORDS)]} and {NAMES[i % len(NAMES)]}")
        rate = count / (time.perf_counter() - t0)
        fresh.close()
    rows.append(("remember (fsync, dedup, index)", f"{rate:,.0f} /s", "≥ 500 /s"))

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows.append(("peak RSS", f"{rss:,.0f} MB", ""))

    print(f"\nagent-memory scale benchmark: {args.n:,} memories; Python {platform.python_version()}, "
          f"SQLite {sqlite3.sqlite_version}, {os.cpu_count()} cores, {platform.machine()} {platform.system()}\n")
    width = max(len(r[0]) for r in rows)
    vwidth = max(len(r[1]) for r in rows)
    print(f"| {'measure'.ljust(width)} | {'result'.ljust(vwidth)} | target |")
    print(f"|{'-' * (width + 2)}|{'-' * (vwidth + 2)}|--------|")
    for name, value, target in rows:
        print(f"| {name.ljust(width)} | {value.ljust(vwidth)} | {target} |")
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
