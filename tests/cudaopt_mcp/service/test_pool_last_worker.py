"""A server's last worker is kept when it cannot be started again (service.pooled): that evaluation fails with the
reason, and the next call tries the same worker again instead of finding an empty pool."""

from __future__ import annotations

import pytest

from cudaopt_mcp.service import evaluations, run_creation
from cudaopt_mcp.service.arguments import TimingArgs
from cudaopt_mcp.service.state import ServerConfig, ServerState
from harness_tools.backends import register
from harness_tools.backends.cpu.backend import CpuBackend
from harness_tools.errors import BackendUnavailable

VALIDATION = TimingArgs(roles=["validation"], timeout_s=300)


class RestartFailsOnce(CpuBackend):
    """The cpu backend, as a plugin: on the first case it is given, its worker 'cannot be started again'
    (what Worker.call raises when a dead worker's restart fails), then it works."""

    failures = 1

    def run_case(self, request, timeout_s):
        if RestartFailsOnce.failures:
            RestartFailsOnce.failures -= 1
            raise BackendUnavailable("worker for device 0 exited during start (exit status 1)")
        return super().run_case(request, timeout_s)


register("cpu-restart-fails-once", f"{__name__}:RestartFailsOnce")


def test_the_last_worker_stays_in_the_pool_and_the_next_call_uses_it(tmp_path):
    state = ServerState.open(ServerConfig(results_dir=tmp_path, backend="cpu-restart-fails-once"))
    try:
        run_id = run_creation.create_run(state, "reduce_sum", None, None, None).run_id
        with pytest.raises(BackendUnavailable, match="worker 0 lost .*exited during start.*no other worker"):
            evaluations.execute_step(state, "evaluate", run_id, timing=VALIDATION)
        assert [m.slot for m in state.pool().live] == [0]  # not taken out: it is the only one
        again = evaluations.execute_step(state, "evaluate", run_id, timing=VALIDATION)
        assert again.correct and again.candidate_id == "c0001"
    finally:
        state.close()
