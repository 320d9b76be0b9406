"""Float64 reference for layer_norm: nn.LayerNorm over the last three dimensions (biased variance, eps),
then the elementwise weight and bias. Rows are normalised one at a time (4M elements each at the performance
size), so temporaries stay at one row."""

import numpy as np


def reference(inputs: dict, sizes: dict) -> dict:
    rows = sizes["batch"]
    cols = sizes["features"] * sizes["dim1"] * sizes["dim2"]
    x = inputs["x"].reshape(rows, cols)
    weight = inputs["weight"].reshape(cols)
    bias = inputs["bias"].reshape(cols)
    y = np.empty_like(x)
    for r in range(rows):
        d = x[r] - x[r].mean()
        rstd = 1.0 / np.sqrt(np.mean(d * d) + inputs["eps"])
        np.multiply(d, rstd, out=d)
        np.multiply(d, weight, out=d)
        np.add(d, bias, out=y[r])
    return {"y": y.reshape(inputs["x"].shape)}
