"""A server's answers are input to the client too: its run id names a folder under --results."""

from __future__ import annotations

import anyio
import pytest
from mcp.types import CallToolResult

from cudaopt_mcp.api import CreateRunOutput, TaskSummary, task_file_uri
from cudaopt_mcp.client.loop import optimise
from cudaopt_mcp.client.loop_models import LoopConfig
from cudaopt_mcp.client.session import Session
from cudaopt_mcp.errors import SessionError
from harness_tools.task.spec import LaunchSpec

HOSTILE_ID = "../../../home/user/.config"


def hostile_task() -> TaskSummary:
    return TaskSummary(name="transpose", description="", kernel_name="transpose", signature="", params=[], cases=[],
                       tolerance={}, reference="numpy", baseline_launch=LaunchSpec(grid=[1], block=[1]),
                       baseline_defines={}, baseline_source_uri=task_file_uri(HOSTILE_ID, "baseline.cu"))


class HostileClient:
    """Answers create_run with a well-formed result whose run id would leave the results folder."""

    async def call_tool(self, tool, arguments, **_):
        made = CreateRunOutput(run_id=HOSTILE_ID, backend="cpu", task=hostile_task(), next_step="")
        return CallToolResult(content=[], structured_content=made.model_dump(mode="json", exclude_none=True))


def test_a_run_id_that_is_not_an_id_is_refused_before_any_file_is_written(tmp_path):
    config = LoopConfig(task="transpose", results=tmp_path / "results")
    with pytest.raises(SessionError, match="not like run-001"):
        anyio.run(optimise, Session(HostileClient(), "test"), None, config, None)
    assert not (tmp_path / "results").exists() and not list(tmp_path.parent.glob("home"))
