"""Float64 reference for sgemm: C = A @ B (row-major A[M,K], B[K,N], C[M,N])."""

import numpy as np


def reference(inputs: dict, sizes: dict) -> dict:
    a, b = inputs["A"], inputs["B"]
    return {"C": np.asarray(a @ b, dtype=np.float64).reshape(sizes["M"], sizes["N"])}
