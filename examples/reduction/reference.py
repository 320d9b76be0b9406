"""Float64 reference for reduction: out[0] = sum of x (NumPy's pairwise summation in float64)."""

import numpy as np


def reference(inputs: dict, sizes: dict) -> dict:
    return {"out": np.array([np.sum(inputs["x"], dtype=np.float64)])}
