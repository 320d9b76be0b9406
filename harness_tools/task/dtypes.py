"""The element types a task may use: their C types, their NumPy representation and their default tolerances.

``bfloat16`` has no NumPy type of its own: the ``ml_dtypes`` package provides it, imported on first need
(it takes about a second to import, and every worker restart, e.g. after a cancelled call, would pay it). A ``.npy`` file
cannot name it: ``np.save`` writes a bfloat16 array as raw 2-byte records (``|V2``), and :func:`as_dtype`
turns such records back into the dtype the spec says the buffer has.

Half-precision outputs get default tolerances derived from their unit roundoff (docs/dtypes.md); for the
wider types the kernel's own arithmetic, not the output's rounding, dominates the error, so a task states
those itself.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

DType = Literal[
    "bfloat16", "float16", "float32", "float64",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
]
CTYPES: dict[str, str] = {
    "bfloat16": "__nv_bfloat16", "float16": "__half", "float32": "float", "float64": "double",
    "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long", "uint8": "unsigned char",
    "uint16": "unsigned short", "uint32": "unsigned int", "uint64": "unsigned long long",
}
HALF_TYPES = ("bfloat16", "float16")  # 16-bit floats: passed as bit patterns, drawn in float64 and rounded

# Unit roundoff u = 2^-p for p significand bits (implicit bit included): the largest relative error of
# one round-to-nearest. docs/dtypes.md derives the default tolerances from it.
UNIT_ROUNDOFF = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11, "float32": 2.0 ** -24, "float64": 2.0 ** -53}


def default_tolerance(dtype: str) -> tuple[float, float] | None:
    """(atol, rtol) for an output of ``dtype`` when the task states none: u and 2u for the half types, whose
    final rounding dominates an fp32-accumulating kernel's error; None (the task must state one) otherwise."""
    if dtype not in HALF_TYPES:
        return None
    u = UNIT_ROUNDOFF[dtype]
    return u, 2 * u


def numpy_dtype(dtype: str) -> np.dtype:
    if dtype == "bfloat16":
        import ml_dtypes  # here, not at the top: see the module docstring

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def is_bfloat16(dtype: np.dtype) -> bool:
    """Whether a NumPy dtype is ml_dtypes' bfloat16, without importing ml_dtypes to ask."""
    return dtype.name == "bfloat16"


def is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def as_dtype(array: np.ndarray, dtype: str) -> np.ndarray:
    """``array`` (just read from a ``.npy`` file) as ``dtype``: raw records of the same width are reinterpreted
    (bfloat16 is stored as ``|V2``); anything else is returned unchanged for the caller's own checks."""
    want = numpy_dtype(dtype)
    if array.dtype != want and array.dtype.kind == "V" and array.dtype.itemsize == want.itemsize:
        return array.view(want)
    return array
