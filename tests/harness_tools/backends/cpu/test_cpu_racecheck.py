"""The cpu backend's race check: ThreadSanitizer with CUDA threads as fibers, through the engine.

Real g++ and TSan builds (each a fraction of a second here, then cached); sizes are kept small because
every checked launch runs instrumented. The report parser is also tested alone on a captured report.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from harness_tools.backends.contract import ArgSpec, CaseRequest, KernelLaunch
from harness_tools.backends.cpu.tsan_report import Regions, describe, parse_races, parse_regions, parse_status
from harness_tools.errors import BackendError
from harness_tools.evaluation import EvaluationConfig, evaluate
from harness_tools.task import candidate as candidates
from harness_tools.task.loading import resolve_task
from harness_tools.task.spec import LaunchSpec
from tests.transpose_kernels import TILE_LOAD_LINE, TILE_STORE_LINE, TILED_LAUNCH, TILED_TRANSPOSE

RACE_CHECK = EvaluationConfig(roles=["validation"], timeout_s=120, race_check=True)

# The bundled baseline's reduction, with the barrier of the tree loop as a parameter (same line numbers).
REDUCE = """
// A shared-memory tree reduction, one atomicAdd per block.
extern "C" __global__ void reduce_sum(const float* x, float* out, int n)
{
    __shared__ float s[256];
    const int i = blockIdx.x * 256 + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int stride = 128; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride]; BARRIER
    }
    if (threadIdx.x == 0) atomicAdd(out, s[0]);
}
"""
REDUCE_LAUNCH = {"grid": ["ceil_div(n, 256)"], "block": [256]}
TREE_LINE = 10


# Warp-synchronous butterflies; blocks (and warps) combine only through atomicAdd.
SHFL_XOR_REDUCE = """
extern "C" __global__ void reduce_sum(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.f;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, v);
}
"""
WARP_SOFTMAX = """
#include <cmath>
extern "C" __global__ void softmax_rows(const float* x, float* y, int rows, int cols) {
    int row = blockIdx.x, lane = threadIdx.x;
    const float* xr = x + (size_t)row * cols;
    float m = -INFINITY;
    for (int c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float s = 0.f;
    for (int c = lane; c < cols; c += 32) s += expf(xr[c] - m);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    for (int c = lane; c < cols; c += 32) y[(size_t)row * cols + c] = expf(xr[c] - m) / s;
}
"""

# Blocks start 16 columns apart but cover 32: every element is written by two horizontally adjacent
# blocks, with the same value. The output is right; the writes race.
OVERLAPPING_TRANSPOSE = """
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    int c = blockIdx.x * 16 + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
}
"""
OVERLAPPING_LAUNCH = {"grid": ["ceil_div(cols, 16)", "ceil_div(rows, 8)"], "block": [32, 8]}


def _restrict(task, cases: list[str]):
    kept = [c for c in task.spec.cases if c.name in cases]
    return task.model_copy(update={"spec": task.spec.model_copy(update={"cases": kept})})


def _candidate(task_name: str, source: str, launch: dict | None = None, cases: list[str] | None = None):
    task = resolve_task(task_name)
    if cases is not None:
        task = _restrict(task, cases)
    cand = candidates.from_kernel_source(task, task.spec.baseline, source)
    if launch:
        cand = cand.model_copy(update={"launch": LaunchSpec.model_validate(launch)})
    return task, cand


def _lines(race) -> set[tuple[int | None, str]]:
    return {(race.first.line, race.first.kind), (race.second.line, race.second.kind)}


def test_a_missing_barrier_is_reported_with_the_racing_lines(cpu_backend):
    # With n <= 3 the fiber scheduler's order happens to give the right sum: only the race check sees the bug.
    task, cand = _candidate("reduce_sum", REDUCE.replace("BARRIER", ""), REDUCE_LAUNCH, cases=["val_n1", "val_n3"])
    result = evaluate(task, cand, cpu_backend, RACE_CHECK)
    assert not result.correct
    for case in result.cases:
        assert case.status == "race" and not case.passed, case
        assert f"kernel.cu({TREE_LINE})" in case.message and "shared memory `s`" in case.message
        race = next(r for r in case.races.races if _lines(r) == {(TREE_LINE, "write"), (TREE_LINE, "read")})
        for access in (race.first, race.second):
            assert access.memory == "shared" and access.variable == "s" and access.size == 4
            assert access.block == (0, 0, 0) and access.thread is not None
        assert race.first.thread != race.second.thread
    assert "race" in result.failure


def test_the_same_reduction_with_its_barrier_is_clean_and_the_build_is_cached(cpu_backend):
    task, cand = _candidate("reduce_sum", REDUCE.replace("BARRIER", "__syncthreads();"), REDUCE_LAUNCH,
                            cases=["val_n37", "val_n1000", "val_n65537"])
    result = evaluate(task, cand, cpu_backend, RACE_CHECK)
    assert result.correct, result.failure
    assert all(c.races.status == "clean" for c in result.cases)
    assert all(c.races.cached for c in result.cases[1:])  # one executable for every case of a candidate
    assert result.overhead.race_ms > 0


def test_tiled_transpose_with_its_barrier_is_clean(cpu_backend):
    task, cand = _candidate("transpose", TILED_TRANSPOSE.replace("BARRIER", "__syncthreads();"), TILED_LAUNCH,
                            cases=["val_odd_33x65", "val_odd_1025x67"])
    result = evaluate(task, cand, cpu_backend, RACE_CHECK)
    assert result.correct, result.failure
    assert [c.races.status for c in result.cases] == ["clean", "clean"]


def _transpose_request(source: str, tmp_path, rows: int = 70, cols: int = 100) -> CaseRequest:
    np.save(tmp_path / "in.npy", np.random.default_rng(0).random((rows, cols), dtype=np.float32))
    args = [ArgSpec(name="in", kind="buffer", dtype="float32", shape=[rows, cols], role="in",
                    input_file=str(tmp_path / "in.npy")),
            ArgSpec(name="out", kind="buffer", dtype="float32", shape=[cols, rows], role="out"),
            ArgSpec(name="rows", kind="scalar", dtype="int32", value=rows),
            ArgSpec(name="cols", kind="scalar", dtype="int32", value=cols)]
    launch = KernelLaunch(kernel_name="transpose", symbol="transpose", grid=(-(-cols // 32), -(-rows // 32), 1),
                          block=(32, 8, 1), args=[0, 1, 2, 3])
    return CaseRequest(source=source, launches=[launch], args=args, output_dir=str(tmp_path / "out"))


def test_tiled_transpose_without_its_barrier_races_on_the_tile(cpu_backend, tmp_path):
    # Numerically wrong on the cpu backend too, so this asks the backend directly.
    report = cpu_backend.race_check(_transpose_request(TILED_TRANSPOSE.replace("BARRIER", ""), tmp_path), 120)
    assert report.status == "races", report
    race = report.races[0]
    assert _lines(race) == {(TILE_STORE_LINE, "write"), (TILE_LOAD_LINE, "read")}
    assert race.first.memory == "shared" and race.first.variable == "tile"
    assert f"write at kernel.cu({TILE_STORE_LINE}) vs read at kernel.cu({TILE_LOAD_LINE})" in report.message


@pytest.mark.parametrize(
    ("task_name", "source", "launch", "cases"),
    [("reduce_sum", SHFL_XOR_REDUCE, {"grid": ["ceil_div(n, 128)"], "block": [128]}, ["val_n37", "val_n65537"]),
     ("softmax_rows", WARP_SOFTMAX, {"grid": ["rows"], "block": [32]}, ["val_odd_7x33", "val_odd_257x1025"])],
    ids=["shfl-xor-then-atomicAdd", "softmax-shfl-xor"],
)
def test_warp_synchronous_shuffles_and_atomics_are_clean(cpu_backend, task_name, source, launch, cases):
    task, cand = _candidate(task_name, source, launch, cases)
    result = evaluate(task, cand, cpu_backend, RACE_CHECK)
    assert result.correct, result.failure
    assert all(c.races.status == "clean" for c in result.cases)


@pytest.mark.parametrize("task_name", ["reduce_sum", "transpose"])
def test_bundled_baselines_are_clean(cpu_backend, task_name):
    task = resolve_task(task_name)
    small = [c.name for c in task.spec.cases if c.role == "validation" and c.name != "val_n1048573"]  # TSan is slow
    task = _restrict(task, small)
    result = evaluate(task, candidates.baseline(task), cpu_backend, RACE_CHECK)
    assert result.correct, result.failure
    assert len(result.cases) >= 5 and all(c.races.status == "clean" for c in result.cases)


def test_two_blocks_writing_the_same_element_race(cpu_backend):
    task, cand = _candidate("transpose", OVERLAPPING_TRANSPOSE, OVERLAPPING_LAUNCH, cases=["val_odd_33x65"])
    result = evaluate(task, cand, cpu_backend, RACE_CHECK)
    case = result.cases[0]
    assert case.max_abs_err == 0 and case.status == "race", case  # right output, racy writes
    race = case.races.races[0]
    assert _lines(race) == {(4, "write")}
    assert race.first.memory == "global" and race.first.variable == "out"
    assert race.first.offset is not None and race.first.offset % 4 == 0
    blocks = {race.first.block, race.second.block} - {None}
    assert blocks and all(b[0] >= 0 for b in blocks)  # the reporting side's block is known
    assert "data race on global memory `out`: write at kernel.cu(4) vs write at kernel.cu(4)" in case.message


def test_a_fault_under_the_race_check_is_an_error_not_a_pass(cpu_backend, tmp_path):
    # 1024 elements past the end: every faulting write lands in the slack or on the guard page
    oob = OVERLAPPING_TRANSPOSE.replace("c * rows + r]", "c * rows + r + 1024]").replace("* 16 +", "* 32 +")
    report = cpu_backend.race_check(_transpose_request(oob, tmp_path), 120)
    assert report.status == "error"
    assert "out-of-bounds write to argument 'out'" in report.message and "block (" in report.message


def test_backends_without_a_race_check_are_refused_clearly():
    class NoRaceCheck:
        name = "cuda"

    task, cand = _candidate("transpose", OVERLAPPING_TRANSPOSE)
    with pytest.raises(BackendError, match="no race check"):
        evaluate(task, cand, NoRaceCheck(), RACE_CHECK)  # type: ignore[arg-type]


def test_cli_race_check_fails_a_racy_kernel(tmp_path):
    kernel = tmp_path / "racy.cu"
    kernel.write_text(REDUCE.replace("BARRIER", ""))
    out = subprocess.run([sys.executable, "-m", "cudaopt_mcp.cli", "eval", "reduce_sum", "--backend", "cpu",
                          "--race-check", "--kernel", str(kernel)], check=False, capture_output=True, text=True, timeout=600,
                         cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert " race " in out.stdout and f"kernel.cu({TREE_LINE})" in out.stdout
    assert "race check (ThreadSanitizer" in out.stdout and "NOT CORRECT" in out.stdout


# ----------------------------------------------------------------------- the report parser, alone

CAPTURED = """\
cudaopt-racecheck: buffer x 0x7f0000001000 4000
cudaopt-racecheck: buffer out 0x7f0000000f00 4
cudaopt-racecheck: worker 0 tls 0x7f1000000000 1040 shared-end 0x7f2000010000
cudaopt-racecheck: worker 1 tls 0x7f3000000000 1040 shared-end 0x7f4000010000
==================
WARNING: ThreadSanitizer: data race (pid=1)
  Write of size 4 at 0x7f1000000014 by thread T7:
    #0 reduce_sum ./kernel.cu:9 (race+0x2738)
    #1 operator() ./cudaopt_launcher:6 (race+0x2870)
    #2 fiber_entry /x/cpu_runtime/cudaopt_cpu_fibers.cpp:356 (race+0x4268)

  Previous read of size 4 at 0x7f1000000014 by thread T3:
    #0 float __ldg<float>(float const*) /x/cpu_runtime/cudaopt_cpu.h:801 (race+0x2704)
    #1 reduce_sum ./kernel.cu:7 (race+0x2704)

  Location is TLS of thread T2.

  Thread T7 'block (1,0,0) thread (1,0,0) worker 0' (tid=0, running) created by thread T2 at:
    #0 cudaopt::rt::detail::tsan_begin_block(cudaopt::rt::detail::Worker*) /x/cudaopt_cpu_tsan.cpp:70 (race+0x6c32)

  Thread T3 'block (1,0,0) thread (5,0,0) worker 0' (tid=0, running) created by thread T2 at:
    #0 cudaopt::rt::detail::tsan_begin_block(cudaopt::rt::detail::Worker*) /x/cudaopt_cpu_tsan.cpp:70 (race+0x6c32)

SUMMARY: ThreadSanitizer: data race ./kernel.cu:9 in reduce_sum
==================
==================
WARNING: ThreadSanitizer: data race (pid=1)
  Read of size 4 at 0x7f3000000018 by thread T9:
    #0 reduce_sum ./kernel.cu:7 (race+0x2704)

  Previous write of size 4 at 0x7f3000000018 by thread T4:
    #0 reduce_sum ./kernel.cu:9 (race+0x2738)

  Thread T9 'block (3,0,0) thread (2,0,0) worker 1' (tid=0, running) created by thread T1 at:
    #0 tsan_begin_block /x/cudaopt_cpu_tsan.cpp:70 (race+0x6c32)

  Thread T4 'block (3,0,0) thread (6,0,0) worker 1' (tid=0, running) created by thread T1 at:
    #0 tsan_begin_block /x/cudaopt_cpu_tsan.cpp:70 (race+0x6c32)

SUMMARY: ThreadSanitizer: data race ./kernel.cu:7 in reduce_sum
==================
==================
WARNING: ThreadSanitizer: data race (pid=1)
  Atomic write of size 4 at 0x7f0000000f00 by thread T8:
    #0 reduce_sum ./kernel.cu:12 (race+0x2800)

  Previous write of size 4 at 0x7f0000000f00 by thread T5:
    [failed to restore the stack]

  Thread T8 'block (4,0,0) thread (0,0,0) worker 0' (tid=0, running) created by thread T2 at:
    #0 tsan_begin_block /x/cudaopt_cpu_tsan.cpp:70 (race+0x6c32)

  Thread T5 'block (7,0,0) thread (0,0,0) worker 1' (tid=0, running) created by thread T1 at:
    #0 tsan_begin_block /x/cudaopt_cpu_tsan.cpp:70 (race+0x6c32)

SUMMARY: ThreadSanitizer: data race ./kernel.cu:12 in reduce_sum
==================
==================
WARNING: ThreadSanitizer: data race (pid=1)
  Write of size 8 at 0x7f5000000000 by thread T8:
    #0 snprintf (libtsan.so.2+0x5e686)
    #1 cudaopt::rt::detail::record_error(int, char const*) /x/cudaopt_cpu_runtime.cpp:100 (race+0x1)

  Previous read of size 8 at 0x7f5000000000 by main thread:
    #0 main ./main.cpp:49 (race+0x2dfc)

  Location is global 'cudaopt::rt::detail::g_launch' of size 8512 at 0x7f5000000000 (race+0x9000)

SUMMARY: ThreadSanitizer: data race in snprintf
==================
cudaopt-racecheck: status 0 
ThreadSanitizer: reported 4 warnings
"""


def _regions() -> Regions:
    launch = KernelLaunch(kernel_name="reduce_sum", symbol="reduce_sum", grid=(8, 1, 1), block=(256, 1, 1), args=[])
    request = CaseRequest(launches=[launch], args=[], output_dir="/tmp")
    return parse_regions(CAPTURED, [("s", 0, 1024)], request)


def test_parser_merges_a_line_pair_seen_in_either_order_and_names_the_shared_variable():
    races = parse_races(CAPTURED, _regions())
    assert len(races) == 2  # the runtime-only report (no kernel.cu frame) is left out
    tree = races[0]
    assert tree.count == 2
    assert (tree.first.line, tree.first.kind, tree.second.line, tree.second.kind) == (7, "read", 9, "write")
    assert tree.first.memory == "shared" and tree.first.variable == "s" and tree.first.offset == 20
    assert tree.first.thread == (5, 0, 0) and tree.first.block == (1, 0, 0)  # via cudaopt_cpu.h's __ldg
    assert describe(races).startswith("data race on shared memory `s`: read at kernel.cu(7) vs write at kernel.cu(9) "
                                      "(2 reports); data race on global memory `out`")


def test_parser_keeps_an_earlier_access_without_a_stack_and_does_not_guess_its_block():
    race = parse_races(CAPTURED, _regions())[1]
    known, unknown = race.first, race.second
    assert (known.line, known.kind, known.atomic, known.block) == (12, "write", True, (4, 0, 0))
    assert unknown.line is None and unknown.thread == (0, 0, 0)
    assert unknown.block is None  # another pool thread: its fiber has moved on since
    assert known.memory == "global" and known.variable == "out" and known.offset == 0
    assert "atomic write at kernel.cu(12) vs write at an unknown line" in describe([race])


def test_parser_reads_the_launch_status():
    assert parse_status(CAPTURED) == (0, "")
    assert parse_status("cudaopt-racecheck: status 2 out-of-bounds write\n") == (2, "out-of-bounds write")
    assert parse_status("ThreadSanitizer: CHECK failed") is None
