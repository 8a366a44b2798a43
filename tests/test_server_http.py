"""`agent-memory serve --http` as a real process (uvicorn on a free loopback port): every
tool works with the bearer token, nothing runs without it, and a public address without
a token is refused before anything is opened."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agent_memory.errors import InvalidInput
from agent_memory.server.transport import is_loopback, read_token

from conftest import wait_listening, deadline

SCRIPT = Path(sys.executable).with_name("agent-memory")
TOKEN = "test-token-0123456789abcdef"

pytestmark = pytest.mark.anyio


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(vault_dir: Path, *args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    process = subprocess.Popen(
        [str(SCRIPT), "serve", "--http", "--port", str(port), "--dir", str(vault_dir), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})},
    )
    return process, wait_listening(process, "127.0.0.1", port)


def stop(process: subprocess.Popen[str]) -> str:
    """SIGTERM: uvicorn shuts the app down (our lifespan stops the watcher) and the
    server exits cleanly, as a service manager expects."""
    process.terminate()
    _, stderr = process.communicate(timeout=deadline(120))
    assert process.returncode == 0, stderr
    assert "session manager shutting down" in stderr and "Traceback" not in stderr, stderr
    return stderr


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("http")
    token_file = base / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    vault_dir = base / ".memory"
    process, port = start(vault_dir, "--token-file", str(token_file))
    yield {"url": f"http://127.0.0.1:{port}/mcp", "vault": vault_dir, "process": process}
    stderr = stop(process)
    assert "bearer token required" in stderr


@asynccontextmanager
async def connect(url: str, token: str | None = TOKEN) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(deadline(120), read=deadline(120))) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


async def ok(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert result.is_error is False, (tool, result.content[0].text)
    return result.structured_content


async def test_every_tool_works_with_the_token(server: dict[str, Any]) -> None:
    async with connect(server["url"]) as client:
        assert len((await client.list_tools()).tools) == 19
        a = (await ok(client, "remember", content="HTTP fact: ACME deploys on Fridays", tags="acme"))["memory"]
        b = (await ok(client, "remember", content="HTTP fact: ACME billing on Stripe", namespace="billing"))["memory"]
        assert (await ok(client, "recall", query="ACME deploys"))["hits"][0]["id"] == a["id"]
        got = await ok(client, "get_memory", memory_id=a["id"])
        await ok(client, "update_memory", memory_id=a["id"], add_tags=["deploy"], expected_version=got["version"])
        assert (await ok(client, "list_memories"))["total"] == 2
        assert (await ok(client, "recent_activity", timeframe="1d"))["total"] == 2
        batch = await ok(client, "remember_many", items=[{"content": "HTTP fact: ACME deploys on Fridays"}])
        assert batch["deduplicated"] == 1 and batch["results"][0]["id"] == a["id"]
        await ok(client, "link_memories", memory_id=a["id"], target_id=b["id"])
        assert (await ok(client, "related", memory_id=b["id"]))["count"] == 1
        assert (await ok(client, "retrieve_context", query="ACME"))["count"] == 2
        assert (await ok(client, "memory_stats"))["total"] == 2
        exported = (await ok(client, "export_memories"))["memories"]
        assert (await ok(client, "import_memories", items=exported))["duplicates"] == 2
        assert (await ok(client, "read_file", path=a["path"]))["memory_id"] == a["id"]
        assert (await ok(client, "reindex"))["added"] == 2
        assert (await ok(client, "forget", memory_id=b["id"]))["id"] == b["id"]
        failed = await client.call_tool("get_memory", {"memory_id": b["id"]})
        assert failed.is_error and "not found" in failed.content[0].text
        assert len((await client.list_prompts()).prompts) >= 7
        assert "remember" in (await client.read_resource("memory://instructions")).contents[0].text
    assert (server["vault"] / a["path"]).exists()


async def test_missing_or_wrong_token_gets_401_and_nothing_runs(server: dict[str, Any]) -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "remember", "arguments": {"content": "Must never be stored"}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx2.AsyncClient(timeout=deadline(120)) as raw:
        for auth in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": TOKEN},
                     {"Authorization": f"Basic {TOKEN}"}, {"Authorization": f"Bearer {TOKEN}x"}):
            response = await raw.post(server["url"], json=call, headers={**headers, **auth})
            assert response.status_code == 401, auth
            assert response.headers["www-authenticate"] == "Bearer" and "bearer token" in response.text
        response = await raw.post(server["url"], json=call, headers={**headers, "Authorization": f"bearer {TOKEN}"})
        assert response.status_code != 401  # the scheme is case-insensitive; the token was right
    with pytest.raises(BaseException) as refused:  # the SDK client cannot even connect
        async with connect(server["url"], token=None) as client:
            await client.call_tool("remember", {"content": "Must never be stored"})
    assert "Server returned an error response" in repr(refused.value)
    assert not any("Must never be stored" in p.read_text() for p in server["vault"].rglob("*.md"))


def test_public_address_without_token_is_refused_before_anything_opens(tmp_path: Path) -> None:
    vault_dir = tmp_path / "never-created"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "AGENT_MEMORY_TOKEN"}
    done = subprocess.run(
        [str(SCRIPT), "serve", "--http", "--host", "0.0.0.0", "--port", str(port), "--dir", str(vault_dir)],
        capture_output=True, text=True, timeout=deadline(120), env=env,
    )
    assert done.returncode == 1
    assert "Refusing to serve on 0.0.0.0 without a token" in done.stderr and "--token-file" in done.stderr
    assert not vault_dir.exists()  # refused before the vault was opened, so before any socket
    with socket.socket() as probe:
        probe.bind(("0.0.0.0", port))  # the port was never taken


async def test_public_address_with_token_from_the_environment(tmp_path: Path) -> None:
    process, port = start(tmp_path / ".memory", "--host", "0.0.0.0", env={"AGENT_MEMORY_TOKEN": TOKEN})
    try:
        async with connect(f"http://127.0.0.1:{port}/mcp") as client:
            assert (await ok(client, "remember", content="Served on all addresses"))["deduplicated"] is False
        async with httpx2.AsyncClient(timeout=deadline(120)) as raw:
            assert (await raw.post(f"http://127.0.0.1:{port}/mcp", json={})).status_code == 401
    finally:
        stop(process)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("localhost", True), ("::1", True), ("[::1]", True),
     ("0.0.0.0", False), ("::", False), ("192.168.1.10", False), ("myhost.lan", False)],
)
def test_which_hosts_are_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_token_sources_and_their_errors(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"  {TOKEN}\n")
    token_file.chmod(0o600)
    assert read_token(None, token_file) == TOKEN
    assert read_token(TOKEN, None) == TOKEN
    assert read_token(None, None) is None and read_token("", None) is None
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "empty").chmod(0o600)
    for token, path, message in [
        (None, tmp_path / "empty", "is empty"),
        (None, tmp_path / "missing", "Cannot read the token file"),
        ("short", None, "at least 16 characters"),
        (TOKEN, token_file, "not both"),
    ]:
        with pytest.raises(InvalidInput, match=message):
            read_token(token, path)


async def test_a_session_follows_its_token_however_the_scheme_is_spelled(server: dict[str, Any]) -> None:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": HANDSHAKE_PROTOCOL_VERSIONS[-1], "capabilities": {},
                             "clientInfo": {"name": "raw", "version": "1"}}}
    async with httpx2.AsyncClient(timeout=deadline(120)) as raw:
        opened = await raw.post(server["url"], json=initialize, headers={**headers, "Authorization": f"Bearer {TOKEN}"})
        assert opened.status_code == 200, opened.text
        session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "Authorization": f"bearer  {TOKEN}"}
        await raw.post(server["url"], json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        listed = await raw.post(server["url"], json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session)
        assert listed.status_code == 200 and '"remember"' in listed.text, listed.text
