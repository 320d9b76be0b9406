"""Nsight Compute against our event timings, and what a profile costs (issue 6).

    python benchmarks/profile_bench.py [--tasks ...] [--out DIR]      # on a GPU host with ncu

For each bundled task's baseline and one tuned configuration: our engine times the first performance
case (CUDA events, L2 flushed, 10 + 100 launches, median) and ``profile`` runs Nsight Compute on a warm
launch of the same case (``--clock-control none``); the table shows ncu's ``gpu__time_duration``
against our median (goal: within ±2 %) and the wall time of the profile. The summaries are written to
DIR as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness_tools import candidate as candidates  # noqa: E402
from harness_tools.backends import create_backend  # noqa: E402
from harness_tools.evaluate import EvaluationConfig, evaluate  # noqa: E402
from harness_tools.profile import profile_candidate  # noqa: E402
from harness_tools.spec import bundled_task_names, resolve_task  # noqa: E402

TUNED = {"sgemm": {"BM": 64, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "MINB": 2},
         "reduce_sum": {"BLOCK": 512, "ITEMS": 4, "GRID_THREADS": 131072, "CS": 1},
         "softmax_rows": {"WARPS": 8, "ITEMS": 4, "CS": 0}, "transpose": {"TR": 64, "TC": 64, "THREADS": 256, "VEC": 4, "CS": 1}}


def one(task_name: str, label: str, cand, backend, out: Path) -> dict:
    task = resolve_task(task_name)
    case = task.spec.cases_for(["performance"], "cuda")[0]
    result = evaluate(task, cand, backend, EvaluationConfig(seed=1, roles=["performance"]))
    ours = next((c.median_ms for c in result.cases if c.name == case.name), None)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        prof = profile_candidate(task, cand, backend.device_info().arch, Path(folder), case_name=case.name, seed=1)
    wall = time.perf_counter() - started
    ncu_ms = prof.summary.duration_us / 1e3 if prof.summary and prof.summary.duration_us else None
    row = {"task": task_name, "candidate": label, "case": case.name, "events_median_ms": ours, "ncu_ms": ncu_ms,
           "ratio": ncu_ms / ours if ncu_ms and ours else None, "profile_wall_s": wall, "status": prof.status,
           "message": prof.message, "bound": prof.summary.bound if prof.summary else None}
    (out / f"profile_{task_name}_{label}.json").write_text(prof.model_dump_json(indent=1))
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=bundled_task_names())
    parser.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="profile-bench-")))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    backend = create_backend("cuda")
    rows = []
    try:
        for name in args.tasks:
            task = resolve_task(name)
            rows.append(one(name, "baseline", candidates.baseline(task), backend, args.out))
            if name in TUNED:
                rows.append(one(name, "tuned", candidates.tuned(task, TUNED[name]), backend, args.out))
    finally:
        backend.close()
    print(f"{'task':<14}{'candidate':<10}{'case':<22}{'events ms':>11}{'ncu ms':>10}{'ncu/events':>12}"
          f"{'profile s':>11}  bound")
    for r in rows:
        ratio = f"{r['ratio'] - 1:+.1%}" if r["ratio"] else r["status"]
        events = f"{r['events_median_ms']:.4f}" if r["events_median_ms"] else "-"
        ncu = f"{r['ncu_ms']:.4f}" if r["ncu_ms"] else "-"
        print(f"{r['task']:<14}{r['candidate']:<10}{r['case']:<22}{events:>11}{ncu:>10}{ratio:>12}"
              f"{r['profile_wall_s']:>11.1f}  {r['bound'] or r['message'][:60]}")
    (args.out / "profile_bench.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
