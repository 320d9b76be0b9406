"""Seeded inputs: replayable, independent per case and buffer, never zeros, in range."""

from __future__ import annotations

import numpy as np

from harness_tools.check.inputs import draw_inputs, reference_inputs, scalar_arguments
from harness_tools.task.loading import spec_from_dict

SPEC = spec_from_dict({
    "name": "t", "description": "d", "kernel_name": "k", "sizes": ["n"],
    "params": [
        {"kind": "buffer", "name": "x", "dtype": "float32", "shape": ["n"], "role": "in"},
        {"kind": "buffer", "name": "w", "dtype": "float32", "shape": ["n", 2], "role": "in",
         "init": {"dist": "normal", "mean": 5, "std": 0.5}},
        {"kind": "buffer", "name": "i", "dtype": "int32", "shape": ["n"], "role": "inout",
         "init": {"dist": "randint", "low": 3, "high": 7}},
        {"kind": "buffer", "name": "y", "dtype": "float32", "shape": ["n"], "role": "out"},
        {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"},
        {"kind": "scalar", "name": "half", "dtype": "float32", "value": "n / 2"},
    ],
    "cases": [{"name": "a", "role": "validation", "sizes": {"n": 1001}},
              {"name": "b", "role": "validation", "sizes": {"n": 1001}}],
    "reference": {"kind": "stored"},
    "tolerance": {"float32": {"atol": 0, "rtol": 0}, "int32": {}},
    "baseline": {"source": "k.cu", "launch": {"grid": [1], "block": [1]}},
}, "inline")


def test_same_seed_same_inputs_other_seed_other_inputs():
    a1 = draw_inputs(SPEC, SPEC.cases[0], 7)
    a2 = draw_inputs(SPEC, SPEC.cases[0], 7)
    a3 = draw_inputs(SPEC, SPEC.cases[0], 8)
    assert set(a1) == {"x", "w", "i"}  # outputs are not drawn
    assert all(np.array_equal(a1[k], a2[k]) for k in a1)
    assert not np.array_equal(a1["x"], a3["x"])


def test_cases_with_equal_sizes_still_get_different_inputs():
    a = draw_inputs(SPEC, SPEC.cases[0], 7)
    b = draw_inputs(SPEC, SPEC.cases[1], 7)
    assert not np.array_equal(a["x"], b["x"])


def test_dtypes_shapes_and_distributions():
    arrays = draw_inputs(SPEC, SPEC.cases[0], 1)
    x, w, i = arrays["x"], arrays["w"], arrays["i"]
    assert x.dtype == np.float32 and x.shape == (1001,) and np.all((x >= -1) & (x < 1))
    assert np.count_nonzero(x) == x.size and np.unique(x).size > 900
    assert w.shape == (1001, 2) and abs(w.mean() - 5) < 0.1 and abs(w.std() - 0.5) < 0.05
    assert i.dtype == np.int32 and i.min() >= 3 and i.max() <= 7 and np.unique(i).size == 5


def test_reference_sees_float64_and_scalars():
    arrays = draw_inputs(SPEC, SPEC.cases[0], 1)
    ref = reference_inputs(SPEC, SPEC.cases[0], arrays)
    assert ref["x"].dtype == np.float64 and ref["i"].dtype == np.int64
    assert ref["n"] == 1001 and ref["half"] == 500.5
    assert scalar_arguments(SPEC, {"n": 8}) == {"n": 8, "half": 4.0}
