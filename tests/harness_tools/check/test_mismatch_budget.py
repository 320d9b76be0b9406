"""A per-output mismatch budget (``max_mismatches``): a few elements outside tolerance may pass, NaN never does."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness_tools.check.compare import compare
from harness_tools.errors import TaskSpecError
from harness_tools.task.loading import load_task
from harness_tools.task.spec import Tolerance
from tests.harness_tools.check.checking_tasks import cudaopt, run, write_task

# every 100th element (i % 100 == 7) is wrong by at least 1: ten of them at n = 1000
TEN_WRONG = """
extern "C" __global__ void twice(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = (i % 100 == 7) ? 5.0f - 2.0f * x[i] : 2.0f * x[i];
}
"""
TEN_UNWRITTEN = """
extern "C" __global__ void twice(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && i % 100 != 7) y[i] = 2.0f * x[i];
}
"""
REFERENCE = "def reference(inputs, sizes):\n    return {'y': 2.0 * inputs['x']}\n"


def _task(folder, budget=None, x_budget=None):
    y = {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["n"], "role": "out"}
    x = {"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n"], "role": "in"}
    if budget is not None:
        y["max_mismatches"] = budget
    if x_budget is not None:
        x["max_mismatches"] = x_budget
    return write_task(folder, kernel_name="twice", kernel=TEN_WRONG,
                      params=[x, y, {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}], sizes=["n"],
                      cases=[{"name": "n1000", "role": "validation", "sizes": {"n": 1000}}], reference_py=REFERENCE,
                      launch={"grid": ["ceil_div(n, 128)"], "block": [128]})


def test_mismatches_within_the_budget_pass_and_are_reported(cpu_backend, tmp_path):
    result = run(load_task(_task(tmp_path / "t", "n // 100")), cpu_backend)
    assert result.correct, result.failure
    out = result.cases[0].outputs[0]
    assert out.passed and out.mismatches == 10 and out.max_mismatches == 10 and out.elements == 1000
    assert out.first_mismatch.index == [7]


def test_one_mismatch_over_the_budget_fails_and_says_so(cpu_backend, tmp_path):
    result = run(load_task(_task(tmp_path / "t", 9)), cpu_backend)
    case = result.cases[0]
    assert not result.correct and case.status == "mismatch"
    assert case.message.startswith("y: 10/1000 elements outside tolerance (budget 9; atol=1e-05, rtol=1e-05); "
                                   "first at [7]: got "), case.message
    assert case.outputs[0].mismatches == 10 and case.outputs[0].max_mismatches == 9


def test_without_a_budget_the_message_is_unchanged(cpu_backend, tmp_path):
    case = run(load_task(_task(tmp_path / "t")), cpu_backend).cases[0]
    assert case.message.startswith("y: 10/1000 elements outside tolerance (atol=1e-05, rtol=1e-05); first at [7]")


def test_unwritten_elements_never_pass_whatever_the_budget(cpu_backend, tmp_path):
    result = run(load_task(_task(tmp_path / "t", 500)), cpu_backend, TEN_UNWRITTEN)
    case = result.cases[0]
    assert not result.correct and case.status == "mismatch"
    assert case.outputs[0].nonfinite == 10 and case.outputs[0].mismatches == 10
    assert "10 of them NaN or Inf where the reference is finite, which no budget lets pass" in case.message


def test_compare_counts_the_budget_and_keeps_the_non_finite_rule():
    ref = np.array([1.0, 2.0, np.inf, 4.0])
    tol = Tolerance(atol=0.0, rtol=0.0)
    assert not compare("y", np.array([1.0, 2.5, 7.0, 4.0]), ref, tol, {}).passed
    budgeted = compare("y", np.array([1.0, 2.5, 7.0, 4.0]), ref, tol, {}, max_mismatches=2)
    assert budgeted.passed and budgeted.mismatches == 2  # a finite value where the reference is inf: a mismatch
    nan = compare("y", np.array([np.nan, 2.0, np.inf, 4.0]), ref, tol, {}, max_mismatches=4)
    assert not nan.passed and nan.nonfinite == 1 and nan.mismatches == 1
    with pytest.raises(ValueError, match="negative"):
        compare("y", ref, ref, tol, {}, max_mismatches=-1)


@pytest.mark.parametrize(("budget", "x_budget", "field", "problem"), [
    (None, 3, "params.0.max_mismatches", "buffer 'x' is an input: only outputs have a mismatch budget"),
    (-1, None, "params.1.buffer.max_mismatches", "greater than or equal to 0"),
    ("m // 2", None, "params.1.max_mismatches", "unknown size symbols ['m']"),
    ("n - 2000", None, "params.1 (y) in case 'n1000'", "max_mismatches 'n - 2000' = -1000 is negative"),
    ("n / 3", None, "params.1 (y) in case 'n1000'", "max_mismatches: 'n / 3' = 333.3333333333333 is not an integer"),
])
def test_a_bad_budget_is_refused_at_load(tmp_path, budget, x_budget, field, problem):
    folder = _task(tmp_path / "t", budget, x_budget)
    with pytest.raises(TaskSpecError) as info:
        load_task(folder)
    assert info.value.file == str(folder / "task.json") and info.value.field == field
    assert problem in info.value.problem, info.value.problem


def test_cudaopt_eval_shows_the_budget(tmp_path):
    folder = _task(tmp_path / "t", 9)
    out = cudaopt("eval", str(folder), "--backend", "cpu", "--seed", "1", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert "y: 10/1000 elements outside tolerance (budget 9;" in out.stdout
    spec = json.loads((folder / "task.json").read_text())
    spec["params"][1]["max_mismatches"] = 10
    (folder / "task.json").write_text(json.dumps(spec))
    assert cudaopt("eval", str(folder), "--backend", "cpu", "--seed", "1", cwd=tmp_path).returncode == 0
