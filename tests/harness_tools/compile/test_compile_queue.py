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


def _ahead() -> Candidate:
    """A compile made ahead: a few tenths of a second, far longer than a finished compile's caller takes to return
    (so the order in which compiles finish is the order in which they got the child, even on a loaded host)."""
    return Candidate(source=slow_source(7, time.monotonic_ns()), kernel_name="k", launch=LAUNCH)


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
        compiles.start(f"ahead{i}", _ahead(), urgent=False)
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
        compiles.start(f"ahead{i}", _ahead(), urgent=False)
    wanted = _small()
    compiles.start("wanted ahead", wanted, urgent=False)  # queued behind three others made ahead
    time.sleep(0.3)
    compiles.start("wanted now", wanted, urgent=True)  # an evaluation comes for it: it waits on that one, hurried
    compiles.join()
    after = [name for name in compiles.finished if name != "slow"]
    assert set(after[:2]) == {"wanted ahead", "wanted now"}, compiles.finished
    assert compiles.results["wanted now"].cached and not compiles.results["wanted ahead"].cached


def test_an_asker_waits_for_the_compile_under_way_no_longer_than_its_own_timeout(monkeypatch):
    monkeypatch.setenv("CUDAOPT_COMPILE_WORKERS", "2")
    service = _CompileService()
    monkeypatch.setattr(program, "SERVICE", service)
    try:
        slow = _slow()
        compiles = Compiles()
        compiles.start("ahead", slow, urgent=False)
        time.sleep(0.3)
        started = time.monotonic()
        hurried = compile_candidate(slow, "sm_90", timeout_s=0.5)  # an evaluation with little time left
        assert time.monotonic() - started < 5.0
        assert not hurried.ok and "still running" in hurried.log
        compiles.join()  # the compile made ahead finishes, and is kept
        assert not compiles.results["ahead"].cached and compile_candidate(slow, "sm_90").cached
    finally:
        service.close()


def test_askers_of_a_compile_that_was_stopped_take_its_failure_rather_than_run_it_again(monkeypatch):
    monkeypatch.setenv("CUDAOPT_COMPILE_WORKERS", "2")
    service = _CompileService()
    monkeypatch.setattr(program, "SERVICE", service)
    try:
        hanging = _slow()  # seconds of NVRTC: stopped at 0.5 s, as a source that hangs the compiler would be
        failures: dict[str, object] = {}
        first = threading.Thread(target=lambda: failures.setdefault("first", compile_candidate(hanging, "sm_90", timeout_s=0.5)))
        first.start()
        time.sleep(0.3)
        started = time.monotonic()
        second = compile_candidate(hanging, "sm_90", timeout_s=60.0)
        waited = time.monotonic() - started
        first.join(timeout=60)
        assert not failures["first"].ok and "did not finish within 0.5 s" in failures["first"].log
        assert not second.ok and second.log == failures["first"].log
        assert waited < 3.0  # the first's stop, not a second compile of seconds
    finally:
        service.close()
