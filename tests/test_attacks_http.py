"""Attacks on `agent-memory serve --http` that the transport's other tests do not cover.

- The token file is the only guard a loopback server has against other users of the same
  machine (loopback is reachable by every local account). A token file they can read, or
  one another account owns (planted, or a link to a file elsewhere), is refused before
  anything opens, with the command that fixes it.
- A ``Host`` on a loopback server must be a loopback name and a port, nothing after.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent_memory.errors import InvalidInput
from agent_memory.server.transport import read_token

from conftest import Served, deadline, run_cli

TOKEN = "t0k3n-for-tests-0123456789abcdef"
POSIX = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")


@POSIX
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o622])
def test_a_token_file_other_users_can_read_or_write_is_refused(tmp_path: Path, mode: int) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(mode)
    with pytest.raises(InvalidInput, match=r"other users.*chmod 600"):
        read_token(None, token_file)
    token_file.chmod(0o600)
    assert read_token(None, token_file) == TOKEN


@POSIX
def test_a_token_file_linked_to_a_readable_file_is_refused(tmp_path: Path) -> None:
    """A link is followed: what counts is who can read the file it points to."""
    target = tmp_path / "elsewhere"
    target.write_text(TOKEN + "\n")
    target.chmod(0o644)
    link = tmp_path / "token"
    link.symlink_to(target)
    with pytest.raises(InvalidInput, match="other users"):
        read_token(None, link)
    target.chmod(0o600)
    assert read_token(None, link) == TOKEN


@POSIX
def test_a_token_file_owned_by_another_account_is_refused(tmp_path: Path) -> None:
    """Root can hand a file to another account; anyone else finds one root owns."""
    theirs = Path("/etc/passwd")
    if os.geteuid() == 0:
        theirs = tmp_path / "token"
        theirs.write_text(TOKEN + "\n")
        theirs.chmod(0o600)
        os.chown(theirs, 65534, 65534)
    with pytest.raises(InvalidInput, match="belongs to another user"):
        read_token(None, theirs)


@POSIX
def test_serve_refuses_a_readable_token_file_before_anything_opens(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o644)
    vault_dir = tmp_path / ".memory"
    done = run_cli("serve", "--http", "--port", "0", "--token-file", str(token_file), "--dir", str(vault_dir),
                   cwd=tmp_path, spawn=True, timeout=60)  # a subprocess: were it not refused, it would serve
    assert done.returncode != 0
    assert "chmod 600" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stdout == ""
    assert not vault_dir.exists()


def raw_post(port: int, host: str, body: bytes) -> bytes:
    """One POST with a ``Host`` header exactly as given (an HTTP client would fix it up);
    the status line of the answer."""
    import socket

    headers = (f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nAccept: application/json, text/event-stream\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    with socket.create_connection(("127.0.0.1", port), timeout=deadline(60)) as sock:
        sock.sendall(headers.encode("latin-1") + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer.split(b"\r\n", 1)[0]


def test_a_loopback_host_with_junk_for_a_port_is_refused(tmp_path: Path) -> None:
    """The SDK's ``localhost:*`` takes anything after the colon: ``localhost:80@evil.example``
    names no loopback address and writes nothing; the real ``Host`` is still served."""
    from test_server_http_security import MARK, MODERN_HEADERS, modern_remember, planted

    vault_dir = tmp_path / ".memory"
    server = Served(vault_dir)
    try:
        body = json.dumps(modern_remember(MARK)).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in MODERN_HEADERS.items() if k.lower() != "content-type")
        for junk in ("localhost:80@evil.example", "127.0.0.1:1/evil", "localhost:x"):
            status = raw_post(server.port, f"{junk}\r\n{extra}".rstrip("\r\n"), body)
            assert status.split()[1] in (b"400", b"421"), (junk, status)
        assert planted(vault_dir) == []
        status = raw_post(server.port, f"127.0.0.1:{server.port}\r\n{extra}".rstrip("\r\n"), body)
        assert status.split()[1] == b"200", status
        assert len(planted(vault_dir)) == 1
    finally:
        server.stop()


def test_a_loopback_host_is_matched_whatever_its_case(tmp_path: Path) -> None:
    """Host names are case-insensitive: ``curl http://LOCALHOST:PORT/mcp`` is this machine."""
    from test_server_http_security import MODERN_HEADERS, modern_remember

    server = Served(tmp_path / ".memory")
    try:
        body = json.dumps(modern_remember("Sent to LOCALHOST")).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in MODERN_HEADERS.items() if k.lower() != "content-type")
        for name in ("LOCALHOST", "LocalHost"):
            status = raw_post(server.port, f"{name}:{server.port}\r\n{extra}".rstrip("\r\n"), body)
            assert status.split()[1] == b"200", (name, status)
    finally:
        server.stop()
