"""The cpu backend starts the next kernel's worker ahead, after a timed case, and never beside one (real workers)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import ClassVar

import pytest

from harness_tools import EvaluationConfig, TimingPlan, baseline, create_backend, evaluate, resolve_task
from harness_tools.backends.cpu import spare_worker
from harness_tools.backends.cpu.backend import EXECUTOR, worker_jail
from harness_tools.backends.cpu.spare_worker import SpareWorker
from harness_tools.run.worker import Worker
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


TWO_TIMED = {
    "name": "scale_twice", "description": "y = 3 x, timed at two sizes", "kernel_name": "scale",
    "params": [
        {"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n"], "role": "in"},
        {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["n"], "role": "out"},
        {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"},
    ],
    "sizes": ["n"],
    "cases": [{"name": "val", "role": "validation", "sizes": {"n": 1000}},
              {"name": "perf_a", "role": "performance", "sizes": {"n": 1 << 16}},
              {"name": "perf_b", "role": "performance", "sizes": {"n": 1 << 17}}],
    "reference": {"kind": "numpy", "file": "reference.py", "function": "reference"},
    "tolerance": {"float32": {"atol": 1e-6, "rtol": 1e-6}},
    "baseline": {"source": "baseline.cu", "launch": {"grid": ["ceil_div(n, 256)"], "block": [256]}},
}
SCALE = """extern "C" __global__ void scale(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 3.0f * x[i];
}
"""


def test_a_spare_still_starting_is_stopped_before_the_next_timed_case_on_the_same_kernel(backend, tmp_path):
    (tmp_path / "task.json").write_text(json.dumps(TWO_TIMED))
    (tmp_path / "baseline.cu").write_text(SCALE)
    (tmp_path / "reference.py").write_text("def reference(inputs, sizes):\n    return {'y': 3.0 * inputs['x']}\n")
    task = resolve_task(str(tmp_path))
    config = EvaluationConfig(seed=1, timing=TimingPlan(warmup=1, reps=3))
    for _ in range(2):  # the second evaluation's kernel is the same library: no new worker for it
        result = evaluate(task, baseline(task), backend, config)
        assert result.correct and [c.timing is not None for c in result.cases] == [False, True, True]
    # the spare started after perf_a was stopped before perf_b was timed; the one started after perf_b is up
    assert new_child({backend.worker_pid}, within_s=10.0) is not None


class Recorded(Worker):
    """The spares a test starts, kept to see which of them ever came up (``info`` is set once ready)."""

    made: ClassVar[list[Worker]] = []

    def __init__(self, *args):
        super().__init__(*args)
        Recorded.made.append(self)


def test_a_spare_stopped_right_after_its_start_never_comes_up(monkeypatch):
    monkeypatch.setattr(spare_worker, "Worker", Recorded)
    Recorded.made.clear()
    template = Worker(EXECUTOR, 0, worker_jail())
    before = our_children()
    for _ in range(3):
        spare = SpareWorker(template)
        spare.start()
        # a timed case right after the last one: the spare's jail is not spawned yet (or is being spawned). Its start
        # fails there; it was waited for until up before (an interpreter's whole start, 0.9 s on a 2-core host)
        spare.quiet()
        assert our_children() - before == set()
        assert spare.take() is None
        spare.close()
    assert [w.info for w in Recorded.made] == [None, None, None]


def test_a_spare_that_is_not_up_in_time_is_given_up(monkeypatch):
    monkeypatch.setattr(spare_worker, "TAKE_WAIT_S", 0.5)
    spare = SpareWorker(Worker("time:sleep", 600, worker_jail()))  # its executor is time.sleep(600): never ready
    spare.start()
    began = time.monotonic()
    assert spare.take() is None  # the caller starts its own instead of waiting out the start's limit
    assert time.monotonic() - began < 10
    spare.close()


class KillThatDoesNotTake(Recorded):
    """A worker whose kill leaves its start running (as a start whose pipe outlived its process would)."""

    def interrupt(self) -> None:
        pass


def test_a_spare_whose_start_outlives_its_kill_is_not_waited_for_nor_handed_out(monkeypatch):
    monkeypatch.setattr(spare_worker, "TAKE_WAIT_S", 0.5)
    monkeypatch.setattr(spare_worker, "Worker", KillThatDoesNotTake)  # the spares it starts
    Recorded.made.clear()
    for stop in ("take", "quiet"):
        spare = SpareWorker(Worker("time:sleep", 600, worker_jail()))  # its executor is time.sleep(600)
        spare.start()
        try:
            began = time.monotonic()
            if stop == "quiet":
                spare.quiet()
            assert spare.take() is None, stop  # a start still running is no worker to run kernels on
            assert time.monotonic() - began < 5, stop
        finally:
            spare.close()
            for worker in Recorded.made:
                Worker.interrupt(worker)  # the real kill: nothing of the test outlives it
