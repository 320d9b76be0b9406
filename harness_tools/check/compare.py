"""Compare a kernel's output with the float64 reference.

An element passes when ``|out - ref| <= atol + rtol * |ref|``. Non-finite values get no benefit of the
doubt: NaN or ±Inf where the reference is finite always fails (a NaN means an element was never
written, since outputs start poisoned), and where the reference itself is non-finite the output must
match it exactly (NaN for NaN, the same infinity).

An output passes when at most ``max_mismatches`` of its elements are outside tolerance (the buffer's
mismatch budget, default 0: for 0/1 or integer outputs where a few ties may go either way) and none of them
is NaN or ±Inf where the reference is finite: no budget lets an unwritten element through. A failing output
also gets a map of where it is wrong (:mod:`harness_tools.check.mismatch_map`), binned with the same predicate.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Literal, TypeVar

import numpy as np
from pydantic import BaseModel, Field

from harness_tools.check.mismatch_map import BinCounter, MismatchMap, bin_grid
from harness_tools.task.expressions import evaluate_expression
from harness_tools.task.spec import Tolerance


class Mismatch(BaseModel):
    index: list[int]
    flat_index: int
    got: float
    expected: float


class OutputComparison(BaseModel):
    buffer: str
    passed: bool
    elements: int
    mismatches: int
    max_abs_err: float
    max_rel_err: float
    nonfinite: int = Field(description="NaN or Inf where the reference is finite")
    nans: int = Field(0, description="NaN elements of the output")
    infs: int = Field(0, description="±Inf elements of the output")
    first_mismatch: Mismatch | None = None
    atol: float
    rtol: float
    max_mismatches: int = Field(0, description="elements that may be outside tolerance (none of them NaN or Inf "
                                               "where the reference is finite)")
    judged_by: Literal["tolerance", "check"] = Field(
        "tolerance", description="what decided `passed`: the element-wise comparison, or the task's custom check "
                                 "(check.replaces_tolerance; the statistics are still the comparison's)")
    compared_on: Literal["host", "device"] = Field(
        "host", description="where the comparison ran: on the device the output is not downloaded (the oracle is "
                            "held there); verdicts are the same (docs/oracle.md)")
    mismatch_map: MismatchMap | None = Field(
        None, description="where a failing output is wrong, binned (harness_tools.check.mismatch_map); None when "
                          "it passed")


CHUNK = 1 << 20  # elements per pass: keeps the float64 temporaries in cache
WORKERS = max(1, min(8, os.cpu_count() or 1))
T = TypeVar("T")


def compare(buffer: str, output: np.ndarray, reference: np.ndarray, tolerance: Tolerance,
            sizes: dict[str, int], max_mismatches: int = 0) -> OutputComparison:
    """Element-wise comparison of one output; it passes with at most ``max_mismatches`` elements outside
    tolerance and no NaN or Inf where the reference is finite."""
    if max_mismatches < 0:
        raise ValueError(f"{buffer}: max_mismatches {max_mismatches} is negative")
    if output.shape != reference.shape:
        raise ValueError(f"{buffer}: output shape {output.shape} differs from reference shape {reference.shape}")
    atol = float(evaluate_expression(tolerance.atol, sizes))
    rtol = float(tolerance.rtol)
    got_all, ref_all = output.reshape(-1), reference.reshape(-1)
    runs = _runs(got_all.size)
    acc = _Accumulator()
    for part in _over_runs(lambda run: _compare_run(got_all, ref_all, run, atol, rtol), runs):
        for chunk in part:
            acc.add(*chunk)
    first = None
    if acc.first is not None:
        i = acc.first
        first = Mismatch(index=[int(x) for x in np.unravel_index(i, output.shape)], flat_index=i,
                         got=float(got_all[i]), expected=float(ref_all[i]))
    passed = acc.mismatches <= max_mismatches and acc.nonfinite == 0
    mismatch_map = None
    if not passed:  # a second pass, on failures only
        grid = bin_grid(output.shape)
        counters = _over_runs(lambda run: _map_run(got_all, ref_all, run, atol, rtol, BinCounter(grid)), runs)
        for counter in counters[1:]:
            counters[0].merge(counter)
        mismatch_map = counters[0].result()
    return OutputComparison(
        buffer=buffer, passed=passed, elements=int(ref_all.size),
        mismatches=acc.mismatches, max_abs_err=acc.max_abs, max_rel_err=acc.max_rel, nonfinite=acc.nonfinite,
        nans=acc.nans, infs=acc.infs,
        first_mismatch=first, atol=atol, rtol=rtol, max_mismatches=max_mismatches, mismatch_map=mismatch_map,
    )


def mismatch_message(o: OutputComparison) -> str:
    """One line on a failed comparison: how many elements, the budget, the tolerance, the first bad element."""
    budget = f"budget {o.max_mismatches}; " if o.max_mismatches else ""
    text = f"{o.buffer}: {o.mismatches}/{o.elements} elements outside tolerance ({budget}atol={o.atol:g}, rtol={o.rtol:g})"
    if o.nonfinite and o.mismatches <= o.max_mismatches:
        text += f"; {o.nonfinite} of them NaN or Inf where the reference is finite, which no budget lets pass"
    m = o.first_mismatch
    return f"{text}; first at {m.index}: got {m.got!r}, expected {m.expected!r}" if m else f"{o.buffer}: mismatch"


def _runs(size: int) -> list[list[int]]:
    """The chunk starts of a flat output, in contiguous runs: one per thread for a big output, else a single one.
    NumPy releases the GIL in these loops, so big outputs are compared on several cores."""
    starts = list(range(0, size, CHUNK))
    if len(starts) < 4 or WORKERS == 1:
        return [starts] if starts else []
    per_run = -(-len(starts) // WORKERS)
    return [starts[i : i + per_run] for i in range(0, len(starts), per_run)]


def _over_runs(work: Callable[[list[int]], T], runs: list[list[int]]) -> list[T]:
    """``work`` of every run, in run order (so results merge in chunk order)."""
    return list(_pool().map(work, runs)) if len(runs) > 1 else [work(run) for run in runs]


def _chunks(got_all: np.ndarray, ref_all: np.ndarray,
            starts: list[int]) -> Iterator[tuple[int, np.ndarray, np.ndarray, _Scratch]]:
    """(start, output, reference, scratch) of each chunk of a run: both in float64, in the run's own work arrays."""
    scratch = _Scratch(min(CHUNK, got_all.size - starts[0]))
    for start in starts:
        n = min(CHUNK, got_all.size - start)
        got, ref = scratch.got[:n], scratch.ref[:n]
        np.copyto(got, got_all[start : start + n], casting="unsafe")
        np.copyto(ref, ref_all[start : start + n], casting="unsafe")
        yield start, got, ref, scratch


def _compare_run(got_all: np.ndarray, ref_all: np.ndarray, starts: list[int], atol: float, rtol: float) -> list[tuple]:
    """(start, mismatches, first bad index, max abs, max rel, non-finite, NaNs, Infs) for each chunk of one run."""
    out = []
    for start, got, ref, scratch in _chunks(got_all, ref_all, starts):
        bad, max_abs, max_rel, nonfinite, nans, infs = _chunk_errors(got, ref, atol, rtol, scratch)
        count = int(np.count_nonzero(bad))
        out.append((start, count, start + int(np.argmax(bad)) if count else None, max_abs, max_rel, nonfinite,
                    nans, infs))
    return out


def _map_run(got_all: np.ndarray, ref_all: np.ndarray, starts: list[int], atol: float, rtol: float,
             counter: BinCounter) -> BinCounter:
    """``counter`` with the mismatches and the NaN/Inf (where the reference is finite) of one run's chunks."""
    for start, got, ref, scratch in _chunks(got_all, ref_all, starts):
        bad, ref_finite, got_finite = _outside(got, ref, atol, rtol, scratch)
        nonfinite = None
        if not got_finite.all():
            nonfinite = np.logical_not(got_finite, out=got_finite)
            np.logical_and(nonfinite, ref_finite, out=nonfinite)
        counter.add(start, bad, nonfinite)
    return counter


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(WORKERS, thread_name_prefix="cudaopt-compare")
        return _POOL


class _Scratch:
    """Per-comparison work arrays, reused chunk after chunk: fresh temporaries for every chunk of a
    multi-GB comparison cost a page fault per 4 KiB and made comparison memory-allocator-bound."""

    def __init__(self, n: int):
        self.got, self.ref, self.err, self.aux = (np.empty(n, np.float64) for _ in range(4))
        self.bad, self.ref_finite, self.got_finite = (np.empty(n, np.bool_) for _ in range(3))


def _outside(got: np.ndarray, ref: np.ndarray, atol: float, rtol: float, scratch: _Scratch):
    """The module docstring's predicate over one chunk, in ``scratch``: (outside tolerance, reference finite,
    output finite) masks; ``scratch.err`` is left holding |got - ref|."""
    n = got.size
    err, aux, bad = scratch.err[:n], scratch.aux[:n], scratch.bad[:n]
    ref_finite, got_finite = scratch.ref_finite[:n], scratch.got_finite[:n]
    np.isfinite(ref, out=ref_finite)
    np.isfinite(got, out=got_finite)
    with np.errstate(invalid="ignore", over="ignore"):
        np.subtract(got, ref, out=err)
        np.abs(err, out=err)
        np.abs(ref, out=aux)
        np.multiply(aux, rtol, out=aux)
        np.add(aux, atol, out=aux)
        np.less_equal(err, aux, out=bad)
        np.logical_not(bad, out=bad)  # NaN compares false: NaN is bad
    if not ref_finite.all():  # where the reference is not finite only an identical value passes
        special = ~ref_finite
        same = (np.isnan(ref) & np.isnan(got)) | (ref == got)
        bad[special] = ~same[special]
    return bad, ref_finite, got_finite


def _chunk_errors(got: np.ndarray, ref: np.ndarray, atol: float, rtol: float, scratch: _Scratch):
    """(bad mask, max abs err, max rel err, non-finite outputs where the reference is finite, NaNs, Infs)."""
    bad, ref_finite, got_finite = _outside(got, ref, atol, rtol, scratch)
    err, aux = scratch.err[: got.size], scratch.aux[: got.size]
    nans = infs = 0
    if not got_finite.all():
        nans = int(np.count_nonzero(np.isnan(got)))
        infs = int(np.count_nonzero(~got_finite)) - nans
        nonfinite = int(np.count_nonzero(ref_finite & ~got_finite))
        if nonfinite:
            return bad, float("inf"), float("inf"), nonfinite, nans, infs
    np.logical_and(ref_finite, got_finite, out=got_finite)  # both finite
    np.abs(ref, out=aux)
    np.maximum(aux, np.finfo(np.float64).tiny, out=aux)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        np.divide(err, aux, out=aux)
    if got_finite.all():
        return bad, float(err.max()), float(aux.max()), 0, nans, infs
    if not got_finite.any():
        return bad, 0.0, 0.0, 0, nans, infs
    return bad, float(err[got_finite].max()), float(aux[got_finite].max()), 0, nans, infs


class _Accumulator:
    def __init__(self):
        self.mismatches = self.nonfinite = self.nans = self.infs = 0
        self.max_abs = self.max_rel = 0.0
        self.first: int | None = None

    def add(self, start: int, count: int, first: int | None, max_abs: float, max_rel: float, nonfinite: int,
            nans: int, infs: int) -> None:
        if count and self.first is None:
            self.first = first
        self.mismatches += count
        self.nonfinite += nonfinite
        self.nans += nans
        self.infs += infs
        self.max_abs, self.max_rel = max(self.max_abs, max_abs), max(self.max_rel, max_rel)


MAX_MAPS = 4  # failing outputs per evaluation that keep their mismatch map


def keep_largest_maps(outputs: list[OutputComparison], limit: int = MAX_MAPS) -> None:
    """Mismatch maps for the ``limit`` largest failing outputs of one evaluation only (ties: the earlier): a kernel
    wrong everywhere would otherwise fill its record with near-identical maps, and a large output's map shows most."""
    mapped = [o for o in outputs if o.mismatch_map is not None]
    kept = {id(o) for o in sorted(mapped, key=lambda o: -o.elements)[:limit]}  # sorted() is stable
    for output in mapped:
        if id(output) not in kept:
            output.mismatch_map = None
