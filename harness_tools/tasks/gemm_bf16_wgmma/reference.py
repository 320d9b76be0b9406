"""Float64 reference for gemm_bf16: C = A @ B from the bf16 inputs (A[M,K], B[K,N], C[M,N], all row-major)."""

import numpy as np


def reference(inputs: dict, sizes: dict) -> dict:
    m, n, k = sizes["M"], sizes["N"], sizes["K"]
    a = np.asarray(inputs["A"], dtype=np.float64).reshape(m, k)
    b = np.asarray(inputs["B"], dtype=np.float64).reshape(k, n)
    return {"C": a @ b}
