"""`agent-memory serve` as a real subprocess on stdio, driven by the SDK's stdio client
and by raw JSON-RPC lines; the watcher keeps the index in step while it runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from agent_memory.vault.vault import Vault

from conftest import deadline, tool_ok, wait_until, wait_until_async

SCRIPT = Path(sys.executable).with_name("agent-memory")
CODE_UNDER_TEST = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}

pytestmark = pytest.mark.anyio


def serve_params(vault_dir: Path, *args: str) -> StdioServerParameters:
    # The stdio client forwards almost no environment: the vault must come from --dir,
    # and PYTHONPATH is passed on so the server runs the code under test.
    return StdioServerParameters(command=str(SCRIPT), args=[*args, "--dir", str(vault_dir)], env=CODE_UNDER_TEST)


async def test_remember_recall_forget_over_stdio(tmp_path: Path) -> None:
    vault_dir = tmp_path / "fresh-vault"  # does not exist yet: serve creates it
    async with Client(serve_params(vault_dir, "serve")) as client:
        assert client.server_info.name == "agent-memory"
        stored = await tool_ok(client, "remember", content="Customer ACME prefers deploys on Fridays", tags="customer")
        path = vault_dir / stored["memory"]["path"]
        assert path.read_text().endswith("Customer ACME prefers deploys on Fridays\n")
        found = await tool_ok(client, "recall", query="When does ACME prefer to deploy?")
        assert [h["id"] for h in found["hits"]] == [stored["memory"]["id"]]
        gone = await tool_ok(client, "forget", memory_id=stored["memory"]["id"])
        assert not path.exists() and (vault_dir / gone["trashed_to"]).exists()
        assert (await tool_ok(client, "recall", query="ACME deploy"))["count"] == 0
    assert (vault_dir / ".gitignore").exists()


async def recall_until(client: Client, query: str) -> dict:
    """Recall until something is found (the server's watcher folds a hand edit in)."""

    async def found() -> dict | None:
        answer = await tool_ok(client, "recall", query=query)
        return answer if answer["count"] else None

    return await wait_until_async(found, f"recall finds {query!r}")


async def test_files_made_by_hand_are_found_before_and_while_serving(tmp_path: Path) -> None:
    vault_dir = tmp_path / ".memory"
    Vault.init(vault_dir).close()
    (vault_dir / "before.md").write_text("Written before the server started: the kettle is in room 4\n")
    async with Client(serve_params(vault_dir, "serve")) as client:
        assert (await recall_until(client, "where is the kettle"))["hits"][0]["path"] == "before.md"
        (vault_dir / "people").mkdir()
        (vault_dir / "people" / "priya.md").write_text("Priya owns the billing service\n")
        found = await recall_until(client, "who owns billing")
        assert [h["path"] for h in found["hits"]] == ["people/priya.md"]


def serve_raw(vault_dir: Path, messages: list[dict], *args: str) -> tuple[list[dict], str]:
    """Run ``agent-memory [args] --dir vault_dir`` (no command: stdio), write ``messages`` as
    JSON-RPC lines, read until every request is answered, then close stdin: the server
    must end by itself with exit code 0. Returns every message on stdout (each line must
    be one) and what it wrote on stderr."""
    process = subprocess.Popen([str(SCRIPT), *args, "--dir", str(vault_dir)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killer = threading.Timer(deadline(120), process.kill)  # a server that never exits is killed: exit code -9
    killer.start()
    try:
        assert process.stdin and process.stdout and process.stderr
        for message in messages:
            process.stdin.write(json.dumps(message) + "\n")
        process.stdin.flush()
        asked = {m["id"] for m in messages if "id" in m}
        lines = []
        while not asked <= {json.loads(line).get("id") for line in lines}:
            line = process.stdout.readline()
            assert line, "the server closed stdout before answering"
            lines.append(line)
        process.stdin.close()  # the client goes away: the server ends by itself, with exit code 0
        rest = process.stdout.read()
        assert process.wait() == 0
        stderr = process.stderr.read()
    finally:
        killer.cancel()
    lines += rest.splitlines(keepends=True)
    replies = [json.loads(line) for line in lines]  # every byte on stdout is a JSON-RPC message
    assert all(r["jsonrpc"] == "2.0" for r in replies)
    return replies, stderr


HANDSHAKE = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]


def test_no_command_serves_stdio_with_nothing_but_protocol_on_stdout(tmp_path: Path) -> None:
    vault_dir = tmp_path / ".memory"
    Vault.init(vault_dir).close()
    (vault_dir / "people").mkdir()
    (vault_dir / "people" / "priya.md").write_text("Priya owns the billing service\n")
    messages = [
        *HANDSHAKE,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "remember", "arguments": {"content": "Raw JSON-RPC works"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "get_memory", "arguments": {"memory_id": "nope"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
         "params": {"name": "reindex", "arguments": {}, "_meta": {"progressToken": "reindex-4"}}},
    ]
    replies, stderr = serve_raw(vault_dir, messages)
    by_id = {r.get("id"): r for r in replies}
    assert by_id[2]["result"]["isError"] is False
    assert by_id[3]["result"]["isError"] is True and "not found" in by_id[3]["result"]["content"][0]["text"]
    assert by_id[4]["result"]["isError"] is False
    progress = [r["params"] for r in replies if r.get("method") == "notifications/progress"]
    assert progress and all(p["progressToken"] == "reindex-4" for p in progress)
    indexed = [p for p in progress if p["message"] == "indexing files"]  # (embedding may follow)
    assert indexed and indexed[-1]["progress"] == indexed[-1]["total"] >= 1
    assert progress[-1]["progress"] == progress[-1]["total"]
    last = max(i for i, r in enumerate(replies) if r.get("method") == "notifications/progress")
    assert last < replies.index(by_id[4]), "the last progress notification goes out before the result"
    assert "serving" in stderr and str(vault_dir) in stderr


def test_warnings_go_to_stderr_once_each_and_stdout_holds_only_protocol(tmp_path: Path) -> None:
    """The server's own warning (a vault created) and a library's (git.commit on outside a
    repository) are log lines on stderr, each once; stdout carries the protocol alone."""
    vault_dir = tmp_path / "fresh-vault"
    remember = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "remember", "arguments": {"content": "Logged, not printed"}}}
    replies, stderr = serve_raw(vault_dir, [*HANDSHAKE, remember], "serve", "--git-commit")
    assert [r["result"]["isError"] for r in replies if r.get("id") == 2] == [False]
    created = f"WARNING agent_memory.server: created a new vault at {vault_dir}"
    not_committed = f"WARNING agent_memory.git: {vault_dir}: git.commit is on but the vault is not in a git repository"
    assert stderr.count(created) == 1 and stderr.count(not_committed) == 1, stderr


async def test_the_handshake_does_not_wait_for_the_start_up_reconcile(tmp_path: Path) -> None:
    """Hold the vault's write lock from here, so the server's start-up reconcile cannot
    run: the client must still connect and list tools; once the lock is released the
    reconcile runs and a file made before the start is found."""
    import fcntl

    vault_dir = tmp_path / ".memory"
    Vault.init(vault_dir).close()
    (vault_dir / "people").mkdir()
    (vault_dir / "people" / "priya.md").write_text("Priya prefers written questions\n")
    with open(vault_dir / ".index" / "write.lock", "a+") as lock:  # noqa: ASYNC230 - opened before the server starts
        fcntl.flock(lock, fcntl.LOCK_EX)
        async with Client(serve_params(vault_dir, "serve")) as client:
            with anyio.fail_after(20):
                tools = await client.list_tools()
            assert "recall" in {t.name for t in tools.tools}  # connected while reconcile is held up
            assert (await tool_ok(client, "recall", query="Priya written questions"))["count"] == 0
            fcntl.flock(lock, fcntl.LOCK_UN)
            found = await recall_until(client, "Priya written questions")
            assert [h["path"] for h in found["hits"]] == ["people/priya.md"]


def spawn_serving(vault_dir: Path, **stdio: object) -> subprocess.Popen[bytes]:
    """``agent-memory serve --dir vault_dir`` with the given stdin/stdout (stderr is kept),
    killed if it never ends (exit code -9)."""
    process = subprocess.Popen([str(SCRIPT), "serve", "--dir", str(vault_dir)], stderr=subprocess.PIPE,
                               **stdio)  # type: ignore[call-overload]
    killer = threading.Timer(deadline(120), process.kill)
    killer.daemon = True
    killer.start()
    return process


def test_one_socket_for_stdin_and_stdout_keeps_answering(tmp_path: Path) -> None:
    """A launcher that hands the server one socket as both stdin and stdout (socat's
    EXEC, inetd) gets every answer, request after request, then an exit code 0 when it
    shuts its side: the client's requests on that socket are not mistaken for it
    hanging up."""
    import socket

    client, server_end = socket.socketpair()
    process = spawn_serving(tmp_path / ".memory", stdin=server_end, stdout=server_end)
    server_end.close()
    received = client.makefile("rb")

    def ask(message: dict) -> dict:
        client.sendall((json.dumps(message) + "\n").encode())
        line = received.readline()
        assert line, "the server closed the socket"
        return json.loads(line)

    assert ask(HANDSHAKE[0])["id"] == 1
    client.sendall((json.dumps(HANDSHAKE[1]) + "\n").encode())
    for request_id in (2, 3, 4):  # each sent once the last answer is in: the socket is idle in between
        answer = ask({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                      "params": {"name": "remember", "arguments": {"content": f"Note {request_id} over one socket"}}})
        assert answer["id"] == request_id and answer["result"]["isError"] is False
    client.shutdown(socket.SHUT_WR)
    assert received.read() == b""
    assert process.wait() == 0
    assert process.stderr and b"Traceback" not in process.stderr.read()
    client.close()


def send_until_stalled(process: subprocess.Popen[bytes], requests: list[dict]) -> threading.Thread:
    """Send ``requests`` (each padded to 4 KiB) from a thread, reading nothing; return
    that thread once it sent them all, or once none went in for three looks in a row."""
    assert process.stdin
    stdin = process.stdin
    sent = [0]

    def send() -> None:
        for request in requests:
            stdin.write((json.dumps(request) + " " * 4096 + "\n").encode())
            stdin.flush()
            sent[0] += 1

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    looks = [0, -1]  # looks in a row that found no request gone in since the last, and how many had

    def all_sent_or_stalled() -> bool:
        looks[0], looks[1] = (looks[0] + 1 if sent[0] == looks[1] else 0), sent[0]
        return not sender.is_alive() or looks[0] >= 3

    wait_until(all_sent_or_stalled, "the client's requests all went in, or stopped going in", every=0.5)
    return sender


def serving_after_handshake(vault_dir: Path) -> subprocess.Popen[bytes]:
    process = spawn_serving(vault_dir, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdin and process.stdout
    process.stdin.write((json.dumps(HANDSHAKE[0]) + "\n" + json.dumps(HANDSHAKE[1]) + "\n").encode())
    process.stdin.flush()
    assert json.loads(process.stdout.readline())["id"] == 1
    return process


def read_answers(process: subprocess.Popen[bytes], ids: range) -> list[dict]:
    """Every answer to ``ids`` (and what else comes before the last of them)."""
    assert process.stdout
    answers = []
    while not set(ids) <= {a.get("id") for a in answers}:
        line = process.stdout.readline()
        assert line, "the server closed stdout before answering"
        answers.append(json.loads(line))
    return answers


def test_a_client_that_stops_reading_answers_stops_the_server_taking_requests(tmp_path: Path) -> None:
    """A client sends request after request but reads no answer: once the answers due
    back up, the server takes no more requests (they wait in the client's pipe) rather
    than working through all of them and holding every answer in memory. Once the client
    reads, every request is answered and the server ends as usual."""
    process = serving_after_handshake(tmp_path / ".memory")
    ids = range(2, 402)  # each answer is the whole tool list, tens of KB
    sender = send_until_stalled(process, [{"jsonrpc": "2.0", "id": i, "method": "tools/list"} for i in ids])
    assert sender.is_alive(), f"the server took in all {len(ids)} requests while none of their answers was read"
    read_answers(process, ids)
    sender.join(deadline(60))
    assert process.stdin and process.stdout
    process.stdin.close()
    assert process.stdout.read() == b"" and process.wait() == 0


def test_requests_that_cannot_be_answered_yet_stop_the_server_taking_more(tmp_path: Path) -> None:
    """While the vault's write lock is held elsewhere, no ``remember`` can be answered:
    the server takes in a bounded number of them, the rest wait in the client's pipe
    (not as work and answers piling up in the server). Once the lock is free, every one
    is answered and saved."""
    import fcntl

    vault_dir = tmp_path / ".memory"
    Vault.init(vault_dir).close()
    ids = range(2, 302)
    with open(vault_dir / ".index" / "write.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        process = serving_after_handshake(vault_dir)
        sender = send_until_stalled(process, [
            {"jsonrpc": "2.0", "id": i, "method": "tools/call",
             "params": {"name": "remember", "arguments": {"content": f"Queued note {i}"}}} for i in ids])
        assert sender.is_alive(), f"the server took in all {len(ids)} requests while it could answer none"
    answers = [a for a in read_answers(process, ids) if a.get("id") in ids]
    assert [a["result"]["isError"] for a in answers] == [False] * len(ids)
    sender.join(deadline(60))
    assert process.stdin and process.stdout
    process.stdin.close()
    assert process.stdout.read() == b"" and process.wait() == 0
    assert len(list(vault_dir.rglob("*.md"))) == len(ids)


def test_a_client_that_closes_stdout_ends_the_server_quietly(tmp_path: Path) -> None:
    """The client closes the server's stdout and asks once more: the answer has nowhere
    to go, so the server ends, exit code 0, saying why in one line and with no traceback;
    the vault's write lock is free again."""
    import fcntl

    vault_dir = tmp_path / ".memory"
    Vault.init(vault_dir).close()
    process = serving_after_handshake(vault_dir)
    assert process.stdin and process.stdout and process.stderr
    process.stdout.close()
    process.stdin.write((json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "remember", "arguments": {"content": "Asked after the client stopped listening"}}}) + "\n").encode())
    process.stdin.flush()
    assert process.wait() == 0
    stderr = process.stderr.read().decode()
    assert "Traceback" not in stderr and "closed the server's stdout" in stderr, stderr
    process.stdin.close()
    with open(vault_dir / ".index" / "write.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if the server's lock outlived it


def test_sigterm_ends_the_server_after_committing_its_last_writes(tmp_path: Path) -> None:
    """SIGTERM (how a client or a supervisor stops a server) ends it as closing stdin
    does: the last tool write is committed before it exits, with exit code 0, no
    traceback, and the vault's write lock free. Before, the process died at once and
    the commit waited for the next start."""
    import fcntl
    import signal

    vault_dir = tmp_path / "vault"
    vault_dir.mkdir()
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CEILING_DIRECTORIES": str(tmp_path), "GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.com",
           "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.com"}

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(vault_dir), *args], env=env, capture_output=True, text=True,
                              check=True).stdout

    git("init", "-q", "-b", "main")
    Vault.init(vault_dir).close()
    git("add", "-A")
    git("commit", "-q", "-m", "a vault")
    process = subprocess.Popen([str(SCRIPT), "serve", "--git-commit", "--dir", str(vault_dir)], env=env,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    killer = threading.Timer(deadline(120), process.kill)
    killer.daemon = True
    killer.start()
    assert process.stdin and process.stdout and process.stderr
    remember = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "remember", "arguments": {"content": "Saved just before the stop", "title": "Last"}}}
    process.stdin.write("".join(json.dumps(m) + "\n" for m in [*HANDSHAKE, remember]).encode())
    process.stdin.flush()
    assert [a["result"]["isError"] for a in read_answers(process, range(1, 3)) if a.get("id") == 2] == [False]
    process.send_signal(signal.SIGTERM)
    assert process.wait() == 0
    stderr = process.stderr.read().decode()
    assert "Traceback" not in stderr and "SIGTERM" in stderr, stderr
    assert git("log", "--format=%s").splitlines()[0] == "remember: Last"
    with open(vault_dir / ".index" / "write.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if the server's lock outlived it
