"""CUDA C kernels on the CPU: correct results, faithful failures, clear refusals."""

from __future__ import annotations

import pytest

from harness_tools.backends.cpu.translate import unsupported
from harness_tools.evaluation import EvaluationConfig, evaluate
from harness_tools.run.timing import TimingPlan
from harness_tools.task import candidate as candidates
from harness_tools.task.loading import bundled_task_names, resolve_task
from harness_tools.task.spec import LaunchSpec
from harness_tools.task.tunable_space import TunableSpace
from tests.transpose_kernels import GOOD_TRANSPOSE, OOB_WRITE

# reduce_sum with dynamic shared memory, warp shuffles and one atomicAdd per block.
# Launch: grid ceil_div(n, 256), block 256, 32 floats of dynamic shared memory.
SHUFFLE_REDUCE = """
extern "C" __global__ void reduce_sum(const float* x, float* out, int n) {
    extern __shared__ float warp_sums[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.f;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < blockDim.x / 32 ? warp_sums[lane] : 0.f;
        for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
        if (lane == 0) atomicAdd(out, v);
    }
}
"""
SHUFFLE_REDUCE_LAUNCH = {"grid": ["ceil_div(n, 256)"], "block": [256], "shared_mem": "32 * 4"}

# softmax_rows: one warp per row, butterfly reductions with __shfl_xor_sync.
WARP_SOFTMAX = """
#include <cmath>
extern "C" __global__ void softmax_rows(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x, lane = threadIdx.x;
    const float* xr = x + (size_t)row * cols;
    float* yr = y + (size_t)row * cols;
    float m = -INFINITY;
    for (int c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float s = 0.f;
    for (int c = lane; c < cols; c += 32) s += expf(xr[c] - m);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    for (int c = lane; c < cols; c += 32) yr[c] = expf(xr[c] - m) / s;
}
"""
WARP_SOFTMAX_LAUNCH = {"grid": ["rows"], "block": [32]}

# sgemm with 16x16 shared-memory tiles and two barriers per K tile.
TILED_SGEMM = """
#define T 16
extern "C" __global__ void sgemm(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[T][T];
    __shared__ float Bs[T][T + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += T) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.f;
        __syncthreads();
        for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}
"""
TILED_SGEMM_LAUNCH = {"grid": ["ceil_div(N, 16)", "ceil_div(M, 16)"], "block": [16, 16]}

VALIDATION = EvaluationConfig(roles=["validation"], timeout_s=120)


def _candidate(task_name: str, source: str, launch: dict | None = None):
    task = resolve_task(task_name)
    cand = candidates.from_kernel_source(task, task.spec.baseline, source)
    if launch:
        cand = cand.model_copy(update={"launch": LaunchSpec.model_validate(launch)})
    return task, cand


@pytest.mark.parametrize("name", bundled_task_names())
def test_every_bundled_baseline_passes_on_cpu(cpu_backend, name):
    task = resolve_task(name)
    result = evaluate(task, candidates.baseline(task), cpu_backend, VALIDATION)
    assert result.correct, result.failure
    assert result.backend == "cpu"


def test_timing_stops_early_only_where_the_median_is_clearly_above_the_bound(cpu_backend):
    task = resolve_task("reduce_sum")
    (case,) = task.spec.cases_for(["performance"], "cpu")
    plan = TimingPlan(warmup=1, reps=15)

    def timed(bound: float):
        config = EvaluationConfig(roles=["performance"], timing=plan, timeout_s=120, stop_timing_above_ms={case.name: bound})
        result = evaluate(task, candidates.baseline(task), cpu_backend, config)
        assert result.correct, result.failure
        return result.cases[0].timing

    stopped = timed(1e-6)
    assert (stopped.n, stopped.planned_reps, stopped.stopped_above_ms) == (5, 15, 1e-6)
    assert stopped.median_ms == sorted(stopped.samples_ms)[2]  # an honest median of what was timed
    full = timed(1e6)
    assert (full.n, full.planned_reps, full.stopped_above_ms) == (15, None, None)


@pytest.mark.parametrize("name", bundled_task_names())
def test_a_tuned_kernel_of_every_task_passes_on_cpu(cpu_backend, name):
    task = resolve_task(name)
    tun = task.spec.tunables
    space = TunableSpace(tun.params, tun.constraints)
    config = space.as_dict(space.valid()[0])  # the first valid point, in the space's fixed order
    result = evaluate(task, candidates.tuned(task, config), cpu_backend, VALIDATION)
    refused = unsupported(task.read(tun.source))
    if refused:  # tensor-core code (inline PTX): the refusal is the answer, and its GPU test runs the kernel
        assert not result.correct and result.cases[0].run.error == "CPU_UNSUPPORTED", result.failure
        pytest.skip(f"{name}'s tunable kernel is GPU-only on the cpu backend: {refused[0]}")
    assert result.correct, (config, result.failure)


@pytest.mark.parametrize(
    ("task_name", "source", "launch"),
    [("sgemm", TILED_SGEMM, TILED_SGEMM_LAUNCH), ("reduce_sum", SHUFFLE_REDUCE, SHUFFLE_REDUCE_LAUNCH),
     ("softmax_rows", WARP_SOFTMAX, WARP_SOFTMAX_LAUNCH)],
    ids=["tiled-sgemm", "shuffle-reduce-dynamic-shared-atomics", "softmax-shfl-xor"],
)
def test_barrier_shuffle_and_atomic_kernels_are_correct(cpu_backend, task_name, source, launch):
    task, cand = _candidate(task_name, source, launch)
    result = evaluate(task, cand, cpu_backend, VALIDATION)
    assert result.correct, result.failure


def test_cpu_timings_are_labelled(cpu_backend):
    task, cand = _candidate("reduce_sum", SHUFFLE_REDUCE, SHUFFLE_REDUCE_LAUNCH)
    small = task.spec.cases[0].model_copy(update={"role": "performance"})
    task = task.model_copy(update={"spec": task.spec.model_copy(update={"cases": [small]})})
    result = evaluate(task, cand, cpu_backend, EvaluationConfig(timing={"warmup": 1, "reps": 3}))
    assert result.correct and result.score_ms > 0
    assert result.cases[0].timing.clock == "cpu-wall-clock" and result.cases[0].timing.n == 3


DIVERGENT = """
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
    if (threadIdx.x < 8)
        __syncthreads();
    if (r < rows && c < cols) out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
}
"""


def test_divergent_syncthreads_is_reported_with_its_line(cpu_backend):
    task, cand = _candidate("transpose", DIVERGENT)
    result = evaluate(task, cand, cpu_backend, VALIDATION)
    first = result.cases[0]
    assert first.status == "run_error" and first.run.error == "CPU_KERNEL_ERROR"
    assert "kernel.cu(5)" in first.run.message and "__syncthreads" in first.run.message


SHFL_AFTER_EXIT = """
extern "C" __global__ void reduce_sum(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x == 7) return;
    float v = i < n ? x[i] : 0.f;
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    if (threadIdx.x == 0) atomicAdd(out, v);
}
"""


def test_shuffle_naming_an_exited_lane_is_reported(cpu_backend):
    task, cand = _candidate("reduce_sum", SHFL_AFTER_EXIT, {"grid": ["ceil_div(n, 32)"], "block": [32]})
    result = evaluate(task, cand, cpu_backend, VALIDATION)
    message = result.cases[0].run.message
    assert result.cases[0].run.error == "CPU_KERNEL_ERROR"
    assert "kernel.cu(6)" in message and "lane 7" in message and "exited" in message




def test_out_of_bounds_write_names_the_argument_and_the_next_launch_works(cpu_backend):
    task, cand = _candidate("transpose", OOB_WRITE)
    result = evaluate(task, cand, cpu_backend, VALIDATION)
    run = result.cases[0].run
    assert run.error == "CPU_OUT_OF_BOUNDS", run
    assert "'out'" in run.message and "block (" in run.message and "thread (" in run.message
    line = 1 + next(i for i, text in enumerate(cand.source.splitlines()) if "out[" in text)
    assert f"[kernel.cu line {line};" in run.message, run.message  # the line, not only an offset in a library
    assert not run.worker_restarted  # the process survived the fault
    task, good = _candidate("transpose", GOOD_TRANSPOSE)
    assert evaluate(task, good, cpu_backend, VALIDATION).correct


TAIL_WRITE = GOOD_TRANSPOSE.replace("r] =", "r + 1] =")


def test_write_into_the_slack_is_caught_by_the_canary(cpu_backend):
    task, cand = _candidate("transpose", TAIL_WRITE)
    result = evaluate(task, cand, cpu_backend, VALIDATION)
    assert any(c.status == "corrupted" and "out" in c.run.overruns for c in result.cases)


HANG = GOOD_TRANSPOSE.replace("if (r < rows", "while (((volatile const float*)in)[0] != 12345.f) {}\n    if (r < rows")


def test_infinite_loop_times_out_and_the_worker_comes_back(cpu_backend):
    task, cand = _candidate("transpose", HANG)
    result = evaluate(task, cand, cpu_backend, EvaluationConfig(roles=["validation"], timeout_s=3))
    assert result.cases[0].run.status == "timeout"
    task, good = _candidate("transpose", GOOD_TRANSPOSE)
    assert evaluate(task, good, cpu_backend, VALIDATION).correct


REFUSED = {
    "asm": ('asm volatile("membar.gl;");', "asm"),
    "wmma": ("nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, float> f;", "wmma"),
    "cp.async": ("__pipeline_memcpy_async(out, in, 4);", "asynchronous copies"),
    "libcu++": ("cuda::barrier<cuda::thread_scope_block> bar;", "libcu++"),
    "grid-sync": ("cooperative_groups::this_grid().sync();", "cooperative groups"),
    "cluster": ("__cluster_dims__(2, 1, 1) int unused;", "clusters"),
    "texture": ("cudaTextureObject_t t = 0; float v = tex1Dfetch<float>(t, 0);", "textures"),
    "dynamic-parallelism": ("child<<<1, 1>>>();", "dynamic parallelism"),
    "cub": ("cub::WarpReduce<float> r;", "CUB"),
    "fp8-e8m0": ("__nv_fp8_e8m0 f;", "e8m0"),
    "fp8-e8m0-cvt": ("unsigned char s = __nv_cvt_float_to_e8m0(1.0f, __NV_SATFINITE, cudaRoundZero);", "e8m0"),
}


@pytest.mark.parametrize("construct", sorted(REFUSED))
def test_unsupported_constructs_are_refused_with_their_line(construct):
    statement, words = REFUSED[construct]
    source = f"// a kernel\nextern \"C\" __global__ void k(float* out, const float* in) {{\n    {statement}\n}}\n"
    problems = unsupported(source)
    assert problems and problems[0].startswith("kernel.cu(3):") and words in problems[0], problems


def test_words_in_comments_and_strings_are_not_refused():
    source = '// asm texture\nextern "C" __global__ void k(float* out) { const char* s = "asm cub::"; out[0] = s[0]; }\n'
    assert unsupported(source) == []


def test_a_refused_construct_is_an_invalid_launch_through_the_engine(cpu_backend):
    src = GOOD_TRANSPOSE.replace("if (r < rows", 'asm volatile("membar.gl;");\n    if (r < rows')
    task, cand = _candidate("transpose", src)
    result = evaluate(task, cand, cpu_backend, VALIDATION)
    run = result.cases[0].run
    assert run.status == "invalid_launch" and run.error == "CPU_UNSUPPORTED" and "kernel.cu(4)" in run.message


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("task_name", "source", "launch"),
    [("sgemm", TILED_SGEMM, TILED_SGEMM_LAUNCH), ("reduce_sum", SHUFFLE_REDUCE, SHUFFLE_REDUCE_LAUNCH),
     ("softmax_rows", WARP_SOFTMAX, WARP_SOFTMAX_LAUNCH), ("transpose", GOOD_TRANSPOSE, None)],
    ids=["tiled-sgemm", "shuffle-reduce", "softmax-shfl-xor", "transpose"],
)
def test_cpu_and_gpu_give_matching_results(cpu_backend, cuda_backend, tmp_path, task_name, source, launch):
    """Same kernel, same seed: both backends pass, and their outputs agree element by element."""
    import numpy as np

    from harness_tools.check.compare import compare

    task, cand = _candidate(task_name, source, launch)
    outputs = {}
    for backend in (cpu_backend, cuda_backend):
        folder = tmp_path / backend.name
        result = evaluate(task, cand, backend, EvaluationConfig(roles=["validation"], seed=77, outputs_dir=str(folder)))
        assert result.correct, (backend.name, result.failure)
        outputs[backend.name] = folder
    for case in task.spec.cases_for(["validation"], "cpu"):  # the cases both backends ran
        for buf in task.spec.outputs:
            cpu = np.load(outputs["cpu"] / case.name / "out" / f"{buf.name}.npy")
            gpu = np.load(outputs["cuda"] / case.name / "out" / f"{buf.name}.npy")
            agreement = compare(buf.name, cpu, gpu.astype(np.float64), task.spec.tolerance[buf.dtype], case.sizes)
            assert agreement.passed, (case.name, agreement)


VOTES = """
extern "C" __global__ void votes(float* out, int n) {
    int i = threadIdx.x;
    int lane = i % 32;
    int all = __all_sync(0xffffffffu, 1);
    unsigned low = __ballot_sync(0xffffffffu, lane < 3);
    int uni = __uni_sync(0xffffffffu, 1);
    if (i < n) out[i] = all + 2 * (low == 7u) + 4 * uni;
}
"""


def test_votes_in_a_partial_last_warp_count_only_existing_lanes(cpu_backend, tmp_path):
    import json

    from harness_tools.task.loading import load_task

    (tmp_path / "votes.cu").write_text(VOTES)
    (tmp_path / "reference.py").write_text(
        "import numpy as np\n"
        "def reference(inputs, sizes):\n"
        "    return {'out': np.full(sizes['n'], 7.0)}\n")
    (tmp_path / "task.json").write_text(json.dumps({
        "name": "votes", "description": "warp votes", "kernel_name": "votes", "sizes": ["n"],
        "params": [{"kind": "buffer", "name": "out", "dtype": "float32", "shape": ["n"], "role": "out"},
                   {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}],
        "cases": [{"name": "partial_48", "role": "validation", "sizes": {"n": 48}},
                  {"name": "partial_100", "role": "validation", "sizes": {"n": 100}}],
        "reference": {"kind": "numpy"}, "tolerance": {"float32": {}},
        "baseline": {"source": "votes.cu", "launch": {"grid": [1], "block": ["n"]}},
    }))
    task = load_task(tmp_path)
    result = evaluate(task, candidates.baseline(task), cpu_backend, VALIDATION)
    assert result.correct, result.failure


def test_the_portable_ucontext_fibers_give_the_same_results(monkeypatch):
    """The x86-64 context switch has a portable fallback; it must honour barriers and shuffles too."""
    from harness_tools.backends import create_backend

    monkeypatch.setenv("CUDAOPT_CPU_FORCE_UCONTEXT", "1")
    backend = create_backend("cpu")  # a fresh worker, with its own runtime build
    try:
        assert "ucontext" in backend.device_info().driver_version
        for task_name, source, launch in [("sgemm", TILED_SGEMM, TILED_SGEMM_LAUNCH),
                                          ("softmax_rows", WARP_SOFTMAX, WARP_SOFTMAX_LAUNCH)]:
            task, cand = _candidate(task_name, source, launch)
            result = evaluate(task, cand, backend, VALIDATION)
            assert result.correct, result.failure
        task, cand = _candidate("transpose", DIVERGENT)
        assert "kernel.cu(5)" in evaluate(task, cand, backend, VALIDATION).cases[0].run.message
    finally:
        backend.close()


def test_same_bytes_compares_contents_at_memory_speed():
    import numpy as np

    from harness_tools.backends.byte_compare import same_bytes

    a = np.arange(1 << 20, dtype=np.float32)
    b = a.copy()
    assert same_bytes(a, b) and same_bytes(a[:0], b[:0])
    b[-1] = np.nextafter(b[-1], np.float32(np.inf))  # one bit in the last element
    assert not same_bytes(a, b)
    assert not same_bytes(a, a[:-1])
    assert same_bytes(a.reshape(1024, 1024), a.view(np.uint8))  # bytes, whatever the dtype and shape
    nan = np.array([np.nan], dtype=np.float32)
    assert same_bytes(nan, nan.copy())  # NaN poison compares equal to itself, unlike ==


def test_a_kernel_that_writes_its_input_is_caught(cpu_backend):
    source = GOOD_TRANSPOSE.replace("= in[(size_t)r * cols + c];", "= in[(size_t)r * cols + c]; ((float*)in)[0] = 0.f;")
    task, cand = _candidate("transpose", source)
    result = evaluate(task, cand, cpu_backend, VALIDATION)
    assert any(c.status == "corrupted" and c.run.modified_inputs == ["in"] for c in result.cases)
    task, good = _candidate("transpose", GOOD_TRANSPOSE)
    assert all(not c.run.modified_inputs for c in evaluate(task, good, cpu_backend, VALIDATION).cases)


def test_a_kernel_whose_parameters_differ_from_the_task_does_not_run(cpu_backend):
    wide = GOOD_TRANSPOSE.replace("int rows, int cols", "size_t rows, int cols")
    task, cand = _candidate("transpose", wide)
    result = evaluate(task, cand, cpu_backend, VALIDATION)
    assert not result.correct and result.cases == [] and result.compile.ok
    assert result.failure == ("signature: parameter 3 (rows) is 8 bytes in the compiled kernel but the task passes "
                              "4 bytes: declare it as int rows")
    extra = GOOD_TRANSPOSE.replace("int rows, int cols", "int rows, int cols, int pitch")
    task, cand = _candidate("transpose", extra)
    assert "takes 5 parameter(s) but the task passes 4" in evaluate(task, cand, cpu_backend, VALIDATION).failure
