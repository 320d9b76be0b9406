"""The adversarial kernels of test_oracle_adversarial.py on bfloat16 buffers: the 16-bit poison (0x7FBD around
inputs, 0xFFFF in unwritten outputs, 0x5A5A around outputs) catches what the float32 patterns catch.

bf16 elements are 2 bytes: 1001 of them end 14 bytes before the guard page (the next element is in the
checked slack); 1024 end on it."""

from __future__ import annotations

import pytest

from tests.harness_tools.check.test_oracle_adversarial import (
    BACKENDS,
    _assert_faulted_on,
    _assert_mismatch_at,
    _run,
    _vector_task,
)


def _bf16_task(folder, kernel_name: str, body: str, reference: str, sizes: list[int]):
    source = ("#include <cuda_bf16.h>\n"
              f'extern "C" __global__ void {kernel_name}(const __nv_bfloat16* in, __nv_bfloat16* out, int n) {{\n'
              f"    int i = blockIdx.x * blockDim.x + threadIdx.x;\n{body}}}\n")
    return _vector_task(folder, kernel_name, source, reference, sizes, dtype="bfloat16")


def _slack_read_used(case):
    _assert_mismatch_at(case, "out", 1000)  # in[1001] is the slack's signalling NaN, and the sum is NaN


def _slack_copied(case):
    assert case.status == "corrupted" and case.run.overruns == ["out"], case  # 0x7FBD over the output's 0x5A5A


PAST_THE_END = {
    "used-in-arithmetic": ("    if (i < n) out[i] = __float2bfloat16(__bfloat162float(in[i]) + __bfloat162float(in[i + 1]));\n",
                           "x + np.append(x[1:], 0)", _slack_read_used),
    "copied": ("    if (i < n) out[i] = in[i];\n    if (i == 0) out[n] = in[n];\n", "x.copy()", _slack_copied),
}


@pytest.mark.parametrize("backend_fixture", BACKENDS)
@pytest.mark.parametrize("kind", sorted(PAST_THE_END))
def test_bf16_read_past_the_end(request, tmp_path, backend_fixture, kind):
    body, reference, check_slack = PAST_THE_END[kind]
    backend, result = _run(request, backend_fixture, _bf16_task(tmp_path, "past", body, reference, [1001, 1024]))
    slack, edge = result.cases
    check_slack(slack)
    _assert_faulted_on(edge, backend, {"in"}, "read")  # in[1024] lies on the guard page (cuda: unmapped)


@pytest.mark.parametrize("backend_fixture", BACKENDS)
def test_bf16_read_before_the_start_and_an_unwritten_element(request, tmp_path, backend_fixture):
    body = "    if (i < n) out[i] = __hadd(in[i], in[i - 1]);\n"
    task = _bf16_task(tmp_path / "back", "pair_sum_back", body, "x + np.insert(x[:-1], 0, 0)", [1001])
    _, result = _run(request, backend_fixture, task)
    _assert_mismatch_at(result.cases[0], "out", 0)  # in[-1] is the front pad's signalling NaN
    task = _bf16_task(tmp_path / "unwritten", "twice", "    if (i < n - 1) out[i] = in[i] * __float2bfloat16(2.0f);\n",
                      "2 * x", [1001])
    _, result = _run(request, backend_fixture, task)
    _assert_mismatch_at(result.cases[0], "out", 1000)  # still the 0xFFFF prefill: a NaN


@pytest.mark.parametrize("backend_fixture", BACKENDS)
def test_a_correct_bf16_kernel_passes_untouched(request, tmp_path, backend_fixture):
    body = "    if (i < n) out[i] = __hmul(in[i], __float2bfloat16(2.0f));\n"
    _, result = _run(request, backend_fixture, _bf16_task(tmp_path, "twice", body, "2 * x", [1, 3, 1001, 1024, 4097]))
    assert result.correct, result.failure
    assert all(not c.run.overruns and not c.run.modified_inputs for c in result.cases)
    assert all(o.max_abs_err == 0 for c in result.cases for o in c.outputs)  # doubling is exact in bf16
