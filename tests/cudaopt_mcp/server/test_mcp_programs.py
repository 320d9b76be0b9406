"""Launch sequences, scratch buffers, templated kernels and __constant__ inputs through the MCP tools and the
CLI, on the cpu backend: what the task declares is shown, what a client proposes is run, and a bad proposal
is an error result naming the field."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio

from tests.cudaopt_mcp.server.test_mcp_server import call, client, text
from tests.harness_tools.test_kernel_programs import CONV, CONV_REFERENCE, TWO_PASS, TWO_PASS_LAUNCHES, _conv_spec, _sum_task

SCRATCH = [{"name": "partials", "dtype": "float32", "count": "ceil_div(n, 256)"}]


def test_a_launch_sequence_task_is_summarised_evaluated_and_re_launched_through_mcp(tmp_path):
    folder = tmp_path / "two_pass"
    folder.mkdir()
    _sum_task(folder)

    async def main():
        async with client(tmp_path / "results") as c:
            created = await call(c, "create_run", task=str(folder))
            assert not created.is_error, text(created)
            run_id = created.structured_content["run_id"]
            summary = (await call(c, "get_run", run_id=run_id)).structured_content["task"]
            assert summary.get("baseline_launch") is None
            assert [s["kernel"] for s in summary["baseline_launches"]] == ["partial_sums", "final_sum"]
            assert summary["baseline_scratch"][0]["name"] == "partials"

            baseline = await call(c, "evaluate", run_id=run_id)
            assert not baseline.is_error, text(baseline)
            # a client's own sequence: the second pass with 64 threads and the count passed as a 64-bit value
            source = TWO_PASS.replace("int count", "long long count")
            steps = [TWO_PASS_LAUNCHES[0], {**TWO_PASS_LAUNCHES[1], "block": [64], "args": [
                "partials", "out", {"value": "ceil_div(n, 256)", "dtype": "int64"}]}]
            mine = await call(c, "evaluate", run_id=run_id, source=source, launches=steps, scratch=SCRATCH)
            assert not mine.is_error, text(mine)
            assert mine.structured_content["correct"]

            wrong = [TWO_PASS_LAUNCHES[0], {**TWO_PASS_LAUNCHES[1], "args": ["partials", "sums", "n"]}]
            bad = await call(c, "evaluate", run_id=run_id, launches=wrong)
            assert bad.is_error and "launches.1.args.1" in text(bad) and "'sums'" in text(bad)

            both = await call(c, "evaluate", run_id=run_id, launches=steps, launch={"grid": [1], "block": [1]})
            assert both.is_error and "either 'launch'" in text(both)

            huge = [{**SCRATCH[0], "count": "n * 1000000000"}]
            too_big = await call(c, "evaluate", run_id=run_id, scratch=huge)
            assert too_big.is_error and "scratch.0 (partials)" in text(too_big) and "at most" in text(too_big)

            missing = [TWO_PASS_LAUNCHES[0], {**TWO_PASS_LAUNCHES[1], "kernel": "final_summ"}]
            absent = await call(c, "evaluate", run_id=run_id, launches=missing)
            assert absent.is_error and "final_summ" in text(absent)

            reserved = await call(c, "evaluate", run_id=run_id, kernel="cudaopt_digest", launch={"grid": [1], "block": [1]})
            assert reserved.is_error and "engine's own" in text(reserved)
    anyio.run(main)


def test_a_constant_input_task_shows_its_signature_without_the_constant(tmp_path):
    folder = tmp_path / "conv"
    folder.mkdir()
    (folder / "conv.cu").write_text(CONV)
    (folder / "reference.py").write_text(CONV_REFERENCE)
    (folder / "task.json").write_text(json.dumps(_conv_spec()))

    async def main():
        async with client(tmp_path / "results") as c:
            created = await call(c, "create_run", task=str(folder))
            summary = created.structured_content["task"] if "task" in created.structured_content else (
                await call(c, "get_run", run_id=created.structured_content["run_id"])).structured_content["task"]
            assert summary["signature"] == 'extern "C" __global__ void conv1d(const float* x, float* y, int n)'
            assert summary["constants"] == {"t": "taps"} and summary["size_defines"] == {"FILTER": "f"}
            result = await call(c, "evaluate", run_id=created.structured_content["run_id"])
            assert not result.is_error, text(result)
    anyio.run(main)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cudaopt_mcp.cli", *args], capture_output=True, text=True, timeout=600,
                          check=False)


def test_cli_eval_runs_a_sequence_and_names_a_bad_one(tmp_path):
    folder = tmp_path / "two_pass"
    folder.mkdir()
    _sum_task(folder)
    good = _cli("eval", str(folder), "--backend", "cpu", "--only", "validation")
    assert good.returncode == 0, good.stdout + good.stderr
    steps = [TWO_PASS_LAUNCHES[0], {**TWO_PASS_LAUNCHES[1], "kernel": "no_such_kernel"}]
    bad = _cli("eval", str(folder), "--backend", "cpu", "--only", "validation", "--launches", json.dumps(steps))
    assert bad.returncode != 0 and "'no_such_kernel' is not an entry point" in bad.stdout + bad.stderr
