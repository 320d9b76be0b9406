"""Requests the specification says are protocol errors, answered as such (JSON-RPC -32602 with the reason).

The SDK answers an unknown tool with an ``isError`` result and an unknown prompt, or a prompt without its
required arguments, with code 0 / "Internal server error" (and a traceback on stderr). MCP 2025-11-25 names
all three invalid params (-32602). This middleware checks them against what the server has registered
before the SDK's own handling runs; everything else passes through untouched.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS


class SpecErrors:
    """``ServerMiddleware``: unknown tools and prompts, and missing prompt arguments, as -32602."""

    def __init__(self, server: MCPServer | None = None):
        self.server = server

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        params = ctx.params if isinstance(ctx.params, dict) else {}
        if self.server is not None and ctx.request_id is not None:
            if ctx.method == "tools/call":
                await self._known_tool(params.get("name"))
            elif ctx.method == "prompts/get":
                await self._known_prompt(params.get("name"), params.get("arguments") or {})
        return await call_next(ctx)

    async def _known_tool(self, name: Any) -> None:
        names = sorted(t.name for t in await self.server.list_tools())
        if name not in names:
            raise MCPError(INVALID_PARAMS, f"unknown tool {name!r}; this server's tools: {', '.join(names)}")

    async def _known_prompt(self, name: Any, arguments: Any) -> None:
        prompts = {p.name: p for p in await self.server.list_prompts()}
        prompt = prompts.get(name)
        if prompt is None:
            raise MCPError(INVALID_PARAMS, f"unknown prompt {name!r}; this server's prompts: {', '.join(sorted(prompts))}")
        given = arguments if isinstance(arguments, dict) else {}
        missing = [a.name for a in prompt.arguments or [] if a.required and given.get(a.name) in (None, "")]
        if missing:
            raise MCPError(INVALID_PARAMS, f"prompt {name!r} needs the argument(s) {', '.join(missing)}")
