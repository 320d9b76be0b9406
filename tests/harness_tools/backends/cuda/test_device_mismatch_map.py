"""The device's mismatch map of a failing output is the host's: a wrong tile, NaN in it, and a passing case that
gets no map, each output evaluated with ``verify="device"`` and with ``verify="host"``."""

from __future__ import annotations

import numpy as np
import pytest

from harness_tools.evaluation import EvaluationConfig
from harness_tools.task.loading import load_task
from tests.harness_tools.check.checking_tasks import run, write_task

pytestmark = pytest.mark.gpu

KERNEL = """
extern "C" __global__ void twice(const float* x, float* y, int rows, int cols, int wrong) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= (long long)rows * cols) return;
  int r = (int)(i / cols), c = (int)(i % cols);
  float v = 2.0f * x[i];
  if (wrong && r >= rows - 40 && c >= cols - 70) v += 1.0f;  // the bottom right tile
  if (wrong && r == rows - 1 && c == cols - 1) v = __int_as_float(0x7fc00000);
  y[i] = v;
}
"""
REFERENCE = """import numpy as np
def reference(inputs, sizes):
    return {'y': 2.0 * inputs['x'].astype(np.float64)}
"""


@pytest.mark.parametrize("shape", [(3, 100, 500), (1, 1, 70_001)], ids=["3d", "1d"])
def test_the_device_map_of_a_wrong_tile_is_the_hosts(cuda_backend, tmp_path, shape):
    rows, cols = int(np.prod(shape[:-1])), shape[-1]
    names = ["a", "b", "cols"]
    params = [{"kind": "buffer", "name": "x", "dtype": "float32", "shape": names, "role": "in"},
              {"kind": "buffer", "name": "y", "dtype": "float32", "shape": names, "role": "out"},
              {"kind": "scalar", "name": "rows", "dtype": "int32", "value": "a * b"},
              {"kind": "scalar", "name": "cols", "dtype": "int32", "value": "cols"},
              {"kind": "scalar", "name": "wrong", "dtype": "int32", "value": "wrong"}]
    sizes = dict(zip(names, shape))
    cases = [{"name": f"wrong{w}", "role": "validation", "sizes": {**sizes, "wrong": w}} for w in (0, 1)]
    task = load_task(write_task(tmp_path, kernel_name="twice", kernel=KERNEL, params=params, sizes=[*names, "wrong"],
                                cases=cases, reference_py=REFERENCE, launch={"grid": ["ceil_div(a * b * cols, 256)"],
                                                                             "block": [256]}))
    config = EvaluationConfig(roles=["validation"], seed=5, timeout_s=300)
    on_device = run(task, cuda_backend, config=config.model_copy(update={"verify": "device"}))
    on_host = run(task, cuda_backend, config=config.model_copy(update={"verify": "host"}))
    assert on_device.compile.ok, on_device.compile.log
    passing, failing = on_device.cases
    assert passing.passed and passing.outputs[0].mismatch_map is None
    d, h = failing.outputs[0], on_host.cases[1].outputs[0]
    assert (d.compared_on, h.compared_on) == ("device", "host")
    assert d.mismatch_map is not None and d.mismatch_map == h.mismatch_map
    m = np.array(d.mismatch_map.mismatches)
    assert m.sum() == d.mismatches == min(rows, 40) * 70 and np.array(d.mismatch_map.nonfinite).sum() == 1
    assert d.mismatch_map.view_shape == (rows, cols)
    assert m[-1, -1] and not m[: m.shape[0] // 2].any() and not m[:, : m.shape[1] // 2].any()  # the bottom right only
