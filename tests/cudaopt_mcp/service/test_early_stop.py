"""A candidate clearly slower than the run's best stops being timed early (service.early_stop), on the cpu backend."""

from __future__ import annotations

import pytest

from cudaopt_mcp.service import evaluations, run_creation
from cudaopt_mcp.service.arguments import CandidateArgs, TimingArgs
from cudaopt_mcp.service.state import ServerConfig, ServerState

FAST = {"BLOCK": 256, "ITEMS": 2, "GRID_THREADS": 65536, "CS": 0}  # ~10x the baseline's speed on a CPU
TIMING = TimingArgs(timeout_s=300, reps=20)


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    # no time budget here: these tests are about the bound (test_search_budget.py is about the budget)
    s = ServerState.open(ServerConfig(results_dir=tmp_path_factory.mktemp("results"), backend="cpu",
                                      search_budget_ms=None))
    yield s
    s.close()


def _perf(out):
    return [c for c in out.cases if c.role == "performance"]


def test_a_candidate_far_slower_than_the_best_is_timed_in_part_and_says_so(state):
    run_id = run_creation.create_run(state, "reduce_sum", None, None, None).run_id
    fast = evaluations.execute_step(state, "evaluate", run_id, candidate=CandidateArgs(tunables=FAST), timing=TIMING)
    assert fast.new_best, fast.best_decision
    assert all(c.reps == 20 and c.timing_stopped is None for c in _perf(fast))  # nothing to stop against yet

    slow = evaluations.execute_step(state, "evaluate", run_id, timing=TIMING)  # the baseline
    assert slow.correct and not slow.new_best and "slower than" in slow.best_decision
    (case,) = _perf(slow)
    assert (case.reps, case.planned_reps) == (5, 20) and case.timing_stopped.startswith("timed 5 of 20 launches")
    (best_case,) = _perf(fast)
    assert case.median_ci_ms[0] > best_case.median_ms * 1.1  # it was clearly slower, beyond the margin
    assert slow.score_ms == pytest.approx(case.median_ms)

    timed = evaluations.execute_step(state, "time", run_id, candidate_id=slow.candidate_id, timing=TIMING)
    assert all(c.reps == 20 and c.timing_stopped is None for c in _perf(timed))  # time always times in full
    again = evaluations.execute_step(state, "evaluate", run_id, candidate_id=fast.candidate_id, timing=TIMING)
    assert all(c.reps == 20 for c in _perf(again))  # the best, re-measured, is never stopped


def test_with_early_stops_turned_off_every_candidate_is_timed_in_full(tmp_path):
    full = ServerState.open(ServerConfig(results_dir=tmp_path / "results", backend="cpu", stop_margin=None,
                                         search_budget_ms=None))
    try:
        run_id = run_creation.create_run(full, "reduce_sum", None, None, None).run_id
        evaluations.execute_step(full, "evaluate", run_id, candidate=CandidateArgs(tunables=FAST), timing=TIMING)
        slow = evaluations.execute_step(full, "evaluate", run_id, timing=TIMING)
        assert slow.correct and all(c.reps == 20 and c.timing_stopped is None for c in _perf(slow))
    finally:
        full.close()
