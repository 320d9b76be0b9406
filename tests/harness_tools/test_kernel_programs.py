"""Kernel programs beyond one launch: launch sequences over scratch buffers, __constant__ inputs, per-case
compile-time defines, templated kernels through name expressions and a baseline with its own kernel name;
each on the cpu backend and (marked gpu) on the GPU, and each bad input refused naming its field."""

from __future__ import annotations

import json

import pytest

from harness_tools.errors import TaskSpecError
from harness_tools.evaluation import EvaluationConfig, evaluate
from harness_tools.task import candidate as candidates
from harness_tools.task.loading import load_task

QUICK = EvaluationConfig(timing=None, roles=["validation", "performance"], timeout_s=300)
TIMED = EvaluationConfig(roles=["validation", "performance"], timeout_s=300)

BACKENDS = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.getfixturevalue(f"{request.param}_backend")


# ---- a two-pass sum: per-block partial sums into scratch, then one block adds them ------------------------
TWO_PASS = r"""
extern "C" __global__ void partial_sums(const float* x, float* partials, int n) {
    __shared__ float s[256];
    int i = blockIdx.x * 256 + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int w = 128; w > 0; w >>= 1) {
        if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) partials[blockIdx.x] = s[0];
}
extern "C" __global__ void final_sum(const float* partials, float* out, int count) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        float total = 0.0f;
        for (int i = 0; i < count; ++i) total += partials[i];
        out[0] = total;
    }
}
"""
TWO_PASS_LAUNCHES = [
    {"kernel": "partial_sums", "grid": ["ceil_div(n, 256)"], "block": [256], "args": ["x", "partials", "n"]},
    {"kernel": "final_sum", "grid": [1], "block": [32],
     "args": ["partials", "out", {"value": "ceil_div(n, 256)", "dtype": "int32"}]},
]
SUM_REFERENCE = "def reference(inputs, sizes):\n    return {'out': inputs['x'].sum(keepdims=True)}\n"


def _write(folder, spec: dict, files: dict[str, str]):
    for name, text in files.items():
        (folder / name).write_text(text)
    (folder / "task.json").write_text(json.dumps(spec))
    return load_task(folder)


def _sum_spec(baseline: dict) -> dict:
    return {
        "name": "two_pass_sum", "description": "out[0] = sum of x", "kernel_name": "partial_sums", "sizes": ["n"],
        "params": [{"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n"], "role": "in"},
                   {"kind": "buffer", "name": "out", "dtype": "float32", "shape": [1], "role": "out"},
                   {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}],
        "cases": [{"name": "v1", "role": "validation", "sizes": {"n": 1}},
                  {"name": "v1000", "role": "validation", "sizes": {"n": 1000}},
                  {"name": "p", "role": "performance", "sizes": {"n": 70001}}],
        "reference": {"kind": "numpy"}, "tolerance": {"float32": {"atol": "1e-5 * sqrt(n)", "rtol": 1e-5}},
        "baseline": {"source": "sum.cu", **baseline}, "hidden": {"derive": False},
    }


def _sum_task(tmp_path, **baseline):
    spec = _sum_spec({"launches": TWO_PASS_LAUNCHES, "scratch": [
        {"name": "partials", "dtype": "float32", "count": "ceil_div(n, 256)"}], **baseline})
    return _write(tmp_path, spec, {"sum.cu": TWO_PASS, "reference.py": SUM_REFERENCE})


def test_a_two_kernel_sequence_over_a_scratch_buffer_passes_and_is_timed_as_one_unit(tmp_path, backend):
    task = _sum_task(tmp_path)
    result = evaluate(task, candidates.baseline(task), backend, TIMED)
    assert result.correct, result.failure
    assert result.compile.lowered_names == {"partial_sums": "partial_sums", "final_sum": "final_sum"}
    perf = result.cases[-1]
    assert perf.timing is not None and perf.timing.median_ms > 0 and result.score_ms is not None


def test_the_second_launch_sees_what_the_first_wrote_and_an_unwritten_partial_fails(tmp_path, backend):
    # the first pass skips the last block: its scratch slot keeps the poison, and the sum becomes NaN
    task = _sum_task(tmp_path)
    wrong = TWO_PASS.replace("if (threadIdx.x == 0) partials", "if (threadIdx.x == 0 && blockIdx.x + 1 < gridDim.x) partials")
    result = evaluate(task, candidates.from_kernel_source(task, task.spec.baseline, wrong), backend, QUICK)
    assert not result.correct
    assert result.cases[0].status == "mismatch" and "nan" in result.cases[0].message.lower()


def test_a_write_past_a_scratch_buffer_is_caught(tmp_path, backend):
    task = _sum_task(tmp_path)
    overrun = TWO_PASS.replace("partials[blockIdx.x] = s[0];", "partials[blockIdx.x + 1] = s[0];")
    result = evaluate(task, candidates.from_kernel_source(task, task.spec.baseline, overrun), backend,
                      EvaluationConfig(timing=None, roles=["performance"], timeout_s=300))
    assert result.cases[0].status == "corrupted" and "partials" in result.cases[0].message


def test_a_scratch_buffer_beyond_the_limit_is_refused_before_anything_is_allocated(tmp_path, cpu_backend):
    task = _sum_task(tmp_path)
    huge = candidates.baseline(task).model_copy(update={"scratch": [candidates.ScratchBuffer(
        name="partials", dtype="float32", count="n * 100000000")]})
    result = evaluate(task, huge, cpu_backend, QUICK)
    case = result.cases[0]
    assert case.status == "run_error" and case.run is None
    assert "scratch.0 (partials)" in case.message and "at most" in case.message


def test_a_launch_naming_a_missing_kernel_fails_the_compile_with_its_name(tmp_path, cpu_backend):
    task = _sum_task(tmp_path)
    steps = [dict(TWO_PASS_LAUNCHES[0]), {**TWO_PASS_LAUNCHES[1], "kernel": "final_summ"}]
    cand = candidates.baseline(task).model_copy(update={"launches": [candidates.LaunchStep(**s) for s in steps]})
    result = evaluate(task, cand, cpu_backend, QUICK)
    assert not result.compile.ok and "'final_summ' is not an entry point" in result.compile.log
    assert not result.cases


def test_a_launch_whose_args_do_not_match_its_kernel_is_refused_naming_the_launch(tmp_path, cpu_backend):
    task = _sum_task(tmp_path)
    steps = [dict(TWO_PASS_LAUNCHES[0]), {**TWO_PASS_LAUNCHES[1], "args": ["partials", "out"]}]
    cand = candidates.baseline(task).model_copy(update={"launches": [candidates.LaunchStep(**s) for s in steps]})
    result = evaluate(task, cand, cpu_backend, QUICK)
    assert result.failure.startswith("signature: launches.1 (final_sum): the compiled kernel takes 3 parameter(s)")


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"launches": [{**TWO_PASS_LAUNCHES[0], "args": ["x", "partialz", "n"]}, TWO_PASS_LAUNCHES[1]]},
     "baseline.launches.0.args.1", "neither a param"),
    ({"launch": {"grid": [1], "block": [1]}}, "baseline", "either 'launch'"),
    ({"scratch": [{"name": "x", "dtype": "float32", "count": 4}]}, "baseline.scratch.0.name", "name of a task param"),
    ({"scratch": [{"name": "partials", "dtype": "float33", "count": 4}]}, "baseline.scratch.0.dtype", ""),
    ({"launches": [{**TWO_PASS_LAUNCHES[0], "kernel": "bad name"}]}, "baseline.launches.0.kernel", "name expression"),
])
def test_bad_programs_are_refused_at_load_time_naming_the_field(tmp_path, change, field, words):
    base = {"launches": TWO_PASS_LAUNCHES, "scratch": [{"name": "partials", "dtype": "float32", "count": 8}]}
    with pytest.raises(TaskSpecError) as info:
        _write(tmp_path, _sum_spec({**base, **change}), {"sum.cu": TWO_PASS, "reference.py": SUM_REFERENCE})
    assert info.value.field.startswith(field) and words in str(info.value)


# ---- a 1-D convolution whose filter lives in __constant__ memory, its length a per-case #define ----------
CONV = r"""
__constant__ float taps[FILTER];
extern "C" __global__ void conv1d(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.0f;
#if FILTER > 4
    #pragma unroll
#endif
    for (int k = 0; k < FILTER; ++k) acc += taps[k] * x[i + k];
    y[i] = acc;
}
"""
CONV_REFERENCE = """import numpy as np
def reference(inputs, sizes):
    n, f = sizes['n'], sizes['f']
    x, t = inputs['x'], inputs['t']
    return {'y': np.array([np.dot(t, x[i:i + f]) for i in range(n)])}
"""


def _conv_spec(**change) -> dict:
    spec = {
        "name": "conv1d", "description": "y[i] = sum_k t[k] x[i+k]", "kernel_name": "conv1d", "sizes": ["n", "f"],
        "params": [{"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n + f - 1"], "role": "in"},
                   {"kind": "buffer", "name": "t", "dtype": "float32", "shape": ["f"], "role": "in", "constant": "taps"},
                   {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["n"], "role": "out"},
                   {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}],
        "size_defines": {"FILTER": "f"},
        "cases": [{"name": "v_f3", "role": "validation", "sizes": {"n": 37, "f": 3}},
                  {"name": "v_f17", "role": "validation", "sizes": {"n": 1000, "f": 17}},
                  {"name": "v_f3_again", "role": "validation", "sizes": {"n": 5, "f": 3}}],
        "reference": {"kind": "numpy"}, "tolerance": {"float32": {"atol": 1e-5, "rtol": 1e-5}},
        "baseline": {"source": "conv.cu", "launch": {"grid": ["ceil_div(n, 128)"], "block": [128]}},
        "hidden": {"derive": False},
    }
    return {**spec, **change}


def test_a_constant_input_and_per_case_defines_compile_once_per_value_and_pass(tmp_path, backend):
    task = _write(tmp_path, _conv_spec(), {"conv.cu": CONV, "reference.py": CONV_REFERENCE})
    result = evaluate(task, candidates.baseline(task), backend, QUICK)
    assert result.correct, result.failure
    assert [c.passed for c in result.cases] == [True, True, True]


def test_a_constant_declared_with_the_wrong_size_is_named(tmp_path, backend):
    task = _write(tmp_path, _conv_spec(), {"conv.cu": CONV.replace("taps[FILTER]", "taps[FILTER + 1]"),
                                           "reference.py": CONV_REFERENCE})
    result = evaluate(task, candidates.baseline(task), backend, QUICK)
    assert result.cases[0].status == "run_error"
    assert "__constant__ taps is 16 bytes in the kernel but t holds 12 bytes" in result.cases[0].message


def test_a_missing_constant_symbol_is_named(tmp_path, backend):
    source = CONV.replace("taps", "weights")
    task = _write(tmp_path, _conv_spec(), {"conv.cu": source, "reference.py": CONV_REFERENCE})
    result = evaluate(task, candidates.baseline(task), backend, QUICK)
    assert result.cases[0].status == "run_error" and "__constant__" in result.cases[0].message
    assert "'taps'" in result.cases[0].message


def test_a_device_array_can_hold_the_input_as_well(tmp_path, backend):
    # cuModuleGetGlobal finds __device__ globals too; both backends fill either kind
    source = CONV.replace("__constant__ float taps[FILTER];", "__device__ float taps[FILTER];")
    task = _write(tmp_path, _conv_spec(), {"conv.cu": source, "reference.py": CONV_REFERENCE})
    assert evaluate(task, candidates.baseline(task), backend, QUICK).correct


def test_the_kernel_signature_leaves_out_constant_inputs(tmp_path):
    task = _write(tmp_path, _conv_spec(), {"conv.cu": CONV, "reference.py": CONV_REFERENCE})
    assert [p.name for p in task.spec.arguments] == ["x", "y", "n"]
    assert [p.constant for p in task.spec.constants] == ["taps"]


def test_a_candidate_may_not_set_a_per_case_define(tmp_path, cpu_backend):
    task = _write(tmp_path, _conv_spec(), {"conv.cu": CONV, "reference.py": CONV_REFERENCE})
    cand = candidates.baseline(task).model_copy(update={"defines": {"FILTER": 3}})
    result = evaluate(task, cand, cpu_backend, QUICK)
    assert result.failure.startswith("defines: defines ['FILTER'] are set per case by the task")


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"size_defines": {"FILTER": "g"}}, "size_defines.FILTER", "not sizes of the task"),
    ({"baseline": {"source": "conv.cu", "launch": {"grid": [1], "block": [1]}, "defines": {"FILTER": 3}}},
     "baseline.defines", "size_defines"),
])
def test_bad_per_case_defines_are_refused_at_load_time(tmp_path, change, field, words):
    with pytest.raises(TaskSpecError) as info:
        _write(tmp_path, _conv_spec(**change), {"conv.cu": CONV, "reference.py": CONV_REFERENCE})
    assert info.value.field == field and words in str(info.value)


@pytest.mark.parametrize("symbol", ["__name", "__size", "cudaopt_launch_count"])
def test_a_constant_symbol_may_not_take_a_reserved_name(tmp_path, symbol):
    # "__name" was the cpu lookup's own parameter: an 8-byte input would have been copied onto its stack frame
    spec = _conv_spec()
    spec["params"][1] = {**spec["params"][1], "constant": symbol}
    with pytest.raises(TaskSpecError, match="reserved in C\\+\\+"):
        _write(tmp_path, spec, {"conv.cu": CONV.replace("taps", symbol), "reference.py": CONV_REFERENCE})


def test_a_constant_buffer_must_be_an_input_and_cannot_be_passed(tmp_path):
    spec = _conv_spec()
    spec["params"][1] = {**spec["params"][1], "role": "inout"}
    with pytest.raises(TaskSpecError, match="its role must be 'in'"):
        _write(tmp_path, spec, {"conv.cu": CONV, "reference.py": CONV_REFERENCE})
    spec = _conv_spec(baseline={"source": "conv.cu", "launches": [
        {"grid": ["ceil_div(n, 128)"], "block": [128], "args": ["x", "t", "y", "n"]}]})
    with pytest.raises(TaskSpecError) as info:
        _write(tmp_path, spec, {"conv.cu": CONV, "reference.py": CONV_REFERENCE})
    assert info.value.field == "baseline.launches.0.args.1" and "__constant__" in str(info.value)


# ---- a templated kernel (no extern "C"), launched by a name expression, as the baseline's own kernel -----
TEMPLATED = r"""
namespace scaling {
template <int B, typename T>
__global__ void scale(const T* x, T* y, int n) {
    int i = blockIdx.x * B + threadIdx.x;
    if (i < n) y[i] = T(3) * x[i];
}
}
"""


def _scale_spec(baseline: dict) -> dict:
    return {
        "name": "scale", "description": "y = 3x", "kernel_name": "scale", "sizes": ["n"],
        "params": [{"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n"], "role": "in"},
                   {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["n"], "role": "out"},
                   {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}],
        "cases": [{"name": "v", "role": "validation", "sizes": {"n": 1001}}],
        "reference": {"kind": "numpy"}, "tolerance": {"float32": {"atol": 0, "rtol": 1e-6}},
        "baseline": {"source": "scale.cu", **baseline}, "hidden": {"derive": False},
    }


SCALE_REFERENCE = "def reference(inputs, sizes):\n    return {'y': 3 * inputs['x']}\n"


def test_a_templated_kernel_runs_by_its_name_expression(tmp_path, backend):
    spec = _scale_spec({"kernel": "scaling::scale<BLOCK, float>", "defines": {"BLOCK": 128},
                        "launch": {"grid": ["ceil_div(n, BLOCK)"], "block": ["BLOCK"]}})
    task = _write(tmp_path, spec, {"scale.cu": TEMPLATED, "reference.py": SCALE_REFERENCE})
    result = evaluate(task, candidates.baseline(task), backend, QUICK)
    assert result.correct, result.failure
    assert result.compile.lowered_names["scaling::scale<BLOCK, float>"].startswith("_ZN7scaling5scale")


def test_a_name_expression_that_does_not_instantiate_shows_nvrtc_s_error(tmp_path, cpu_backend):
    spec = _scale_spec({"kernel": "scaling::scale<BLOCK>", "defines": {"BLOCK": 128},
                        "launch": {"grid": ["ceil_div(n, BLOCK)"], "block": ["BLOCK"]}})
    task = _write(tmp_path, spec, {"scale.cu": TEMPLATED, "reference.py": SCALE_REFERENCE})
    result = evaluate(task, candidates.baseline(task), cpu_backend, QUICK)
    assert not result.compile.ok and "__nv_name_map" in result.compile.log and "scale" in result.failure


def test_a_baseline_with_its_own_kernel_name(tmp_path, backend):
    source = ('extern "C" __global__ void scale_naive(const float* x, float* y, int n) {\n'
              "  for (int i = 0; i < n; ++i) y[i] = 3.0f * x[i];\n}\n")
    task = _write(tmp_path, _scale_spec({"kernel": "scale_naive", "launch": {"grid": [1], "block": [1]}}),
                  {"scale.cu": source, "reference.py": SCALE_REFERENCE})
    cand = candidates.baseline(task)
    assert cand.kernel_name == "scale_naive"
    assert evaluate(task, cand, backend, QUICK).correct


def test_a_one_launch_candidate_keeps_the_id_it_had_before_sequences_existed():
    from harness_tools.task.loading import resolve_task

    # digests of stored runs must not change: these are the ids the bundled baselines always had
    assert candidates.baseline(resolve_task("sgemm")).digest() == "599f6d1a2b48b99a"
    assert candidates.baseline(resolve_task("reduce_sum")).digest() == "51be86b90fe3e737"


def test_engine_kernel_names_are_refused_in_task_files_but_the_engine_builds_its_own(tmp_path):
    spec = _scale_spec({"kernel": "cudaopt_scale", "launch": {"grid": [1], "block": [1]}})
    with pytest.raises(TaskSpecError, match="engine's own"):
        _write(tmp_path, spec, {"scale.cu": TEMPLATED, "reference.py": SCALE_REFERENCE})
    with pytest.raises(ValueError, match="engine's own"):
        candidates.LaunchStep(kernel="cudaopt_evict", grid=[1], block=[1])
    # the cuda worker compiles its helper kernels as candidates: the name itself is well formed
    assert candidates.Candidate(source="", kernel_name="cudaopt_digest", launch={"grid": [1], "block": [1]})


def test_an_fp8_scalar_is_refused_at_load_time(tmp_path):
    spec = _scale_spec({"launch": {"grid": [1], "block": [1]}})
    spec["params"].append({"kind": "scalar", "name": "s", "dtype": "float8_e4m3", "value": 1})
    with pytest.raises(TaskSpecError, match="pass it as float32"):
        _write(tmp_path, spec, {"scale.cu": TEMPLATED, "reference.py": SCALE_REFERENCE})
