"""The engine's budgets on the cpu backend: memory is checked before anything is drawn, launches before
anything runs, and ``timeout_s`` bounds the whole evaluation (compile plus every case)."""

from __future__ import annotations

import copy
import json
import time

import pytest

from harness_tools.backends.contract import DeviceInfo
from harness_tools.check.inputs import available_host_bytes, case_footprint
from harness_tools.errors import BackendError
from harness_tools.evaluation import EvaluationConfig, check_memory, evaluate
from harness_tools.task import candidate as candidates
from harness_tools.task.loading import load_task, resolve_task
from tests.harness_tools.task.test_spec import GOOD, make_task

REFERENCE = """
def reference(inputs, sizes):
    return {"y": 2.0 * inputs["x"]}
"""

# 65,536 copies of the loop body: NVRTC needs about a minute for it (an attacker's evaluation took 98 s)
UNROLLED = """
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 65536; ++i) acc += in[(i * 7) % (rows * cols)] * (float)i;
    if (r < rows && c < cols) out[(size_t)c * rows + r] = in[(size_t)r * cols + c] + acc * 0.0f;
}
"""
# spins for minutes on a CPU
SPIN = """
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols)
{
    volatile float sink = 0.0f;
    for (long long i = 0; i < 400000000000LL; ++i) sink += 1.0f;
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) out[(size_t)c * rows + r] = in[(size_t)r * cols + c] + sink * 0.0f;
}
"""


def big_task(tmp_path):
    """The scale task plus a performance case of 2**36 floats per buffer (275 GB each)."""
    spec = copy.deepcopy(GOOD)
    for p in spec["params"][:2]:
        p["shape"] = ["N * 65536"]
    spec["params"][2].update(dtype="int64", value="N * 65536")
    spec["baseline"]["launch"]["grid"] = ["ceil_div(N * 65536, 256)"]
    spec["cases"] = [{"name": "small", "role": "validation", "sizes": {"N": 2}},
                     {"name": "perf_big", "role": "performance", "sizes": {"N": 1 << 20}}]
    folder = make_task(tmp_path / "big", spec)
    (folder / "reference.py").write_text(REFERENCE)
    (folder / "baseline.cu").write_text((folder / "baseline.cu").read_text().replace("int n", "long long n"))
    return load_task(folder)


def test_a_case_bigger_than_host_memory_is_refused_before_anything_is_drawn(tmp_path, cpu_backend):
    task = big_task(tmp_path)
    need = case_footprint(task.spec, task.spec.case("perf_big"), buffers_in_host_memory=True)
    assert need.buffers == 2 * ((1 << 36) * 4 + 4096)
    start = time.perf_counter()
    with pytest.raises(BackendError) as info:
        evaluate(task, candidates.baseline(task), cpu_backend, EvaluationConfig())
    assert time.perf_counter() - start < 5
    message = str(info.value)
    assert message.startswith(f"case perf_big needs about {need.host / 1e9:.1f} GB of host memory")
    assert f"this machine has {available_host_bytes() / 1e9:.1f} GB of memory available" in message
    assert "roles=['validation']" in message and "--only validation" in message
    # the cases that fit still run
    small = evaluate(task, candidates.baseline(task), cpu_backend, EvaluationConfig(roles=["validation"]))
    assert small.correct, small.failure


def test_a_case_bigger_than_the_gpu_is_refused_with_what_the_gpu_has(tmp_path):
    task = big_task(tmp_path)
    gpu = DeviceInfo(backend="cuda", name="test GPU", arch="sm_90", memory_bytes=int(150e9), memory_free_bytes=int(139.1e9))
    with pytest.raises(BackendError, match=r"case perf_big needs 549\.8 GB of buffers; this GPU has 139\.1 GB free"):
        check_memory(task, task.spec.cases, "cuda", gpu)
    total_only = gpu.model_copy(update={"memory_free_bytes": None})
    with pytest.raises(BackendError, match=r"this GPU has 150\.0 GB in total"):
        check_memory(task, task.spec.cases, "cuda", total_only)
    check_memory(task, [task.spec.case("small")], "cuda", gpu)  # fits: no error


def test_a_launch_outside_cuda_limits_fails_every_case_without_running_it(cpu_backend):
    task = resolve_task("transpose")
    base = candidates.baseline(task)
    cand = base.model_copy(update={"launch": base.launch.model_copy(update={"block": [64, 32]})})
    result = evaluate(task, cand, cpu_backend, EvaluationConfig(roles=["validation"]))
    assert not result.correct and result.cases
    for case in result.cases:
        assert case.status == "run_error" and case.run is None
        assert "block (64, 32, 1) has 2048 threads; CUDA allows at most 1024" in case.message


def test_a_compile_that_outlasts_the_budget_is_stopped_at_the_budget(cpu_backend):
    task = resolve_task("transpose")
    cand = candidates.from_kernel_source(task, task.spec.baseline, UNROLLED)
    start = time.perf_counter()
    result = evaluate(task, cand, cpu_backend, EvaluationConfig(roles=["validation"], timeout_s=4))
    assert time.perf_counter() - start < 15  # a minute without the budget
    assert not result.compile.ok and not result.cases
    assert "NVRTC did not finish within" in result.failure
    assert "the evaluation's budget of 4 s, timeout_s, was spent compiling" in result.failure


def test_a_case_gets_only_what_is_left_of_the_budget_and_the_rest_are_skipped(cpu_backend):
    task = resolve_task("transpose")
    cand = candidates.from_kernel_source(task, task.spec.baseline, SPIN)
    start = time.perf_counter()
    result = evaluate(task, cand, cpu_backend, EvaluationConfig(roles=["validation"], timeout_s=12))
    elapsed = time.perf_counter() - start
    assert elapsed < 25
    first, rest = result.cases[0], result.cases[1:]
    assert first.status == "run_error" and first.run.status == "timeout"
    assert "the evaluation's budget of 12 s (timeout_s) ran out during this case" in first.message
    assert rest and all(c.status == "skipped" for c in rest)
    assert all(f"ran out during case {first.name}" in c.message for c in rest)


def test_with_the_budget_spent_before_the_first_case_every_case_says_so(cpu_backend):
    task = resolve_task("transpose")
    cand = candidates.baseline(task)
    assert evaluate(task, cand, cpu_backend, EvaluationConfig(roles=["validation"], timing=None)).correct  # compiled
    result = evaluate(task, cand, cpu_backend, EvaluationConfig(roles=["validation"], timeout_s=0.05))
    assert result.compile.ok and not result.correct
    assert all(c.status == "skipped" and "was spent before this case started" in c.message for c in result.cases)
    assert "give a larger timeout_s" in result.failure


def test_cli_eval_refuses_a_case_too_big_for_this_machine(tmp_path, capsys):
    from cudaopt_mcp.cli.main import main

    task = big_task(tmp_path)
    code = main(["eval", str(task.folder), "--backend", "cpu", "--only", "performance"])
    err = capsys.readouterr().err
    assert code == 2 and "case perf_big needs about" in err and "GB of memory available" in err
    assert "Traceback" not in err and "MemoryError" not in err


def test_cli_eval_stops_a_slow_compile_at_its_timeout(tmp_path, capsys):
    from cudaopt_mcp.cli.main import main

    kernel = tmp_path / "unrolled.cu"
    kernel.write_text(UNROLLED.replace("(float)i", "(float)(i + 1)"))  # not the compile cached by another test
    start = time.perf_counter()
    code = main(["eval", "transpose", "--backend", "cpu", "--kernel", str(kernel), "--timeout", "4", "--json"])
    assert time.perf_counter() - start < 20
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and "was spent compiling" in out["failure"]


@pytest.mark.gpu
def test_a_case_bigger_than_the_gpu_is_refused_on_a_real_gpu(tmp_path, cuda_backend):
    task = big_task(tmp_path)
    info = cuda_backend.device_info()
    with pytest.raises(BackendError) as refused:
        evaluate(task, candidates.baseline(task), cuda_backend, EvaluationConfig())
    assert str(refused.value).startswith("case perf_big needs 549.8 GB of buffers; this GPU has")
    assert info.memory_free_bytes is not None and 0 < info.memory_free_bytes < info.memory_bytes
    assert f"this GPU has {info.memory_free_bytes / 1e9:.1f} GB free" in str(refused.value)
    small = evaluate(task, candidates.baseline(task), cuda_backend, EvaluationConfig(roles=["validation"]))
    assert small.correct, small.failure


@pytest.mark.parametrize("forgery", ["path elsewhere", "link in place"])
def test_output_paths_a_backend_returns_are_read_only_inside_the_case_folder(tmp_path, cpu_backend, forgery):
    """The worker runs candidate code: an answer naming a file elsewhere, or an output swapped for a link to
    one, must not make the engine read it."""
    import os

    import numpy as np

    outside = tmp_path / "elsewhere.npy"
    np.save(outside, np.zeros((33, 65), np.float32))

    class Forging:
        name = "cpu"

        def device_info(self):
            return cpu_backend.device_info()

        def run_case(self, request, timeout_s):
            run = cpu_backend.run_case(request, timeout_s)
            if forgery == "path elsewhere":
                run.outputs = {name: str(outside) for name in run.outputs}
            else:
                for path in run.outputs.values():
                    os.symlink(outside, path + ".link")
                    os.replace(path + ".link", path)
            return run

        def close(self):
            pass

    task = resolve_task("transpose")
    result = evaluate(task, candidates.baseline(task), Forging(), EvaluationConfig(roles=["validation"]))
    assert not result.correct
    assert all(c.status == "run_error" and "no output file for out" in c.message for c in result.cases)
