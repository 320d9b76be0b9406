"""A large input's way into the input cache, side by side: drawn in memory and then saved (``np.save``, the way
before), or drawn by the same threads straight into its file (``InputFiles``' ``allocate``).

    python -m benchmarks.input_files [--example reduction] [--repeat 2]

Prints seconds per way, each repeat on a fresh file in the input cache's file system (/dev/shm where there is
one). reduction's 800M-element input (3.2 GB) was made ahead in 3.84 s on the H100, the baseline waiting on it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from harness_tools import resolve_task
from harness_tools.check.inputs import draw_inputs
from harness_tools.task.spec import Case, TaskSpec


def biggest_case(spec: TaskSpec) -> Case:
    def elements(case: Case) -> int:
        return sum(int(np.prod(spec.shape_of(b, case.sizes))) for b in spec.buffers if b.role != "out")
    return max(spec.cases, key=elements)


def in_memory_then_saved(spec: TaskSpec, case: Case, folder: Path) -> tuple[float, float]:
    started = time.perf_counter()
    arrays = draw_inputs(spec, case, 1)
    drawn = time.perf_counter()
    for name, arr in arrays.items():
        np.save(folder / f"in_{name}.npy", arr)
    return drawn - started, time.perf_counter() - drawn


def into_the_file(spec: TaskSpec, case: Case, folder: Path) -> float:
    def allocate(name: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        return np.lib.format.open_memmap(folder / f"in_{name}.npy", mode="w+", dtype=dtype, shape=shape)
    started = time.perf_counter()
    arrays = draw_inputs(spec, case, 1, allocate)
    for name, arr in arrays.items():
        if not isinstance(arr, np.memmap):
            np.save(folder / f"in_{name}.npy", arr)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="reduction")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    task = resolve_task(str(Path(__file__).resolve().parents[1] / "examples" / args.example))
    case = biggest_case(task.spec)
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    print(f"{args.example}, case {case.name} ({case.sizes}), files in {base or tempfile.gettempdir()}, "
          f"{os.cpu_count()} cores; seconds")
    print("| drawn in memory | then np.save | total | drawn into the file |\n|---:|---:|---:|---:|")
    for _ in range(args.repeat):
        folder = Path(tempfile.mkdtemp(dir=base))
        try:
            draw_s, save_s = in_memory_then_saved(task.spec, case, folder)
            shutil.rmtree(folder)
            folder.mkdir()
            mapped_s = into_the_file(task.spec, case, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        print(f"| {draw_s:.3f} | {save_s:.3f} | {draw_s + save_s:.3f} | {mapped_s:.3f} |")


if __name__ == "__main__":
    main()
