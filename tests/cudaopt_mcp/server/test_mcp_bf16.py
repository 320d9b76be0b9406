"""A bfloat16 task end to end through the in-process MCP server on the cpu backend."""

from __future__ import annotations

import anyio

from tests.cudaopt_mcp.server.test_mcp_server import call, client, text


def test_evaluate_the_bf16_rmsnorm_baseline_and_see_its_default_tolerance(tmp_path):
    async def main():
        async with client(tmp_path / "results") as c:
            created = await call(c, "create_run", task="rmsnorm_bf16")
            assert not created.is_error, text(created)
            run_id = created.structured_content["run_id"]
            result = await call(c, "evaluate", run_id=run_id, roles=["validation"])
            assert not result.is_error, text(result)
            assert result.structured_content["correct"], result.structured_content
            run = (await call(c, "get_run", run_id=run_id)).structured_content
            assert "__nv_bfloat16* y" in run["task"]["signature"], run["task"]["signature"]
            assert run["task"]["tolerance"]["bfloat16"] == {"atol": 2.0 ** -8, "rtol": 2.0 ** -7}
    anyio.run(main)


FP8_CAST = r"""
#include <cuda_fp8.h>
extern "C" __global__ void to_e5m2(const float* x, __nv_fp8_e5m2* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __nv_fp8_e5m2(x[i]);
}
"""


def test_an_fp8_output_is_summarised_in_its_own_dtype(tmp_path):
    import json

    folder = tmp_path / "cast"
    folder.mkdir()
    (folder / "cast.cu").write_text(FP8_CAST)
    (folder / "reference.py").write_text("def reference(inputs, sizes):\n    return {'y': inputs['x']}\n")
    (folder / "task.json").write_text(json.dumps({
        "name": "to_e5m2", "description": "y = e5m2(x)", "kernel_name": "to_e5m2", "sizes": ["n"],
        "params": [{"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n"], "role": "in",
                    "init": {"low": -300, "high": 300}},
                   {"kind": "buffer", "name": "y", "dtype": "float8_e5m2", "shape": ["n"], "role": "out"},
                   {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}],
        "cases": [{"name": "v", "role": "validation", "sizes": {"n": 1000}}],
        "reference": {"kind": "numpy"}, "hidden": {"derive": False},
        "baseline": {"source": "cast.cu", "launch": {"grid": ["ceil_div(n, 256)"], "block": [256]}}}))

    async def main():
        async with client(tmp_path / "results") as c:
            run_id = (await call(c, "create_run", task=str(folder))).structured_content["run_id"]
            result = await call(c, "evaluate", run_id=run_id)
            assert not result.is_error, text(result)
            uri = f"cudaopt://runs/{run_id}/candidates/c0001/outputs/v/y/summary"
            summary = json.loads((await c.read_resource(uri)).contents[0].text)
            assert summary["dtype"] == "float8_e5m2" and summary["elements"] == 1000
            assert -320 <= summary["min"] < 0 < summary["max"] <= 320 and summary["nan_count"] == 0  # e5m2: 64 apart here
    anyio.run(main)
