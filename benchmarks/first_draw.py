"""Where a seed's first draw goes, case by case: the inputs, the host's float64 oracle and the oracle's device form.

    python -m benchmarks.first_draw [--examples vector_add stencil matmul convolution reduction] [--seeds 2]

Per example (folders in examples/) and seed, every case of a search step on the cuda backend, made as
``cudaopt optimize``'s start makes them (harness_tools.check.seed_ahead, the reference process for large cases), in
this process with nothing else running: one table of seconds. Then, for each example's largest output, its oracle
split into the device form twice side by side, in one chunk per 16M elements (the old ``CHUNK``) and in the chunks
used now, on the same float64 array. Runs without a GPU (nothing here launches a kernel).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from harness_tools import resolve_task
from harness_tools.check import device_reference
from harness_tools.check.case_request import case_inputs
from harness_tools.check.device_compare import SEARCH_DEVICE_COMPARE_MIN_BYTES, device_checks_for
from harness_tools.check.device_reference import form_of, split
from harness_tools.check.reference import host_expected_outputs
from harness_tools.check.reference_process import REFERENCES, computed_away
from harness_tools.task.expressions import evaluate_expression

ROOT = Path(__file__).resolve().parents[1]
OLD_CHUNK = 1 << 24


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", nargs="+", default=["vector_add", "stencil", "matmul", "convolution"])
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    print("| example | seed | case | oracle in | inputs | oracle | device form |")
    print("|---|---:|---|---|---:|---:|---:|")
    largest: dict[str, tuple[int, np.ndarray, str]] = {}
    for example in args.examples:
        task = resolve_task(ROOT / "examples" / example)
        cases = task.spec.cases_for(task.spec.default_roles("cuda"), "cuda")
        for seed in range(7, 7 + args.seeds):
            REFERENCES.start()
            for case in cases:
                t0 = time.perf_counter()
                inputs, files = case_inputs(task, case, seed)
                t1 = time.perf_counter()
                outputs = host_expected_outputs(task, case, seed, inputs, files)
                t2 = time.perf_counter()
                device_checks_for(task, case, seed, "cuda", "auto", lambda o=outputs: o, SEARCH_DEVICE_COMPARE_MIN_BYTES)
                t3 = time.perf_counter()
                where = "reference process" if computed_away(task, case, files) else "here"
                print(f"| {example} | {seed} | {case.name} | {where} | {t1 - t0:.3f} | {t2 - t1:.3f} | {t3 - t2:.3f} |")
                for buf in task.spec.outputs:
                    array = outputs[buf.name]
                    if array.size > largest.get(example, (0, None, ""))[0]:
                        tolerance = task.spec.tolerance_for(buf.dtype)
                        atol = float(evaluate_expression(tolerance.atol, case.sizes))
                        largest[example] = (array.size, np.asarray(array), form_of(buf.dtype, atol, tolerance.rtol))
    print()
    print(f"| example | elements | form | one chunk per {OLD_CHUNK:,} | chunks of {device_reference.CHUNK:,} |")
    print("|---|---:|---|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="cudaopt-first-draw-") as tmp:
        for example, (size, array, form) in largest.items():
            times = {}
            for chunk in (OLD_CHUNK, device_reference.CHUNK, OLD_CHUNK, device_reference.CHUNK):
                saved, device_reference.CHUNK = device_reference.CHUNK, chunk
                try:
                    started = time.perf_counter()
                    split(array, form, Path(tmp) / f"{example}-{chunk}")
                    times.setdefault(chunk, []).append(time.perf_counter() - started)
                finally:
                    device_reference.CHUNK = saved
                for path in Path(tmp).iterdir():
                    path.unlink()
            shown = [" / ".join(f"{t:.3f}" for t in times[c]) for c in (OLD_CHUNK, device_reference.CHUNK)]
            print(f"| {example} | {size:,} | {form} | {shown[0]} | {shown[1]} |")


if __name__ == "__main__":
    main()
