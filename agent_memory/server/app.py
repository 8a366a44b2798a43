"""``build_server(vault)``: a fresh MCP server around one vault, nothing global."""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer

from .. import __version__
from ..git.commits import Committer
from ..vault.vault import Vault
from .instructions import INSTRUCTIONS
from .prompts import register_prompts
from .resources import register_resources
from .registry import register_tools

if TYPE_CHECKING:
    from ..watch.watcher import Watcher

log = logging.getLogger("agent_memory.server")


COMPAT = ("knowledge-graph", "memory-mcp", "agentmemory", "memory-vault")
"""The other servers whose tool sets ``build_server(compat=...)`` offers instead of its own."""


def build_server(vault: Vault, *, keep_in_sync: bool = False, guard_stdout: bool = False,
                 compat: str | None = None) -> MCPServer:
    """Tools, prompts and resources over ``vault``.

    ``keep_in_sync`` (what ``serve`` uses): on start, in the background, run the
    watcher, which first reconciles the index with the files and then folds in every
    change a person makes — the MCP handshake does not wait for either.
    It also runs the committer of tool writes (``gitsync.Committer``), stopped (its last
    commit made) when the server ends.
    ``guard_stdout`` (stdio only): while serving, anything printed goes to stderr, so
    stdout carries nothing but the protocol.
    ``compat``: the tools (and resources) of another memory server instead (``COMPAT``).
    """
    server: MCPServer = MCPServer(
        name="agent-memory",
        title="Agent memory",
        instructions=INSTRUCTIONS,
        version=__version__,
        lifespan=_lifespan(vault, keep_in_sync=keep_in_sync, guard_stdout=guard_stdout),
    )
    if compat in COMPAT:  # imported only when asked for: each tool set is its own module
        module = importlib.import_module(f".compat.{compat.replace('-', '_')}", __package__)
        module.register(server, vault)
        return server
    if compat:
        raise ValueError(f"no compat tool set {compat!r}; one of {', '.join(COMPAT)}")
    register_tools(server, vault)
    register_prompts(server, vault)
    register_resources(server, vault)
    return server


def _lifespan(
    vault: Vault, *, keep_in_sync: bool, guard_stdout: bool
) -> Callable[[MCPServer], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[None]:
        real_stdout = sys.stdout
        if guard_stdout:
            # stdio_server has claimed fd 1 for the wire by now; a stray print() would
            # otherwise be flushed into the protocol stream at exit.
            sys.stdout.flush()
            sys.stdout = sys.stderr
        watching: list[Watcher] = []  # the watcher, once started in the background
        # Commits tool writes when git.commit (or serve --git-commit) is on; idle otherwise.
        committer = Committer(vault).start() if keep_in_sync else None
        try:
            async with anyio.create_task_group() as tasks:
                if keep_in_sync:
                    tasks.start_soon(_start_watcher, vault, watching)
                yield None
        finally:
            with anyio.CancelScope(shield=True):
                for watcher in watching:
                    await anyio.to_thread.run_sync(watcher.stop)
                if committer is not None:  # the last writes' commit, before the vault closes
                    await anyio.to_thread.run_sync(committer.stop)
            sys.stdout = real_stdout

    return lifespan


async def _start_watcher(vault: Vault, watching: list[Watcher]) -> None:
    """Start watching off the event loop (a large vault takes a while to reconcile and
    to watch); a failure leaves the server working on the index as it is. watchdog is
    imported there too, so the handshake does not wait for it."""

    def start() -> None:
        from ..watch.watcher import Watcher

        watcher = Watcher(vault)
        watching.append(watcher)  # stopped when the server ends, even if starting failed half-way
        watcher.start()

    try:
        await anyio.to_thread.run_sync(start)
    except Exception:  # serve on without live sync, and say why
        log.exception("could not start watching the vault; changes made by hand need `agent-memory reindex`")
