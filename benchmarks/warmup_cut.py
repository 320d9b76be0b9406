"""Does cutting a slow kernel's warm-up under the search's budget change what is measured? A table, side by side.

    python -m benchmarks.warmup_cut [--tasks examples/matmul examples/convolution examples/reduction] [--configs 3] [--rounds 4]
                                    [--backend cuda] [--budget-ms 50] [--seed S]

For each task: its baseline and ``--configs`` random valid configurations. Each is evaluated (performance cases
only, checked against the oracle as always) with the plan's 10 warm-up launches and with the warm-up the budget
leaves (``harness_tools.run.timing.budgeted_warmup``), ``--rounds`` times, the two ways alternately and the order
reversed every round, after a pause that lets the clocks fall back (the worst case for a short warm-up). Both
ways time the same launches (``MIN_BUDGET_REPS``, what a slow kernel gets under the budget). Printed per
candidate: the median of each way's medians, their ratio (cut / full; 1.0 is what an honest cut gives), the
warm-up launches made and each way's seconds per evaluation.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

from harness_tools import EvaluationConfig, TimingPlan, baseline, create_backend, evaluate, resolve_task
from harness_tools.run.timing import MIN_BUDGET_REPS
from harness_tools.task.candidate import tuned
from harness_tools.task.tunable_space import TunableSpace

FULL_WARMUP = 10
PAUSE_S = 0.5  # idle before each evaluation: GPU clocks drop when idle, so the warm-up has work to do


def candidates(task, configs: int, rng: random.Random) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = [("baseline", baseline(task))]
    tun = task.spec.tunables
    if tun is not None:
        space = TunableSpace(tun.params, tun.constraints)
        valid = space.valid() or []
        for point in rng.sample(valid, min(configs, len(valid))):
            config = space.as_dict(point)
            out.append((",".join(f"{k}={v}" for k, v in config.items()), tuned(task, config)))
    return out


def timed(task, cand, backend, plan: TimingPlan, seed: int) -> tuple[float | None, int | None, float]:
    """(score in ms, warm-up launches made on the first performance case, seconds taken)."""
    time.sleep(PAUSE_S)
    started = time.perf_counter()
    result = evaluate(task, cand, backend, EvaluationConfig(seed=seed, roles=["performance"], timing=plan))
    took = time.perf_counter() - started
    warm = next((c.timing.warmup for c in result.cases if c.timing is not None), None)
    return (result.score_ms if result.correct else None), warm, took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["examples/matmul", "examples/convolution", "examples/reduction"])
    parser.add_argument("--configs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--budget-ms", type=float, default=50.0)
    parser.add_argument("--seed", type=int, default=20261206)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    full = TimingPlan(warmup=FULL_WARMUP, reps=MIN_BUDGET_REPS)
    cut = full.model_copy(update={"budget_ms": args.budget_ms})
    backend = create_backend(args.backend)
    print("| task | candidate | full warm-up, ms | cut warm-up, ms | cut / full | warm-up made | s per evaluation "
          "full / cut |\n|---|---|---:|---:|---:|---:|---:|", flush=True)
    try:
        for name in args.tasks:
            task = resolve_task(name)
            for label, cand in candidates(task, args.configs, rng):
                runs: dict[str, list[tuple[float | None, int | None, float]]] = {"full": [], "cut": []}
                for r in range(args.rounds):
                    for way in ("full", "cut") if r % 2 == 0 else ("cut", "full"):
                        runs[way].append(timed(task, cand, backend, full if way == "full" else cut, args.seed))
                print(row(name, label, runs), flush=True)
    finally:
        backend.close()
    return 0


def row(task: str, label: str, runs: dict[str, list[tuple[float | None, int | None, float]]]) -> str:
    scores = {way: [s for s, _, _ in rs if s is not None] for way, rs in runs.items()}
    if not scores["full"] or not scores["cut"]:
        return f"| {task} | {label} | failed | | | | |"
    med = {way: statistics.median(v) for way, v in scores.items()}
    made = sorted({w for _, w, _ in runs["cut"] if w is not None})
    secs = {way: statistics.median(t for _, _, t in rs) for way, rs in runs.items()}
    return (f"| {task} | {label} | {med['full']:.4g} | {med['cut']:.4g} | {med['cut'] / med['full']:.3f} | "
            f"{'/'.join(map(str, made))} | {secs['full']:.3f} / {secs['cut']:.3f} |")


if __name__ == "__main__":
    sys.exit(main())
