"""Kernel arguments in launch form: a ``void*[]`` whose entries point at each argument's value.

cuLaunchKernel's ``kernelParams`` and the cpu backend's generated launcher take exactly this; both
executors build it here. Buffers are passed as their 64-bit address, scalars in their dtype (bfloat16 and
float16 as their 16-bit pattern, rounded to nearest even).
"""

from __future__ import annotations

import ctypes

import numpy as np

from harness_tools.backends.contract import ArgSpec
from harness_tools.task.dtypes import HALF_TYPES, numpy_dtype

SCALAR_CTYPES = {
    "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
    "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float, "float64": ctypes.c_double,
}


def argument_array(args: list[ArgSpec], pointers: dict[str, int]) -> tuple[list, ctypes.Array]:
    """(holders, array): keep ``holders`` alive for as long as the array may be used."""
    holders: list = []
    for arg in args:
        if arg.kind == "buffer":
            holders.append(ctypes.c_uint64(pointers[arg.name]))
        elif arg.dtype in HALF_TYPES:
            holders.append(ctypes.c_uint16(int(np.array(arg.value, numpy_dtype(arg.dtype)).view(np.uint16))))
        else:
            holders.append(SCALAR_CTYPES[arg.dtype](arg.value))
    array = (ctypes.c_void_p * max(1, len(holders)))(*[ctypes.addressof(h) for h in holders])
    holders.append(array)
    return holders, array
