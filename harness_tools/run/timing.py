"""How we time a kernel, and the statistics we report (DESIGN.md §5).

Method (:func:`measure`), on one stream:

1. ``warmup`` launches, each preceded by an L2 flush, so module load, lazy allocation and clock
   ramp-up stay out of the numbers;
2. ``reps`` timed launches: flush L2 (on a GPU, a read of a zeroed buffer at least twice the L2 size,
   *outside* the event pair), record the start event, launch, record the stop event;
3. one synchronisation at the end, then every event pair's elapsed time is read.

Each launch thus starts with a cold L2 holding only clean lines. (A memset flush would leave dirty lines
whose write-back lands inside the timed kernel: ~10 µs per launch on an H200, which Nsight Compute's own
flush does not charge.) Statistics (:func:`summarize`) keep the samples: median, min, max, mean,
inter-quartile range, the coefficient of variation (stdev / mean) and a confidence interval of the median
(:mod:`harness_tools.run.statistics`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, Field

from harness_tools.run.statistics import Interval, median_interval


class TimingPlan(BaseModel):
    warmup: int = Field(10, ge=0, le=10_000)
    reps: int = Field(100, ge=1, le=100_000)
    flush_l2: bool = True


class TimingStats(BaseModel):
    clock: str = Field("cuda-events", description="what measured: cuda-events, or cpu-wall-clock on the cpu backend")
    median_ms: float
    min_ms: float
    max_ms: float
    mean_ms: float
    iqr_ms: float
    cv: float = Field(description="coefficient of variation: stdev / mean")
    n: int
    samples_ms: list[float] = Field(default_factory=list)
    median_ci: Interval | None = Field(None, description="95 % confidence interval of the median (order statistics)")


class DeviceTimer(Protocol):
    """What :func:`measure` needs from a backend; every call only enqueues work on the stream."""

    def flush_l2(self) -> None: ...
    def launch(self) -> None: ...
    def record(self, index: int, which: int) -> None:
        """Record event ``which`` (0 start, 1 stop) of pair ``index``."""
    def elapsed_ms(self, count: int) -> list[float]:
        """Synchronise, then return the elapsed time of pairs 0..count-1."""


def measure(timer: DeviceTimer, plan: TimingPlan) -> list[float]:
    for _ in range(plan.warmup):
        if plan.flush_l2:
            timer.flush_l2()
        timer.launch()
    for i in range(plan.reps):
        if plan.flush_l2:
            timer.flush_l2()
        timer.record(i, 0)
        timer.launch()
        timer.record(i, 1)
    return timer.elapsed_ms(plan.reps)


def summarize(samples_ms: Sequence[float], clock: str = "cuda-events") -> TimingStats:
    if not samples_ms:
        raise ValueError("no timing samples")
    data = sorted(float(s) for s in samples_ms)
    mean = statistics.fmean(data)
    stdev = statistics.pstdev(data) if len(data) > 1 else 0.0
    return TimingStats(
        clock=clock,
        median_ms=statistics.median(data),
        min_ms=data[0],
        max_ms=data[-1],
        mean_ms=mean,
        iqr_ms=_quantile(data, 0.75) - _quantile(data, 0.25),
        cv=stdev / mean if mean > 0 else 0.0,
        n=len(data),
        samples_ms=list(samples_ms),
        median_ci=median_interval(data),
    )


def geomean(values: Sequence[float]) -> float:
    if not values or any(v <= 0 for v in values):
        raise ValueError(f"geometric mean needs positive values, got {list(values)}")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _quantile(sorted_data: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default method)."""
    pos = q * (len(sorted_data) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_data) - 1)
    return sorted_data[lo] + (sorted_data[hi] - sorted_data[lo]) * (pos - lo)
