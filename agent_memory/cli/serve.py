"""serve: the MCP server on stdio or HTTP (``mcp`` is imported only when it runs)."""

from __future__ import annotations

import click

from .options import vault_option, vault_path
from .words import handle_errors


@click.command()
@vault_option  # no --json: a server prints no result
@click.option("--http", is_flag=True, help="Serve streamable HTTP instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address for --http.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535),
              help="Port for --http (0: any free one; the log names it).")
@click.option("--token", default=None, envvar="AGENT_MEMORY_TOKEN", help="Bearer token for --http.")
@click.option("--token-file", default=None, type=click.Path(dir_okay=False), help="File holding the bearer token (yours, mode 600).")
@click.option("--max-sessions", default=100, show_default=True, type=click.IntRange(min=1),
              help="Open --http sessions at most (per token too); a new one ends the session idle longest.")
@click.option("--session-idle-timeout", default=300.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds an --http session may send no request (an open event stream does not count) before "
                   "it ends.")
@click.option("--request-timeout", default=20.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds from connecting (or from a request's first byte) until the whole request is in; "
                   "else 408 and the connection closes. Also how long a client may stop reading.")
@click.option("--keep-alive", default=75, show_default=True, type=click.IntRange(min=1),
              help="Seconds an idle --http connection stays open (sent as Keep-Alive: timeout=N).")
@click.option("--max-connections", default=None, type=click.IntRange(min=1),
              help="Open --http connections at most; a new one closes the one waiting longest for a request "
                   "[default: 1000, or fewer to fit the open-file limit].")
@click.option("--allow-origin", "allow_origins", multiple=True, metavar="ORIGIN",
              help="Also accept requests from web pages on ORIGIN, e.g. http://localhost:6274 (repeatable). "
                   "Otherwise a browser's Origin must be this server's own host and port.")
@click.option("--git-commit", is_flag=True,
              help="Commit each tool write to the vault's git repository (as the git.commit setting does).")
@click.option("--compat", default=None, type=click.Choice(["knowledge-graph", "memory-mcp", "agentmemory", "memory-vault"]),
              help="Offer another memory server's tools instead of this one's, so its users change one line of "
                   "config (knowledge-graph: the MCP reference memory server; imports $MEMORY_FILE_PATH once; memory-vault: "
                   "mcp-memory-vault; agentmemory: AgentMemory; memory-mcp: memory-mcp). "
                   "Default: the server.compat setting.")
@handle_errors
def serve(http: bool = False, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
          token_file: str | None = None, max_sessions: int = 100, session_idle_timeout: float = 300.0,
          request_timeout: float = 20.0, keep_alive: int = 75, max_connections: int | None = None,
          allow_origins: tuple[str, ...] = (), git_commit: bool = False, compat: str | None = None) -> None:
    """Run the MCP server (stdio by default).

    \b
    Examples:
      agent-memory serve --dir ~/.memory
      agent-memory serve --http --token-file ~/.memory-token
      agent-memory serve --http --port 0 --allow-origin http://localhost:6274
      agent-memory serve --git-commit
      MEMORY_FILE_PATH=~/memory.jsonl agent-memory serve --compat knowledge-graph
    """
    from ..server.transport import run  # imports mcp: only here
    from ..server.transport import HttpLimits

    limits = HttpLimits(max_sessions=max_sessions, session_idle_timeout=session_idle_timeout,
                        request_timeout=request_timeout, keep_alive=keep_alive, max_connections=max_connections,
                        allow_origins=allow_origins)
    try:
        run(vault_path(), http=http, host=host, port=port, token=token, token_file=token_file, limits=limits,
            git_commit=git_commit, compat=compat)
    except KeyboardInterrupt:  # Ctrl-C where a person started it on stdio: the way it is meant to stop
        click.echo("Stopped.", err=True)
