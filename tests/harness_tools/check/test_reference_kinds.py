"""The three kinds of reference on a real GPU: NumPy (bundled tasks), a reference kernel, stored outputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness_tools.evaluation import EvaluationConfig, evaluate
from harness_tools.task import candidate as candidates
from harness_tools.task.loading import load_task

pytestmark = pytest.mark.gpu

SCALE = 'extern "C" __global__ void scale(const float* x, float* y, int n) {\n' \
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 3.0f * x[i];\n}\n"
SCALE_REF = 'extern "C" __global__ void scale_ref(const float* x, float* y, int n) {\n' \
            "  for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = x[i] * 3.0f;\n}\n"
SCALE_WRONG = SCALE.replace("3.0f", "3.001f")


def _task(tmp_path, reference: dict, cases=None) -> dict:
    spec = {
        "name": "scale", "description": "y = 3x", "kernel_name": "scale", "sizes": ["n"],
        "params": [{"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n"], "role": "in"},
                   {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["n"], "role": "out"},
                   {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}],
        "cases": cases or [{"name": "v", "role": "validation", "sizes": {"n": 1001}},
                           {"name": "p", "role": "performance", "sizes": {"n": 1 << 20}}],
        "reference": reference,
        "tolerance": {"float32": {"atol": 0, "rtol": 1e-6}},
        "baseline": {"source": "scale.cu", "launch": {"grid": ["ceil_div(n, 256)"], "block": [256]}},
    }
    (tmp_path / "scale.cu").write_text(SCALE)
    (tmp_path / "ref.cu").write_text(SCALE_REF)
    (tmp_path / "task.json").write_text(json.dumps(spec))
    return spec


def _verdicts(task, source, backend):
    cand = candidates.from_kernel_source(task, task.spec.baseline, source)
    return evaluate(task, cand, backend, EvaluationConfig(timing={"warmup": 1, "reps": 3}))


def test_reference_kernel(cuda_backend, tmp_path):
    _task(tmp_path, {"kind": "cuda", "source": "ref.cu", "kernel": "scale_ref",
                     "launch": {"grid": [1], "block": [128]}})
    task = load_task(tmp_path)
    assert _verdicts(task, SCALE, cuda_backend).correct
    wrong = _verdicts(task, SCALE_WRONG, cuda_backend)
    assert not wrong.correct and wrong.cases[0].status == "mismatch"


def test_stored_reference(cuda_backend, tmp_path):
    rng = np.random.default_rng(0)
    for case, n in (("v", 1001), ("p", 1 << 20)):
        folder = tmp_path / "expected" / case
        folder.mkdir(parents=True)
        x = rng.uniform(-1, 1, n).astype(np.float32)
        np.save(folder / "x.npy", x)
        np.save(folder / "y.npy", 3.0 * x.astype(np.float64))
    _task(tmp_path, {"kind": "stored", "dir": "expected"})
    task = load_task(tmp_path)
    result = _verdicts(task, SCALE, cuda_backend)
    assert result.correct and result.score_ms > 0
    assert not _verdicts(task, SCALE_WRONG, cuda_backend).correct
