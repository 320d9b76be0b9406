"""Whether two host arrays hold the same bytes, at memory speed.

The executors check after every launch that no input changed. ``np.array_equal`` on byte views builds a
boolean array as large as the input (0.6 s for 256 MiB on the CI machine); ``memcmp`` over the two
buffers takes about 13 ms.
"""

from __future__ import annotations

import ctypes

import numpy as np

_libc = ctypes.CDLL(None)
_memcmp = _libc.memcmp
_memcmp.restype = ctypes.c_int
_memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """True when ``a`` and ``b`` have the same size in bytes and identical contents (dtype and shape aside)."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if a.nbytes != b.nbytes:
        return False
    return a.nbytes == 0 or _memcmp(a.ctypes.data, b.ctypes.data, a.nbytes) == 0
