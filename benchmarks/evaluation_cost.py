"""Where the time of one evaluation goes, per engine stage (issue 5: time per tuned configuration).

    python -m benchmarks.evaluation_cost [--reps 30] [--warmup 3] [--tasks sgemm examples/log_softmax]
                                         [--verify auto host] [--repeat 2]      # on a GPU host

Direct ``evaluate()`` calls on the cuda backend, one seed: three sgemm configurations of the tunable kernel
and each other task's baseline ``--repeat`` times, once per ``--verify`` mode (where outputs are compared: on the
device, or downloaded and compared on the host), side by side in one process. The first evaluation of a seed
also draws the inputs and computes the float64 oracle; later ones reuse both (inputs stay on the GPU). One row
per evaluation, stages in ms; "overhead" is everything but the compile and the timed launches.
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
    parser.add_argument("--tasks", nargs="+", default=["sgemm", "transpose", "reduce_sum", "softmax_rows"],
                        help="bundled task names or task folders")
    parser.add_argument("--verify", nargs="+", choices=["auto", "device", "host"], default=["auto"])
    parser.add_argument("--repeat", type=int, default=2, help="evaluations of each baseline per verify mode")
    args = parser.parse_args()
    backend = create_backend("cuda")
    print(f"{'task':<18}{'verify':>7}{'#':>3}{'correct':>8}{'wall':>7}" + "".join(f"{s:>10}" for s in STAGES)
          + f"{'other':>8}{'overhead':>9}")
    try:
        for name in args.tasks:
            task = resolve_task(name)
            for verify in args.verify:
                config = EvaluationConfig(seed=args.seed, timing=TimingPlan(warmup=args.warmup, reps=args.reps),
                                          verify=verify, timeout_s=600)
                cands = ([candidates.tuned(task, c) for c in SGEMM] if task.name == "sgemm"
                         else [candidates.baseline(task)] * args.repeat)
                for i, cand in enumerate(cands):
                    _row(task.name, verify, i, evaluate, task, cand, backend, config)
    finally:
        backend.close()
    return 0


def _row(name: str, verify: str, index: int, run, *call) -> None:
    started = time.perf_counter()
    result = run(*call)
    wall = (time.perf_counter() - started) * 1e3
    o = result.overhead
    stages = [getattr(o, f"{s}_ms") for s in STAGES]
    print(f"{name:<18}{verify:>7}{index:>3}{str(result.correct):>8}{wall:>7.0f}"
          + "".join(f"{v:>10.0f}" for v in stages) + f"{o.total_ms - sum(stages):>8.0f}"
          + f"{wall - o.compile_ms - o.time_ms:>9.0f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
