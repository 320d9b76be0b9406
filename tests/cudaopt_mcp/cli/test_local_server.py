"""``cudaopt optimize``'s in-process server: its workers start before any call, a session over it evaluates as
a stdio or HTTP one does, closing it ends the workers, and a backend that cannot start fails the call that
needs it, with the reason, not the start."""

from __future__ import annotations

import logging
import os
import time

import anyio
import numpy as np
import pytest

from cudaopt_mcp.api import CreateRunOutput, EvaluateOutput
from cudaopt_mcp.cli.local_server import LocalServer
from cudaopt_mcp.errors import SessionError
from cudaopt_mcp.service.hidden import read_private_record
from harness_tools.backends.cuda.backend import gpu_present
from harness_tools.check.case_request import case_inputs
from harness_tools.check.generated_inputs import generator_rng
from harness_tools.task.loading import load_task, resolve_task
from harness_tools.task.spec import Case
from tests.cudaopt_mcp.service.test_hidden import GENERATOR, SCALE_TASK, hidden_values, write_task


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_for(predicate, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout_s} s")


def _worker_pids(local: LocalServer) -> list[int]:
    pool = local.state.started_pool()
    return [m.backend.worker_pid for m in pool.live] if pool else []


def test_the_workers_start_before_any_call_and_end_with_close(tmp_path):
    local = LocalServer(tmp_path / "results", "cpu", None, None)
    try:
        pids = _wait_for(lambda: _worker_pids(local))  # no session was opened, no tool called
        assert len(pids) == 1 and _alive(pids[0])
    finally:
        local.close()
    _wait_for(lambda: not _alive(pids[0]), 15)
    assert local.state.started_pool() is None


def test_a_session_over_it_evaluates_through_the_tools(tmp_path):
    local = LocalServer(tmp_path / "results", "cpu", None, None)

    async def main() -> EvaluateOutput:
        async with local.session() as session:
            assert "in-process" in session.where
            run = (await session.call("create_run", CreateRunOutput, task="transpose")).data
            outcome = await session.call("evaluate", EvaluateOutput, run_id=run.run_id)
            assert not outcome.is_error, outcome.text
            return outcome.data

    try:
        result = anyio.run(main)
    finally:
        local.close()
    assert result.correct and result.candidate_id == "c0001"
    assert (tmp_path / "results" / result.run_id / "candidates" / "c0001" / "evaluation.json").is_file()


@pytest.mark.skipif(gpu_present(), reason="needs a machine without a GPU, where the cuda backend cannot start")
def test_a_backend_that_cannot_start_fails_the_call_with_its_reason(tmp_path):
    local = LocalServer(tmp_path / "results", "cuda", None, None)  # the start fails in its thread, quietly

    async def main() -> None:
        async with local.session() as session:
            run = (await session.call("create_run", CreateRunOutput, task="transpose")).data
            with pytest.raises(SessionError, match="no NVIDIA GPU"):
                await session.call("evaluate", EvaluateOutput, run_id=run.run_id)

    try:
        anyio.run(main)
    finally:
        local.close()


@pytest.mark.parametrize("full_timing", [False, True])
def test_a_candidate_far_slower_than_the_best_is_timed_in_part_unless_full_timing_is_asked(tmp_path, full_timing):
    local = LocalServer(tmp_path / "results", "cpu", None, None, full_timing)
    fast = {"BLOCK": 256, "ITEMS": 2, "GRID_THREADS": 65536, "CS": 0}  # reduce_sum ~10x the baseline's speed

    async def main() -> EvaluateOutput:
        async with local.session() as session:
            run = (await session.call("create_run", CreateRunOutput, task="reduce_sum")).data
            best = await session.call("evaluate", EvaluateOutput, run_id=run.run_id, tunables=fast, reps=20)
            assert best.data.new_best, best.text
            return (await session.call("evaluate", EvaluateOutput, run_id=run.run_id, reps=20)).data  # the baseline

    try:
        slow = anyio.run(main)
    finally:
        local.close()
    (case,) = [c for c in slow.cases if c.role == "performance"]
    if full_timing:
        assert (case.reps, case.planned_reps, case.timing_stopped) == (20, None, None)
    else:
        assert (case.reps, case.planned_reps) == (5, 20) and "clearly slower than the run's best" in case.timing_stopped


def test_the_first_evaluations_inputs_are_made_while_it_starts_and_the_run_reads_them(tmp_path):
    local = LocalServer(tmp_path / "results", "cpu", None, None, ahead=("softmax_rows", 515))

    async def main() -> EvaluateOutput:
        async with local.session() as session:
            run = (await session.call("create_run", CreateRunOutput, task="softmax_rows")).data
            _wait_for(lambda: local.drawn is not None)
            return (await session.call("evaluate", EvaluateOutput, run_id=run.run_id, seed=515)).data

    try:
        result = anyio.run(main)
    finally:
        local.close()
    assert result.correct and result.seed == 515
    assert sorted(local.drawn) == sorted(c.name for c in result.cases)  # every case it ran was made ahead
    run_task, task = load_task(tmp_path / "results" / result.run_id / "task"), resolve_task("softmax_rows")
    for case in run_task.spec.cases_for(run_task.spec.default_roles("cpu"), "cpu"):  # the files drawn ahead, shared
        assert case_inputs(run_task, case, 515)[1] == case_inputs(task, case, 515)[1]


def test_a_task_that_cannot_be_loaded_is_not_drawn_and_the_run_reports_it_as_usual(tmp_path):
    local = LocalServer(tmp_path / "results", "cpu", None, None, ahead=(str(tmp_path / "no-such-task"), 1))
    try:
        time.sleep(0.5)
        assert local.drawn is None
    finally:
        local.close()


def test_the_baseline_hidden_checks_inputs_are_made_while_it_starts_too(tmp_path):
    log = tmp_path / "drawn.log"
    timed = [*SCALE_TASK["cases"], {"name": "perf", "role": "performance", "sizes": {"n": 65536}, "backends": ["cpu"]}]
    folder = write_task(tmp_path / "generated", {**SCALE_TASK, "cases": timed,
                                                 "inputs": {"file": "gen.py", "function": "make_inputs"}})
    (folder / "gen.py").write_text(GENERATOR.format(log=str(log)))
    local = LocalServer(tmp_path / "results", "cpu", None, None, ahead=(str(folder), 77))
    hidden = hidden_values(load_task(folder))
    made_ahead: set[str] = set()

    async def main() -> EvaluateOutput:
        async with local.session() as session:
            run = (await session.call("create_run", CreateRunOutput, task=str(folder))).data
            _wait_for(lambda: local.drawn is not None)
            made_ahead.update(line for line in log.read_text().splitlines() if int(line.split()[0]) in hidden)
            return (await session.call("evaluate", EvaluateOutput, run_id=run.run_id, seed=77, reps=5)).data

    try:
        result = anyio.run(main)
        assert result.correct and result.new_best  # the first best: its hidden check ran
        record = read_private_record(local.state, result.run_id, result.candidate_id)
    finally:
        local.close()
    assert record["verdict"]["passed"] and made_ahead
    for case in record["cases"]:  # the check's own seed drew what had been made ahead, at the start
        n = case["sizes"]["n"]
        first = float(generator_rng(record["evaluation"]["seed"], Case(name=case["name"], role="validation",
                                                                       sizes=case["sizes"])).standard_normal(n)
                      .astype(np.float32)[0])
        assert f"{n} {first!r}" in made_ahead


def _baseline_through_the_tools(local: LocalServer, task: str, seed: int, **timing) -> EvaluateOutput:
    """create_run, then the baseline's evaluate as the loop asks for it (seed, search timing), once the first cases
    are drawn (by then anything made ahead has begun: in optimize the MCP side's imports give it that time)."""
    async def main() -> EvaluateOutput:
        async with local.session() as session:
            run = (await session.call("create_run", CreateRunOutput, task=task)).data
            _wait_for(lambda: local.drawn is not None)
            outcome = await session.call("evaluate", EvaluateOutput, run_id=run.run_id, seed=seed, note="baseline",
                                         **timing)
            assert not outcome.is_error, outcome.text
            return outcome.data

    try:
        return anyio.run(main)
    finally:
        local.close()


@pytest.mark.gpu
def test_on_a_gpu_the_baseline_and_its_hidden_check_are_made_ahead_and_taken(tmp_path, caplog):
    with caplog.at_level(logging.DEBUG, logger="cudaopt.mcp"):
        local = LocalServer(tmp_path / "results", "cuda", None, None, ahead=("reduce_sum", 616),
                            baseline_timing=(None, None))
        result = _baseline_through_the_tools(local, "reduce_sum", 616, warmup=3, reps=30)  # the loop's search timing
    taken = [r.getMessage() for r in caplog.records if "taken as made ahead" in r.getMessage()]
    assert taken == ["the baseline's first evaluation: taken as made ahead", "the baseline's hidden check: taken as made ahead"]
    assert result.correct and result.new_best and result.seed == 616 and result.score_ms
    hidden = read_private_record(local.state, result.run_id, result.candidate_id)
    assert hidden["verdict"]["passed"] and hidden["evaluation"]["backend"] == "cuda"


def test_on_the_cpu_backend_the_baseline_is_measured_when_asked(tmp_path, caplog):
    """Its clock is the host's, which the start's imports share: nothing timed is made ahead there."""
    with caplog.at_level(logging.DEBUG, logger="cudaopt.mcp"):
        local = LocalServer(tmp_path / "results", "cpu", None, None, ahead=("reduce_sum", 616),
                            baseline_timing=(None, None))
        result = _baseline_through_the_tools(local, "reduce_sum", 616)
    assert result.correct and result.seed == 616
    assert not [r for r in caplog.records if "made ahead:" in r.getMessage() or "taken as made" in r.getMessage()]
