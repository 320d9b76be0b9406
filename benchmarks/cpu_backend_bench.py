"""cpu backend benchmark: build times, cached loads, and run times of barrier-heavy kernels on this CPU.

    python -m benchmarks.cpu_backend_bench [--reps 3]

Uses a fresh, empty kernel cache (a temporary CUDAOPT_CACHE_DIR), so the first evaluation of each
kernel pays NVRTC + g++ and the second shows the cached load. Run times are CPU wall clock of one
launch (median of --reps), measured by the engine itself.

Goals (issue 3, on the 2-core CI machine): 512³ tiled SGEMM ≤ 2 s, 1M-element reduction ≤ 0.2 s,
cached kernels load in milliseconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    os.environ["CUDAOPT_CACHE_DIR"] = tempfile.mkdtemp(prefix="cudaopt-bench-cache-")

    from harness_tools import EvaluationConfig, bundled_task_names, create_backend, evaluate, resolve_task
    from harness_tools.task import candidate as candidates
    from harness_tools.task.spec import Case

    start = time.perf_counter()
    backend = create_backend("cpu")
    info = backend.device_info()
    print(f"# cpu backend on {info.name}; runtime {info.driver_version}")
    print(f"worker start incl. runtime build: {(time.perf_counter() - start) * 1e3:.0f} ms\n")

    print("## Build and load per kernel (ms): NVRTC check, g++ build (first), load (cached, second evaluation)")
    print(f"{'kernel':<34}{'nvrtc':>8}{'g++':>9}{'cached load':>13}")
    kernels = [(name, "baseline", candidates.baseline(resolve_task(name))) for name in bundled_task_names()]
    sgemm, reduce = resolve_task("sgemm"), resolve_task("reduce_sum")
    tiled = candidates.tuned(sgemm, {"BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4, "MINB": 2, "WIDE_MIN": -1})
    shuffle = candidates.tuned(reduce, {"BLOCK": 256, "ITEMS": 2, "GRID_THREADS": 65536, "CS": 0})
    kernels += [("sgemm", "tiled BM=BN=64,BK=8,TM=TN=4", tiled), ("reduce_sum", "shuffle BLOCK=256,ITEMS=2", shuffle)]
    quick = EvaluationConfig(roles=["validation"])
    for name, label, cand in kernels:
        task = resolve_task(name)
        first = evaluate(task, cand, backend, quick)
        second = evaluate(task, cand, backend, quick)
        load = second.overhead.load_ms / max(1, len(second.cases))
        ok = "" if first.correct and second.correct else f"  NOT CORRECT: {first.failure or second.failure}"
        print(f"{name + ' ' + label:<34}{first.compile.compile_ms:>8.0f}{first.cases[0].run.load_ms:>9.0f}"
              f"{load:>13.2f}{ok}")

    print(f"\n## Run time of one launch (CPU wall clock, median of {args.reps})")
    big_tiles = candidates.tuned(sgemm, {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "MINB": 1, "WIDE_MIN": -1})
    runs = [
        (sgemm, tiled, "tiled 64x64, BK=8, TM=TN=4", Case(name="sgemm_512", role="performance",
                                                          sizes={"M": 512, "N": 512, "K": 512}), 2.0),
        (sgemm, big_tiles, "tiled 128x128, BK=16, TM=TN=8", Case(name="sgemm_512", role="performance",
                                                              sizes={"M": 512, "N": 512, "K": 512}), 2.0),
        (reduce, shuffle, "shuffles + shared + atomicAdd", Case(name="reduce_1M", role="performance",
                                                                 sizes={"n": 1 << 20}), 0.2),
        (reduce, candidates.baseline(reduce), "baseline: shared tree + atomicAdd",
         Case(name="reduce_1M_baseline", role="performance", sizes={"n": 1 << 20}), 0.2),
    ]
    print(f"{'case':<22}{'kernel':<34}{'median_s':>10}{'goal_s':>8}")
    for task, cand, label, case, goal in runs:
        spec = task.spec.model_copy(update={"cases": [case]})
        one = task.model_copy(update={"spec": spec})
        result = evaluate(one, cand, backend, EvaluationConfig(timing={"warmup": 1, "reps": args.reps}))
        status = f"{result.cases[0].median_ms / 1e3:>10.3f}" if result.correct else f"  FAILED: {result.failure}"
        print(f"{case.name:<22}{label:<34}{status}{goal:>8.1f}")
    backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
