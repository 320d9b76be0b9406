"""Nsight Compute against our event timings, and what a profile costs (issue 6).

    python -m benchmarks.profile_bench [--tasks ...] [--out DIR]      # on a GPU host with ncu

For each bundled task's baseline and one tuned configuration: our engine times the first performance
case (CUDA events, L2 flushed, 10 + 100 launches, median) and ``profile`` runs Nsight Compute on a warm
launch of the same case (``--clock-control none``); then ncu measures only ``gpu__time_duration`` over
20 warm launches of the same case (median: one launch varies by a microsecond). The table shows both
against our median (goal: within ±2 %) and the wall time of the profile. Last row: an empty kernel, events
(the worker's ``timing_floor_ms``) against ncu: the fixed launch and event overhead inside every event
timing, which ncu's duration leaves out. The summaries are written to DIR as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness_tools import (
    EvaluationConfig,
    TimingPlan,
    bundled_task_names,
    create_backend,
    evaluate,
    profile_candidate,
    resolve_task,
)
from harness_tools.inspect.launcher import find_tool, launcher_command, prepare_request, run_wrapped
from harness_tools.inspect.ncu_csv import parse_raw_csv
from harness_tools.inspect.profile import WARM_LAUNCHES
from harness_tools.task import candidate as candidates

DURATION_LAUNCHES = 20

TUNED = {"sgemm": {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "MINB": 1, "WIDE_MIN": 128},
         "reduce_sum": {"BLOCK": 256, "ITEMS": 4, "GRID_THREADS": 262144, "CS": 1},
         "softmax_rows": {"WARPS": 8, "ITEMS": 4, "CS": 0},
         "transpose": {"TR": 128, "TC": 64, "THREADS": 512, "VEC": 4, "CS": 0}}  # the tuner's bests on the H200


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
    with tempfile.TemporaryDirectory() as folder:
        request = prepare_request(task, cand, case, backend.device_info().arch, 1, Path(folder),
                                  TimingPlan(warmup=WARM_LAUNCHES - 1, reps=DURATION_LAUNCHES))
        durations = ncu_durations(cand.kernel_name, launcher_command(request), Path(folder))
    ncu_median = statistics.median(durations) if durations else None
    row = {"task": task_name, "candidate": label, "case": case.name, "events_median_ms": ours, "ncu_ms": ncu_ms,
           "ratio": ncu_ms / ours if ncu_ms and ours else None, "ncu_median_ms": ncu_median,
           "ncu_durations_ms": durations, "median_ratio": ncu_median / ours if ncu_median and ours else None,
           "profile_wall_s": wall, "status": prof.status,
           "message": prof.message, "bound": prof.summary.bound if prof.summary else None}
    (out / f"profile_{task_name}_{label}.json").write_text(prof.model_dump_json(indent=1))
    return row


def ncu_durations(kernel: str, command: list[str], folder: Path, skip: int = WARM_LAUNCHES,
                  count: int = DURATION_LAUNCHES) -> list[float]:
    """``gpu__time_duration`` (ms) of ``count`` launches of ``kernel`` after ``skip``, as ncu measures them."""
    ncu = find_tool("ncu", "CUDAOPT_NCU")
    report = folder / "durations"
    run_wrapped([ncu, "--target-processes", "all", "--kernel-name", kernel, "--launch-skip", str(skip), "--launch-count",
                 str(count), "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--force-overwrite",
                 "--export", str(report), *command], 300, folder)
    raw = subprocess.run([ncu, "--import", str(report.with_suffix(".ncu-rep")), "--csv", "--page", "raw"],
                         capture_output=True, text=True, timeout=120, check=False).stdout
    return [k["gpu__time_duration.sum"].scaled() * 1e3 for k in parse_raw_csv(raw)]


def floor_row(backend) -> dict:
    """The empty kernel every worker times at start-up, under events and under ncu."""
    events = backend.device_info().timing_floor_ms
    with tempfile.TemporaryDirectory() as folder:
        probe = [sys.executable, "-c", "from harness_tools.backends.cuda.executor import CudaExecutor; CudaExecutor(0).info()"]
        durations = ncu_durations("cudaopt_timing_floor_probe", probe, Path(folder), skip=10)
    ncu = statistics.median(durations) if durations else None
    return {"task": "empty kernel", "candidate": "probe", "case": "1 block", "events_median_ms": events, "ncu_ms": None,
            "ratio": None, "ncu_median_ms": ncu, "median_ratio": ncu / events if ncu and events else None,
            "profile_wall_s": 0.0, "status": "ok", "message": "", "bound": None}


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
        rows.append(floor_row(backend))
    finally:
        backend.close()
    print(f"{'task':<14}{'candidate':<10}{'case':<22}{'events ms':>11}{'ncu ms':>10}{'ncu/events':>12}"
          f"{'ncu median':>12}{'median/events':>15}{'events-ncu us':>15}{'profile s':>11}  bound")
    for r in rows:
        ratio = f"{r['ratio'] - 1:+.1%}" if r["ratio"] else "-"
        median_ratio = f"{r['median_ratio'] - 1:+.1%}" if r["median_ratio"] else "-"
        events = f"{r['events_median_ms']:.4f}" if r["events_median_ms"] else "-"
        ncu = f"{r['ncu_ms']:.4f}" if r["ncu_ms"] else "-"
        median = f"{r['ncu_median_ms']:.4f}" if r["ncu_median_ms"] else "-"
        gap = (f"{(r['events_median_ms'] - r['ncu_median_ms']) * 1e3:.2f}"
               if r["ncu_median_ms"] and r["events_median_ms"] else "-")
        print(f"{r['task']:<14}{r['candidate']:<10}{r['case']:<22}{events:>11}{ncu:>10}{ratio:>12}{median:>12}"
              f"{median_ratio:>15}{gap:>15}{r['profile_wall_s']:>11.1f}  {r['bound'] or r['message'][:60]}")
    (args.out / "profile_bench.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
