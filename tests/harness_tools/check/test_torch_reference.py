"""A torch reference (``{"kind": "torch"}``): float64 CPU tensors in, tensors or arrays out.

torch is an optional extra: the tests that run a torch reference skip without it (CI has none); what a
machine without torch says is checked by hiding torch from a subprocess (``sys.modules['torch'] = None``).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness_tools.errors import TaskSpecError
from harness_tools.task.loading import load_task
from tests.harness_tools.check.checking_tasks import run, write_task

SQUARE_PLUS = """
extern "C" __global__ void square_plus(const float* x, const int* k, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * x[i] + k[i];
}
"""
PARAMS = [{"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n"], "role": "in"},
          {"kind": "buffer", "name": "k", "dtype": "int32", "shape": ["n"], "role": "in"},
          {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["n"], "role": "out"},
          {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}]
TENSORS = """
import torch


def reference(inputs, sizes):
    x, k = inputs["x"], inputs["k"]
    if x.dtype != torch.float64 or k.dtype != torch.int64 or x.device.type != "cpu" or inputs["n"] != sizes["n"]:
        raise TypeError(f"unexpected inputs: {x.dtype} {k.dtype} {x.device} {inputs['n']} {sizes}")
    return {"y": x * x + k}
"""
ARRAYS = """
def reference(inputs, sizes):
    x, k = inputs["x"], inputs["k"]
    return {"y": (x * x + k).float().numpy()}  # a float32 array: converted to float64 by the engine
"""


def _task(folder, reference_py: str, reference: dict | None = None):
    return write_task(folder, kernel_name="square_plus", kernel=SQUARE_PLUS, params=PARAMS, sizes=["n"],
                      cases=[{"name": "n1000", "role": "validation", "sizes": {"n": 1000}}], reference_py=reference_py,
                      launch={"grid": ["ceil_div(n, 128)"], "block": [128]},
                      tolerance={"float32": {"atol": 1e-5, "rtol": 1e-5}},
                      reference=reference or {"kind": "torch", "file": "reference.py", "function": "reference"})


def test_a_torch_reference_judges_the_kernel(cpu_backend, tmp_path):
    pytest.importorskip("torch")
    task = load_task(_task(tmp_path / "t", TENSORS))
    assert run(task, cpu_backend).correct
    wrong = run(task, cpu_backend, SQUARE_PLUS.replace("+ k[i]", "- k[i]"))
    assert not wrong.correct and wrong.cases[0].status == "mismatch"


def test_a_torch_reference_may_return_arrays(cpu_backend, tmp_path):
    pytest.importorskip("torch")
    assert run(load_task(_task(tmp_path / "t", ARRAYS)), cpu_backend).correct


def test_a_torch_reference_that_raises_is_the_tasks_bug(cpu_backend, tmp_path):
    pytest.importorskip("torch")
    task = load_task(_task(tmp_path / "t", "def reference(inputs, sizes):\n    return {'y': inputs['x'] @ inputs['k']}\n"))
    with pytest.raises(TaskSpecError) as info:
        run(task, cpu_backend)
    assert info.value.field == "reference.function" and "reference() raised RuntimeError" in info.value.problem


HIDE_TORCH = "import sys; sys.modules['torch'] = None; "


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)


def test_without_torch_the_error_says_what_to_install(tmp_path):
    folder = _task(tmp_path / "t", TENSORS)
    out = _python(HIDE_TORCH + "from cudaopt_mcp.cli.main import main; "
                  f"sys.exit(main(['eval', {str(folder)!r}, '--backend', 'cpu']))")
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert f"{folder / 'reference.py'}: reference.kind: a torch reference needs PyTorch" in out.stderr
    assert "pip install 'cudaopt[torch]'" in out.stderr and "Traceback" not in out.stderr


def test_loading_a_torch_task_does_not_import_torch(tmp_path):
    folder = _task(tmp_path / "t", TENSORS)
    out = _python(f"import json, sys; from harness_tools import load_task; load_task({str(folder)!r}); "
                  "print(json.dumps('torch' in sys.modules))")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) is False


def test_a_torch_reference_file_is_checked_at_load(tmp_path):
    folder = _task(tmp_path / "t", TENSORS, {"kind": "torch", "file": "torch_ref.py"})
    with pytest.raises(TaskSpecError) as info:
        load_task(folder)
    assert info.value.field == "reference.file" and "'torch_ref.py' does not exist" in info.value.problem
