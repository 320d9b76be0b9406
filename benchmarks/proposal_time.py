"""How long the tuner takes to choose, as a run grows: every proposal of a replay on a measured table, timed.

    python -m benchmarks.proposal_time benchmarks/tables/table_convolution.json.gz [--budget 300] [--seeds 2]
                                       [--at 50 100 200 300]

The loop chooses the next candidates while the current one is evaluated, so a proposal longer than an evaluation
is what a configuration then costs. Printed per seed: the proposal's milliseconds when that many points were
scored, all proposals' seconds, and the best score found (the same code's choices, for a check that a faster model
still chooses the same).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from benchmarks import tuner_replay


def timed_replay(task_name: str, table: dict, budget: int, seed: int) -> tuple[list[float], float]:
    """(seconds of each proposal, the best score found)."""
    seconds: list[float] = []
    scores = tuner_replay.replay_tpe(task_name, table, budget, seed, seconds)
    return seconds, min((s for s in scores if math.isfinite(s)), default=float("nan"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", type=Path)
    parser.add_argument("--budget", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--at", type=int, nargs="+", default=[50, 100, 200, 300])
    args = parser.parse_args()
    task, points = tuner_replay.read_table(args.table)
    table = tuner_replay.measured_table(points)
    at = [n for n in args.at if n <= args.budget]
    print(f"{task}: {len(table)} configurations, budget {args.budget}")
    print("| seed | " + " | ".join(f"ms at {n}" for n in at) + " | all proposals, s | best found, ms |")
    print("|---:|" + "---:|" * (len(at) + 2))
    for seed in range(args.seeds):
        seconds, best = timed_replay(task, table, args.budget, seed)
        cells = [f"{seconds[n - 1] * 1e3:.0f}" if n <= len(seconds) else "-" for n in at]
        print(f"| {seed} | " + " | ".join(cells) + f" | {sum(seconds):.1f} | {best:.4g} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
