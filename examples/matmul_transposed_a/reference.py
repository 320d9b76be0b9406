"""Float64 reference for matmul_transposed_a: C = A^T B with A of shape (K, M) and B of shape (K, N)."""


def reference(inputs: dict, sizes: dict) -> dict:
    M, N, K = sizes["M"], sizes["N"], sizes["K"]
    A = inputs["A"].reshape(K, M)
    B = inputs["B"].reshape(K, N)
    return {"C": A.T @ B}  # one BLAS call (dgemm with a transposed operand), fast even at 2048x4096x8192
