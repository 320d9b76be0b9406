"""Who gets a compiler child first: a compile under way is waited for, never run twice beside itself, and an urgent
compile (an evaluation's, a hidden check's) goes before the compiles made ahead (real NVRTC, no GPU needed)."""

from __future__ import annotations

import threading
import time

import pytest

from harness_tools.compile import compile_candidate, program
from harness_tools.compile.child import _CompileService
from harness_tools.task.candidate import Candidate
from tests.harness_tools.compile.test_compile_pool import slow_source

LAUNCH = {"grid": [1], "block": [1]}


@pytest.fixture
def one_child(monkeypatch):
    """A compile service of its own with one child, so the order in which compiles get it shows."""
    monkeypatch.setenv("CUDAOPT_COMPILE_WORKERS", "1")
    service = _CompileService()
    monkeypatch.setattr(program, "SERVICE", service)
    yield service
    service.close()


def _small() -> Candidate:
    """A quick compile no other test makes (the cache would answer it)."""
    return Candidate(source=f'extern "C" __global__ void k(int* x) {{ x[0] = {time.monotonic_ns()}LL % 1000003; }}\n',
                     kernel_name="k", launch=LAUNCH)


def _slow() -> Candidate:
    return Candidate(source=slow_source(9, time.monotonic_ns()), kernel_name="k", launch=LAUNCH)


class Compiles:
    """Compiles started in threads; the order in which they finished, and their results."""

    def __init__(self):
        self.finished: list[str] = []
        self.results: dict[str, object] = {}
        self.threads: list[threading.Thread] = []

    def start(self, name: str, candidate: Candidate, urgent: bool) -> None:
        def run() -> None:
            self.results[name] = compile_candidate(candidate, "sm_90", urgent=urgent)
            self.finished.append(name)

        self.threads.append(threading.Thread(target=run, name=name))
        self.threads[-1].start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=120)
        assert all(r.ok for r in self.results.values()), {n: r.log for n, r in self.results.items()}


def test_the_same_compile_asked_twice_at_once_runs_once(monkeypatch):
    monkeypatch.setenv("CUDAOPT_COMPILE_WORKERS", "2")
    service = _CompileService()
    monkeypatch.setattr(program, "SERVICE", service)
    try:
        same = Candidate(source=slow_source(8, time.monotonic_ns()), kernel_name="k", launch=LAUNCH)
        compiles = Compiles()
        compiles.start("first", same, urgent=False)  # a compile made ahead ...
        time.sleep(0.3)
        compiles.start("second", same, urgent=True)  # ... and the evaluation that needs it before it is done
        compiles.join()
        first, second = compiles.results["first"], compiles.results["second"]
        assert (first.cached, second.cached) == (False, True)  # one NVRTC run; two children were free for two
        assert first.cubin == second.cubin and first.cubin
    finally:
        service.close()


def test_an_urgent_compile_takes_the_child_before_the_compiles_made_ahead(one_child):
    compiles = Compiles()
    compiles.start("slow", _slow(), urgent=True)  # holds the only child for seconds
    time.sleep(1.0)
    for i in range(5):
        compiles.start(f"ahead{i}", _small(), urgent=False)
    time.sleep(0.3)
    compiles.start("urgent", _small(), urgent=True)  # queued last, goes first
    compiles.join()
    after = [name for name in compiles.finished if name != "slow"]  # it returns a moment after its child is free
    assert after[0] == "urgent", compiles.finished


def test_waiting_on_a_compile_made_ahead_makes_it_urgent(one_child):
    compiles = Compiles()
    compiles.start("slow", _slow(), urgent=True)
    time.sleep(1.0)
    for i in range(5):
        compiles.start(f"ahead{i}", _small(), urgent=False)
    wanted = _small()
    compiles.start("wanted ahead", wanted, urgent=False)  # queued behind three others made ahead
    time.sleep(0.3)
    compiles.start("wanted now", wanted, urgent=True)  # an evaluation comes for it: it waits on that one, hurried
    compiles.join()
    after = [name for name in compiles.finished if name != "slow"]
    assert set(after[:2]) == {"wanted ahead", "wanted now"}, compiles.finished
    assert compiles.results["wanted now"].cached and not compiles.results["wanted ahead"].cached
