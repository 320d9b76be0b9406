"""A failed evaluation says where its evidence points: an unguarded edge, unwritten elements, a shared-memory race."""

from __future__ import annotations

import pytest

from harness_tools.check.failure_hints import CaseFacts, failure_hints
from harness_tools.task.loading import load_task
from tests.harness_tools.check.checking_tasks import VALIDATION, run, write_task

PARAMS = [{"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n"], "role": "in"},
          {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["n"], "role": "out"},
          {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}]
GOOD = """extern "C" __global__ void twice(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
"""
EDGE = GOOD.replace("if (i < n)", "if (i < (n / 32) * 32)")  # the tail of a non-multiple of 32 is never written
SHARED = """extern "C" __global__ void twice(const float* x, float* y, int n) {
  __shared__ float s[128];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.0f;
  if (i < n) y[i] = 2.0f * s[(threadIdx.x + 1) % 128];  // a neighbour's value, read without a barrier
}
"""

# wrong by an amount that depends on when it ran: what a race looks like from outside
TIMING_DEPENDENT = GOOD.replace("2.0f * x[i]", "2.0f * x[i] + (float)(clock64() & 0xFFFF)")
# wrong the same way every time, with shared memory and its barrier
SHARED_DETERMINISTIC = """extern "C" __global__ void twice(const float* x, float* y, int n) {
  __shared__ float s[128];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  if (i < n) y[i] = 3.0f * s[threadIdx.x];
}
"""


def _task(tmp_path):
    return load_task(write_task(tmp_path / "t", kernel_name="twice", kernel=GOOD, params=PARAMS, sizes=["n"],
                                cases=[{"name": f"n{n}", "role": "validation", "sizes": {"n": n}} for n in (1, 64, 100, 256)],
                                reference_py="def reference(inputs, sizes):\n    return {'y': 2.0 * inputs['x']}\n",
                                launch={"grid": ["ceil_div(n, 128)"], "block": [128]}))


def test_an_unguarded_edge_and_unwritten_elements_are_named(cpu_backend, tmp_path):
    result = run(_task(tmp_path), cpu_backend, EDGE, VALIDATION)
    assert not result.correct
    assert [c.name for c in result.cases if not c.passed] == ["n1", "n100"]
    assert any("unguarded edge" in h and "multiple of 32" in h and "n1, n100" in h for h in result.hints), result.hints
    assert any("never written" in h for h in result.hints)
    assert not any("shared memory" in h for h in result.hints)


def test_wrong_values_from_shared_memory_point_to_sanitize(cpu_backend, tmp_path):
    result = run(_task(tmp_path), cpu_backend, SHARED, VALIDATION)
    assert not result.correct
    assert any("__syncthreads" in h and "sanitize" in h for h in result.hints), result.hints


def _race_evidence(result) -> dict[str, int] | None:
    return next(c.rerun_differs for c in result.cases if c.status == "mismatch")


def test_a_result_that_changes_between_two_runs_on_the_same_inputs_is_called_a_race(cpu_backend, tmp_path):
    result = run(_task(tmp_path), cpu_backend, TIMING_DEPENDENT, VALIDATION)
    assert not result.correct
    assert _race_evidence(result)["y"] >= 1
    race = [h for h in result.hints if h.startswith("a race: case n1, run twice on the same inputs")]
    assert race and "of y changed" in race[0] and "sanitize" in race[0], result.hints
    assert sum(c.rerun_differs is not None for c in result.cases) == 1  # one re-run per evaluation, not per case


def test_a_repeatable_wrong_answer_with_shared_memory_says_a_race_is_less_likely(cpu_backend, tmp_path):
    result = run(_task(tmp_path), cpu_backend, SHARED_DETERMINISTIC, VALIDATION)
    assert not result.correct and _race_evidence(result) == {"y": 0}
    assert not any(h.startswith("a race:") for h in result.hints)
    assert any("wrote the same values" in h and "__syncthreads" in h for h in result.hints), result.hints


def test_the_re_run_leaves_no_files_in_a_kept_outputs_folder(cpu_backend, tmp_path):
    kept = tmp_path / "kept"
    run(_task(tmp_path), cpu_backend, TIMING_DEPENDENT, VALIDATION.model_copy(update={"outputs_dir": str(kept)}))
    assert sorted(p.name for p in kept.iterdir() if "rerun" in p.name) == []
    assert (kept / "n1" / "out").is_dir()


# wrong on its first launch in a worker; from the second on (the re-run) it spins forever
HANGS_WHEN_RUN_AGAIN = GOOD.replace("if (i < n) y[i] = 2.0f * x[i];", """static int launches = 0;
  if (i == 0) launches++;
  if (launches >= 2) { volatile int spin = 0; while (true) { spin++; } }
  if (i < n) y[i] = 3.0f * x[i];""")


def test_a_kernel_that_hangs_only_when_run_again_costs_the_re_run_s_bound_not_the_budget(cpu_backend, tmp_path):
    result = run(_task(tmp_path), cpu_backend, HANGS_WHEN_RUN_AGAIN,
                 VALIDATION.model_copy(update={"timeout_s": 15}))
    first, second = result.cases[0], result.cases[1]
    assert first.status == "mismatch" and first.rerun_differs is None  # no claim from a re-run that never ended
    assert not any(h.startswith("a race:") for h in result.hints)
    assert second.status == "mismatch", second.message  # the next case still ran, in a fresh worker
    assert not result.correct


@pytest.mark.gpu
def test_a_timing_dependent_result_is_called_a_race_on_the_gpu(cuda_backend, tmp_path):
    result = run(_task(tmp_path), cuda_backend, TIMING_DEPENDENT, VALIDATION)
    assert not result.correct and _race_evidence(result)["y"] >= 1
    assert any(h.startswith("a race: case n1") for h in result.hints), result.hints
    deterministic = run(_task(tmp_path / "d"), cuda_backend, SHARED_DETERMINISTIC, VALIDATION)
    assert _race_evidence(deterministic) == {"y": 0}


def test_a_correct_kernel_has_no_hints(cpu_backend, tmp_path):
    result = run(_task(tmp_path), cpu_backend, GOOD, VALIDATION)
    assert result.correct and result.hints == []


def test_no_edge_hint_when_aligned_cases_fail_too():
    cases = [CaseFacts("a", "validation", {"n": 128}, "mismatch"), CaseFacts("b", "validation", {"n": 100}, "mismatch"),
             CaseFacts("c", "validation", {"n": 256}, "passed")]
    assert not any("edge" in h for h in failure_hints("", 128, cases))


def test_the_cli_and_mcp_say_the_hints(tmp_path):
    import anyio
    from mcp import Client

    from cudaopt_mcp.server.app import build_server
    from cudaopt_mcp.service.state import ServerConfig
    from tests.harness_tools.check.checking_tasks import cudaopt

    task = _task(tmp_path)
    (tmp_path / "edge.cu").write_text(EDGE)
    out = cudaopt("eval", str(task.folder), "--kernel", str(tmp_path / "edge.cu"), "--backend", "cpu")
    assert out.returncode == 1 and "hint: an unguarded edge?" in out.stdout, out.stdout + out.stderr

    async def over_mcp():
        config = ServerConfig(results_dir=tmp_path / "results", backend="cpu", transport="inprocess")
        async with Client(build_server(config)) as client:
            run_id = (await client.call_tool("create_run", {"task": str(task.folder)})).structured_content["run_id"]
            got = await client.call_tool("evaluate", {"run_id": run_id, "source": EDGE, "roles": ["validation"]})
            return got.structured_content
    assert any("unguarded edge" in h for h in anyio.run(over_mcp)["hints"])
