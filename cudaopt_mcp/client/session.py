"""The client's MCP session: with our own server in this process, or with a running one over HTTP.

Everything the loop does goes through this session's tools, resources and prompts, exactly as any
other MCP client would: nothing here imports the server or the engine. Tool results arrive parsed into
the :mod:`cudaopt_mcp.api` models the server publishes, so a server that answers in another shape is
a :class:`SessionError` naming the tool, not a ``KeyError`` deep in the loop.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel, ValidationError

from cudaopt_mcp.errors import SessionError

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]
CALL_TIMEOUT_S = 3600.0  # our own client has no 60 s limit; the server bounds each case itself
SHOWN_ERRORS = 3  # validation problems quoted in a SessionError; the count says how many there were

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class ToolOutcome(Generic[M]):
    """A tool's result: its structured content as the tool's api model, whether it was an error result
    (a kernel that failed is one, with the evidence in ``data``), and the first line of its summary."""

    data: M
    is_error: bool
    text: str


def parse_result(tool: str, model: type[M], structured: dict[str, Any]) -> M:
    """``structured`` as ``model``; a result of another shape is the server's fault, told as such."""
    try:
        return model.model_validate(structured)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(result)'}: {e['msg']}"
                             for e in exc.errors(include_url=False)[:SHOWN_ERRORS])
        raise SessionError(f"{tool}: the server's result is not a valid {model.__name__} "
                           f"({exc.error_count()} problems): {problems}") from exc


class Session:
    def __init__(self, client: Client, where: str):
        self._client, self.where = client, where

    async def call(self, tool: str, model: type[M], /, progress: ProgressFn | None = None,
                   **arguments: Any) -> ToolOutcome[M]:
        """Call a tool whose result is ``model``. A kernel failure is an error *result* (returned); a refusal,
        or a result that is not a ``model``, is a SessionError. ``tool`` and ``model`` are positional, so no
        tool argument can collide with them."""
        args = {k: v for k, v in arguments.items() if v is not None}
        result = await self._client.call_tool(tool, args, read_timeout_seconds=CALL_TIMEOUT_S,
                                              progress_callback=progress)
        text = "\n".join(b.text for b in result.content if getattr(b, "type", "") == "text")
        if result.structured_content is None:
            raise SessionError(f"{tool}: {text.strip() or 'the server refused the call'}")
        data = parse_result(tool, model, result.structured_content)
        return ToolOutcome(data, bool(result.is_error), text.split("\n")[0])

    async def prompt(self, name: str, **arguments: str) -> str:
        result = await self._client.get_prompt(name, arguments)
        return "\n\n".join(m.content.text for m in result.messages if getattr(m.content, "type", "") == "text")

    async def resource_text(self, uri: str) -> str:
        result = await self._client.read_resource(uri)
        return "".join(getattr(c, "text", "") for c in result.contents)


@contextlib.asynccontextmanager
async def open_http_session(server_url: str) -> AsyncIterator[Session]:
    """Connect to a running server at ``server_url`` (streamable HTTP; a bearer token from $CUDAOPT_MCP_TOKEN when
    set). Without a URL, ``cudaopt optimize`` serves itself in-process (:mod:`cudaopt_mcp.cli.local_server`)."""
    token = os.environ.get("CUDAOPT_MCP_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=CALL_TIMEOUT_S))
    try:
        async with http, Client(streamable_http_client(server_url, http_client=http)) as client:
            yield Session(client, server_url)
    except (httpx2.HTTPError, OSError) as exc:
        raise SessionError(f"cannot reach the MCP server at {server_url}: {exc}") from exc
