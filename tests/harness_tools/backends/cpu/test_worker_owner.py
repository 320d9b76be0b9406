"""A cpu worker runs one candidate's kernels: its per-case libraries share it; another candidate gets a fresh one
(real workers, real g++)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness_tools import EvaluationConfig, baseline, create_backend, evaluate, resolve_task
from harness_tools.backends.cpu.parked_workers import KEPT
from harness_tools.run.freezing import leaves
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


def state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def worker_states(pid: int) -> set[str]:
    """The states of the worker's interpreter (the jail's leaf process under ``pid``)."""
    return {state(p) for p in leaves(pid)}


def test_another_candidate_never_runs_on_the_last_ones_worker_which_is_kept_stopped(backend):
    task = resolve_task(str(STENCIL))
    assert evaluate(task, baseline(task), backend, CHECKED).correct
    first = backend.worker_pid
    pids, first_states = [], []

    def seen(*_):
        pids.append(backend.worker_pid)
        first_states.append(worker_states(first))

    other = tuned(task, {"block_size_x": 32, "block_size_y": 4})
    assert evaluate(task, other, backend, CHECKED, on_case=seen).correct
    assert first not in pids and len(set(pids)) == 1, (first, pids)
    assert all(s == {"T"} for s in first_states), first_states  # stopped: not even a thread of its kernel runs
    mine: list[int | None] = []
    assert evaluate(task, baseline(task), backend, CHECKED, on_case=lambda *_: mine.append(backend.worker_pid)).correct
    assert set(mine) == {first}, "the baseline did not get its own worker back"
    assert worker_states(pids[0]) == {"T"}  # and the other candidate's is stopped now


def test_at_most_a_few_workers_are_kept(backend):
    task = resolve_task(str(STENCIL))
    assert evaluate(task, baseline(task), backend, CHECKED).correct
    first = backend.worker_pid
    sides = (32, 64, 128, 256)
    assert len(sides) > KEPT
    for x in sides[:KEPT + 1]:  # more candidates than are kept: the first one's worker is dropped
        assert evaluate(task, tuned(task, {"block_size_x": x, "block_size_y": 1}), backend, CHECKED).correct
    assert gone(first), "a fifth candidate's evaluation still kept the first one's worker"
