"""How a tool runs: blocking steps in a worker thread with progress relayed to the client, refusals as
``ToolError``s the model can read, and results whose structured content is a pydantic model."""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ResourceLink, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from cudaopt_mcp.service.state import ServerState
from harness_tools import HarnessError
from harness_tools.run.cancellation import CancelToken, cancellable

REFUSALS = (HarnessError, ValidationError)  # bad input, unknown ids, unusable backends: the model can act on these
# Set while a tool call runs as an MCP task (server.tasks): its progress goes to the task, not to the finished request.
task_progress: contextvars.ContextVar[Callable[[float, float, str], None] | None] = contextvars.ContextVar(
    "cudaopt_task_progress", default=None)


@contextlib.contextmanager
def refusals_as_tool_errors() -> Iterator[None]:
    """The one translation of our refusals (the :mod:`cudaopt_mcp.errors` / :mod:`harness_tools.errors` tree and
    invalid arguments) into ``ToolError``s, whose messages reach the model; any other exception is a bug, and
    the SDK keeps its text from the model."""
    try:
        yield
    except REFUSALS as exc:
        raise ToolError(str(exc)) from exc


def state_of(ctx: Context) -> ServerState:
    return ctx.request_context.lifespan_context


async def run_blocking(ctx: Context | None, fn, *args, **kwargs):
    """Run ``fn`` in a worker thread; engine and store refusals become ToolErrors the model can read.

    When the client cancels the request (``notifications/cancelled``: the SDK cancels this handler), the work's
    token is cancelled at once, which kills its worker/compiler processes (:mod:`harness_tools.run.cancellation`):
    the thread then ends within milliseconds, records the step as cancelled and frees the engine for the next call.
    """
    as_task = task_progress.get()
    relay = ProgressRelay() if ctx is not None and as_task is None else None
    if relay is not None or as_task is not None:
        kwargs["progress"] = relay or as_task
    token = CancelToken()

    def call():
        with cancellable(token):
            return fn(*args, **kwargs)

    outcome: list[Any] = []
    try:
        with refusals_as_tool_errors():
            if relay is None:
                return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
            async with anyio.create_task_group() as tg:
                tg.start_soon(relay.pump, ctx)
                try:
                    outcome.append(await anyio.to_thread.run_sync(call, abandon_on_cancel=True))
                except Exception as exc:  # noqa: BLE001 - kept aside so it is not wrapped in the task group's ExceptionGroup
                    outcome.append(exc)
                tg.cancel_scope.cancel()
            await relay.flush(ctx)
            if isinstance(outcome[0], Exception):
                raise outcome[0]
            return outcome[0]
    except anyio.get_cancelled_exc_class():
        token.cancel("cancelled by the client")
        raise


class ProgressRelay:
    """Forwards stage progress from the worker thread; between stages a heartbeat every ~2 s.

    The engine reports stages and cases; within a long stage the value creeps towards the next one and the
    message says how long the stage has run. Every value sent is above the one before (the spec's MUST),
    whatever the stages report: a creep may have gone past where the next case report lands.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stage: tuple[float, float, str] | None = None
        self._since = time.monotonic()
        self._sent: tuple[float, float, str] | None = None
        self._last_value = -math.inf

    def __call__(self, done: float, total: float, message: str) -> None:
        with self._lock:
            self._stage, self._since = (done, total, message), time.monotonic()

    async def _send(self, ctx: Context, done: float, total: float, message: str) -> None:
        value = done if done > self._last_value else self._last_value + min(1e-3, max(total - self._last_value, 0) / 100)
        if value <= self._last_value:
            return  # at the total already: nothing higher can be said
        self._last_value = value
        await ctx.report_progress(value, total, message)

    async def flush(self, ctx: Context) -> None:
        """Send the last stage (done) if the pump had no time to."""
        with self._lock:
            stage = self._stage
        if stage is not None and stage != self._sent:
            await self._send(ctx, *stage)
            self._sent = stage

    async def pump(self, ctx: Context) -> None:
        last_send = 0.0
        while True:
            await anyio.sleep(0.2)
            with self._lock:
                stage, since = self._stage, self._since
            if stage is None:
                continue
            now = time.monotonic()
            if stage != self._sent:
                await self._send(ctx, *stage)
                self._sent, last_send = stage, now
            elif now - last_send >= 2.0:
                elapsed = now - since
                creep = 0.9 * (1 - math.exp(-elapsed / 30))
                await self._send(ctx, stage[0] + creep, stage[1], f"{stage[2]} ({elapsed:.0f} s)")
                last_send = now


def tool_result(model: BaseModel, summary: str, links: list[tuple[str, str, str]] = (), is_error: bool = False,
            ) -> CallToolResult:
    structured = model.model_dump(mode="json", exclude_none=True)
    content: list[Any] = [TextContent(text=summary), TextContent(text=model.model_dump_json(exclude_none=True))]
    content += [ResourceLink(uri=uri, name=name, mime_type=mime) for uri, name, mime in links]
    return CallToolResult(content=content, structured_content=structured, is_error=is_error)


def tool(server: MCPServer, name: str | None = None, annotations: ToolAnnotations | None = None,
         title: str | None = None):
    """``server.tool`` with the docstring dedented (the model reads clean instructions), a title for people, and
    unknown arguments refused by name (a misspelled ``rep`` must not silently mean the default)."""
    def decorator(fn):
        server.add_tool(fn, name=name, title=title, description=inspect.cleandoc(fn.__doc__ or ""),
                        annotations=annotations)
        _refuse_unknown_arguments(server, name or fn.__name__)
        return fn
    return decorator


def _refuse_unknown_arguments(server: MCPServer, name: str) -> None:
    """Swap the tool's argument model for one that names unknown arguments and lists the accepted ones, and say
    so in its input schema. The SDK has no public hook for this; ``_tool_manager`` is pinned by ``mcp<3``."""
    registered = server._tool_manager.get_tool(name)
    base = registered.fn_metadata.arg_model
    accepted = sorted(field.alias or field_name for field_name, field in base.model_fields.items())

    class KnownArgumentsOnly(base):  # type: ignore[valid-type,misc]
        # built on the tool's first call, not at the server's start: a headless run calls few of the tools
        model_config = ConfigDict(**base.model_config, defer_build=True)

        @model_validator(mode="before")
        @classmethod
        def _known_only(cls, data: Any) -> Any:
            unknown = sorted(set(data) - set(accepted)) if isinstance(data, dict) else []
            if unknown:
                raise ValueError(f"unknown argument(s) {', '.join(map(repr, unknown))}; {name} accepts: "
                                 f"{', '.join(accepted) or 'no arguments'}")
            return data

    registered.fn_metadata.arg_model = KnownArgumentsOnly
    registered.parameters["additionalProperties"] = False
