"""Reference for argmax_dim1: out[b, j] = the first d where x[b, d, j] is largest (np.argmax(x, axis=1)).

np.argmax over a middle axis copies each batch transposed (slow at 128 x 4096 x 4095); instead each batch takes
the column maxima (a fast reduction over rows) and then the smallest d that reaches it, on a few threads."""

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def _first_argmax(xb: np.ndarray) -> np.ndarray:
    D = xb.shape[0]
    top = xb.max(axis=0)
    rows = np.arange(D, dtype=np.int32)[:, None]
    return np.where(xb == top, rows, np.int32(D)).min(axis=0)


def reference(inputs: dict, sizes: dict) -> dict:
    B, D, J = sizes["B"], sizes["D"], sizes["J"]
    x = inputs["x"].reshape(B, D, J)
    with ThreadPoolExecutor(min(B, os.cpu_count() or 1, 16)) as pool:
        out = np.stack(list(pool.map(_first_argmax, x)))
    return {"out": out.astype(np.int64)}
