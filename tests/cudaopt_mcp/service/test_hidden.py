"""check_hidden: a kernel tuned to the validation sizes fails the hidden cases, a correct one passes, the record
stays private; on the cpu backend, with a real run store, the real engine and the in-process MCP client."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import anyio
import numpy as np
import pytest
from mcp import Client, MCPError

from cudaopt_mcp.api import HiddenVerdict
from cudaopt_mcp.server.app import build_server
from cudaopt_mcp.service import evaluations, run_creation
from cudaopt_mcp.service.arguments import CandidateArgs, TimingArgs
from cudaopt_mcp.service.candidates import load_candidate
from cudaopt_mcp.service.hidden import (
    PRIVATE_RECORD,
    check_hidden,
    compile_meanwhile,
    fitting_shapes,
    public_task_json,
    read_private_record,
)
from cudaopt_mcp.service.state import ServerConfig, ServerState
from harness_tools import resolve_task
from harness_tools.check.generated_inputs import generator_rng
from harness_tools.check.hidden_shapes import hidden_shapes, hidden_task
from harness_tools.compile.case_variants import compile_variants
from harness_tools.task.candidate import tuned
from harness_tools.task.spec import LaunchSpec

# Validation sizes are all multiples of 256: a kernel that assumes so passes them.
SCALE_TASK = {
    "name": "scale256", "description": "y = 3 x for a float32 vector of any length n", "kernel_name": "scale",
    "params": [
        {"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n"], "role": "in"},
        {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["n"], "role": "out"},
        {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"},
    ],
    "sizes": ["n"],
    "cases": [
        {"name": "val_a", "role": "validation", "sizes": {"n": 256}},
        {"name": "val_b", "role": "validation", "sizes": {"n": 2048}},
        {"name": "val_c", "role": "validation", "sizes": {"n": 6144}},
    ],
    "hidden": {"cases": [{"name": "secret", "sizes": {"n": 7777}}]},
    "reference": {"kind": "numpy"},
    "tolerance": {"float32": {"atol": 1e-6, "rtol": 1e-6}},
    "baseline": {"source": "baseline.cu", "launch": {"grid": ["ceil_div(n, 256)"], "block": [256]}},
}
CORRECT = """extern "C" __global__ void scale(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 3.0f * x[i];
}
"""
# No bounds check and a grid of n / 256 blocks: right exactly when n is a multiple of 256.
MULTIPLE_OF_256 = """extern "C" __global__ void scale(const float* x, float* y, int n)
{
    y[blockIdx.x * 256 + threadIdx.x] = 3.0f * x[blockIdx.x * 256 + threadIdx.x];
}
"""
TUNED_LAUNCH = LaunchSpec(grid=["max(n // 256, 1)"], block=[256])
REFERENCE = "def reference(inputs, sizes):\n    return {'y': 3.0 * inputs['x']}\n"


def write_task(folder: Path, spec: dict = SCALE_TASK) -> Path:
    folder.mkdir(parents=True)
    (folder / "task.json").write_text(json.dumps(spec, indent=1))
    (folder / "baseline.cu").write_text(CORRECT)
    (folder / "reference.py").write_text(REFERENCE)
    return folder


def hidden_values(task) -> set[int]:
    return {v for s in hidden_shapes(task.spec, "cpu") for v in s.case.sizes.values()}


def mentions(text: str, value: int) -> bool:
    return re.search(rf"(?<![\d.]){value}(?![\d.])", text) is not None


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    s = ServerState.open(ServerConfig(results_dir=tmp_path_factory.mktemp("results"), backend="cpu"))
    yield s
    s.close()


@pytest.fixture(scope="module")
def run(state, tmp_path_factory):
    folder = write_task(tmp_path_factory.mktemp("tasks") / "scale256")
    return run_creation.create_run(state, str(folder), None, None, None).run_id


def _validated(state, run_id, source, launch=TUNED_LAUNCH):
    out = evaluations.execute_step(state, "evaluate", run_id, candidate=CandidateArgs(source=source, launch=launch),
                                   timing=TimingArgs(roles=["validation"]))
    assert out.correct, out.failure
    return out.candidate_id


def _check(state, run_id, candidate_id) -> HiddenVerdict:
    with state.store.locked(run_id):
        task = state.store.task(run_id)
        return check_hidden(state, run_id, task, load_candidate(state, run_id, candidate_id), candidate_id)


def test_a_kernel_tuned_to_the_validation_sizes_fails_the_hidden_cases(state, run):
    cid = _validated(state, run, MULTIPLE_OF_256)
    verdict = _check(state, run, cid)
    task = state.store.task(run)
    assert not verdict.passed and verdict.checked == len(hidden_shapes(task.spec, "cpu")) == 7
    assert "task-hidden" in verdict.failed_classes and {"odd", "prime", "tile+1"} <= set(verdict.failed_classes)
    assert verdict.failed_classes == sorted(verdict.failed_classes)
    assert not [v for v in hidden_values(task) if mentions(verdict.message, v)], verdict.message
    assert "failed 7 of 7 hidden cases" in verdict.message
    record = read_private_record(state, run, cid)
    assert record["verdict"] == verdict.model_dump()
    assert {c["sizes"]["n"] for c in record["cases"]} == hidden_values(task)
    assert all(not c["passed"] for c in record["evaluation"]["cases"])


def test_a_correct_kernel_passes_and_is_recorded(state, run):
    cid = _validated(state, run, CORRECT, LaunchSpec(grid=["ceil_div(n, 256)"], block=[256]))
    verdict = _check(state, run, cid)
    assert verdict.passed and verdict.checked == 7 and verdict.failed_classes == []
    assert verdict.message == "passed all 7 hidden cases"
    assert (state.store.candidate_dir(run, cid) / PRIVATE_RECORD).is_file()


def test_no_hidden_case_passes_with_zero_checked(state, tmp_path):
    spec = {**SCALE_TASK, "name": "scale_open", "hidden": {"derive": False}}
    run_id = run_creation.create_run(state, str(write_task(tmp_path / "open", spec)), None, None, None).run_id
    cid = _validated(state, run_id, MULTIPLE_OF_256)
    verdict = _check(state, run_id, cid)
    assert verdict.passed and verdict.checked == 0 and "no hidden case" in verdict.message


def test_the_private_record_and_the_hidden_cases_are_not_served(state, run):
    cid = state.store.candidate_ids(run)[0]
    assert (state.store.candidate_dir(run, cid) / PRIVATE_RECORD).is_file()  # written by the tests above
    base = f"cudaopt://runs/{run}/candidates/{cid}"
    attempts = [f"{base}/{PRIVATE_RECORD}", f"{base}/%2E{PRIVATE_RECORD[1:]}", f"{base}/outputs/..%2F{PRIVATE_RECORD}",
                f"{base}/outputs/../{PRIVATE_RECORD}", f"cudaopt://runs/{run}/task/..%2Fcandidates%2F{cid}%2F{PRIVATE_RECORD}",
                f"{base}/hidden-check.json"]

    async def main():
        async with Client(build_server(ServerConfig(results_dir=state.config.results_dir, backend="cpu",
                                                    transport="inprocess"))) as c:
            for uri in attempts:
                with pytest.raises(MCPError):
                    await c.read_resource(uri)
            served = (await c.read_resource(f"cudaopt://runs/{run}/task/task.json")).contents[0].text
            baseline = (await c.read_resource(f"cudaopt://runs/{run}/task/baseline.cu")).contents[0].text
            return served, baseline

    served, baseline = anyio.run(main)
    assert "hidden" not in json.loads(served) and "secret" not in served and not mentions(served, 7777)
    assert json.loads(served)["cases"] == SCALE_TASK["cases"] and baseline == CORRECT
    # the run's own copy still has them: the check reads it
    on_disk = (state.store.run_dir(run) / "task" / "task.json").read_text()
    assert "secret" in on_disk and "secret" not in public_task_json(on_disk)


def test_public_task_json_leaves_a_task_without_hidden_cases_as_it_is():
    text = json.dumps({k: v for k, v in SCALE_TASK.items() if k != "hidden"}, indent=1)
    assert public_task_json(text) == text


GENERATOR = """import numpy as np

LOG = {log!r}


def make_inputs(sizes, rng):
    x = rng.standard_normal(sizes["n"]).astype(np.float32)
    with open(LOG, "a") as f:
        f.write(f"{{sizes['n']}} {{float(x[0])!r}}\\n")
    return {{"x": x}}
"""


def _drawn(log: Path, sizes: set[int]) -> list[str]:
    lines = log.read_text().splitlines() if log.is_file() else []
    return [line for line in lines if int(line.split()[0]) in sizes]


def test_each_hidden_check_finds_its_fresh_inputs_made_ahead_and_none_is_made_twice(state, tmp_path):
    log = tmp_path / "drawn.log"
    folder = write_task(tmp_path / "generated", {**SCALE_TASK, "inputs": {"file": "gen.py", "function": "make_inputs"}})
    (folder / "gen.py").write_text(GENERATOR.format(log=str(log)))
    run_id = run_creation.create_run(state, str(folder), None, None, None).run_id
    cid = _validated(state, run_id, CORRECT, LaunchSpec(grid=["ceil_div(n, 256)"], block=[256]))
    task = state.store.task(run_id)
    sizes, shapes = hidden_values(task), hidden_shapes(task.spec, "cpu")

    assert _check(state, run_id, cid).passed  # its own seed, then the next check's inputs are made in a thread
    deadline = time.monotonic() + 120
    while len(_drawn(log, sizes)) < 2 * len(shapes) and time.monotonic() < deadline:
        time.sleep(0.05)
    made_ahead = set(_drawn(log, sizes))
    assert len(made_ahead) == 2 * len(shapes)  # two seeds' worth, each case once

    assert _check(state, run_id, cid).passed
    seed = read_private_record(state, run_id, cid)["evaluation"]["seed"]
    for shape in shapes:  # what the second check's seed draws (as gen.py does) was made ahead, not drawn again
        n = shape.case.sizes["n"]
        first = float(generator_rng(seed, shape.case).standard_normal(n).astype(np.float32)[0])
        assert f"{n} {first!r}" in made_ahead
    drawn = _drawn(log, sizes)
    assert len(drawn) == len(set(drawn))  # no seed's case was made twice


def test_a_hidden_checks_compiles_are_made_while_a_head_to_head_times(state):
    task = resolve_task(str(Path(__file__).parents[3] / "examples" / "matmul"))  # WIDTH is #defined per case
    config = {"block_size_x": 16, "block_size_y": 4, "tile_size_x": 2, "tile_size_y": 4}
    cand = tuned(task, config).model_copy(update={"defines": {**config, "CUDAOPT_NONCE": time.time_ns() % 999983}})
    shapes = fitting_shapes(state, task, hidden_shapes(task.spec, "cpu"))[0]
    checked = hidden_task(task, shapes)
    cases, arch = checked.spec.cases_for(["validation"], "cpu"), state.device_info().arch
    assert shapes and cases

    compile_meanwhile(state, task, cand)
    for thread in threading.enumerate():
        if thread.name == "cudaopt-hidden-compile":
            thread.join(120)
    made = compile_variants(cand, checked, cases, arch)
    assert len(made) == len(cases) and all(r.ok and r.cached for r in made), [(r.ok, r.cached) for r in made]
