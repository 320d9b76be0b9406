"""Evaluations made ahead (``cudaopt optimize``'s baseline and its hidden check, on a GPU while the MCP side starts):
the step whose evaluation has the same key takes the result, outputs and all; a step that differs in anything that
decides the result (the seed, the plan) evaluates for itself; a key asked for before it was begun is never begun; a
result that is not clean is never handed over (cpu backend, real evaluations and files)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from cudaopt_mcp.service import evaluations, run_creation
from cudaopt_mcp.service.arguments import TimingArgs
from cudaopt_mcp.service.evaluations_ahead import EvaluationsAhead, Planned, evaluation_key
from cudaopt_mcp.service.hidden import read_private_record
from cudaopt_mcp.service.pooled import evaluate_pooled
from cudaopt_mcp.service.seed_ahead import draw_ahead, evaluate_ahead
from cudaopt_mcp.service.state import ServerConfig, ServerState
from harness_tools import EvaluationConfig, resolve_task
from harness_tools.task import candidate as candidates
from tests.cudaopt_mcp.service.test_hidden import write_task

TASK = "reduce_sum"
SEED = 4242


@pytest.fixture
def state(tmp_path):
    s = ServerState.open(ServerConfig(results_dir=tmp_path / "results", backend="cpu"))
    yield s
    s.close()


def _made_ahead(state: ServerState, seed: int = SEED) -> None:
    task = resolve_task(TASK)
    draw_ahead(state, task, seed)  # as optimize's start does: the cases, then the hidden check's seed
    state.ahead.arm()
    evaluate_ahead(state, task, seed, None, None)


def test_the_baseline_and_its_hidden_check_are_taken_as_made_ahead_with_their_outputs(state, caplog):
    _made_ahead(state)
    run_id = run_creation.create_run(state, TASK, None, None, None).run_id
    with caplog.at_level(logging.DEBUG, logger="cudaopt.mcp"):
        out = evaluations.execute_step(state, "evaluate", run_id, note="baseline", timing=TimingArgs(seed=SEED))
    taken = [r.getMessage() for r in caplog.records if "taken as made ahead" in r.getMessage()]
    assert taken == ["the baseline's first evaluation: taken as made ahead", "the baseline's hidden check: taken as made ahead"]
    assert out.correct and out.new_best and out.seed == SEED and out.best_decision == "the first scored correct candidate"
    folder = state.store.candidate_dir(run_id, out.candidate_id)
    kept = json.loads((folder / "outputs" / "kept.json").read_text())  # the baseline keeps its passed outputs
    assert kept and set(kept.values()) == {"passed"}
    stored = json.loads((folder / "evaluation.json").read_text())
    for case in stored["cases"]:
        for path in case["run"]["outputs"].values():
            assert (folder / path).is_file() and (folder / path).stat().st_size > 0
    hidden = read_private_record(state, run_id, out.candidate_id)
    assert hidden["verdict"]["passed"] and hidden["evaluation"]["correct"]


def test_a_task_with_no_performance_case_is_taken_too(state, tmp_path, caplog):
    """Its baseline has no score, and is clean all the same: the step takes it rather than evaluating twice."""
    folder = write_task(tmp_path / "scale")
    task = resolve_task(folder)
    draw_ahead(state, task, SEED)
    state.ahead.arm()
    evaluate_ahead(state, task, SEED, None, None)
    run_id = run_creation.create_run(state, str(folder), None, None, None).run_id
    with caplog.at_level(logging.DEBUG, logger="cudaopt.mcp"):
        out = evaluations.execute_step(state, "evaluate", run_id, note="baseline", timing=TimingArgs(seed=SEED))
    assert out.correct and out.score_ms is None
    assert [r for r in caplog.records if r.getMessage() == "the baseline's first evaluation: taken as made ahead"]


def test_a_step_that_differs_evaluates_for_itself_and_the_result_made_ahead_is_not_used(state, caplog):
    _made_ahead(state)
    run_id = run_creation.create_run(state, TASK, None, None, None).run_id
    with caplog.at_level(logging.DEBUG, logger="cudaopt.mcp"):
        other_plan = evaluations.execute_step(state, "evaluate", run_id, note="baseline",
                                              timing=TimingArgs(seed=SEED, reps=7))
    assert other_plan.correct and all(c.reps == 7 for c in other_plan.cases if c.role == "performance")
    assert not [r for r in caplog.records if "first evaluation: taken" in r.getMessage()]


def test_a_key_asked_for_first_is_never_begun_and_an_unclean_result_is_never_handed_over(state):
    task = resolve_task(TASK)
    baseline = candidates.baseline(task)
    config = EvaluationConfig(seed=1, roles=["validation"], timing=None)
    memo = EvaluationsAhead()
    assert memo.take(task, baseline, config) is None  # not armed: nothing is looked up
    memo.arm()
    assert memo.take(task, baseline, config) is None  # asked for before it was begun: the step evaluates it
    ran = []
    late = Planned(evaluation_key(task, baseline, config), "late", lambda folder: ran.append(folder), bool)
    assert memo.make(late) == 0 and ran == []  # never begun

    other = config.model_copy(update={"seed": 2})
    wrong = evaluate_pooled(state, task, baseline, other.model_copy(update={"timeout_s": 1e-3}))
    assert not wrong.correct  # no time for anything: a real, failed evaluation
    third = config.model_copy(update={"seed": 3})
    failed = Planned(evaluation_key(task, baseline, other), "failed", lambda folder: wrong, lambda r: r.correct)
    after = Planned(evaluation_key(task, baseline, third), "after it", lambda folder: ran.append(folder), bool)
    assert memo.make(failed, lambda: after) == 0 and ran == []  # what follows a result not kept is never run
    assert memo.take(task, baseline, other) is None  # dropped: the step evaluates for itself
    assert memo.take(task, baseline, third) is None
    memo.disarm()


def test_outputs_that_cannot_be_moved_leave_the_step_to_evaluate_for_itself(state, tmp_path):
    task = resolve_task(TASK)
    baseline = candidates.baseline(task)
    config = EvaluationConfig(seed=5, roles=["validation"], timing=None)
    memo = EvaluationsAhead()
    memo.arm()
    made: list[str] = []

    def evaluate(folder: str):
        made.append(folder)
        return evaluate_pooled(state, task, baseline, config.model_copy(update={"outputs_dir": folder}))

    assert memo.make(Planned(evaluation_key(task, baseline, config), "blocked", evaluate, lambda r: r.correct)) == 1
    case = task.spec.cases_for(["validation"], "cpu")[0].name
    step_dir = tmp_path / "step"
    (step_dir / case).mkdir(parents=True)
    (step_dir / case / "not-empty").write_text("x")  # a case folder the move cannot replace
    assert memo.take(task, baseline, config.model_copy(update={"outputs_dir": str(step_dir)})) is None
    assert not any(Path(f).exists() for f in made)  # what was made ahead is gone, not left half-moved
    memo.disarm()
