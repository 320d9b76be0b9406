"""Float64 reference for convolution: output[y, x] = sum over i < FH, j < FW of input[y + i, x + j] * filter[i, j]
(a 'valid' correlation, as in Kernel Tuner's example), accumulated one filter tap at a time over the whole image."""

import numpy as np


def reference(inputs: dict, sizes: dict) -> dict:
    w, h, fw, fh = sizes["W"], sizes["H"], sizes["FW"], sizes["FH"]
    image = inputs["input"].reshape(h + fh - 1, w + fw - 1)
    taps = inputs["filter"].reshape(fh, fw)
    out = np.zeros((h, w))
    for i in range(fh):
        for j in range(fw):
            out += taps[i, j] * image[i:i + h, j:j + w]
    return {"output": out}
