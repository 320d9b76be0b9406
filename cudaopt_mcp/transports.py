"""Streamable HTTP for the MCP server: loopback by default, a bearer token for anything else.

- Loopback host (127.0.0.1, ::1, localhost): the SDK's DNS-rebinding protection is on (Host and Origin
  must be loopback). A token in ``$CUDAOPT_MCP_TOKEN`` is optional and enforced when set.
- Any other host: ``$CUDAOPT_MCP_TOKEN`` must be set (at least 16 characters) or the server refuses to
  start; every request must carry ``Authorization: Bearer <token>`` (compared in constant time).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import sys

from mcp.server import MCPServer

from harness_tools.errors import HarnessError

from .state import ServerConfig

log = logging.getLogger("cudaopt.mcp")

TOKEN_ENV = "CUDAOPT_MCP_TOKEN"
MIN_TOKEN_CHARS = 16


class ServeError(HarnessError):
    """The server cannot start as configured; the message says what to change."""


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def http_token(host: str) -> str | None:
    """The bearer token to require, or None on loopback without one; raises ServeError when one is missing."""
    token = os.environ.get(TOKEN_ENV) or None
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ServeError(f"${TOKEN_ENV} is shorter than {MIN_TOKEN_CHARS} characters; use a long random token, e.g. "
                         "python -c 'import secrets; print(secrets.token_urlsafe(32))'")
    if token is None and not is_loopback(host):
        raise ServeError(f"refusing to serve HTTP on non-loopback host {host!r} without a bearer token: set "
                         f"${TOKEN_ENV} (clients then send 'Authorization: Bearer <token>'), or bind 127.0.0.1")
    return token


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


def http_app(server: MCPServer, config: ServerConfig):
    """The ASGI app serving ``/mcp`` (checks the token rules first, so a bad config fails before binding)."""
    token = http_token(config.host)
    app = server.streamable_http_app(host=config.host)  # loopback hosts get DNS-rebinding protection
    return BearerAuth(app, token) if token else app


def serve_http(server: MCPServer, config: ServerConfig) -> None:
    import uvicorn

    app = http_app(server, config)
    where = f"http://{config.host}:{config.port}/mcp"
    print(f"cudaopt-mcp: serving streamable HTTP at {where}"
          f"{' (bearer token required)' if isinstance(app, BearerAuth) else ''}", file=sys.stderr, flush=True)
    uvicorn.run(app, host=config.host, port=config.port, log_level="warning")
