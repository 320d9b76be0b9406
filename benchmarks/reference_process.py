"""The convolution example's float64 oracle computed in this process and in the reference process, with this
process idle and beside a thread that keeps the interpreter busy (as imports, the MCP SDK or the tuner's model do).

    python -m benchmarks.reference_process [--size 2048] [--busy-limit 120]

Prints a table of seconds. The in-process call beside the busy thread is stopped after ``--busy-limit`` seconds (it
waits for the interpreter's lock after each of its NumPy calls: on a 2-core host it took 398 s at 4096²).
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
from pathlib import Path

from harness_tools.check.case_request import case_inputs
from harness_tools.check.numpy_reference import numpy_outputs
from harness_tools.check.reference_process import REFERENCES
from harness_tools.task.loading import load_task

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "convolution"


class Busy:
    """A thread that holds the interpreter's lock whenever it can, for the duration of a ``with``."""

    def __enter__(self) -> Busy:  # noqa: PYI034 - Self needs 3.11's typing, this runs on 3.11 too
        self._stop = False
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        return self

    def _spin(self) -> None:
        count = 0
        while not self._stop:
            count += 1

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        self._thread.join()


def timed(fn, limit_s: float | None = None) -> str:
    """Seconds ``fn`` took, or ``> limit`` when it had not ended by then (it runs on, in a daemon thread)."""
    done = threading.Event()
    started = time.perf_counter()
    threading.Thread(target=lambda: (fn(), done.set()), daemon=True).start()
    if not done.wait(limit_s):
        return f"> {limit_s:.0f}"
    return f"{time.perf_counter() - started:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2048, help="image width and height (the filter is 17×17)")
    parser.add_argument("--busy-limit", type=float, default=120.0)
    args = parser.parse_args()
    task = load_task(EXAMPLE)
    case = next(c for c in task.spec.cases if c.role == "performance")
    case = case.model_copy(update={"name": f"bench_{args.size}", "sizes": {"W": args.size, "H": args.size,
                                                                            "FW": 17, "FH": 17}})
    inputs, files = case_inputs(task, case, 1)
    REFERENCES.outputs(task, case, files)  # the process started (its own start is not what is compared)
    rows = []
    for busy in (False, True):
        with Busy() if busy else contextlib.nullcontext():  # the reference process first: a call here that
            away = timed(lambda: REFERENCES.outputs(task, case, files))  # ran past its limit runs on meanwhile
            here = timed(lambda: numpy_outputs(task, case, inputs), args.busy_limit if busy else None)
        rows.append((busy, here, away))
    print(f"convolution {args.size}² with a 17×17 filter, float64 oracle, seconds")
    print("| this process | in this process | in the reference process |")
    print("|---|---:|---:|")
    for busy, here, away in rows:
        print(f"| {'beside a busy thread' if busy else 'idle'} | {here} | {away} |")


if __name__ == "__main__":
    main()
