"""Resources through the SDK's in-process client on the real engine (cpu backend): every read's MIME type is the
one its link and its template announce, a big kept output is a summary plus bounded parts, and every resource,
template and prompt has a title and a description."""

from __future__ import annotations

import base64
import io
import json

import anyio
import numpy as np
import pytest
from mcp import Client, MCPError
from mcp.shared.uri_template import UriTemplate

from cudaopt_mcp.api_pages import PART_BYTES, READ_CHARS
from cudaopt_mcp.server.app import build_server
from cudaopt_mcp.service.state import ServerConfig

BOTH = ["validation", "performance"]
EMPTY = 'extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {}\n'


def client(results) -> Client:
    return Client(build_server(ServerConfig(results_dir=results, backend="cpu", transport="inprocess")))


async def announced(c: Client, uri: str) -> str:
    """The MIME type of the template (or resource) a URI resolves through: the first that matches, as the
    server tries them."""
    for resource in (await c.list_resources()).resources:
        if str(resource.uri) == uri:
            return resource.mime_type
    for template in (await c.list_resource_templates()).resource_templates:
        if UriTemplate.parse(template.uri_template).match(uri) is not None:
            return template.mime_type
    raise AssertionError(f"no template matches {uri}")


def test_every_link_a_tool_returns_reads_back_with_its_mime_type(tmp_path, small_task, kernels):
    async def main():
        async with client(tmp_path / "results") as c:
            results = []

            async def call(tool: str, **args):
                result = await c.call_tool(tool, args)
                results.append((tool, result))
                return result.structured_content
            run_id = (await call("create_run", task=str(small_task)))["run_id"]
            base = (await call("evaluate", run_id=run_id, roles=BOTH))["candidate_id"]
            await call("compile", run_id=run_id, source=kernels["broken"])
            wrong = (await call("evaluate", run_id=run_id, source=kernels["wrong"], roles=["validation"]))["candidate_id"]
            await call("run", run_id=run_id, candidate_id=base, roles=BOTH)
            await call("compare", run_id=run_id, candidate_id=wrong)
            await call("time", run_id=run_id, candidate_id=base, reps=3, warmup=0)
            await call("get_run", run_id=run_id)
            await call("best", run_id=run_id)
            await call("sanitize", run_id=run_id, candidate_id=base, cases=["val_odd_33x65"])
            links = [(tool, b) for tool, r in results for b in r.content if b.type == "resource_link"]
            assert {tool for tool, _ in links} >= {"create_run", "evaluate", "compile", "run", "compare", "time",
                                                   "get_run", "best", "sanitize"}
            assert len(links) >= 15
            for tool, link in links:
                read = (await c.read_resource(str(link.uri))).contents[0]
                assert read.mime_type == link.mime_type == await announced(c, str(link.uri)), (tool, link.uri)
            mimes = {link.mime_type for _, link in links}
            assert {"text/x-cuda", "application/json", "text/plain"} <= mimes
    anyio.run(main)


def test_every_template_announces_what_its_reads_return(tmp_path, small_task):
    async def main():
        async with client(tmp_path / "results") as c:
            run_id = (await c.call_tool("create_run", {"task": str(small_task)})).structured_content["run_id"]
            cid = (await c.call_tool("evaluate", {"run_id": run_id, "roles": BOTH})).structured_content["candidate_id"]
            await c.call_tool("run", {"run_id": run_id, "candidate_id": cid, "roles": BOTH})
            run_dir = tmp_path / "results" / run_id
            folder = run_dir / "candidates" / cid
            # the files other tools (profile, sanitize on a GPU) and task authors leave, one of each suffix
            (folder / "profile.details.csv").write_text("section,metric,value\nSOL,dram,12.5\n")
            (folder / "profile.ncu-rep").write_bytes(b"NVPROF\x00\x01\x02")
            (folder / "sanitize-racecheck.log").write_text("========= RACECHECK SUMMARY: 0 hazards\n")
            (folder / "notes.txt").write_text("free text\n")
            (folder / "README").write_text("no suffix at all\n")
            (run_dir / "task" / "helpers.cuh").write_text("#pragma once\n")
            np.save(run_dir / "task" / "expected.npy", np.arange(6, dtype=np.float32))
            runs = f"cudaopt://runs/{run_id}"
            uris = {f"{runs}/candidates/{cid}/{name}": mime for name, mime in (
                ("kernel.cu", "text/x-cuda"), ("candidate.json", "application/json"), ("compile.log", "text/plain"),
                ("compile.json", "application/json"), ("evaluation.json", "application/json"),
                ("execution.json", "application/json"), ("profile.details.csv", "text/csv"),
                ("profile.ncu-rep", "application/octet-stream"), ("sanitize-racecheck.log", "text/plain"),
                ("notes.txt", "text/plain"), ("README", "text/plain"))}
            uris |= {f"{runs}/task/{name}": mime for name, mime in (
                ("task.json", "application/json"), ("baseline.cu", "text/x-cuda"), ("tuned.cu", "text/x-cuda"),
                ("helpers.cuh", "text/x-cuda"), ("reference.py", "text/x-python"),
                ("expected.npy", "application/octet-stream"))}
            uris |= {f"{runs}/best/best_kernel.cu": "text/x-cuda", f"{runs}/best/best_launch.json": "application/json",
                     runs: "application/json", "cudaopt://runs": "application/json",
                     f"{runs}/history": "application/x-ndjson",
                     f"{runs}/candidates/{cid}/outputs/perf_64x96/out": "application/octet-stream",
                     f"{runs}/candidates/{cid}/outputs/perf_64x96/out/summary": "application/json",
                     "cudaopt://tasks/transpose": "application/json"}
            for uri, mime in uris.items():
                read = (await c.read_resource(uri)).contents[0]
                assert read.mime_type == mime == await announced(c, uri), uri
                assert hasattr(read, "blob") == (mime == "application/octet-stream"), uri
            # binary files come back as their bytes; a catch-all template serves other names as text
            expected = (await c.read_resource(f"{runs}/task/expected.npy")).contents[0]
            assert np.load(io.BytesIO(base64.b64decode(expected.blob))).tolist() == [0, 1, 2, 3, 4, 5]
            assert (await c.read_resource(f"{runs}/candidates/{cid}/README")).contents[0].text == "no suffix at all\n"
    anyio.run(main)


def test_a_big_kept_output_is_a_summary_and_parts_and_a_small_one_is_whole(tmp_path):
    async def main():
        async with client(tmp_path / "results") as c:
            run_id = (await c.call_tool("create_run", {"task": "transpose"})).structured_content["run_id"]
            cid = (await c.call_tool("compile", {"run_id": run_id})).structured_content["candidate_id"]
            ran = (await c.call_tool("run", {"run_id": run_id, "candidate_id": cid, "roles": BOTH})).structured_content
            assert "perf_cpu_1024x1024" in ran["outputs_kept"] and "val_odd_33x65" in ran["outputs_kept"]
            base = f"cudaopt://runs/{run_id}/candidates/{cid}/outputs"
            path = tmp_path / "results" / run_id / "candidates" / cid / "outputs" / "perf_cpu_1024x1024" / "out.npy"
            stored = path.read_bytes()
            assert len(stored) > 4 << 20  # 1024 x 1024 float32, a real kept output

            summary = json.loads((await c.read_resource(f"{base}/perf_cpu_1024x1024/out/summary")).contents[0].text)
            parts = -(-len(stored) // PART_BYTES)
            assert summary["dtype"] == "float32" and summary["shape"] == [1024, 1024] and summary["elements"] == 1 << 20
            assert summary["bytes"] == len(stored) and summary["parts"] == parts and summary["nan_count"] == 0
            assert -1 <= summary["min"] < -0.99 and 0.99 < summary["max"] <= 1  # inputs are uniform in [-1, 1]
            assert summary["first_part_uri"] == f"{base}/perf_cpu_1024x1024/out?part=1"

            with pytest.raises(MCPError) as whole:
                await c.read_resource(f"{base}/perf_cpu_1024x1024/out")
            message = whole.value.error.message
            assert whole.value.error.code == -32602 and f"in {parts} parts" in message and "float32 [1024, 1024]" in message
            assert f"{base}/perf_cpu_1024x1024/out/summary" in message and len(message) < 1000
            got = []
            for part in range(1, parts + 1):
                read = (await c.read_resource(f"{base}/perf_cpu_1024x1024/out?part={part}")).contents[0]
                assert read.mime_type == "application/octet-stream" and len(read.blob) <= READ_CHARS
                got.append(base64.b64decode(read.blob))
            assert b"".join(got) == stored

            small = (await c.read_resource(f"{base}/val_odd_33x65/out")).contents[0]  # 8 KiB: whole
            assert np.load(io.BytesIO(base64.b64decode(small.blob))).shape == (65, 33)

            # a kernel that writes nothing leaves the poison: the summary counts it, and has no finite range
            empty = (await c.call_tool("evaluate", {"run_id": run_id, "source": EMPTY, "roles": ["performance"]}))
            nothing = json.loads((await c.read_resource(
                f"cudaopt://runs/{run_id}/candidates/{empty.structured_content['candidate_id']}/outputs/"
                "perf_cpu_1024x1024/out/summary")).contents[0].text)
            assert nothing["nan_count"] == nothing["elements"] == 1 << 20 and "min" not in nothing and "max" not in nothing
    anyio.run(main)


def test_resources_templates_and_prompts_have_titles_and_descriptions(tmp_path):
    async def main():
        async with client(tmp_path / "results") as c:
            listed = [*(await c.list_resources()).resources, *(await c.list_resource_templates()).resource_templates,
                      *(await c.list_prompts()).prompts]
            assert len(listed) >= 20
            for item in listed:
                assert item.title and item.description and len(item.description) > 40, item
            titles = [t.title for t in (await c.list_resource_templates()).resource_templates]
            assert len(set(titles)) == len(titles), titles  # a person can tell them apart
            paged = {t.uri_template: t.description for t in (await c.list_resource_templates()).resource_templates}
            assert "?page=1" in paged["cudaopt://runs/{run_id}/history{?page}"]
            assert "?part=N" in paged["cudaopt://runs/{run_id}/candidates/{candidate_id}/{name}.log{?part}"]
    anyio.run(main)
