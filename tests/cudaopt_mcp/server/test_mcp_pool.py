"""Two MCP clients of one HTTP server with two workers (--workers 2): one's evaluation spins on a worker while
the other's runs on the second worker, and each record names the worker that measured it."""

from __future__ import annotations

import json

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.cudaopt_mcp.server.test_mcp_cancellation import SPINNING_TRANSPOSE


def test_a_second_client_evaluates_on_the_second_worker_while_the_first_spins(tmp_path, http_server):
    results = tmp_path / "results"
    _, url = http_server(results, "--workers", "2")

    async def main():
        async with Client(streamable_http_client(url)) as first, Client(streamable_http_client(url)) as second:
            spin_run = (await first.call_tool("create_run", {"task": "transpose"})).structured_content["run_id"]
            quick_run = (await second.call_tool("create_run", {"task": "transpose"})).structured_content["run_id"]
            spinning = anyio.Event()
            async with anyio.create_task_group() as group:
                async def progress(value: float, total: float | None, message: str | None) -> None:
                    if (message or "").startswith("running"):  # it holds a worker now
                        spinning.set()

                async def spin() -> None:
                    await first.call_tool("evaluate", {"run_id": spin_run, "source": SPINNING_TRANSPOSE,
                                                       "timeout_s": 120.0}, progress_callback=progress)

                group.start_soon(spin)
                with anyio.fail_after(60):
                    await spinning.wait()
                with anyio.fail_after(60):  # one worker only would keep this waiting for the full 120 s
                    quick = (await second.call_tool("evaluate", {"run_id": quick_run})).structured_content
                group.cancel_scope.cancel()  # the spinning call, cancelled: its worker is killed
            return quick_run, quick

    quick_run, quick = anyio.run(main)
    assert quick["correct"], quick
    record = json.loads((results / quick_run / "candidates" / quick["candidate_id"] / "evaluation.json").read_text())
    assert record["environment"]["device"]["pool_slot"] == 1  # the first worker was the spinning call's
