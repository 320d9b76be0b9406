"""The tasks the attacks run on: jailbox (out = 2 * in) and jailtwin (two outputs, for races on output files)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
N = 8192  # elements of the jailbox task's buffers: a 32 KiB leak fits in its output
CASE = f"val_{N}"
LEAK_BYTES = 4 * N



JAILBOX_REFERENCE = '''"""jailbox: out = 2 * in."""

import numpy as np


def reference(inputs, sizes):
    return {"out": 2.0 * inputs["in"].astype(np.float64)}
'''

JAILBOX_BASELINE = """extern "C" __global__ void jailbox(const float* in, float* out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}
"""

TWIN_N = (1 << 18) - 256  # just under 1 MiB per output file: read without mmap, copied in a few hundred µs
TWIN_CASE = f"val_{TWIN_N}"

TWIN_REFERENCE = '''"""jailtwin: a = 2 * in, b = 4 * in."""

import numpy as np


def reference(inputs, sizes):
    x = inputs["in"].astype(np.float64)
    return {"a": 2.0 * x, "b": 4.0 * x}
'''

TWIN_BASELINE = """extern "C" __global__ void jailtwin(const float* in, float* a, float* b, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { a[i] = 2.0f * in[i]; b[i] = 4.0f * in[i]; }
}
"""


def _task(folder: Path, name: str, outputs: list[str], n: int, reference: str, baseline: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    params = [{"kind": "buffer", "name": "in", "dtype": "float32", "shape": ["n"], "role": "in",
               "init": {"dist": "uniform", "low": -1, "high": 1}}]
    params += [{"kind": "buffer", "name": o, "dtype": "float32", "shape": ["n"], "role": "out"} for o in outputs]
    params.append({"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"})
    spec = {
        "name": name,
        "description": f"{name}: elementwise multiples of in, a target for the jail tests.",
        "kernel_name": name,
        "params": params,
        "sizes": ["n"],
        "cases": [{"name": f"val_{n}", "role": "validation", "sizes": {"n": n}}],
        "reference": {"kind": "numpy", "file": "reference.py", "function": "reference"},
        "tolerance": {"float32": {"atol": 0, "rtol": 0}},
        "baseline": {"source": "baseline.cu", "launch": {"grid": ["ceil_div(n, 256)"], "block": [256]}},
    }
    (folder / "task.json").write_text(json.dumps(spec, indent=1))
    (folder / "reference.py").write_text(reference)
    (folder / "baseline.cu").write_text(baseline)
    return folder


def jailbox_task(root: Path) -> Path:
    return _task(root / "jailbox", "jailbox", ["out"], N, JAILBOX_REFERENCE, JAILBOX_BASELINE)


def twin_task(root: Path) -> Path:
    return _task(root / "jailtwin", "jailtwin", ["a", "b"], TWIN_N, TWIN_REFERENCE, TWIN_BASELINE)
