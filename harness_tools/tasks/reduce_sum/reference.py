"""Float64 reference for reduce_sum: out[0] = sum of x."""

import numpy as np


def reference(inputs: dict, sizes: dict) -> dict:
    return {"out": np.array([np.sum(inputs["x"], dtype=np.float64)], dtype=np.float64)}
