"""float8_e4m3 and float8_e5m2 in the engine: names, C and NumPy types, default tolerances (docs/dtypes.md),
.npy records that come back as fp8, saturated input draws, and the oracle's fp8 patterns."""

from __future__ import annotations

import io
import zlib

import ml_dtypes
import numpy as np
import pytest

from harness_tools.backends.contract import POISON_BYTE, WRITABLE_TAIL_WORD, tail_pattern, tail_word
from harness_tools.check.inputs import draw_inputs, reference_inputs
from harness_tools.task.dtypes import (
    CTYPES,
    FP8_MAX,
    as_dtype,
    default_tolerance,
    is_bfloat16,
    is_float,
    numpy_dtype,
    storable,
    storage_dtype,
)
from harness_tools.task.loading import spec_from_dict

FP8 = {"float8_e4m3": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}


@pytest.mark.parametrize("dtype", sorted(FP8))
def test_fp8_names_their_c_and_numpy_types_and_their_default_tolerance(dtype):
    assert CTYPES[dtype] == {"float8_e4m3": "__nv_fp8_e4m3", "float8_e5m2": "__nv_fp8_e5m2"}[dtype]
    assert numpy_dtype(dtype) == np.dtype(FP8[dtype]) and numpy_dtype(dtype).itemsize == 1 and is_float(dtype)
    assert numpy_dtype("float8_e4m3") != np.dtype(ml_dtypes.float8_e4m3)  # CUDA's e4m3 is the finite "fn" kind
    assert FP8_MAX[dtype] == float(ml_dtypes.finfo(FP8[dtype]).max)
    u = {"float8_e4m3": 2.0**-4, "float8_e5m2": 2.0**-3}[dtype]  # 4 and 3 significand bits
    assert default_tolerance(dtype) == (u, 2 * u)
    assert is_bfloat16(numpy_dtype(dtype))  # "a float NumPy knows only through ml_dtypes", as its callers ask


@pytest.mark.parametrize("dtype", [*sorted(FP8), "bfloat16", "float16", "float32"])
def test_arrays_of_every_float_go_through_a_npy_file_and_come_back_as_their_dtype(dtype):
    values = np.array([0.5, -3.0, 448.0, np.nan, 2.0**-9]).astype(numpy_dtype(dtype))
    buffer = io.BytesIO()
    np.save(buffer, storable(values))  # float8_e5m2's own descriptor, <f1, np.load could not read back
    buffer.seek(0)
    stored = np.load(buffer)
    assert stored.dtype == storage_dtype(dtype)
    back = as_dtype(stored, dtype)
    assert back.dtype == numpy_dtype(dtype) and back.tobytes() == values.tobytes()


def test_np_save_of_e5m2_itself_is_unreadable_which_is_why_the_engine_stores_raw_records():
    buffer = io.BytesIO()
    np.save(buffer, np.zeros(2, ml_dtypes.float8_e5m2))
    buffer.seek(0)
    with pytest.raises(ValueError):
        np.load(buffer)


@pytest.mark.parametrize("dtype", sorted(FP8))
def test_fp8_patterns_nan_around_inputs_nan_in_unwritten_outputs_finite_around_outputs(dtype):
    as_fp8 = lambda raw: raw.view(numpy_dtype(dtype)).astype(np.float64)
    around_input = tail_pattern(tail_word(dtype, "in"), 8)
    assert np.isnan(as_fp8(around_input)).all()
    assert not set(around_input.tolist()) & set(tail_pattern(WRITABLE_TAIL_WORD, 8).tolist())
    assert set(around_input.tolist()) <= {0x7D, 0xBD, 0xF7, 0x7F, 0xA5}  # contract.py's input bytes
    assert np.isfinite(as_fp8(tail_pattern(WRITABLE_TAIL_WORD, 8))).all()
    assert np.isnan(as_fp8(np.full(8, POISON_BYTE, np.uint8))).all()
    if dtype == "float8_e5m2":  # quiet bit (the top mantissa bit) clear: a NaN arithmetic produces differs (0x7F)
        assert around_input[0] == 0x7D


FP8_SPEC = spec_from_dict({
    "name": "f", "description": "d", "kernel_name": "k", "sizes": ["n"],
    "params": [
        {"kind": "buffer", "name": "a", "dtype": "float8_e4m3", "shape": ["n"], "role": "in"},
        {"kind": "buffer", "name": "b", "dtype": "float8_e4m3", "shape": ["n"], "role": "in",
         "init": {"dist": "uniform", "low": -1000, "high": 1000}},
        {"kind": "buffer", "name": "c", "dtype": "float8_e5m2", "shape": ["n"], "role": "in",
         "init": {"dist": "randint", "low": -100000, "high": 100000}},
        {"kind": "buffer", "name": "d", "dtype": "float8_e5m2", "shape": ["n"], "role": "in",
         "init": {"dist": "normal", "mean": 0, "std": 1e5}},
        {"kind": "buffer", "name": "y", "dtype": "float8_e4m3", "shape": ["n"], "role": "out"},
    ],
    "cases": [{"name": "a", "role": "validation", "sizes": {"n": 20000}}],
    "reference": {"kind": "stored"},
    "baseline": {"source": "k.cu", "launch": {"grid": [1], "block": [1]}},
}, "inline")


def test_fp8_draws_are_the_saturated_nearest_values_of_a_seeded_float64_draw():
    arrays = draw_inputs(FP8_SPEC, FP8_SPEC.cases[0], 5)
    dtypes = {b.name: b.dtype for b in FP8_SPEC.buffers}
    assert all(arrays[n].dtype == numpy_dtype(dtypes[n]) for n in "abcd")
    # the float64 draw, clipped to the finite range and rounded once to nearest even: recompute it
    rng = np.random.default_rng([5, zlib.crc32(b"a"), zlib.crc32(b"a")])
    expected = (rng.random(20000) * 2 - 1).astype(ml_dtypes.float8_e4m3fn)
    assert arrays["a"].tobytes() == expected.tobytes()
    for name, top in (("b", 448.0), ("c", 57344.0), ("d", 57344.0)):
        wide = arrays[name].astype(np.float64)
        assert np.isfinite(wide).all(), name  # never the NaN (e4m3) or inf (e5m2) an unsaturated cast would give
        assert wide.max() == top and wide.min() == -top, name  # many draws lie beyond: they saturate
    ref = reference_inputs(FP8_SPEC, FP8_SPEC.cases[0], arrays)
    assert ref["b"].dtype == np.float64 and np.array_equal(ref["b"], arrays["b"].astype(np.float64))
