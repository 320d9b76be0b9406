"""What stopping a clearly slower candidate's timing early saves, side by side with full timing (issue 17).

    python -m benchmarks.early_stop --task examples/matmul --iterations 16 --rounds 3 [--backend cpu] --out DIR

Per round, the real CLI twice, alternately so that noise hits both (``cudaopt optimize TASK --proposer tuner
--max-iterations N --seed S --no-confirm --no-report``, once with ``--full-timing``), each on its own results folder
and one cubin cache (warmed by a first, unreported run). Printed per run: wall seconds, the configurations'
summed timing stage (``overhead.time_ms`` of every candidate after the baseline), timed launches against planned
ones, the candidates stopped early, and the best found (its tunables and recorded score), so a saving that cost the
search its best would show.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = 20261129


def one_run(task: str, iterations: int, results: Path, cache: Path, backend: str | None, full: bool) -> dict:
    shutil.rmtree(results, ignore_errors=True)
    cmd = [sys.executable, "-m", "cudaopt_mcp.cli", "optimize", task, "--proposer", "tuner", "--max-iterations",
           str(iterations), "--seed", str(SEED), "--results", str(results), "--json", "--no-confirm", "--no-report",
           *(["--backend", backend] if backend else []), *(["--full-timing"] if full else [])]
    env = {**os.environ, "OPENAI_API_KEY": "", "CUDAOPT_CUBIN_CACHE": str(cache)}
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    wall = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"optimize rc {proc.returncode}: {proc.stderr[-1500:]}")
    summary = json.loads(proc.stdout)
    run = results / summary["run_id"]
    time_ms, timed, planned, stopped = 0.0, 0, 0, 0
    for attempt in summary["attempts"][1:]:  # the configurations, not the baseline
        record = _read(run / "candidates" / str(attempt.get("candidate_id")) / "evaluation.json")
        time_ms += (record.get("overhead") or {}).get("time_ms", 0.0)
        timings = [c["timing"] for c in record.get("cases", []) if c.get("timing")]
        timed += sum(t["n"] for t in timings)
        planned += sum(t.get("planned_reps") or t["n"] for t in timings)
        stopped += any(t.get("planned_reps") for t in timings)
    best = summary.get("best") or {}
    return {"wall": wall, "time_ms": time_ms, "timed": timed, "planned": planned, "stopped": stopped,
            "configs": len(summary["attempts"]) - 1, "best": best.get("candidate_id"),
            "best_ms": best.get("score_ms"), "best_tunables": _tunables(summary, best.get("candidate_id"))}


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def _tunables(summary: dict, candidate_id: str | None) -> str:
    for attempt in summary["attempts"]:
        if attempt.get("candidate_id") == candidate_id:
            return ",".join(f"{k}={v}" for k, v in ((attempt.get("proposal") or {}).get("tunables") or {}).items()) \
                or "baseline"
    return "-"


def table(rows: dict[str, list[dict]]) -> str:
    header = "| timing | round | wall s | configs | timing stage s | launches timed / planned | stopped early | best | best ms |"
    lines = [header, "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for label, runs in rows.items():
        for i, r in enumerate(runs, 1):
            best_ms = f"{r['best_ms']:.4g}" if r["best_ms"] else "-"
            lines.append(f"| {label} | {i} | {r['wall']:.2f} | {r['configs']} | {r['time_ms'] / 1e3:.2f} | "
                         f"{r['timed']} / {r['planned']} | {r['stopped']} | {r['best_tunables']} | {best_ms} |")
    for label, runs in rows.items():
        lines.append(f"\n{label}: median wall {statistics.median(r['wall'] for r in runs):.2f} s, median timing stage "
                     f"{statistics.median(r['time_ms'] for r in runs) / 1e3:.2f} s")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="examples/matmul")
    parser.add_argument("--iterations", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", choices=["cuda", "cpu"])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    cache = args.out / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    one_run(args.task, args.iterations, args.out / "warm-up", cache, args.backend, True)  # fills the cubin cache
    rows: dict[str, list[dict]] = {"early stops": [], "full": []}
    for index in range(args.rounds):
        for label, runs in rows.items():
            runs.append(one_run(args.task, args.iterations, args.out / f"{label.split()[0]}-{index}", cache,
                                       args.backend, label == "full"))
    print(table(rows))
    (args.out / "early_stop.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
