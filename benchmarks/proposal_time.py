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
import sys
import time
from pathlib import Path

from benchmarks import tuner_replay
from cudaopt_mcp.client.proposal import Attempt, NoProposal, ProposalContext, ProposerSettings
from cudaopt_mcp.client.proposers import create_proposer
from cudaopt_mcp.service.views import task_summary
from harness_tools import resolve_task


def timed_replay(task_name: str, table: dict, budget: int, seed: int) -> tuple[list[float], float]:
    """(seconds of each proposal, the best score found)."""
    task = task_summary(resolve_task(task_name), "run-001")
    proposer = create_proposer("tuner", ProposerSettings(seed=seed))
    attempts: list[Attempt] = []
    seconds: list[float] = []
    for iteration in range(1, budget + 1):
        context = ProposalContext(run_id="run-001", backend="cuda", task=task, iteration=iteration,
                                  max_iterations=budget, attempts=attempts)
        started = time.perf_counter()
        proposal = proposer.propose(context)
        seconds.append(time.perf_counter() - started)
        if isinstance(proposal, NoProposal):
            break
        score = table.get(tuner_replay.key_of(proposal.tunables))
        attempt = Attempt(iteration=iteration, proposal=proposal, candidate_id=f"c{iteration:04d}",
                          status="correct" if score is not None else "incorrect", correct=score is not None,
                          score_ms=score)
        attempts.append(attempt)
        proposer.observe(attempt)
    scored = [a.score_ms for a in attempts if a.score_ms is not None]
    return seconds, min(scored) if scored else float("nan")


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
