"""The element types a task may use: their C types, their NumPy representation and their default tolerances.

``bfloat16``, ``float8_e4m3`` and ``float8_e5m2`` have no NumPy type of their own: the ``ml_dtypes`` package
provides them (``bfloat16``, ``float8_e4m3fn`` and ``float8_e5m2``: CUDA's e4m3 is the "fn" variant, finite with
NaN, not ml_dtypes' IEEE-like ``float8_e4m3``), imported on first need (it takes about a second to import, and
every worker restart, e.g. after a cancelled call, would pay it). A ``.npy`` file cannot name them: ``np.save``
writes bfloat16 and float8_e4m3fn as raw records (``|V2``, ``|V1``) and float8_e5m2 as ``<f1``, which
``np.load`` cannot read back. So the engine saves them as raw records (:func:`storable`) and :func:`as_dtype`
turns raw records back into the dtype the spec says the buffer has.

Half-precision and fp8 outputs get default tolerances derived from their unit roundoff (docs/dtypes.md); for
the wider types the kernel's own arithmetic, not the output's rounding, dominates the error, so a task states
those itself.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

DType = Literal[
    "float8_e4m3", "float8_e5m2", "bfloat16", "float16", "float32", "float64",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
]
CTYPES: dict[str, str] = {
    "float8_e4m3": "__nv_fp8_e4m3", "float8_e5m2": "__nv_fp8_e5m2", "bfloat16": "__nv_bfloat16", "float16": "__half",
    "float32": "float", "float64": "double",
    "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long", "uint8": "unsigned char",
    "uint16": "unsigned short", "uint32": "unsigned int", "uint64": "unsigned long long",
}
HALF_TYPES = ("bfloat16", "float16")  # 16-bit floats: passed as bit patterns, drawn in float64 and rounded
FP8_TYPES = ("float8_e4m3", "float8_e5m2")  # CUDA's __nv_fp8_*: drawn in float64, saturated and rounded
NARROW_FLOATS = HALF_TYPES + FP8_TYPES  # drawn in float64 and rounded once; default tolerances (docs/dtypes.md)

# Unit roundoff u = 2^-p for p significand bits (implicit bit included): the largest relative error of
# one round-to-nearest. docs/dtypes.md derives the default tolerances from it.
UNIT_ROUNDOFF = {"float8_e4m3": 2.0 ** -4, "float8_e5m2": 2.0 ** -3, "bfloat16": 2.0 ** -8, "float16": 2.0 ** -11,
                 "float32": 2.0 ** -24, "float64": 2.0 ** -53}
# The largest finite value of each fp8 format (e4m3: S.1111.110 = 1.75 * 2^8; e5m2: S.11110.11 = 1.75 * 2^15):
# what __NV_SATFINITE saturates to, and the bound drawn inputs are clipped to.
FP8_MAX = {"float8_e4m3": 448.0, "float8_e5m2": 57344.0}
_ML_DTYPES = {"bfloat16": "bfloat16", "float8_e4m3": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}


def default_tolerance(dtype: str) -> tuple[float, float] | None:
    """(atol, rtol) for an output of ``dtype`` when the task states none: u and 2u for the half and fp8 types,
    whose final rounding dominates an fp32-computing kernel's error; None (the task must state one) otherwise."""
    if dtype not in NARROW_FLOATS:
        return None
    u = UNIT_ROUNDOFF[dtype]
    return u, 2 * u


def numpy_dtype(dtype: str) -> np.dtype:
    if dtype in _ML_DTYPES:
        import ml_dtypes  # here, not at the top: see the module docstring

        return np.dtype(getattr(ml_dtypes, _ML_DTYPES[dtype]))
    return np.dtype(dtype)


def is_ml_dtypes_float(dtype: np.dtype) -> bool:
    """Whether a NumPy dtype is one of ml_dtypes' floats the engine uses (bfloat16, float8_e4m3fn,
    float8_e5m2), without importing ml_dtypes to ask. NumPy gives bfloat16 and float8_e4m3fn the kind "V" and
    float8_e5m2 the kind "f"; all of them convert to float64 exactly."""
    return dtype.name in _ML_DTYPES.values()


def is_bfloat16(dtype: np.dtype) -> bool:
    """Whether a NumPy dtype is one of ml_dtypes' floats: its callers ask "is this a number NumPy does not
    know by its kind?", so the fp8 types answer yes too (the same as :func:`is_ml_dtypes_float`)."""
    return is_ml_dtypes_float(dtype)


def is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def as_dtype(array: np.ndarray, dtype: str) -> np.ndarray:
    """``array`` (just read from a ``.npy`` file) as ``dtype``: raw records of the same width are reinterpreted
    (bfloat16 is stored as ``|V2``, the fp8 types as ``|V1``); anything else is returned unchanged for the
    caller's own checks."""
    want = numpy_dtype(dtype)
    if array.dtype != want and array.dtype.kind == "V" and array.dtype.itemsize == want.itemsize:
        return array.view(want)
    return array


def storage_dtype(dtype: str) -> np.dtype:
    """The dtype an array of ``dtype`` is written to a ``.npy`` file with: raw records (``|V1``, ``|V2``) for
    ml_dtypes' floats, whose own descriptors NumPy cannot always read back (float8_e5m2 is saved as ``<f1``,
    which ``np.load`` refuses); the dtype itself otherwise. :func:`as_dtype` reads them back."""
    want = numpy_dtype(dtype)
    return np.dtype(f"V{want.itemsize}") if is_ml_dtypes_float(want) else want


def storable(array: np.ndarray) -> np.ndarray:
    """``array`` as it can go through ``np.save`` and come back from ``np.load``: a view as raw records for
    ml_dtypes' floats (see :func:`storage_dtype`), the array itself otherwise."""
    if is_ml_dtypes_float(array.dtype):
        return array.view(f"V{array.dtype.itemsize}")
    return array
