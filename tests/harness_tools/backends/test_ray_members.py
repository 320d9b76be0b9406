"""Workers as Ray actors (harness_tools.backends.ray_members) in a local Ray cluster, on the cpu backend: files
travel with the cases, two runs evaluate at once, an actor killed mid-evaluation loses nothing, and a tuner run
of `cudaopt optimize --ray local` completes with every candidate evaluated once."""

from __future__ import annotations

import json
import time

import pytest

from cudaopt_mcp.service import evaluations, run_creation
from cudaopt_mcp.service.state import ServerConfig, ServerState
from tests.cudaopt_mcp.client.test_optimize import optimize
from tests.cudaopt_mcp.service.test_pool_evaluations import VALIDATION, _busy_member, _in_thread, _record, slow_source

ray = pytest.importorskip("ray", reason="Ray is the [ray] extra: pip install 'cudaopt[ray]'")


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    s = ServerState.open(ServerConfig(results_dir=tmp_path_factory.mktemp("results"), backend="cpu", workers=2,
                                      ray_address="local"))
    yield s
    s.close()
    ray.shutdown()


def test_two_runs_evaluate_at_once_on_two_actors_with_their_files_sent_along(state):
    slow_run = run_creation.create_run(state, "reduce_sum", None, None, None).run_id
    quick_run = run_creation.create_run(state, "transpose", None, None, None).run_id
    thread, box = _in_thread(state, slow_run, slow_source())
    held = _busy_member(state, timeout_s=120)
    quick = evaluations.execute_step(state, "evaluate", quick_run, timing=VALIDATION)  # its outputs are kept
    assert thread.is_alive(), "the second run waited for the first: one actor only"
    thread.join(300)
    assert "error" not in box, box.get("error")
    assert quick.correct and box["out"].correct
    assert _record(state, quick_run, quick.candidate_id)["environment"]["device"]["pool_slot"] == 1 - held.slot
    kept = state.store.candidate_dir(quick_run, quick.candidate_id) / "outputs"
    assert any(kept.rglob("*.npy"))  # the actor's outputs came back as files where the server keeps them


def test_an_actor_killed_mid_evaluation_leaves_the_pool_and_the_candidate_is_evaluated_elsewhere(state):
    run_id = run_creation.create_run(state, "reduce_sum", None, None, None).run_id
    thread, box = _in_thread(state, run_id, slow_source())
    victim = _busy_member(state, timeout_s=120)
    time.sleep(0.5)
    ray.kill(victim.backend._actor)  # as a node going away would
    thread.join(300)
    assert "error" not in box, box.get("error")
    out = box["out"]
    assert out.correct, out.failure
    record = _record(state, run_id, out.candidate_id)
    assert record["retried"].startswith(f"worker {victim.slot} lost") and victim.lost
    assert record["environment"]["device"]["pool_slot"] == 1 - victim.slot and state.pool().size == 1
    history = [json.loads(line) for line in state.store.run_dir(run_id).joinpath("history.jsonl").read_text().splitlines()]
    assert [h["candidate_id"] for h in history if h.get("event") == "evaluate"] == [out.candidate_id]


def test_a_tuner_run_on_a_local_ray_cluster_evaluates_every_candidate_once(tmp_path):
    results = tmp_path / "results"
    out = optimize("sgemm", "--proposer", "tuner", "--max-iterations", "6", "--results", str(results), "--json",
                   "--no-confirm", "--no-report", "--ray", "local", "--parallel", "2", "--seed", "5")
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    run = results / summary["run_id"]
    tuned = [a for a in summary["attempts"] if a["iteration"] > 0]
    assert [a["iteration"] for a in tuned] == list(range(1, 7)) and all(a["correct"] for a in tuned)
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    evaluated = [e["candidate_id"] for e in history if e.get("event") == "evaluate"]
    assert sorted(evaluated) == sorted(a["candidate_id"] for a in summary["attempts"])
    slots = {json.loads((run / "candidates" / a["candidate_id"] / "evaluation.json").read_text())["environment"]
             ["device"]["pool_slot"] for a in tuned}
    assert slots == {0, 1}
