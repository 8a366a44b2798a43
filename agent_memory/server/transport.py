"""``agent-memory serve``: stdio (the default) or streamable HTTP behind a bearer token.

Authentication is a small ASGI check in front of the SDK's app, not the SDK's
``TokenVerifier``: that one needs ``AuthSettings(issuer_url=…)`` and then advertises
OAuth metadata for an authorization server that does not exist, which sends clients
into a login flow that cannot succeed. A static bearer token is what the clients' config
files can carry (an ``Authorization`` header). Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio

from ..errors import InvalidInput
from ..vault import Vault
from .app import build_server

log = logging.getLogger("agent_memory.server")

MIN_TOKEN_CHARS = 16
MCP_PATH = "/mcp"
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


def build_http_app(vault: Vault, *, host: str = "127.0.0.1", token: str | None = None) -> Any:
    """The streamable-HTTP ASGI app (endpoint ``/mcp``), behind the bearer check when
    there is a token. ``host`` picks the SDK's DNS-rebinding policy: on loopback only
    loopback Host/Origin headers pass. One app serves one run (the SDK's session
    manager starts once)."""
    app = build_server(vault, keep_in_sync=True).streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    return BearerAuth(app, token) if token else app


def run(
    vault_path: str | os.PathLike[str],
    *,
    http: bool = False,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    token_file: str | os.PathLike[str] | None = None,
) -> None:
    """Serve the vault until stdin closes (stdio) or until interrupted (HTTP).

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
    _log_to_stderr()
    vault = _open(Path(vault_path))
    try:
        if http:
            _serve_http(vault, host, port, secret)
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


def _serve_http(vault: Vault, host: str, port: int, token: str | None) -> None:
    import uvicorn

    app = build_http_app(vault, host=host, token=token)
    shown = f"[{host}]" if ":" in host else host
    log.info(
        "serving %s on http://%s:%d%s (%s)", vault.root, shown, port, MCP_PATH,
        "bearer token required" if token else "no token: loopback only",
    )
    # uvicorn shuts down cleanly on SIGINT/SIGTERM, then re-raises the signal to the
    # handler it found; finding these, a stop is a clean exit (status 0, no traceback).
    for stop_signal in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop_signal, lambda *_: log.info("stopped"))
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")).run()
