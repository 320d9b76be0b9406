"""What the cpu backend's spare worker saves in the README's main command, with it and without, side by side.

    python -m benchmarks.cpu_spare_worker [--task sgemm] [--iterations 7] [--rounds 2]

Runs ``cudaopt optimize TASK --backend cpu --seed S`` (the tuner, its confirmation included; no report page) in a
fresh process, once as shipped and once with the spare worker's start disabled in that process
(:mod:`harness_tools.backends.cpu.spare_worker`), the two ways alternately, each in its own results folder. The
kernel cache is shared and warmed by a first, uncounted run, so g++ is out of the figures. Printed per way: the
command's wall time in each round and their median, and the cpu workers it started (the spare's included).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NO_SPARE = "from harness_tools.backends.cpu import spare_worker; spare_worker.SpareWorker.start = lambda self: None; "
CLI = "from cudaopt_mcp.cli.main import console; console()"


def run(task: str, iterations: int, seed: int, spare: bool, results: Path, patch: str = "") -> tuple[float, int]:
    """(wall seconds, cpu workers started) of one command; ``patch``: Python run before it (a way to compare)."""
    code = patch + (CLI if spare else NO_SPARE + CLI)
    cmd = [sys.executable, "-c", code, "-vv", "optimize", task, "--backend", "cpu", "--proposer", "tuner",
           "--max-iterations", str(iterations), "--seed", str(seed), "--results", str(results), "--no-report"]
    env = {**os.environ, "OPENAI_API_KEY": ""}
    begun = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    wall = time.perf_counter() - begun
    results.mkdir(parents=True, exist_ok=True)
    (results / "stderr.txt").write_text(out.stderr)  # the -vv log: which workers started when
    if out.returncode not in (0, 1):
        raise SystemExit(f"optimize failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return wall, sum("ready in" in line and "worker pid" in line for line in out.stderr.splitlines())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="sgemm")
    parser.add_argument("--iterations", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=20261206)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="cudaopt-spare-bench-"))
    run(args.task, args.iterations, args.seed, True, folder / "warm")  # builds every kernel the runs will load
    rows: dict[str, list[tuple[float, int]]] = {"with the spare": [], "without": []}
    for r in range(args.rounds):
        for way in (["with the spare", "without"] if r % 2 == 0 else ["without", "with the spare"]):
            rows[way].append(run(args.task, args.iterations, args.seed, way == "with the spare", folder / f"{way}-{r}"))
    print(f"cudaopt optimize {args.task} --backend cpu --max-iterations {args.iterations} (kernel cache warm)\n")
    print("| way | wall, s (each round) | median | cpu workers started |\n|---|---|---:|---|")
    for way, results in rows.items():
        walls = " / ".join(f"{w:.2f}" for w, _ in results)
        print(f"| {way} | {walls} | {statistics.median(w for w, _ in results):.2f} | "
              f"{' / '.join(str(n) for _, n in results)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
