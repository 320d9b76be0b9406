"""Seconds per configuration: cudaopt's tuner against Kernel Tuner on the five ported examples (GPU host).

    python -m benchmarks.kernel_tuner_examples --budget 12 --out DIR [--examples vector_add matmul ...] [--warm]
    python -m benchmarks.kernel_tuner_examples --budget 12 --out DIR --dry-run     # no GPU: print the translation

Per example (folders in examples/), alternately so that noise hits both sides:

* cudaopt: the real CLI, ``cudaopt optimize examples/X --proposer tuner --max-iterations N`` in a subprocess
  (stdio MCP server, jail, baseline first, the task's validation cases and its cuda performance case for every
  configuration). Seconds per configuration = the subprocess's wall time / configurations proposed (the
  server's start and the baseline's evaluation are in the numerator). Per-stage times come from each
  candidate's stored evaluation.json (``overhead``) and compile.json (``compile_ms``: the loop compiles ahead,
  so the overhead's own compile_ms is mostly 0).
* Kernel Tuner (1.x, ``lang="cupy"``, ``strategy="brute_force"``): restricted (``restrictions=``) to exactly
  the configurations cudaopt's cold run proposed, same source (tuned.cu; Kernel Tuner #defines every tune
  parameter, the names tuned.cu uses), the task's size defines as ``-D`` options, ``-std=c++17`` as our
  engine, the engine's own grid and block (``problem_size`` is a callable returning the grid, divisors
  empty), constant buffers through ``cmem_args``, verification on: ``answer`` is the example's reference.py
  in float64 (run with CuPy as its numpy when it can, else NumPy), checked by a ``verify`` function with the
  task's own atol/rtol (KT's default would add numpy's rtol 1e-5). It runs in a subprocess whose wall time
  (interpreter, imports, CUDA context, drawing inputs, the answer, tune_kernel) is the numerator, as cudaopt's.
  Its per-stage times are its result dicts' compile/verification/benchmark/framework/strategy times.

Cold: empty compile caches (``CUDAOPT_CUBIN_CACHE`` / ``CUPY_CACHE_DIR`` fresh folders); warm: the same
folders again (no Kernel Tuner ``cache=`` file, so every configuration is really compiled-or-loaded, verified
and timed). ``--warm`` runs only the warm phase on the caches already in DIR.

What differs, knowingly: cudaopt also evaluates the baseline, runs 5-7 small validation cases per
configuration and times with 3 + 30 launches (KT: one verification launch on the perf case, 7 timed launches);
the inputs are the same distributions, not the same values; reduction is a two-kernel sequence for cudaopt,
Kernel Tuner tunes and times only the first kernel (sum_floats) and its check is that the partial sums it
wrote add up to the reference total. One-off costs: cudaopt's first evaluation (the baseline) draws the inputs
and computes the reference (its own column leaves the baseline out); Kernel Tuner first runs its first
configuration once untimed (a GPU warm-up: in its wall time, not in its per-result stage times, so that
configuration shows compile_time ~0). cudaopt compiles once per case (size_defines differ per case), KT once.
The worker replaces ``uuid`` in KT 1.5's cupy backend (it parses CuPy's device uuid as 16 bytes and fails).
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

import numpy as np

from benchmarks.installed_bytecode import compile_installed
from benchmarks.kernel_tuner_problem import (
    ROOT,
    answer_and_verify,
    arg_specs,
    draw,
    kt_problem,
    launch_dims,
    load_task,
    perf_sizes,
    seeded_configs,
    signature,
    valid_configs,
)
from benchmarks.kernel_tuner_report import KT_STAGES, OURS_STAGES, tables

EXAMPLES = ["vector_add", "matmul", "convolution", "reduction", "stencil"]
SEED = 20261129


# ---- Kernel Tuner, in a subprocess per phase ---------------------------------------------------------------
def kt_worker(example: str, configs_file: Path, result_file: Path, seed: int, iterations: int) -> int:
    t0 = time.perf_counter()
    import kernel_tuner.backends.cupy as kt_cupy
    from kernel_tuner import __version__ as kt_version
    from kernel_tuner import tune_kernel

    kt_cupy.uuid = UuidShim  # KT 1.5 reads CuPy's device uuid as 16 bytes, which this CuPy does not give

    ta = time.perf_counter()
    task = load_task(example)
    configs = json.loads(configs_file.read_text())
    rng = np.random.default_rng(seed)
    specs = arg_specs(task, perf_sizes(task), configs)
    arrays = {n: draw(s, rng) for n, s in specs.items()}
    t1 = time.perf_counter()
    answer, verify = answer_and_verify(task, arrays)
    t2 = time.perf_counter()
    problem = kt_problem(task, configs, arrays)
    error = None
    try:
        results, env = tune_kernel(**problem, answer=answer, verify=verify, iterations=iterations)
    except Exception as exc:  # noqa: BLE001 - KT stops at a failed verification: record it and go on
        results, env, error = [], {}, repr(exc)[:2000]
    t3 = time.perf_counter()
    rows = [{k: r.get(k) for k in [*problem["tune_params"], "time", *KT_STAGES]} for r in results]
    for r in rows:
        r["time"] = r["time"] if isinstance(r["time"], float) else str(r["time"])  # errors are objects
    result_file.write_text(json.dumps({
        "kernel_tuner": kt_version, "configs": len(results), "error": error, "iterations": iterations,
        "import_s": ta - t0, "draw_s": t1 - ta, "answer_s": t2 - t1, "tune_s": t3 - t2, "worker_s": t3 - t0, "results": rows,
        "env_totals": {k: env.get(k) for k in env if str(k).startswith("total_")}}, indent=1, default=str))
    return 0


class UuidShim:
    @staticmethod
    def UUID(bytes=b""):  # stands in for uuid.UUID in an informational field of KT's env
        return getattr(bytes, "hex", lambda: str(bytes))()


def run_kt(example: str, configs: list[dict], out: Path, phase: str, seed: int, iterations: int) -> dict:
    stem = out / f"kt_{example}_{phase}"
    configs_file = stem.with_suffix(".configs.json")
    configs_file.write_text(json.dumps(configs))
    cache = out / "cache" / f"cupy_{example}"
    env = {**os.environ, "CUPY_CACHE_DIR": str(cache)}
    cmd = [sys.executable, "-m", "benchmarks.kernel_tuner_examples", "--kt-worker", example, "--out", str(out),
           "--configs-file", str(configs_file), "--result-file", str(stem.with_suffix(".json")), "--seed", str(seed),
           "--kt-iterations", str(iterations)]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    wall = time.perf_counter() - started
    if proc.returncode != 0 or not stem.with_suffix(".json").exists():
        return {"error": f"worker rc {proc.returncode}: {proc.stderr[-1500:]}", "wall_s": wall, "configs": 0}
    res = json.loads(stem.with_suffix(".json").read_text())
    res["wall_s"] = wall
    res["s_per_config"] = wall / max(res["configs"], 1)
    res["tune_s_per_config"] = res["tune_s"] / max(res["configs"], 1)
    res["stages_median_ms"] = medians(res["results"], KT_STAGES)
    return res


# ---- cudaopt ------------------------------------------------------------------------------------------------------
def run_cudaopt(example: str, n: int, out: Path, phase: str, seed: int) -> dict:
    results = out / "results" / f"{example}-{phase}"
    cmd = [sys.executable, "-m", "cudaopt_mcp.cli", "optimize", f"examples/{example}", "--proposer", "tuner",
           "--max-iterations", str(n), "--seed", str(seed), "--results", str(results), "--json", "--no-confirm",
           "--no-report"]  # Kernel Tuner writes no report: the page is not part of tuning
    env = {**os.environ, "OPENAI_API_KEY": "", "CUDAOPT_CUBIN_CACHE": str(out / "cache" / f"cubin_{example}")}
    started, started_epoch = time.perf_counter(), time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    wall = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        return {"error": f"optimize rc {proc.returncode}: {proc.stderr[-1500:]}", "wall_s": wall, "configs": 0}
    summary = json.loads(proc.stdout)
    split = wall_split(results / summary["run_id"] / "optimize.jsonl", started_epoch, wall)
    attempts = [a for a in summary["attempts"] if (a.get("proposal") or {}).get("tunables")]
    stages = candidate_stages(results / summary["run_id"], [a["candidate_id"] for a in attempts], phase)
    for a, s in zip(attempts, stages):
        s["client_s"] = a["elapsed_s"]
    base = next((a for a in summary["attempts"] if not (a.get("proposal") or {}).get("tunables")), {})
    res = {"configs": len(attempts), "wall_s": wall, "s_per_config": wall / max(len(attempts), 1),
           "s_per_config_no_baseline": (wall - (base.get("elapsed_s") or 0)) / max(len(attempts), 1),
           "baseline_s": base.get("elapsed_s"), "correct": sum(bool(a["correct"]) for a in attempts),
           "tunables": [a["proposal"]["tunables"] for a in attempts], "best_ms": (summary.get("best") or {}).get("score_ms"),
           "cached_compiles": sum(bool(s.get("cached")) for s in stages), "per_config": stages,
           "stages_median_ms": medians(stages, OURS_STAGES + ["client_s"]), "wall_split_s": split}
    (out / f"cudaopt_{example}_{phase}.json").write_text(json.dumps({**res, "summary": summary}, indent=1))
    return res


def ratio_line(example: str, phase: str, row: dict) -> str:
    ours, theirs = row[f"cudaopt_{phase}"], row[f"kt_{phase}"]
    if not ours.get("configs") or not theirs.get("configs"):
        return f"{example} {phase}: no ratio (a side measured no configuration)"
    a, b = ours["s_per_config"], theirs["s_per_config"]
    return (f"{example} {phase}: cudaopt {a:.3f} s/config ({ours['wall_s']:.2f} s for {ours['configs']}), Kernel Tuner "
            f"{b:.3f} ({theirs['wall_s']:.2f} s for {theirs['configs']}): ratio {a / b:.3f}")


def wall_split(journal: Path, started_epoch: float, wall: float) -> dict:
    """Where the subprocess's wall time went, from the loop's journal (each line's time is when an evaluate call
    returned, elapsed_s its duration): before the baseline's call (start-up), inside evaluate calls (the
    baseline's, the configurations'), between them (proposing, waiting on compiles ahead), after the last."""
    try:
        lines = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return {}
    if not lines:
        return {}
    first_call = lines[0]["time"] - lines[0]["elapsed_s"]
    inside = sum(x["elapsed_s"] for x in lines)
    span = lines[-1]["time"] - first_call
    return {"startup": first_call - started_epoch, "baseline": lines[0]["elapsed_s"],
            "configs": inside - lines[0]["elapsed_s"], "between": span - inside,
            "after": started_epoch + wall - lines[-1]["time"]}


def candidate_stages(run_dir: Path, ids: list[str], phase: str) -> list[dict]:
    """Per candidate: the evaluation's overhead (ms per stage), with the compile's own time and cache hit."""
    rows = []
    for cid in ids:
        folder = run_dir / "candidates" / cid
        ev = read_json(folder / "evaluation.json")
        comp = read_json(folder / "compile.json")
        row = dict(ev.get("overhead") or {})
        row["cached"] = comp.get("cached")  # also true after a compile ahead (the loop's own, same run)
        if phase == "cold":  # the compile's own time (the loop compiles ahead, so the overhead says 0); warm:
            row["compile_ms"] = max(row.get("compile_ms", 0.0), comp.get("compile_ms") or 0.0)  # the overhead's
        rows.append(row)
    return rows


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def medians(rows: list[dict], keys: list[str]) -> dict:
    out = {}
    for k in keys:
        vals = [r[k] for r in rows if isinstance(r.get(k), (int, float))]
        out[k] = statistics.median(vals) if vals else None
    return out


# ---- dry run (no GPU): check the translation of each task --------------------------------------------------------
def dry_run(examples: list[str], budget: int, seed: int) -> int:
    try:
        from kernel_tuner import util as kt_util
        from kernel_tuner.searchspace import Searchspace
    except ImportError:
        kt_util = Searchspace = None
    for ex in examples:
        task = load_task(ex)
        configs = seeded_configs(task, budget, seed)
        problem = kt_problem(task, configs)
        specs = arg_specs(task, perf_sizes(task), configs)
        print(f"\n## {ex}: kernel {problem['kernel_name']}, case {perf_sizes(task)}, {len(valid_configs(task))} valid "
              f"configurations, {len(configs)} chosen; options {problem['compiler_options']}")
        print("  arguments: " + ", ".join(f"{n} {specs[n].get('shape', specs[n].get('scalar'))} {specs[n]['dtype']} "
                                          f"{specs[n]['role']}" for n in signature(task)))
        print(f"  cmem_args: {list(problem['cmem_args'] or [])}; tune_params: "
              + ", ".join(f"{k}[{len(v)}]" for k, v in problem["tune_params"].items()))
        if Searchspace is None:
            print("  (kernel_tuner not importable: searchspace and grid not checked)")
            continue
        space = Searchspace(problem["tune_params"], problem["restrictions"], 1024)
        chosen = {tuple(sorted(c.items())) for c in configs}
        got = {tuple(sorted(zip(problem["tune_params"], c))) for c in space.list}
        bad = 0
        for c in configs:  # KT's grid and block from our problem_size callable, against the engine's
            threads, grid = kt_util.setup_block_and_grid(problem["problem_size"], (problem["grid_div_x"],
                                                         problem["grid_div_y"], None), dict(c), kt_util.default_block_size_names)
            bad += (tuple(grid), tuple(threads)) != launch_dims(task, c, perf_sizes(task))
        print(f"  KT searchspace {space.size} configurations, same set as ours: {got == chosen}; "
              f"grid/block differing from the engine's: {bad} of {len(configs)}; e.g. {configs[0]} -> "
              f"{launch_dims(task, configs[0], perf_sizes(task))}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=12, help="configurations per example and side")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--examples", nargs="+", default=EXAMPLES, choices=EXAMPLES)
    parser.add_argument("--warm", action="store_true", help="only the warm phase, on the caches already in OUT")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--kt-iterations", type=int, default=7, help="Kernel Tuner's timed launches (its default)")
    parser.add_argument("--start-by", type=float, help="seconds after start past which no further example starts")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--kt-worker", help=argparse.SUPPRESS)
    parser.add_argument("--configs-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.kt_worker:
        return kt_worker(args.kt_worker, args.configs_file, args.result_file, args.seed, args.kt_iterations)
    if args.dry_run:
        return dry_run(args.examples, args.budget, args.seed)

    args.out.mkdir(parents=True, exist_ok=True)
    print(compile_installed(), file=sys.stderr, flush=True)
    phases = ["warm"] if args.warm else ["cold", "warm"]
    started, rows = time.monotonic(), {}
    for ex in args.examples:
        if args.start_by is not None and time.monotonic() - started > args.start_by:
            print(f"{ex}: skipped, past --start-by", file=sys.stderr, flush=True)
            continue
        row = rows[ex] = {}
        for phase in phases:
            if phase == "cold":  # fresh compile caches for both sides
                for name in (f"cubin_{ex}", f"cupy_{ex}"):
                    shutil.rmtree(args.out / "cache" / name, ignore_errors=True)
                    (args.out / "cache" / name).mkdir(parents=True)
            print(f"{ex} {phase}: cudaopt", file=sys.stderr, flush=True)
            row[f"cudaopt_{phase}"] = run_cudaopt(ex, args.budget, args.out, phase, args.seed)
            configs = (row.get("cudaopt_cold") or row[f"cudaopt_{phase}"]).get("tunables")  # KT warm: the cold list
            print(f"{ex} {phase}: Kernel Tuner on {len(configs or [])} configurations", file=sys.stderr, flush=True)
            row[f"kt_{phase}"] = run_kt(ex, configs, args.out, phase, args.seed, args.kt_iterations) if configs else \
                {"error": "no configurations from cudaopt", "configs": 0}
            for side in ("cudaopt", "kt"):
                if row[f"{side}_{phase}"].get("error"):
                    print(f"{ex} {phase} {side}: {row[f'{side}_{phase}']['error']}", file=sys.stderr, flush=True)
            print(ratio_line(ex, phase, row), file=sys.stderr, flush=True)  # a run cut short still says this much
            (args.out / "kernel_tuner_examples.json").write_text(json.dumps(
                {"budget": args.budget, "seed": args.seed, "kt_iterations": args.kt_iterations,
                 "rows": {e: {k: {kk: vv for kk, vv in v.items() if kk not in ("per_config", "results")}
                              for k, v in r.items()} for e, r in rows.items()}}, indent=1))
    text = tables(rows)
    print(text)
    (args.out / "kernel_tuner_examples.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
