"""A large ``.npy`` input uploaded to the GPU three ways: the cuda worker's pinned two-buffer path
(``harness_tools/backends/cuda/pinned_upload.py``), one pageable copy from the file's memory map (what it replaced),
and the file's reading alone (``pread``, no copy to the device).

    python -m benchmarks.upload_paths [--gib 3.2] [--repeat 2]

Needs a GPU; this process creates its own CUDA context (a benchmark, not the server). Prints a table of seconds.
reduction's 3.2 GB input was about 1 s of its first evaluation on the H100 with either upload path.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=3.2, help="the file's size, GB (float32 elements)")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    from cuda.bindings import driver as cu

    from harness_tools.backends.cuda.pinned_upload import upload_npy

    def ok(result, what=""):
        err, *rest = result if isinstance(result, tuple) else (result,)
        if int(err) != 0:
            raise RuntimeError(f"{what}: {err}")
        return rest[0] if len(rest) == 1 else (rest or None)

    ok(cu.cuInit(0))
    context = ok(cu.cuDevicePrimaryCtxRetain(ok(cu.cuDeviceGet(0))))
    ok(cu.cuCtxSetCurrent(context))
    stream = ok(cu.cuStreamCreate(0))
    n = int(args.gib * 1e9) // 4
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as folder:
        path = str(Path(folder) / "input.npy")
        np.save(path, np.random.default_rng(0).standard_normal(n, dtype=np.float32))
        dst = int(ok(cu.cuMemAlloc(n * 4)))
        rows = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            upload_npy(dst, path, stream, ok)
            pinned = time.perf_counter() - started
            mapped = np.load(path, mmap_mode="r")
            started = time.perf_counter()
            ok(cu.cuMemcpyHtoD(dst, mapped.ctypes.data, n * 4), "pageable copy")
            pageable = time.perf_counter() - started
            started = time.perf_counter()
            _read_all(path)
            rows.append((pinned, pageable, time.perf_counter() - started))
        ok(cu.cuMemFree(dst))
    print(f"{n * 4 / 1e9:.1f} GB of float32 in a .npy file on {'/dev/shm' if folder.startswith('/dev/shm') else 'disk'}")
    print("| pinned two-buffer upload | one pageable copy from the map | pread alone |")
    print("|---:|---:|---:|")
    for row in rows:
        print("| " + " | ".join(f"{v:.3f} s" for v in row) + " |")


def _read_all(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    buffer = memoryview(bytearray(64 << 20))
    offset = 0
    try:
        while (got := os.preadv(fd, [buffer], offset)) > 0:
            offset += got
    finally:
        os.close(fd)


if __name__ == "__main__":
    main()
