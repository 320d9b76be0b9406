"""A search step (evaluate) times a slow kernel's case for about the server's budget, never fewer than
MIN_BUDGET_REPS launches; the best re-measured, head-to-heads' verdicts and the time step are unaffected
(cpu backend, real evaluations)."""

from __future__ import annotations

import pytest

from cudaopt_mcp.service import evaluations, run_creation
from cudaopt_mcp.service.arguments import CandidateArgs, TimingArgs
from cudaopt_mcp.service.state import ServerConfig, ServerState, search_shortcuts
from harness_tools.run.timing import MIN_BUDGET_REPS, MIN_WARMUP

FAST = {"BLOCK": 256, "ITEMS": 2, "GRID_THREADS": 65536, "CS": 0}
TIMING = TimingArgs(timeout_s=300, reps=20)
TINY_MS = 1e-3  # any kernel of reduce_sum is slower than this per launch: every search step is cut to the floor


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    s = ServerState.open(ServerConfig(results_dir=tmp_path_factory.mktemp("results"), backend="cpu", stop_margin=None,
                                      search_budget_ms=TINY_MS))
    yield s
    s.close()


def _perf(out):
    return [c for c in out.cases if c.role == "performance"]


def test_a_search_step_times_a_slow_kernel_for_the_budget_and_says_so(state):
    run_id = run_creation.create_run(state, "reduce_sum", None, None, None).run_id
    first = evaluations.execute_step(state, "evaluate", run_id, timing=TIMING)  # the baseline
    assert first.correct
    (case,) = _perf(first)
    assert (case.reps, case.planned_reps, case.timing_cut) == (MIN_BUDGET_REPS, 20, "budget")
    assert case.timing_stopped.startswith(f"timed {MIN_BUDGET_REPS} of 20 launches") and "budget" in case.timing_stopped
    stored = state.store.read_json(run_id, first.candidate_id, "evaluation.json")
    (timing,) = [c["timing"] for c in stored["cases"] if c["role"] == "performance"]
    assert (timing["n"], timing["planned_reps"], timing["budget_ms"]) == (MIN_BUDGET_REPS, 20, TINY_MS)

    timed = evaluations.execute_step(state, "time", run_id, candidate_id=first.candidate_id, timing=TIMING)
    assert all(c.reps == 20 and c.timing_cut is None for c in _perf(timed))  # time always times in full

    fast = evaluations.execute_step(state, "evaluate", run_id, candidate=CandidateArgs(tunables=FAST), timing=TIMING)
    assert fast.correct and all(c.reps == MIN_BUDGET_REPS for c in _perf(fast))
    best = state.store.best(run_id)
    again = evaluations.execute_step(state, "evaluate", run_id, candidate_id=best.candidate_id, timing=TIMING)
    assert all(c.reps == 20 and c.timing_cut is None for c in _perf(again))  # the best, re-measured, in full


def _warmups(state, run_id, out, record="evaluation.json") -> list[int]:
    stored = state.store.read_json(run_id, out.candidate_id, record)
    return [c["timing"]["warmup"] for c in stored["cases"] if c["role"] == "performance"]


def test_a_search_step_cuts_a_slow_kernels_warm_up_too_and_records_it(state):
    run_id = run_creation.create_run(state, "reduce_sum", None, None, None).run_id
    plan = TimingArgs(timeout_s=300, reps=20, warmup=MIN_WARMUP + 4)
    first = evaluations.execute_step(state, "evaluate", run_id, timing=plan)
    assert first.correct and _warmups(state, run_id, first) == [MIN_WARMUP]
    timed = evaluations.execute_step(state, "time", run_id, candidate_id=first.candidate_id, timing=plan)
    assert _warmups(state, run_id, timed, "timing.json") == [MIN_WARMUP + 4]  # no budget: the plan's warm-up


def test_a_plan_under_the_floor_and_full_timing_are_never_cut(state, tmp_path):
    run_id = run_creation.create_run(state, "reduce_sum", None, None, None).run_id
    few = evaluations.execute_step(state, "evaluate", run_id, timing=TimingArgs(timeout_s=300, reps=MIN_BUDGET_REPS - 2))
    assert all(c.reps == MIN_BUDGET_REPS - 2 and c.planned_reps is None for c in _perf(few))

    assert search_shortcuts(True) == {"stop_margin": None, "search_budget_ms": None}
    full = ServerState.open(ServerConfig(results_dir=tmp_path / "results", backend="cpu", **search_shortcuts(True)))
    try:
        run_id = run_creation.create_run(full, "reduce_sum", None, None, None).run_id
        out = evaluations.execute_step(full, "evaluate", run_id, timing=TIMING)
        assert out.correct and all(c.reps == 20 and c.timing_cut is None for c in _perf(out))
    finally:
        full.close()
