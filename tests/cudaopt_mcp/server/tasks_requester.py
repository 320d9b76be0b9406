"""A Tasks-extension requester for the tests, written from the extension's specification (not from our server):
it declares ``io.modelcontextprotocol/tasks``, claims ``resultType: "task"`` results and polls ``tasks/get``
until the task ends, handing back the final ``CallToolResult`` (or raising its JSON-RPC error)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import anyio
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, ErrorData, RequestParams
from mcp_types import Request, Result
from pydantic import ConfigDict

TASKS = "io.modelcontextprotocol/tasks"
TERMINAL = {"completed", "failed", "cancelled"}


class TaskIdParams(RequestParams):
    task_id: str


class GetTask(Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param: ClassVar[str | None] = "taskId"


class CancelTask(Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param: ClassVar[str | None] = "taskId"


class TaskState(Result):
    """A ``Task`` / ``DetailedTask`` as the wire carries it (fields beyond these are kept)."""

    model_config = ConfigDict(extra="allow")
    result_type: str | None = None
    task_id: str
    status: Literal["working", "input_required", "completed", "cancelled", "failed"]
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class CreatedTask(TaskState):
    result_type: Literal["task"] = "task"


class TasksRequester(ClientExtension):
    """Every task it was handed (``created``) and every state it polled (``polls``), for the tests to inspect."""

    identifier = TASKS

    def __init__(self, poll_s: float = 0.1, on_created=None):
        self.poll_s = poll_s
        self.on_created = on_created
        self.created: list[CreatedTask] = []
        self.polls: list[TaskState] = []

    def claims(self):
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self._resolve)]

    async def _resolve(self, created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
        self.created.append(created)
        if self.on_created is not None:
            await self.on_created(created, ctx)
        while True:
            state = await ctx.session.send_request(GetTask(params=TaskIdParams(task_id=created.task_id)), TaskState)
            self.polls.append(state)
            if state.status in TERMINAL:
                break
            await anyio.sleep(self.poll_s)
        if state.status == "failed":
            raise MCPError.from_error_data(ErrorData.model_validate(state.error))
        if state.status == "cancelled":
            return CallToolResult(content=[], is_error=True, structured_content={"task": "cancelled"})
        return CallToolResult.model_validate(state.result)


async def cancel_task(session, task_id: str) -> Any:
    return await session.send_request(CancelTask(params=TaskIdParams(task_id=task_id)), Result)
