"""Is a wrong answer repeatable? The first mismatching validation case is run once more on the same inputs.

Two runs of a deterministic kernel on the same inputs write the same bytes. When they differ, the kernel's result
depends on how its threads were scheduled: a missing ``__syncthreads()``, an unsynchronised update of shared or
global memory, a read of memory no thread wrote in this run. That is evidence of a race, not a pattern guess, and
the hint says so (``failure_hints``). When they agree, the wrong answer is deterministic, which points away from a
race. Only outputs the first run downloaded are re-read (those compared on the host, and failures the device decided:
the re-run downloads them without comparing); the re-run's own verdict is not used, only its bytes. The re-run gets ``RERUN_FACTOR`` times the first run's time (at least ``RERUN_MIN_S``): a
kernel that hangs only when run again loses that, not the rest of the evaluation's budget.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from harness_tools.backends.contract import CaseRequest, CaseRun
from harness_tools.backends.protocols import ExecutionBackend
from harness_tools.check.worker_files import load_output, open_worker_file

RERUN_FACTOR = 10
RERUN_MIN_S = 2.0


def rerun_differences(backend: ExecutionBackend, request: CaseRequest, first: CaseRun, out_dir: Path,
                      left_s: float) -> dict[str, int] | None:
    """Elements of each output that differ between ``first`` and a second run of ``request``; None when the
    second run did not complete or an output cannot be read back (nothing is claimed then). ``left_s``: what is
    left of the evaluation's budget."""
    first_s = (first.load_ms + first.setup_ms + first.run_ms + first.collect_ms) / 1e3
    timeout_s = min(left_s, max(RERUN_MIN_S, RERUN_FACTOR * first_s))
    rerun_dir = out_dir.parent / (out_dir.name + "-rerun")
    rerun_dir.mkdir(parents=True, exist_ok=True)
    try:
        args = [a.model_copy(update={"check": None}) if a.name in first.outputs else a for a in request.args]
        again = request.model_copy(update={"output_dir": str(rerun_dir), "args": args})
        return _compared(backend.run_case(again, timeout_s), first, out_dir, rerun_dir)
    finally:
        shutil.rmtree(rerun_dir, ignore_errors=True)  # evidence read; a kept run folder keeps the first run only


def _compared(second: CaseRun, first: CaseRun, out_dir: Path, rerun_dir: Path) -> dict[str, int] | None:
    if second.status != "ok" or second.worker_restarted:
        return None
    differences: dict[str, int] = {}
    for name, path in first.outputs.items():
        a, b = _read(path, out_dir), _read(second.outputs.get(name), rerun_dir)
        if a is None or b is None or a.shape != b.shape or a.dtype != b.dtype:
            return None
        differences[name] = _differing_elements(a, b)
    return differences


def _read(path: str | None, root: Path) -> np.ndarray | None:
    handle = open_worker_file(path, root)  # the worker runs candidate code: only its files inside root are read
    return None if handle is None else np.asarray(load_output(handle))


def _differing_elements(a: np.ndarray, b: np.ndarray) -> int:
    """Bitwise, so that two NaNs with the same bits agree and -0.0 differs from 0.0."""
    width = a.dtype.itemsize
    as_bytes = np.ascontiguousarray(a).view(np.uint8).reshape(-1, width)
    other = np.ascontiguousarray(b).view(np.uint8).reshape(-1, width)
    return int(np.count_nonzero((as_bytes != other).any(axis=1)))
