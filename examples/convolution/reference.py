"""Float64 reference for convolution: output[y, x] = sum over i < FH, j < FW of input[y + i, x + j] * filter[i, j]
(a 'valid' correlation, as in Kernel Tuner's example).

Each filter row is one NumPy call over a block of ROWS output rows: a sliding window of the image's rows (a view,
nothing copied) times that row of taps, a matrix-vector product that sums the FW products in float64 and lets go of
the interpreter's lock for the whole call (a few milliseconds at 4096 columns); the FH row sums are added in order.
The blocks are shared out among threads. A 4096² image with a 17×17 filter is 17 calls per block, 1,088 in all.
Adding one tap at a time over 16-row blocks made about 148,000 calls of a few tens of microseconds, and each waited
for the lock among the threads: 4 s on a 16-core GPU host with 16 threads. On one core both take the same
time (0.7-0.9 s at 2048² on the development host)."""

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

ROWS = 64


def reference(inputs: dict, sizes: dict) -> dict:
    w, h, fw, fh = sizes["W"], sizes["H"], sizes["FW"], sizes["FH"]
    image = inputs["input"].reshape(h + fh - 1, w + fw - 1)
    taps = inputs["filter"].reshape(fh, fw)
    out = np.zeros((h, w))
    tops = range(0, h, ROWS)
    threads = max(1, min(os.cpu_count() or 1, 16, len(tops)))

    def blocks(first: int) -> None:  # every threads-th block, from the first-th
        for top in tops[first::threads]:
            rows = min(ROWS, h - top)
            block = out[top:top + rows]
            for i in range(fh):
                window = sliding_window_view(image[top + i:top + i + rows], fw, axis=1)  # (rows, w, fw)
                block += window @ taps[i]

    if threads == 1:
        blocks(0)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(blocks, range(threads)))  # list(): a block's error is raised here
    return {"output": out}
