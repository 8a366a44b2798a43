"""``agent-memory serve``: stdio (the default) or streamable HTTP behind a bearer token.

Authentication is a small ASGI check in front of the SDK's app, not the SDK's
``TokenVerifier``: that one needs ``AuthSettings(issuer_url=…)`` and then advertises
OAuth metadata for an authorization server that does not exist, which sends clients
into a login flow that cannot succeed. A static bearer token is what the clients' config
files can carry (an ``Authorization`` header). Tokens are compared in constant time.

On a loopback address (always the case without a token) the SDK's transport security
accepts only loopback ``Host`` and ``Origin`` headers (DNS-rebinding protection), however
the address was spelled (``127.0.0.2``, ``LOCALHOST``, ``[::1]``, ``0:0:0:0:0:0:0:1``):
the SDK turns it on by itself only for the exact strings ``127.0.0.1``, ``localhost`` and
``::1``, so the settings are always given explicitly here.

Sessions: the SDK's session manager refuses a new session with 503 while
``max_sessions`` are open (it evicts nothing to make room) and ends a session once it has
had no request in flight (no request being served, no open GET stream) for
``session_idle_timeout`` seconds. A connected client holds its GET stream open, so only
abandoned sessions expire; a flood of ``initialize`` calls clears that long after it stops.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import math
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio

from ..errors import InvalidInput
from ..vault.vault import Vault
from .app import build_server

log = logging.getLogger("agent_memory.server")

MIN_TOKEN_CHARS = 16
MCP_PATH = "/mcp"
DEFAULT_MAX_SESSIONS = 100
"""Open HTTP sessions at most (the SDK's own default is 10,000, about 470 MB of them)."""
DEFAULT_SESSION_IDLE_TIMEOUT = 300.0
"""Seconds a session may have no request in flight before it ends (the SDK's: 30 minutes)."""
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
Scope = dict[str, Any]


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and localhost: addresses only this machine can reach."""
    name = host.strip().strip("[]")
    if name.casefold() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def bind_address(host: str) -> str:
    """The address as uvicorn binds it: no brackets, IPs in their canonical form
    (``[::1]`` and ``0:0:0:0:0:0:0:1`` -> ``::1``), ``localhost`` in lower case."""
    name = host.strip().strip("[]")
    if name.casefold() == "localhost":
        return "localhost"
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


def loopback_security(host: str) -> Any:
    """The SDK's Host/Origin guard for a server bound to loopback address ``host``: the
    ``Host`` header must name a loopback address (the bound one as given or canonical,
    127.0.0.1, localhost or [::1]; any port), and an ``Origin``, when sent, must be a page
    on one of those names. A page on evil.example whose name was rebound to 127.0.0.1
    gets 421 (Host) or 403 (Origin), before any session exists."""
    from mcp.server.transport_security import TransportSecuritySettings

    names: list[str] = []
    for spelling in (host.strip().strip("[]").casefold(), bind_address(host), *LOOPBACK_NAMES):
        name = f"[{spelling}]" if ":" in spelling and not spelling.startswith("[") else spelling
        if name not in names:
            names.append(name)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[h for name in names for h in (name, f"{name}:*")],
        allowed_origins=[f"{scheme}://{name}{port}" for name in names for scheme in ("http", "https") for port in ("", ":*")],
    )


def check_session_limits(max_sessions: int, session_idle_timeout: float) -> None:
    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
        raise InvalidInput(f"--max-sessions must be a whole number of at least 1; got {max_sessions!r}.")
    if not (isinstance(session_idle_timeout, (int, float)) and math.isfinite(session_idle_timeout)
            and session_idle_timeout > 0):
        raise InvalidInput(f"--session-idle-timeout must be a number of seconds above 0; got {session_idle_timeout!r}.")


def read_token(token: str | None, token_file: str | os.PathLike[str] | None) -> str | None:
    """The bearer token from ``--token``/``AGENT_MEMORY_TOKEN`` or ``--token-file``."""
    token = token.strip() if token else None
    if token_file:
        if token:
            raise InvalidInput("Give the token one way: --token (or AGENT_MEMORY_TOKEN) or --token-file, not both.")
        try:
            token = Path(token_file).expanduser().read_text(encoding="utf-8").strip()
        except (OSError, UnicodeError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise InvalidInput(f"Cannot read the token file {token_file}: {reason}.") from exc
        if not token:
            raise InvalidInput(f"The token file {token_file} is empty; put the bearer token in it.")
    if token and (len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token)):
        raise InvalidInput(
            f"The bearer token must be at least {MIN_TOKEN_CHARS} characters without spaces; make one with "
            "`python -c \"import secrets; print(secrets.token_urlsafe(32))\"`."
        )
    return token or None


class BearerAuth:
    """Pure ASGI: every HTTP request needs ``Authorization: Bearer <token>``, else 401
    and the app never sees it. Lifespan events pass through (the SDK's session
    manager starts on them)."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._token = token.encode("utf-8")

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and not self._authorized(scope):
            await send({
                "type": "http.response.start",
                "status": 401,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"www-authenticate", b"Bearer")],
            })
            await send({
                "type": "http.response.body",
                "body": b"Missing or wrong bearer token: send the header 'Authorization: Bearer <token>'.\n",
            })
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        header = next((value for key, value in scope.get("headers", []) if key == b"authorization"), b"")
        scheme, _, credentials = header.partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self._token)


def build_http_app(
    vault: Vault,
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT,
) -> Any:
    """The streamable-HTTP ASGI app (endpoint ``/mcp``), behind the bearer check when
    there is a token. On a loopback ``host`` only loopback Host/Origin headers pass
    (:func:`loopback_security`); elsewhere a token is required and is the guard. One app
    serves one run (the SDK's session manager starts once)."""
    from mcp.server.transport_security import TransportSecuritySettings

    if is_loopback(host):
        security = loopback_security(host)
    elif token:
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    else:
        raise InvalidInput(f"Refusing to serve on {host} without a token.")
    check_session_limits(max_sessions, session_idle_timeout)
    app = build_server(vault, keep_in_sync=True).streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=bind_address(host),
        transport_security=security,
        max_sessions=max_sessions,
        session_idle_timeout=float(session_idle_timeout),
    )
    return BearerAuth(app, token) if token else app


def run(
    vault_path: str | os.PathLike[str],
    *,
    http: bool = False,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    token_file: str | os.PathLike[str] | None = None,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT,
    git_commit: bool = False,
) -> None:
    """Serve the vault until stdin closes (stdio) or until interrupted (HTTP).

    ``git_commit``: commit every tool write (as the ``git.commit`` setting does).

    Every refusal happens here, before the vault is opened or any socket is bound.
    """
    secret = read_token(token, token_file) if http else None
    if http:
        if not 1 <= port <= 65535:
            raise InvalidInput(f"--port must be between 1 and 65535; got {port}.")
        if not is_loopback(host) and secret is None:
            raise InvalidInput(
                f"Refusing to serve on {host} without a token: anyone who can reach it could read and change "
                "the memories. Pass --token-file PATH (or set AGENT_MEMORY_TOKEN), or use --host 127.0.0.1."
            )
        check_session_limits(max_sessions, session_idle_timeout)
    _log_to_stderr()
    vault = _open(Path(vault_path))
    if git_commit:
        vault.git_commit = True
    try:
        if http:
            _serve_http(vault, host, port, secret, max_sessions, session_idle_timeout)
        else:
            server = build_server(vault, keep_in_sync=True, guard_stdout=True)
            log.info("serving %s on stdio", vault.root)
            anyio.run(server.run_stdio_async)
    finally:
        vault.close()


def _log_to_stderr() -> None:
    """Plain one-line log records on stderr (clients keep a server's stderr as its log;
    stdout is the protocol). Set before the SDK would install its own handler."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _open(path: Path) -> Vault:
    """Open the vault without reconciling (the server does that in the background);
    create it when the folder does not exist yet, so a client's first start just works."""
    if path.expanduser().exists():
        return Vault(path, sync=False)
    vault = Vault.init(path, sync=False)
    log.warning("created a new vault at %s", vault.root)
    return vault


def _serve_http(
    vault: Vault, host: str, port: int, token: str | None, max_sessions: int, session_idle_timeout: float
) -> None:
    import uvicorn

    app = build_http_app(vault, host=host, token=token, max_sessions=max_sessions,
                         session_idle_timeout=session_idle_timeout)
    address = bind_address(host)
    shown = f"[{address}]" if ":" in address else address
    log.info(
        "serving %s on http://%s:%d%s (%s; at most %d sessions, idle ones end after %g s)",
        vault.root, shown, port, MCP_PATH,
        "bearer token required" if token else "no token: loopback only",
        max_sessions, session_idle_timeout,
    )
    # uvicorn shuts down cleanly on SIGINT/SIGTERM, then re-raises the signal to the
    # handler it found; finding these, a stop is a clean exit (status 0, no traceback).
    for stop_signal in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop_signal, lambda *_: log.info("stopped"))
    uvicorn.Server(uvicorn.Config(app, host=address, port=port, log_level="warning", lifespan="on")).run()
