"""``profile`` and ``sanitize`` through the MCP server (cpu backend, no GPU), the CLI commands, and the
profile summary in the optimisation prompt (from an ncu report captured on the H200)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
from mcp import Client

from cudaopt_mcp.server.app import build_server
from cudaopt_mcp.service.state import ServerConfig
from harness_tools.inspect.ncu_summary import summarize_profile
from harness_tools.inspect.profile import ProfileResult
from tests.transpose_kernels import OOB_WRITE, RACY_TRANSPOSE, TILE_LOAD_LINE, TILE_STORE_LINE, TILED_LAUNCH

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ncu"
ROOT = Path(__file__).resolve().parents[3]



def client(results: Path) -> Client:
    return Client(build_server(ServerConfig(results_dir=results, backend="cpu", transport="inprocess")))


def test_sanitize_on_the_cpu_backend_finds_out_of_bounds_writes_and_races_with_their_lines(tmp_path):
    async def main():
        async with client(tmp_path / "results") as c:
            run_id = (await c.call_tool("create_run", {"task": "transpose"})).structured_content["run_id"]
            await c.call_tool("evaluate", {"run_id": run_id})
            clean = await c.call_tool("sanitize", {"run_id": run_id, "candidate_id": "c0001"})
            assert not clean.is_error and clean.structured_content["status"] == "clean"
            assert clean.structured_content["cases"] and clean.structured_content["findings"] == 0

            oob = (await c.call_tool("evaluate", {"run_id": run_id, "source": OOB_WRITE})).structured_content
            found = await c.call_tool("sanitize", {"run_id": run_id, "candidate_id": oob["candidate_id"]})
            out = found.structured_content
            assert found.is_error and out["status"] == "findings" and out["findings"] >= 1
            assert "out_of_bounds" in out["text"] and "'out'" in out["text"]

            racy = (await c.call_tool("evaluate", {"run_id": run_id, "source": RACY_TRANSPOSE,
                                                   "launch": TILED_LAUNCH})).structured_content
            raced = (await c.call_tool("sanitize", {"run_id": run_id, "candidate_id": racy["candidate_id"]})).structured_content
            assert raced["status"] == "findings" and "race" in raced["text"]
            # the tile's store and load
            assert f"kernel.cu({TILE_STORE_LINE})" in raced["text"] and f"kernel.cu({TILE_LOAD_LINE})" in raced["text"]
            record = await c.read_resource(raced["record_uri"])
            assert json.loads(record.contents[0].text)["cpu_findings"]

            prof = (await c.call_tool("profile", {"run_id": run_id, "candidate_id": "c0001"})).structured_content
            assert prof["status"] == "unavailable" and "cuda backend" in prof["reason"]
    anyio.run(main)


def test_the_prompt_shows_the_best_candidates_profile(tmp_path):
    results = tmp_path / "results"

    async def main():
        async with client(results) as c:
            run_id = (await c.call_tool("create_run", {"task": "transpose"})).structured_content["run_id"]
            assert (await c.call_tool("evaluate", {"run_id": run_id})).structured_content["new_best"]
            # what `profile` stores on a GPU host, here from the H200 capture of the same baseline
            raw, details = ((FIXTURES / f"transpose_baseline.{p}.csv").read_text() for p in ("raw", "details"))
            record = ProfileResult(status="ok", case="perf_8192x8192", summary=summarize_profile(raw, details),
                                   report_file="profile.ncu-rep")
            (results / run_id / "candidates" / "c0001" / "profile.json").write_text(record.model_dump_json())
            prompt = await c.get_prompt("optimize", {"run_id": run_id, "mode": "reply"})
            text = prompt.messages[0].content.text
            assert "Nsight Compute profile of the best candidate (case perf_8192x8192)" in text
            assert "memory" in text.split("Nsight Compute profile")[1][:600].lower()
            assert "Call `evaluate`" not in text  # reply mode: the client evaluates, the model only answers
    anyio.run(main)


def test_cli_sanitize_and_profile_on_the_cpu_backend(tmp_path):
    results = tmp_path / "results"

    async def make_run():
        async with client(results) as c:
            run_id = (await c.call_tool("create_run", {"task": "reduce_sum"})).structured_content["run_id"]
            await c.call_tool("evaluate", {"run_id": run_id})
    anyio.run(make_run)

    def cudaopt(*args):
        return subprocess.run([sys.executable, "-m", "cudaopt_mcp.cli", *args, "--results", str(results),
                               "--backend", "cpu"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    ok = cudaopt("sanitize", "run-001", "c0001", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["status"] == "clean"
    prof = cudaopt("profile", "run-001", "c0001")
    assert prof.returncode == 1 and "needs the cuda backend" in prof.stdout
    unknown = cudaopt("sanitize", "run-001", "c0099")
    assert unknown.returncode == 2 and "c0099" in unknown.stderr
