"""The table of tools (``tools.TOOLS``) on an MCP server.

Each tool function takes more than its arguments: the vault, and for some the versions
its connection saw (``seen``) or a ``Progress`` for long work. What the SDK registers is
a small async wrapper that fills those in, runs the function on a worker thread and
turns the library's errors into ``ToolError``, in mcp 2.3 the only exception whose text
reaches the model (the library's text says what to do next). The wrapper shows the SDK
the function's own parameters, so the schemas are the functions' signatures.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

from ..errors import AgentMemoryError
from ..vault.vault import Vault
from .arguments import ToolArguments, refuse_bad_arguments
from .progress_notifications import run_reporting
from .seen import SeenVersions
from .tools import SERVER_FILLED, TOOLS, Hints


def register_tools(server: MCPServer, vault: Vault) -> None:
    """Add every tool of the table over ``vault``, and the check of what callers send."""
    seen = SeenVersions()
    checks: dict[str, ToolArguments] = {}
    for tool in TOOLS:
        call = bound(tool.function, vault, seen)
        server.add_tool(call, name=tool.name, title=tool.title, description=one_paragraph(tool.function.__doc__),
                        annotations=tool_annotations(tool.hints))
        checks[tool.name] = ToolArguments(tool.name, call)
    server.middleware.append(refuse_bad_arguments(checks))


def tool_annotations(hints: Hints) -> ToolAnnotations:
    """All four hints, always explicit: unset ones default to destructive and open-world."""
    return ToolAnnotations(read_only_hint=hints.read_only, destructive_hint=hints.destructive,
                           idempotent_hint=hints.idempotent, open_world_hint=False)


def one_paragraph(doc: str | None) -> str:
    """A docstring as the tool description: the wrapped lines joined into one."""
    return " ".join(inspect.cleandoc(doc or "").split())


def bound(function: Callable[..., Any], vault: Vault, seen: SeenVersions) -> Callable[..., Any]:
    """``function`` as the SDK calls it: with its callers' arguments and the request's
    ``Context``; the vault, the connection's ``Seen`` and a ``Progress`` filled in."""
    signature = inspect.signature(function, eval_str=True)
    takes = set(SERVER_FILLED).intersection(signature.parameters)
    sent = [p for name, p in signature.parameters.items() if name not in SERVER_FILLED]

    async def call(ctx: Context, **arguments: Any) -> Any:
        filled: dict[str, Any] = {"vault": vault, **arguments}
        if "seen" in takes:
            filled["seen"] = seen.of(ctx.session.client_params)
        try:
            if "progress" in takes:
                return await run_reporting(lambda progress: function(**filled, progress=progress), ctx.report_progress)
            return await anyio.to_thread.run_sync(functools.partial(function, **filled))
        except AgentMemoryError as exc:
            raise ToolError(str(exc)) from exc

    context = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
    call.__signature__ = signature.replace(parameters=[*sent, context])  # type: ignore[attr-defined]
    call.__annotations__ = {**{p.name: p.annotation for p in sent}, "ctx": Context,
                            "return": signature.return_annotation}
    call.__name__ = call.__qualname__ = function.__name__
    call.__doc__ = function.__doc__
    return call

