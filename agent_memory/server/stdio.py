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
import contextlib
import logging
import os
import socket
import stat
import sys
from collections.abc import AsyncIterator, Iterator

import anyio

from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

if sys.platform != "win32":
    import fcntl

log = logging.getLogger("agent_memory.server")

LINE_LIMIT = 1 << 31
"""asyncio's readline refuses longer lines (its default is 64 KiB); the SDK reads any."""
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


async def serve_stdio(server: MCPServer) -> None:
    """``server.run_stdio_async()``, with the wire read and written on the event loop."""
    lowlevel = getattr(server, "_lowlevel_server", None)  # what run_stdio_async drives; private to the SDK
    if sys.platform == "win32" or lowlevel is None or not (_streamable(0) and _streamable(1)):
        await server.run_stdio_async()
        return
    with _claimed() as (wire_in, wire_out):
        lines, writer = await _open(wire_in, wire_out)
        try:
            async with stdio_server(stdin=lines, stdout=_Out(writer)) as (  # type: ignore[arg-type]
                read_stream, write_stream):
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
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
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    if _same_socket(wire_in, wire_out):
        sock = socket.socket(fileno=_private(wire_in))
        connection, protocol = await loop.create_connection(lambda: asyncio.StreamReaderProtocol(reader), sock=sock)
        writer = asyncio.StreamWriter(connection, protocol, reader, loop)
        return _Lines(reader, connection, writer), writer
    incoming, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                               os.fdopen(_private(wire_in), "rb", buffering=0))
    outgoing, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), os.fdopen(_private(wire_out), "wb", buffering=0))
    writer = asyncio.StreamWriter(outgoing, protocol, None, loop)
    return _Lines(reader, incoming, writer), writer


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

    No line is read while the answers already due wait for the client to read them
    (past the write buffer's high mark): the client's pipe fills and its writes wait, as
    with any pipe, rather than the server taking in every request and holding every
    answer in memory."""

    def __init__(self, reader: asyncio.StreamReader, incoming: asyncio.ReadTransport,
                 writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._incoming = incoming
        self._writer = writer

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        while True:
            await self._answers_taken()
            line = await self._reader.readline()
            if not line:
                return
            yield line.decode("utf-8", errors="replace")

    async def _answers_taken(self) -> None:
        """Return once the answers due are (mostly) out; stdin is not read meanwhile."""
        outgoing = self._writer.transport
        if outgoing.get_write_buffer_size() <= outgoing.get_write_buffer_limits()[1]:
            return
        self._incoming.pause_reading()
        try:
            with contextlib.suppress(ConnectionError):  # the client hung up: the SDK's writer says so
                await self._writer.drain()
        finally:
            self._incoming.resume_reading()


class _Out:
    """What the SDK's writer writes to: each answer goes out whole, as UTF-8."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()
