"""Evaluations on a pool of workers (service.pooled) with the cpu backend: concurrent runs use different
workers; a worker killed mid-evaluation loses nothing: the candidate is evaluated again, once, elsewhere."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from cudaopt_mcp.service import evaluations, run_creation
from cudaopt_mcp.service.arguments import CandidateArgs, TimingArgs
from cudaopt_mcp.service.state import ServerConfig, ServerState
from harness_tools.task.loading import resolve_task

VALIDATION = TimingArgs(roles=["validation"], timeout_s=300)
SPIN = 400_000_000  # volatile increments by one thread per launch: about a second on a CPU


def slow_source() -> str:
    """reduce_sum's baseline, correct, with one thread spinning first in every launch."""
    task = resolve_task("reduce_sum")
    source = task.read(task.spec.baseline.source)
    spin = ("    if (blockIdx.x == 0 && threadIdx.x == 0) { volatile long spin = 0; "
            f"for (long k = 0; k < {SPIN}L; ++k) spin = spin + 1; }}\n")
    head, brace, body = source.partition("{\n")
    return head + brace + spin + body


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    s = ServerState.open(ServerConfig(results_dir=tmp_path_factory.mktemp("results"), backend="cpu", workers=2))
    yield s
    s.close()


def _in_thread(state, run_id, source):
    box: dict = {}

    def work():
        try:
            box["out"] = evaluations.execute_step(state, "evaluate", run_id, timing=VALIDATION,
                                                  candidate=CandidateArgs(source=source))
        except BaseException as exc:  # surfaced by the test
            box["error"] = exc

    thread = threading.Thread(target=work)
    thread.start()
    return thread, box


def _busy_member(state, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        busy = [m for m in state.pool().members if m.busy]
        if busy:
            return busy[0]
        time.sleep(0.02)
    raise AssertionError("no worker became busy")


def _record(state, run_id, candidate_id):
    return json.loads((state.store.candidate_dir(run_id, candidate_id) / "evaluation.json").read_text())


def test_two_runs_evaluate_at_once_on_different_workers(state):
    slow_run = run_creation.create_run(state, "reduce_sum", None, None, None).run_id
    quick_run = run_creation.create_run(state, "reduce_sum", None, None, None).run_id
    thread, box = _in_thread(state, slow_run, slow_source())
    held = _busy_member(state)
    quick = evaluations.execute_step(state, "evaluate", quick_run, timing=VALIDATION)
    still_running = thread.is_alive()
    thread.join(300)
    assert "error" not in box, box.get("error")
    assert still_running, "the quick run waited for the slow one: no second worker"
    slow = box["out"]
    assert quick.correct and slow.correct
    quick_slot = _record(state, quick_run, quick.candidate_id)["environment"]["device"]["pool_slot"]
    slow_slot = _record(state, slow_run, slow.candidate_id)["environment"]["device"]["pool_slot"]
    assert slow_slot == held.slot and quick_slot == 1 - held.slot


def test_a_worker_killed_mid_evaluation_costs_one_retry_elsewhere_and_loses_nothing(state):
    run_id = run_creation.create_run(state, "reduce_sum", None, None, None).run_id
    thread, box = _in_thread(state, run_id, slow_source())
    victim = _busy_member(state)
    time.sleep(0.3)  # inside a case
    os.kill(victim.backend.worker_pid, signal.SIGKILL)
    thread.join(300)
    assert "error" not in box, box.get("error")
    out = box["out"]
    assert out.correct, out.failure
    record = _record(state, run_id, out.candidate_id)
    assert record["environment"]["device"]["pool_slot"] == 1 - victim.slot
    assert record["retried"].startswith(f"worker {victim.slot}: its process ended during case")
    assert all(c["passed"] for c in record["cases"])
    history = [json.loads(line) for line in state.store.run_dir(run_id).joinpath("history.jsonl").read_text().splitlines()]
    evaluated = [h for h in history if h.get("event") == "evaluate"]
    assert [h["candidate_id"] for h in evaluated] == [out.candidate_id]  # one record: none lost, none twice
    assert victim.lost is None and state.pool().size == 2  # its worker restarts on the next request
    again = evaluations.execute_step(state, "evaluate", run_id, timing=VALIDATION)
    assert again.correct


def test_candidates_of_one_run_evaluate_at_once_and_one_candidate_waits_for_itself(state):
    run_id = run_creation.create_run(state, "reduce_sum", None, None, None).run_id
    thread, box = _in_thread(state, run_id, slow_source())
    _busy_member(state)
    quick = evaluations.execute_step(state, "evaluate", run_id, timing=VALIDATION)  # the baseline, same run
    assert thread.is_alive(), "the run's second candidate waited for its first: the run was locked throughout"
    thread.join(300)
    assert "error" not in box, box.get("error")
    slow = box["out"]
    assert quick.correct and slow.correct and quick.candidate_id != slow.candidate_id
    # the same candidate twice at once: the second call waits for the first, then measures it again
    again, twice = _in_thread(state, run_id, slow_source())
    _busy_member(state)
    second = evaluations.execute_step(state, "evaluate", run_id, timing=VALIDATION, candidate_id=slow.candidate_id)
    assert not again.is_alive() or twice.get("out") is not None, "the second call did not wait for the first"
    again.join(300)
    assert twice["out"].candidate_id == second.candidate_id == slow.candidate_id and second.correct
    history = [json.loads(line) for line in state.store.run_dir(run_id).joinpath("history.jsonl").read_text().splitlines()]
    assert [h["candidate_id"] for h in history if h.get("event") == "evaluate"] == \
        [quick.candidate_id, slow.candidate_id, slow.candidate_id, slow.candidate_id]
