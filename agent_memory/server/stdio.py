"""The stdio transport driven by the event loop itself: no thread per line.

The SDK's ``stdio_server()`` reads each line and writes (then flushes) each answer on a
worker thread, three thread round trips a call on top of the tool's own; on a pipe,
asyncio can read and write without blocking, so the answers cost the loop alone. The
SDK's framing (its ``stdin_reader`` and ``stdout_writer``) is kept: it is handed the two
ends here. Its guarantees are kept too: while serving, fd 0 reads the null device and
fd 1 goes to stderr, so a child process or a stray write never touches the wire; both
come back when the server ends. An answer the client is slow to read waits in memory
(flow control), never blocking the loop; while answers wait, no more requests are read.

Anything but a pipe or socket on both ends (a terminal, the null device, a file,
Windows) is served by the SDK's own transport.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import logging
import os
import signal
import socket
import stat
import sys
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Self, SupportsIndex

import anyio

from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse, RequestId

if sys.platform != "win32":
    import fcntl
if TYPE_CHECKING:
    from mcp.shared._stream_protocols import ReadStream, WriteStream

log = logging.getLogger("agent_memory.server")

LINE_LIMIT = 1 << 31
"""asyncio's readline refuses longer lines (its default is 64 KiB); the SDK reads any."""
READ_AHEAD = 64 * 1024
"""Bytes of stdin read ahead of the lines taken (one read may add up to 256 KiB more)."""
MOST_PENDING = 64
"""Requests taken in and not answered yet past which no more are read (the tools run on
40 worker threads, so this costs a client that pipelines its requests nothing)."""
CLOSE_WAIT = 5.0
"""Seconds the last answers may take to go out when the server ends."""


def _streamable(fd: int) -> bool:
    """Whether asyncio can wait on ``fd`` (epoll): a pipe or a socket, as MCP clients
    connect a server (a terminal or the null device goes the SDK's way)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


async def serve_stdio(server: MCPServer, serving: str = "") -> None:
    """``server.run_stdio_async()``, with the wire read and written on the event loop.

    There, SIGTERM and Ctrl-C end it as the client closing stdin does (``_stopped_by``),
    then ``KeyboardInterrupt`` says it was stopped; through the SDK's transport (a
    terminal, Windows) they keep their defaults, since its reads on a thread would hold
    a cancelled server until the next line is typed. ``serving`` is logged once they
    are in place (what a supervisor waits for before it may stop the server)."""
    lowlevel = getattr(server, "_lowlevel_server", None)  # what run_stdio_async drives; private to the SDK
    if sys.platform == "win32" or lowlevel is None or not (_streamable(0) and _streamable(1)):
        log.info("%s", serving)
        await server.run_stdio_async()
        return
    stopped: list[str] = []
    with anyio.CancelScope() as scope, _stopped_by(scope, stopped):
        log.info("%s", serving)
        await _serve(lowlevel)
    if stopped:
        raise KeyboardInterrupt(stopped[0])


@contextlib.contextmanager
def _stopped_by(scope: anyio.CancelScope, stopped: list[str]) -> Iterator[None]:
    """SIGTERM (how a client, a supervisor or ``kill`` ends a server) and SIGINT cancel
    ``scope``, the signal's name added to ``stopped``: the server's tasks end, its
    shutdown runs (the last tool writes are committed when git commits are on) and the
    answers due go out. Before, SIGTERM killed the process at once (the commit waited
    for the next start), and Ctrl-C raised wherever the loop was."""
    loop = asyncio.get_running_loop()

    def stop(name: str) -> None:
        log.info("stopping: %s", name)
        stopped.append(name)
        scope.cancel()

    signals = (signal.SIGTERM, signal.SIGINT)
    for number in signals:
        loop.add_signal_handler(number, stop, signal.Signals(number).name)
    try:
        yield
    finally:
        for number in signals:
            loop.remove_signal_handler(number)


async def _serve(lowlevel: Any) -> None:
    """The SDK's server on the event loop's own streams over the claimed descriptors."""
    with _claimed() as (wire_in, wire_out):
        lines, writer = await _open(wire_in, wire_out)
        try:
            async with stdio_server(stdin=lines, stdout=_Out(writer)) as (  # type: ignore[arg-type]
                read_stream, write_stream):
                await lowlevel.run(_Taken(read_stream, lines.pending), _Answered(write_stream, lines.pending),
                                   lowlevel.create_initialization_options())
        except* ConnectionError:  # an answer found stdout closed: nobody is left to answer
            log.info("the client closed the server's stdout; stopping")
        finally:
            writer.close()
            with anyio.move_on_after(CLOSE_WAIT, shield=True), contextlib.suppress(Exception):
                await writer.wait_closed()  # the last answers out, unless the client stopped reading


@contextlib.contextmanager
def _claimed() -> Iterator[tuple[int, int]]:
    """Private copies of fd 0 and 1 for the wire; meanwhile fd 0 reads the null device and
    fd 1 writes to stderr. Both are put back (blocking again) afterwards."""
    sys.stdout.flush()
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
    finally:
        os.close(null)
    try:
        yield wire_in, wire_out
    finally:
        for fd, wire in ((0, wire_in), (1, wire_out)):
            with contextlib.suppress(OSError):
                os.dup2(wire, fd)
                os.set_blocking(fd, True)  # asyncio made the shared file non-blocking
            os.close(wire)


async def _open(wire_in: int, wire_out: int) -> tuple[_Lines, asyncio.StreamWriter]:
    """asyncio streams over copies of the two descriptors (closed with their transports).

    One socket on both ends (socat's EXEC, inetd) is served as one connection: a write
    pipe over a socket takes whatever arrives on it for the peer hanging up, so the
    client's next request would close the wire."""
    loop = asyncio.get_running_loop()
    reader = _Reader(limit=LINE_LIMIT)
    if _same_socket(wire_in, wire_out):
        sock = socket.socket(fileno=_private(wire_in))
        connection, protocol = await loop.create_connection(lambda: asyncio.StreamReaderProtocol(reader), sock=sock)
        writer = asyncio.StreamWriter(connection, protocol, reader, loop)
        return _Lines(reader, writer), writer
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(_private(wire_in), "rb", buffering=0))
    outgoing, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), os.fdopen(_private(wire_out), "wb", buffering=0))
    writer = asyncio.StreamWriter(outgoing, protocol, None, loop)
    return _Lines(reader, writer), writer


def _private(fd: int) -> int:
    """A copy of ``fd`` above the standard three, closed in child processes."""
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)


def _same_socket(wire_in: int, wire_out: int) -> bool:
    """Whether both ends are one socket (the client's half-close then ends its requests
    while the answers still go out)."""
    got_in, got_out = os.fstat(wire_in), os.fstat(wire_out)
    return stat.S_ISSOCK(got_in.st_mode) and os.path.samestat(got_in, got_out)


class _Lines:
    """What the SDK's reader iterates: the lines of stdin as text (invalid UTF-8 replaced,
    as the SDK's own transport reads them).

    No line is read while ``MOST_PENDING`` requests wait for their answers, nor while the
    answers due wait for the client to read them (past the write buffer's high mark):
    the client's pipe fills and its writes wait, as with any pipe, rather than the
    server taking in every request and holding every answer in memory."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self.pending = _Pending()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        while True:
            await self._room()
            line = await self._reader.readline()
            if not line:
                return
            yield line.decode("utf-8", errors="replace")

    async def _room(self) -> None:
        """Return once there is room for another request (the unread lines wait in the
        client's pipe meanwhile: ``_Reader`` reads only a little ahead)."""
        while not self.pending.room():
            await self.pending.fewer()
        with contextlib.suppress(ConnectionError):  # the client hung up: the SDK's writer says so
            await self._writer.drain()


class _Reader(asyncio.StreamReader):
    """asyncio's reader, reading at most about ``READ_AHEAD`` bytes past the lines taken
    (its own bound is twice the line limit, 4 GiB): a client sending faster than the
    server takes its requests fills its own pipe. Longer lines are still read whole."""

    _buffer: bytearray  # asyncio's own, which typeshed leaves out
    _paused: bool
    _transport: asyncio.ReadTransport | None

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        super().feed_data(data)
        if not self._paused and self._transport is not None and len(self._buffer) >= READ_AHEAD:
            self._paused = True
            self._transport.pause_reading()

    def _maybe_resume_transport(self) -> None:
        if self._paused and self._transport is not None and len(self._buffer) < READ_AHEAD:
            self._paused = False
            self._transport.resume_reading()


class _Pending:
    """The ids of the requests taken in and not answered yet; a request the client
    cancels is done too (the SDK never answers it)."""

    def __init__(self) -> None:
        self._ids: collections.Counter[RequestId] = collections.Counter()
        self._done = asyncio.Event()

    def room(self) -> bool:
        return self._ids.total() < MOST_PENDING

    async def fewer(self) -> None:
        """Return once a request is done."""
        self._done.clear()
        await self._done.wait()

    def took(self, item: SessionMessage | Exception) -> None:
        message = item.message if isinstance(item, SessionMessage) else None
        if isinstance(message, JSONRPCRequest):
            self._ids[message.id] += 1
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            self._finish(cancelled_request_id_from_params(message.params))

    def answered(self, item: SessionMessage) -> None:
        if isinstance(item.message, (JSONRPCResponse, JSONRPCError)):
            self._finish(item.message.id)

    def _finish(self, request_id: RequestId | None) -> None:
        if request_id is not None and self._ids[request_id] > 0:
            self._ids[request_id] -= 1
            if not self._ids[request_id]:
                del self._ids[request_id]
            self._done.set()


class _Taken:
    """The server's read stream, each request noted in ``pending`` as it is taken."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], pending: _Pending) -> None:
        self._inner = inner
        self._pending = pending

    @property
    def last_context(self) -> contextvars.Context | None:
        """The sender's context, which the SDK runs each handler in."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        item = await self._inner.receive()
        self._pending.took(item)
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _Taken:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()


class _Answered:
    """The server's write stream, each answer noted in ``pending`` as it goes out."""

    def __init__(self, inner: WriteStream[SessionMessage], pending: _Pending) -> None:
        self._inner = inner
        self._pending = pending

    async def send(self, item: SessionMessage, /) -> None:
        await self._inner.send(item)
        self._pending.answered(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()


class _Out:
    """What the SDK's writer writes to: each answer goes out whole, as UTF-8."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()
