"""How fast a human's edit reaches ``search``, and what a full reconcile costs.

Builds (or reuses) a vault of ``--n`` memories written in the tool's own file format
and indexed by ``reindex``, starts the ``Watcher`` (and lets its start-up sweep
finish), then ``--edits`` times replaces a file atomically (``os.replace`` of an edited
copy, as editors save) and times how long until ``search``, on a second connection as
another agent would have, returns the new text. Then it times a full ``reconcile()``
with nothing changed and with 1% of the files changed, and the slowest search made
while one runs. Prints a plain table. Target: p95 <= 100 ms.

    python benchmarks/watch_latency.py                 # 10,000 memories
    python benchmarks/watch_latency.py --n 100000      # the big vault (~20 s to build)
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from agent_memory.note.render import render_new
from agent_memory.disk.layout import new_id
from agent_memory.watch.watcher import Watcher
from agent_memory.clock import iso
from agent_memory.vault.vault import Vault

WORDS = (
    "customer deploy friday invoice billing acme priya release server database backup "
    "migration schema latency budget meeting roadmap feature bug incident pager alert "
    "dashboard metric quota region cluster token rotate secret vendor contract renewal "
    "onboarding laptop office holiday travel expense approval review design prototype"
).split()
POLL = 0.001
TIMEOUT = 10.0


def memory_text(i: int, rng: random.Random) -> str:
    start = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=37 * i)
    body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 40)))
    fields = {
        "id": new_id(int(start.timestamp() * 1000)),
        "namespace": "bench",
        "tags": [rng.choice(WORDS), rng.choice(WORDS)],
        "created": iso(start),
        "updated": iso(start),
    }
    return render_new(fields, f"Memory {i}: {body}")


def memory_path(i: int) -> str:
    day = dt.datetime(2024, 1, 1) + dt.timedelta(minutes=37 * i)
    return f"{day:%Y/%m/%d}/memory-{i}.md"


def build(root: Path, n: int) -> None:
    """Write ``n`` files (once; reused while the count matches) and index them."""
    stamp = root / ".bench-count"
    if stamp.exists() and stamp.read_text() == str(n):
        return
    rng = random.Random(1)
    started = time.perf_counter()
    for i in range(n):
        path = root / memory_path(i)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(memory_text(i, rng), encoding="utf-8")
    with Vault.init(root, sync=False) as vault:
        vault.reindex(sweep=False)
    stamp.write_text(str(n))
    print(f"built {n:,} memories in {time.perf_counter() - started:.1f}s", file=sys.stderr)


def with_marker(path: Path, marker: str) -> str:
    """The file's text with one new word at the end of the body (id and keys kept)."""
    return path.read_text(encoding="utf-8").rstrip("\n") + f" {marker}\n"


def replace_atomically(path: Path, text: str) -> None:
    """As an editor saves: write a temp file next to it, then rename over it."""
    tmp = path.with_name(f".{path.name}.swp.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def edit_latencies(root: Path, n: int, edits: int, debounce: float) -> list[float]:
    rng = random.Random(2)
    run = os.urandom(4).hex()  # a reused vault still holds the words of earlier runs
    latencies: list[float] = []
    with Vault(root, sync=False) as vault, Vault(root, sync=False) as reader:
        with Watcher(vault, debounce=debounce) as watcher:
            while not watcher.counts["sweeps"]:  # steady state: the start-up sweep is over
                time.sleep(POLL)
            for k in range(edits):
                i = rng.randrange(n)
                marker = f"zqmark{run}x{k}"
                path = root / memory_path(i)
                text = with_marker(path, marker)
                started = time.perf_counter()
                replace_atomically(path, text)
                while not reader.search(marker)["hits"]:
                    if time.perf_counter() - started > TIMEOUT:
                        raise SystemExit(f"edit {k} of {memory_path(i)} not searchable after {TIMEOUT}s")
                    time.sleep(POLL)
                latencies.append(time.perf_counter() - started)
    return latencies


def search_stall(vault: Vault) -> float:
    """Slowest search on the same vault object while a full reconcile runs beside it
    (as in the server: a sweep on the watcher thread, recall on another)."""
    finished = threading.Event()
    sweeper = threading.Thread(target=lambda: (vault.reconcile(), finished.set()))
    worst = 0.0
    sweeper.start()
    while not finished.is_set():
        started = time.perf_counter()
        vault.search("nonexistentword")
        worst = max(worst, time.perf_counter() - started)
    sweeper.join()
    return worst


def reconcile_times(root: Path, n: int) -> tuple[float, float, int, float]:
    """Seconds for a full reconcile with nothing changed, then with 1% of files changed,
    and the slowest search during an unchanged one."""
    with Vault(root, sync=False) as vault:
        vault.reconcile()  # settle whatever the edits left
        started = time.perf_counter()
        vault.reconcile()
        idle = time.perf_counter() - started
        stall = search_stall(vault)
        rng = random.Random(3)
        changed = max(1, n // 100)
        for i in rng.sample(range(n), changed):
            path = root / memory_path(i)
            replace_atomically(path, with_marker(path, f"changed{os.urandom(4).hex()}"))
        started = time.perf_counter()
        report = vault.reconcile()
        busy = time.perf_counter() - started
        assert report["updated"] == changed, report
    return idle, busy, changed, stall


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000, help="memories in the vault (default 10000)")
    parser.add_argument("--edits", type=int, default=200, help="edits to time (default 200)")
    parser.add_argument("--debounce", type=float, default=None, help="watcher debounce in seconds (default: the library's)")
    parser.add_argument("--dir", type=Path, default=None, help="vault folder to build or reuse (default: a temp folder)")
    args = parser.parse_args()

    root = (args.dir or Path(tempfile.gettempdir()) / f"agent-memory-bench-{args.n}").absolute()
    build(root, args.n)
    from agent_memory.watch.watcher import DEFAULT_DEBOUNCE

    debounce = DEFAULT_DEBOUNCE if args.debounce is None else args.debounce
    latencies = edit_latencies(root, args.n, args.edits, debounce)
    idle, busy, changed, stall = reconcile_times(root, args.n)

    ms = [x * 1000 for x in latencies]
    rows = [
        ("memories", f"{args.n:,}"),
        ("debounce", f"{debounce * 1000:.0f} ms"),
        (f"edit -> search, p50 ({len(ms)} edits)", f"{statistics.median(ms):.1f} ms"),
        ("edit -> search, p95", f"{percentile(ms, 0.95):.1f} ms"),
        ("edit -> search, max", f"{max(ms):.1f} ms"),
        ("target p95", "<= 100 ms: " + ("met" if percentile(ms, 0.95) <= 100 else "MISSED")),
        ("reconcile(), nothing changed", f"{idle * 1000:.0f} ms"),
        (f"reconcile(), 1% changed ({changed:,} files)", f"{busy * 1000:.0f} ms"),
        ("slowest search during a reconcile", f"{stall * 1000:.1f} ms"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"{'measure'.ljust(width)}  value")
    print(f"{'-' * width}  {'-' * 12}")
    for name, value in rows:
        print(f"{name.ljust(width)}  {value}")


if __name__ == "__main__":
    main()
