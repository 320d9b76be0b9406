"""The next hidden check's cases, made ahead in a thread: a failure is reported while the server runs, and says
nothing once it closes (at the end of a command the scratch folder goes while a draw may still be under way)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from cudaopt_mcp.service.state import ServerConfig, ServerState
from harness_tools import resolve_task
from harness_tools.check.hidden_shapes import hidden_shapes

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "vector_add"
NOT_MADE = "the next hidden check's cases were not made ahead"


@pytest.fixture
def state(tmp_path):
    s = ServerState.open(ServerConfig(results_dir=tmp_path / "results", backend="cpu"))
    yield s
    s.close()


def _task_that_vanishes(tmp_path: Path):
    """A task whose reference is gone by the time its hidden cases are made (as the scratch folder goes at exit)."""
    shutil.copytree(EXAMPLE, tmp_path / "task")
    task = resolve_task(tmp_path / "task")
    (tmp_path / "task" / "reference.py").unlink()
    return task


def test_a_failed_draw_is_reported_while_the_server_runs(state, tmp_path, caplog):
    task = _task_that_vanishes(tmp_path)
    with caplog.at_level(logging.DEBUG, logger="cudaopt.mcp"):
        state.hidden_seeds.prepare(task, hidden_shapes(task.spec, "cpu"), "cpu")
    assert NOT_MADE in caplog.text


def test_a_draw_that_fails_after_the_server_closed_says_nothing(state, tmp_path, caplog):
    task = _task_that_vanishes(tmp_path)
    state.close()
    with caplog.at_level(logging.DEBUG, logger="cudaopt.mcp"):
        state.hidden_seeds.prepare(task, hidden_shapes(task.spec, "cpu"), "cpu")
    assert NOT_MADE not in caplog.text
