"""A run folder keeps the outputs someone will look at: failures (within a budget), the baseline's and the best's."""

from __future__ import annotations

import json

import pytest

from cudaopt_mcp.service import evaluations, run_creation
from cudaopt_mcp.service.arguments import CandidateArgs, TimingArgs
from cudaopt_mcp.service.state import ServerConfig, ServerState
from harness_tools.task.loading import BUNDLED_DIR

FAST = {"BLOCK": 256, "ITEMS": 2, "GRID_THREADS": 65536, "CS": 0}  # ~10x the baseline's speed on a CPU
TIMING = TimingArgs(timeout_s=300)
WRONG = (BUNDLED_DIR / "reduce_sum" / "baseline.cu").read_text().replace("atomicAdd(out, s[0])",
                                                                         "atomicAdd(out, 2.0f * s[0])")


@pytest.fixture
def state(tmp_path):
    s = ServerState.open(ServerConfig(results_dir=tmp_path / "results", backend="cpu"))
    yield s
    s.close()


def _evaluate(state, run_id, **kwargs):
    return evaluations.execute_step(state, "evaluate", run_id, timing=TIMING, **kwargs)


def _kept(state, run_id, candidate_id) -> set[str]:
    folder = state.store.candidate_dir(run_id, candidate_id) / "outputs"
    return {p.parent.name for p in folder.glob("*/*.npy")}


def _record_paths(state, run_id, candidate_id) -> list[str]:
    record = json.loads((state.store.candidate_dir(run_id, candidate_id) / "evaluation.json").read_text())
    return [path for case in record["cases"] for path in ((case.get("run") or {}).get("outputs") or {}).values()]


def test_passing_outputs_stay_with_the_baseline_and_the_best_and_failures_are_kept(state):
    run_id = run_creation.create_run(state, "reduce_sum", None, None, None).run_id
    base = _evaluate(state, run_id)
    assert base.new_best and base.outputs_kept and _kept(state, run_id, base.candidate_id) == set(base.outputs_kept)

    clone = _evaluate(state, run_id, candidate=CandidateArgs(defines={"CUDAOPT_CLONE": 1}))
    assert clone.correct and not clone.new_best
    assert clone.outputs_kept == [] and not _kept(state, run_id, clone.candidate_id)
    assert _record_paths(state, run_id, clone.candidate_id) == []  # the record names no file that is gone

    wrong = _evaluate(state, run_id, candidate=CandidateArgs(source=WRONG))
    assert not wrong.correct
    failed = {c.name for c in wrong.cases if c.status == "mismatch"}
    assert failed and failed <= set(wrong.outputs_kept) == _kept(state, run_id, wrong.candidate_id)
    assert all(p.startswith("outputs/") for p in _record_paths(state, run_id, wrong.candidate_id))

    fast = _evaluate(state, run_id, candidate=CandidateArgs(tunables=FAST))
    assert fast.new_best and _kept(state, run_id, fast.candidate_id) == set(fast.outputs_kept)
    # held back until it was the best, then copied: its record names them, as the baseline's does
    paths = _record_paths(state, run_id, fast.candidate_id)
    assert paths and all((state.store.candidate_dir(run_id, fast.candidate_id) / p).is_file() for p in paths)
    again = _evaluate(state, run_id, candidate_id=fast.candidate_id)  # the best evaluated again keeps them
    assert not again.new_best and _kept(state, run_id, fast.candidate_id) == set(fast.outputs_kept) == set(again.outputs_kept)
    assert _kept(state, run_id, base.candidate_id)  # the baseline keeps its own

    ran = evaluations.execute_step(state, "run", run_id, candidate_id=clone.candidate_id, timing=TIMING)
    assert ran.outputs_kept and _kept(state, run_id, clone.candidate_id)  # run is for looking at outputs
    checked = evaluations.execute_step(state, "evaluate", run_id, candidate=CandidateArgs(defines={"CUDAOPT_CLONE": 2}),
                                       timing=TimingArgs(timeout_s=300, roles=["validation"]))
    assert checked.correct and checked.outputs_kept  # unscored: a client looking at outputs, not the search


def test_failures_beyond_the_run_budget_are_not_kept(state, monkeypatch):
    monkeypatch.setenv("CUDAOPT_RUN_OUTPUTS_MB", "0")
    run_id = run_creation.create_run(state, "reduce_sum", None, None, None).run_id
    _evaluate(state, run_id)
    wrong = _evaluate(state, run_id, candidate=CandidateArgs(source=WRONG))
    assert not wrong.correct and wrong.outputs_kept == [] and not _kept(state, run_id, wrong.candidate_id)
    monkeypatch.setenv("CUDAOPT_RUN_OUTPUTS_MB", "lots")
    with pytest.raises(ValueError, match="CUDAOPT_RUN_OUTPUTS_MB"):
        _evaluate(state, run_id, candidate=CandidateArgs(source=WRONG))
