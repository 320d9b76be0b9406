"""Inputs built by the task's own generator (``inputs`` in task.json), through ``evaluate`` and ``cudaopt eval``.

A CSR sparse matrix-vector product cannot run on independent random numbers: its row pointers must be sorted
and end at nnz, its column indices in range. The generator builds them; every bad return is refused with
the file, the field ``inputs.function``, the buffer and the problem.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness_tools.check.generated_inputs import generated_inputs, generator_rng
from harness_tools.check.task_functions import task_function
from harness_tools.errors import TaskSpecError
from harness_tools.task.dtypes import numpy_dtype
from harness_tools.task.loading import load_task
from tests.harness_tools.check.checking_tasks import cudaopt, run, write_task

SPMV = """
extern "C" __global__ void spmv(const int* row_ptr, const int* col, const float* val, const float* x, float* y,
                                int rows) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) {
    float acc = 0.0f;
    for (int k = row_ptr[r]; k < row_ptr[r + 1]; ++k) acc += val[k] * x[col[k]];
    y[r] = acc;
  }
}
"""
SPMV_REFERENCE = """
import numpy as np


def make_inputs(sizes, rng):
    rows, cols, nnz = sizes["rows"], sizes["cols"], sizes["nnz"]
    counts = np.bincount(rng.integers(0, rows, nnz), minlength=rows)
    return {"row_ptr": np.concatenate([[0], np.cumsum(counts)]), "col": rng.integers(0, cols, nnz),
            "val": rng.standard_normal(nnz), "x": rng.uniform(-1, 1, cols)}


def reference(inputs, sizes):
    rp, col, val, x = inputs["row_ptr"], inputs["col"], inputs["val"], inputs["x"]
    y = np.zeros(sizes["rows"])
    np.add.at(y, np.repeat(np.arange(sizes["rows"]), np.diff(rp).astype(np.int64)), val * x[col])
    return {"y": y}
"""
SPMV_PARAMS = [
    {"kind": "buffer", "name": "row_ptr", "dtype": "int32", "shape": ["rows + 1"], "role": "in"},
    {"kind": "buffer", "name": "col", "dtype": "int32", "shape": ["nnz"], "role": "in"},
    {"kind": "buffer", "name": "val", "dtype": "float32", "shape": ["nnz"], "role": "in"},
    {"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["cols"], "role": "in"},
    {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["rows"], "role": "out"},
    {"kind": "scalar", "name": "rows", "dtype": "int32", "value": "rows"},
]
SPMV_CASES = [{"name": "small", "role": "validation", "sizes": {"rows": 37, "cols": 53, "nnz": 200}},
              {"name": "wide", "role": "validation", "sizes": {"rows": 1000, "cols": 700, "nnz": 5003}}]
ONE_PER_ROW = {"grid": ["ceil_div(rows, 128)"], "block": [128]}


def _spmv(folder, **extra):
    fields = {"inputs": {"file": "reference.py", "function": "make_inputs"}, **extra}
    return write_task(folder, kernel_name="spmv", kernel=SPMV, params=SPMV_PARAMS, sizes=["rows", "cols", "nnz"],
                      cases=SPMV_CASES, reference_py=SPMV_REFERENCE, launch=ONE_PER_ROW,
                      tolerance={"float32": {"atol": 1e-4, "rtol": 1e-4}}, **fields)


def test_generated_sparse_matrix_feeds_kernel_and_reference(cpu_backend, tmp_path):
    task = load_task(_spmv(tmp_path / "spmv"))
    result = run(task, cpu_backend)
    assert result.correct, result.failure
    assert [c.status for c in result.cases] == ["passed", "passed"]
    assert result.cases[1].max_abs_err < 1e-4


def test_a_wrong_kernel_on_generated_inputs_still_fails(cpu_backend, tmp_path):
    task = load_task(_spmv(tmp_path / "spmv"))
    drops_last = SPMV.replace("k < row_ptr[r + 1]", "k < row_ptr[r + 1] - 1")
    result = run(task, cpu_backend, drops_last)
    assert not result.correct
    assert result.cases[0].status == "mismatch" and "y:" in result.cases[0].message


def test_generated_inputs_are_a_function_of_seed_and_case(tmp_path):
    task = load_task(_spmv(tmp_path / "spmv"))
    small, wide = task.spec.cases
    first, again = generated_inputs(task, small, 7), generated_inputs(task, small, 7)
    assert all(first[k].tobytes() == again[k].tobytes() for k in first)
    assert first["val"].tobytes() != generated_inputs(task, small, 8)["val"].tobytes()
    assert generated_inputs(task, wide, 7)["x"].shape == (700,)
    # each buffer in its own dtype, each value the single rounding of what the generator returned
    assert {k: str(v.dtype) for k, v in first.items()} == {"row_ptr": "int32", "col": "int32", "val": "float32",
                                                           "x": "float32"}
    make_inputs = task_function(task, "reference.py", "make_inputs", "inputs.function")
    raw = make_inputs(dict(small.sizes), generator_rng(7, small))
    assert np.array_equal(first["val"], raw["val"].astype(np.float32))
    assert first["row_ptr"][-1] == 200 and np.all(np.diff(first["row_ptr"]) >= 0)


def test_half_inputs_are_rounded_once_to_their_dtype(tmp_path):
    params = [{"kind": "buffer", "name": "a", "dtype": "bfloat16", "shape": ["n"], "role": "in"},
              {"kind": "buffer", "name": "b", "dtype": "float16", "shape": ["n"], "role": "in"},
              {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["n"], "role": "out"},
              {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}]
    values = "np.linspace(-3, 3, sizes['n']) + 1e-7"
    folder = write_task(tmp_path / "half", kernel_name="k", kernel='extern "C" __global__ void k() {}\n',
                        params=params, sizes=["n"], cases=[{"name": "v", "role": "validation", "sizes": {"n": 64}}],
                        reference_py=f"import numpy as np\n\ndef make_inputs(sizes, rng):\n"
                                     f"    return {{'a': {values}, 'b': {values}}}\n",
                        launch={"grid": [1], "block": [1]}, inputs={"function": "make_inputs"})
    task = load_task(folder)
    arrays = generated_inputs(task, task.spec.cases[0], 1)
    exact = np.linspace(-3, 3, 64) + 1e-7
    for name, dtype in (("a", "bfloat16"), ("b", "float16")):
        assert arrays[name].dtype == numpy_dtype(dtype)
        assert arrays[name].tobytes() == exact.astype(numpy_dtype(dtype)).tobytes()


# ---- every bad return names the file, the field, the buffer and the problem ---------------------------------
SCALE = """
extern "C" __global__ void scale(const float* x, const signed char* k, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i] + k[i];
}
"""
SCALE_PARAMS = [{"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n"], "role": "in"},
                {"kind": "buffer", "name": "k", "dtype": "int8", "shape": ["n"], "role": "in"},
                {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["n"], "role": "out"},
                {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}]
SCALE_REFERENCE = "def reference(inputs, sizes):\n    return {'y': 2.0 * inputs['x'] + inputs['k']}\n"


def _scale(folder, generator: str, **extra):
    fields = {"inputs": {"function": "make_inputs"}, **extra}
    return write_task(folder, kernel_name="scale", kernel=SCALE, params=SCALE_PARAMS, sizes=["n"],
                      cases=[{"name": "v", "role": "validation", "sizes": {"n": 4}}],
                      reference_py="import numpy as np\n\n" + SCALE_REFERENCE + "\n\n" + generator,
                      launch={"grid": [1], "block": [32]}, **fields)


GOOD_K = "np.array([1, -2, 3, 0])"


@pytest.mark.parametrize(("body", "problem"), [
    (f"return {{'x': np.ones(3), 'k': {GOOD_K}}}", "make_inputs() for case v: returned x with shape (3,), expected (4,)"),
    ("return {'x': np.ones(4)}", "did not return input 'k'"),
    (f"return {{'x': np.ones(4), 'k': {GOOD_K}, 'y': np.ones(4)}}", "returned 'y', which is not an in/inout buffer"),
    ("return [np.ones(4)]", "must return a dict of arrays"),
    (f"return {{'x': np.array([1.0, np.nan, 0, 0]), 'k': {GOOD_K}}}",
     "returned x with the non-finite value nan at index [1]: inputs must be finite"),
    (f"return {{'x': np.array([1.0, 1e39, 0, 0]), 'k': {GOOD_K}}}",
     "returned x with the value 1e+39 at index [1], which overflows float32"),
    ("return {'x': np.ones(4), 'k': np.array([1, 2, 300, 4])}",
     "returned k with the value 300 at index [2], outside the range of int8 (-128..127)"),
    ("return {'x': np.ones(4), 'k': np.array([1.0, 2.5, 3, 4])}",
     "returned k with the value 2.5 at index [1], which is not a whole number"),
    (f"return {{'x': ['a', 'b', 'c', 'd'], 'k': {GOOD_K}}}", "returned x with dtype <U1"),
    ("raise RuntimeError('no polygon today')", "make_inputs() raised RuntimeError: no polygon today"),
], ids=["shape", "missing", "unknown", "not-a-dict", "nan", "float-overflow", "int-range", "not-whole", "strings",
        "raises"])
def test_a_bad_generator_return_is_refused_with_file_field_and_buffer(cpu_backend, tmp_path, body, problem):
    task = load_task(_scale(tmp_path / "scale", f"def make_inputs(sizes, rng):\n    {body}\n"))
    with pytest.raises(TaskSpecError) as info:
        run(task, cpu_backend)
    err = info.value
    assert err.file == str(task.folder / "reference.py") and err.field == "inputs.function"
    assert problem in err.problem, err.problem


def test_good_generator_values_are_cast_and_used(cpu_backend, tmp_path):
    """Whole floats for an int8 buffer, ints for a float one: accepted, cast, and what the kernel sees."""
    task = load_task(_scale(tmp_path / "scale", "def make_inputs(sizes, rng):\n"
                                                "    return {'x': [1, 2, 3, 4], 'k': np.array([1.0, -2.0, 127, -128])}\n"))
    result = run(task, cpu_backend)
    assert result.correct, result.failure


def test_a_missing_generator_function_is_named(cpu_backend, tmp_path):
    task = load_task(_scale(tmp_path / "scale", "def make_input(sizes, rng):\n    return {}\n"))
    with pytest.raises(TaskSpecError) as info:
        run(task, cpu_backend)
    assert info.value.field == "inputs.function" and "no function 'make_inputs' in reference.py" in info.value.problem


# ---- refused when the task loads ----------------------------------------------------------------------------
def _load_error(folder) -> TaskSpecError:
    with pytest.raises(TaskSpecError) as info:
        load_task(folder)
    assert info.value.file == str(folder / "task.json")
    return info.value


def test_inputs_with_an_init_distribution_are_refused_at_load(tmp_path):
    params = [dict(SCALE_PARAMS[0], init={"dist": "normal"}), *SCALE_PARAMS[1:]]
    folder = _scale(tmp_path / "scale", "")
    spec = json.loads((folder / "task.json").read_text())
    (folder / "task.json").write_text(json.dumps({**spec, "params": params}))
    err = _load_error(folder)
    assert err.field == "params.0.init" and "remove one of them" in err.problem


def test_inputs_with_a_stored_reference_are_refused_at_load(tmp_path):
    folder = _scale(tmp_path / "scale", "", reference={"kind": "stored", "dir": "expected"})
    (folder / "expected" / "v").mkdir(parents=True)
    for name, dtype in (("x", np.float32), ("k", np.int8), ("y", np.float64)):
        np.save(folder / "expected" / "v" / f"{name}.npy", np.zeros(4, dtype))
    err = _load_error(folder)
    assert err.field == "inputs" and "stored reference brings its own inputs" in err.problem


def test_a_missing_generator_file_and_a_bad_function_name_are_refused_at_load(tmp_path):
    err = _load_error(_scale(tmp_path / "a", "", inputs={"file": "gen.py", "function": "make_inputs"}))
    assert err.field == "inputs.file" and "'gen.py' does not exist" in err.problem
    err = _load_error(_scale(tmp_path / "b", "", inputs={"function": "make-inputs"}))
    assert err.field == "inputs.function" and "must be an identifier" in err.problem
    err = _load_error(_scale(tmp_path / "c", "", inputs={"file": "../reference.py"}))
    assert err.field == "inputs.file" and "plain file name" in err.problem


# ---- through the command line --------------------------------------------------------------------------------
def test_cudaopt_eval_runs_a_task_with_generated_inputs(tmp_path):
    folder = _spmv(tmp_path / "spmv")
    out = cudaopt("eval", str(folder), "--backend", "cpu", "--json", "--seed", "5", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["correct"] is True and data["seed"] == 5 and [c["status"] for c in data["cases"]] == ["passed"] * 2


def test_cudaopt_eval_names_the_generator_that_returned_a_bad_shape(tmp_path):
    folder = _scale(tmp_path / "scale", f"def make_inputs(sizes, rng):\n    return {{'x': np.ones(3), 'k': {GOOD_K}}}\n")
    out = cudaopt("eval", str(folder), "--backend", "cpu", cwd=tmp_path)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "reference.py: inputs.function: make_inputs() for case v: returned x with shape (3,), expected (4,)" in out.stderr
    assert "Traceback" not in out.stderr
