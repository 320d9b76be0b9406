"""Streamable HTTP for the MCP server: loopback by default, a bearer token for anything else.

Which hosts count as loopback (served without a token):

- the literal IPv4 addresses of 127.0.0.0/8 in dotted-quad form (``127.0.0.2``), ``::1`` (any spelling:
  ``[::1]``, ``0:0:0:0:0:0:0:1``), IPv4-mapped loopback (``::ffff:127.0.0.1``, bound as ``127.0.0.1``);
- the name ``localhost`` in any letter case, with or without the trailing dot (bound as ``127.0.0.1``:
  the name is never handed to the resolver, so ``/etc/hosts`` cannot move it).

Nothing else does, even when it resolves to loopback (``ip6-localhost``, a host name mapped to 127.0.1.1,
``127.1``, ``0x7f000001``, ``::1%lo``): those need the token, as do ``0.0.0.0`` and ``::`` (all interfaces).

- Loopback host: DNS-rebinding protection is switched on explicitly (the SDK only switches it on for the
  exact strings ``127.0.0.1``, ``localhost`` and ``::1``). The ``Host`` header must be ``NAME:PORT`` and an
  ``Origin`` header, when sent, ``http://NAME:PORT``, for the actual port and NAME one of the host as given,
  the address bound, ``localhost``, ``127.0.0.1`` or ``[::1]``; otherwise the SDK answers 421 (Host) or 403
  (Origin). Both headers are compared case-insensitively (lower-cased before the SDK's exact match). A token
  in ``$CUDAOPT_MCP_TOKEN`` is optional and enforced when set.
- Any other host: ``$CUDAOPT_MCP_TOKEN`` must be set (at least 16 characters) or the server refuses to
  start; every request must carry ``Authorization: Bearer <token>`` (compared in constant time). No
  Host/Origin allow-list there: the names such a server is reached by (DNS names, addresses, a proxy) are not
  known in advance, and the token is the defence against DNS rebinding: a page of another origin cannot
  send it (the server answers no CORS preflight, so a browser does not even send the request).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import socket
import sys

from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from cudaopt_mcp.errors import ServeError
from cudaopt_mcp.service.state import ServerConfig

log = logging.getLogger("cudaopt.mcp")

TOKEN_ENV = "CUDAOPT_MCP_TOKEN"
MIN_TOKEN_CHARS = 16
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")  # always allowed in Host/Origin on a loopback server


def loopback_address(host: str) -> str | None:
    """The literal address to bind when ``host`` counts as loopback (see the module docstring), else None."""
    name = host.lower()
    if name in ("localhost", "localhost."):
        return "127.0.0.1"
    bracketed = name.startswith("[") and name.endswith("]")
    try:
        addr = ipaddress.ip_address(name[1:-1] if bracketed else name)
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv4Address):
        return None if bracketed or not addr.is_loopback else str(addr)
    if addr.scope_id:
        return None
    if addr.ipv4_mapped is not None:
        return str(addr.ipv4_mapped) if addr.ipv4_mapped.is_loopback else None
    return "::1" if addr == ipaddress.IPv6Address("::1") else None


def is_loopback(host: str) -> bool:
    return loopback_address(host) is not None


def http_token(host: str) -> str | None:
    """The bearer token to require, or None on loopback without one; raises ServeError when one is missing."""
    token = os.environ.get(TOKEN_ENV) or None
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ServeError(f"${TOKEN_ENV} is shorter than {MIN_TOKEN_CHARS} characters; use a long random token, e.g. "
                         "python -c 'import secrets; print(secrets.token_urlsafe(32))'")
    if token is None and not is_loopback(host):
        raise ServeError(f"refusing to serve HTTP on non-loopback host {host!r} without a bearer token: set "
                         f"${TOKEN_ENV} (clients then send 'Authorization: Bearer <token>'), or bind a loopback "
                         "address (127.0.0.1, ::1 or localhost; other names count as non-loopback)")
    return token


def _url_host(host: str) -> str:
    """``host`` as it appears in a URL or a Host header: lower-case, IPv6 literals in brackets."""
    name = host.lower()
    return f"[{name}]" if ":" in name and not name.startswith("[") else name


def _bind_host(host: str) -> str:
    """What to hand to the socket layer: the loopback literal, or the host without URL brackets."""
    return loopback_address(host) or (host[1:-1] if host.startswith("[") and host.endswith("]") else host)


def rebinding_protection(host: str, port: int) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding settings for a server on ``host``:``port``: explicit allow-lists on loopback, off elsewhere."""
    bound = loopback_address(host)
    if bound is None:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    names = list(dict.fromkeys((_url_host(host), _url_host(bound), *LOOPBACK_NAMES)))
    hosts = [f"{n}:{port}" for n in names] + (names if port == 80 else [])
    origins = [f"http://{n}:{port}" for n in names] + ([f"http://{n}" for n in names] if port == 80 else [])
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


class BearerAuth:
    """ASGI middleware: HTTP requests without the right ``Authorization: Bearer`` header get a 401."""

    def __init__(self, app, token: str):
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            given = next((v for k, v in scope.get("headers", []) if k == b"authorization"), b"")
            if not hmac.compare_digest(given, self.expected):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body",
                            "body": b'{"error": "unauthorized: send Authorization: Bearer <token>"}'})
                return
        await self.app(scope, receive, send)


class LowercaseHostOrigin:
    """ASGI middleware: lower-cases the Host and Origin headers (case-insensitive by RFC 3986) for the SDK's exact match."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            headers = [(k, v.lower() if k in (b"host", b"origin") else v) for k, v in scope.get("headers", [])]
            scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)


class NoResumption:
    """ASGI middleware: a GET with ``Last-Event-ID`` opens a fresh stream. The server keeps no event store (its
    answers ride the POST that asked), so there is nothing to replay; the SDK would send no response at all to
    such a GET (HTTP 500). The header is a MAY for servers: dropping it is the honest "no replay here"."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope.get("method") == "GET":
            headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"last-event-id"]
            scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)


def http_app(server: MCPServer, config: ServerConfig, port: int | None = None):
    """The ASGI app serving ``/mcp`` on ``port`` (default ``config.port``); checks the token rules first, so a bad
    config fails before binding."""
    token = http_token(config.host)
    security = rebinding_protection(config.host, config.port if port is None else port)
    app = server.streamable_http_app(host=_bind_host(config.host), transport_security=security)
    app.add_middleware(NoResumption)  # inside the Starlette app, which stays the object that owns the lifespan
    if security.enable_dns_rebinding_protection:
        app = LowercaseHostOrigin(app)
    return BearerAuth(app, token) if token else app


def _listen(address: str, port: int) -> socket.socket:
    """A socket bound to exactly ``address`` (a literal), so the actual port is known before the app is built."""
    sock = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {_url_host(address)}:{port}: {exc.strerror or exc}") from exc
    return sock


def serve_http(server: MCPServer, config: ServerConfig) -> None:
    import uvicorn

    http_token(config.host)  # refuse a bad configuration before binding anything
    bound = loopback_address(config.host)
    sock = _listen(bound, config.port) if bound is not None else None
    port = sock.getsockname()[1] if sock is not None else config.port
    app = http_app(server, config, port)
    where = f"http://{_url_host(config.host)}:{port}/mcp"
    via = f" (bound to {_url_host(bound)})" if bound is not None and _url_host(bound) != _url_host(config.host) else ""
    print(f"cudaopt-mcp: serving streamable HTTP at {where}{via}"
          f"{' (bearer token required)' if isinstance(app, BearerAuth) else ''}", file=sys.stderr, flush=True)
    if sock is None:  # a name or a non-loopback address: uvicorn binds every address it resolves to
        uvicorn.run(app, host=_bind_host(config.host), port=config.port, log_level="warning")
    else:
        uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
