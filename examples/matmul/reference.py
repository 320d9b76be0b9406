"""Float64 reference for matmul: C = A B, square N x N."""


def reference(inputs: dict, sizes: dict) -> dict:
    n = sizes["N"]
    return {"C": inputs["A"].reshape(n, n) @ inputs["B"].reshape(n, n)}
