"""agent-memory beside its peers on the same notes, on demand: a script, not a test, and
never run in CI (it installs two other programs).

    python benchmarks/peers.py                 # 2,000 notes
    python benchmarks/peers.py --n 10000 --queries 200

Installs, each in its own place under ``--cache`` (default ``~/.cache/agent-memory-peers``):

- Basic Memory (``basic-memory==0.24.1`` from PyPI), which needs Python 3.12 or newer: in
  a virtual environment made with the first of ``python3.13``/``python3.12`` (or a pyenv
  install of 3.12+) that runs, or ``--python``. Without one the script says so and measures the others.
- The MCP reference memory server (``@modelcontextprotocol/server-memory`` from npm),
  which keeps a knowledge graph in one JSONL file: it is given this vault exported with
  ``agent-memory export --format mcp-knowledge-graph`` (the same notes as entities).

Then on the same generated notes (``scale.py``'s generator), each peer on its own copy:
cold index CPU (our ``reindex``, Basic Memory's ``sync``/``reindex``; the reference server
has no index), CLI search CPU, and over MCP stdio through the SDK's client: search
latency p50/p95, one write after another, and the server's peak RSS. Each row prints the
ratio peer / agent-memory; CPU times are user + system of the child processes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import anyio  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

import mcp_path  # noqa: E402
import scale  # noqa: E402

BASIC_MEMORY = "basic-memory==0.24.1"
REFERENCE_SERVER = "@modelcontextprotocol/server-memory"


def find_python312(explicit: str | None) -> str | None:
    """An interpreter new enough for Basic Memory (3.12+), or None."""
    pyenv = sorted(Path.home().glob(".pyenv/versions/3.1[2-9]*/bin/python3"), reverse=True)  # shims may refuse
    for candidate in ([explicit] if explicit else ["python3.13", "python3.12", *map(str, pyenv)]):
        path = shutil.which(candidate) or (candidate if Path(candidate).exists() else None)
        if path is None:
            continue
        done = subprocess.run([path, "-c", "import sys; print(sys.version_info >= (3, 12))"],
                              capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip() == "True":
            return path
    return None


def install_basic_memory(cache: Path, python: str) -> Path:
    """Basic Memory's ``basic-memory`` command in its own virtual environment."""
    venv = cache / "basic-memory-venv"
    command = venv / "bin" / "basic-memory"
    if not command.exists():
        print(f"installing {BASIC_MEMORY} into {venv} (Python {python}) …", file=sys.stderr)
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", BASIC_MEMORY], check=True)
    return command


def install_reference_server(cache: Path) -> list[str]:
    """The reference server's command, installed with npm into ``cache``."""
    folder = cache / "server-memory"
    entry = folder / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
    if not entry.exists():
        print(f"installing {REFERENCE_SERVER} into {folder} …", file=sys.stderr)
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--silent", "--prefix", str(folder), REFERENCE_SERVER], check=True)
    return ["node", str(entry)]


def child_cpu(command: list[str], env: dict[str, str] | None = None) -> float:
    """CPU seconds of one child run (user + system), failing loudly."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _pid, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        error = process.stderr.read().decode(errors="replace")[-500:] if process.stderr else ""
        raise RuntimeError(f"{' '.join(command)} failed: {error}")
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb(pid: int | None) -> float | None:
    return mcp_path._peak_rss_mb(pid)


def children_pids() -> set[int]:
    """This process's children and their children (the spawned server, or npx's node)."""
    found: set[int] = set()
    parents = {os.getpid()}
    for _ in range(3):
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid in parents:
                found.add(int(entry.name))
        parents |= found
    return found


async def mcp_run(server: StdioServerParameters, search: tuple[str, Any], write: tuple[str, Any],
                  queries: list[str], writes: int) -> dict[str, float | None]:
    """Spawn ``server``; search latencies, writes per second, the server's peak RSS."""
    async with Client(server) as client:
        tool, make_args = search
        await client.call_tool(tool, make_args(queries[0]))  # warmed: the first answer waits for start-up
        times = []
        for q in queries:
            t0 = time.perf_counter()
            result = await client.call_tool(tool, make_args(q))
            times.append(time.perf_counter() - t0)
            if result.is_error:
                raise RuntimeError(f"{tool} failed: {result.content[0].text}")  # type: ignore[union-attr]
        tool, make_args = write
        t0 = time.perf_counter()
        for i in range(writes):
            result = await client.call_tool(tool, make_args(i))
            if result.is_error:
                raise RuntimeError(f"{tool} failed: {result.content[0].text}")  # type: ignore[union-attr]
        rate = writes / (time.perf_counter() - t0)
        rss = max((peak_rss_mb(pid) or 0 for pid in children_pids()), default=None)
    times.sort()
    return {"p50": times[len(times) // 2] * 1000, "p95": times[int(len(times) * 0.95)] * 1000, "writes": rate,
            "rss": rss}


def ours(vault: Path, queries: list[str], writes: int) -> dict[str, float | None]:
    command = [str(Path(sys.executable).with_name("agent-memory"))]
    found: dict[str, float | None] = {"index": child_cpu([*command, "--dir", str(vault), "reindex"])}
    found["cli"] = statistics.median(child_cpu([*command, "--dir", str(vault), "search", q]) for q in queries[:10])
    server = StdioServerParameters(command=command[0], args=["serve", "--dir", str(vault)], env=dict(os.environ))
    found.update(anyio.run(mcp_run, server, ("recall", lambda q: {"query": q, "limit": 10}),
                           ("remember", lambda i: {"content": f"peer benchmark fact {i} about deploys"}),
                           queries, writes))
    return found


def basic_memory(command: Path, vault: Path, home: Path, queries: list[str], writes: int) -> dict[str, float | None]:
    env = {**os.environ, "HOME": str(home)}  # its config and database under a home of its own
    subprocess.run([str(command), "project", "add", "peers", str(vault)], env=env, check=True, capture_output=True)
    subprocess.run([str(command), "project", "default", "peers"], env=env, check=True, capture_output=True)
    found: dict[str, float | None] = {}
    # The command that indexes the files, by version: a full-text index only (no embeddings).
    for sync in (["reindex", "--full", "--search"], ["sync"], ["reindex"]):
        try:
            found["index"] = child_cpu([str(command), *sync], env)
            print(f"Basic Memory's cold index: `basic-memory {' '.join(sync)}`", file=sys.stderr)
            break
        except RuntimeError:
            continue
    cli = []
    for q in queries[:10]:
        for search in (["tool", "search-notes", q], ["tool", "search-notes", "--query", q],
                       ["tools", "search-notes", "--query", q]):  # the query's form changed between versions
            try:
                cli.append(child_cpu([str(command), *search], env))
                break
            except RuntimeError:
                continue
    found["cli"] = statistics.median(cli) if cli else None
    server = StdioServerParameters(command=str(command), args=["mcp", "--transport", "stdio"], env=env)
    found.update(anyio.run(mcp_run, server, ("search_notes", lambda q: {"query": q}),
                           ("write_note", lambda i: {"title": f"peer note {i}", "folder": "peers",
                                                     "content": f"peer benchmark fact {i} about deploys"}),
                           queries, writes))
    return found


def reference_server(command: list[str], vault: Path, scratch: Path, queries: list[str],
                     writes: int) -> dict[str, float | None]:
    graph = scratch / "memory.jsonl"
    ours_command = str(Path(sys.executable).with_name("agent-memory"))
    subprocess.run([ours_command, "--dir", str(vault), "export", "--format", "mcp-knowledge-graph", "-o", str(graph)],
                   check=True, capture_output=True)
    server = StdioServerParameters(command=command[0], args=command[1:],
                                   env={**os.environ, "MEMORY_FILE_PATH": str(graph)})
    found: dict[str, float | None] = {"index": None, "cli": None}
    found.update(anyio.run(mcp_run, server, ("search_nodes", lambda q: {"query": q}),
                           ("create_entities", lambda i: {"entities": [{"name": f"peer entity {i}",
                                                                        "entityType": "fact",
                                                                        "observations": [f"fact {i} about deploys"]}]}),
                           queries, writes))
    return found


def ratio(peer: float | None, mine: float | None, higher_is_better: bool = False) -> str:
    if not peer or not mine:
        return "n/a"
    return f"{(mine / peer if higher_is_better else peer / mine):.1f}×"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000, help="notes to generate (default 2,000)")
    parser.add_argument("--queries", type=int, default=100, help="searches over MCP per server")
    parser.add_argument("--writes", type=int, default=50, help="writes over MCP per server")
    parser.add_argument("--python", default=None, help="a Python 3.12+ for Basic Memory's environment")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "agent-memory-peers")
    parser.add_argument("--skip", nargs="*", default=[], choices=["basic-memory", "reference"])
    args = parser.parse_args()
    rng = random.Random(9)
    queries = [scale.question(rng, rng.randint(1, 3)) for _ in range(args.queries)]
    args.cache.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, float | None]] = {}
    notes: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="agent-memory-peers-") as tmp:
        scratch = Path(tmp)
        source = scratch / "source"
        source.mkdir()
        print(f"generating {args.n:,} notes …", file=sys.stderr)
        scale.generate(source, args.n)
        copy = scratch / "ours"
        shutil.copytree(source, copy)
        results["agent-memory"] = ours(copy, queries, args.writes)
        if "basic-memory" not in args.skip:
            python = find_python312(args.python)
            if python is None:
                notes["Basic Memory"] = ("not run: it needs Python 3.12 or newer and none was found "
                                         "(install one, or pass --python PATH)")
            else:
                try:
                    command = install_basic_memory(args.cache, python)
                    copy = scratch / "basic-memory"
                    shutil.copytree(source, copy)
                    home = scratch / "bm-home"
                    home.mkdir()
                    results["Basic Memory 0.24.1"] = basic_memory(command, copy, home, queries, args.writes)
                except (RuntimeError, subprocess.CalledProcessError, OSError) as exc:
                    notes["Basic Memory"] = f"failed: {exc}"
        if "reference" not in args.skip:
            if shutil.which("npm") is None or shutil.which("node") is None:
                notes["reference server"] = "not run: it needs node and npm"
            else:
                try:
                    command_ref = install_reference_server(args.cache)
                    results["reference server"] = reference_server(command_ref, scratch / "ours", scratch, queries,
                                                                   args.writes)
                except (RuntimeError, subprocess.CalledProcessError, OSError) as exc:
                    notes["reference server"] = f"failed: {exc}"
    print_table(args, results, notes)


def print_table(args: argparse.Namespace, results: dict[str, dict[str, float | None]], notes: dict[str, str]) -> None:
    mine = results["agent-memory"]
    print(f"\npeers on {args.n:,} generated notes; {args.queries} searches and {args.writes} writes over MCP stdio "
          f"each; load average {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC\n")
    print("| measure | " + " | ".join(results) + " |")
    print("|---|" + "---|" * len(results))

    def cell(name: str, key: str, fmt: str, higher: bool = False) -> str:
        value = results[name].get(key)
        if value is None:
            return "—"
        shown = fmt.format(value)
        return shown if name == "agent-memory" else f"{shown} ({ratio(value, mine.get(key), higher)})"

    for label, key, fmt, higher in (
        ("cold index, CPU", "index", "{:.2f} s", False),
        ("CLI search, CPU (median of 10)", "cli", "{:.2f} s", False),
        ("MCP search p50", "p50", "{:.1f} ms", False),
        ("MCP search p95", "p95", "{:.1f} ms", False),
        ("MCP writes, sequential", "writes", "{:.0f} /s", True),
        ("server peak RSS", "rss", "{:.0f} MB", False),
    ):
        print(f"| {label} | " + " | ".join(cell(name, key, fmt, higher) for name in results) + " |")
    print("\n(×: how many times agent-memory's figure: peer ÷ ours; for writes, ours ÷ peer)")
    for name, note in notes.items():
        print(f"{name}: {note}")
    print(json.dumps({"results": results, "notes": notes}), file=sys.stderr)


if __name__ == "__main__":
    main()
