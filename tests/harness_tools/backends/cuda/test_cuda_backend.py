"""The engine on a real GPU: bundled baselines, wrong kernels, crashes, hangs and recovery."""

from __future__ import annotations

import pytest

from harness_tools.evaluation import EvaluationConfig, evaluate
from harness_tools.run.timing import TimingPlan
from harness_tools.task import candidate as candidates
from harness_tools.task.loading import bundled_task_names, resolve_task
from harness_tools.task.tunable_space import TunableSpace

pytestmark = pytest.mark.gpu

QUICK = EvaluationConfig(timing=TimingPlan(warmup=2, reps=10), timeout_s=60)

SGEMM_WRONG_K = """
extern "C" __global__ void sgemm(const float* A, const float* B, float* C, int M, int N, int K) {
    int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.f;
    for (int k = 0; k < K - 1; ++k) acc += A[row * K + k] * B[k * N + col];  // drops the last k term
    C[row * N + col] = acc;
}
"""

TRANSPOSE_TEMPLATE = """
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
    %s
}
"""
GOOD = "if (r < rows && c < cols) out[(long long)c * rows + r] = in[(long long)r * cols + c];"
WILD_WRITE = "if (r < rows && c < cols) out[(long long)c * rows + r + (1ll << 36)] = 1.f;"
TAIL_WRITE = "if (r < rows && c < cols) out[(long long)c * rows + r + 1] = in[(long long)r * cols + c];"
OOB_READ = "if (r < rows && c < cols) out[(long long)c * rows + r] = in[(long long)r * cols + c + 1];"
# A volatile global load each iteration: the compiler may not drop the loop (a loop without side
# effects may be removed, so `while (1) {}` does not hang reliably).
HANG = "if (r < rows && c < cols) { while (((volatile const float*)in)[0] != 12345.f) {} }"
MODIFY_INPUT = "if (r < rows && c < cols) { out[(long long)c * rows + r] = in[(long long)r * cols + c]; ((float*)in)[0] = 0.f; }"


def _transpose(body: str):
    task = resolve_task("transpose")
    return task, candidates.from_kernel_source(task, task.spec.baseline, TRANSPOSE_TEMPLATE % body)


@pytest.mark.parametrize("name", bundled_task_names())
def test_every_bundled_baseline_is_correct_and_timed(cuda_backend, name):
    task = resolve_task(name)
    result = evaluate(task, candidates.baseline(task), cuda_backend, QUICK)
    assert result.compile.ok, result.compile.log
    assert result.correct, result.failure
    perf = [c for c in result.cases if c.role == "performance"]
    assert perf and all(c.timing and c.timing.n == 10 and c.median_ms > 0 for c in perf)
    assert result.score_ms and result.score_ms > 0
    assert result.environment.device.arch.startswith("sm_")
    clocks = result.environment.clocks_before  # read through NVML
    assert clocks and clocks.sm_mhz > 0 and clocks.memory_mhz > 0 and clocks.power_w > 0
    # an empty kernel timed like a candidate: microseconds, and below every real kernel's median
    floor = result.environment.device.timing_floor_ms
    assert floor and 0.0005 < floor < 0.05 and all(floor < c.median_ms for c in perf)


@pytest.mark.parametrize("name", bundled_task_names())
def test_the_tunable_kernel_of_every_bundled_task_is_correct_at_its_first_point(cuda_backend, name):
    task = resolve_task(name)
    tun = task.spec.tunables
    space = TunableSpace(tun.params, tun.constraints)
    config = space.as_dict(space.valid()[0])  # the first valid point, in the space's fixed order
    result = evaluate(task, candidates.tuned(task, config), cuda_backend, QUICK)
    assert result.correct, (config, result.failure)
    assert result.score_ms and result.score_ms > 0


def test_wrong_kernel_fails_with_the_first_mismatch(cuda_backend):
    task = resolve_task("sgemm")
    cand = candidates.from_kernel_source(task, task.spec.baseline, SGEMM_WRONG_K)
    result = evaluate(task, cand, cuda_backend, EvaluationConfig(roles=["validation"]))
    assert not result.correct and result.score_ms is None
    bad = [c for c in result.cases if c.status == "mismatch"]
    assert bad, [c.status for c in result.cases]
    out = bad[0].outputs[0]
    assert out.buffer == "C" and out.mismatches > 0 and out.first_mismatch is not None
    assert "outside tolerance" in bad[0].message


def test_wild_write_is_a_clear_error_and_the_worker_comes_back(cuda_backend):
    task, cand = _transpose(WILD_WRITE)
    result = evaluate(task, cand, cuda_backend, EvaluationConfig(roles=["validation"]))
    first = result.cases[0]
    assert first.status == "run_error" and first.run.error == "CUDA_ERROR_ILLEGAL_ADDRESS"
    assert first.run.worker_restarted
    assert all(c.status == "skipped" for c in result.cases[1:])
    task, good = _transpose(GOOD)
    assert evaluate(task, good, cuda_backend, EvaluationConfig(roles=["validation"])).correct


def test_write_past_the_end_is_caught_by_the_canary(cuda_backend):
    task, cand = _transpose(TAIL_WRITE)
    result = evaluate(task, cand, cuda_backend, EvaluationConfig(roles=["validation"]))
    assert not result.correct
    assert any(c.status == "corrupted" and "out" in c.run.overruns for c in result.cases)


def test_out_of_bounds_read_sees_poison(cuda_backend):
    task, cand = _transpose(OOB_READ)
    result = evaluate(task, cand, cuda_backend, EvaluationConfig(roles=["validation"]))
    assert not result.correct
    assert any(o.nonfinite > 0 for c in result.cases for o in c.outputs)


def test_modified_input_is_reported_and_the_kept_inputs_stay_intact(cuda_backend):
    task, cand = _transpose(MODIFY_INPUT)
    config = EvaluationConfig(roles=["validation"], seed=77)
    result = evaluate(task, cand, cuda_backend, config)
    assert any(c.status == "corrupted" and c.run.modified_inputs == ["in"] for c in result.cases)
    # inputs stay on the device between evaluations: the next kernel must see them as drawn
    task, good = _transpose(GOOD)
    again = evaluate(task, good, cuda_backend, config)
    assert again.correct, again.failure
    assert all(not c.run.modified_inputs for c in again.cases)


def test_infinite_loop_times_out_and_the_next_evaluation_works(cuda_backend):
    task, cand = _transpose(HANG)
    result = evaluate(task, cand, cuda_backend, EvaluationConfig(roles=["validation"], timeout_s=5))
    assert result.cases[0].status == "run_error" and result.cases[0].run.status == "timeout"
    assert all(c.status == "skipped" for c in result.cases[1:])
    task, good = _transpose(GOOD)
    assert evaluate(task, good, cuda_backend, EvaluationConfig(roles=["validation"])).correct


def test_oversized_block_is_an_invalid_launch(cuda_backend):
    task, cand = _transpose(GOOD)
    cand = cand.model_copy(update={"launch": cand.launch.model_copy(update={"block": [64, 32]})})
    result = evaluate(task, cand, cuda_backend, EvaluationConfig(roles=["validation"]))
    # refused by the engine's check of CUDA's launch limits, before the worker is asked
    assert result.cases[0].status == "run_error" and result.cases[0].run is None
    assert "2048 threads" in result.cases[0].message


def test_same_seed_replays_the_same_inputs(cuda_backend):
    task = resolve_task("sgemm")  # one thread per element: deterministic, unlike atomics
    config = EvaluationConfig(roles=["validation"], seed=1234)
    a = evaluate(task, candidates.baseline(task), cuda_backend, config)
    b = evaluate(task, candidates.baseline(task), cuda_backend, config)
    assert a.seed == b.seed == 1234
    assert [c.max_abs_err for c in a.cases] == [c.max_abs_err for c in b.cases]


def test_timing_stops_early_only_where_the_median_is_clearly_above_the_bound(cuda_backend):
    task = resolve_task("transpose")
    names = [c.name for c in task.spec.cases_for(["performance"], "cuda")]
    low, high = names[0], names[1:]  # every case but the first gets a bound no kernel comes near
    bounds = {low: 1e-6, **{name: 1e6 for name in high}}
    config = EvaluationConfig(roles=["performance"], timing=TimingPlan(warmup=2, reps=30), timeout_s=60,
                              stop_timing_above_ms=bounds)
    result = evaluate(task, candidates.baseline(task), cuda_backend, config)
    assert result.correct, result.failure
    timings = {c.name: c.timing for c in result.cases}
    assert (timings[low].n, timings[low].planned_reps, timings[low].stopped_above_ms) == (5, 30, 1e-6)
    assert all(timings[name].n == 30 and timings[name].stopped_above_ms is None for name in high)
