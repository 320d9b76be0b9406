"""The api's URI vocabulary against the real server: the templates it registers are api's, and every URI
api builds resolves through an in-process MCP client (cpu backend, real engine)."""

from __future__ import annotations

import json

import anyio
from mcp import Client

from cudaopt_mcp import api, api_pages
from cudaopt_mcp.server.app import build_server
from cudaopt_mcp.service.state import ServerConfig

# the api's families, registered as pages, parts and one template per file suffix (api_pages)
TEMPLATES = {api.RUN_TEMPLATE, api.HISTORY_TEMPLATE + "{?page}", api.RUNS_URI + "{?cursor}",
             api.OUTPUT_TEMPLATE + "{?part}", api.OUTPUT_TEMPLATE + "/summary", api_pages.BUNDLED_TASK_TEMPLATE,
             api_pages.REPORT_PARTS_TEMPLATE, api.REPORT_MARKDOWN_TEMPLATE}
TEMPLATES |= {api_pages.typed_template(family, suffix) for family, suffixes in api_pages.FILE_FAMILIES.items()
              for suffix in (*suffixes, None) if suffix or family != api.BEST_EXPORT_TEMPLATE}
BOTH = ["validation", "performance"]


async def read(c: Client, uri: str):
    contents = (await c.read_resource(uri)).contents
    assert contents, uri
    return contents[0]


def test_every_api_uri_resolves_through_the_server(tmp_path, small_task):
    config = ServerConfig(results_dir=tmp_path / "results", backend="cpu", transport="inprocess",
                          task_roots=(small_task.parent,))

    async def main():
        async with Client(build_server(config)) as c:
            registered = {t.uri_template for t in (await c.list_resource_templates()).resource_templates}
            assert registered == TEMPLATES
            assert api.RUNS_URI in {str(r.uri) for r in (await c.list_resources()).resources}

            made = await c.call_tool("create_run", {"task": str(small_task)})
            run_id = made.structured_content["run_id"]
            evaluated = api.EvaluateOutput.model_validate((await c.call_tool(
                "evaluate", {"run_id": run_id, "roles": BOTH})).structured_content)
            cid = evaluated.candidate_id
            assert evaluated.correct and evaluated.new_best, evaluated
            ran = api.EvaluateOutput.model_validate((await c.call_tool(
                "run", {"run_id": run_id, "candidate_id": cid, "roles": BOTH})).structured_content)
            case = ran.outputs_kept[0]

            runs = json.loads((await read(c, api.RUNS_URI)).text)
            assert [r["run_id"] for r in runs["runs"]] == [run_id]
            run = api.GetRunOutput.model_validate_json((await read(c, api.run_uri(run_id))).text)
            assert run.run.uri == api.run_uri(run_id)
            assert run.task.baseline_source_uri == api.task_file_uri(run_id, "baseline.cu")
            assert run.run.best.source_uri == api.artifact_uri(run_id, cid, "kernel.cu")
            assert evaluated.source_uri == api.artifact_uri(run_id, cid, "kernel.cu")
            assert evaluated.record_uri == api.artifact_uri(run_id, cid, "evaluation.json")

            assert json.loads((await read(c, api.history_uri(run_id))).text.splitlines()[0])["event"] == "created"
            assert "__global__" in (await read(c, api.task_file_uri(run_id, "baseline.cu"))).text
            assert json.loads((await read(c, api.task_file_uri(run_id, "task.json"))).text)["name"]
            assert "__global__" in (await read(c, api.artifact_uri(run_id, cid, "kernel.cu"))).text
            assert json.loads((await read(c, api.artifact_uri(run_id, cid, "candidate.json"))).text)
            for name in api.BEST_EXPORTS:
                assert (await read(c, api.best_export_uri(run_id, name))).text, name
            assert (await read(c, api.output_uri(run_id, cid, case, "out"))).blob  # .npy bytes, base64
            assert json.loads((await read(c, api_pages.BUNDLED_TASK_TEMPLATE.format(task="transpose"))).text)["name"]
            assert (await read(c, api.REPORT_MARKDOWN_TEMPLATE.format(run_id=run_id))).text.startswith(f"# {run_id}")
    anyio.run(main)
