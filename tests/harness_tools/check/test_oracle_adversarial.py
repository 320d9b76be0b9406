"""Adversarial kernels through the public ``evaluate``: out-of-bounds reads and writes must not pass.

Each kernel runs on the cpu backend (CI) and, as a gpu-marked twin, on the cuda backend. Validation cases
place every buffer so its data ends within 15 bytes of an inaccessible page (docs/oracle.md), so cases come
in two sizes: a "slack" size whose byte count is not a multiple of 16 (the first element past the end lies
in the checked slack) and an "edge" size whose first element past the end lies on the inaccessible page.
Slack cases come first: on cuda a fault ends the worker and the remaining cases are skipped.
The ids here are the rows of the table in docs/oracle.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness_tools import evaluate
from harness_tools.evaluation import EvaluationConfig, EvaluationResult
from harness_tools.task import candidate as candidates
from harness_tools.task.loading import load_task

BACKENDS = ["cpu_backend", pytest.param("cuda_backend", marks=pytest.mark.gpu)]
VALIDATION = EvaluationConfig(roles=["validation"], seed=2024, timeout_s=120)
ONE_PER_ELEMENT = {"grid": ["ceil_div(n, 256)"], "block": [256]}


def _vector_task(folder: Path, kernel_name: str, source: str, reference: str, sizes: list[int],
                 launch: dict | None = None, dtype: str = "float32"):
    """A task `kernel(const T* in, T* out, int n)` (T of ``dtype``) with one validation case per size."""
    params = [{"kind": "buffer", "name": "in", "dtype": dtype, "shape": ["n"], "role": "in"},
              {"kind": "buffer", "name": "out", "dtype": dtype, "shape": ["n"], "role": "out"},
              {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}]
    cases = [{"name": f"n{n}", "role": "validation", "sizes": {"n": n}} for n in sizes]
    return _task(folder, kernel_name, source, params, ["n"], cases,
                 f"def reference(inputs, sizes):\n    x = inputs['in']\n    return {{'out': {reference}}}\n",
                 launch or ONE_PER_ELEMENT)


def _task(folder: Path, kernel_name: str, source: str, params: list, sizes: list, cases: list, reference: str,
          launch: dict):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.cu").write_text(source)
    (folder / "reference.py").write_text("import numpy as np\n\n" + reference)
    (folder / "task.json").write_text(json.dumps({
        "name": kernel_name, "description": "adversarial kernel", "kernel_name": kernel_name, "sizes": sizes,
        "params": params, "cases": cases, "reference": {"kind": "numpy"},
        "tolerance": {"float32": {"atol": 1e-4, "rtol": 1e-4}},
        "baseline": {"source": "kernel.cu", "launch": launch},
    }))
    return load_task(folder)


def _run(request, backend_fixture: str, task) -> tuple[str, EvaluationResult]:
    backend = request.getfixturevalue(backend_fixture)
    return backend.name, evaluate(task, candidates.baseline(task), backend, VALIDATION)


def _assert_faulted_on(case, backend: str, names: set[str], where: str = "") -> None:
    """The case stopped with an out-of-bounds fault: cpu names the argument; cuda gets an illegal address."""
    assert case.status == "run_error", (case.status, case.message)
    if backend == "cpu":
        assert case.run.error == "CPU_OUT_OF_BOUNDS", case.run
        named = {n for n in names if f"argument '{n}'" in case.run.message}
        assert named, case.run.message
        assert where in case.run.message
    else:
        assert case.run.error == "CUDA_ERROR_ILLEGAL_ADDRESS", case.run
        assert "unmapped page" in case.run.message and case.run.worker_restarted


def _assert_mismatch_at(case, buffer: str, index: int) -> None:
    assert case.status == "mismatch", (case.status, case.message)
    out = next(o for o in case.outputs if not o.passed)
    assert out.buffer == buffer and out.first_mismatch.flat_index == index and out.nonfinite >= 1, out


# ---- (i) thread 0 also copies in[n] to out[n] ------------------------------------------------------------
COPY_PAST_END = """
extern "C" __global__ void copy(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
    if (i == 0) out[n] = in[n];
}
"""


@pytest.mark.parametrize("backend_fixture", BACKENDS)
def test_copy_past_both_ends(request, tmp_path, backend_fixture):
    task = _vector_task(tmp_path, "copy", COPY_PAST_END, "x.copy()", [1001, 1024])
    backend, result = _run(request, backend_fixture, task)
    slack, edge = result.cases
    # the input's slack holds NaN, the output's a finite pattern: the copied bytes change it
    assert slack.status == "corrupted" and slack.run.overruns == ["out"], slack
    _assert_faulted_on(edge, backend, {"in"}, "read")
    assert not result.correct


# ---- (ii) LayerNorm whose normalising loop runs to c <= cols ---------------------------------------------
LAYERNORM_OFF_BY_ONE = """
extern "C" __global__ void layernorm(const float* x, const float* gamma, const float* beta, float* y, int rows,
                                     int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + (size_t)r * cols;
    float mean = 0.f, var = 0.f;
    for (int c = 0; c < cols; ++c) mean += xr[c];
    mean /= cols;
    for (int c = 0; c < cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    float rstd = rsqrtf(var / cols + 1e-5f);
    for (int c = 0; c <= cols; ++c)  // one too many: reads x, gamma, beta one past, writes y one past
        y[(size_t)r * cols + c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
}
"""
LAYERNORM_REFERENCE = """def reference(inputs, sizes):
    x = inputs['x']
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return {'y': (x - mean) / np.sqrt(var + 1e-5) * inputs['gamma'] + inputs['beta']}
"""


def _layernorm_task(folder: Path):
    vec = {"kind": "buffer", "dtype": "float32", "shape": ["cols"], "role": "in"}
    params = [{"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["rows", "cols"], "role": "in"},
              {**vec, "name": "gamma"}, {**vec, "name": "beta"},
              {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["rows", "cols"], "role": "out"},
              {"kind": "scalar", "name": "rows", "dtype": "int32", "value": "rows"},
              {"kind": "scalar", "name": "cols", "dtype": "int32", "value": "cols"}]
    cases = [{"name": "slack_3x63", "role": "validation", "sizes": {"rows": 3, "cols": 63}},
             {"name": "edge_4x64", "role": "validation", "sizes": {"rows": 4, "cols": 64}}]
    return _task(folder, "layernorm", LAYERNORM_OFF_BY_ONE, params, ["rows", "cols"], cases, LAYERNORM_REFERENCE,
                 {"grid": [1], "block": [32]})


@pytest.mark.parametrize("backend_fixture", BACKENDS)
def test_layernorm_off_by_one(request, tmp_path, backend_fixture):
    backend, result = _run(request, backend_fixture, _layernorm_task(tmp_path))
    slack, edge = result.cases
    assert slack.status == "corrupted" and slack.run.overruns == ["y"], slack
    # row 0 already reads gamma[cols] and beta[cols] past their ends (x[cols] is row 1's first element)
    _assert_faulted_on(edge, backend, {"gamma", "beta"}, "read")


# ---- (iii) every thread stages in[i] in shared memory, the bounds check comes after ------------------------
DISCARDED_READ = """
extern "C" __global__ void scale(const float* in, float* out, int n) {
    __shared__ float tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = in[i];  // the grid over-covers n: threads past the end read, then drop the value
    __syncthreads();
    if (i < n) out[i] = 2.f * tile[threadIdx.x];
}
"""


@pytest.mark.parametrize("backend_fixture", BACKENDS)
def test_discarded_read_past_the_end(request, tmp_path, backend_fixture):
    task = _vector_task(tmp_path, "scale", DISCARDED_READ, "2 * x", [1000])
    backend, result = _run(request, backend_fixture, task)
    _assert_faulted_on(result.cases[0], backend, {"in"}, "just past the end")


# ---- (iv) out[i] = in[i] + in[i + 1] for every i: the last element adds in[n] --------------------------------
USED_READ = """
extern "C" __global__ void pair_sum(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] + in[i + 1];
}
"""


@pytest.mark.parametrize("backend_fixture", BACKENDS)
def test_read_past_the_end_used_in_arithmetic(request, tmp_path, backend_fixture):
    task = _vector_task(tmp_path, "pair_sum", USED_READ, "x + np.append(x[1:], 0)", [1001, 1024])
    backend, result = _run(request, backend_fixture, task)
    slack, edge = result.cases
    _assert_mismatch_at(slack, "out", 1000)  # in[1001] is the input's slack: NaN
    _assert_faulted_on(edge, backend, {"in"}, "just past the end")


# ---- (v) out[i] = in[i] + in[i - 1] for every i: the first element adds in[-1] ------------------------------
READ_BEFORE_START = USED_READ.replace("pair_sum", "pair_sum_back").replace("in[i + 1]", "in[i - 1]")


@pytest.mark.parametrize("backend_fixture", BACKENDS)
def test_read_before_the_start(request, tmp_path, backend_fixture):
    task = _vector_task(tmp_path, "pair_sum_back", READ_BEFORE_START, "x + np.insert(x[:-1], 0, 0)", [1000, 1024])
    backend, result = _run(request, backend_fixture, task)
    padded, page = result.cases
    _assert_mismatch_at(padded, "out", 0)  # in[-1] is the input's front pad: NaN
    if backend == "cpu":  # 4096 bytes fill their pages: in[-1] is on the guard page before them
        _assert_faulted_on(page, backend, {"in"}, "4 bytes before the start")
    else:  # the front pad reaches back to the mapping's granule (2 MiB): a NaN again
        _assert_mismatch_at(page, "out", 0)


# ---- (vi) correct kernels, one with float4 loads on buffers whose size is not a multiple of 16 bytes --------
VEC4 = """
extern "C" __global__ void scale(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x, full = n / 4;
    if (i < full) {
        float4 v = reinterpret_cast<const float4*>(in)[i];
        reinterpret_cast<float4*>(out)[i] = make_float4(2.f * v.x, 2.f * v.y, 2.f * v.z, 2.f * v.w);
    } else if (i == full) {
        for (int j = 4 * full; j < n; ++j) out[j] = 2.f * in[j];
    }
}
"""
SCALAR = """
extern "C" __global__ void scale(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.f * in[i];
}
"""
# The last float4 reaches up to 12 bytes past the end and drops those lanes: inside the slack a guard-placed
# buffer keeps for alignment, a read whose value is discarded is not caught (docs/oracle.md, "not caught").
VEC4_OVERREAD = """
extern "C" __global__ void scale(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (4 * i < n) {
        float4 v = reinterpret_cast<const float4*>(in)[i];
        float lanes[4] = {v.x, v.y, v.z, v.w};
        for (int j = 0; j < 4 && 4 * i + j < n; ++j) out[4 * i + j] = 2.f * lanes[j];
    }
}
"""
VEC_LAUNCH = {"grid": ["ceil_div(n // 4 + 1, 256)"], "block": [256]}
SIZES = [1, 3, 1001, 1002, 1003, 1024, 4097]


@pytest.mark.parametrize("backend_fixture", BACKENDS)
@pytest.mark.parametrize(("source", "launch"), [(VEC4, VEC_LAUNCH), (SCALAR, ONE_PER_ELEMENT), (VEC4_OVERREAD, VEC_LAUNCH)],
                         ids=["float4", "scalar", "float4-overread-in-slack"])
def test_correct_kernels_stay_correct(request, tmp_path, backend_fixture, source, launch):
    task = _vector_task(tmp_path, "scale", source, "2 * x", SIZES, launch)
    _, result = _run(request, backend_fixture, task)
    assert result.correct, result.failure
    assert all(not c.run.overruns and not c.run.modified_inputs for c in result.cases)


# ---- (vii) the last element is never written ------------------------------------------------------------------
UNWRITTEN = SCALAR.replace("if (i < n)", "if (i < n - 1)")


@pytest.mark.parametrize("backend_fixture", BACKENDS)
def test_unwritten_output_element(request, tmp_path, backend_fixture):
    task = _vector_task(tmp_path, "scale", UNWRITTEN, "2 * x", [1000])
    _, result = _run(request, backend_fixture, task)
    _assert_mismatch_at(result.cases[0], "out", 999)  # still the NaN prefill
