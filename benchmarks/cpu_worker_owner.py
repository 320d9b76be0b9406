"""The cpu backend's workers: one per candidate (its per-case libraries share it) against one per library, side by side.

    python -m benchmarks.cpu_worker_owner [--tasks examples/stencil examples/matmul] [--iterations 4] [--rounds 2]

A task with per-case ``size_defines`` builds a kernel library per case, and a worker per library meant a fresh
jailed interpreter (about 0.25 s on a 2-core host) for every case of every evaluation: stencil's seven cases seven
starts. Runs ``cudaopt optimize TASK --backend cpu --seed S`` (the tuner, its confirmation included; no report page)
in a fresh process, as shipped and with the request's owner dropped (every library its own worker, as before),
alternately, each in its own results folder. The kernel cache is warmed by a first, uncounted run, so g++ is out of
the figures. Printed per task and way: the command's wall time in each round, their median, and the cpu workers
it started.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.cpu_spare_worker import run

# the engine's call with its last argument (the owner) left out: each library then keys its own worker
PER_LIBRARY = ("import harness_tools.evaluation.case_runner as e; _request = e.case_request; "
               "e.case_request = lambda *a: _request(*a[:8]); ")
WAYS = {"a worker per candidate": "", "a worker per library (before)": PER_LIBRARY}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["examples/stencil", "examples/matmul"])
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=20261206)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="cudaopt-owner-bench-"))
    print(f"cudaopt optimize TASK --backend cpu --max-iterations {args.iterations} (kernel cache warm)\n")
    print("| task | way | wall, s (each round) | median | cpu workers started |\n|---|---|---|---:|---|")
    for task in args.tasks:
        tag = Path(task).name
        run(task, args.iterations, args.seed, True, folder / f"{tag}-warm")  # builds every kernel the runs load
        rows: dict[str, list[tuple[float, int]]] = {way: [] for way in WAYS}
        for r in range(args.rounds):
            for way in (list(WAYS) if r % 2 == 0 else list(reversed(WAYS))):
                rows[way].append(run(task, args.iterations, args.seed, True, folder / f"{tag}-{len(way)}-{r}",
                                     WAYS[way]))
        for way, results in rows.items():
            walls = " / ".join(f"{w:.2f}" for w, _ in results)
            print(f"| {task} | {way} | {walls} | {statistics.median(w for w, _ in results):.2f} | "
                  f"{' / '.join(str(n) for _, n in results)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
