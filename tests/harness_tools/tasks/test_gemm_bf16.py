"""The bundled gemm_bf16 task: it loads with its size rules, the baseline passes its cpu cases, the tunable
kernel's tiling (its PTX wrappers emulated) passes on the cpu backend, which refuses the real one, and on a GPU
the real tensor-core kernel passes validation and hidden shapes at two configurations."""

from __future__ import annotations

import pytest

from harness_tools import evaluate
from harness_tools.check.hidden_shapes import hidden_shapes, hidden_task
from harness_tools.evaluation import EvaluationConfig
from harness_tools.run.timing import TimingPlan
from harness_tools.task import candidate as candidates
from harness_tools.task.loading import resolve_task
from harness_tools.task.tunable_space import TunableSpace

CONFIG_SMALL = {"BM": 64, "BN": 64, "BK": 32, "WM": 32, "WN": 32, "STAGES": 3, "GROUP_M": 8, "MINB": 1}
CONFIG_WIDE = {"BM": 128, "BN": 256, "BK": 32, "WM": 64, "WN": 64, "STAGES": 4, "GROUP_M": 8, "MINB": 1}
CONFIG_DEEP = {"BM": 128, "BN": 128, "BK": 64, "WM": 64, "WN": 64, "STAGES": 2, "GROUP_M": 1, "MINB": 2}
CONFIG_DEEP_SMALL = {"BM": 64, "BN": 64, "BK": 64, "WM": 32, "WN": 32, "STAGES": 2, "GROUP_M": 1, "MINB": 2}

# The PTX wrappers of tuned.cu as PTX defines them, in plain C++ (shuffles and loads), so that everything
# around them (tile walk, swizzles, copy and fragment addresses, pipeline order, edge masks, epilogue) runs on
# the cpu backend. The copies are synchronous, so the waits are no-ops: what the barriers order is the same.
EMULATED_PTX = r"""
typedef unsigned long long saddr_t;

__device__ __forceinline__ saddr_t shared_address(const void* p) { return reinterpret_cast<saddr_t>(p); }

__device__ __forceinline__ void async_copy16(saddr_t dst, const void* src, bool valid)
{
    *reinterpret_cast<uint4*>(dst) = valid ? *reinterpret_cast<const uint4*>(src) : make_uint4(0u, 0u, 0u, 0u);
}

__device__ __forceinline__ void async_commit() {}

template <int N>
__device__ __forceinline__ void async_wait() {}

// ldmatrix: lane 4g + t receives row g, elements 2t and 2t + 1 of each matrix j (row addresses from lanes 8j..8j+7)
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], saddr_t addr)
{
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    for (int j = 0; j < 4; ++j) {
        const saddr_t row = __shfl_sync(0xffffffffu, addr, j * 8 + g);
        r[j] = *reinterpret_cast<const uint32_t*>(row + 4 * t);
    }
}

// .trans: lane 4g + t receives element g of rows 2t and 2t + 1
__device__ __forceinline__ void ldsm_x4_trans(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3, saddr_t addr)
{
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    uint32_t r[4];
    for (int j = 0; j < 4; ++j) {
        const saddr_t lo = __shfl_sync(0xffffffffu, addr, j * 8 + 2 * t);
        const saddr_t hi = __shfl_sync(0xffffffffu, addr, j * 8 + 2 * t + 1);
        r[j] = uint32_t(*reinterpret_cast<const uint16_t*>(lo + 2 * g)) |
               uint32_t(*reinterpret_cast<const uint16_t*>(hi + 2 * g)) << 16;
    }
    r0 = r[0]; r1 = r[1]; r2 = r[2]; r3 = r[3];
}

__device__ __forceinline__ float bf16_lo(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }

// mma.m16n8k16 fragments (g = lane / 4, t = lane % 4): a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..),
// a3 (g+8, 2t+8..); b0 (k 2t..2t+1, n g), b1 (k 2t+8.., n g); d0, d1 (g, 2t..2t+1), d2, d3 (g+8, 2t..2t+1)
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    for (int q = 0; q < 8; ++q) {  // k = 2q and 2q + 1
        const int hi = q >= 4, src = q & 3;
        const uint32_t ag = __shfl_sync(0xffffffffu, a[hi ? 2 : 0], g * 4 + src);
        const uint32_t ag8 = __shfl_sync(0xffffffffu, a[hi ? 3 : 1], g * 4 + src);
        const uint32_t b0 = __shfl_sync(0xffffffffu, b[hi], (2 * t) * 4 + src);
        const uint32_t b1 = __shfl_sync(0xffffffffu, b[hi], (2 * t + 1) * 4 + src);
        d[0] = fmaf(bf16_lo(ag), bf16_lo(b0), fmaf(bf16_hi(ag), bf16_hi(b0), d[0]));
        d[1] = fmaf(bf16_lo(ag), bf16_lo(b1), fmaf(bf16_hi(ag), bf16_hi(b1), d[1]));
        d[2] = fmaf(bf16_lo(ag8), bf16_lo(b0), fmaf(bf16_hi(ag8), bf16_hi(b0), d[2]));
        d[3] = fmaf(bf16_lo(ag8), bf16_lo(b1), fmaf(bf16_hi(ag8), bf16_hi(b1), d[3]));
    }
}
"""


def emulated(task, config: dict[str, int]):
    cand = candidates.tuned(task, config)
    start = cand.source.index("// ---- PTX wrappers")
    end = cand.source.index("// ---- end of PTX wrappers")
    return cand.model_copy(update={"source": cand.source[:start] + EMULATED_PTX + cand.source[end:]})


def test_the_task_loads_with_its_size_rules_and_a_valid_space():
    task = resolve_task("gemm_bf16")
    spec = task.spec
    assert spec.size_rules is not None and spec.size_rules.multiple_of == {"N": 8, "K": 8}
    assert all(spec.size_rules.problem(c.sizes) is None for c in spec.cases + spec.hidden.cases)
    assert {c.name for c in spec.cases_for(["performance"], "cuda")} == {
        "perf_4096x4096x4096", "perf_8192x8192x8192", "perf_4096x14336x4096"}
    assert [c.name for c in spec.cases_for(["performance"], "cpu")] == ["perf_cpu_256x256x256"]
    space = TunableSpace(spec.tunables.params, spec.tunables.constraints)
    assert not space.problems
    for config in (CONFIG_SMALL, CONFIG_WIDE, CONFIG_DEEP, CONFIG_DEEP_SMALL):
        assert space.is_valid(space.key(config)), config
    for backend in ("cpu", "cuda"):
        shapes = hidden_shapes(spec, backend)
        assert len(shapes) >= 6
        assert all(spec.size_rules.problem(s.case.sizes) is None for s in shapes)


def test_the_baseline_passes_its_cpu_cases(cpu_backend):
    task = resolve_task("gemm_bf16")
    result = evaluate(task, candidates.baseline(task), cpu_backend,
                      EvaluationConfig(seed=7, timing=TimingPlan(warmup=0, reps=2), timeout_s=300))
    assert result.correct, result.failure
    assert {c.name for c in result.cases if c.role == "performance"} == {"perf_cpu_256x256x256"}
    hidden = evaluate(hidden_task(task, hidden_shapes(task.spec, "cpu")), candidates.baseline(task), cpu_backend,
                      EvaluationConfig(roles=["validation"], seed=8, timeout_s=300))
    assert hidden.correct, hidden.failure


def test_the_cpu_backend_refuses_the_tensor_core_kernel(cpu_backend):
    task = resolve_task("gemm_bf16")
    result = evaluate(task, candidates.tuned(task, CONFIG_SMALL), cpu_backend,
                      EvaluationConfig(roles=["validation"], seed=1, timeout_s=60))
    assert not result.correct
    assert "asm" in (result.failure or "") or "asm" in result.compile.log, (result.failure, result.compile.log)


# (small tiles: NVRTC takes tens of seconds over the emulated mma of a 64x64 warp tile)
@pytest.mark.parametrize("config", [CONFIG_SMALL, CONFIG_DEEP_SMALL], ids=["64x64x32_3stages", "64x64x64_2stages"])
def test_the_tiling_passes_on_the_cpu_with_emulated_ptx(cpu_backend, config):
    task = resolve_task("gemm_bf16")
    result = evaluate(task, emulated(task, config), cpu_backend,
                      EvaluationConfig(roles=["validation"], seed=9, timeout_s=600))
    assert result.correct, result.failure


@pytest.mark.gpu
@pytest.mark.parametrize("config", [CONFIG_WIDE, CONFIG_DEEP], ids=["128x256x32_4stages", "128x128x64_2stages"])
def test_the_tensor_core_kernel_passes_on_the_gpu(cuda_backend, config):
    task = resolve_task("gemm_bf16")
    cand = candidates.tuned(task, config)
    result = evaluate(task, cand, cuda_backend, EvaluationConfig(roles=["validation"], seed=12, timeout_s=300))
    assert result.correct, result.failure
    assert result.compile.resources.spill_store_bytes in (0, None)
    hidden = evaluate(hidden_task(task, hidden_shapes(task.spec, "cuda")), cand, cuda_backend,
                      EvaluationConfig(roles=["validation"], seed=13, timeout_s=300))
    assert hidden.correct, hidden.failure
