"""The run store: reload after restart, no lost candidates under concurrency, refused traversal ids."""

from __future__ import annotations

import json
import shutil
import threading

import pytest

from cudaopt_mcp.errors import RunError
from cudaopt_mcp.service.runs import BestRecord, RunStore
from harness_tools.task.loading import resolve_task


@pytest.fixture
def store(tmp_path):
    return RunStore(tmp_path / "results")


def test_create_and_reload_after_restart(store, tmp_path):
    record = store.create_run(resolve_task("transpose"), "transpose", "cpu")
    assert record.run_id == "run-001"
    again = RunStore(tmp_path / "results")  # a new process would see the same
    assert again.run("run-001").task == "transpose"
    assert again.task("run-001").spec.kernel_name == "transpose"
    assert [r.run_id for r in again.list_runs()] == ["run-001"]
    assert store.create_run(resolve_task("sgemm"), "sgemm", "cpu").run_id == "run-002"


def test_concurrent_candidates_are_all_kept(store):
    run_id = store.create_run(resolve_task("transpose"), "transpose", "cpu").run_id
    ids: list[str] = []

    def add():
        for _ in range(20):
            with store.locked(run_id):
                cid, _ = store.new_candidate(run_id)
                store.write_artifact(run_id, cid, "kernel.cu", "// x")
            ids.append(cid)

    threads = [threading.Thread(target=add) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 80 and store.candidate_ids(run_id) == sorted(ids)


@pytest.mark.parametrize("bad", ["../run-001", "run-001/..", "/etc", "run-1", "RUN-001", "", "run-001\x00"])
def test_traversal_run_ids_are_refused(store, bad):
    store.create_run(resolve_task("transpose"), "transpose", "cpu")
    with pytest.raises(RunError):
        store.run(bad)


@pytest.mark.parametrize("bad", ["../../run.json", "..", ".hidden", "a/b", "x" * 200, ""])
def test_traversal_artifact_names_are_refused(store, bad):
    run_id = store.create_run(resolve_task("transpose"), "transpose", "cpu").run_id
    with store.locked(run_id):
        cid, _ = store.new_candidate(run_id)
    with pytest.raises(RunError):
        store.artifact_path(run_id, cid, bad, must_exist=False)
    with pytest.raises(RunError):
        store.candidate_dir(run_id, "../c0001")


def test_history_survives_a_torn_last_line(store):
    run_id = store.create_run(resolve_task("transpose"), "transpose", "cpu").run_id
    store.append_history(run_id, {"event": "compiled", "candidate_id": "c0001"})
    with open(store.root / run_id / "history.jsonl", "a") as f:
        f.write('{"event": "evalua')  # a crash mid-append
    events = store.history(run_id)
    assert [e["event"] for e in events] == ["created", "compiled"]


def test_best_only_improves(store):
    run_id = store.create_run(resolve_task("transpose"), "transpose", "cpu").run_id
    assert store.offer_best(run_id, BestRecord(candidate_id="c0001", score_ms=2.0, backend="cpu", seed=1))
    assert not store.offer_best(run_id, BestRecord(candidate_id="c0002", score_ms=3.0, backend="cpu", seed=1))
    assert store.offer_best(run_id, BestRecord(candidate_id="c0003", score_ms=1.0, backend="cpu", seed=1))
    assert store.best(run_id).candidate_id == "c0003"


def _add(store: RunStore, run_id: str, digest: str) -> str:
    with store.locked(run_id):
        cid, _ = store.new_candidate(run_id)
        store.write_artifact(run_id, cid, "candidate.json", json.dumps({"candidate_id": cid, "digest": digest}))
    return cid


def test_a_candidate_is_found_by_its_content_whoever_wrote_it_and_a_remade_run_is_not_mistaken(store, tmp_path):
    run_id = store.create_run(resolve_task("transpose"), "transpose", "cpu").run_id
    first = _add(store, run_id, "aaa")
    assert store.find_candidate(run_id, "aaa") == first and store.find_candidate(run_id, "bbb") is None
    other = RunStore(tmp_path / "results")  # another process on the same results folder
    second = _add(other, run_id, "bbb")
    assert store.find_candidate(run_id, "bbb") == second  # read when first listed
    with store.locked(run_id):
        store.new_candidate(run_id)  # a folder whose record is still being written: neither found nor remembered
    assert store.find_candidate(run_id, "ccc") is None

    shutil.rmtree(tmp_path / "results" / run_id)  # the run removed, and a new one takes its id
    assert store.create_run(resolve_task("transpose"), "transpose", "cpu").run_id == run_id
    again = _add(store, run_id, "zzz")
    assert again == first
    assert store.find_candidate(run_id, "zzz") == again  # c0001 holds other content now
    assert store.find_candidate(run_id, "aaa") is None


def test_the_runs_task_is_loaded_again_when_its_folder_changes(store, tmp_path):
    run_id = store.create_run(resolve_task("transpose"), "transpose", "cpu").run_id
    first = store.task(run_id)
    assert store.task(run_id) is first  # loaded once while the folder holds the same
    task_json = tmp_path / "results" / run_id / "task" / "task.json"
    spec = json.loads(task_json.read_text())
    spec["description"] += " Edited in place."
    task_json.write_text(json.dumps(spec))
    assert store.task(run_id).spec.description.endswith("Edited in place.")
    assert not first.spec.description.endswith("Edited in place.")
