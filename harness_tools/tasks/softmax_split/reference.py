"""Float64 reference for softmax_split: y[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max))."""

import numpy as np


def reference(inputs: dict, sizes: dict) -> dict:
    x = inputs["x"].reshape(sizes["rows"], sizes["cols"])
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": e / e.sum(axis=1, keepdims=True)}
