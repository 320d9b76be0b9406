"""A pool of cuda workers, one pinned to each visible GPU: each record names the GPU that measured it."""

from __future__ import annotations

import json

import pytest

from cudaopt_mcp.service import evaluations, run_creation
from cudaopt_mcp.service.arguments import TimingArgs
from cudaopt_mcp.service.state import ServerConfig, ServerState
from harness_tools.backends import create_backend
from harness_tools.backends.cuda.backend import visible_gpus
from harness_tools.backends.pool import BackendPool

pytestmark = pytest.mark.gpu


def test_every_visible_gpu_gets_a_worker_pinned_to_it_that_knows_its_uuid():
    gpus = visible_gpus()
    assert gpus, "a GPU host lists its GPUs"
    pool = BackendPool(lambda pin: create_backend("cuda", pin=pin), gpus)
    try:
        infos = [m.info for m in pool.members]
        assert [i.pinned_to for i in infos] == gpus
        assert all(i.uuid and i.uuid.startswith("GPU-") and len(i.uuid) == 40 for i in infos)
        assert len({i.uuid for i in infos}) == len(gpus)  # each worker sees a different GPU
    finally:
        pool.close()


def test_an_evaluation_on_a_pinned_worker_records_its_gpu(tmp_path):
    state = ServerState.open(ServerConfig(results_dir=tmp_path, backend="cuda", workers=1))
    try:
        run_id = run_creation.create_run(state, "reduce_sum", None, None, None).run_id
        out = evaluations.execute_step(state, "evaluate", run_id, timing=TimingArgs(roles=["validation"]))
        assert out.correct, out.failure
        device = json.loads((state.store.candidate_dir(run_id, out.candidate_id) / "evaluation.json").read_text())[
            "environment"]["device"]
        assert device["pinned_to"] == visible_gpus()[0] and device["uuid"].startswith("GPU-")
    finally:
        state.close()
