"""`agent-memory serve --http` against hostile browsers and floods, as a real process
(uvicorn on a free loopback port, real HTTP requests).

- DNS rebinding: a page on evil.example whose name resolves to 127.0.0.1 makes the
  browser send `Host: evil.example` and `Origin: http://evil.example`. Without a token
  the server must refuse those however its loopback address is spelled (`127.0.0.2`,
  `LOCALHOST`, `0:0:0:0:0:0:0:1`, `[::1]`), write nothing, and still serve real clients.
- Session flood: the session table is capped (`--max-sessions`) and sessions with no
  request in flight end after `--session-idle-timeout`, so a flood of `initialize` calls
  that never come back clears by itself while a connected client keeps working.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from conftest import deadline, wait_listening, wait_until_async

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


def free_port(address: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET) as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


def start(vault_dir: Path, host: str, address: str, *args: str) -> tuple[subprocess.Popen[str], int]:
    """`serve --http --host HOST`, waiting until ADDRESS (the numeric address that spelling
    means) accepts connections."""
    port = free_port(address)
    env = {k: v for k, v in os.environ.items() if k != "AGENT_MEMORY_TOKEN"}
    process = subprocess.Popen(
        [str(SCRIPT), "serve", "--http", "--host", host, "--port", str(port), "--dir", str(vault_dir), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    return process, wait_listening(process, address, port)


def stop(process: subprocess.Popen[str]) -> str:
    process.terminate()
    _, stderr = process.communicate(timeout=deadline(120))
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    return stderr


@asynccontextmanager
async def connect(url: str, mode: str = "auto") -> AsyncIterator[Client]:
    """The SDK's client: ``auto`` speaks 2026-07-28 (one self-contained POST per request,
    no session); ``legacy`` does the initialize handshake, gets a session and holds a GET
    stream open on it."""
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as http,
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
    process, port = start(vault_dir, host, address)
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
            # A local page (an inspector on localhost) may still talk to it.
            local = await raw.post(url, json=INITIALIZE, headers={**HEADERS, "Origin": "http://localhost:6274"})
            assert local.status_code == 200, local.text
        # The real client, at the address as the user spelled it, works.
        async with connect(url) as client:
            result = await client.call_tool("remember", {"content": f"Served on {host}"})
            assert result.is_error is False, result.content[0].text
        assert planted(vault_dir) == []
        assert any(f"Served on {host}" in p.read_text() for p in vault_dir.rglob("*.md"))
    finally:
        stderr = stop(process)
    assert "no token: loopback only" in stderr


async def test_a_session_flood_is_capped_and_clears_while_connected_clients_keep_working(tmp_path: Path) -> None:
    vault_dir = tmp_path / ".memory"
    idle = 1.5
    process, port = start(vault_dir, "127.0.0.1", "127.0.0.1",
                          "--max-sessions", "5", "--session-idle-timeout", str(idle))
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with connect(url, mode="legacy") as client:  # a session that holds its GET stream open: never idle
            async with httpx2.AsyncClient(timeout=deadline(120)) as raw:
                statuses = [(await raw.post(url, json=INITIALIZE, headers=HEADERS)).status_code for _ in range(12)]
                # The SDK refuses new sessions at the cap (503); it does not evict to make room.
                assert statuses == [200] * 4 + [503] * 8, statuses
                result = await client.call_tool("remember", {"content": "Still served during the flood"})
                assert result.is_error is False, result.content[0].text
                async with connect(url) as modern:  # 2026-07-28 clients need no session: unaffected
                    assert (await modern.call_tool("memory_stats", {})).is_error is False

                async def admitted() -> bool:
                    return (await raw.post(url, json=INITIALIZE, headers=HEADERS)).status_code == 200

                await wait_until_async(admitted, "the flood's idle sessions are ended and a new one is admitted",
                                       seconds=idle + 30)
            # Past the idle timeout the connected client (open GET stream) is still served.
            result = await client.call_tool("recall", {"query": "flood"})
            assert result.is_error is False, result.content[0].text
        async with connect(url, mode="legacy") as fresh:
            assert (await fresh.call_tool("memory_stats", {})).is_error is False
    finally:
        stderr = stop(process)
    assert "Refusing to open a new session: 5 sessions are already open" in stderr, stderr
    assert "idle timeout" in stderr, stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--max-sessions", "0"], "--max-sessions"), (["--session-idle-timeout", "0"], "--session-idle-timeout")],
)
def test_session_limits_must_be_positive(tmp_path: Path, args: list[str], message: str) -> None:
    done = subprocess.run(
        [str(SCRIPT), "serve", "--http", "--dir", str(tmp_path / "never"), *args],
        check=False, capture_output=True, text=True, timeout=deadline(120),
    )
    assert done.returncode == 2 and f"Invalid value for '{message}'" in done.stderr, done.stderr
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize(
    ("host", "bound"),
    [("127.0.0.1", "127.0.0.1"), (" 127.0.0.2 ", "127.0.0.2"), ("LOCALHOST", "localhost"), ("[::1]", "::1"),
     ("0:0:0:0:0:0:0:1", "::1"), ("[0:0:0:0:0:0:0:1]", "::1"), ("0.0.0.0", "0.0.0.0"), ("MyHost.lan", "MyHost.lan")],
)
def test_the_address_uvicorn_binds(host: str, bound: str) -> None:
    from agent_memory.server.transport import bind_address

    assert bind_address(host) == bound
