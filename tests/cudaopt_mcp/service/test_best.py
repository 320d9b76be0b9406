"""The run's best moves only beyond the noise, confirmed head-to-head (service.best), on the cpu backend."""

from __future__ import annotations

import json

import pytest

from cudaopt_mcp.service import evaluations, run_creation
from cudaopt_mcp.service.arguments import CandidateArgs, TimingArgs
from cudaopt_mcp.service.best import BASELINE_ROUND_MS, MIN_BASELINE_REPS, ROUNDS, baseline_round_plan, round_plan
from cudaopt_mcp.service.state import ServerConfig, ServerState
from harness_tools.run.timing import MIN_BUDGET_REPS, TimingPlan

FAST = {"BLOCK": 256, "ITEMS": 2, "GRID_THREADS": 65536, "CS": 0}  # ~10x the baseline's speed on a CPU
TIMING = TimingArgs(timeout_s=300)


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    s = ServerState.open(ServerConfig(results_dir=tmp_path_factory.mktemp("results"), backend="cpu"))
    yield s
    s.close()


def _evaluate(state, run_id, **kwargs):
    return evaluations.execute_step(state, "evaluate", run_id, timing=TIMING, **kwargs)


def test_clones_of_the_best_never_become_best_and_a_real_gain_does_head_to_head(state):
    run_id = run_creation.create_run(state, "reduce_sum", None, None, None).run_id
    base = _evaluate(state, run_id)
    assert base.new_best and base.best_decision == "the first scored correct candidate"
    assert base.score_ci_ms and base.score_ci_ms[0] <= base.score_ms <= base.score_ci_ms[1]

    clones = [_evaluate(state, run_id, candidate=CandidateArgs(defines={"CUDAOPT_CLONE": i})) for i in range(1, 5)]
    assert all(c.correct and not c.new_best for c in clones), [c.best_decision for c in clones]
    assert all(c.best_decision.startswith("not a new best") for c in clones)

    fast = _evaluate(state, run_id, candidate=CandidateArgs(tunables=FAST))
    assert fast.new_best, fast.best_decision
    assert fast.best_decision.startswith("new best") and base.candidate_id in fast.best_decision
    best = json.loads(state.store.run_file(run_id, "best.json").read_text())
    assert best["candidate_id"] == fast.candidate_id and best["confirmed_against"] == base.candidate_id
    assert best["score_ci"]["high_ms"] < best["incumbent_ci"]["low_ms"]  # beaten beyond the noise, side by side
    assert best["rounds"] == best["rounds_won"] == 3  # and in every round (the order reversing each round)
    assert best["reps"] <= ROUNDS * round_plan(sure_plan(state)).reps  # the launches actually pooled
    assert best["score_ci"]["high_ms"] < best["incumbent_ci"]["low_ms"] * 0.95  # by more than cpu's 5 % floor
    assert best["baseline_score_ms"] is None or best["baseline_score_ms"] == best["incumbent_score_ms"]
    assert fast.speedup_vs_baseline == pytest.approx(best["incumbent_score_ms"] / best["score_ms"], rel=1e-3)
    assert fast.best_score_ms == best["score_ms"]  # the head-to-head's score, as recorded, not the offer's own
    assert all(c.best_score_ms == base.best_score_ms == base.score_ms for c in clones)

    again = _evaluate(state, run_id, candidate_id=fast.candidate_id)
    assert not again.new_best and again.agrees_with_best is not None
    assert again.best_decision.startswith("re-measured the best")

    slow = _evaluate(state, run_id, candidate_id=base.candidate_id)
    assert not slow.new_best and "slower than" in slow.best_decision
    history = state.store.run_dir(run_id).joinpath("history.jsonl").read_text().splitlines()
    crowned = [json.loads(line) for line in history if json.loads(line).get("event") == "best"]
    assert [c["candidate_id"] for c in crowned] == [base.candidate_id, fast.candidate_id]


def test_a_gain_far_beyond_drift_is_crowned_without_a_head_to_head(tmp_path):
    # the cuda backend's rule (a quarter), set here for the cpu backend, whose own default is always head-to-head
    sure = ServerState.open(ServerConfig(results_dir=tmp_path / "results", backend="cpu", sure_gain=0.5))
    try:
        run_id = run_creation.create_run(sure, "reduce_sum", None, None, None).run_id
        base = _evaluate(sure, run_id)
        clone = _evaluate(sure, run_id, candidate=CandidateArgs(defines={"CUDAOPT_CLONE": 1}))
        assert not clone.new_best and clone.best_decision.startswith("not a new best")
        fast = _evaluate(sure, run_id, candidate=CandidateArgs(tunables=FAST))
        assert fast.new_best and "no head-to-head needed" in fast.best_decision, fast.best_decision
        best = json.loads(sure.store.run_file(run_id, "best.json").read_text())
        assert best["confirmed_against"] == base.candidate_id and "rounds" not in best
        assert best["score_ms"] == fast.score_ms  # its own evaluation's number, not a re-measurement
        assert best["score_ci"]["high_ms"] < best["incumbent_ci"]["low_ms"] * 0.5
        assert fast.speedup_vs_baseline == pytest.approx(base.score_ms / fast.score_ms, rel=1e-3)
    finally:
        sure.close()


def test_a_slow_baselines_one_head_to_head_round_is_timed_for_a_bounded_time_and_a_fast_ones_in_full():
    plan = TimingPlan(warmup=3, reps=30)
    slow = baseline_round_plan(plan, 26.0)  # matmul's naive kernel on the H100: 30 launches were 0.8 s
    assert slow.reps == MIN_BASELINE_REPS + 1 and slow.warmup == 3 and slow.reps * 26.0 <= BASELINE_ROUND_MS + 26.0
    assert baseline_round_plan(plan, 1000.0).reps == MIN_BASELINE_REPS  # never fewer than that, however slow
    assert baseline_round_plan(plan, 0.044) == plan  # a fast one keeps the plan
    assert baseline_round_plan(plan, None) == plan and baseline_round_plan(plan, 0.0) == plan  # no figure: in full
    assert baseline_round_plan(TimingPlan(warmup=1, reps=4), 26.0).reps == 4  # never more than the plan


def sure_plan(state) -> TimingPlan:
    return state.timing_plan(None, None, state.config.search_budget_ms)


def test_a_head_to_head_round_times_a_third_of_the_plan_so_the_rounds_pool_about_one_evaluation():
    fast = round_plan(TimingPlan(warmup=10, reps=100, budget_ms=50.0))
    assert (fast.reps, fast.warmup) == (34, 10) and fast.budget_ms == pytest.approx(50.0 / ROUNDS)
    assert ROUNDS * fast.reps >= 100  # pooled, at least the plan's launches
    assert round_plan(TimingPlan(reps=20)).reps == MIN_BUDGET_REPS  # never fewer launches a round than the floor
    assert round_plan(TimingPlan(reps=6)).reps == 6  # nor more than the plan
    assert round_plan(TimingPlan(reps=100)).budget_ms is None  # a plan without a budget gets none
