"""The tuner on the bundled tasks, against cuBLAS, copy bandwidth and Kernel Tuner (issue 5).

    python -m benchmarks.tuner_bench --tasks sgemm --kernel-tuner --out DIR     # on a GPU host
    python -m benchmarks.tuner_bench --tasks transpose --backend cpu --iterations 3 --out DIR   # a dry run

For each task it runs ``cudaopt optimize TASK --proposer tuner`` (the real CLI, through a stdio MCP
server) with a budget of every valid configuration, so the tuner goes exhaustive: that gives the
exhaustive best and the time per evaluated configuration. Then, in the same process and on the same GPU:
cuBLAS fp32 (CuPy) on the sgemm shapes, device-to-device copy bandwidth (CuPy), and optionally Kernel
Tuner's brute force over the same kernel and space (its cache files allow offline replays of its
strategies: see ``tuner_replay.py``). Everything measured goes to DIR as JSON; a table is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from harness_tools import resolve_task
from harness_tools.task import candidate as candidates
from harness_tools.task.expressions import evaluate_expression
from harness_tools.task.tunable_space import TunableSpace

SEED = 20261129


def valid_configs(task_name: str) -> list[dict[str, int]]:
    tun = resolve_task(task_name).spec.tunables
    space = TunableSpace(tun.params, tun.constraints)
    return [space.as_dict(c) for c in space.valid() or []]


def run_tuner(task: str, iterations: int, out: Path, backend: str | None, timing: list[str]) -> dict:
    cmd = [sys.executable, "-m", "cudaopt_mcp.cli", "optimize", task, "--proposer", "tuner", "--max-iterations",
           str(iterations), "--seed", str(SEED), "--results", str(out / "results"), "--json", "--no-confirm"]
    cmd += (["--backend", backend] if backend else []) + timing
    started = time.perf_counter()
    print(f"tuning {task}: {iterations} iterations", file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "OPENAI_API_KEY": ""})
    wall = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"optimize {task} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    summary = json.loads(proc.stdout)
    summary["wall_s"] = wall
    (out / f"tuner_{task}.json").write_text(json.dumps(summary, indent=1))
    return summary


def per_case(attempt: dict) -> dict[str, dict]:
    return {c["name"]: c for c in (attempt.get("evaluation") or {}).get("cases", []) if c["role"] == "performance"}


# ---- reference points (CuPy), in this process ---------------------------------------------------------
def cublas_tflops(shapes: list[dict[str, int]]) -> dict[str, float]:
    import cupy as cp
    from triton.testing import do_bench

    out = {}
    for s in shapes:
        m, n, k = s["M"], s["N"], s["K"]
        a = cp.random.uniform(-1, 1, (m, k), dtype=cp.float32)
        b = cp.random.uniform(-1, 1, (k, n), dtype=cp.float32)
        c = cp.empty((m, n), dtype=cp.float32)
        ms = do_bench(lambda a=a, b=b, c=c: cp.matmul(a, b, out=c), warmup=25, rep=200, return_mode="median")
        out[f"{m}x{n}x{k}"] = 2 * m * n * k / (ms * 1e-3) / 1e12
    return out


def copy_bandwidth_gbps(nbytes: int = 2 << 30) -> float:
    """Device-to-device copy, bytes read + written per second (the ceiling of a memory-bound kernel)."""
    import cupy as cp
    from triton.testing import do_bench

    src = cp.ones(nbytes // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    ms = do_bench(lambda: cp.copyto(dst, src), warmup=10, rep=200, return_mode="median")
    return 2 * nbytes / (ms * 1e-3) / 1e9


def same_size_copy_gbps(nbytes: int, reps: int = 30) -> float:
    """A device copy moving ``nbytes`` in all (half read, half written), timed as the engine times a kernel:
    CUDA events around each launch, the L2 evicted by a read before each (the engine's own helper kernel)."""
    import cupy as cp

    from harness_tools.backends.cuda.device_kernels import SOURCE

    evict = cp.RawModule(code=SOURCE, options=("-std=c++17",)).get_function("cudaopt_evict_l2")
    flush = cp.zeros(256 << 20, dtype=cp.uint8)
    sink = cp.zeros(2, dtype=cp.uint32)
    src = cp.ones(max(nbytes // 8, 1), dtype=cp.float32)
    dst = cp.empty_like(src)
    sm = cp.cuda.Device().attributes["MultiProcessorCount"]
    times = []
    for i in range(reps + 3):
        evict((sm * 8,), (256,), (flush, cp.uint64(flush.nbytes // 16), sink))
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        cp.copyto(dst, src)
        stop.record()
        stop.synchronize()
        if i >= 3:
            times.append(cp.cuda.get_elapsed_time(start, stop))
    times.sort()
    return 2 * src.nbytes / (times[len(times) // 2] * 1e-3) / 1e9


# ---- Kernel Tuner, same kernel and space -----------------------------------------------------------------
def kernel_tuner_problem(shape: dict[str, int], seed: int = SEED, verify: bool = True,
                         only: list[dict[str, int]] | None = None) -> dict:
    """tune_kernel's arguments for the task's tunable sgemm on one shape: same source, space and launch
    (``only``: just these configurations, e.g. the ones our tuner evaluated)."""
    import numpy as np

    task = resolve_task("sgemm")
    tun = task.spec.tunables
    configs = valid_configs("sgemm")
    threads = sorted({(c["BM"] // c["TM"]) * (c["BN"] // c["TN"]) for c in configs})
    params = {**{k: list(v) for k, v in tun.params.items()}, "block_size_x": threads}

    allowed = {tuple(sorted(c.items())) for c in only} if only is not None else None

    def restriction(p) -> bool:  # our constraints, and the block size they imply
        config = {k: p[k] for k in tun.params}
        return (p["block_size_x"] == (p["BM"] // p["TM"]) * (p["BN"] // p["TN"])
                and all(evaluate_expression(c, config) for c in tun.constraints)
                and kt_can_launch(config, [shape])
                and (allowed is None or tuple(sorted(config.items())) in allowed))

    def grid(p) -> tuple[int, int]:  # the engine's grid (it depends on the shape and WIDE_MIN)
        return launch({k: p[k] for k in tun.params}, shape)[0][:2]

    m, n, k = shape["M"], shape["N"], shape["K"]
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    c = np.zeros((m, n), dtype=np.float32)
    answer = ([None, None, (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32), None, None, None]
              if verify else None)
    # problem_size is the grid itself (divisors of 1): Kernel Tuner launches exactly our grid
    return {"kernel_name": "sgemm", "kernel_source": task.read(tun.source), "problem_size": grid,
            "arguments": [a, b, c, np.int32(m), np.int32(n), np.int32(k)], "tune_params": params,
            "grid_div_x": [], "grid_div_y": [], "restrictions": restriction, "answer": answer,
            "atol": 2e-6 * k, "lang": "cupy", "compiler_options": ["-std=c++17"],  # as our engine compiles it
            "smem_args": {"size": lambda p: launch({k: p[k] for k in tun.params}, shape)[2]}}


def launch(config: dict[str, int], shape: dict[str, int]) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """(grid, block, dynamic shared bytes) of the tunable sgemm at ``config`` on ``shape``, as the engine launches it."""
    return candidates.tuned(resolve_task("sgemm"), config).launch_dims(shape)


def kt_can_launch(config: dict[str, int], shapes: list[dict[str, int]]) -> bool:
    """Kernel Tuner's cupy backend launches without raising the 48 KiB default limit of dynamic shared memory."""
    return all(launch(config, s)[2] <= 48 * 1024 for s in shapes)


def kernel_tuner_sgemm(out: Path, shapes: list[dict[str, int]], deadline: float,
                       only: list[dict[str, int]] | None = None) -> dict:
    from kernel_tuner import tune_kernel

    rows = {}
    for s in shapes:
        if time.monotonic() > deadline:
            print(f"Kernel Tuner: no time left for shape {s}", flush=True)
            break
        m, n, k = s["M"], s["N"], s["K"]
        cache = out / f"kt_sgemm_{m}x{n}x{k}.json"
        started = time.perf_counter()
        results, env = tune_kernel(**kernel_tuner_problem(s, only=only), cache=str(cache), quiet=True,
                                   strategy="brute_force")
        wall = time.perf_counter() - started
        times = [r["time"] for r in results if isinstance(r.get("time"), float)]
        rows[f"{m}x{n}x{k}"] = {"configs": len(results), "wall_s": wall, "best_ms": min(times) if times else None,
                                "per_config_s": wall / max(len(results), 1)}
        (out / "kernel_tuner_sgemm.json").write_text(json.dumps(rows, indent=1))
        print(f"Kernel Tuner {m}x{n}x{k}: {rows[f'{m}x{n}x{k}']}", flush=True)
    return rows


# ---- report -------------------------------------------------------------------------------------------------
def report(task: str, summary: dict, extra: dict) -> None:
    attempts = [a for a in summary["attempts"] if a.get("proposal") and a["proposal"].get("tunables")]
    base = summary.get("baseline") or {}
    best = summary.get("best") or {}
    evals = [a["elapsed_s"] for a in attempts]
    print(f"\n## {task}: {len(attempts)} configurations evaluated in {summary['wall_s']:.1f} s "
          f"({sum(evals) / max(len(evals), 1):.2f} s per evaluation, client side)")
    if not best:
        print("no correct configuration")
        return
    print(f"baseline {base.get('score_ms', float('nan')):.4g} ms -> best {best['score_ms']:.4g} ms "
          f"({base.get('score_ms', 0) / best['score_ms']:.2f}x) with {best['proposal'] and best['proposal'].get('tunables')}")
    within = [i + 1 for i, a in enumerate(attempts) if a["correct"] and a["score_ms"] <= 1.03 * best["score_ms"]]
    print(f"exhaustive order reaches 3 % of the best at evaluation {within[0] if within else '-'}")
    for name, case in per_case(best).items():
        line = f"  {name:<24} {case.get('median_ms', float('nan')):.4g} ms"
        if case.get("tflops"):
            line += f"  {case['tflops']:.2f} TFLOP/s"
            ref = extra.get("cublas", {}).get(name.split("_", 1)[1]) if "cublas" in extra else None
            if ref:
                line += f"  = {case['tflops'] / ref:.1%} of cuBLAS ({ref:.2f})"
        if case.get("gbps"):
            line += f"  {case['gbps']:.0f} GB/s"
            if extra.get("copy_gbps"):
                line += f"  = {case['gbps'] / extra['copy_gbps']:.1%} of copy bandwidth"
            same = extra.get("same_size_copy_gbps", {}).get(f"{task}/{name}")
            if same:
                line += f", {case['gbps'] / same:.1%} of a same-size copy ({same:.0f} GB/s)"
        print(line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["sgemm", "reduce_sum", "softmax_rows", "transpose"])
    parser.add_argument("--iterations", type=int, help="budget per task (default: every valid configuration)")
    parser.add_argument("--backend", help="default: the server's (cuda on a GPU host)")
    parser.add_argument("--kernel-tuner", action="store_true", help="also Kernel Tuner's brute force on sgemm")
    parser.add_argument("--warmup", type=int, help="warm-up launches per performance case while searching")
    parser.add_argument("--reps", type=int, help="timed launches per performance case while searching")
    parser.add_argument("--kt-start-by", type=float, default=420.0,
                        help="seconds after start after which no further Kernel Tuner shape is started")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    extra: dict = {}
    gpu = args.backend in (None, "cuda")
    if gpu:
        extra["copy_gbps"] = copy_bandwidth_gbps()
        print(f"copy bandwidth (read + write): {extra['copy_gbps']:.0f} GB/s")
        if "sgemm" in args.tasks:
            shapes = [c.sizes for c in resolve_task("sgemm").spec.cases_for(["performance"], "cuda")]
            extra["cublas"] = cublas_tflops(shapes)
            print("cuBLAS fp32 TFLOP/s: " + ", ".join(f"{k} {v:.2f}" for k, v in extra["cublas"].items()))
        (args.out / "reference_points.json").write_text(json.dumps(extra, indent=1))
    summaries: dict[str, dict] = {}
    if gpu:  # the ceiling at each memory-bound case's own size (launch and ramp-up included)
        for task in args.tasks:
            spec = resolve_task(task).spec
            if spec.metrics and spec.metrics.bytes is not None and task != "sgemm":
                for case in spec.cases_for(["performance"], "cuda"):
                    nbytes = int(evaluate_expression(spec.metrics.bytes, case.sizes))
                    extra.setdefault("same_size_copy_gbps", {})[f"{task}/{case.name}"] = same_size_copy_gbps(nbytes)
        (args.out / "reference_points.json").write_text(json.dumps(extra, indent=1))
    for task in args.tasks:
        n = args.iterations or len(valid_configs(task))
        timing = [f"--{k}={v}" for k, v in (("warmup", args.warmup), ("reps", args.reps)) if v is not None]
        summaries[task] = run_tuner(task, n, args.out, args.backend, timing)
        report(task, summaries[task], extra)
    if args.kernel_tuner and gpu and "sgemm" in summaries:
        side_by_side(summaries["sgemm"], args.out, started + args.kt_start_by)
    return 0


def side_by_side(summary: dict, out: Path, deadline: float) -> None:
    """Kernel Tuner on the configurations our run evaluated (those its cupy backend can launch); time per configuration."""
    spec = resolve_task("sgemm").spec
    shapes, validation = [c.sizes for c in spec.cases_for(["performance"], "cuda")], len(spec.cases_for(["validation"], "cuda"))
    attempts = [a for a in summary["attempts"] if a.get("proposal") and a["proposal"].get("tunables")
                and kt_can_launch(a["proposal"]["tunables"], shapes)]
    ours = sum(a["elapsed_s"] for a in attempts) / max(len(attempts), 1)
    rows = kernel_tuner_sgemm(out, shapes, deadline, [a["proposal"]["tunables"] for a in attempts])
    theirs = sum(r["per_config_s"] for r in rows.values())
    print(f"\nsame {len(attempts)} configurations (those Kernel Tuner's cupy backend can launch): ours {ours:.2f} s per "
          f"configuration (client side: compile, {validation} validation + {len(shapes)} performance cases, MCP), "
          f"Kernel Tuner {theirs:.2f} s "
          f"(brute force, cupy, verification on) over {len(rows)} shapes: ratio {ours / theirs:.2f}"
          if theirs else "Kernel Tuner measured nothing")


if __name__ == "__main__":
    sys.exit(main())
