"""gemm_bf16: the baseline and the tunable tensor-core kernel over its space, against cuBLAS bf16 (issue 16).

    python -m benchmarks.gemm_bf16_cublas                        # every valid configuration (on a GPU host)
    python -m benchmarks.gemm_bf16_cublas --sample 40 --top 6    # a seeded sample of the space, then finalists
    python -m benchmarks.gemm_bf16_cublas --config BM=128,BN=256,BK=32,WM=64,WN=64,STAGES=4,GROUP_M=8,MINB=1
    python -m benchmarks.gemm_bf16_cublas --task gemm_bf16_wgmma --config BN=256,STAGES=4,GROUP_M=8,MINB=1

``--task`` picks the bundled task (default gemm_bf16; gemm_bf16_wgmma has the same contract, cases and baseline,
and a Hopper wgmma kernel as its tunable one).

Everything the engine measures goes through ``evaluate`` like any candidate: validation cases against the
float64 oracle, then the task's GPU performance cases (4096³, 8192³, 4096×14336×4096), each launch preceded by
an L2 eviction, CUDA events around it, the median reported. Two passes: a screening pass over the chosen
configurations with a short timing plan (``--screen-reps``; the compile of the next configuration runs in a
thread meanwhile), then the finalists (the ``--top`` best per shape and by geometric mean) again with the
engine's default plan (10 warm-up + 100 timed launches). The baseline gets 2 + 10 launches: it is about 40×
slower and its number is a reference point only.

cuBLAS bf16 runs in this process on the same shapes: ``torch.matmul`` of bf16 CUDA tensors (row-major A[M,K]
and B[K,N], as the task's contract; uniform(-1, 1) data), timed the engine's way: the engine's own L2-eviction
kernel (through CuPy, on torch's stream) before every launch, a CUDA event pair around each launch, 10 warm-up
and 100 timed launches, the median. The table gives per shape: cuBLAS TFLOP/s, the best tuned TFLOP/s and its
fraction of cuBLAS, the configuration that reached it, and the baseline; then the best single configuration
over all shapes. ``--out DIR`` keeps every evaluation's numbers as JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import threading
import time
from pathlib import Path

from harness_tools import EvaluationConfig, TimingPlan, compile_candidate, create_backend, evaluate, resolve_task
from harness_tools.run.timing import geomean
from harness_tools.task import candidate as candidates
from harness_tools.task.tunable_space import TunableSpace

SEED = 20261216
DEFAULT_TASK = "gemm_bf16"


def parse_config(text: str) -> dict[str, int]:
    try:
        return {key.strip(): int(value) for key, value in (item.split("=") for item in text.split(","))}
    except ValueError:
        raise SystemExit(f"--config wants NAME=INT,NAME=INT,...; got {text!r}") from None


def label(config: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items())


def shape_name(sizes: dict[str, int]) -> str:
    return f"{sizes['M']}x{sizes['N']}x{sizes['K']}"


def chosen_configs(task, args) -> list[dict[str, int]]:
    """The --config ones, then a --sample of the valid space (without them); neither given: the whole space."""
    tun = task.spec.tunables
    space = TunableSpace(tun.params, tun.constraints)
    configs = [parse_config(c) for c in args.config or []]
    for c in configs:
        key = space.key(c)
        if key is None or not space.is_valid(key):
            print(f"note: {label(c)} is outside the task's space (evaluated all the same)", file=sys.stderr)
    if configs and not args.sample:
        return configs
    valid = [c for c in (space.as_dict(v) for v in space.valid() or []) if c not in configs]
    if args.sample and args.sample < len(valid):
        valid = random.Random(SEED).sample(valid, args.sample)
    return configs + valid


def precompile(task, configs: list[dict[str, int]], arch: str) -> threading.Thread:
    """Compile the configurations in order in a thread: evaluate() then finds them in the compile cache."""
    def work():
        for c in configs:
            compile_candidate(candidates.tuned(task, c), arch)
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def summarize(result) -> dict:
    r = result.compile.resources
    return {
        "correct": result.correct, "failure": result.failure,
        "registers": r.registers if r else None, "spill_bytes": (r.spill_store_bytes or 0) if r else None,
        "tflops": {shape_name(c.sizes): c.tflops for c in result.cases if c.role == "performance" and c.tflops},
        "median_ms": {shape_name(c.sizes): c.median_ms for c in result.cases if c.role == "performance" and c.median_ms},
        "max_rel_err": max((c.max_rel_err or 0.0 for c in result.cases), default=None),
    }


# ---- cuBLAS (torch.matmul), timed as the engine times a kernel -------------------------------------------
def cublas_tflops(shapes: list[dict[str, int]], warmup: int = 10, reps: int = 100) -> dict[str, dict]:
    import cupy as cp
    import torch

    from harness_tools.backends.cuda.device_kernels import SOURCE

    stream = torch.cuda.current_stream()
    cp_stream = cp.cuda.ExternalStream(stream.cuda_stream)
    evict = cp.RawModule(code=SOURCE, options=("-std=c++17",)).get_function("cudaopt_evict_l2")
    props = torch.cuda.get_device_properties(0)
    flush_bytes = max(2 * props.L2_cache_size, 256 << 20)  # the engine's flush size
    with cp_stream:
        flush = cp.zeros(flush_bytes, dtype=cp.uint8)
        sink = cp.zeros(2, dtype=cp.uint32)
    blocks = props.multi_processor_count * 8
    out = {}
    gen = torch.Generator(device="cuda").manual_seed(SEED)
    for s in shapes:
        m, n, k = s["M"], s["N"], s["K"]
        a = (torch.rand((m, k), device="cuda", generator=gen) * 2 - 1).to(torch.bfloat16)
        b = (torch.rand((k, n), device="cuda", generator=gen) * 2 - 1).to(torch.bfloat16)
        c = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        for i in range(warmup + reps):
            with cp_stream:
                evict((blocks,), (256,), (flush, cp.uint64(flush.nbytes // 16), sink))
            if i >= warmup:
                events[i - warmup][0].record(stream)
            torch.matmul(a, b, out=c)
            if i >= warmup:
                events[i - warmup][1].record(stream)
        torch.cuda.synchronize()
        times = [start.elapsed_time(stop) for start, stop in events]
        median = statistics.median(times)
        out[shape_name(s)] = {"median_ms": median, "tflops": 2 * m * n * k / (median * 1e-3) / 1e12,
                              "cv": statistics.pstdev(times) / statistics.fmean(times)}
        del a, b, c
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", help="NAME=INT,... (repeatable): these configurations (alone, "
                                                          "or first when --sample is given too)")
    parser.add_argument("--sample", type=int, default=0, help="a seeded random sample of this many valid configurations")
    parser.add_argument("--top", type=int, default=4, help="finalists per shape (and by geomean) for the full timing")
    parser.add_argument("--screen-reps", type=int, default=20, help="timed launches per case in the screening pass")
    parser.add_argument("--budget-s", type=float, default=0, help="stop screening after this many seconds (0: never)")
    parser.add_argument("--out", type=Path, help="folder for the JSON record")
    parser.add_argument("--task", default=DEFAULT_TASK, help=f"the bundled task (default {DEFAULT_TASK}; "
                                                             "gemm_bf16_wgmma: the same contract, a wgmma kernel)")
    args = parser.parse_args()

    task = resolve_task(args.task)
    cases = task.spec.cases_for(["performance"], "cuda")
    shapes = [dict(c.sizes) for c in cases]
    names = [shape_name(s) for s in shapes]
    configs = chosen_configs(task, args)
    started = time.perf_counter()
    backend = create_backend("cuda")
    record: dict = {"task": args.task, "seed": SEED, "configs": len(configs)}
    try:
        device = backend.device_info()
        record["device"] = device.model_dump()
        precompile(task, configs, device.arch)
        base = evaluate(task, candidates.baseline(task), backend,
                        EvaluationConfig(seed=SEED, timing=TimingPlan(warmup=2, reps=10), timeout_s=600))
        record["baseline"] = summarize(base)
        screen_plan = TimingPlan(warmup=3, reps=args.screen_reps)
        screened = []
        for i, config in enumerate(configs):
            if args.budget_s and time.perf_counter() - started > args.budget_s:
                print(f"screening stopped by --budget-s after {i} of {len(configs)} configurations", file=sys.stderr)
                break
            result = evaluate(task, candidates.tuned(task, config), backend,
                              EvaluationConfig(seed=SEED, timing=screen_plan, timeout_s=300))
            row = {"config": config, **summarize(result)}
            screened.append(row)
            rates = " ".join(f"{row['tflops'].get(n, 0):6.1f}" for n in names)
            print(f"[{i + 1}/{len(configs)} {time.perf_counter() - started:5.0f}s] {label(config)} regs "
                  f"{row['registers']} {'ok ' + rates if row['correct'] else 'FAILED: ' + str(row['failure'])[:200]}",
                  file=sys.stderr, flush=True)
        record["screened"] = screened
        good = [r for r in screened if r["correct"] and len(r["tflops"]) == len(names)]
        finalists: list[dict[str, int]] = []
        rankings = [lambda r, n=n: r["tflops"][n] for n in names] + [lambda r: geomean(list(r["tflops"].values()))]
        for key in rankings:
            for r in sorted(good, key=key, reverse=True)[:args.top]:
                if r["config"] not in finalists:
                    finalists.append(r["config"])
        final = []
        for config in finalists:
            result = evaluate(task, candidates.tuned(task, config), backend, EvaluationConfig(seed=SEED, timeout_s=300))
            final.append({"config": config, **summarize(result)})
        record["final"] = final
    finally:
        backend.close()
        if args.out:  # kept even if what follows fails
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"{args.task}_cublas.json").write_text(json.dumps(record, indent=1))
    cublas = cublas_tflops(shapes)
    record["cublas"] = cublas
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{args.task}_cublas.json").write_text(json.dumps(record, indent=1))

    import torch
    print(f"{args.task} on {torch.cuda.get_device_name(0)}; {len(screened)} of {len(configs)} configurations screened "
          f"({sum(r['correct'] for r in screened)} correct), {len(final)} finalists timed with 10 + 100 launches; "
          f"{time.perf_counter() - started:.0f} s")
    ok_final = [r for r in final if r["correct"] and len(r["tflops"]) == len(names)]
    header = "| M×N×K | cuBLAS TFLOP/s | best tuned TFLOP/s | of cuBLAS | best configuration | baseline TFLOP/s |"
    print(header)
    print("|---|---:|---:|---:|---|---:|")
    for n in names:
        best = max(ok_final, key=lambda r: r["tflops"][n], default=None)
        tuned = best["tflops"][n] if best else float("nan")
        print(f"| {n.replace('x', '×')} | {cublas[n]['tflops']:.1f} | {tuned:.1f} | {tuned / cublas[n]['tflops']:.1%} | "
              f"{label(best['config']) if best else '-'} | {record['baseline']['tflops'].get(n, float('nan')):.1f} |")
    overall = max(ok_final, key=lambda r: geomean([r["tflops"][n] / cublas[n]["tflops"] for n in names]), default=None)
    if overall:
        fractions = [overall["tflops"][n] / cublas[n]["tflops"] for n in names]
        print(f"best single configuration: {label(overall['config'])} (registers {overall['registers']}): "
              + ", ".join(f"{n} {overall['tflops'][n]:.1f} ({f:.1%})" for n, f in zip(names, fractions))
              + f"; geomean {geomean(fractions):.1%} of cuBLAS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
