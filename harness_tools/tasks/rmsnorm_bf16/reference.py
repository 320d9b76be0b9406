"""Float64 reference for rmsnorm_bf16: y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w (from the bf16 inputs)."""

import numpy as np

EPS = 1e-6


def reference(inputs: dict, sizes: dict) -> dict:
    x = inputs["x"].reshape(sizes["rows"], sizes["cols"])
    rms = np.sqrt(np.mean(x * x, axis=1, keepdims=True) + EPS)
    return {"y": x / rms * inputs["w"][None, :]}
