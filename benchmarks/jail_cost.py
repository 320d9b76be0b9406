"""What the jail costs: the same evaluations with the jail on and off, side by side in one run.

    python -m benchmarks.jail_cost [--backend cuda] [--rounds 3] [--evals 3]

Each round starts one fresh process per mode (``CUDAOPT_JAIL=auto`` and ``off``, in alternating order, so
drift on a noisy machine hits both), each with an empty kernel cache of its own: it starts a backend (the worker
and, on first compile, the NVRTC child) and evaluates each bundled task's baseline and tuned kernel ``--evals``
times on one seed (the first evaluation also draws inputs and the oracle). Reported per mode: backend start-up,
the first evaluation of each task, and the median of the later ones (the steady state of a tuning run); the ratio
on/off is the jail's cost. On cpu the g++ builds are jailed too (first evaluations build; later ones find the cache).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TUNED = {"sgemm": {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "MINB": 1, "WIDE_MIN": 128},
         "reduce_sum": None, "softmax_rows": None, "transpose": None}


def child(backend_name: str, evals: int, reps: int) -> dict:
    from harness_tools import EvaluationConfig, TimingPlan, create_backend, evaluate, resolve_task
    from harness_tools.run import jail
    from harness_tools.task import candidate as candidates

    out: dict = {"jail": jail.status().active}
    started = time.perf_counter()
    backend = create_backend(backend_name)
    out["start_ms"] = (time.perf_counter() - started) * 1e3
    config = EvaluationConfig(seed=7, timing=TimingPlan(warmup=3, reps=reps), roles=["validation", "performance"])
    try:
        for name, point in TUNED.items():
            task = resolve_task(name)
            kernels = [("baseline", candidates.baseline(task))]
            if task.spec.tunables:
                space = point or next(iter(_first_point(task)))
                kernels.append(("tuned", candidates.tuned(task, space)))
            for label, cand in kernels:
                walls = []
                for _ in range(evals):
                    t0 = time.perf_counter()
                    result = evaluate(task, cand, backend, config)
                    walls.append((time.perf_counter() - t0) * 1e3)
                    if not result.correct:
                        raise SystemExit(f"{name} {label}: not correct: {result.failure}")
                out[f"{name}/{label}"] = walls
    finally:
        backend.close()
    return out


def _first_point(task):
    from harness_tools.task.tunable_space import TunableSpace  # the tuner's own enumeration

    space = TunableSpace(task.spec.tunables.params, task.spec.tunables.constraints)
    yield space.as_dict(space.valid()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--evals", type=int, default=3)
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.backend, args.evals, args.reps)))
        return 0
    runs: dict[str, list[dict]] = {"auto": [], "off": []}
    for r in range(args.rounds):
        for mode in (("auto", "off") if r % 2 == 0 else ("off", "auto")):
            cmd = [sys.executable, "-m", "benchmarks.jail_cost", "--child", "--backend", args.backend,
                   "--evals", str(args.evals), "--reps", str(args.reps)]
            with tempfile.TemporaryDirectory(prefix="jail-cost-cache-") as cache:  # every run builds its own kernels
                env = dict(os.environ, CUDAOPT_JAIL=mode, CUDAOPT_CACHE_DIR=cache)
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, cwd=ROOT)
            if out.returncode != 0:
                print(out.stderr[-3000:], file=sys.stderr)
                return 1
            runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"round {r + 1} {mode}: done", file=sys.stderr, flush=True)
    assert all(x["jail"] for x in runs["auto"]), "the jail was not active in the 'auto' runs"
    keys = [k for k in runs["auto"][0] if "/" in k]
    print(f"jail cost, backend {args.backend}, {args.rounds} rounds x {args.evals} evaluations, medians in ms")
    print(f"{'':<22}{'first on':>10}{'first off':>10}{'ratio':>7}{'later on':>10}{'later off':>10}{'ratio':>7}")
    start_on = statistics.median(x["start_ms"] for x in runs["auto"])
    start_off = statistics.median(x["start_ms"] for x in runs["off"])
    print(f"{'backend start':<22}{start_on:>10.0f}{start_off:>10.0f}{start_on / start_off:>7.3f}")
    later_ratios = []
    for key in keys:
        first = [statistics.median(x[key][0] for x in runs[m]) for m in ("auto", "off")]
        later = [statistics.median(v for x in runs[m] for v in x[key][1:]) for m in ("auto", "off")] if args.evals > 1 \
            else [float("nan")] * 2
        later_ratios.append(later[0] / later[1])
        print(f"{key:<22}{first[0]:>10.0f}{first[1]:>10.0f}{first[0] / first[1]:>7.3f}"
              f"{later[0]:>10.0f}{later[1]:>10.0f}{later[0] / later[1]:>7.3f}")
    print(f"geometric mean of the later-evaluation ratios: {statistics.geometric_mean(later_ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
