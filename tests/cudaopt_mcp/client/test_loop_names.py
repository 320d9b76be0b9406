"""A server's answers are input to the client too: its run id names a folder under --results."""

from __future__ import annotations

import anyio
import pytest

from cudaopt_mcp.client.loop import optimise
from cudaopt_mcp.client.loop_models import LoopConfig
from cudaopt_mcp.client.session import ToolOutcome
from cudaopt_mcp.errors import SessionError


class HostileServer:
    """Answers create_run with a run id that would leave the results folder."""

    where = "test"

    async def call(self, tool, progress=None, **arguments):
        return ToolOutcome({"run_id": "../../../home/user/.config", "backend": "cpu", "task": {}}, False, "")


def test_a_run_id_that_is_not_an_id_is_refused_before_any_file_is_written(tmp_path):
    config = LoopConfig(task="transpose", results=tmp_path / "results")
    with pytest.raises(SessionError, match="not like run-001"):
        anyio.run(optimise, HostileServer(), None, config, None)
    assert not (tmp_path / "results").exists() and not list(tmp_path.parent.glob("home"))
