"""A cpu worker runs one candidate's kernels: its per-case libraries share it; another candidate gets a fresh one
(real workers, real g++)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness_tools import EvaluationConfig, baseline, create_backend, evaluate, resolve_task
from harness_tools.check.hidden_shapes import hidden_shapes, hidden_task
from harness_tools.task.candidate import tuned

STENCIL = Path(__file__).resolve().parents[4] / "examples" / "stencil"
CHECKED = EvaluationConfig(seed=3, roles=["validation"], timing=None)


@pytest.fixture
def backend():
    b = create_backend("cpu")
    yield b
    b.close()


def gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.05)
    return not Path(f"/proc/{pid}").exists()


def test_one_candidates_cases_built_per_size_run_on_one_worker(backend):
    task = resolve_task(str(STENCIL))
    cases = task.spec.cases_for(["validation"], "cpu")
    assert task.spec.size_defines and len(cases) >= 5  # a library per case
    pids: list[int | None] = []
    result = evaluate(task, baseline(task), backend, CHECKED, on_case=lambda *_: pids.append(backend.worker_pid))
    assert result.correct, result.failure
    assert len(pids) == len(cases) and len(set(pids)) == 1, pids
    again = evaluate(task, baseline(task), backend, CHECKED)  # the same candidate again: still its worker
    assert again.correct and backend.worker_pid == pids[0]


def test_another_candidate_never_runs_on_the_last_ones_worker(backend):
    task = resolve_task(str(STENCIL))
    assert evaluate(task, baseline(task), backend, CHECKED).correct
    first = backend.worker_pid
    pids: list[int | None] = []
    other = tuned(task, {"block_size_x": 32, "block_size_y": 4})
    assert evaluate(task, other, backend, CHECKED, on_case=lambda *_: pids.append(backend.worker_pid)).correct
    assert first not in pids and len(set(pids)) == 1, (first, pids)
    assert gone(first), "the last candidate's worker was not closed"


def test_a_candidates_hidden_cases_never_share_a_worker_with_its_visible_ones(backend):
    """Hidden shapes are never shown: code left in a worker by the hidden check could carry them into the outputs of
    the candidate's next visible evaluation, so the hidden cases (a task of their own) get a worker of their own."""
    task = resolve_task(str(STENCIL))
    shapes = [s for s in hidden_shapes(task.spec, "cpu")][:2]
    assert shapes
    assert evaluate(task, baseline(task), backend, CHECKED).correct
    visible = backend.worker_pid
    hidden: list[int | None] = []
    result = evaluate(hidden_task(task, shapes), baseline(task), backend, CHECKED,
                      on_case=lambda *_: hidden.append(backend.worker_pid))
    assert result.correct, result.failure
    assert visible not in hidden and len(set(hidden)) == 1, (visible, hidden)
    assert evaluate(task, baseline(task), backend, CHECKED).correct
    assert backend.worker_pid not in hidden  # and the visible cases after it do not run where the hidden ones did
