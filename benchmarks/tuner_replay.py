"""Evaluations needed to come within 3 % of the exhaustive best, replayed offline from measured tables.

    python -m benchmarks.tuner_replay PATH... [--budget 60] [--seeds 20] [--kernel-tuner] [--strategies a,b]
                                      [--out FILE.json]

A PATH is a table file or a folder of them, plain or gzipped (``.json.gz``, as the tables kept in
``benchmarks/tables`` are). Three kinds are read, each into the same list of measured points:

- ``table_*.json`` from ``record_table.py`` (every valid configuration, measured in-process);
- ``tuner_<task>.json`` from ``tuner_bench.py`` (our tuner's exhaustive run through the CLI);
- ``kt_sgemm_<MxNxK>.json``, Kernel Tuner's own cache from its brute force in ``tuner_bench.py``.

The search strategies only ever see scores, so replaying them against a measured table is exactly what they
would have done on the GPU, minus the waiting. On each table, with the same objective for all:

- our tuner (the real ``TunerProposer``), seeds 0..N-1;
- uniform random search without replacement (200 draws), the floor any model-based strategy should beat;
- with ``--kernel-tuner``, Kernel Tuner's strategies in its simulation mode on the table converted to its cache
  (``kt_cache.py``), seeds 0..N-1, counting the distinct configurations each asked for, in order.

The objective is our score (geomean of the performance medians) and, for sgemm, each shape's median alone.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import kt_cache
from cudaopt_mcp.client.proposal import Attempt, NoProposal, ProposalContext, ProposerSettings
from cudaopt_mcp.client.proposers import create_proposer
from cudaopt_mcp.service.views import task_summary
from harness_tools import resolve_task

Key = tuple[tuple[str, int], ...]
TARGET = 1.03  # within 3 % of the exhaustive best
RANDOM_DRAWS = 200


def key_of(tunables: dict[str, int]) -> Key:
    return tuple(sorted(tunables.items()))


# ---- reading tables -----------------------------------------------------------------------------------------

def points_from_summary(summary: dict) -> list[dict]:
    """tuner_bench's CLI summary: one point per attempt that carried tunables."""
    return [{"tunables": a["proposal"]["tunables"], "correct": bool(a.get("correct")), "failure": a.get("failure"),
             "score_ms": a.get("score_ms"), "case_medians_ms": a.get("case_medians_ms") or {}}
            for a in summary["attempts"] if (a.get("proposal") or {}).get("tunables")]


def points_from_kt_cache(document: dict, task: str) -> list[dict]:
    """Kernel Tuner's cache: its time (ms) is the score; parameters beyond the task's own (block_size_x) dropped."""
    names = list(resolve_task(task).spec.tunables.params)
    points = []
    for entry in document["cache"].values():
        ok = isinstance(entry.get("time"), (int, float))
        points.append({"tunables": {n: entry[n] for n in names}, "correct": ok, "score_ms": entry["time"] if ok else None,
                       "failure": None if ok else str(entry.get("time")), "case_medians_ms": {}})
    return points


def read_table(path: Path) -> tuple[str, list[dict]]:
    """(task, points) of any of the three kinds of file, plain or gzipped."""
    document = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_text())
    if document.get("format", "").startswith("cudaopt-table/"):
        return document.get("task_ref", document["task"]), document["points"]  # a folder's task: its path
    if "attempts" in document:
        return document["task"], points_from_summary(document)
    if "cache" in document and path.name.startswith("kt_sgemm_"):
        return "sgemm", points_from_kt_cache(document, "sgemm")
    raise SystemExit(f"{path}: not a record_table, tuner_bench or Kernel Tuner sgemm file")


def table_files(paths: list[Path]) -> list[Path]:
    found = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for pattern in ("table_*.json", "tuner_*.json", "kt_sgemm_*.json")
                            for suffix in ("", ".gz") for p in path.glob(pattern + suffix))
        else:
            found.append(path)
    return found


def measured_table(points: list[dict], case: str | None = None) -> dict[Key, float]:
    """configuration → score (or one case's median) of every correct configuration."""
    table = {}
    for p in points:
        value = p.get("score_ms") if case is None else p.get("case_medians_ms", {}).get(case)
        if p.get("correct") and value is not None:
            table[key_of(p["tunables"])] = value
    return table


def objectives(task: str, points: list[dict]) -> list[str | None]:
    """None (the score) always; for sgemm also each shape whose median was recorded."""
    cases = sorted({c for p in points for c in p.get("case_medians_ms", {})}) if task == "sgemm" else []
    return [None, *cases]


# ---- strategies ---------------------------------------------------------------------------------------------

def evaluations_to_target(scores: list[float], target: float) -> int | None:
    best = float("inf")
    for i, s in enumerate(scores, 1):
        best = min(best, s)
        if best <= target:
            return i
    return None


def replay_tpe(task_name: str, table: dict[Key, float], budget: int, seed: int,
               seconds: list[float] | None = None) -> list[float]:
    """Each proposal's score (inf: failed); ``seconds``, when given, gets how long each proposal took."""
    task = task_summary(resolve_task(task_name), "run-001")
    proposer = create_proposer("tuner", ProposerSettings(seed=seed))
    attempts: list[Attempt] = []
    scores: list[float] = []
    for iteration in range(1, budget + 1):
        context = ProposalContext(run_id="run-001", backend="cuda", task=task, iteration=iteration,
                                  max_iterations=budget, attempts=attempts)
        started = time.perf_counter()
        proposal = proposer.propose(context)
        if seconds is not None:
            seconds.append(time.perf_counter() - started)
        if isinstance(proposal, NoProposal):
            break
        score = table.get(key_of(proposal.tunables))
        attempt = Attempt(iteration=iteration, proposal=proposal, candidate_id=f"c{iteration:04d}",
                          status="correct" if score is not None else "incorrect", correct=score is not None,
                          score_ms=score)
        attempts.append(attempt)
        proposer.observe(attempt)
        scores.append(score if score is not None else float("inf"))
    return scores


def random_search(points: list[dict], table: dict[Key, float], budget: int, target: float) -> list[int | None]:
    """Uniform draws without replacement from every measured configuration (a failed one scores nothing)."""
    rng = random.Random(0)
    keys = [key_of(p["tunables"]) for p in points]
    return [evaluations_to_target([table.get(k, float("inf")) for k in rng.sample(keys, min(budget, len(keys)))],
                                  target) for _ in range(RANDOM_DRAWS)]


def kernel_tuner_rows(points: list[dict], objective: str | None, table: dict[Key, float], budget: int, seeds: int,
                      strategies: list[str], target: float) -> list[dict]:
    names = list(points[0]["tunables"])
    by_kt_key = {kt_cache.kt_key(names, p["tunables"]): key_of(p["tunables"]) for p in points}
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        cache = kt_cache.write_cache(points, Path(scratch) / "cache.json", objective)
        for strategy in strategies:
            counts: list[int | None] = []
            evaluated: list[int] = []
            try:
                for seed in range(seeds):
                    asked = kt_cache.run_strategy(cache, strategy, budget, seed)
                    counts.append(evaluations_to_target([table.get(by_kt_key[k], float("inf")) for k in asked], target))
                    evaluated.append(len(asked))
            except Exception as exc:  # noqa: BLE001 - a strategy that cannot run here is reported, not fatal
                rows.append({"strategy": f"Kernel Tuner {strategy}", "error": f"{type(exc).__name__}: {exc}"[:160]})
                continue
            rows.append(row(f"Kernel Tuner {strategy}", counts, budget, evaluated))
    return rows


# ---- report -------------------------------------------------------------------------------------------------

def row(label: str, counts: list[int | None], budget: int, evaluated: list[int] | None = None) -> dict:
    """Runs that never got there count as budget + 1, so the median is honest (shown as '>budget').
    ``evaluated``: how many configurations each run asked for in all (a strategy may stop before the budget)."""
    hit = [c for c in counts if c is not None]
    median = statistics.median([c if c is not None else budget + 1 for c in counts])
    return {"strategy": label, "counts": counts, "hits": len(hit), "runs": len(counts),
            "median": median if median <= budget else None, "min": min(hit) if hit else None,
            "evaluated": evaluated, "median_evaluated": statistics.median(evaluated) if evaluated else None}


def print_rows(title: str, rows: list[dict], budget: int) -> None:
    print(f"\n{title}")
    print(f"  {'strategy':<44}{'median evals':>13}{'within budget':>15}{'min':>6}{'evaluated':>11}")
    for r in rows:
        if "error" in r:
            print(f"  {r['strategy']:<44}  not run: {r['error']}")
            continue
        median = f">{budget}" if r["median"] is None else f"{r['median']:g}"
        hits = f"{r['hits']}/{r['runs']}"
        evaluated = f"{r['median_evaluated']:g}" if r.get("median_evaluated") is not None else "-"
        print(f"  {r['strategy']:<44}{median:>13}{hits:>15}{r['min'] or '-':>6}{evaluated:>11}")


def replay(task: str, source: str, points: list[dict], objective: str | None, args) -> dict | None:
    table = measured_table(points, objective)
    if not table:
        return None
    best = min(table.values())
    target = TARGET * best
    budget, seeds = args.budget, args.seeds
    rows = [row("cudaopt tuner",
                [evaluations_to_target(replay_tpe(task, table, budget, s), target) for s in range(seeds)], budget),
            row(f"uniform random search, {RANDOM_DRAWS} draws", random_search(points, table, budget, target), budget)]
    if args.kernel_tuner:
        rows += kernel_tuner_rows(points, objective, table, budget, seeds, args.strategies, target)
    label = "score (geomean of performance medians)" if objective is None else f"case {objective}"
    print_rows(f"{task} ({source}), {label}: {len(table)} correct of {len(points)} configurations, best {best:.4g} ms, "
               f"target {target:.4g} ms, budget {budget}, {seeds} seeds", rows, budget)
    return {"task": task, "source": source, "objective": objective or "score", "configurations": len(points),
            "correct": len(table), "best_ms": best, "target_ms": target, "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", type=Path, nargs="+", help="table files, or folders holding them")
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--kernel-tuner", action="store_true", help="also Kernel Tuner's strategies (simulation mode)")
    parser.add_argument("--strategies", type=lambda s: s.split(","), default=list(kt_cache.STRATEGIES),
                        help="Kernel Tuner strategies, comma-separated (default: all but brute_force)")
    parser.add_argument("--out", type=Path, help="write every row (with each seed's count) here as JSON")
    args = parser.parse_args()
    replays = []
    for path in table_files(args.paths):
        task, points = read_table(path)
        replays += [r for objective in objectives(task, points)
                    if (r := replay(task, path.name, points, objective, args)) is not None]
    if args.out:
        args.out.write_text(json.dumps({"budget": args.budget, "seeds": args.seeds, "target": TARGET,
                                        "kernel_tuner": kt_cache.kernel_tuner_version() if args.kernel_tuner else None,
                                        "replays": replays}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
