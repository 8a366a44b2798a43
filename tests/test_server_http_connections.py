"""`agent-memory serve --http` at the socket level: no connection is held forever, a crowd of
idle or half-sent connections never keeps a client out, and kept-alive connections outlast
an SDK client's pauses.

Raw sockets speak HTTP/1.1 through h11 (what uvicorn parses with); the MCP SDK client is
the legitimate client. Waits poll a condition with a generous deadline: the server must
close a stalled socket *at some point* (and say 408 when part of a request came), and the
client must get in; how fast is for benchmarks/http_abuse.py.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import h11
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from agent_memory.server.connection_limits import ConnectionLimits
from agent_memory.server.connections import guarded_protocol

from conftest import Served, deadline, wait_until, wait_until_async

pytestmark = pytest.mark.anyio

MODERN = MODERN_PROTOCOL_VERSIONS[0]


def poll(condition: Callable[[], bool], what: str) -> None:
    wait_until(condition, what)


def stats_call(port: int) -> bytes:
    """A whole 2026-07-28 ``tools/call`` (no session needed), as bytes on the wire."""
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "memory_stats", "arguments": {}, "_meta": meta}}).encode()
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: {MODERN}\r\n"
            f"Mcp-Method: tools/call\r\nMcp-Name: memory_stats\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


def initialize(port: int) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"protocolVersion": HANDSHAKE_PROTOCOL_VERSIONS[-1], "capabilities": {},
                                  "clientInfo": {"name": "raw", "version": "1"}}}).encode()
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


class Wire:
    """One client socket and h11's view of it."""

    def __init__(self, port: int, **options: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=deadline(120))
        for option, value in options.items():
            self.sock.setsockopt(socket.SOL_SOCKET, getattr(socket, option), value)
        self.h11 = h11.Connection(h11.CLIENT)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def response(self, body: bool = True) -> tuple[int, dict[bytes, bytes], bytes]:
        """Read one response (its head only, when ``body`` is False: an event stream)."""
        status, headers, chunks = 0, {}, []
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                self.h11.receive_data(self.sock.recv(65536))
            elif isinstance(event, h11.Response):
                status, headers = event.status_code, dict(event.headers)
                if not body:
                    return status, headers, b""
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                self.h11.start_next_cycle()
                return status, headers, b"".join(chunks)

    def request(self, data: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
        # Feed h11 the request it would have written, so it expects the response.
        self.h11.send(h11.Request(method="POST", target="/mcp", headers=[("Host", "x"), ("Content-Length", "0")]))
        self.h11.send(h11.EndOfMessage())
        self.send(data)
        return self.response()

    def closed_by_server(self, keep_sending: bytes = b"") -> bytes:
        """Poll until the server closes the socket; what it sent meanwhile. With
        ``keep_sending``, trickle those bytes in as a slowloris does."""
        received = bytearray()
        self.sock.settimeout(0.2)

        def closed() -> bool:
            try:
                if keep_sending:
                    self.sock.sendall(keep_sending)
                chunk = self.sock.recv(65536)
            except TimeoutError:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True
            received.extend(chunk)
            return not chunk

        wait_until(closed, "the server closes the socket", every=0)
        return bytes(received)

    def is_closed(self) -> bool:
        """Has the server closed it (with or without a last word)? Does not wait."""
        self.sock.settimeout(0)
        try:
            return not self.sock.recv(65536, socket.MSG_PEEK) or self.closed_by_server() is not None
        except BlockingIOError:
            return False
        except ConnectionResetError:
            return True
        finally:
            self.sock.settimeout(30)

    def close(self) -> None:
        self.sock.close()


@asynccontextmanager
async def connect(url: str, mode: str = "auto") -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(deadline(120), read=deadline(120))) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


async def served(url: str, mode: str = "auto") -> None:
    async with connect(url, mode) as client:
        result = await client.call_tool("memory_stats", {})
        assert result.is_error is False, result.content[0].text


async def test_stalled_headers_and_bodies_are_closed_at_the_deadline(tmp_path: Path) -> None:
    server = Served(tmp_path / ".memory", "--request-timeout", "1", "--keep-alive", "30")
    port = server.port
    try:
        silent = Wire(port)  # connects and sends nothing
        trickle = Wire(port)  # slowloris: a header line now and then, never the blank line
        trickle.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        body = Wire(port)  # whole headers, a tenth of the body
        head, _, payload = stats_call(port).partition(b"\r\n\r\n")
        body.send(head + b"\r\n\r\n" + payload[: len(payload) // 10])
        opening = Wire(port)  # an initialize (2025 revisions) whose body stalls
        opening.send(initialize(port)[:-20])
        kept = Wire(port)  # a kept-alive connection whose next request stalls
        assert kept.request(stats_call(port))[0] == 200
        kept.send(stats_call(port)[:30])

        await served(server.url)  # meanwhile a real client is served
        assert silent.closed_by_server() == b""  # nothing was asked: closed without a word
        for wire, extra in ((trickle, b"X-Slow: 1\r\n"), (body, b""), (opening, b""), (kept, b"")):
            answer = wire.closed_by_server(keep_sending=extra)
            assert answer.startswith(b"HTTP/1.1 408 Request Timeout"), answer[:200]
            assert b"not received within 1 s" in answer
        await served(server.url)
    finally:
        log = server.stop()
    assert "Exception in ASGI application" not in log, log


def test_a_kept_alive_connection_outlasts_a_pause_and_says_how_long(tmp_path: Path) -> None:
    """The TypeScript SDK client lost its next request after a 7 s pause against uvicorn's
    5 s default; the same socket must serve a request after a longer pause."""
    server = Served(tmp_path / ".memory")
    try:
        wire = Wire(server.port)
        status, headers, _ = wire.request(stats_call(server.port))
        assert status == 200 and headers[b"keep-alive"] == b"timeout=75", headers
        time.sleep(5.5)
        status, _, body = wire.request(stats_call(server.port))
        assert status == 200 and b'"isError":false' in body, body[:300]
        wire.close()
    finally:
        server.stop()


def test_idle_keep_alive_ends_when_announced(tmp_path: Path) -> None:
    server = Served(tmp_path / ".memory", "--keep-alive", "1")
    try:
        wire = Wire(server.port)
        status, headers, _ = wire.request(stats_call(server.port))
        assert status == 200 and headers[b"keep-alive"] == b"timeout=1", headers
        assert wire.closed_by_server() == b""
    finally:
        server.stop()


async def test_a_crowd_of_idle_connections_never_keeps_a_client_out(tmp_path: Path) -> None:
    server = Served(tmp_path / ".memory", "--max-connections", "20", "--request-timeout", "120")
    try:
        answered = Wire(server.port)  # a kept-alive connection that has had a request answered
        assert answered.request(stats_call(server.port))[0] == 200
        crowd = [Wire(server.port) for _ in range(60)]  # three times the cap, none sends a thing
        assert answered.request(stats_call(server.port))[0] == 200  # outlived them all, on the same socket
        await served(server.url)
        await served(server.url, mode="legacy")
        # Over the cap, each newcomer closed the connection waiting longest: the crowd's
        # excess and as many more as the client needed went, the first of the crowd first.
        poll(lambda: sum(wire.is_closed() for wire in crowd) > 40, "the crowd kept its connections")
        assert crowd[0].is_closed()
        for wire in crowd:
            wire.close()
    finally:
        log = server.stop()
    assert "at most 20 connections" in log


async def test_when_every_connection_is_busy_a_newcomer_is_told_to_retry(tmp_path: Path) -> None:
    server = Served(tmp_path / ".memory", "--max-connections", "3")
    port = server.port
    try:
        streams = []
        for _ in range(3):  # three sessions, each holding its event stream open: busy connections
            wire = Wire(port)
            status, headers, _ = wire.request(initialize(port))
            assert status == 200, headers
            session = headers[b"mcp-session-id"].decode()
            wire.h11.send(h11.Request(method="GET", target="/mcp", headers=[("Host", "x")]))
            wire.h11.send(h11.EndOfMessage())
            wire.send(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
                      f"Mcp-Session-Id: {session}\r\n\r\n".encode())
            assert wire.response(body=False)[0] == 200
            streams.append(wire)
        newcomer = Wire(port)
        answer = newcomer.closed_by_server()
        assert answer.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in answer, answer
        streams.pop().close()  # one stream ends: once the server has seen it go, a client gets in again
        poll(lambda: Wire(port).request(stats_call(port))[0] == 200, "no client got in after a connection was freed")
        for wire in streams:
            wire.close()
    finally:
        log = server.stop()
    assert "refusing connections: all 3 are busy answering requests" in log


@asynccontextmanager
async def in_process(app: Any, limits: ConnectionLimits) -> AsyncIterator[tuple[int, Any]]:
    """The guarded protocol serving ``app`` on a real loopback socket, in this event loop:
    its port and uvicorn's server state (the open connections)."""
    import uvicorn
    from uvicorn.server import ServerState

    config = uvicorn.Config(app, http=guarded_protocol(limits), lifespan="off")
    config.load()
    state = ServerState()
    listener = await asyncio.get_running_loop().create_server(
        lambda: config.http_protocol_class(config=config, server_state=state, app_state={}),  # type: ignore[call-arg]
        "127.0.0.1", 0)
    try:
        yield listener.sockets[0].getsockname()[1], state
    finally:
        listener.close()
        for task in state.tasks:
            task.cancel()


async def test_a_client_that_stops_reading_is_cut_off() -> None:
    """An app that streams without end to a client that reads nothing: once the buffers
    fill, the connection is dropped after the deadline instead of waiting forever."""

    async def endless(scope: dict[str, Any], receive: Any, send: Any) -> None:
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.ensure_future(watch())
        await send({"type": "http.response.start", "status": 200, "headers": []})
        while not gone.is_set():
            await send({"type": "http.response.body", "body": b"x" * 65536, "more_body": True})
            await asyncio.sleep(0)
        await watcher

    async with in_process(endless, ConnectionLimits(request_timeout=0.5)) as (port, state):
        wire = Wire(port, SO_RCVBUF=4096)
        wire.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")

        async def connected() -> bool:
            return bool(state.connections)

        async def let_go() -> bool:  # the server let go of it, though the client never read
            return not state.connections

        await wait_until_async(connected, "the server has the connection")
        await wait_until_async(let_go, "the server lets go of a client that reads nothing")
        wire.close()


async def test_a_request_not_yet_read_is_not_closed_to_make_room() -> None:
    """A client connects and sends its request; before the server has read it, another
    connection arrives over the cap. The client's connection is the oldest waiting one,
    but its request is in the socket: the newcomer is refused instead (503)."""

    async def hello(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"5")]})
        await send({"type": "http.response.body", "body": b"hello"})

    async with in_process(hello, ConnectionLimits(max_connections=1)) as (port, _):
        client = Wire(port)
        client.h11.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
        client.h11.send(h11.EndOfMessage())
        client.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        newcomer = Wire(port)  # the event loop has not run since: both wait to be accepted together
        refused = await asyncio.to_thread(newcomer.closed_by_server)
        assert refused.startswith(b"HTTP/1.1 503"), refused
        status, _, body = await asyncio.to_thread(client.response)
        assert (status, body) == (200, b"hello")


NODE = shutil.which("node")
CI_NODE = Path(__file__).resolve().parent.parent / ".ci" / "node"
TS_PAUSE = Path(__file__).resolve().parent.parent / "benchmarks" / "ts_client_pause.mjs"


@pytest.mark.skipif(NODE is None, reason="node is not installed, so the TypeScript SDK client cannot run")
@pytest.mark.skipif(not CI_NODE.is_dir(), reason=".ci/node is absent: run the npm lines of .ci/run first")
def test_the_typescript_sdk_client_survives_a_blocked_event_loop(tmp_path: Path) -> None:
    """The TypeScript SDK client (installed by .ci/run into .ci/node) calls a tool, its event
    loop is blocked for 6 s (undici cannot drop a socket meanwhile), then calls again on
    the same kept-alive socket: past uvicorn's old 5 s keep-alive, that one failed with
    "other side closed". benchmarks/ts_client_pause.mjs is the script; 10 s there."""
    sdk = CI_NODE / "node_modules" / "@modelcontextprotocol" / "sdk"
    assert sdk.is_dir(), "the TypeScript SDK is missing: npm install --prefix .ci/node @modelcontextprotocol/sdk@1.32.2"
    server = Served(tmp_path / ".memory")
    try:
        done = subprocess.run([str(NODE), str(TS_PAUSE), server.url, "6", "block"],
                              capture_output=True, text=True, timeout=deadline(300))
    finally:
        server.stop()
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert json.loads(done.stdout)["second"]["ok"] is True


def test_connections_fit_the_open_file_limit() -> None:
    """asyncio accepts a whole listen backlog before any connection can be closed: a cap's
    worth of connections and two backlogs must fit in the open-file limit, else accept
    fails and asyncio stops accepting anyone for a second."""
    from agent_memory.server.connection_limits import SPARE_FILES, accept_batch, default_max_connections

    assert default_max_connections(None) == 1000 and default_max_connections(1024) == 448
    for files in (256, 1024, 4096, 65536):
        most = default_max_connections(files)
        assert most + 2 * accept_batch(files, most) + SPARE_FILES <= files
    script = ("import resource\nfrom agent_memory.server.connection_limits import open_file_limit\n"
              "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
              "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
              "print(open_file_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard)\n")
    raised, now, hard = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                       check=True, timeout=deadline(120)).stdout.split()
    assert int(raised) == int(now) == min(int(hard), 1000 + 2 * 2048 + SPARE_FILES)
