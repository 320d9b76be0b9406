"""__nv_fp8_e4m3 and __nv_fp8_e5m2 on the cpu backend, and fp8 tasks end to end.

* Conversions, bit for bit: one stored-reference task runs every __nv_cvt_* narrowing (float, double, __half,
  __nv_bfloat16, pairs and quads; both saturation modes, both formats) on probes that hit every rounding
  decision, every 16-bit half and bfloat16 pattern, and widens all 256 values of each format to __half,
  __nv_bfloat16, float, double and integers. The expected bits come from ml_dtypes (the rounding) and the rules
  cuda_fp8.hpp states (saturation, NaN), written out here independently of the emulation. Its gpu twin runs the
  same task on the cuda backend, against the same bits: the emulation and the GPU agree bit for bit.
* Tasks: a float32 -> fp8 cast with both saturation modes and an fp8 axpy (fp8 in, float32 and fp8 out, the
  default fp8 tolerance) pass; the oracle's fp8 patterns catch an unwritten element and reads past the end.

With CUDAOPT_TEST_DUMP set to a folder, the conversion tests also save what the kernel wrote there (one .npz
per test), so a disagreement can be studied afterwards.
"""

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
from tests.harness_tools.check.test_oracle_adversarial import _assert_faulted_on, _assert_mismatch_at, _vector_task

BACKENDS = ["cpu_backend", pytest.param("cuda_backend", marks=pytest.mark.gpu)]
VALIDATION = EvaluationConfig(roles=["validation"], seed=8, timeout_s=240)
E4, E5 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2
FORMATS = {"e4m3": (E4, 0x7E, 0x7F), "e5m2": (E5, 0x7B, 0x7C)}  # dtype, largest finite, NOSAT overflow (NaN, inf)
FP8_NAN = 0x7F  # any float, half or bfloat16 NaN narrows to it, in both formats
HALF_NAN = 0x7FFF  # any fp8 NaN widens to it (as __half and as __nv_bfloat16)
EXACT = {"atol": 0, "rtol": 0}


# ---- the expected bits, from ml_dtypes and the stated rules -----------------------------------------------
def narrow(values: np.ndarray, fmt: str, satfinite: bool) -> np.ndarray:
    """fp8 bits of float64 ``values``: rounded once to nearest even (ml_dtypes); beyond the finite range ±largest
    finite (SATFINITE) or, without saturation, e5m2 ±inf and e4m3 NaN with the value's sign; NaN -> FP8_NAN."""
    dtype, max_bits, overflow_bits = FORMATS[fmt]
    with np.errstate(over="ignore", invalid="ignore"):
        bits = values.astype(dtype).view(np.uint8).copy()
        back = bits.view(dtype).astype(np.float64)
    over = ~np.isfinite(back) & ~np.isnan(values)  # an infinity, or a value rounding past the largest finite
    sign = (np.signbit(values).astype(np.uint8) << 7).astype(np.uint8)
    bits[over] = sign[over] | (max_bits if satfinite else overflow_bits)
    bits[np.isnan(values)] = FP8_NAN
    return bits


def narrow_double(bits64: np.ndarray, fmt: str, satfinite: bool) -> np.ndarray:
    """As :func:`narrow`, but a double NaN keeps its sign, and in e5m2 becomes 0x7E | its payload's top two bits."""
    values = bits64.view(np.float64)
    out = narrow(values, fmt, satfinite)
    nan = np.isnan(values)
    sign = ((bits64 >> 63).astype(np.uint8) << 7).astype(np.uint8)
    payload = 0x7F if fmt == "e4m3" else (0x7E | ((bits64 >> 50) & 3)).astype(np.uint8)
    out[nan] = (sign | payload)[nan] if fmt == "e5m2" else sign[nan] | payload
    return out


def widen16(fp8_bits: np.ndarray, fmt: str, to) -> np.ndarray:
    """The __half (to=np.float16) or __nv_bfloat16 bits of fp8 values: exact, any NaN -> 0x7FFF."""
    values = fp8_bits.view(FORMATS[fmt][0])
    out = values.astype(to).view(np.uint16).copy()
    out[np.isnan(values.astype(np.float64))] = HALF_NAN
    return out


def fp8_value(fp8_bits: np.ndarray, fmt: str) -> np.ndarray:
    return fp8_bits.view(FORMATS[fmt][0]).astype(np.float64)


def to_int(values: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Toward zero, NaN -> 0, saturated to [lo, hi]."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isnan(values), 0, np.clip(np.trunc(values), lo, hi)).astype(np.int64)


def pack(*parts: np.ndarray) -> np.ndarray:
    out = np.zeros(parts[0].shape, np.uint64)
    for k, part in enumerate(parts):
        out |= part.astype(np.uint64) << np.uint64(8 * k)
    return out


# ---- probes -----------------------------------------------------------------------------------------------
def float_probes() -> np.ndarray:
    """float32 bit patterns: every finite value of both formats, every midpoint between neighbours (the ties),
    the overflow ties (e4m3 464, e5m2 61440), each with the floats one ulp either side; zeros, underflow,
    float subnormals, infinities, NaNs of both signs and kinds, and random values of every magnitude."""
    values = []
    for dtype, _, _ in FORMATS.values():
        finite = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float64)
        finite = np.unique(finite[np.isfinite(finite)])
        values += [finite, (finite[:-1] + finite[1:]) / 2]
    values.append(np.array([464.0, 480.0, 61440.0, 65536.0, 1e30, -464.0, -61440.0, 2.0**-10, 2.0**-17]))
    exact = np.concatenate(values).astype(np.float32).view(np.uint32)
    near = np.concatenate([exact, exact + 1, exact - 1])
    specials = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001,
                         0x7FA00000, 0x7FFFFFFF, 0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0xFF7FFFFF], dtype=np.uint32)
    rng = np.random.default_rng(8)
    magnitudes = (rng.standard_normal(20000) * 10.0 ** rng.uniform(-8, 6, 20000)).astype(np.float32).view(np.uint32)
    random = rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([near, specials, magnitudes, random]).astype(np.uint32)


@np.errstate(invalid="ignore")
def double_probes(floats: np.ndarray) -> np.ndarray:
    """The float probes widened, doubles within 2^-40 of every tie (which a float cannot hold: they round the
    other way only when rounded once, from the double), and NaNs with every sign and top payload bits."""
    wide = floats.view(np.float32).astype(np.float64)
    finite = wide[np.isfinite(wide)]
    near_ties = np.concatenate([finite * (1 + 2.0**-40), finite * (1 - 2.0**-40)])
    nans = np.array([0x7FF0000000000001, 0x7FF4000000000000, 0x7FF8000000000000, 0x7FFC000000000000,
                     0xFFF8000000000000, 0xFFF4000000000001, 0xFFF0000000000001, 0x7FFFFFFFFFFFFFFF], dtype=np.uint64)
    return np.concatenate([wide.view(np.uint64), near_ties.view(np.uint64), nans]).astype(np.uint64)


CONVERT = """
#include <cuda_fp8.h>
#define SAT __NV_SATFINITE
#define NOSAT __NV_NOSAT
#define SIGN64 ((long long)0x8000000000000000ULL)
extern "C" __global__ void fp8_convert(const __nv_fp8_e4m3* e4, const __nv_fp8_e5m2* e5, const unsigned int* fbits,
                                       const unsigned long long* dbits, unsigned char* narrow, unsigned short* pairs,
                                       unsigned int* quads, unsigned short* wide, float* widef, int* ints, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float f = __uint_as_float(fbits[i]), g = __uint_as_float(fbits[(i + 1) % n]);
    const double d = __longlong_as_double((long long)dbits[i]);
    const unsigned short p = (unsigned short)i;  // every 16-bit pattern, as a __half and as a __nv_bfloat16
    __half_raw hr; hr.x = p;
    __nv_bfloat16_raw br; br.x = p;
    __half2_raw h2; h2.x = p; h2.y = (unsigned short)(p ^ 0x8001);
    __half2_raw h2b; h2b.x = (unsigned short)(p ^ 0x0001); h2b.y = (unsigned short)(p ^ 0x8000);
    __nv_bfloat162_raw b2; b2.x = p; b2.y = (unsigned short)(p ^ 0x8001);

    unsigned char* o = narrow + (size_t)i * 20;
    o[0] = __nv_cvt_float_to_fp8(f, SAT, __NV_E4M3);
    o[1] = __nv_cvt_float_to_fp8(f, NOSAT, __NV_E4M3);
    o[2] = __nv_cvt_float_to_fp8(f, SAT, __NV_E5M2);
    o[3] = __nv_cvt_float_to_fp8(f, NOSAT, __NV_E5M2);
    o[4] = __nv_cvt_halfraw_to_fp8(hr, SAT, __NV_E4M3);
    o[5] = __nv_cvt_halfraw_to_fp8(hr, NOSAT, __NV_E4M3);
    o[6] = __nv_cvt_halfraw_to_fp8(hr, SAT, __NV_E5M2);
    o[7] = __nv_cvt_halfraw_to_fp8(hr, NOSAT, __NV_E5M2);
    o[8] = __nv_cvt_bfloat16raw_to_fp8(br, SAT, __NV_E4M3);
    o[9] = __nv_cvt_bfloat16raw_to_fp8(br, NOSAT, __NV_E4M3);
    o[10] = __nv_cvt_bfloat16raw_to_fp8(br, SAT, __NV_E5M2);
    o[11] = __nv_cvt_bfloat16raw_to_fp8(br, NOSAT, __NV_E5M2);
    o[12] = __nv_cvt_double_to_fp8(d, SAT, __NV_E4M3);
    o[13] = __nv_cvt_double_to_fp8(d, NOSAT, __NV_E4M3);
    o[14] = __nv_cvt_double_to_fp8(d, SAT, __NV_E5M2);
    o[15] = __nv_cvt_double_to_fp8(d, NOSAT, __NV_E5M2);
    o[16] = __nv_fp8_e4m3(f).__x;                     // the constructors saturate
    o[17] = __nv_fp8_e5m2(__half(hr)).__x;
    o[18] = __nv_fp8_e4m3(d).__x;
    o[19] = __nv_fp8_e5m2(i - 32768).__x;             // an int goes through float

    unsigned short* q = pairs + (size_t)i * 9;        // pairs: x in the low byte
    q[0] = __nv_cvt_float2_to_fp8x2(make_float2(f, g), SAT, __NV_E4M3);
    q[1] = __nv_cvt_float2_to_fp8x2(make_float2(f, g), NOSAT, __NV_E4M3);
    q[2] = __nv_cvt_float2_to_fp8x2(make_float2(f, g), SAT, __NV_E5M2);
    q[3] = __nv_cvt_float2_to_fp8x2(make_float2(f, g), NOSAT, __NV_E5M2);
    q[4] = __nv_cvt_halfraw2_to_fp8x2(h2, SAT, __NV_E5M2);
    q[5] = __nv_fp8x2_e4m3(make_float2(f, g)).__x;
    q[6] = __nv_cvt_bfloat16raw2_to_fp8x2(b2, NOSAT, __NV_E4M3);
    q[7] = __nv_fp8x2_e5m2(__half2(h2)).__x;
    // -d flips the sign by its bits: the GPU's negation leaves a NaN's sign as it is (measured on the H200)
    q[8] = __nv_cvt_double2_to_fp8x2(make_double2(d, __longlong_as_double(__double_as_longlong(d) ^ SIGN64)),
                                     SAT, __NV_E5M2);
    quads[2 * i] = __nv_fp8x4_e4m3(make_float4(f, g, -f, -g)).__x;
    quads[2 * i + 1] = __nv_fp8x4_e5m2(__half2(h2), __half2(h2b)).__x;

    const __nv_fp8_e4m3 a = e4[i];                    // the stored inputs: (a, c) runs through all 65536 pairs
    const __nv_fp8_e5m2 c = e5[i];
    unsigned short* w = wide + (size_t)i * 6;
    w[0] = __nv_cvt_fp8_to_halfraw(a.__x, __NV_E4M3).x;
    w[1] = __nv_cvt_fp8_to_halfraw(c.__x, __NV_E5M2).x;
    w[2] = __half_as_ushort(static_cast<__half>(a));
    w[3] = __bfloat16_as_ushort(static_cast<__nv_bfloat16>(c));
    w[4] = __bfloat16_as_ushort(static_cast<__nv_bfloat16>(a));
    w[5] = __nv_cvt_fp8x2_to_halfraw2((unsigned short)(a.__x | (c.__x << 8)), __NV_E4M3).y;  // c's bits as e4m3
    __nv_fp8x2_e4m3 x2; x2.__x = (unsigned short)(a.__x | (c.__x << 8));
    __nv_fp8x4_e5m2 x4; x4.__x = (unsigned int)a.__x | ((unsigned int)c.__x << 8) | ((unsigned int)a.__x << 16);
    float* v = widef + (size_t)i * 5;
    v[0] = static_cast<float>(a);
    v[1] = static_cast<float>(c);
    v[2] = (float)static_cast<double>(a);
    v[3] = static_cast<float2>(x2).y;                 // c's bits as e4m3
    v[4] = static_cast<float4>(x4).z;                 // a's bits as e5m2
    int* k = ints + (size_t)i * 8;
    k[0] = static_cast<int>(a);
    k[1] = static_cast<int>(c);
    k[2] = static_cast<unsigned char>(a);
    k[3] = static_cast<unsigned char>(c);
    k[4] = static_cast<signed char>(c);
    k[5] = static_cast<short>(c);
    k[6] = (int)static_cast<unsigned int>(c);
    k[7] = static_cast<bool>(a);
}
"""


@np.errstate(invalid="ignore")  # NaN inputs, on purpose
def _conversion_arrays() -> dict[str, np.ndarray]:
    n = 1 << 16
    fbits = np.resize(float_probes(), n)
    dbits = np.resize(double_probes(float_probes()), n)
    i = np.arange(n)
    p = i.astype(np.uint16)
    f, g = fbits.view(np.float32).astype(np.float64), np.roll(fbits, -1).view(np.float32).astype(np.float64)
    hv, hv2, hvb = (x.view(np.float16).astype(np.float64) for x in (p, p ^ 0x8001, p ^ 0x0001))
    hvc = (p ^ 0x8000).view(np.float16).astype(np.float64)
    bv, bv2 = (x.view(ml_dtypes.bfloat16).astype(np.float64) for x in (p, p ^ 0x8001))
    a_bits, c_bits = (i & 0xFF).astype(np.uint8), (i >> 8).astype(np.uint8)
    narrow_cols = [narrow(src, fmt, sat) for src in (f, hv, bv) for fmt, sat in
                   (("e4m3", True), ("e4m3", False), ("e5m2", True), ("e5m2", False))]
    narrow_cols += [narrow_double(dbits, fmt, sat) for fmt, sat in
                    (("e4m3", True), ("e4m3", False), ("e5m2", True), ("e5m2", False))]
    narrow_cols += [narrow(f, "e4m3", True), narrow(hv, "e5m2", True), narrow_double(dbits, "e4m3", True),
                    narrow((i - 32768).astype(np.float32).astype(np.float64), "e5m2", True)]
    pair = lambda x, y, fmt, sat: pack(narrow(x, fmt, sat), narrow(y, fmt, sat)).astype(np.uint16)
    pairs = [pair(f, g, fmt, sat) for fmt, sat in (("e4m3", True), ("e4m3", False), ("e5m2", True), ("e5m2", False))]
    pairs += [pair(hv, hv2, "e5m2", True), pair(f, g, "e4m3", True), pair(bv, bv2, "e4m3", False),
              pair(hv, hv2, "e5m2", True),
              pack(narrow_double(dbits, "e5m2", True),
                   narrow_double(dbits ^ np.uint64(1 << 63), "e5m2", True)).astype(np.uint16)]
    quads = [pack(*(narrow(x, "e4m3", True) for x in (f, g, -f, -g))).astype(np.uint32),
             pack(*(narrow(x, "e5m2", True) for x in (hv, hv2, hvb, hvc))).astype(np.uint32)]
    a, c = fp8_value(a_bits, "e4m3"), fp8_value(c_bits, "e5m2")
    wide = [widen16(a_bits, "e4m3", np.float16), widen16(c_bits, "e5m2", np.float16),
            widen16(a_bits, "e4m3", np.float16), widen16(c_bits, "e5m2", ml_dtypes.bfloat16),
            widen16(a_bits, "e4m3", ml_dtypes.bfloat16), widen16(c_bits, "e4m3", np.float16)]
    widef = [a, c, a, fp8_value(c_bits, "e4m3"), fp8_value(a_bits, "e5m2")]
    ints = [to_int(a, -(1 << 31), (1 << 31) - 1), to_int(c, -(1 << 31), (1 << 31) - 1), to_int(a, 0, 255),
            to_int(c, 0, 255), to_int(c, -128, 127), to_int(c, -(1 << 15), (1 << 15) - 1),
            to_int(c, 0, (1 << 32) - 1).astype(np.uint32).view(np.int32), (a_bits & 0x7F) != 0]
    return {
        "e4": a_bits.view(E4), "e5": c_bits.view(E5), "fbits": fbits, "dbits": dbits,
        "narrow": np.stack(narrow_cols, axis=1).astype(np.uint8),
        "pairs": np.stack(pairs, axis=1).astype(np.uint16),
        "quads": np.stack(quads, axis=1).astype(np.uint32),
        "wide": np.stack(wide, axis=1).astype(np.uint16),
        "widef": np.stack(widef, axis=1).astype(np.float32),
        "ints": np.stack(ints, axis=1).astype(np.int32),
    }


COLUMNS = {"narrow": 20, "pairs": 9, "quads": 2, "wide": 6, "widef": 5, "ints": 8}
OUT_DTYPES = {"narrow": "uint8", "pairs": "uint16", "quads": "uint32", "wide": "uint16", "widef": "float32",
              "ints": "int32"}


def _conversion_task(folder: Path):
    arrays = _conversion_arrays()
    case = folder / "expected" / "all"
    case.mkdir(parents=True)
    for name, arr in arrays.items():
        # np.save writes float8_e4m3fn as raw |V1 records itself; float8_e5m2 it writes as <f1, which np.load
        # refuses, so a task stores it as raw records (docs/dtypes.md)
        np.save(case / f"{name}.npy", arr.view("V1") if arr.dtype == E5 else arr)
    (folder / "kernel.cu").write_text(CONVERT)
    vec = lambda name, dtype, role, *cols: {"kind": "buffer", "name": name, "dtype": dtype, "shape": ["n", *cols],
                                            "role": role}
    params = [vec("e4", "float8_e4m3", "in"), vec("e5", "float8_e5m2", "in"), vec("fbits", "uint32", "in"),
              vec("dbits", "uint64", "in")]
    params += [vec(name, OUT_DTYPES[name], "out", cols) for name, cols in COLUMNS.items()]
    params.append({"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"})
    (folder / "task.json").write_text(json.dumps({
        "name": "fp8_convert", "description": "fp8 conversions", "kernel_name": "fp8_convert", "sizes": ["n"],
        "params": params, "cases": [{"name": "all", "role": "validation", "sizes": {"n": 1 << 16}}],
        "reference": {"kind": "stored", "dir": "expected"},
        "tolerance": {dtype: EXACT for dtype in set(OUT_DTYPES.values())},
        "baseline": {"source": "kernel.cu", "launch": {"grid": ["ceil_div(n, 256)"], "block": [256]}},
    }))
    return load_task(folder), arrays


def evaluate_and_keep(request, task, backend_fixture: str, folder: Path):
    """evaluate(), keeping the outputs; with CUDAOPT_TEST_DUMP set they are also saved there as one .npz."""
    backend = request.getfixturevalue(backend_fixture)
    config = VALIDATION.model_copy(update={"outputs_dir": str(folder)})
    result = evaluate(task, candidates.baseline(task), backend, config)
    outputs = {f"{p.relative_to(folder).parts[0]}.{p.stem}": np.load(p) for p in folder.rglob("*.npy")}  # case.buffer
    dump = os.environ.get("CUDAOPT_TEST_DUMP")
    if dump:
        name = request.node.name.replace("[", "-").replace("]", "")
        np.savez_compressed(Path(dump) / f"{name}.npz", **outputs)
    return result, outputs


def _disagreements(expected: dict[str, np.ndarray], outputs: dict[str, np.ndarray], inputs: dict[str, np.ndarray]):
    """The first few differing (buffer, row, column, expected, got) with the row's inputs, for the message."""
    found = []
    for name in COLUMNS:
        got = next((v for k, v in outputs.items() if k.endswith(name)), None)
        if got is None:
            continue
        want = expected[name]
        got = got.reshape(want.shape)
        same = (got == want) | (np.isnan(got) & np.isnan(want)) if want.dtype.kind == "f" else got == want
        for row, col in np.argwhere(~same)[:6]:
            found.append((name, int(row), int(col), want[row, col], got[row, col],
                          hex(int(inputs["fbits"][row])), hex(int(inputs["dbits"][row]))))
    return found


@pytest.mark.parametrize("backend_fixture", BACKENDS)
def test_fp8_conversions_bit_for_bit(request, tmp_path, backend_fixture):
    task, arrays = _conversion_task(tmp_path / "task")
    result, outputs = evaluate_and_keep(request, task, backend_fixture, tmp_path / "out")
    assert result.cases, result.failure
    compared = {o.buffer: o for o in result.cases[0].outputs}
    assert result.correct, (result.failure, {k: (o.mismatches, o.first_mismatch) for k, o in compared.items()},
                            _disagreements(arrays, outputs, arrays))
    assert set(compared) == set(COLUMNS) and compared["narrow"].elements == 20 << 16


def test_the_expected_bits_agree_with_what_the_formats_say():
    """Spot checks of the Python side against values read off the formats, so the judge is not only itself."""
    x = np.array([448.0, 464.0, 464.5, 480.0, -1000.0, np.inf, 2.0**-10, 3 * 2.0**-10, 1.0 + 2.0**-4])
    assert narrow(x, "e4m3", True).tolist() == [0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0x7E, 0x00, 0x02, 0x38]
    assert narrow(x, "e4m3", False).tolist() == [0x7E, 0x7E, 0x7F, 0x7F, 0xFF, 0x7F, 0x00, 0x02, 0x38]
    y = np.array([57344.0, 61439.0, 61440.0, -np.inf, 2.0**-17, 1.5 * 2.0**-16, np.nan])
    assert narrow(y, "e5m2", True).tolist() == [0x7B, 0x7B, 0x7B, 0xFB, 0x00, 0x02, FP8_NAN]
    assert narrow(y, "e5m2", False).tolist() == [0x7B, 0x7B, 0x7C, 0xFC, 0x00, 0x02, FP8_NAN]
    nans = np.array([0x7FF8000000000000, 0xFFF4000000000000, 0x7FF0000000000001], dtype=np.uint64)
    assert narrow_double(nans, "e5m2", False).tolist() == [0x7E, 0xFF, 0x7E]
    assert narrow_double(nans, "e4m3", True).tolist() == [0x7F, 0xFF, 0x7F]
    assert narrow_double(np.array([1.0 + 2.0**-4 + 2.0**-40]).view(np.uint64), "e4m3", True).tolist() == [0x39]
    # just past a tie, in the bits a float16 drops: rounded once it goes up (ml_dtypes 0.6 went through float16 first,
    # landed on the tie and rounded it to even: the GPU then "disagreed" with a wrong expectation)
    past_ties = np.array([1.0 + 2.0**-3 + 2.0**-40, -208.0 - 2.0**-30]).view(np.uint64)
    assert narrow_double(past_ties, "e5m2", True).tolist() == [0x3D, 0xDB]
    bits = np.arange(256, dtype=np.uint8)
    assert widen16(bits, "e5m2", np.float16).tolist()[:0x7D] == (bits[:0x7D].astype(np.uint16) << 8).tolist()
    assert widen16(np.array([0x7F, 0xFF, 0x80, 0x01], np.uint8), "e4m3", np.float16).tolist() == \
        [HALF_NAN, HALF_NAN, 0x8000, 0x1800]  # 2^-9


# ---- tasks ------------------------------------------------------------------------------------------------
def _task(folder: Path, name: str, source: str, params: list, reference: str, sizes: list[int], tolerance: dict):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.cu").write_text(source)
    (folder / "reference.py").write_text("import ml_dtypes\nimport numpy as np\n\n" + reference)
    (folder / "task.json").write_text(json.dumps({
        "name": name, "description": "an fp8 task", "kernel_name": name, "sizes": ["n"], "params": params,
        "cases": [{"name": f"n{n}", "role": "validation", "sizes": {"n": n}} for n in sizes],
        "reference": {"kind": "numpy"}, "tolerance": tolerance,
        "baseline": {"source": "kernel.cu", "launch": {"grid": ["ceil_div(n, 256)"], "block": [256]}},
    }))
    return load_task(folder)


def _vec(name: str, dtype: str, role: str, init: dict | None = None) -> dict:
    param = {"kind": "buffer", "name": name, "dtype": dtype, "shape": ["n"], "role": role}
    if init:
        param["init"] = init
    return param


CAST = """
#include <cuda_fp8.h>
extern "C" __global__ void cast(const float* x, __nv_fp8_e4m3* sat4, __nv_fp8_e4m3* raw4, __nv_fp8_e5m2* sat5,
                                __nv_fp8_e5m2* raw5, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    sat4[i].__x = __nv_cvt_float_to_fp8(x[i], __NV_SATFINITE, __NV_E4M3);
    raw4[i].__x = __nv_cvt_float_to_fp8(x[i], __NV_NOSAT, __NV_E4M3);
    sat5[i] = __nv_fp8_e5m2(x[i]);
    raw5[i].__x = __nv_cvt_float_to_fp8(x[i], __NV_NOSAT, __NV_E5M2);
}
"""
CAST_REFERENCE = """def reference(inputs, sizes):
    x = inputs['x']
    e4, e5 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2
    # rounded once to nearest even; beyond the range saturated, or NaN (e4m3) / inf (e5m2) without saturation
    return {'sat4': np.clip(x, -448, 448).astype(e4), 'raw4': x.astype(e4),
            'sat5': np.clip(x, -57344, 57344).astype(e5), 'raw5': x.astype(e5)}
"""


@pytest.mark.parametrize("backend_fixture", BACKENDS)
def test_a_float32_to_fp8_cast_with_both_saturation_modes(request, tmp_path, backend_fixture):
    # uniform over +-1e5: most values overflow e4m3 and a few e5m2, the rest round; exact comparison
    params = [_vec("x", "float32", "in", {"dist": "uniform", "low": -1e5, "high": 1e5}),
              *(_vec(name, dtype, "out") for name, dtype in
                (("sat4", "float8_e4m3"), ("raw4", "float8_e4m3"), ("sat5", "float8_e5m2"), ("raw5", "float8_e5m2"))),
              {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}]
    task = _task(tmp_path / "cast", "cast", CAST, params, CAST_REFERENCE, [1000, 4096],
                 {"float8_e4m3": EXACT, "float8_e5m2": EXACT})
    result, outputs = evaluate_and_keep(request, task, f"{backend_fixture}", tmp_path / "out")
    assert result.correct, (result.failure, [(o.buffer, o.mismatches, o.first_mismatch) for c in result.cases
                                             for o in c.outputs])
    raw4 = outputs["n4096.raw4"].view(E4).astype(np.float64)
    sat5 = outputs["n4096.sat5"].view(E5).astype(np.float64)
    assert np.isnan(raw4).mean() > 0.9 and np.abs(sat5).max() == 57344  # both regimes were exercised


AXPY = """
#include <cuda_fp8.h>
extern "C" __global__ void axpy(const __nv_fp8_e4m3* x, const __nv_fp8_e5m2* y, float* out32, __nv_fp8_e4m3* out8,
                                float a, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float v = a * static_cast<float>(x[i]) + static_cast<float>(y[i]);
    out32[i] = v;
    out8[i] = __nv_fp8_e4m3(v);  // saturating, rounded once
}
"""
AXPY_REFERENCE = """def reference(inputs, sizes):
    v = inputs['a'] * inputs['x'] + inputs['y']
    return {'out32': v, 'out8': np.clip(v, -448, 448)}
"""


@pytest.mark.parametrize("backend_fixture", BACKENDS)
def test_an_fp8_axpy_passes_with_the_default_fp8_tolerance(request, tmp_path, backend_fixture):
    params = [_vec("x", "float8_e4m3", "in"), _vec("y", "float8_e5m2", "in", {"dist": "uniform", "low": -4, "high": 4}),
              _vec("out32", "float32", "out"), _vec("out8", "float8_e4m3", "out"),
              {"kind": "scalar", "name": "a", "dtype": "float32", "value": 1.75},
              {"kind": "scalar", "name": "n", "dtype": "int32", "value": "n"}]
    task = _task(tmp_path / "axpy", "axpy", AXPY, params, AXPY_REFERENCE, [1, 1001, 4096],
                 {"float32": {"atol": 1e-6, "rtol": 1e-6}})  # out8: the default, atol 2^-4, rtol 2^-3
    assert task.spec.tolerance_for("float8_e4m3").rtol == 2.0**-3
    result = evaluate(task, candidates.baseline(task), request.getfixturevalue(backend_fixture), VALIDATION)
    assert result.correct, (result.failure, [(o.buffer, o.max_rel_err) for c in result.cases for o in c.outputs])
    out8 = next(o for o in result.cases[-1].outputs if o.buffer == "out8")
    assert out8.max_abs_err > 0 and out8.mismatches == 0  # rounded, and within the default tolerance


# ---- the oracle's fp8 patterns ---------------------------------------------------------------------------
def _fp8_task(folder, kernel_name: str, body: str, reference: str, sizes: list[int], dtype: str = "float8_e4m3"):
    ctype = "__nv_fp8_e4m3" if dtype == "float8_e4m3" else "__nv_fp8_e5m2"
    source = ("#include <cuda_fp8.h>\n"
              f'extern "C" __global__ void {kernel_name}(const {ctype}* in, {ctype}* out, int n) {{\n'
              f"    int i = blockIdx.x * blockDim.x + threadIdx.x;\n{body}}}\n").replace("T(", f"{ctype}(")
    return _vector_task(folder, kernel_name, source, reference, sizes, dtype=dtype)


@pytest.mark.parametrize("backend_fixture", BACKENDS)
@pytest.mark.parametrize("dtype", ["float8_e4m3", "float8_e5m2"])
def test_fp8_reads_past_the_end_and_an_unwritten_element_fail(request, tmp_path, backend_fixture, dtype):
    backend = request.getfixturevalue(backend_fixture)
    run = lambda task: evaluate(task, candidates.baseline(task), backend, VALIDATION)
    # 1001 one-byte elements end 7 bytes before the guard page (in[1001] is in the checked slack); 1024 end on it
    body = "    if (i < n) out[i] = T(static_cast<float>(in[i]) + static_cast<float>(in[i + 1]));\n"
    slack, edge = run(_fp8_task(tmp_path / "past", "pair_sum", body, "x + np.append(x[1:], 0)", [1001, 1024],
                                dtype)).cases
    _assert_mismatch_at(slack, "out", 1000)  # the input's tail is NaN in the format: the sum is NaN
    _assert_faulted_on(edge, backend.name, {"in"}, "read")
    body = "    if (i < n) out[i] = in[i];\n    if (i == 0) out[n] = in[n];\n"
    copied = run(_fp8_task(tmp_path / "copy", "copy", body, "x.copy()", [1001], dtype)).cases[0]
    assert copied.status == "corrupted" and copied.run.overruns == ["out"], copied  # the NaN byte over 0x5A
    body = "    if (i < n - 1) out[i] = T(2.0f * static_cast<float>(in[i]));\n"
    unwritten = run(_fp8_task(tmp_path / "unwritten", "twice", body, "2 * x", [1001], dtype)).cases[0]
    _assert_mismatch_at(unwritten, "out", 1000)  # still the 0xFF prefill: NaN in both formats


@pytest.mark.parametrize("backend_fixture", BACKENDS)
def test_a_correct_fp8_kernel_passes_untouched(request, tmp_path, backend_fixture):
    body = "    if (i < n) out[i] = T(2.0f * static_cast<float>(in[i]));\n"
    task = _fp8_task(tmp_path, "twice", body, "np.clip(2 * x, -448, 448)", [1, 3, 1001, 1024, 4097])
    result = evaluate(task, candidates.baseline(task), request.getfixturevalue(backend_fixture), VALIDATION)
    assert result.correct, result.failure
    assert all(not c.run.overruns and not c.run.modified_inputs for c in result.cases)
    assert all(o.max_abs_err == 0 for c in result.cases for o in c.outputs)  # doubling is exact below 224
