"""CPU time of one `remember`, in the library and in a real `agent-memory serve` over
stdio, for this tree and (``--tree``) another, runs interleaved.

    python benchmarks/remember_cpu.py [--tree OTHER_CHECKOUT] [--rounds 3] [--n 300]

``scale.py`` reports remembers per second in wall time, which on a shared machine moves
with everyone else's load; CPU time moves much less, so two trees compared in the same
period, A B A B, say which spends less. Per round and tree it prints the library's CPU
per remember on a fresh vault (``time.process_time``, user and system), and the
server's CPU per `remember` call (all its threads, the watcher's included: from
``/proc``, Linux only) with the calls per second the SDK client saw; then each tree's
median and range, and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
WORDS = "deploy release customer billing invoice contract database index cache queue worker".split()


def library(count: int) -> dict[str, float]:
    """CPU per remember on a fresh vault, in this process (the tree first on ``sys.path``)."""
    from agent_memory.vault.vault import Vault

    with tempfile.TemporaryDirectory() as tmp:
        vault = Vault.init(Path(tmp) / "v")
        vault.remember("a first fact, so the timed loop starts warm")
        before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for i in range(count):
            vault.remember(f"benchmark fact {i} about {WORDS[i % len(WORDS)]} number {i * 7}")
        after, ended = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        vault.close()
    return {"user_ms": (after.ru_utime - before.ru_utime) / count * 1e3,
            "sys_ms": (after.ru_stime - before.ru_stime) / count * 1e3,
            "wall_ms": (ended - started) / count * 1e3}


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _server(tree: Path, count: int) -> dict[str, float]:
    from mcp import Client, StdioServerParameters

    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_MEMORY")}
    env["PYTHONPATH"] = str(tree)
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp) / "v"
        params = StdioServerParameters(command=sys.executable, args=["-m", "agent_memory", "serve", "--dir", str(vault)],
                                       env=env, cwd=str(tree))
        async with Client(params) as client:
            await client.call_tool("memory_stats", {})
            pid = next(int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and p.name != str(os.getpid())
                       and str(vault).encode() in (p / "cmdline").read_bytes())
            cpu, started = _cpu_seconds(pid), time.perf_counter()
            for i in range(count):
                result = await client.call_tool("remember", {"content": f"fact {i} over MCP about "
                                                                        f"{WORDS[i % len(WORDS)]} number {i * 7}"})
                if result.is_error:
                    raise SystemExit(f"remember failed: {result.content[0].text}")
            cpu, wall = _cpu_seconds(pid) - cpu, time.perf_counter() - started
    return {"server_cpu_ms": cpu / count * 1e3, "calls_per_s": count / wall}


def measure(tree: Path, count: int) -> dict[str, float]:
    """Both measurements of ``tree``, in a child process that imports that tree."""
    code = ("import sys, json, anyio; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2]); "
            "import agent_memory; assert agent_memory.__file__.startswith(sys.argv[1]), agent_memory.__file__; "
            "import remember_cpu as r; out = r.library(int(sys.argv[3])); "
            "out.update(anyio.run(r._server, __import__('pathlib').Path(sys.argv[1]), int(sys.argv[3]))); "
            "print(json.dumps(out))")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", code, str(tree), str(HERE / "benchmarks"), str(count)],
                          env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, help="another checkout to compare with (e.g. a git worktree of main)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=300, help="remembers per measurement")
    args = parser.parse_args()
    trees = [HERE] + ([args.tree.resolve()] if args.tree else [])
    found: dict[Path, list[dict[str, float]]] = {tree: [] for tree in trees}
    loads = []
    for round_ in range(1, args.rounds + 1):
        for tree in trees:
            row = measure(tree, args.n)
            found[tree].append(row)
            loads.append(os.getloadavg()[0])
            print(f"round {round_} {tree}: library {row['user_ms'] + row['sys_ms']:.3f} ms CPU/remember "
                  f"(user {row['user_ms']:.3f}, sys {row['sys_ms']:.3f}); server {row['server_cpu_ms']:.2f} ms "
                  f"CPU/call, {row['calls_per_s']:.0f} calls/s", flush=True)
    for tree, rows in found.items():
        lib = sorted(r["user_ms"] + r["sys_ms"] for r in rows)
        srv = sorted(r["server_cpu_ms"] for r in rows)
        rate = sorted(r["calls_per_s"] for r in rows)
        print(f"{tree}: library {statistics.median(lib):.3f} ms ({lib[0]:.3f}-{lib[-1]:.3f}); server "
              f"{statistics.median(srv):.2f} ms ({srv[0]:.2f}-{srv[-1]:.2f}); {statistics.median(rate):.0f} calls/s "
              f"({rate[0]:.0f}-{rate[-1]:.0f})")
    print(f"load average {min(loads):.2f}-{max(loads):.2f}")


if __name__ == "__main__":
    main()
