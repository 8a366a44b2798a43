"""`agent-memory serve --http` against hostile browsers and floods, as a real process
(uvicorn on a free loopback port, real HTTP requests).

- DNS rebinding: a page on evil.example whose name resolves to 127.0.0.1 makes the
  browser send `Host: evil.example` and `Origin: http://evil.example`. Without a token
  the server must refuse those however its loopback address is spelled (`127.0.0.2`,
  `LOCALHOST`, `0:0:0:0:0:0:0:1`, `[::1]`), write nothing, and still serve real clients.
- Origin: a browser page must be on this server's own host and port (the port bound,
  also with `--port 0`); `--allow-origin` lets more in; SDK clients send no Origin.
- Session flood: the session table is capped (`--max-sessions`); at the cap the session
  idle longest ends (bare `initialize` sessions first), so a flood never locks a client
  out; an open GET stream does not keep a session alive past `--session-idle-timeout`.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from agent_memory.server.sessions import SessionTable
from agent_memory.server.transport import OriginGuard

from conftest import Served, deadline, wait_until

SCRIPT = Path(sys.executable).with_name("agent-memory")
MARK = "Planted by evil.example"

pytestmark = pytest.mark.anyio


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


NO_IPV6 = pytest.mark.skipif(not ipv6_loopback(), reason="this machine has no IPv6 loopback (cannot bind ::1)")


def poll(condition: Callable[[], bool], what: str) -> None:
    wait_until(condition, what)


@asynccontextmanager
async def connect(url: str, mode: str = "auto") -> AsyncIterator[Client]:
    """The SDK's client: ``auto`` speaks 2026-07-28 (one self-contained POST per request,
    no session); ``legacy`` does the initialize handshake, gets a session and holds a GET
    stream open on it."""
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(deadline(120), read=deadline(120))) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {  # the handshake (2025 revisions): opens a session
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": HANDSHAKE_PROTOCOL_VERSIONS[-1], "capabilities": {},
               "clientInfo": {"name": "raw", "version": "1"}},
}
MODERN = MODERN_PROTOCOL_VERSIONS[0]
MODERN_HEADERS = {**HEADERS, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "remember"}


def modern_remember(content: str) -> dict[str, Any]:
    """2026-07-28: one POST, no handshake and no session, and the memory is written."""
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "remember", "arguments": {"content": content}, "_meta": meta}}


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
REMEMBER = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "remember", "arguments": {"content": MARK}}}


async def open_session(raw: httpx2.AsyncClient, url: str, **headers: str) -> httpx2.Response:
    """What an attacker's page does: initialize, then (if that got a session) call a tool."""
    response = await raw.post(url, json=INITIALIZE, headers={**HEADERS, **headers})
    session = response.headers.get("mcp-session-id")
    if response.status_code == 200 and session:
        await raw.post(url, json=INITIALIZED, headers={**HEADERS, **headers, "mcp-session-id": session})
        return await raw.post(url, json=REMEMBER, headers={**HEADERS, **headers, "mcp-session-id": session})
    return response


def planted(vault_dir: Path) -> list[Path]:
    return [p for p in vault_dir.rglob("*.md") if MARK in p.read_text(encoding="utf-8", errors="replace")]


@pytest.mark.parametrize(
    ("host", "address", "url_host"),
    [
        ("127.0.0.2", "127.0.0.2", "127.0.0.2"),
        ("LOCALHOST", "127.0.0.1", "localhost"),
        pytest.param("0:0:0:0:0:0:0:1", "::1", "[::1]", marks=NO_IPV6),
        pytest.param("[::1]", "::1", "[::1]", marks=NO_IPV6),
    ],
)
async def test_dns_rebinding_is_refused_however_loopback_is_spelled(
    tmp_path: Path, host: str, address: str, url_host: str
) -> None:
    vault_dir = tmp_path / ".memory"
    server = Served(vault_dir, host=host)
    port = server.port
    url = f"http://{url_host}:{port}/mcp"
    try:
        async with httpx2.AsyncClient(timeout=deadline(120)) as raw:
            for evil in ({"Host": "evil.example", "Origin": "http://evil.example"},
                         {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"},
                         {"Host": f"evil.example:{port}"},
                         {"Origin": f"http://evil.example:{port}"},       # the right Host, a foreign page
                         {"Origin": f"http://{url_host}.evil.example:{port}"},
                         {"Origin": "null"}):                             # a sandboxed or file:// page
                response = await open_session(raw, url, **evil)
                assert response.status_code in (403, 421), (evil, response.status_code, response.text)
                assert "mcp-session-id" not in response.headers
                response = await raw.post(url, json=modern_remember(MARK), headers={**MODERN_HEADERS, **evil})
                assert response.status_code in (403, 421), (evil, response.status_code, response.text)
            # The same single POST from this machine is served (the refusals were for the headers).
            response = await raw.post(url, json=modern_remember(f"Modern POST on {host}"), headers=MODERN_HEADERS)
            assert response.status_code == 200 and '"isError":false' in response.text, response.text
            # A session opened legitimately cannot be driven from a foreign page either.
            opened = await raw.post(url, json=INITIALIZE, headers=HEADERS)
            assert opened.status_code == 200, opened.text
            session = {"mcp-session-id": opened.headers["mcp-session-id"]}
            await raw.post(url, json=INITIALIZED, headers={**HEADERS, **session})
            for evil in ({"Host": f"evil.example:{port}"}, {"Origin": "http://evil.example"}):
                response = await raw.post(url, json=REMEMBER, headers={**HEADERS, **session, **evil})
                assert response.status_code in (403, 421), (evil, response.status_code, response.text)
            # A page served by this server itself may talk to it; a local page on another port may not.
            own = await raw.post(url, json=INITIALIZE, headers={**HEADERS, "Origin": f"http://{url_host}:{port}"})
            assert own.status_code == 200, own.text
            other = await raw.post(url, json=INITIALIZE, headers={**HEADERS, "Origin": "http://localhost:6274"})
            assert other.status_code == 403 and "--allow-origin" in other.text, other.text
        # The real client, at the address as the user spelled it, works.
        async with connect(url) as client:
            result = await client.call_tool("remember", {"content": f"Served on {host}"})
            assert result.is_error is False, result.content[0].text
        assert planted(vault_dir) == []
        assert any(f"Served on {host}" in p.read_text() for p in vault_dir.rglob("*.md"))
    finally:
        stderr = server.stop()
    assert "no token: loopback only" in stderr


def test_the_table_ends_unused_sessions_first_then_the_longest_idle_and_busy_ones_last() -> None:
    now = [0.0]
    table = SessionTable(max_sessions=2, max_per_owner=2, idle_timeout=60, clock=lambda: now[0])

    def used(session_id: str) -> None:
        session = table.get(session_id, "")
        assert session is not None
        table.begin(session)
        table.end(session)

    assert table.add("a", "") == []
    now[0] = 1
    used("a")
    now[0] = 5
    table.add("b", "")  # a bare initialize: no request on it since
    now[0] = 6
    assert [s.id for s in table.add("c", "")] == ["b"]  # unused goes first, though a has been idle longer
    now[0] = 7
    used("c")
    now[0] = 8
    assert [s.id for s in table.add("d", "")] == ["a"]  # then the longest idle (a since 1, c since 7)
    used("d")
    busy = table.get("c", "")
    assert busy is not None
    table.begin(busy)  # a request in flight since 8: it goes last, though d has been idle since 8 too
    now[0] = 50
    assert [s.id for s in table.add("e", "")] == ["d"]
    assert table.get("c", "") is busy


def test_an_open_stream_keeps_no_session_alive_and_each_token_has_its_own_cap() -> None:
    now = [0.0]
    table = SessionTable(max_sessions=10, max_per_owner=2, idle_timeout=30, clock=lambda: now[0])
    table.add("mine", "token-a")
    session = table.get("mine", "token-a")
    assert session is not None and table.get("mine", "token-b") is None  # another credential: unknown id
    session.streaming = True
    table.add("theirs", "token-b")
    now[0] = 29
    assert table.expire() == []
    now[0] = 30
    assert {s.id for s in table.expire()} == {"mine", "theirs"}  # streaming or not: 30 s without a request
    for n in range(4):  # one token's flood evicts its own sessions, never another token's
        table.add(f"a{n}", "token-a")
        now[0] += 1
    table.add("b0", "token-b")
    assert {s.id for s in table.add("a4", "token-a")} == {"a2"}
    assert "b0" in table and "a3" in table and "a4" in table and len(table) == 3


async def test_a_flood_of_initialize_calls_never_locks_a_client_out(tmp_path: Path) -> None:
    server = Served(tmp_path / ".memory", "--max-sessions", "5")
    url = server.url
    try:
        async with connect(url, mode="legacy") as working:  # a session in use, with its GET stream open
            assert (await working.call_tool("memory_stats", {})).is_error is False
            async with httpx2.AsyncClient(timeout=deadline(120)) as raw:
                flood = [await raw.post(url, json=INITIALIZE, headers=HEADERS) for _ in range(40)]
                assert [r.status_code for r in flood] == [200] * 40  # never 503: room is made
                # The sessions that never got past initialize went first; the one in use is still served.
                result = await working.call_tool("remember", {"content": "Still served during the flood"})
                assert result.is_error is False, result.content[0].text
                async with connect(url, mode="legacy") as newcomer:
                    assert (await newcomer.call_tool("memory_stats", {})).is_error is False
                # An ended session's id gets the protocol's answer, on which a client starts again.
                gone = await raw.post(url, json=REMEMBER, headers={**HEADERS, "mcp-session-id":
                                                                    flood[0].headers["mcp-session-id"]})
                assert gone.status_code == 404 and "Session not found" in gone.text, gone.text
                assert (await raw.post(url, json=INITIALIZE, headers=HEADERS)).status_code == 200
            async with connect(url) as modern:  # 2026-07-28 clients need no session: unaffected
                assert (await modern.call_tool("memory_stats", {})).is_error is False
    finally:
        log = server.stop()
    assert "ended to make room for a new one (5 open at most)" in log
    assert planted(tmp_path / ".memory") == []


async def test_at_the_cap_the_longest_idle_client_is_ended_and_can_start_again(tmp_path: Path) -> None:
    server = Served(tmp_path / ".memory", "--max-sessions", "2")
    try:
        async with connect(server.url, mode="legacy") as first, connect(server.url, mode="legacy") as second:
            assert (await first.call_tool("memory_stats", {})).is_error is False
            assert (await second.call_tool("memory_stats", {})).is_error is False
            async with connect(server.url, mode="legacy") as third:  # first has been idle longest
                assert (await third.call_tool("memory_stats", {})).is_error is False
                with pytest.raises(Exception, match="Session not found"):
                    await first.call_tool("memory_stats", {})
                assert (await second.call_tool("memory_stats", {})).is_error is False
        async with connect(server.url, mode="legacy") as again:  # the ended client initializes anew
            assert (await again.call_tool("memory_stats", {})).is_error is False
    finally:
        server.stop()


async def test_an_open_event_stream_does_not_keep_a_session_alive(tmp_path: Path) -> None:
    server = Served(tmp_path / ".memory", "--session-idle-timeout", "1")
    try:
        async with connect(server.url, mode="legacy") as quiet:  # holds its GET stream open throughout
            assert (await quiet.call_tool("memory_stats", {})).is_error is False
            await anyio.to_thread.run_sync(server.wait_log, "idle timeout")
            with pytest.raises(Exception, match="Session not found"):
                await quiet.call_tool("memory_stats", {})
        async with connect(server.url, mode="legacy") as again:
            assert (await again.call_tool("memory_stats", {})).is_error is False
    finally:
        server.stop()


async def test_a_session_has_one_event_stream(tmp_path: Path) -> None:
    server = Served(tmp_path / ".memory")
    try:
        async with httpx2.AsyncClient(timeout=deadline(120)) as raw:
            opened = await raw.post(server.url, json=INITIALIZE, headers=HEADERS)
            session = {"mcp-session-id": opened.headers["mcp-session-id"], "Accept": "text/event-stream"}
            async with raw.stream("GET", server.url, headers=session) as stream:
                assert stream.status_code == 200
                second = await raw.get(server.url, headers=session)
                assert second.status_code == 409, second.text
            # Once the server has seen the first one close, the session may open another.
            with anyio.fail_after(30):
                while (await raw.get(server.url, headers={**session, "Accept": "application/json"})).status_code \
                        != 406:  # past the one-stream check, refused only for the Accept header
                    await anyio.sleep(0.05)
    finally:
        server.stop()


LISTEN_HEADERS = {**HEADERS, "mcp-protocol-version": MODERN, "mcp-method": "subscriptions/listen"}


def listen(request_id: int) -> dict[str, Any]:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": True}, "_meta": meta}}


async def test_listen_streams_are_capped_like_sessions(tmp_path: Path) -> None:
    """2026-07-28 ``subscriptions/listen`` answers with a stream that stays open and belongs
    to no session: at most --max-sessions of them; a new one ends the oldest."""
    server = Served(tmp_path / ".memory", "--max-sessions", "2")
    ended: list[int] = []

    async def hold(raw: httpx2.AsyncClient, n: int, started: anyio.Event) -> None:
        async with raw.stream("POST", server.url, json=listen(n), headers=LISTEN_HEADERS) as stream:
            assert stream.status_code == 200
            started.set()
            async for _ in stream.aiter_bytes():
                pass
        ended.append(n)

    try:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(deadline(120), read=None)) as raw, anyio.create_task_group() as tasks:
            for n in range(3):
                started = anyio.Event()
                tasks.start_soon(hold, raw, n, started)
                with anyio.fail_after(30):
                    await started.wait()
            with anyio.fail_after(30):
                while ended != [0]:
                    await anyio.sleep(0.05)
            async with connect(server.url) as modern:
                assert (await modern.call_tool("memory_stats", {})).is_error is False
            assert ended == [0]
            tasks.cancel_scope.cancel()
    finally:
        server.stop()


def origin_scope(port: int, host: str) -> dict[str, Any]:
    return {"type": "http", "server": ("127.0.0.1", port), "headers": [(b"host", host.encode())]}


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [("http://127.0.0.1:8765", True), ("http://localhost:8765", True), ("http://[::1]:8765", True),
     ("http://LOCALHOST:8765", True), ("http://[0:0:0:0:0:0:0:1]:8765", True),
     ("http://localhost:9999", False),              # a local page on another port: another server's page
     ("http://localhost", False), ("https://localhost:8765", False), ("http://127.0.0.2:8765", False),
     ("http://[::1].evil.example:8765", False), ("http://localhost.evil.example:8765", False),
     ("http://evil.example:8765", False), ("null", False), ("http://localhost:8765/path", False),
     ("http://user@localhost:8765", False), ("", False),
     ("http://localhost:6274", True), ("https://inspector.example", True)],  # the two --allow-origin pages
)
def test_which_origins_a_loopback_server_accepts(origin: str, allowed: bool) -> None:
    guard = OriginGuard(None, names=["127.0.0.1", "localhost", "[::1]"],
                        extra=["http://localhost:6274", "https://inspector.example/"])
    assert guard.allows(origin, origin_scope(8765, "127.0.0.1:8765")) is allowed


def test_beyond_loopback_the_origin_is_the_host_the_request_was_sent_to() -> None:
    guard = OriginGuard(None, names=["0.0.0.0"], match_host=True)
    assert guard.allows("http://memory.lan:8765", origin_scope(8765, "memory.lan:8765"))
    assert guard.allows("http://192.168.1.10:8765", origin_scope(8765, "192.168.1.10:8765"))
    assert not guard.allows("http://evil.example:8765", origin_scope(8765, "memory.lan:8765"))
    assert not guard.allows("http://memory.lan:9999", origin_scope(8765, "memory.lan:8765"))
    assert not guard.allows("http://memory.lan:8765", origin_scope(8765, "[memory.lan]:8765"))


async def test_origin_must_be_this_server_on_the_port_it_bound(tmp_path: Path) -> None:
    """With --port 0 the port is the one the system gave; --allow-origin adds a page."""
    server = Served(tmp_path / ".memory", "--allow-origin", "http://localhost:6274")
    port = server.port
    try:
        async with httpx2.AsyncClient(timeout=deadline(120)) as raw:
            def post(origin: str | None) -> Any:
                extra = {"Origin": origin} if origin else {}
                return raw.post(server.url, json=modern_remember(f"From {origin}"), headers={**MODERN_HEADERS, **extra})

            for origin in (None, f"http://127.0.0.1:{port}", f"http://localhost:{port}", "http://localhost:6274"):
                response = await post(origin)
                assert response.status_code == 200 and '"isError":false' in response.text, (origin, response.text)
            for origin in (f"http://127.0.0.1:{port + 1 if port < 65535 else port - 1}", "http://localhost:9999",
                           f"https://127.0.0.1:{port}", f"http://evil.example:{port}"):
                response = await post(origin)
                assert response.status_code == 403 and "--allow-origin" in response.text, (origin, response.text)
        async with connect(server.url) as client:  # the SDK client sends no Origin
            assert (await client.call_tool("memory_stats", {})).is_error is False
    finally:
        server.stop()
    stored = "".join(p.read_text() for p in (tmp_path / ".memory").rglob("*.md"))
    assert "From http://localhost:6274" in stored and "From None" in stored
    assert "9999" not in stored and "evil.example" not in stored and "https://" not in stored


async def test_origin_beyond_loopback_with_a_token(tmp_path: Path) -> None:
    token = "test-token-0123456789abcdef"
    server = Served(tmp_path / ".memory", host="0.0.0.0", env={"AGENT_MEMORY_TOKEN": token})
    url = f"http://127.0.0.1:{server.port}/mcp"
    headers = {**MODERN_HEADERS, "Authorization": f"Bearer {token}"}
    try:
        async with httpx2.AsyncClient(timeout=deadline(120)) as raw:
            own = await raw.post(url, json=modern_remember("Own page"),
                                 headers={**headers, "Origin": f"http://127.0.0.1:{server.port}"})
            assert own.status_code == 200, own.text
            foreign = await raw.post(url, json=modern_remember("Foreign page"),
                                     headers={**headers, "Origin": f"http://evil.example:{server.port}"})
            assert foreign.status_code == 403, foreign.text
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--max-sessions", "0"], "--max-sessions"), (["--session-idle-timeout", "0"], "--session-idle-timeout"),
     (["--request-timeout", "0"], "--request-timeout"), (["--keep-alive", "0"], "--keep-alive"),
     (["--max-connections", "0"], "--max-connections"), (["--port", "-1"], "--port")],
)
def test_limits_must_be_positive(tmp_path: Path, args: list[str], message: str) -> None:
    done = subprocess.run(
        [str(SCRIPT), "serve", "--http", "--dir", str(tmp_path / "never"), *args],
        check=False, capture_output=True, text=True, timeout=deadline(120),
    )
    assert done.returncode == 2 and f"Invalid value for '{message}'" in done.stderr, done.stderr
    assert not (tmp_path / "never").exists()


def test_the_cli_defaults_are_the_library_defaults() -> None:
    from agent_memory.cli.serve import serve
    from agent_memory.server.transport import HttpLimits

    defaults = {p.name: p.default for p in serve.params}
    limits = HttpLimits()
    assert {name: defaults[name] for name in ("max_sessions", "session_idle_timeout", "request_timeout",
                                              "keep_alive", "max_connections")} == {
        "max_sessions": limits.max_sessions, "session_idle_timeout": limits.session_idle_timeout,
        "request_timeout": limits.request_timeout, "keep_alive": limits.keep_alive,
        "max_connections": limits.max_connections}


@pytest.mark.parametrize("origin", ["localhost:6274", "http://localhost:6274/app", "*", "null"])
def test_an_allowed_origin_must_be_an_origin(tmp_path: Path, origin: str) -> None:
    done = subprocess.run(
        [str(SCRIPT), "serve", "--http", "--dir", str(tmp_path / "never"), "--allow-origin", origin],
        check=False, capture_output=True, text=True, timeout=deadline(120),
    )
    assert done.returncode == 1 and "--allow-origin must be an origin such as http://localhost:6274" in done.stderr
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize(
    ("host", "bound"),
    [("127.0.0.1", "127.0.0.1"), (" 127.0.0.2 ", "127.0.0.2"), ("LOCALHOST", "localhost"), ("[::1]", "::1"),
     ("0:0:0:0:0:0:0:1", "::1"), ("[0:0:0:0:0:0:0:1]", "::1"), ("0.0.0.0", "0.0.0.0"), ("MyHost.lan", "MyHost.lan")],
)
def test_the_address_uvicorn_binds(host: str, bound: str) -> None:
    from agent_memory.server.transport import bind_address

    assert bind_address(host) == bound
