"""A jailed worker's start taken apart: the jail's probe, a jailed interpreter, the imports, side by side starts, a
lone cuda worker and one beside the compiler children ``optimize`` starts with it.

    python -m benchmarks.worker_start [--repeat 3]

Prints a table of seconds (each row's repeats). On a host without a GPU the cuda rows are left out. The start-up
(2.1-2.8 s before the first evaluate of every ``cudaopt optimize`` on the H100) waits for the first cuda worker;
this says which part of that start is the jail, the interpreter, the imports or the CUDA context.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from harness_tools.backends.cuda.backend import EXECUTOR, gpu_present, worker_jail
from harness_tools.run import jail
from harness_tools.run.worker import Worker

CUDA_IMPORTS = "import harness_tools.backends.cuda.executor"
COMPILER_IMPORTS = "import harness_tools.compile.child, harness_tools.run.worker"


def jailed(code: str, spec: jail.JailSpec) -> None:
    exit_code, output, _ = jail.run([sys.executable, "-P", "-c", code], spec, 120, merge=True)
    if exit_code != 0:
        raise RuntimeError(output[-800:])


def side_by_side(count: int, fn: Callable[[], None]) -> None:
    threads = [threading.Thread(target=fn) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def cuda_worker() -> None:
    worker = Worker(EXECUTOR, spec=worker_jail())
    worker.start()
    worker.close()


def cuda_worker_beside_compilers() -> None:
    from harness_tools.compile.child import SERVICE

    started = SERVICE.start_ahead(4)
    cuda_worker()
    for thread in started:
        thread.join()
    SERVICE.close()


def seconds(fn: Callable[[], None], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    started = time.perf_counter()
    state = jail.status()
    rows = [("the jail's probe (first in this process)", [time.perf_counter() - started])]
    plain, gpu = jail.JailSpec("benchmark"), worker_jail()
    cases: list[tuple[str, Callable[[], None]]] = [
        ("interpreter, unjailed", lambda: subprocess.run([sys.executable, "-P", "-c", "pass"], check=True)),
        ("interpreter, jailed", lambda: jailed("pass", plain)),
        ("import numpy, jailed", lambda: jailed("import numpy", plain)),
        ("the compiler child's imports, jailed", lambda: jailed(COMPILER_IMPORTS, plain)),
        ("5 jailed interpreters side by side", lambda: side_by_side(5, lambda: jailed("pass", plain))),
    ]
    if gpu_present():
        cases += [
            ("the cuda worker's imports, unjailed",
             lambda: subprocess.run([sys.executable, "-P", "-c", CUDA_IMPORTS], check=True)),
            ("the cuda worker's imports, jailed", lambda: jailed(CUDA_IMPORTS, gpu)),
            ("5 of those side by side", lambda: side_by_side(5, lambda: jailed(CUDA_IMPORTS, gpu))),
            ("a cuda worker, to ready, and its close", cuda_worker),
            ("the same beside 4 compiler children starting", cuda_worker_beside_compilers),
        ]
    for label, fn in cases:
        rows.append((label, seconds(fn, args.repeat)))
    print(f"jail: {'on' if state.active else 'off'} ({state.mechanism}); seconds, each of {args.repeat} runs")
    print("| step | seconds |")
    print("|---|---|")
    for label, values in rows:
        print(f"| {label} | {', '.join(f'{v:.3f}' for v in values)} |")


if __name__ == "__main__":
    main()
