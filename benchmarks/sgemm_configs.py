"""sgemm configurations, in or outside the tuner's space, as fractions of cuBLAS per shape (issue 5).

    python -m benchmarks.sgemm_configs [--config BM=128,BN=256,BK=8,TM=8,TN=16,MINB=1,WIDE_MIN=128 ...]   # on a GPU host

Each configuration of the task's tunable kernel goes through the engine like any candidate (validation
cases against the float64 oracle, then the performance cases: 10 + 100 launches, L2 evicted, CUDA events),
so a configuration the tuner's constraints leave out can be judged on the same terms. cuBLAS fp32 (CuPy
``matmul`` under triton's ``do_bench``, as ``tuner_bench.py`` measures it) runs on the same shapes in the
same process. The table shows registers and spills, each shape's fraction of cuBLAS and their geometric mean.
"""

from __future__ import annotations

import argparse
import sys

from benchmarks.tuner_bench import cublas_tflops
from harness_tools import EvaluationConfig, create_backend, evaluate, resolve_task
from harness_tools.run.timing import geomean
from harness_tools.task import candidate as candidates

DEFAULT = ["BM=128,BN=128,BK=16,TM=8,TN=8,MINB=1,WIDE_MIN=-1", "BM=128,BN=128,BK=8,TM=8,TN=8,MINB=1,WIDE_MIN=0",
           "BM=128,BN=128,BK=8,TM=8,TN=8,MINB=1,WIDE_MIN=128", "BM=128,BN=128,BK=16,TM=8,TN=8,MINB=1,WIDE_MIN=128",
           "BM=256,BN=128,BK=16,TM=16,TN=8,MINB=1,WIDE_MIN=-1"]  # the last one is outside the space (TM=16)


def parse_config(text: str) -> dict[str, int]:
    try:
        return {key.strip(): int(value) for key, value in (item.split("=") for item in text.split(","))}
    except ValueError:
        raise SystemExit(f"--config wants NAME=INT,NAME=INT,...; got {text!r}") from None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", help="NAME=INT,... (repeatable); default: a fixed set")
    args = parser.parse_args()
    task = resolve_task("sgemm")
    cases = task.spec.cases_for(["performance"], "cuda")
    shapes = [dict(c.sizes) for c in cases]
    rows = []
    backend = create_backend("cuda")
    try:
        for text in args.config or DEFAULT:
            result = evaluate(task, candidates.tuned(task, parse_config(text)), backend, EvaluationConfig(seed=1))
            rows.append((text, result))
    finally:
        backend.close()
    cublas = cublas_tflops(shapes)
    print("cuBLAS fp32: " + ", ".join(f"{name} {tflops:.2f} TFLOP/s" for name, tflops in cublas.items()))
    print(f"{'configuration':<42}{'regs':>6}{'spill B':>9}  " + "".join(f"{name:>18}" for name in cublas) + f"{'geomean':>10}")
    for text, result in rows:
        r = result.compile.resources
        regs, spill = (r.registers, r.spill_store_bytes or 0) if r else ("-", "-")
        if not result.correct:
            print(f"{text:<42}{regs:>6}{spill:>9}  NOT CORRECT: {result.failure}")
            continue
        medians = {c.name: c.median_ms for c in result.cases if c.role == "performance"}
        fractions = []
        for case, name in zip(cases, cublas):
            s = case.sizes
            fractions.append(2 * s["M"] * s["N"] * s["K"] / (medians[case.name] * 1e-3) / 1e12 / cublas[name])
        print(f"{text:<42}{regs:>6}{spill:>9}  " + "".join(f"{f:>18.1%}" for f in fractions) + f"{geomean(fractions):>10.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
