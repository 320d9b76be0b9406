"""A task's own check of the outputs (``check`` in task.json), through ``evaluate`` on the cpu backend.

An argsort of keys with ties has many right answers: a stable and an unstable sort both are one, and the
element-wise comparison with NumPy's stable argsort accepts only the first. The check (a permutation that
sorts the keys) accepts both; with ``replaces_tolerance`` it alone decides. An output whose used length
depends on a tunable (one partial sum per block) keeps its poison past that length: only a check that
replaces the tolerance can judge it.
"""

from __future__ import annotations

import json

import pytest

from harness_tools.errors import TaskSpecError
from harness_tools.evaluation import EvaluationConfig, evaluate
from harness_tools.task import candidate as candidates
from harness_tools.task.loading import load_task
from tests.harness_tools.check.checking_tasks import VALIDATION, run, write_task

RANK_SORT = """
extern "C" __global__ void rank_sort(const int* keys, int* order, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int k = keys[i], rank = 0;
    for (int j = 0; j < n; ++j) rank += keys[j] < k || (keys[j] == k && j < i);
    order[rank] = i;
  }
}
"""
UNSTABLE = RANK_SORT.replace("j < i)", "j > i)")  # ties in reverse order: another right answer
COLLIDING = RANK_SORT.replace("(keys[j] == k && j < i)", "(keys[j] == k && j != i)")  # ties share a slot: wrong
SORT_PARAMS = [{"kind": "buffer", "name": "keys", "dtype": "int32", "shape": ["n"], "role": "in",
                "init": {"dist": "randint", "low": 0, "high": 9}},
               {"kind": "buffer", "name": "order", "dtype": "int32", "shape": ["n"], "role": "out"},
               {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}]
SORT_REFERENCE = """
import numpy as np


def reference(inputs, sizes):
    return {"order": np.argsort(inputs["keys"], kind="stable")}


def contract(outputs, expected, inputs, sizes):
    \"\"\"What the engine promises a check, as a list of broken promises.\"\"\"
    broken = []
    if set(outputs) != {"order"} or outputs["order"].dtype != np.int32:
        broken.append(f"outputs {[(k, str(v.dtype)) for k, v in outputs.items()]}")
    if expected["order"].dtype != np.float64:
        broken.append(f"expected dtype {expected['order'].dtype}")
    if inputs["keys"].dtype != np.int64 or inputs["n"] != sizes["n"] or sizes != {"n": len(inputs["keys"])}:
        broken.append(f"inputs {sorted(inputs)} sizes {sizes}")
    if outputs["order"].flags.writeable or expected["order"].flags.writeable:
        broken.append("writeable arrays")
    return broken


def check(outputs, expected, inputs, sizes):
    broken = contract(outputs, expected, inputs, sizes)
    if broken:
        return "contract broken: " + "; ".join(broken)
    order = outputs["order"]
    if not np.array_equal(np.sort(order), np.arange(sizes["n"])):
        return "order is not a permutation of 0..n-1"
    if np.any(np.diff(inputs["keys"][order]) < 0):
        return "the keys are not sorted in this order"
    return True


def says_no(outputs, expected, inputs, sizes):
    return False


def divides(outputs, expected, inputs, sizes):
    return 1 / 0


def counts(outputs, expected, inputs, sizes):
    return 5
"""
SORT_CASES = [{"name": "n300", "role": "validation", "sizes": {"n": 300}},
              {"name": "n1000", "role": "validation", "sizes": {"n": 1000}}]


def _sort_task(folder, check: dict | None = None):
    extra = {"check": check} if check is not None else {}
    return load_task(write_task(folder, kernel_name="rank_sort", kernel=RANK_SORT, params=SORT_PARAMS, sizes=["n"],
                                cases=SORT_CASES, reference_py=SORT_REFERENCE,
                                launch={"grid": ["ceil_div(n, 128)"], "block": [128]},
                                tolerance={"int32": {"atol": 0, "rtol": 0}}, **extra))


def test_without_a_check_the_unstable_sort_is_a_mismatch(cpu_backend, tmp_path):
    task = _sort_task(tmp_path / "sort")
    assert run(task, cpu_backend).correct
    result = run(task, cpu_backend, UNSTABLE)
    assert result.cases[0].status == "mismatch" and "elements outside tolerance" in result.cases[0].message


def test_a_check_that_does_not_replace_the_tolerance_adds_to_it(cpu_backend, tmp_path):
    task = _sort_task(tmp_path / "sort", {"function": "check"})
    result = run(task, cpu_backend)
    assert result.correct, result.failure  # also: the check saw what its contract says (else it names what broke)
    unstable = run(task, cpu_backend, UNSTABLE)  # the element-wise verdict still stands
    assert unstable.cases[0].status == "mismatch" and "custom check" not in unstable.cases[0].message


def test_a_check_that_replaces_the_tolerance_decides_alone(cpu_backend, tmp_path):
    task = _sort_task(tmp_path / "sort", {"function": "check", "replaces_tolerance": True})
    for source in (RANK_SORT, UNSTABLE):
        result = run(task, cpu_backend, source)
        assert result.correct, result.failure
    out = result.cases[0].outputs[0]
    assert out.passed and out.judged_by == "check" and out.mismatches > 0  # the comparison's statistics remain
    wrong = run(task, cpu_backend, COLLIDING)
    case = wrong.cases[0]
    assert case.status == "mismatch" and not case.passed
    assert case.message == "custom check: order is not a permutation of 0..n-1"
    assert case.outputs[0].judged_by == "check" and not case.outputs[0].passed


def test_a_check_returning_false_fails_the_case(cpu_backend, tmp_path):
    task = _sort_task(tmp_path / "sort", {"function": "says_no"})
    result = run(task, cpu_backend)
    assert not result.correct
    assert result.cases[0].status == "mismatch" and result.cases[0].message == "custom check: says_no() returned False"


@pytest.mark.parametrize(("function", "problem"), [
    ("divides", "divides() raised ZeroDivisionError: division by zero"),
    ("counts", ("counts() for case n300 must return None or True (pass), or False or a message string (fail); "
                "it returned int")),
    ("missing", "no function 'missing' in reference.py"),
])
def test_a_broken_check_is_the_tasks_bug(cpu_backend, tmp_path, function, problem):
    task = _sort_task(tmp_path / "sort", {"function": function})
    with pytest.raises(TaskSpecError) as info:
        run(task, cpu_backend)
    assert info.value.file == str(task.folder / "reference.py") and info.value.field == "check.function"
    assert problem in info.value.problem, info.value.problem


def test_a_bad_check_field_is_refused_at_load(tmp_path):
    with pytest.raises(TaskSpecError) as info:
        _sort_task(tmp_path / "a", {"file": "checks.py"})
    assert info.value.field == "check.file" and "'checks.py' does not exist" in info.value.problem
    with pytest.raises(TaskSpecError) as info:
        _sort_task(tmp_path / "b", {"function": "check", "replaces_tolerance": "sometimes"})
    assert info.value.field == "check.replaces_tolerance"
    with pytest.raises(TaskSpecError) as info:
        _sort_task(tmp_path / "c", {"function": "check", "strict": True})
    assert info.value.field == "check.strict" and "not permitted" in info.value.problem


# ---- an output whose used length depends on a tunable -------------------------------------------------------
PARTIAL_SUMS = """
extern "C" __global__ void partial_sums(const float* x, float* partial, int* count, int n) {
  __shared__ float s[BLOCK];
  int i = blockIdx.x * BLOCK + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  if (threadIdx.x == 0) {
    float acc = 0.0f;
    for (int t = 0; t < BLOCK; ++t) acc += s[t];
    partial[blockIdx.x] = acc;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) *count = gridDim.x;
}
"""
PARTIAL_REFERENCE = """
import numpy as np


def reference(inputs, sizes):
    partial = np.zeros(sizes["n"])
    partial[0] = inputs["x"].sum()
    return {"partial": partial, "count": np.zeros(1)}


def check(outputs, expected, inputs, sizes):
    used = int(outputs["count"][0])
    if not 1 <= used <= sizes["n"]:
        return f"count {used} is out of range"
    total = outputs["partial"][:used].astype(np.float64).sum()
    if abs(total - expected["partial"][0]) > 1e-4 * sizes["n"] ** 0.5:
        return f"the partial sums add up to {total}, expected {expected['partial'][0]}"
    return None
"""


def test_a_partly_written_output_is_judged_by_the_check(cpu_backend, tmp_path):
    params = [{"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n"], "role": "in"},
              {"kind": "buffer", "name": "partial", "dtype": "float32", "shape": ["n"], "role": "out"},
              {"kind": "buffer", "name": "count", "dtype": "int32", "shape": [1], "role": "out"},
              {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}]
    folder = write_task(tmp_path / "partial", kernel_name="partial_sums", kernel=PARTIAL_SUMS, params=params,
                        sizes=["n"], cases=[{"name": "n1000", "role": "validation", "sizes": {"n": 1000}}],
                        reference_py=PARTIAL_REFERENCE, launch={"grid": ["ceil_div(n, BLOCK)"], "block": ["BLOCK"]},
                        tolerance={"float32": {"atol": 1e-4, "rtol": 0}, "int32": {"atol": 0, "rtol": 0}},
                        check={"replaces_tolerance": True})
    spec = json.loads((folder / "task.json").read_text())
    spec["baseline"]["defines"] = {"BLOCK": 64}
    (folder / "task.json").write_text(json.dumps(spec))
    task = load_task(folder)
    base = candidates.baseline(task)
    for block in (64, 256):  # 16 or 4 partial sums; the rest of `partial` keeps its NaN poison
        cand = candidates.Candidate.model_validate({**base.model_dump(), "defines": {"BLOCK": block}})
        result = evaluate(task, cand, cpu_backend, VALIDATION)
        assert result.correct, result.failure
        partial = next(o for o in result.cases[0].outputs if o.buffer == "partial")
        assert partial.nonfinite == 1000 - -(-1000 // block) and partial.judged_by == "check"
    broken = candidates.Candidate.model_validate({**base.model_dump(), "source": PARTIAL_SUMS.replace(
        "acc += s[t]", "acc += s[t] * 1.5f")})
    result = evaluate(task, broken, cpu_backend, EvaluationConfig(roles=["validation"], seed=3))
    assert not result.correct and result.cases[0].message.startswith("custom check: the partial sums add up to")
