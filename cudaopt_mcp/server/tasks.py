"""Long tool calls as MCP tasks: the Tasks extension (``io.modelcontextprotocol/tasks``, MCP 2026-07-28).

A client that declares the extension on a ``tools/call`` of ``evaluate``, ``run``, ``time``, ``profile`` or
``sanitize`` gets a task handle (``resultType: "task"``) at once instead of waiting; it polls ``tasks/get``
until the task is ``completed`` (its ``result`` is exactly the ``CallToolResult`` the direct call would have
returned, ``isError`` included), ``failed`` (a JSON-RPC error) or ``cancelled``. ``tasks/cancel`` stops the
work the way a cancelled call does: its worker processes are killed and the candidate reads as cancelled.
A client that does not declare the extension, or speaks a 2025 revision (whose wire cannot carry the
handle), gets the ordinary answer; ``start_evaluation`` / ``job`` / ``cancel_job`` remain for those hosts.

The work runs as an anyio task in the task group of the server's lifespan (for stdio the connection, for
HTTP the whole server), so it outlives the request that created it; tasks live in this process only.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timezone
from typing import Any, Literal

import anyio
from anyio.abc import TaskGroup
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS, CallToolRequestParams, RequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field

from cudaopt_mcp.server.tool_calls import task_progress

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TASK_TOOLS = frozenset({"evaluate", "run", "time", "profile", "sanitize"})  # the calls that take seconds to minutes
TTL_MS = 3_600_000  # a finished task is kept an hour after its creation, then forgotten
POLL_MS = 1000
MAX_TASKS = 1000  # finished tasks beyond this many are forgotten oldest first

Status = Literal["working", "input_required", "completed", "cancelled", "failed"]


class TaskIdParams(RequestParams):
    task_id: str = Field(description="the task's id, from the CreateTaskResult")


class TaskUpdateParams(TaskIdParams):
    input_responses: dict[str, Any] | None = None


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Task:
    def __init__(self, tool: str, number: int):
        self.id = f"task-{number:04d}-{uuid.uuid4().hex[:12]}"
        self.tool = tool
        self.created = self.updated = time.time()
        self.status: Status = "working"
        self.message = f"{tool}: queued"
        self.result: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None
        self.scope: anyio.CancelScope | None = None
        self.lock = threading.Lock()

    def progress(self, done: float, total: float, message: str) -> None:
        """The service's stage reports (from the worker thread): the status message says where the work is."""
        with self.lock:
            if self.status == "working":
                self.message, self.updated = f"{self.tool}: {message} ({done:g}/{total:g})", time.time()

    def end(self, status: Status, message: str, result: dict | None = None, error: dict | None = None) -> None:
        with self.lock:
            if self.status != "working":
                return
            self.status, self.message, self.result, self.error = status, message, result, error
            self.updated = time.time()

    def view(self) -> dict[str, Any]:
        """The wire ``Task`` (a ``DetailedTask``: with ``result`` or ``error`` once it has one)."""
        with self.lock:
            task: dict[str, Any] = {"taskId": self.id, "status": self.status, "statusMessage": self.message,
                                    "createdAt": _iso(self.created), "lastUpdatedAt": _iso(self.updated),
                                    "ttlMs": TTL_MS, "pollIntervalMs": POLL_MS}
            if self.result is not None:
                task["result"] = self.result
            if self.error is not None:
                task["error"] = self.error
            return task


class TaskTable:
    """The tasks of this server process, and the task group their work runs in (set by the lifespan)."""

    def __init__(self) -> None:
        self._tasks: dict[str, _Task] = {}
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self.group: TaskGroup | None = None
        self.on_end: Callable[[str | None], Awaitable[None]] | None = None  # told the run a task wrote, when it ends

    def new(self, tool: str) -> _Task:
        with self._lock:
            self._forget_old()
            task = _Task(tool, next(self._numbers))
            self._tasks[task.id] = task
            return task

    def get(self, task_id: str) -> _Task:
        with self._lock:
            task = self._tasks.get(task_id)
        if task is None:
            raise MCPError(INVALID_PARAMS, f"unknown task {task_id!r}: tasks live in the server process that created "
                                           f"them for {TTL_MS // 60000} minutes; the run's records keep the results")
        return task

    def _forget_old(self) -> None:
        now = time.time()
        done = [t for t in self._tasks.values() if t.status != "working"]
        expired = {t.id for t in done if (now - t.created) * 1000 > TTL_MS}
        excess = sorted((t for t in done if t.id not in expired), key=lambda t: t.created)
        expired |= {t.id for t in excess[:max(0, len(self._tasks) - len(expired) - MAX_TASKS)]}
        for task_id in expired:
            del self._tasks[task_id]


async def _work(task: _Task, call_next: Any, ctx: Any, table: TaskTable, run_id: str | None) -> None:
    """Run the tool call to its end; its progress goes to the task's status message, not to a finished request."""
    try:
        await _run(task, call_next, ctx)
    finally:
        if table.on_end is not None:
            with anyio.CancelScope(shield=True):
                await table.on_end(run_id)


async def _run(task: _Task, call_next: Any, ctx: Any) -> None:
    task_progress.set(task.progress)
    with anyio.CancelScope() as scope:
        task.scope = scope
        try:
            result = await call_next(ctx)
        except MCPError as exc:
            task.end("failed", exc.error.message, error=exc.error.model_dump(by_alias=True, mode="json",
                                                                           exclude_none=True))
            return
        except Exception as exc:  # noqa: BLE001 - a bug still ends the task visibly, as a JSON-RPC internal error
            task.end("failed", f"internal error: {type(exc).__name__}",
                     error={"code": INTERNAL_ERROR, "message": f"internal error: {type(exc).__name__}: {exc}"})
            return
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True) if isinstance(result, BaseModel) \
            else dict(result or {})
        dumped.pop("resultType", None)
        failed = dumped.get("isError")
        task.end("completed", f"{task.tool}: done{' (an error result: see result.content)' if failed else ''}",
                 result=dumped)
    if scope.cancelled_caught:
        task.end("cancelled", f"{task.tool}: cancelled with tasks/cancel")


def _client_takes_tasks(ctx: Any) -> bool:
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.extensions and TASKS_EXTENSION in capabilities.extensions)


class TasksExtension(Extension):
    identifier = TASKS_EXTENSION

    def __init__(self, table: TaskTable):
        self.table = table

    def methods(self) -> Sequence[MethodBinding]:
        versions = frozenset(MODERN_PROTOCOL_VERSIONS)
        return (MethodBinding("tasks/get", TaskIdParams, self._get, versions),
                MethodBinding("tasks/update", TaskUpdateParams, self._update, versions),
                MethodBinding("tasks/cancel", TaskIdParams, self._cancel, versions))

    async def intercept_tool_call(self, params: CallToolRequestParams, ctx: Any, call_next: Any) -> Any:
        if params.name not in TASK_TOOLS or not _client_takes_tasks(ctx) or self.table.group is None:
            return await call_next(ctx)
        task = self.table.new(params.name)
        run_id = (params.arguments or {}).get("run_id")
        self.table.group.start_soon(_work, task, call_next, ctx, self.table, run_id if isinstance(run_id, str) else None,
                                    name=task.id)
        return {"resultType": "task", **task.view()}

    async def _get(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
        return {"resultType": "complete", **self.table.get(params.task_id).view()}

    async def _update(self, ctx: Any, params: TaskUpdateParams) -> dict[str, Any]:
        self.table.get(params.task_id)  # cudaopt's tasks never ask for input: responses are ignored (the spec's SHOULD)
        return {"resultType": "complete"}

    async def _cancel(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
        task = self.table.get(params.task_id)
        if task.scope is not None:
            task.scope.cancel()  # the tool's run_blocking cancels its token: the work's processes are killed
        return {"resultType": "complete"}
