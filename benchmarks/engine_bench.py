"""Engine benchmark on a GPU host: overhead per stage, our medians against triton's do_bench, spread.

Run on the GPU (not a test; prints tables, optionally writes JSON):

    python -m benchmarks.engine_bench [--tasks sgemm reduce_sum ...] [--repeats 5] [--json OUT]

1. Overhead of one evaluation of each bundled baseline, split into stages (milliseconds).
2. For each task's baseline and one tuned configuration, on every performance case: our median
   (worker process, CUDA events, L2 flush) next to ``triton.testing.do_bench`` (its own L2 clearing,
   median) on the same cubin, the same sizes and fresh inputs in this process; plus the spread of our
   medians over ``--repeats`` evaluations and their CV.
3. SGEMM through CuPy (cuBLAS) on the performance shapes, next to our tuned SGEMM.
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import statistics
import sys
from pathlib import Path

import numpy as np

from harness_tools import EvaluationConfig, bundled_task_names, compile_candidate, create_backend, evaluate, resolve_task
from harness_tools.check.inputs import draw_inputs, scalar_arguments
from harness_tools.task import candidate as candidates
from harness_tools.task.expressions import evaluate_expression as expr
from harness_tools.task.spec import ScalarParam

# A known-good configuration per task for the "tuned" rows (else: the first valid one).
PRESETS = {"sgemm": {"BM": 128, "BN": 64, "BK": 8, "TM": 8, "TN": 8, "MINB": 2, "WIDE_MIN": -1}}


def valid_configs(task) -> list[dict[str, int]]:
    tun = task.spec.tunables
    if not tun:
        return []
    names = list(tun.params)
    out = []
    for values in itertools.product(*(tun.params[n] for n in names)):
        cfg = dict(zip(names, values))
        if all(expr(c, cfg) for c in tun.constraints):
            out.append(cfg)
    return out


def tuned_candidate(task):
    configs = valid_configs(task)
    if not configs:
        return None, None
    cfg = PRESETS.get(task.name) or configs[len(configs) // 2]
    return candidates.tuned(task, cfg), cfg


class InProcessLauncher:
    """Launches a cubin on torch's current stream, so triton's do_bench can time it."""

    def __init__(self, cubin: bytes, kernel: str):
        import torch
        from cuda.bindings import driver as cu

        torch.cuda.init()
        torch.empty(1, device="cuda")  # make torch's primary context current
        self.cu, self.torch = cu, torch
        self.image = np.frombuffer(cubin, dtype=np.uint8)
        err, self.module = cu.cuModuleLoadData(self.image.ctypes.data)
        assert err == cu.CUresult.CUDA_SUCCESS, err
        err, self.function = cu.cuModuleGetFunction(self.module, kernel.encode())
        assert err == cu.CUresult.CUDA_SUCCESS, err

    def prepare(self, task, case, cand, seed):
        torch = self.torch
        arrays = draw_inputs(task.spec, case, seed)
        scalars = scalar_arguments(task.spec, case.sizes)
        self.tensors, holders = [], []
        for p in task.spec.params:
            if isinstance(p, ScalarParam):
                holders.append((ctypes.c_int32 if p.dtype == "int32" else ctypes.c_float)(scalars[p.name]))
                continue
            if p.role == "out":
                t = torch.full(task.spec.shape_of(p, case.sizes), float(p.initial or 0), dtype=torch.float32, device="cuda")
            else:
                t = torch.from_numpy(np.ascontiguousarray(arrays[p.name])).cuda()
            self.tensors.append(t)
            holders.append(ctypes.c_uint64(t.data_ptr()))
        self.array = (ctypes.c_void_p * len(holders))(*[ctypes.addressof(h) for h in holders])
        self.holders = holders
        self.grid, self.block, self.shared = cand.launch_dims(case.sizes)
        fa = self.cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        self.cu.cuFuncSetAttribute(self.function, fa, self.shared)

    def __call__(self):
        g, b = self.grid, self.block
        stream = self.torch.cuda.current_stream().cuda_stream
        (err,) = self.cu.cuLaunchKernel(self.function, *g, *b, self.shared, stream, ctypes.addressof(self.array), 0)
        assert err == self.cu.CUresult.CUDA_SUCCESS, err


def overhead_table(backend, tasks, rows):
    print("\n## 1. Overhead of one evaluation of the baseline (ms; first call compiles, later ones hit the cache)")
    hdr = f"{'task':<14}{'compile':>9}{'inputs':>9}{'reference':>10}{'load':>7}{'validate':>9}{'time':>8}{'compare':>9}{'total':>9}"
    print(hdr)
    for name in tasks:
        task = resolve_task(name)
        result = evaluate(task, candidates.baseline(task), backend, EvaluationConfig())
        o = result.overhead
        rows.append({"table": "overhead", "task": name, **o.model_dump(), "correct": result.correct})
        print(f"{name:<14}{o.compile_ms:>9.1f}{o.inputs_ms:>9.1f}{o.reference_ms:>10.1f}{o.load_ms:>7.2f}"
              f"{o.validate_ms:>9.1f}{o.time_ms:>8.1f}{o.compare_ms:>9.1f}{o.total_ms:>9.1f}"
              f"{'' if result.correct else '  NOT CORRECT: ' + str(result.failure)}")


def do_bench_table(backend, tasks, repeats, rows):
    import triton.testing

    print(f"\n## 2. Our median vs triton do_bench (median), and the spread of our medians over {repeats} evaluations")
    print(f"{'task':<13}{'kernel':<22}{'case':<24}{'ours_ms':>10}{'do_bench':>10}{'diff':>8}{'spread':>8}{'cv':>7}")
    for name in tasks:
        task = resolve_task(name)
        tuned, cfg = tuned_candidate(task)
        for label, cand in [("baseline", candidates.baseline(task))] + ([(_cfg(cfg), tuned)] if tuned else []):
            medians: dict[str, list[float]] = {}
            cvs: dict[str, list[float]] = {}
            for _ in range(repeats):
                # One seed for all repeats: the spread then measures timing alone (and the oracle is cached).
                result = evaluate(task, cand, backend, EvaluationConfig(roles=["performance"], seed=1))
                if not result.correct:
                    print(f"{name:<13}{label:<22}NOT CORRECT: {result.failure}")
                    break
                for c in result.cases:
                    medians.setdefault(c.name, []).append(c.median_ms)
                    cvs.setdefault(c.name, []).append(c.timing.cv)
            if not medians:
                continue
            compiled = compile_candidate(cand, backend.device_info().arch)
            launcher = InProcessLauncher(compiled.cubin, cand.kernel_name)
            for case in task.spec.cases_for(["performance"], backend.name):
                launcher.prepare(task, case, cand, seed=1)
                theirs = triton.testing.do_bench(launcher, warmup=25, rep=200, return_mode="median")
                ours = statistics.median(medians[case.name])
                spread = (max(medians[case.name]) - min(medians[case.name])) / ours
                diff = ours / theirs - 1
                cv = max(cvs[case.name])
                rows.append({"table": "do_bench", "task": name, "kernel": label, "case": case.name, "ours_ms": ours,
                             "do_bench_ms": theirs, "diff": diff, "spread": spread, "max_cv": cv,
                             "medians": medians[case.name]})
                print(f"{name:<13}{label:<22}{case.name:<24}{ours:>10.4f}{theirs:>10.4f}{diff:>+8.1%}"
                      f"{spread:>8.2%}{cv:>7.2%}")


def cublas_table(backend, rows):
    import cupy
    import triton.testing

    task = resolve_task("sgemm")
    tuned, cfg = tuned_candidate(task)
    result = evaluate(task, tuned, backend, EvaluationConfig(roles=["performance"]))
    print(f"\n## 3. SGEMM: cuBLAS (CuPy, fp32) vs our tuned kernel {_cfg(cfg)}")
    print(f"{'M x N x K':<20}{'cuBLAS_ms':>10}{'TFLOP/s':>9}{'ours_ms':>10}{'TFLOP/s':>9}{'ours/cuBLAS':>12}")
    for case in task.spec.cases_for(["performance"], backend.name):
        m, n, k = case.sizes["M"], case.sizes["N"], case.sizes["K"]
        a = cupy.random.uniform(-1, 1, (m, k), dtype=cupy.float32)
        b = cupy.random.uniform(-1, 1, (k, n), dtype=cupy.float32)
        theirs = triton.testing.do_bench(lambda: cupy.matmul(a, b), warmup=25, rep=200, return_mode="median")
        ours = next(c.median_ms for c in result.cases if c.name == case.name)
        flops = 2 * m * n * k
        rows.append({"table": "cublas", "case": case.name, "cublas_ms": theirs, "ours_ms": ours})
        print(f"{f'{m}x{n}x{k}':<20}{theirs:>10.4f}{flops / theirs / 1e9:>9.1f}{ours:>10.4f}{flops / ours / 1e9:>9.1f}"
              f"{theirs / ours:>12.1%}")


def _cfg(cfg) -> str:
    return ",".join(f"{k}={v}" for k, v in cfg.items()) if cfg else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="*", default=bundled_task_names())
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--skip", nargs="*", default=[], choices=["overhead", "do_bench", "cublas"])
    args = parser.parse_args()
    backend = create_backend("cuda")
    info = backend.device_info()
    print(f"# engine benchmark on {info.name} ({info.arch}, {info.sm_count} SMs, driver {info.driver_version})")
    rows: list[dict] = []
    try:
        if "overhead" not in args.skip:
            overhead_table(backend, args.tasks, rows)
        if "do_bench" not in args.skip:
            do_bench_table(backend, args.tasks, args.repeats, rows)
        if "cublas" not in args.skip and "sgemm" in args.tasks:
            cublas_table(backend, rows)
    finally:
        backend.close()
        if args.json:
            args.json.write_text(json.dumps({"device": info.model_dump(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
