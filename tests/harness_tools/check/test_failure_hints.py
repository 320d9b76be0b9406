"""A failed evaluation says where its evidence points: an unguarded edge, unwritten elements, a shared-memory race."""

from __future__ import annotations

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
