"""completion/complete through the SDK's client on a real server and run store (cpu backend): run ids, candidate ids
of the run given in the context, case and buffer names of kept outputs, file names and the prompt's mode, filtered
by prefix, at most 100 values with an honest total and hasMore."""

from __future__ import annotations

import json

import anyio
from mcp import Client
from mcp.types import PromptReference, ResourceTemplateReference

from cudaopt_mcp.server.app import build_server
from cudaopt_mcp.service.runs import RunStore
from cudaopt_mcp.service.state import ServerConfig

RUN = "cudaopt://runs/{run_id}"
ARTIFACT_JSON = "cudaopt://runs/{run_id}/candidates/{candidate_id}/{name}.json{?part}"
ARTIFACT_OTHER = "cudaopt://runs/{run_id}/candidates/{candidate_id}/{name}{?part}"
OUTPUT = "cudaopt://runs/{run_id}/candidates/{candidate_id}/outputs/{case}/{buffer}{?part}"
TASK_FILE = "cudaopt://runs/{run_id}/task/{name}{?part}"
TASK_CU = "cudaopt://runs/{run_id}/task/{name}.cu{?part}"


def test_completions_for_ids_names_and_modes(tmp_path, small_task):
    results = tmp_path / "results"

    async def main():
        async with Client(build_server(ServerConfig(results_dir=results, backend="cpu", transport="inprocess"))) as c:
            assert c.server_capabilities.completions is not None  # said in the handshake
            for _ in range(2):
                await c.call_tool("create_run", {"task": str(small_task)})
            await c.call_tool("run", {"run_id": "run-002", "candidate_id": (await c.call_tool(
                "compile", {"run_id": "run-002"})).structured_content["candidate_id"], "roles": ["validation"]})
            store = RunStore(results)  # 150 more candidate ids in run-002, reserved the store's own way
            for _ in range(150):
                store.new_candidate("run-002")

            async def complete(ref, name: str, value: str = "", **context: str):
                return (await c.complete(ref, {"name": name, "value": value}, context or None)).completion

            prompt = PromptReference(name="optimize")
            assert (await complete(prompt, "run_id")).values == ["run-001", "run-002"]
            got = await complete(prompt, "run_id", "run-002")
            assert got.values == ["run-002"] and got.total == 1 and not got.has_more
            assert (await complete(prompt, "run_id", "run-9")).values == []
            assert (await complete(prompt, "mode", "r")).values == ["reply"]
            assert (await complete(PromptReference(name="no_such_prompt"), "run_id")).values == []

            # candidate ids depend on the run in the context, and are capped at 100 with the total said
            template = ResourceTemplateReference(uri=ARTIFACT_JSON)
            assert (await complete(template, "candidate_id", run_id="run-001")).values == []
            many = await complete(template, "candidate_id", run_id="run-002")
            assert len(many.values) == 100 and many.total == 151 and many.has_more
            assert many.values[0] == "c0001" and many.values == sorted(many.values)
            few = await complete(template, "candidate_id", "c015", run_id="run-002")
            assert few.values == [f"c{n:04d}" for n in range(150, 152)] and few.total == 2 and not few.has_more
            assert (await complete(template, "candidate_id", run_id="run-404")).values == []  # unknown run: nothing
            assert (await complete(template, "candidate_id")).values == []  # no run given yet

            # file names: a typed template offers its files without the suffix; the catch-all, the rest
            names = await complete(template, "name", run_id="run-002", candidate_id="c0001")
            assert names.values == ["candidate", "compile", "execution"]
            other = await complete(ResourceTemplateReference(uri=ARTIFACT_OTHER), "name", run_id="run-002",
                                   candidate_id="c0001")
            assert "kernel.cu" not in other.values and "candidate.json" not in other.values
            assert (await complete(ResourceTemplateReference(uri=TASK_CU), "name", "b", run_id="run-001")).values == [
                "baseline"]
            assert (await complete(ResourceTemplateReference(uri=TASK_FILE), "name", run_id="run-001")).values == []

            # cases: the task's before a candidate is given, then those with kept outputs, then their buffers
            output = ResourceTemplateReference(uri=OUTPUT)
            cases = await complete(output, "case", run_id="run-002")
            assert cases.values == ["perf_37x51", "perf_64x96", "val_col_100x1", "val_odd_33x65"]
            kept = await complete(output, "case", "val", run_id="run-002", candidate_id="c0001")
            assert kept.values == ["val_col_100x1", "val_odd_33x65"]
            buffers = await complete(output, "buffer", run_id="run-002", candidate_id="c0001", case="val_odd_33x65")
            assert buffers.values == ["out"]
            assert (await complete(output, "part", run_id="run-002")).values == []

            assert (await complete(ResourceTemplateReference(uri=RUN), "run_id", "run-00")).total == 2
            tasks = await complete(ResourceTemplateReference(uri="cudaopt://tasks/{task}"), "task", "s")
            assert tasks.values and all(t.startswith("s") for t in tasks.values) and tasks.total == len(tasks.values)
            assert "transpose" in (await complete(ResourceTemplateReference(uri="cudaopt://tasks/{task}"), "task")).values
            body = json.loads((await c.read_resource(f"cudaopt://tasks/{tasks.values[0]}")).contents[0].text)
            assert body["name"] == tasks.values[0] and "hidden" not in body
            assert (await complete(ResourceTemplateReference(uri="cudaopt://elsewhere/{run_id}"), "run_id")).values == []
    anyio.run(main)
