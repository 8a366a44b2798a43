"""Peak RSS of `agent-memory serve` with semantic recall on: a script, not a test.

    python benchmarks/semantic_server_rss.py VAULT [--queries 50]

Starts the server on stdio (as an MCP client does), asks ``recall`` questions that no
memory answers word for word (so the model and every vector load), and prints the
server process's peak RSS (``VmHWM``) and the recall latency seen by the client. Use
the vault ``semantic_scale.py --keep`` left, whose vectors are already there.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import question


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def server_pid(vault: Path) -> int:
    """The newest process serving this vault."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"serve" in cmd and str(vault).encode() in cmd:
                found.append(int(proc.name))
    return max(found)


async def run(vault: Path, queries: int) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "agent_memory", "serve", "--dir", str(vault)])
    rng = random.Random(3)
    asked = [question(rng, 4) + " zzznothing" for _ in range(queries)]
    async with Client(params) as client:
        pid = server_pid(vault)
        times, semantic = [], 0
        for q in asked:
            t0 = time.perf_counter()
            result = (await client.call_tool("recall", {"query": q})).structured_content
            times.append(time.perf_counter() - t0)
            semantic += any(hit.get("found_by") == "semantic" for hit in result["hits"])
        print(f"server pid {pid}: peak RSS {peak_rss_mb(pid):.0f} MB after {queries} recalls "
              f"({semantic} ranked by meaning); client-side p50 {statistics.median(times) * 1000:.1f} ms "
              f"(first {times[0] * 1000:.0f} ms: loads the model and the vectors)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("vault", type=Path)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    anyio.run(run, args.vault.resolve(), args.queries)


if __name__ == "__main__":
    main()
