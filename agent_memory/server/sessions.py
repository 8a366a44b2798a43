"""The HTTP session table: which sessions are open, and which one goes when a new one needs room.

The MCP SDK's session manager refuses a new session with 503 at its cap and counts an open
GET stream as activity, so a flood of ``initialize`` calls (or of sessions holding a GET
stream) locks every new client out. Here the table is ours, in front of the SDK's app:

- A session is *idle* when it has sent no request (POST or DELETE) for a while; an open GET
  stream does not keep it busy, and a session may hold one GET stream at a time.
- At the cap (overall, and per token) the session idle longest is ended to make room:
  first among those that never sent a request after the ``initialize`` that opened them
  (as a flood of ``initialize`` calls does; a client sends ``initialized`` at once), then
  among the rest. A session with a request in flight goes last.
- A session idle for ``idle_timeout`` seconds ends.

Ending a session goes through the SDK's own door: a ``DELETE`` with its id, sent to the
app in process, so the SDK frees it (and closes its GET stream) exactly as when a client
ends it. From the moment the table drops an id, requests naming it get the protocol's
"session not found" answer (404), on which a client starts a new session.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc

log = logging.getLogger("agent_memory.server")

SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = b"mcp-protocol-version"
METHOD_HEADER = b"mcp-method"
Scope = dict[str, Any]


@dataclass
class Session:
    """One open session, as the table sees it."""

    id: str
    owner: str
    last_request: float
    in_flight: int = 0
    used: bool = False
    """It has sent a request of its own, after the ``initialize`` that opened it."""
    streaming: bool = False
    """Its one GET stream is open."""

    def idle(self, now: float) -> float:
        return 0.0 if self.in_flight else now - self.last_request


class SessionTable:
    """Open sessions and the eviction rule; no I/O (the guard below acts on its answers).

    ``clock`` is injectable so the rule can be tested without waiting."""

    def __init__(self, max_sessions: int, max_per_owner: int, idle_timeout: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_sessions = max_sessions
        self.max_per_owner = max_per_owner
        self.idle_timeout = idle_timeout
        self._clock = clock
        self._sessions: dict[str, Session] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    def get(self, session_id: str, owner: str) -> Session | None:
        """The session, if it is open and was opened with the same credential."""
        session = self._sessions.get(session_id)
        return session if session is not None and session.owner == owner else None

    def add(self, session_id: str, owner: str) -> list[Session]:
        """Register a new session; returns the sessions dropped to keep within both caps
        (already out of the table: their ids are unknown from now on)."""
        self._sessions[session_id] = Session(session_id, owner, self._clock())
        dropped: list[Session] = []
        while (mine := [s for s in self._sessions.values() if s.owner == owner]) and len(mine) > self.max_per_owner:
            dropped.append(self._drop(self._victim(mine, spare=session_id)))
        while len(self._sessions) > self.max_sessions:
            dropped.append(self._drop(self._victim(self._sessions.values(), spare=session_id)))
        return dropped

    def begin(self, session: Session) -> None:
        """A POST or DELETE of this session started: it is busy until :meth:`end`."""
        session.in_flight += 1
        session.used = True
        session.last_request = self._clock()

    def end(self, session: Session) -> None:
        session.in_flight -= 1
        session.last_request = self._clock()

    def remove(self, session_id: str) -> Session | None:
        return self._sessions.pop(session_id, None)

    def expire(self) -> list[Session]:
        """Drop and return the sessions idle for ``idle_timeout`` seconds or more."""
        now = self._clock()
        return [self._drop(s) for s in list(self._sessions.values()) if s.idle(now) >= self.idle_timeout]

    def _victim(self, sessions: Iterable[Session], spare: str) -> Session:
        """Unused sessions first, then the longest idle (busy ones last, the one whose
        request started earliest first); never the session being admitted."""
        now = self._clock()
        candidates = [s for s in sessions if s.id != spare]
        return min(candidates, key=lambda s: (s.used, -s.idle(now), s.last_request))

    def _drop(self, session: Session) -> Session:
        del self._sessions[session.id]
        return session


def _header(scope: Scope, name: bytes) -> bytes | None:
    return next((value for key, value in scope.get("headers", []) if key == name), None)


def owner_of(scope: Scope) -> str:
    """Who a request speaks for: a digest of its ``Authorization`` header (the bearer check
    in front has let only right tokens through), or ``""`` without one."""
    _, _, credentials = (_header(scope, b"authorization") or b"").partition(b" ")
    credentials = credentials.strip()  # the scheme's case and spacing do not make another owner
    return hashlib.sha256(credentials).hexdigest()[:32] if credentials else ""


def _json_error(status: int, message: str) -> tuple[int, bytes]:
    return status, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"' + message.encode() + b'"}}'


NOT_FOUND = _json_error(404, "Session not found")
SECOND_STREAM = _json_error(409, "Conflict: Only one SSE stream is allowed per session")
TOO_MANY_STREAMS = _json_error(503, "Too many open streams; try again")


class SessionGuard:
    """Pure ASGI, in front of the SDK's streamable-HTTP app (whose own cap and idle timeout
    are off): keeps the :class:`SessionTable`, ends what it drops, and answers for ids it
    does not know. Requests of the 2026-07-28 revision carry no session and pass through.

    ``host_header`` is a ``Host`` value the SDK's rebinding check accepts, for the
    in-process ``DELETE`` that ends a session; ``path`` is the MCP endpoint."""

    def __init__(self, app: Any, table: SessionTable, *, host_header: str, path: str) -> None:
        self.app = app
        self.table = table
        self._host = host_header.encode("latin-1")
        self._path = path
        self._tasks: anyio.abc.TaskGroup | None = None
        self._streams: list[anyio.CancelScope] = []
        """The open ``subscriptions/listen`` streams, oldest first."""

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._run(scope, receive, send)
        elif scope["type"] != "http":
            await self.app(scope, receive, send)
        elif (session_id := _header(scope, SESSION_HEADER)) is not None:
            await self._with_session(session_id.decode("latin-1"), scope, receive, send)
        elif scope["method"] != "POST":
            await self.app(scope, receive, send)
        elif _header(scope, VERSION_HEADER) in (None, *_handshake_versions()):
            await self._opening(scope, receive, send)
        elif _header(scope, METHOD_HEADER) == b"subscriptions/listen":
            await self._listen(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _run(self, scope: Scope, receive: Any, send: Any) -> None:
        """The app's lifetime: ends idle sessions on a tick, and runs the ``DELETE`` of
        each dropped session in the background."""
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            tasks.start_soon(self._sweep)
            try:
                await self.app(scope, receive, send)
            finally:
                self._tasks = None
                tasks.cancel_scope.cancel()

    async def _sweep(self) -> None:
        tick = min(1.0, self.table.idle_timeout / 4)
        while True:
            await anyio.sleep(tick)
            for session in self.table.expire():
                log.info("session %s ended: idle timeout (%g s without a request)",
                         session.id[:12], self.table.idle_timeout)
                self._end(session)

    async def _opening(self, scope: Scope, receive: Any, send: Any) -> None:
        """A request that may open a session (an ``initialize``): once the SDK answers it
        with a new session id, the table takes it, dropping others if it must."""
        owner = owner_of(scope)

        async def admit(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and message["status"] == 200:
                opened = next((v for k, v in message.get("headers", []) if k.lower() == SESSION_HEADER), None)
                if opened is not None:
                    for dropped in self.table.add(opened.decode("latin-1"), owner):
                        log.info("session %s ended to make room for a new one (%d open at most)",
                                 dropped.id[:12], self.table.max_sessions)
                        self._end(dropped)
            await send(message)

        await self.app(scope, receive, admit)

    async def _with_session(self, session_id: str, scope: Scope, receive: Any, send: Any) -> None:
        session = self.table.get(session_id, owner_of(scope))
        if session is None:
            await _answer(send, *NOT_FOUND)
            return
        if scope["method"] == "GET":
            if session.streaming:
                await _answer(send, *SECOND_STREAM)
                return
            session.streaming = True  # no await since the check: two GETs cannot both pass
            try:
                status = await self._forward(scope, receive, send)
            finally:
                session.streaming = False
        else:
            self.table.begin(session)
            status = None
            try:
                status = await self._forward(scope, receive, send)
            finally:
                self.table.end(session)
        if status == 404 or (scope["method"] == "DELETE" and status is not None and status < 300):
            self.table.remove(session_id)  # ended by its client, or gone from the SDK already

    async def _forward(self, scope: Scope, receive: Any, send: Any) -> int | None:
        status: int | None = None

        async def watch(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await self.app(scope, receive, watch)
        return status

    def _end(self, session: Session) -> None:
        if self._tasks is not None:
            self._tasks.start_soon(self._delete, session.id)

    async def _delete(self, session_id: str) -> None:
        """End the session in the SDK as its client would: ``DELETE`` with its id."""
        scope: Scope = {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
            "method": "DELETE", "scheme": "http", "path": self._path, "raw_path": self._path.encode(),
            "root_path": "", "query_string": b"", "server": None, "client": None, "state": {},
            "headers": [(b"host", self._host), (SESSION_HEADER, session_id.encode("latin-1"))],
        }
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(_message: dict[str, Any]) -> None:
            return None

        try:
            await self.app(scope, receive, discard)
        except Exception:  # the server is stopping, or the session ended on its own meanwhile
            log.debug("ending session %s in the SDK failed", session_id[:12], exc_info=True)

    async def _listen(self, scope: Scope, receive: Any, send: Any) -> None:
        """A 2026-07-28 ``subscriptions/listen``: its answer is a stream that stays open, held
        by no session. As many may be open as sessions; at the cap the oldest one ends (its
        stream closes cleanly; the client may listen again)."""
        stop = anyio.CancelScope()
        self._streams.append(stop)
        while len(self._streams) > self.table.max_sessions:
            self._streams.pop(0).cancel()
        started = completed = False

        async def watch(message: dict[str, Any]) -> None:
            nonlocal started, completed
            started = started or message["type"] == "http.response.start"
            completed = completed or (message["type"] == "http.response.body" and not message.get("more_body"))
            await send(message)

        try:
            with stop:
                await self.app(scope, receive, watch)
        finally:
            if stop in self._streams:
                self._streams.remove(stop)
        if stop.cancelled_caught:
            log.info("a listen stream ended to make room for a new one (%d open at most)", self.table.max_sessions)
            if not started:
                await _answer(send, *TOO_MANY_STREAMS)
            elif not completed:
                await send({"type": "http.response.body", "body": b"", "more_body": False})


@functools.cache
def _handshake_versions() -> tuple[bytes, ...]:
    """Protocol revisions with an ``initialize`` handshake (and sessions)."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    return tuple(v.encode("ascii") for v in HANDSHAKE_PROTOCOL_VERSIONS)


async def _answer(send: Any, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
