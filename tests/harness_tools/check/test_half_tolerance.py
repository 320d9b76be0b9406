"""The default bfloat16 tolerance (docs/dtypes.md: atol u, rtol 2u, u = 2^-8) on the bundled rmsnorm_bf16:
an fp32-accumulating kernel passes every case; one that keeps its sum of squares in bf16 fails exactly where
the derivation says it must (long rows: the sum stops growing) and passes where it says it must (one column:
a single rounding of x^2 costs u/2 after the square root, plus the output's own u, below 2u)."""

from __future__ import annotations

from harness_tools import evaluate
from harness_tools.evaluation import EvaluationConfig
from harness_tools.task import candidate as candidates
from harness_tools.task.loading import resolve_task

VALIDATION = EvaluationConfig(roles=["validation"], seed=11, timeout_s=120)

BF16_SUM = """
#include <cuda_bf16.h>
extern "C" __global__ void rmsnorm_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                                        int rows, int cols) {
    const int r = blockIdx.x;
    if (threadIdx.x != 0) return;
    const __nv_bfloat16* xr = x + (size_t)r * cols;
    __nv_bfloat16 s = __float2bfloat16(0.0f);
    for (int c = 0; c < cols; ++c) s = __hadd(s, __hmul(xr[c], xr[c]));  // rounded to bf16 at every step
    const float scale = rsqrtf(__bfloat162float(s) / cols + 1e-6f);
    for (int c = 0; c < cols; ++c)
        y[(size_t)r * cols + c] = __float2bfloat16(__bfloat162float(xr[c]) * scale * __bfloat162float(w[c]));
}
"""


def test_the_fp32_baseline_passes_within_the_output_rounding(cpu_backend):
    task = resolve_task("rmsnorm_bf16")
    result = evaluate(task, candidates.baseline(task), cpu_backend, VALIDATION)
    assert result.correct, result.failure
    assert max(c.max_rel_err for c in result.cases) <= 2.0 ** -8 * 1.01  # one rounding, and fp32 noise


def test_a_bf16_running_sum_fails_on_long_rows_and_passes_on_one_column(cpu_backend):
    task = resolve_task("rmsnorm_bf16")
    cand = candidates.baseline(task).model_copy(update={"source": BF16_SUM})
    cases = {c.name: c for c in evaluate(task, cand, cpu_backend, VALIDATION).cases}
    for name in ("val_row_1x4099", "val_129x1000", "val_vec_3x8192"):
        assert cases[name].status == "mismatch", (name, cases[name].message)
        assert cases[name].max_rel_err > 0.1, (name, cases[name].max_rel_err)  # over 12x the 2^-7 allowed
    for name in ("val_1x1", "val_col_300x1"):
        assert cases[name].passed, (name, cases[name].message)
