"""Does a legitimate client still get in while `agent-memory serve --http` is abused?

Starts the real server on a free loopback port, then runs each scenario in turn: an
abuser process (its own event loop, so it does not slow the measuring client's) does its
worst while this process measures a legitimate client, and both stop by themselves.

  quiet         no abuse: the baseline
  init-flood    workers POST ``initialize`` back to back and never come back: sessions
  slowloris     sockets send a request line and then one header line a second, never the end
  stalled-body  sockets send whole headers and a tenth of the body, then nothing
  idle-conns    sockets connect and send nothing
  foreign-origin  workers POST ``initialize`` with ``Origin: http://evil.example``

Socket abusers keep their number of sockets open (over the server's connection cap):
each one the server closes is opened again at once. The legitimate client is the MCP SDK
client speaking the 2025 handshake (the case sessions matter for):

- *new client*: connect (initialize, its GET stream), call ``memory_stats``, close;
- *connected*: one client connected before the abuse starts, calling ``memory_stats``.

Each probe has 10 s to succeed; a failure counts 10 s. Usage::

    python benchmarks/http_abuse.py                   # every scenario, 8 s each
    python benchmarks/http_abuse.py --seconds 4 quiet init-flood
    python benchmarks/http_abuse.py --tree /path/to/other/checkout   # the same against other code
    python benchmarks/http_abuse.py --nofile 1024     # the server started under a common soft open-file limit
    python benchmarks/http_abuse.py --nofile 1024:1024  # ... which it may not raise (soft:hard)

Loopback only. Prints a table (milliseconds) and what the abuser saw.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import multiprocessing
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCENARIOS = ("quiet", "init-flood", "slowloris", "stalled-body", "idle-conns", "foreign-origin")
PROBE_TIMEOUT = 10.0
WARMUP = 2.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(vault: Path, port: int, tree: str | None, extra: list[str], nofile: tuple[int, int] | None,
                 log: str | None = None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "AGENT_MEMORY_TOKEN"}
    if tree:
        env["PYTHONPATH"] = tree

    # The open-file limit is set in the server's own process, before it imports anything.
    launcher = ("import resource, runpy, sys\n"
                f"if {nofile!r}:\n"
                f"    resource.setrlimit(resource.RLIMIT_NOFILE, {nofile!r})\n"
                f"if {bool(log)}:\n"
                "    import logging\n"
                "    logging.basicConfig(stream=sys.stderr, level=logging.DEBUG, format='%(asctime)s %(name)s %(message)s')\n"
                "    for name in ('mcp', 'sse_starlette', 'uvicorn', 'asyncio', 'watchdog', 'httpx2', 'httpcore'):\n"
                "        logging.getLogger(name).setLevel(logging.INFO)\n"
                "sys.argv[0] = 'agent-memory'\n"
                "runpy.run_module('agent_memory', run_name='__main__')\n")
    process = subprocess.Popen(
        [sys.executable, "-c", launcher, "serve", "--http", "--port", str(port), "--dir", str(vault), *extra],
        stdout=subprocess.DEVNULL, stderr=open(log, "a") if log else subprocess.DEVNULL,  # noqa: SIM115
        env=env, cwd=vault.parent,  # not this checkout's
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit("the server exited at start")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit("the server did not start listening")


# -- the abuser (a separate process) ------------------------------------------------

INITIALIZE = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
              b'"capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}')


def head(port: int, length: int, origin: str | None = None) -> bytes:
    lines = [b"POST /mcp HTTP/1.1", b"Host: 127.0.0.1:%d" % port, b"Content-Type: application/json",
             b"Accept: application/json, text/event-stream", b"Content-Length: %d" % length]
    if origin:
        lines.append(b"Origin: " + origin.encode())
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def hold_sockets(port: int, until: float, count: int, opening: bytes, trickle: bytes,
                       stats: collections.Counter[str]) -> None:
    """Keep ``count`` sockets open, each having sent ``opening`` (then ``trickle`` once a
    second); open another at once for each the server closes."""

    async def one() -> None:
        while time.monotonic() < until:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                stats["connect failed"] += 1
                await asyncio.sleep(0.1)
                continue
            stats["opened"] += 1
            try:
                if opening:
                    writer.write(opening)
                while time.monotonic() < until:
                    if trickle:
                        writer.write(trickle)
                    try:
                        data = await asyncio.wait_for(reader.read(65536), timeout=1.0)
                    except TimeoutError:
                        continue
                    if data.startswith(b"HTTP/1.1 "):
                        stats["answered " + data[9:12].decode()] += 1
                    if not data:
                        stats["closed by server"] += 1
                        break
            except OSError:
                stats["closed by server"] += 1
            finally:
                writer.close()

    await asyncio.gather(*(one() for _ in range(count)))


async def flood(port: int, until: float, workers: int, origin: str | None, stats: collections.Counter[str]) -> None:
    """``workers`` connections POSTing ``initialize`` back to back (kept alive)."""
    request = head(port, len(INITIALIZE), origin) + INITIALIZE

    async def one() -> None:
        while time.monotonic() < until:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                stats["connect failed"] += 1
                await asyncio.sleep(0.1)
                continue
            try:
                while time.monotonic() < until:
                    writer.write(request)
                    status = await read_response(reader)
                    stats[f"status {status}"] += 1
            except (OSError, asyncio.IncompleteReadError, ValueError):
                stats["connection lost"] += 1
            finally:
                writer.close()

    await asyncio.gather(*(one() for _ in range(workers)))


async def read_response(reader: asyncio.StreamReader) -> int:
    """One whole response (Content-Length or chunked); its status."""
    status_line = await reader.readline()
    status = int(status_line.split()[1])
    length, chunked = 0, False
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
        elif name.strip().lower() == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if chunked:
        while (size := int((await reader.readline()).strip(), 16)) > 0:
            await reader.readexactly(size + 2)
        await reader.readline()
    elif length:
        await reader.readexactly(length)
    return status


def abuse(kind: str, port: int, seconds: float, sockets: int, results: Any) -> None:
    stats: collections.Counter[str] = collections.Counter()
    until = time.monotonic() + seconds
    partial_body = head(port, 1000) + b'{"jsonrpc":"2.0",'
    jobs = {
        "quiet": lambda: asyncio.sleep(seconds),
        "init-flood": lambda: flood(port, until, 16, None, stats),
        "foreign-origin": lambda: flood(port, until, 16, "http://evil.example", stats),
        "slowloris": lambda: hold_sockets(port, until, sockets, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n",
                                          b"X-Slow: 1\r\n", stats),
        "stalled-body": lambda: hold_sockets(port, until, sockets, partial_body, b"", stats),
        "idle-conns": lambda: hold_sockets(port, until, sockets, b"", b"", stats),
    }
    asyncio.run(jobs[kind]())
    results.put(dict(stats))


# -- the legitimate client (this process) ------------------------------------------------

async def probe(url: str, seconds: float, interval: float
                ) -> tuple[list[tuple[bool, float]], list[tuple[bool, float]], str | None]:
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    def client(http: Any) -> Any:
        return Client(streamable_http_client(url, http_client=http), mode="legacy")

    async def timed(call: Any) -> tuple[bool, float]:
        started = time.perf_counter()
        try:
            with anyio.fail_after(PROBE_TIMEOUT):
                ok = await call()
        except Exception:  # noqa: BLE001 - any failure is a failed probe, whatever raised it
            ok = False
        return ok, (time.perf_counter() - started if ok else PROBE_TIMEOUT) * 1000

    async def new_client() -> bool:
        async with httpx2.AsyncClient(timeout=PROBE_TIMEOUT) as http, client(http) as fresh:
            return (await fresh.call_tool("memory_stats", {})).is_error is False

    fresh_results: list[tuple[bool, float]] = []
    connected_results: list[tuple[bool, float]] = []
    held: dict[str, Any] = {"client": None, "error": None}

    async def hold(ready: anyio.Event, done: anyio.Event) -> None:
        """The connected client, in its own task: if it breaks, the probes say so."""
        try:
            async with httpx2.AsyncClient(timeout=PROBE_TIMEOUT) as http, client(http) as connected:
                assert (await connected.call_tool("memory_stats", {})).is_error is False  # in use, then quiet
                held["client"] = connected
                ready.set()
                await done.wait()
        except Exception as error:  # noqa: BLE001 - whatever broke it is reported
            while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
                error = error.exceptions[0]
            held["error"] = f"{type(error).__name__}: {error}"[:300]
        finally:
            held["client"] = None
            ready.set()

    async def old_client() -> bool:
        connected = held["client"]
        return connected is not None and (await connected.call_tool("memory_stats", {})).is_error is False

    ready, done = anyio.Event(), anyio.Event()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(hold, ready, done)
        await ready.wait()
        await anyio.sleep(WARMUP)  # the abuse gets going
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            fresh_results.append(await timed(new_client))
            connected_results.append(await timed(old_client))
            await anyio.sleep(interval)
        done.set()
    return fresh_results, connected_results, held["error"]


def nofile_limits(value: str) -> tuple[int, int]:
    soft, _, hard = value.partition(":")
    return int(soft), int(hard) if hard else resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def summary(results: list[tuple[bool, float]]) -> tuple[str, str, str]:
    ms = sorted(latency for _, latency in results)
    ok = sum(1 for good, _ in results if good)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return f"{100 * ok / len(results):.0f}% of {len(results)}", f"{statistics.median(ms):.0f}", f"{p95:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO", help=f"any of {', '.join(SCENARIOS)} (default: all)")
    parser.add_argument("--seconds", type=float, default=8.0, help="probing time per scenario")
    parser.add_argument("--interval", type=float, default=0.1, help="pause between probes")
    parser.add_argument("--sockets", type=int, default=1500, help="sockets each socket abuser keeps open")
    parser.add_argument("--tree", default=None, help="run the server from this checkout instead")
    parser.add_argument("--server-arg", action="append", default=[], help="pass on to serve (repeatable)")
    parser.add_argument("--server-log", default=None, metavar="FILE",
                        help="append the server's log (debug level for agent_memory) to FILE")
    parser.add_argument("--nofile", type=nofile_limits, default=None, metavar="SOFT[:HARD]",
                        help="the server's open-file limit at start (1024 is a common soft limit; here it is "
                        "{}:{})".format(*resource.getrlimit(resource.RLIMIT_NOFILE)))
    args = parser.parse_args()
    if unknown := set(args.scenarios) - set(SCENARIOS):
        parser.error(f"unknown scenario(s) {', '.join(sorted(unknown))}; choose from {', '.join(SCENARIOS)}")
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    sockets = min(args.sockets, max(16, soft - 200))
    rows = []
    notes: list[str] = []
    for kind in args.scenarios or SCENARIOS:
        with tempfile.TemporaryDirectory(prefix="http-abuse-") as folder:  # a fresh server each time
            port = free_port()
            server = start_server(Path(folder) / ".memory", port, args.tree, args.server_arg, args.nofile,
                                  args.server_log)
            try:
                results: Any = multiprocessing.Queue()
                abuser = multiprocessing.Process(
                    target=abuse, args=(kind, port, WARMUP + args.seconds + 0.5, sockets, results), daemon=True)
                abuser.start()
                fresh, connected, broke = asyncio.run(probe(f"http://127.0.0.1:{port}/mcp", args.seconds, args.interval))
                if broke:
                    notes.append(f"{kind}: the connected client broke: {broke}")
                abuser.join(timeout=60)
                seen = results.get(timeout=60) if abuser.exitcode == 0 else {"abuser failed": abuser.exitcode}
                rows.append((kind, *summary(fresh), *summary(connected), seen))
                print(f"{kind}: done", file=sys.stderr)
            finally:
                server.terminate()
                server.wait(timeout=60)
    files = "{}:{}".format(*(args.nofile or resource.getrlimit(resource.RLIMIT_NOFILE)))
    print(f"\nserver: {'tree ' + args.tree if args.tree else 'this checkout'} {' '.join(args.server_arg)}, "
          f"open-file limit at start {files}; "
          f"{args.seconds:g} s per scenario; socket abusers keep {sockets} sockets open\n")
    print("| abuse | new client: ok | p50 ms | p95 ms | connected: ok | p50 ms | p95 ms | abuser saw |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, *cells, seen in rows:
        saw = ", ".join(f"{k} {v}" for k, v in sorted(seen.items())) or "-"
        print(f"| {kind} | {' | '.join(cells)} | {saw} |")
    for note in notes:
        print(f"\n{note}")


if __name__ == "__main__":
    main()
