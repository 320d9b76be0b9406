"""The cpu backend starts the next kernel's worker ahead, after a timed case, and never beside one (real workers)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness_tools import EvaluationConfig, TimingPlan, create_backend, evaluate, resolve_task
from harness_tools.task.candidate import tuned

FIRST = {"BLOCK": 256, "ITEMS": 2, "GRID_THREADS": 65536, "CS": 0}
SECOND = {"BLOCK": 128, "ITEMS": 4, "GRID_THREADS": 65536, "CS": 0}


def our_children() -> set[int]:
    """This process's cpu workers (jailed or not: the command line names the executor); not its compilers."""
    pids: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                if b"CpuExecutor" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    pids.add(int(pid))
            except OSError:
                pass  # ended meanwhile
    return pids


def new_child(besides: set[int], within_s: float) -> int | None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        fresh = our_children() - besides
        if fresh:
            return fresh.pop()
        time.sleep(0.02)
    return None


@pytest.fixture
def backend():
    b = create_backend("cpu")
    yield b
    b.close()


def test_after_a_timed_case_the_next_kernel_runs_on_a_worker_started_ahead(backend):
    task = resolve_task("reduce_sum")
    timed = EvaluationConfig(seed=1, roles=["performance"], timing=TimingPlan(warmup=1, reps=3))
    assert evaluate(task, tuned(task, FIRST), backend, timed).correct
    first = backend.worker_pid
    assert new_child({first}, within_s=10.0) is not None, "no worker was started ahead after the timed case"
    time.sleep(0.2)
    ahead = our_children() - {first}  # the spare (and any other test's worker still ending)
    assert evaluate(task, tuned(task, SECOND), backend, timed).correct
    assert backend.worker_pid in ahead, "the next kernel's worker started after it was needed"
    assert first not in our_children()  # the last kernel's worker is gone


def test_untimed_cases_start_no_spare(backend):
    task = resolve_task("reduce_sum")
    checked = EvaluationConfig(seed=1, roles=["validation"], timing=None)
    assert evaluate(task, tuned(task, FIRST), backend, checked).correct
    assert new_child(our_children(), within_s=1.0) is None  # a validation case may be followed by a timed one
