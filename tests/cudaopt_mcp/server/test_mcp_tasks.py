"""Long calls as MCP tasks (the Tasks extension of MCP 2026-07-28), over stdio with a requester written from
the extension's specification: a task handle at once, polling to the same result the direct call gives,
tasks/cancel that kills the spinning kernel, and the ordinary answer for clients that did not ask."""

from __future__ import annotations

import sys
import time

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from tests.cudaopt_mcp.server.tasks_requester import TASKS, GetTask, TaskIdParams, TasksRequester, TaskState, cancel_task
from tests.cudaopt_mcp.server.test_mcp_cancellation import SPINNING_TRANSPOSE
from tests.cudaopt_mcp.server.test_mcp_transports import stdio


def test_an_evaluation_becomes_a_task_whose_result_is_the_direct_answer(tmp_path):
    requester = TasksRequester()

    async def main():
        async with stdio(tmp_path / "results", extensions=[requester]) as c:
            assert c.protocol_version == "2026-07-28"
            assert TASKS in (c.server_capabilities.extensions or {})
            run_id = (await c.call_tool("create_run", {"task": "transpose"})).structured_content["run_id"]
            assert not requester.created  # create_run is quick: never a task
            out = await c.call_tool("evaluate", {"run_id": run_id})
            assert out.structured_content["correct"] and out.structured_content["candidate_id"] == "c0001"
            created = requester.created[0]
            assert created.status == "working" and created.task_id.startswith("task-") and created.ttl_ms > 0
            assert requester.polls[-1].status == "completed" and requester.polls[-1].result_type == "complete"
            assert any(block.type == "resource_link" for block in out.content)  # the tool's own answer, links and all
            wrong = await c.call_tool("evaluate", {"run_id": run_id, "source": SPINNING_TRANSPOSE.replace(
                "while (watched[0] == watched[0]) { }", ""), "timeout_s": 30})
            assert wrong.is_error and requester.polls[-1].status == "completed"  # an error result still completes
            with pytest.raises(MCPError) as unknown:
                await c.session.send_request(GetTask(params=TaskIdParams(task_id="task-9999-nothere")), TaskState)
            assert unknown.value.error.code == -32602 and "unknown task" in unknown.value.error.message

    anyio.run(main)


def test_tasks_cancel_kills_the_spinning_kernel_within_a_second(tmp_path):
    marks: dict[str, float] = {}

    async def cancel_once_running(created, ctx):
        marks["created"] = time.monotonic()
        await anyio.sleep(2.0)  # compiled and spinning by now
        marks["cancel"] = time.monotonic()
        await cancel_task(ctx.session, created.task_id)

    requester = TasksRequester(poll_s=0.05)

    async def main():
        async with stdio(tmp_path / "results", extensions=[requester]) as c:
            run_id = (await c.call_tool("create_run", {"task": "transpose"})).structured_content["run_id"]
            await c.call_tool("evaluate", {"run_id": run_id})
            started = time.monotonic()
            await c.call_tool("evaluate", {"run_id": run_id, "candidate_id": "c0001"})
            idle_s = time.monotonic() - started
            requester.on_created = cancel_once_running  # this call only
            spun = await c.call_tool("evaluate", {"run_id": run_id, "source": SPINNING_TRANSPOSE, "timeout_s": 120})
            requester.on_created = None
            ended_s = time.monotonic() - marks["cancel"]
            assert spun.structured_content == {"task": "cancelled"} and requester.polls[-1].status == "cancelled"
            assert ended_s < 1.0, ended_s
            nxt = await c.call_tool("evaluate", {"run_id": run_id, "candidate_id": "c0001"})
            after_s = time.monotonic() - marks["cancel"]
            assert nxt.structured_content["correct"] and after_s - idle_s < 1.0 + ended_s, (after_s, idle_s)
            print(f"tasks/cancel: cancelled {ended_s:.3f} s after the cancel; the next evaluate answered "
                  f"{after_s:.3f} s after it (an idle one takes {idle_s:.3f} s)", file=sys.stderr)
            status = {r["candidate_id"]: r["status"] for r in
                      (await c.call_tool("get_run", {"run_id": run_id})).structured_content["run"]["recent"]}
            assert status["c0002"] == "cancelled", status

    anyio.run(main)


@pytest.mark.parametrize("mode", ["no extension", "legacy"])
def test_clients_that_did_not_ask_get_the_ordinary_answer(tmp_path, mode):
    client = {"mode": "legacy", "extensions": [TasksRequester()]} if mode == "legacy" else {}

    async def main():
        async with stdio(tmp_path / "results", **client) as c:
            run_id = (await c.call_tool("create_run", {"task": "transpose"})).structured_content["run_id"]
            out = await c.call_tool("evaluate", {"run_id": run_id})
            assert out.structured_content["correct"]
            if client:
                assert not client["extensions"][0].created

    anyio.run(main)
