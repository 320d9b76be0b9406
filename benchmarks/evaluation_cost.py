"""Where the time of one evaluation goes, per engine stage (issue 5: time per tuned configuration).

    python -m benchmarks.evaluation_cost [--reps 30] [--warmup 3]      # on a GPU host

Direct ``evaluate()`` calls on the cuda backend, one seed: three sgemm configurations of the tunable kernel
and each other task's baseline twice. The first evaluation of a seed also draws the inputs and computes the
float64 oracle; later ones reuse both (inputs stay on the GPU). One row per evaluation, stages in ms.
"""

from __future__ import annotations

import argparse
import sys
import time

from harness_tools import EvaluationConfig, TimingPlan, create_backend, evaluate, resolve_task
from harness_tools.task import candidate as candidates

SGEMM = [{"BM": 64, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "MINB": 2, "WIDE_MIN": -1},
         {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "MINB": 1, "WIDE_MIN": 128},
         {"BM": 64, "BN": 64, "BK": 8, "TM": 4, "TN": 4, "MINB": 1, "WIDE_MIN": -1}]
STAGES = ("compile", "inputs", "reference", "load", "transfer", "validate", "time", "compare")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    backend = create_backend("cuda")
    config = EvaluationConfig(seed=args.seed, timing=TimingPlan(warmup=args.warmup, reps=args.reps))
    print(f"{'task':<13}{'#':>2}{'correct':>8}{'wall':>7}" + "".join(f"{s:>10}" for s in STAGES) + f"{'other':>8}")
    try:
        for name in ("sgemm", "transpose", "reduce_sum", "softmax_rows"):
            task = resolve_task(name)
            cands = [candidates.tuned(task, c) for c in SGEMM] if name == "sgemm" else [candidates.baseline(task)] * 2
            for i, cand in enumerate(cands):
                started = time.perf_counter()
                result = evaluate(task, cand, backend, config)
                wall = (time.perf_counter() - started) * 1e3
                o = result.overhead
                stages = [getattr(o, f"{s}_ms") for s in STAGES]
                print(f"{name:<13}{i:>2}{str(result.correct):>8}{wall:>7.0f}" + "".join(f"{v:>10.0f}" for v in stages)
                      + f"{o.total_ms - sum(stages):>8.0f}", flush=True)
    finally:
        backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
