"""A cpu task with two timed cases, a new candidate per evaluation: a spare stopped before its jail is spawned,
against the same spare waited for until up (how ``SpareWorker.quiet`` worked before), side by side.

    python -m benchmarks.spare_between_timed_cases [--evaluations 8] [--rounds 2] [--pause 0.6]

The task is examples/vector_add with one validation case and two timed ones, ``perf_a`` then ``perf_b``. After ``perf_a`` the backend starts a spare worker for the next
candidate; ``perf_b`` comes milliseconds later and stops it first (no interpreter may start beside timed launches).
Before, a spare whose jail was not spawned yet could not be stopped and was waited for until up. Each evaluation is
a new candidate (the source differs by a comment: a new worker, as in a search), ``--pause`` seconds apart (the loop
choosing and building the next one). The kernel cache is warmed by an uncounted first pass. Printed per way: each
round's median evaluate time.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from harness_tools import EvaluationConfig, TimingPlan, baseline, create_backend, evaluate, resolve_task
from harness_tools.run.worker import Worker

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "vector_add"
CASES = [{"name": "val", "role": "validation", "sizes": {"n": 1000}},
         {"name": "perf_a", "role": "performance", "sizes": {"n": 1 << 16}},
         {"name": "perf_b", "role": "performance", "sizes": {"n": 1 << 17}}]
SHIPPED = Worker.interrupt


def waited_for_until_up(worker: Worker) -> None:
    """The interrupt before: a start whose process did not exist yet was left to come up."""
    worker._signal_kill()


def evaluations(task, evaluations: int, pause: float, tag: str) -> list[float]:
    backend = create_backend("cpu")
    config = EvaluationConfig(seed=1, timing=TimingPlan(warmup=1, reps=3))
    base = baseline(task)
    seconds = []
    try:
        for i in range(evaluations):
            candidate = base.model_copy(update={"source": f"{base.source}\n// {tag} candidate {i}\n"})
            began = time.perf_counter()
            result = evaluate(task, candidate, backend, config)
            seconds.append(time.perf_counter() - began)
            if not result.correct:
                raise SystemExit(f"the candidate failed: {result.cases}")
            time.sleep(pause)
    finally:
        backend.close()
    return seconds[1:]  # the first takes the backend's own worker, not a spare


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluations", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pause", type=float, default=0.6)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="cudaopt-spare-cases-")) / "vector_add_two_timed"
    shutil.copytree(EXAMPLE, folder)
    spec = json.loads((folder / "task.json").read_text())
    (folder / "task.json").write_text(json.dumps({**spec, "cases": CASES}))
    task = resolve_task(str(folder))
    ways = {"stopped before its jail is spawned (now)": SHIPPED, "waited for until up (before)": waited_for_until_up}
    for tag in ("round", "warm"):  # builds every kernel the rounds load
        evaluations(task, args.evaluations, 0.0, tag)
    rows: dict[str, list[float]] = {way: [] for way in ways}
    for r in range(args.rounds):
        for way in list(ways) if r % 2 == 0 else reversed(list(ways)):
            Worker.interrupt = ways[way]
            try:
                rows[way].append(statistics.median(evaluations(task, args.evaluations, args.pause, "round")))
            finally:
                Worker.interrupt = SHIPPED
    print(f"evaluate of a new candidate, two timed cases, cpu backend ({args.evaluations - 1} per round, "
          f"{args.pause} s apart, kernel cache warm)\n")
    print("| the spare started after perf_a, when perf_b comes | median evaluate, s (each round) |\n|---|---|")
    for way, medians in rows.items():
        print(f"| {way} | {' / '.join(f'{m:.3f}' for m in medians)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
