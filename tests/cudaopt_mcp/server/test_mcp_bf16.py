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
