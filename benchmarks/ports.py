"""The ported workloads of examples/ on a GPU (issue 16): baseline, a short sweep of the tunable kernel, torch eager.

    python -m benchmarks.ports [--examples vector_add,log_softmax] [--configs log_softmax=1] [--budget-s 200] \
        [--out DIR]                                                # on a GPU host
    python -m benchmarks.ports --backend cpu --reps 3          # a dry run: the cpu cases, no torch

Every example's baseline and a few hand-picked configurations of its tunable kernel go through the engine like any
candidate (validation cases against the float64 reference, then the GPU performance cases: CUDA events, the L2
evicted before every launch, the median of the timed launches). torch eager runs the same operation on the same
shapes in this process, timed the same way: before every launch a read of a buffer of max(2 × L2, 256 MiB)
(torch.sum) outside the event pair, then the events around the one op; the median of ``--reps`` launches after
``--warmup``. Examples with no direct torch operation (the stencil) say n/a.

Examples run in the order given: the baseline, then the first K configurations of the example's list (``--configs
NAME=K``; default 3), then torch; no evaluation starts once ``--budget-s`` is spent. The KernelBench shapes hold up
to 8.6 GB of input, and drawing, checking and referencing them costs the host tens of seconds per evaluation, so
put them last with K=1 on a short lease. Each evaluation prints a line as it ends; the table prints at the end, on
SIGTERM too (``timeout``); DIR gets one JSON file with everything measured.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from harness_tools import EvaluationConfig, create_backend, evaluate, load_task, resolve_task
from harness_tools.run.timing import TimingPlan
from harness_tools.task import candidate as candidates

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SEED = 16

# Per example: configurations of its tunable kernel, the likeliest first (round one takes only the first).
SWEEPS: dict[str, list[dict[str, int]]] = {
    "vector_add": [{"block_size_x": 256}, {"block_size_x": 128}, {"block_size_x": 512}, {"block_size_x": 1024}],
    "stencil": [{"block_size_x": 64, "block_size_y": 4}, {"block_size_x": 32, "block_size_y": 8},
                {"block_size_x": 128, "block_size_y": 2}, {"block_size_x": 256, "block_size_y": 1}],
    "matmul": [{"block_size_x": 32, "block_size_y": 4, "tile_size_x": 4, "tile_size_y": 8},
               {"block_size_x": 32, "block_size_y": 8, "tile_size_x": 4, "tile_size_y": 4},
               {"block_size_x": 64, "block_size_y": 8, "tile_size_x": 2, "tile_size_y": 8}],
    "convolution": [{"block_size_x": 32, "block_size_y": 8, "tile_size_x": 2, "tile_size_y": 4, "use_padding": 0, "read_only": 1},
                    {"block_size_x": 16, "block_size_y": 16, "tile_size_x": 4, "tile_size_y": 2, "use_padding": 1, "read_only": 1},
                    {"block_size_x": 64, "block_size_y": 4, "tile_size_x": 2, "tile_size_y": 4, "use_padding": 0, "read_only": 0}],
    "reduction": [{"block_size_x": 256, "vector": 4, "num_blocks": 2048, "loop_unroll_factor_0": 8, "use_shuffle": 1},
                  {"block_size_x": 512, "vector": 4, "num_blocks": 1024, "loop_unroll_factor_0": 0, "use_shuffle": 1},
                  {"block_size_x": 1024, "vector": 2, "num_blocks": 4096, "loop_unroll_factor_0": 16, "use_shuffle": 0}],
    "layer_norm": [{"THREADS": 1024, "ITEMS": 4}, {"THREADS": 1024, "ITEMS": 8}, {"THREADS": 512, "ITEMS": 8}],
    "matmul_transposed_a": [{"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}, {"BM": 128, "BN": 64, "BK": 16, "TM": 8, "TN": 4},
                            {"BM": 64, "BN": 128, "BK": 16, "TM": 4, "TN": 8}],
    "argmax_dim1": [{"BX": 32, "BY": 8, "UNROLL": 4}, {"BX": 64, "BY": 4, "UNROLL": 8}, {"BX": 32, "BY": 16, "UNROLL": 2}],
    "log_softmax": [{"THREADS": 1024, "ITEMS": 4, "BACKWARD": 1}, {"THREADS": 512, "ITEMS": 8, "BACKWARD": 0}],
    # a bundled task, not an example: the two-kernel launch sequence against torch.softmax
    "softmax_split": [{"THREADS": 256, "CHUNK": 8192, "VEC": 4}, {"THREADS": 512, "CHUNK": 16384, "VEC": 4},
                      {"THREADS": 256, "CHUNK": 4096, "VEC": 4}, {"THREADS": 1024, "CHUNK": 32768, "VEC": 4}],
}


# ---- torch eager on one performance case -----------------------------------------------------------------------
def torch_op(name: str, s: dict[str, int]) -> Callable[[], object] | None:
    """A closure running the example's operation with torch on fresh device tensors (None: no direct equivalent)."""
    import torch
    import torch.nn.functional as F

    cuda = {"device": "cuda", "dtype": torch.float32}
    if name == "vector_add":
        a, b = torch.randn(s["n"], **cuda), torch.randn(s["n"], **cuda)
        c = torch.empty_like(a)
        return lambda: torch.add(a, b, out=c)
    if name == "matmul":
        a, b = torch.randn(s["N"], s["N"], **cuda), torch.randn(s["N"], s["N"], **cuda)
        return lambda: torch.matmul(a, b)
    if name == "convolution":
        image = torch.randn(1, 1, s["H"] + s["FH"] - 1, s["W"] + s["FW"] - 1, **cuda)
        taps = torch.randn(1, 1, s["FH"], s["FW"], **cuda)
        return lambda: F.conv2d(image, taps)
    if name == "reduction":
        x = torch.rand(s["n"], **cuda)
        return lambda: torch.sum(x)
    if name == "matmul_transposed_a":
        a, b = torch.rand(s["K"], s["M"], **cuda), torch.rand(s["K"], s["N"], **cuda)
        return lambda: torch.matmul(a.T, b)
    if name == "log_softmax":
        x = torch.rand(s["rows"], s["cols"], **cuda)
        return lambda: torch.log_softmax(x, dim=1)
    if name == "softmax_split":  # a bundled task (two-kernel launch sequence), not an example
        x = torch.randn(s["rows"], s["cols"], **cuda) * 4 + 80
        return lambda: torch.softmax(x, dim=1)
    if name == "argmax_dim1":
        x = torch.rand(s["B"], s["D"], s["J"], **cuda)
        return lambda: torch.argmax(x, dim=1)
    if name == "layer_norm":
        shape = (s["features"], s["dim1"], s["dim2"])
        x = torch.rand(s["batch"], *shape, **cuda)
        w, b = torch.rand(shape, **cuda), torch.rand(shape, **cuda)
        return lambda: F.layer_norm(x, shape, w, b, 1e-5)
    return None  # stencil: no single torch operation


def torch_median_ms(op: Callable[[], object], warmup: int, reps: int) -> float:
    import torch

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.zeros(max(2 * l2, 256 << 20) // 4, device="cuda")
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    stops = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for _ in range(warmup):
        flush.sum()
        op()
    for i in range(reps):
        flush.sum()  # a read: leaves only clean lines, as the engine's flush does
        starts[i].record()
        op()
        stops[i].record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in zip(starts, stops))


def torch_times(name: str, cases, warmup: int, reps: int) -> dict[str, float | None]:
    import torch

    out: dict[str, float | None] = {}
    for case in cases:
        op = torch_op(name, case.sizes)
        out[case.name] = None if op is None else torch_median_ms(op, warmup, reps)
        del op
        torch.cuda.empty_cache()
    return out


# ---- the engine --------------------------------------------------------------------------------------------------
def engine_run(task, cand, backend, plan: TimingPlan) -> dict:
    started = time.perf_counter()
    result = evaluate(task, cand, backend, EvaluationConfig(seed=SEED, timing=plan, timeout_s=900))
    row = {"correct": result.correct, "failure": result.failure, "wall_s": round(time.perf_counter() - started, 1),
           "median_ms": {c.name: c.median_ms for c in result.cases if c.role == "performance"}}
    r = result.compile.resources
    row["registers"] = r.registers if r else None
    return row


def fmt_ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _stop(signum, frame) -> None:
    raise KeyboardInterrupt


def print_table(names: list[str], tasks: dict, results: dict, backend: str) -> None:
    print("\n| example | shape | baseline ms | tuned best ms | best configuration (of those tried) | torch eager ms |")
    print("|---|---|---:|---:|---|---:|")
    for name in names:
        task, res = tasks[name], results[name]
        for case in task.spec.cases_for(["performance"], backend):
            base = res["baseline"]["median_ms"].get(case.name) if res["baseline"] and res["baseline"]["correct"] else None
            tried = [(c["median_ms"].get(case.name), c["config"]) for c in res["configs"] if c["correct"]]
            tried = [t for t in tried if t[0] is not None]
            best = min(tried, key=lambda t: t[0]) if tried else (None, None)
            label = ",".join(f"{k}={v}" for k, v in best[1].items()) + f" (of {len(tried)})" if best[1] else "-"
            shape = "×".join(str(v) for v in case.sizes.values())
            print(f"| {name} | {shape} | {fmt_ms(base)} | {fmt_ms(best[0])} | {label} | {fmt_ms(res['torch'].get(case.name))} |",
                  flush=True)


def parse_counts(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in (item.split("=") for item in text.split(",") if item)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", default=",".join(SWEEPS),
                        help="comma-separated examples/ folders or bundled task names (default: all)")
    parser.add_argument("--budget-s", type=float, default=600.0, help="start no evaluation after this many seconds")
    parser.add_argument("--configs", type=parse_counts, default={}, metavar="NAME=K,...",
                        help="configurations to try per example (default 3, from the start of its list)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--out", type=Path, help="folder for ports.json")
    parser.add_argument("--backend", default="cuda", choices=["cuda", "cpu"], help="cpu: a dry run on the cpu cases")
    args = parser.parse_args()
    started = time.perf_counter()
    plan = TimingPlan(warmup=args.warmup, reps=args.reps)
    names = [n for n in args.examples.split(",") if n]
    tasks = {n: load_task(EXAMPLES / n) if (EXAMPLES / n).is_dir() else resolve_task(n) for n in names}
    results: dict[str, dict] = {n: {"baseline": None, "configs": [], "torch": {}} for n in names}
    backend = create_backend(args.backend)

    def record(name: str, label: str, row: dict) -> None:
        times = ", ".join(f"{k} {fmt_ms(v)}" for k, v in row["median_ms"].items())
        state = "ok" if row["correct"] else f"FAILED {row['failure']}"
        print(f"[{time.perf_counter() - started:6.1f}s] {name} {label}: {state}; {times} ({row['wall_s']} s)", flush=True)

    signal.signal(signal.SIGTERM, _stop)  # a `timeout` still gets the table of what was measured
    try:
        for name in names:
            task = tasks[name]
            for label, make in [("baseline", None)] + [(str(c), c) for c in SWEEPS[name][:args.configs.get(name, 3)]]:
                if time.perf_counter() - started > args.budget_s:
                    print(f"budget spent: {name} {label} not run", flush=True)
                    continue
                cand = candidates.baseline(task) if make is None else candidates.tuned(task, make)
                row = engine_run(task, cand, backend, plan)
                if make is None:
                    results[name]["baseline"] = row
                else:
                    results[name]["configs"].append({"config": make, **row})
                record(name, label, row)
            if args.backend == "cuda":
                results[name]["torch"] = torch_times(name, task.spec.cases_for(["performance"], "cuda"), args.warmup, args.reps)
                print(f"    torch eager: {results[name]['torch']}", flush=True)
    except KeyboardInterrupt:
        print("stopped: the table holds what was measured", flush=True)
    finally:
        backend.close()
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "ports.json").write_text(json.dumps(results, indent=1))
        print_table(names, tasks, results, args.backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
