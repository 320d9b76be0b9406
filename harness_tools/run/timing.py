"""How we time a kernel, and the statistics we report (DESIGN.md §5).

Method (:func:`measure`), on one stream:

1. ``warmup`` launches, each preceded by an L2 flush, so module load, lazy allocation and clock
   ramp-up stay out of the numbers;
2. ``reps`` timed launches: flush L2 (on a GPU, a read of a zeroed buffer at least twice the L2 size,
   *outside* the event pair), record the start event, launch, record the stop event;
3. one synchronisation at the end, then every event pair's elapsed time is read.

Stopping early (``stop_above_ms``, e.g. the run's best on this case plus a margin): every :data:`LOOK_EVERY`
timed launches the samples so far are read (one synchronisation), and timing stops once the median's 95 %
interval lies wholly above that bound. A candidate clearly slower than the bound keeps an honest median of
fewer samples; nothing that could be faster is cut short.

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

LOOK_EVERY = 5  # timed launches between looks when stopping early: 5 is the fewest whose range is a 94 % interval


class TimingPlan(BaseModel):
    warmup: int = Field(10, ge=0, le=10_000)
    reps: int = Field(100, ge=1, le=100_000)
    flush_l2: bool = True
    stop_above_ms: float | None = Field(None, gt=0, description="stop timing once the median's interval lies wholly "
                                        f"above this (looked at every {LOOK_EVERY} timed launches)")


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
    stopped_above_ms: float | None = Field(None, description="timing stopped early, after n of planned_reps "
                                           "launches: the median's interval lay wholly above this")
    planned_reps: int | None = Field(None, description="the plan's timed launches, when timing stopped early")


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
        if look_due(i + 1, plan):
            so_far = timer.elapsed_ms(i + 1)
            if clearly_above(so_far, plan):
                return so_far
    return timer.elapsed_ms(plan.reps)


def look_due(done: int, plan: TimingPlan) -> bool:
    """Whether to look at the samples after ``done`` timed launches (the last one needs no look)."""
    return plan.stop_above_ms is not None and done % LOOK_EVERY == 0 and done < plan.reps


def clearly_above(samples_ms: Sequence[float], plan: TimingPlan) -> bool:
    """Whether the median's interval lies wholly above the plan's bound: timing stops there."""
    return plan.stop_above_ms is not None and median_interval(samples_ms).low_ms > plan.stop_above_ms


def summarize(samples_ms: Sequence[float], clock: str = "cuda-events", plan: TimingPlan | None = None) -> TimingStats:
    """The statistics of ``samples_ms``; with the ``plan`` they were timed by, whether it stopped early."""
    if not samples_ms:
        raise ValueError("no timing samples")
    data = sorted(float(s) for s in samples_ms)
    mean = statistics.fmean(data)
    stdev = statistics.pstdev(data) if len(data) > 1 else 0.0
    stopped = plan is not None and plan.stop_above_ms is not None and len(data) < plan.reps
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
        stopped_above_ms=plan.stop_above_ms if stopped and plan is not None else None,
        planned_reps=plan.reps if stopped and plan is not None else None,
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
