"""Evaluations needed to come within 3 % of the exhaustive best, replayed offline from measured tables.

    python -m benchmarks.tuner_replay DIR [--budget 60] [--seeds 20] [--kernel-tuner]

DIR holds what ``tuner_bench.py`` wrote on the GPU: ``tuner_<task>.json`` (every valid configuration
measured by our exhaustive run) and, for sgemm, Kernel Tuner's cache files ``kt_sgemm_<MxNxK>.json``
(its brute force over the same space). The search strategies only ever see scores, so replaying them
against the measured table is exactly what they would have done on the GPU, minus the waiting:

- our tuner (the real ``TunerProposer``, Optuna TPE), seeds 0..N-1, objective = our score (geomean of
  the performance medians) and, for sgemm, each shape's median alone (to compare with Kernel Tuner);
- uniform random search without replacement, the floor any model-based strategy should beat;
- Kernel Tuner's own strategies in its simulation mode on its cache (``--kernel-tuner``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

from cudaopt_mcp.client.proposal import Attempt, NoProposal, ProposalContext, ProposerSettings
from cudaopt_mcp.client.proposers import create_proposer
from cudaopt_mcp.service.views import task_summary
from harness_tools import resolve_task

Key = tuple[tuple[str, int], ...]


def measured_table(summary: dict, case: str | None = None) -> dict[Key, float]:
    """configuration → score (or one case's median) of every correct configuration."""
    table = {}
    for a in summary["attempts"]:
        tunables = (a.get("proposal") or {}).get("tunables")
        if not tunables or not a.get("correct"):
            continue
        value = a.get("score_ms") if case is None else a.get("case_medians_ms", {}).get(case)
        if value is not None:
            table[tuple(sorted(tunables.items()))] = value
    return table


def evaluations_to_target(scores: list[float], target: float) -> int | None:
    best = float("inf")
    for i, s in enumerate(scores, 1):
        best = min(best, s)
        if best <= target:
            return i
    return None


def replay_tpe(task_name: str, table: dict[Key, float], budget: int, seed: int) -> list[float]:
    task = task_summary(resolve_task(task_name), "run-001")
    proposer = create_proposer("tuner", ProposerSettings(seed=seed))
    attempts: list[Attempt] = []
    scores: list[float] = []
    for iteration in range(1, budget + 1):
        context = ProposalContext(run_id="run-001", backend="cuda", task=task, iteration=iteration,
                                  max_iterations=budget, attempts=attempts)
        proposal = proposer.propose(context)
        if isinstance(proposal, NoProposal):
            break
        score = table.get(tuple(sorted(proposal.tunables.items())))
        attempt = Attempt(iteration=iteration, proposal=proposal, candidate_id=f"c{iteration:04d}",
                          status="correct" if score is not None else "incorrect", correct=score is not None,
                          score_ms=score)
        attempts.append(attempt)
        proposer.observe(attempt)
        scores.append(score if score is not None else float("inf"))
    return scores


def summarise(label: str, counts: list[int | None], budget: int) -> str:
    """Runs that never got there count as budget + 1, so the median is honest (shown as '>budget')."""
    hit = [c for c in counts if c is not None]
    median = statistics.median([c if c is not None else budget + 1 for c in counts])
    shown = f">{budget}" if median > budget else f"{median:g}"
    return (f"{label:<44} within 3 % in {len(hit)}/{len(counts)} runs; evaluations needed: median {shown}, "
            f"min {min(hit) if hit else '-'} (budget {budget})")


def our_strategies(task: str, table: dict[Key, float], budget: int, seeds: int, label: str) -> None:
    target = 1.03 * min(table.values())
    tpe = [evaluations_to_target(replay_tpe(task, table, budget, s), target) for s in range(seeds)]
    rng = random.Random(0)
    keys = list(table)
    rand = [evaluations_to_target([table[k] for k in rng.sample(keys, min(budget, len(keys)))], target)
            for _ in range(200)]
    print(f"\n{task} {label}: {len(table)} correct configurations, best {min(table.values()):.4g} ms")
    print(summarise("  cudaopt tuner (Optuna TPE)", tpe, budget))
    print(summarise("  uniform random search, 200 draws", rand, budget))


def kernel_tuner_strategies(folder: Path, budget: int, seeds: int) -> None:
    from kernel_tuner import tune_kernel
    from tuner_bench import kernel_tuner_problem

    for cache in sorted(folder.glob("kt_sgemm_*.json")):
        shape = cache.stem.removeprefix("kt_sgemm_")
        m, n, k = (int(x) for x in shape.split("x"))
        data = json.loads(cache.read_text())
        times = [v["time"] for v in data["cache"].values() if isinstance(v.get("time"), float)]
        target = 1.03 * min(times)
        print(f"\nKernel Tuner cache {shape}: {len(times)} configurations, best {min(times):.4g} ms")
        for strategy in ("random_sample", "genetic_algorithm", "simulated_annealing", "bayes_opt"):
            counts = []
            for seed in range(seeds):
                problem = kernel_tuner_problem({"M": m, "N": n, "K": k}, seed=20261129, verify=False)
                try:
                    results, _ = tune_kernel(**problem, cache=str(cache), simulation_mode=True, strategy=strategy,
                                             strategy_options={"max_fevals": budget}, quiet=True, seed=seed)
                except Exception as exc:  # noqa: BLE001 - a strategy missing its extra is reported, not fatal
                    print(f"  {strategy}: not run ({type(exc).__name__}: {exc})")
                    break
                scores = [r["time"] if isinstance(r.get("time"), float) else float("inf") for r in results]
                counts.append(evaluations_to_target(scores, target))
            else:
                print(summarise(f"  Kernel Tuner {strategy}", counts, budget))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--kernel-tuner", action="store_true")
    args = parser.parse_args()
    for path in sorted(args.folder.glob("tuner_*.json")):
        summary = json.loads(path.read_text())
        task = summary["task"]
        our_strategies(task, measured_table(summary), args.budget, args.seeds, "score (geomean of performance medians)")
        if task == "sgemm":
            for case in resolve_task("sgemm").spec.cases_for(["performance"], "cuda"):
                table = measured_table(summary, case.name)
                if table:  # per-case medians are in summaries written since they were recorded per attempt
                    our_strategies(task, table, args.budget, args.seeds, f"case {case.name}")
    if args.kernel_tuner:
        kernel_tuner_strategies(args.folder, args.budget, args.seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
