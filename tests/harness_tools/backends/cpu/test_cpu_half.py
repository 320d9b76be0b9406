"""__half and __nv_bfloat16 on the cpu backend: conversions bit-exact with round-to-nearest-even (ml_dtypes and
NumPy's float16 are the judges), widening exact, and the intrinsics a kernel uses compile and compute.

The conversion task is a stored reference (fixed inputs, expected bit patterns), so the same task run on the
cuda backend (the gpu twin) checks the emulation against the GPU's own cvt instructions."""

from __future__ import annotations

import json
import os
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from harness_tools import evaluate
from harness_tools.evaluation import EvaluationConfig
from harness_tools.task import candidate as candidates
from harness_tools.task.loading import load_task

BACKENDS = ["cpu_backend", pytest.param("cuda_backend", marks=pytest.mark.gpu)]
VALIDATION = EvaluationConfig(roles=["validation"], seed=7, timeout_s=120)
CANONICAL_NAN = 0x7FFF  # what cvt.rn.f16.f32 / cvt.rn.bf16.f32 give for any NaN

CONVERT = """
#include <cuda_bf16.h>
#include <cuda_fp16.h>
extern "C" __global__ void convert(const unsigned int* bits, unsigned short* bf, unsigned short* hf, float* bf_back,
                                   float* hf_back, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float f = __uint_as_float(bits[i]);
    const __nv_bfloat16 b = __float2bfloat16(f);
    const __half h = __float2half_rn(f);
    bf[i] = __bfloat16_as_ushort(b);
    hf[i] = __half_as_ushort(h);
    // every 16-bit pattern widened (the first 65536 elements)
    bf_back[i] = __bfloat162float(__ushort_as_bfloat16((unsigned short)i));
    hf_back[i] = __half2float(__ushort_as_half((unsigned short)i));
}
"""


def _float_patterns() -> np.ndarray:
    """float32 bit patterns that probe every rounding decision: exact ties and their neighbours for both
    formats (at even and odd results), fp16 subnormal ties, both overflow thresholds, float32 subnormals,
    zeros, infinities, NaNs (quiet and signalling), and random patterns."""
    rng = np.random.default_rng(16)
    top = rng.integers(0, 1 << 16, 4000, dtype=np.uint32) << 16
    bf_ties = np.concatenate([top | low for low in (0x0000, 0x7FFF, 0x8000, 0x8001, 0xC000)])
    halves = rng.integers(0x0400, 0x7C00, 4000).astype(np.uint16).view(np.float16).astype(np.float32).view(np.uint32)
    hf_ties = np.concatenate([halves + d for d in (0x0FFF, 0x1000, 0x1001)] + [halves | 0x1000])
    sub = (np.arange(1, 2050, dtype=np.float64) * 2.0 ** -25).astype(np.float32).view(np.uint32)  # odd k: ties
    specials = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001, 0x7FBD0000,
                         0x477FE000, 0x477FEFFF, 0x477FF000, 0x47800000, 0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF,
                         0x00000001, 0x007FFFFF, 0x33000000, 0x33000001, 0xB3000000], dtype=np.uint32)
    fp32_sub = rng.integers(1, 1 << 23, 2000, dtype=np.uint32)
    random = rng.integers(0, 1 << 32, 40000, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([bf_ties, hf_ties, sub, specials, fp32_sub, fp32_sub | 0x80000000, random]).astype(np.uint32)


def _rounded(f: np.ndarray, dtype) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        bits = f.astype(dtype).view(np.uint16).copy()
    bits[np.isnan(f)] = CANONICAL_NAN
    return bits


def _conversion_task(folder: Path):
    bits = _float_patterns()
    n = max(bits.size, 1 << 16)
    bits = np.resize(bits, n)
    f = bits.view(np.float32)
    patterns = np.arange(n, dtype=np.uint32).astype(np.uint16)
    arrays = {"bits": bits, "bf": _rounded(f, ml_dtypes.bfloat16), "hf": _rounded(f, np.float16),
              "bf_back": patterns.view(ml_dtypes.bfloat16).astype(np.float32),
              "hf_back": patterns.view(np.float16).astype(np.float32)}
    case = folder / "expected" / "all"
    case.mkdir(parents=True)
    for name, arr in arrays.items():
        np.save(case / f"{name}.npy", arr)
    (folder / "kernel.cu").write_text(CONVERT)
    out = lambda name, dtype: {"kind": "buffer", "name": name, "dtype": dtype, "shape": ["n"], "role": "out"}
    (folder / "task.json").write_text(json.dumps({
        "name": "convert", "description": "16-bit float conversions", "kernel_name": "convert", "sizes": ["n"],
        "params": [{"kind": "buffer", "name": "bits", "dtype": "uint32", "shape": ["n"], "role": "in"},
                   out("bf", "uint16"), out("hf", "uint16"), out("bf_back", "float32"), out("hf_back", "float32"),
                   {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}],
        "cases": [{"name": "all", "role": "validation", "sizes": {"n": n}}],
        "reference": {"kind": "stored", "dir": "expected"},
        "tolerance": {"uint16": {"atol": 0, "rtol": 0}, "float32": {"atol": 0, "rtol": 0}},
        "baseline": {"source": "kernel.cu", "launch": {"grid": ["ceil_div(n, 256)"], "block": [256]}},
    }))
    return load_task(folder)


@pytest.mark.parametrize("backend_fixture", BACKENDS)
def test_conversions_round_to_nearest_even_bit_for_bit(request, tmp_path, backend_fixture):
    task = _conversion_task(tmp_path)
    result = evaluate(task, candidates.baseline(task), request.getfixturevalue(backend_fixture), VALIDATION)
    outputs = {o.buffer: o for o in result.cases[0].outputs}
    assert result.correct, {k: (o.mismatches, o.first_mismatch) for k, o in outputs.items()}
    assert outputs["bf"].elements >= 1 << 16


INTRINSICS = """
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void mix(const __nv_bfloat16* a, const __half* b, __nv_bfloat16* y, __half* z, __nv_bfloat16 s,
                               int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    __nv_bfloat16 t = __hfma(a[i], s, __float2bfloat16(1.0f));           // a*s + 1, one rounding
    t = __hmax(t, __hneg(t)) + (__habs(a[i]) - __habs(-a[i])) * s;       // |t|, and operators adding 0
    __half u = __hadd(b[i], __hmul(b[i], __float2half(0.5f)));            // 1.5 b
    __half2 p = __halves2half2(u, b[i]);
    p = __hmul2(p, __float2half2_rn(2.0f));
    __nv_bfloat162 q = __floats2bfloat162_rn(__bfloat162float(t), 0.0f);
    float lane = __shfl_sync(0xffffffffu, __low2float(q), threadIdx.x);   // a shuffle of a float from a pair
    __half w = __shfl_xor_sync(0xffffffffu, __low2half(p), 0);            // and of a __half itself
    y[i] = __float2bfloat16(lane);
    z[i] = w + __high2half(p) * __float2half(0.0f);
}
"""


def test_intrinsics_operators_and_a_bf16_scalar(tmp_path, cpu_backend):
    folder = tmp_path / "mix"
    folder.mkdir()
    (folder / "kernel.cu").write_text(INTRINSICS)
    (folder / "reference.py").write_text(
        "import numpy as np\n\ndef reference(inputs, sizes):\n"
        "    return {'y': np.abs(inputs['a'] * inputs['s'] + 1), 'z': 3 * inputs['b']}\n")
    vec = lambda name, dtype, role: {"kind": "buffer", "name": name, "dtype": dtype, "shape": ["n"], "role": role}
    (folder / "task.json").write_text(json.dumps({
        "name": "mix", "description": "half intrinsics", "kernel_name": "mix", "sizes": ["n"],
        "params": [vec("a", "bfloat16", "in"), vec("b", "float16", "in"), vec("y", "bfloat16", "out"),
                   vec("z", "float16", "out"), {"kind": "scalar", "name": "s", "dtype": "bfloat16", "value": 0.3},
                   {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}],
        "cases": [{"name": "n1024", "role": "validation", "sizes": {"n": 1024}}],  # whole warps: they shuffle
        "reference": {"kind": "numpy"},
        "baseline": {"source": "kernel.cu", "launch": {"grid": ["ceil_div(n, 256)"], "block": [256]}},
    }))
    task = load_task(folder)
    result = evaluate(task, candidates.baseline(task), cpu_backend, VALIDATION)
    assert result.correct, (result.failure, [(o.buffer, o.max_rel_err) for o in result.cases[0].outputs])


DIRECTED = """
#include <cuda_bf16.h>
#include <cuda_fp16.h>
extern "C" __global__ void directed(const unsigned int* bits, unsigned short* out, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float f = __uint_as_float(bits[i]);
    unsigned short* o = out + (size_t)i * 6;
    o[0] = __half_as_ushort(__float2half_rz(f));
    o[1] = __half_as_ushort(__float2half_rd(f));
    o[2] = __half_as_ushort(__float2half_ru(f));
    o[3] = __bfloat16_as_ushort(__float2bfloat16_rz(f));
    o[4] = __bfloat16_as_ushort(__float2bfloat16_rd(f));
    o[5] = __bfloat16_as_ushort(__float2bfloat16_ru(f));
}
"""


@np.errstate(over="ignore", invalid="ignore")
def _directed(f: np.ndarray, dtype, mode: str) -> np.ndarray:
    """The bits of float32 ``f`` rounded toward zero (rz), down (rd) or up (ru), from NumPy's round-to-nearest:
    where the nearest value lies on the wrong side of ``f``, the neighbour one step toward zero or away from it
    (its magnitude's bits minus or plus one; inf - 1 is the largest finite, -0 + 1 the smallest negative
    subnormal). Infinities and exact values stay; any NaN is the canonical 0x7FFF."""
    nearest = f.astype(dtype)
    bits = nearest.view(np.uint16).astype(np.int64)
    r, x = nearest.astype(np.float64), f.astype(np.float64)
    wrong = {"rz": np.abs(r) > np.abs(x), "rd": r > x, "ru": r < x}[mode]
    toward_zero = {"rz": wrong, "rd": wrong & (r > 0), "ru": wrong & (r < 0)}[mode]
    bits = np.where(toward_zero, bits - 1, np.where(wrong, bits + 1, bits))
    bits[np.isnan(f)] = CANONICAL_NAN
    return bits.astype(np.uint16)


def test_the_directed_rounding_judge_agrees_with_ieee_on_read_off_values():
    f = np.array([1 + 2.0**-11, -(1 + 2.0**-11), 65520.0, -65520.0, 70000.0, 2.0**-26, -(2.0**-26), np.inf, 0.0],
                 dtype=np.float32)
    assert _directed(f, np.float16, "rz").tolist() == [0x3C00, 0xBC00, 0x7BFF, 0xFBFF, 0x7BFF, 0, 0x8000, 0x7C00, 0]
    assert _directed(f, np.float16, "rd").tolist() == [0x3C00, 0xBC01, 0x7BFF, 0xFC00, 0x7BFF, 0, 0x8001, 0x7C00, 0]
    assert _directed(f, np.float16, "ru").tolist() == [0x3C01, 0xBC00, 0x7C00, 0xFBFF, 0x7C00, 1, 0x8000, 0x7C00, 0]
    g = np.array([1 + 2.0**-9, -(1 + 2.0**-9)], dtype=np.float32)
    assert _directed(g, ml_dtypes.bfloat16, "rd").tolist() == [0x3F80, 0xBF81]


@pytest.mark.parametrize("backend_fixture", BACKENDS)
def test_directed_roundings_to_half_and_bfloat16_bit_for_bit(request, tmp_path, backend_fixture):
    bits = _float_patterns()
    n = bits.size
    f = bits.view(np.float32)
    expected = np.stack([_directed(f, dtype, mode) for dtype in (np.float16, ml_dtypes.bfloat16)
                         for mode in ("rz", "rd", "ru")], axis=1)
    folder = tmp_path / "directed"
    case = folder / "expected" / "all"
    case.mkdir(parents=True)
    np.save(case / "bits.npy", bits)
    np.save(case / "out.npy", expected)
    (folder / "kernel.cu").write_text(DIRECTED)
    (folder / "task.json").write_text(json.dumps({
        "name": "directed", "description": "directed roundings", "kernel_name": "directed", "sizes": ["n"],
        "params": [{"kind": "buffer", "name": "bits", "dtype": "uint32", "shape": ["n"], "role": "in"},
                   {"kind": "buffer", "name": "out", "dtype": "uint16", "shape": ["n", 6], "role": "out"},
                   {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}],
        "cases": [{"name": "all", "role": "validation", "sizes": {"n": n}}],
        "reference": {"kind": "stored", "dir": "expected"},
        "tolerance": {"uint16": {"atol": 0, "rtol": 0}},
        "baseline": {"source": "kernel.cu", "launch": {"grid": ["ceil_div(n, 256)"], "block": [256]}},
    }))
    task = load_task(folder)
    config = VALIDATION.model_copy(update={"outputs_dir": str(tmp_path / "out")})
    result = evaluate(task, candidates.baseline(task), request.getfixturevalue(backend_fixture), config)
    got = next((tmp_path / "out").rglob("out.npy"), None)
    got = np.load(got).reshape(expected.shape) if got else None
    if got is not None and os.environ.get("CUDAOPT_TEST_DUMP"):
        np.savez_compressed(Path(os.environ["CUDAOPT_TEST_DUMP"]) / f"directed-{backend_fixture}.npz", bits=bits, got=got)
    wrong = [] if got is None else [(hex(int(bits[r])), ("half", "bf16")[c // 3] + "_" + ("rz", "rd", "ru")[c % 3],
                                     hex(int(expected[r, c])), hex(int(got[r, c])))
                                    for r, c in np.argwhere(got != expected)[:12]]
    assert result.correct, (result.failure, wrong)
