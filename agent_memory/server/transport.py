"""``agent-memory serve``: stdio (the default) or streamable HTTP behind a bearer token.

Authentication is a small ASGI check in front of the SDK's app, not the SDK's
``TokenVerifier``: that one needs ``AuthSettings(issuer_url=…)`` and then advertises
OAuth metadata for an authorization server that does not exist, which sends clients
into a login flow that cannot succeed. A static bearer token is what the clients' config
files can carry (an ``Authorization`` header). Tokens are compared in constant time.

On a loopback address (always the case without a token) the SDK's transport security
accepts only loopback ``Host`` headers (DNS-rebinding protection), however the address
was spelled (``127.0.0.2``, ``LOCALHOST``, ``[::1]``, ``0:0:0:0:0:0:0:1``):
the SDK turns it on by itself only for the exact strings ``127.0.0.1``, ``localhost`` and
``::1``, so the settings are always given explicitly here.

An ``Origin`` header, when sent, must name this server itself: ``http``, one of its
names (on loopback: the bound address, 127.0.0.1, localhost or [::1]; elsewhere: the
``--host`` given or the ``Host`` the request was sent to) and the port the request
arrived on. ``--allow-origin`` adds pages (such as the Inspector's UI). The check is
:class:`OriginGuard`, in front of everything; it takes the header off once checked, so the
SDK's own Origin list (loopback pages on any port) never decides.

Sessions (:mod:`.sessions`) and connections (:mod:`.connections`) are bounded so that no
flood locks a client out and no socket is held forever.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import math
import os
import re
import signal
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from ..errors import InvalidInput
from ..vault.vault import Vault
from .app import build_server
from .connection_limits import (  # not .connections: uvicorn's protocol and h11 are for --http alone
    DEFAULT_KEEP_ALIVE,
    DEFAULT_REQUEST_TIMEOUT,
    ConnectionLimits,
    accept_batch,
    default_max_connections,
)
from .stdio import serve_stdio

log = logging.getLogger("agent_memory.server")

MIN_TOKEN_CHARS = 16
MCP_PATH = "/mcp"
DEFAULT_MAX_SESSIONS = 100
"""Open HTTP sessions at most (the SDK's own default is 10,000, about 470 MB of them)."""
DEFAULT_SESSION_IDLE_TIMEOUT = 300.0
"""Seconds a session may go without sending a request before it ends (the SDK's: 30 minutes)."""
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


def check_listen(address: str, port: int) -> None:
    """Refuse, in one line that says what to do, an address this machine cannot listen
    on: a port another program holds, a privileged port, a host name that does not
    resolve here. Asked before uvicorn binds, which would log a traceback and exit 3.
    (A program that takes the port in the instant between is still told by uvicorn.)"""
    import errno
    import socket

    try:
        places = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise InvalidInput(f"Cannot serve on {address}: {exc.strerror}. Give --host an address of this machine, "
                           "such as 127.0.0.1.") from None
    for family, kind, proto, _name, where in places:
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
                probe.bind(where)
        except OSError as exc:
            if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                continue  # an address family this machine lacks (IPv6 off): uvicorn skips it too
            shown = f"[{where[0]}]:{port}" if family == socket.AF_INET6 else f"{where[0]}:{port}"
            if exc.errno == errno.EADDRINUSE:
                raise InvalidInput(f"Cannot serve on {shown}: another program (perhaps another agent-memory serve) "
                                   "is listening there. Stop it, or choose another --port (0: any free one).") from None
            raise InvalidInput(f"Cannot serve on {shown}: {exc.strerror}. Choose another --port (1024 or more needs "
                               "no privileges; 0: any free one) or --host.") from None


def loopback_names(host: str) -> list[str]:
    """The names a server bound to loopback address ``host`` answers to, as ``Host``
    headers spell them: the address as given and canonical, 127.0.0.1, localhost, [::1]."""
    names: list[str] = []
    for spelling in (host.strip().strip("[]").casefold(), bind_address(host), *LOOPBACK_NAMES):
        name = f"[{spelling}]" if ":" in spelling and not spelling.startswith("[") else spelling
        if name not in names:
            names.append(name)
    return names


def loopback_security(host: str) -> Any:
    """The SDK's Host guard for a server bound to loopback address ``host``: the ``Host``
    header must name a loopback address (:func:`loopback_names`, any port). A page on
    evil.example whose name was rebound to 127.0.0.1 gets 421, before any session exists.
    No ``Origin`` is on the SDK's list: :class:`OriginGuard` checks it and takes it off,
    so one that got past it anyway would be refused here."""
    from mcp.server.transport_security import TransportSecuritySettings

    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[h for name in loopback_names(host) for h in (name, f"{name}:*")],
        allowed_origins=[],
    )


@dataclass(frozen=True)
class HttpLimits:
    """How much the HTTP server lets clients hold: sessions, connections, time."""

    max_sessions: int = DEFAULT_MAX_SESSIONS
    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    keep_alive: int = DEFAULT_KEEP_ALIVE
    max_connections: int | None = None
    """None: :func:`~.connection_limits.default_max_connections`."""
    allow_origins: tuple[str, ...] = ()

    def check(self) -> None:
        """Refuse a limit that makes no sense, naming its flag."""
        for flag, value in (("--max-sessions", self.max_sessions), ("--keep-alive", self.keep_alive),
                            ("--max-connections", self.max_connections)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InvalidInput(f"{flag} must be a whole number of at least 1; got {value!r}.")
        for flag, seconds in (("--session-idle-timeout", self.session_idle_timeout),
                              ("--request-timeout", self.request_timeout)):
            if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
                raise InvalidInput(f"{flag} must be a number of seconds above 0; got {seconds!r}.")
        for origin in self.allow_origins:
            if parse_origin(origin) is None:
                raise InvalidInput(
                    f"--allow-origin must be an origin such as http://localhost:6274 (scheme, host and port, "
                    f"no path); got {origin!r}."
                )

    def connections(self, files: int | None) -> ConnectionLimits:
        """The connection limits under the open-file limit ``files`` (None: unlimited)."""
        most = self.max_connections or default_max_connections(files)
        return ConnectionLimits(self.request_timeout, self.keep_alive, most, accept_batch(files, most))


Origin = tuple[str, str, int]


def _canonical_name(name: str) -> str:
    """A host name as compared: lower case, no brackets, IPs in canonical form."""
    name = name.strip().strip("[]").casefold()
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


_ORIGIN = re.compile(r"(https?)://(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::([0-9]{1,5}))?/?", re.IGNORECASE)


def parse_origin(value: str) -> Origin | None:
    """``(scheme, host, port)`` of an ``Origin`` header or ``--allow-origin`` value, the
    port made explicit; None for anything else (``null``, a path, user info, a name with
    brackets in it, junk). Strict on purpose: a lenient URL parser reads
    ``http://[::1].evil.example`` as host ``::1``."""
    found = _ORIGIN.fullmatch(value.strip())
    if found is None:
        return None
    scheme, host, port = found.group(1).lower(), found.group(2), found.group(3)
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return None
    number = int(port) if port else (443 if scheme == "https" else 80)
    return (scheme, _canonical_name(host), number) if 0 < number < 65536 else None


def _host_header_name(value: str) -> str | None:
    """The name part of a ``Host`` header (``[::1]:8765`` -> ``::1``), None if malformed."""
    parsed = parse_origin(f"http://{value.strip()}")
    return parsed[1] if parsed else None


class OriginGuard:
    """Pure ASGI: a request whose ``Origin`` is not this server's own (``http``, one of
    ``names``, the port the request arrived on) nor one of ``extra`` gets 403 and goes no
    further. No ``Origin`` passes: SDK clients send none, only browsers do.
    ``match_host``: the request's ``Host`` name counts as one of this server's names
    (for a server bound beyond loopback, where a token is the guard against rebinding)."""

    def __init__(self, app: Any, *, names: Iterable[str], extra: Iterable[str] = (), match_host: bool = False) -> None:
        self.app = app
        self.names = frozenset(_canonical_name(name) for name in names)
        self.extra = frozenset(o for o in map(parse_origin, extra) if o is not None)
        self.match_host = match_host

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = scope.get("headers", [])
            host = next((value for key, value in headers if key == b"host"), None)
            if not self.match_host and host is not None and _host_header_name(host.decode("latin-1")) is None:
                # On loopback the SDK's "localhost:*" would take anything after the colon.
                await _refuse(send, 421, f"Host {host.decode('latin-1')[:200]!r} is not a name and a port; "
                              "send the request to http://127.0.0.1:PORT/mcp.\n")
                return
            if not self.match_host and host is not None and host != host.lower():
                # Host names are case-insensitive; the SDK's list of loopback names is lower case.
                headers = [(k, v.lower() if k == b"host" else v) for k, v in headers]
                scope = {**scope, "headers": headers}
            origin = next((value for key, value in headers if key == b"origin"), None)
            if origin is not None:
                if not self.allows(origin.decode("latin-1"), scope):
                    await _refuse_origin(send, origin.decode("latin-1"))
                    return
                # Checked here, once: the SDK's own list (loopback pages on any port) must not decide.
                scope = {**scope, "headers": [(k, v) for k, v in headers if k != b"origin"]}
        await self.app(scope, receive, send)

    def allows(self, origin: str, scope: Scope) -> bool:
        parsed = parse_origin(origin)
        if parsed is None:
            return False
        if parsed in self.extra:
            return True
        scheme, name, port = parsed
        server = scope.get("server") or (None, None)
        if scheme != "http" or port != server[1]:
            return False
        if name in self.names:
            return True
        host = next((value for key, value in scope.get("headers", []) if key == b"host"), None)
        return self.match_host and host is not None and name == _host_header_name(host.decode("latin-1"))


class WholeRequests:
    """Pure ASGI, right in front of the SDK's app: a request's body is read whole before
    the app sees the request. A client that hangs up mid-body (or is cut off at the
    request deadline) then ends there, quietly; the SDK would log it as an application
    error with a traceback. Bodies are read up to ``max_body`` bytes, past which the rest
    streams on to the app (which refuses it, 413), as the SDK's own size check expects."""

    def __init__(self, app: Any, max_body: int) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        messages: list[dict[str, Any]] = []
        size = 0
        while not messages or (messages[-1].get("more_body", False) and size <= self.max_body):
            message = await receive()
            if message["type"] == "http.disconnect":
                log.debug("client hung up before its request was in")
                return
            messages.append(message)
            size += len(message.get("body", b""))

        async def replay() -> dict[str, Any]:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


async def _refuse_origin(send: Any, origin: str) -> None:
    await _refuse(send, 403, f"Origin {origin[:200]!r} is not this server's: a page elsewhere may not call it. "
                  "To let a page in, start the server with --allow-origin ORIGIN.\n")


async def _refuse(send: Any, status: int, text: str) -> None:
    body = text.encode("utf-8", "replace")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def read_token(token: str | None, token_file: str | os.PathLike[str] | None) -> str | None:
    """The bearer token from ``--token``/``AGENT_MEMORY_TOKEN`` or ``--token-file``."""
    token = token.strip() if token else None
    if token_file:
        if token:
            raise InvalidInput("Give the token one way: --token (or AGENT_MEMORY_TOKEN) or --token-file, not both.")
        try:
            path = Path(token_file).expanduser()
            with open(path, "rb") as handle:  # checked and read through one descriptor: no swap in between
                _check_private(path, os.fstat(handle.fileno()))
                token = handle.read(64 * 1024).decode("utf-8").strip()
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


def _check_private(path: Path, status: os.stat_result) -> None:
    """Refuse a token file another account owns or can read or write (the file a link
    points to counts): loopback is open to every account on the machine, and the token
    is then the only guard, as ssh refuses a private key others can read."""
    if os.name != "posix":
        return
    if status.st_uid != os.geteuid():
        raise InvalidInput(f"The token file {path} belongs to another user; use a file of your own "
                           "(made as in `python -c \"import secrets; print(secrets.token_urlsafe(32))\" > FILE`, "
                           "then `chmod 600 FILE`).")
    if status.st_mode & 0o077:
        raise InvalidInput(f"The token file {path} can be read or changed by other users (mode "
                           f"{status.st_mode & 0o777:o}); run `chmod 600 {path}` and start again.")


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


def build_http_app(vault: Vault, *, host: str = "127.0.0.1", token: str | None = None,
                   limits: HttpLimits = HttpLimits(), compat: str | None = None) -> Any:
    """The streamable-HTTP ASGI app (endpoint ``/mcp``): the Origin check, then the bearer
    check when there is a token, then the session table, then the SDK's app (whose own
    session cap and idle timeout are off: :mod:`.sessions` owns both). On a loopback
    ``host`` only loopback ``Host`` headers pass (:func:`loopback_security`); elsewhere a
    token is required and is the guard. One app serves one run (the SDK's session manager
    starts once)."""
    from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, TransportSecuritySettings

    from .sessions import SessionGuard, SessionTable

    loopback = is_loopback(host)
    if loopback:
        security = loopback_security(host)
    elif token:
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    else:
        raise InvalidInput(f"Refusing to serve on {host} without a token.")
    limits.check()
    address = bind_address(host)
    app: Any = build_server(vault, keep_in_sync=True, compat=compat).streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=address,
        transport_security=security,
        max_sessions=None,
        session_idle_timeout=None,
    )
    app = WholeRequests(app, DEFAULT_MAX_REQUEST_BODY_SIZE)
    table = SessionTable(limits.max_sessions, limits.max_sessions, float(limits.session_idle_timeout))
    app = SessionGuard(app, table, host_header=f"[{address}]" if ":" in address else address, path=MCP_PATH)
    if token:
        app = BearerAuth(app, token)
    names = loopback_names(host) if loopback else [host]
    return OriginGuard(app, names=names, extra=limits.allow_origins, match_host=not loopback)


def run(
    vault_path: str | os.PathLike[str],
    *,
    http: bool = False,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    token_file: str | os.PathLike[str] | None = None,
    limits: HttpLimits = HttpLimits(),
    git_commit: bool = False,
    compat: str | None = None,
) -> None:
    """Serve the vault until stdin closes (stdio) or until interrupted (HTTP).

    ``port`` 0 takes any free port (the log names it). ``git_commit``: commit every tool
    write (as the ``git.commit`` setting does). ``compat``: another memory server's tool
    set (``app.COMPAT``; else the ``server.compat`` setting's).

    Every refusal happens here, before the vault is opened or any socket is bound.
    """
    secret = read_token(token, token_file) if http else None
    if http:
        if not 0 <= port <= 65535:
            raise InvalidInput(f"--port must be between 0 (any free port) and 65535; got {port}.")
        if not is_loopback(host) and secret is None:
            raise InvalidInput(
                f"Refusing to serve on {host} without a token: anyone who can reach it could read and change "
                "the memories. Pass --token-file PATH (or set AGENT_MEMORY_TOKEN), or use --host 127.0.0.1."
            )
        limits.check()
        check_listen(bind_address(host), port)
    _log_to_stderr()
    vault = _open(Path(vault_path))
    if git_commit:
        vault.git_commit = True
    try:
        compat = compat or vault.settings.server_compat or None
        if compat == "knowledge-graph":
            from .compat.knowledge_graph import import_on_start

            said = import_on_start(vault, os.environ.get("MEMORY_FILE_PATH"))
            if said:
                log.info("%s", said)
        if http:
            _serve_http(vault, host, port, secret, limits, compat)
        else:
            server = build_server(vault, keep_in_sync=True, guard_stdout=True, compat=compat)
            anyio.run(serve_stdio, server, f"serving {vault.root} on stdio")
    finally:
        vault.close()


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _log_to_stderr() -> None:
    """Plain one-line log records on stderr (clients keep a server's stderr as its log;
    stdout is the protocol): the library's and the server's through a handler of their
    own on the ``agent_memory`` logger, whatever else configured the root logger; the
    SDK's and uvicorn's through the root logger's, set before the SDK would install its
    own."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format=LOG_FORMAT)
    ours = logging.getLogger("agent_memory")
    if not any(isinstance(h, _StderrHandler) for h in ours.handlers):
        handler = _StderrHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        ours.addHandler(handler)
    ours.setLevel(logging.INFO)
    ours.propagate = False  # each record once: not again through the root logger's handler


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]  # generic in typeshed only
    """The serving process's handler for the library's records (found again, not added twice)."""


def _open(path: Path) -> Vault:
    """Open the vault without reconciling (the server does that in the background);
    create it when the folder does not exist yet, so a client's first start just works."""
    if path.expanduser().exists():
        return Vault(path, sync=False)
    vault = Vault.init(path, sync=False)
    log.warning("created a new vault at %s", vault.root)
    return vault


def _serve_http(vault: Vault, host: str, port: int, token: str | None, limits: HttpLimits,
                compat: str | None = None) -> None:
    import uvicorn

    from .connection_limits import SPARE_FILES, open_file_limit
    from .connections import uvicorn_config

    app = build_http_app(vault, host=host, token=token, limits=limits, compat=compat)
    files = open_file_limit()
    connections = limits.connections(files)
    if files is not None and connections.max_connections + SPARE_FILES > files:
        log.warning("--max-connections %d is more than this process's open-file limit (%d) allows: connections "
                    "past about %d will fail; raise the limit (ulimit -n) or lower --max-connections",
                    connections.max_connections, files, files - SPARE_FILES)
    address = bind_address(host)
    if port == 0 and address == "localhost":
        address = "127.0.0.1"  # one socket: both families would each get a different free port
    shown = f"[{address}]" if ":" in address else address

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:  # the port bound, which --port 0 leaves to the system
                bound = self.servers[0].sockets[0].getsockname()[1]
                log.info(
                    "serving %s on http://%s:%d%s (%s; at most %d sessions, idle ones end after %g s; "
                    "at most %d connections, requests in within %g s, keep-alive %d s)",
                    vault.root, shown, bound, MCP_PATH,
                    "bearer token required" if token else "no token: loopback only",
                    limits.max_sessions, limits.session_idle_timeout, connections.max_connections,
                    connections.request_timeout, connections.keep_alive,
                )

    # uvicorn shuts down cleanly on SIGINT/SIGTERM, then re-raises the signal to the
    # handler it found; finding these, a stop is a clean exit (status 0, no traceback).
    for stop_signal in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop_signal, lambda *_: log.info("stopped"))
    Server(uvicorn_config(app, address, port, connections)).run()
