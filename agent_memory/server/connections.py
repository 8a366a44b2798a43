"""HTTP connections no client can hold forever: uvicorn's h11 protocol with deadlines and a cap.

uvicorn times only the gap between requests (``timeout_keep_alive``, armed after a
response); a connection that never sends a whole request has no timer at all, and ASGI
middleware runs only once the headers are parsed. So the rules live in the protocol:

- From accept (or from the first byte of a later request on a kept-alive connection) the
  request must be fully received — headers and body — within ``request_timeout``
  seconds, else the client gets 408 (when it sent part of one) and the socket is closed.
- A client that stops reading a response for ``request_timeout`` seconds is cut off too.
- Idle keep-alive lasts ``keep_alive`` seconds, announced as ``Keep-Alive: timeout=N`` so
  clients that honour it (undici, in Node's fetch) close first instead of reusing a
  socket the server is closing.
- At most ``max_connections`` are open. A new one over the cap closes the open connection
  that has been waiting longest for its first request (or still receiving it), else (if
  there is none) the kept-alive one waiting longest for its next, passing over those
  whose request is already in the socket, unread. Only when none can go is the newcomer
  refused (503, ``Retry-After: 1``). So a crowd of idle or half-sent connections never
  keeps a real client out (it sends its request at once, so it is soon busy, and until
  it is read it is passed over), and a connection that has been answered outlives any
  number of connections that never sent a whole request.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import sys
import time
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .connection_limits import ConnectionLimits

try:
    import fcntl
    import termios
except ImportError:  # not POSIX: _unread cannot tell, and says so
    pass

log = logging.getLogger("agent_memory.server")

SHED_SCAN = 64
"""Waiting connections looked at, at most, to find one to close."""


def _plain_response(status: bytes, text: str, *extra: bytes) -> bytes:
    body = text.encode()
    head = [b"HTTP/1.1 " + status, b"content-type: text/plain; charset=utf-8", b"connection: close",
            b"content-length: " + str(len(body)).encode(), *extra]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the deadlines and the cap above. Use
    :func:`guarded_protocol` to get the class for one set of limits."""

    limits: ClassVar[ConnectionLimits] = ConnectionLimits()
    fresh: ClassVar[dict[GuardedH11Protocol, float]] = {}
    """This server's connections waiting for their first request, the one waiting longest
    first, each with the time it started waiting (so shedding is O(1))."""
    kept: ClassVar[dict[GuardedH11Protocol, float]] = {}
    """Likewise for connections that have had a request answered and wait for the next."""
    _last_refusal_logged: ClassVar[float] = -1e9

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None
        self._answered = False

    # -- the request deadline

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self._make_room()
        if not transport.is_closing():
            self._watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        self._answered = True
        self._leave_line()  # waiting again from now: to the back of the line
        super().on_response_complete()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._leave_line()
        self._disarm()
        self._disarm_write()
        super().connection_lost(exc)

    def _watch(self) -> None:
        """Keep the lines of waiting connections and the request deadline up to date: the
        deadline runs exactly while a request is awaited or arriving and uvicorn's
        keep-alive timer is not the one in charge."""
        line = self.kept if self._answered else self.fresh
        if self._busy() or self.transport.is_closing():
            self._leave_line()
        elif self not in line:
            line[self] = time.monotonic()
        state = self.conn.their_state
        awaited = state is h11.SEND_BODY or (state is h11.IDLE and (
            self._partly_received() or self.timeout_keep_alive_task is None))
        if awaited and not self.transport.is_closing():
            if self._deadline is None:
                self._deadline = self.loop.call_later(self.limits.request_timeout, self._timed_out)
        else:  # the request is in (the app may take its time), or idle keep-alive (its own timer)
            self._disarm()

    def _leave_line(self) -> None:
        self.fresh.pop(self, None)
        self.kept.pop(self, None)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _timed_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._partly_received() and not (self.cycle is not None and self.cycle.response_started
                                            and not self.cycle.response_complete):
            self.transport.write(_plain_response(
                b"408 Request Timeout",
                f"The request was not received within {self.limits.request_timeout:g} s; send it whole.\n"))
        log.debug("closed a connection from %s: no whole request within %g s", self.client, self.limits.request_timeout)
        self.transport.close()

    def _partly_received(self) -> bool:
        state = self.conn.their_state
        return state is h11.SEND_BODY or (state is h11.IDLE and bool(self.conn.trailing_data[0]))

    # -- a client that stops reading

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(self.limits.request_timeout, self._stopped_reading)

    def resume_writing(self) -> None:
        self._disarm_write()
        super().resume_writing()

    def _disarm_write(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def _stopped_reading(self) -> None:
        self._write_deadline = None
        log.debug("closed a connection from %s: it read nothing for %g s", self.client, self.limits.request_timeout)
        self.transport.abort()  # close() would wait to flush what the client will not read

    # -- the cap

    def _busy(self) -> bool:
        """A whole request is in and its answer is not complete yet."""
        return (self.conn.their_state in (h11.DONE, h11.MUST_CLOSE) and self.cycle is not None
                and not self.cycle.response_complete)

    def _make_room(self) -> None:
        """Over the cap: close the connection waiting longest for its first request (else,
        when there is none, the one waiting longest for its next), passing over any whose
        request has arrived but not been read yet; if all are like that, or every other
        connection is busy answering, refuse this one."""
        now = time.monotonic()
        line = self.fresh if any(c is not self for c in itertools.islice(self.fresh, 2)) else self.kept
        for oldest, since in itertools.islice(line.items(), SHED_SCAN):
            if oldest is self or oldest._unread():
                continue
            del line[oldest]
            log.debug("closed a connection from %s waiting %.1f s for its %s request, to make room (%d at most)",
                      oldest.client, now - since, "next" if line is self.kept else "first",
                      self.limits.max_connections)
            oldest.transport.close()
            return
        if now - GuardedH11Protocol._last_refusal_logged > 10:
            GuardedH11Protocol._last_refusal_logged = now
            log.warning("refusing connections: all %d are busy answering requests or about to be read "
                        "(--max-connections)", self.limits.max_connections)
        self.transport.write(_plain_response(
            b"503 Service Unavailable", "Every connection is busy; try again in a moment.\n", b"retry-after: 1"))
        self.transport.close()

    def _unread(self) -> bool:
        """Bytes from the client wait in the socket, not read yet: in a burst of connections
        a real client's request can still be in the kernel when a crowd arrives behind it."""
        try:
            sock = self.transport.get_extra_info("socket")
            waiting = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
        except (OSError, AttributeError, NameError):  # closed, or not POSIX: no way to tell
            return False
        return int.from_bytes(waiting, sys.byteorder) > 0


def guarded_protocol(limits: ConnectionLimits) -> type[GuardedH11Protocol]:
    """The protocol class to pass uvicorn as ``http=`` for these limits."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"limits": limits, "fresh": {}, "kept": {}})


def uvicorn_config(app: Any, sock_host: str, port: int, limits: ConnectionLimits) -> Any:
    """uvicorn's settings for serving ``app`` with ``limits``: the guarded protocol, the
    keep-alive it announces, no WebSocket upgrades (MCP has none), and no
    ``X-Forwarded-*`` rewriting (uvicorn trusts it from any local process by default; the
    server reads neither the client's address nor the scheme)."""
    import uvicorn

    return uvicorn.Config(
        app, host=sock_host, port=port, log_level="warning", lifespan="on", ws="none", proxy_headers=False,
        http=guarded_protocol(limits), timeout_keep_alive=limits.keep_alive, backlog=limits.backlog,
        headers=[("Keep-Alive", f"timeout={limits.keep_alive}")],
    )
