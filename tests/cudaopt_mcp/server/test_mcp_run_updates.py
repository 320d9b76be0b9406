"""The server claims resources.subscribe (MCP 2026-07-28): a client listening to a run hears every call that wrote
it (direct calls, background jobs when they end) and nothing from read-only calls."""

from __future__ import annotations

import anyio

from tests.cudaopt_mcp.server.test_mcp_transports import stdio


def test_a_listening_client_hears_the_calls_that_write_its_run(tmp_path):
    async def main():
        async with stdio(tmp_path / "results") as c:
            assert c.server_capabilities.resources.subscribe
            run_id = (await c.call_tool("create_run", {"task": "transpose"})).structured_content["run_id"]
            uri = f"cudaopt://runs/{run_id}"
            async with c.listen(resource_subscriptions=[uri]) as sub:
                heard: list[str] = []

                async def hear():
                    async for event in sub:
                        heard.append(getattr(event, "uri", type(event).__name__))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(hear)
                    await c.call_tool("get_run", {"run_id": run_id})
                    await anyio.sleep(0.5)
                    assert heard == [], heard  # a read changes nothing
                    await c.call_tool("evaluate", {"run_id": run_id})
                    with anyio.fail_after(10):
                        while uri not in heard:
                            await anyio.sleep(0.05)
                    heard.clear()
                    job = (await c.call_tool("start_evaluation", {"run_id": run_id, "candidate_id": "c0001",
                                                                  "warmup": 1, "reps": 30}))
                    job_id = job.structured_content["job_id"]
                    with anyio.fail_after(10):
                        while uri not in heard:  # the start wrote the run (a new job, the candidate evaluating)
                            await anyio.sleep(0.02)
                    heard.clear()
                    with anyio.fail_after(120):
                        while (await c.call_tool("job", {"job_id": job_id})).structured_content["status"] == "running":
                            await anyio.sleep(0.2)
                    with anyio.fail_after(5):
                        while uri not in heard:  # and its end, from the job's thread
                            await anyio.sleep(0.02)
                    tg.cancel_scope.cancel()

    anyio.run(main)
