"""Reference for transpose: out[c, r] = in[r, c] (in is rows x cols, out is cols x rows)."""

import numpy as np


def reference(inputs: dict, sizes: dict) -> dict:
    x = inputs["in"].reshape(sizes["rows"], sizes["cols"])
    return {"out": np.ascontiguousarray(x.T, dtype=np.float64)}
