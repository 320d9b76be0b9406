"""How we time a kernel, and the statistics we report (DESIGN.md §5).

Method (:func:`measure`), on one stream:

1. ``warmup`` launches, each preceded by an L2 flush, so module load, lazy allocation and clock
   ramp-up stay out of the numbers (under a time budget, fewer for a slow kernel: :func:`budgeted_warmup`);
2. ``reps`` timed launches: flush L2 (on a GPU, a read of a zeroed buffer at least twice the L2 size,
   *outside* the event pair), record the start event, launch, record the stop event;
3. one synchronisation at the end, then every event pair's elapsed time is read.

Stopping early (``stop_above_ms``, e.g. the run's best on this case plus a margin): every :data:`LOOK_EVERY`
timed launches the samples so far are read (one synchronisation), and timing stops once the median's 95 %
interval lies wholly above that bound. A candidate clearly slower than the bound keeps an honest median of
fewer samples; nothing that could be faster is cut short.

A time budget (``budget_ms``, e.g. a search step's): after the first :data:`LOOK_EVERY` timed launches the samples
so far are read, and the count is cut to what fits the budget at their median, never below
:data:`MIN_BUDGET_REPS`. A slow kernel's median then rests on fewer samples (its interval says how sure); a fast
kernel's plan is untouched. Both stops are recorded with the planned count. The warm-up is cut the same way, to
about :data:`WARMUP_SHARE` of the budget at the first warm-up launch's time, never below :data:`MIN_WARMUP`: ramping
clocks up is a matter of milliseconds of work, not of a count of launches, and ten warm-up launches of matmul's 26 ms
baseline were 0.26 s of each head-to-head it took part in (the warm-up actually made is recorded).

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
from typing import NamedTuple, Protocol

from pydantic import BaseModel, Field

from harness_tools.run.statistics import Interval, median_interval

LOOK_EVERY = 5  # timed launches between looks when stopping early: 5 is the fewest whose range is a 94 % interval
MIN_BUDGET_REPS = 10  # a budget never cuts a case to fewer timed launches: a median with a 98 % interval of 8 ranks
WARMUP_SHARE = 0.2  # under a budget, warm-up launches take about this share of it ...
MIN_WARMUP = 2  # ... but never fewer than two: the first pays what only a first launch pays, the second runs warm


class TimingPlan(BaseModel):
    warmup: int = Field(10, ge=0, le=10_000)
    reps: int = Field(100, ge=1, le=100_000)
    flush_l2: bool = True
    stop_above_ms: float | None = Field(None, gt=0, description="stop timing once the median's interval lies wholly "
                                        f"above this (looked at every {LOOK_EVERY} timed launches)")
    budget_ms: float | None = Field(None, gt=0, description="about this many ms of timed launches at most: after "
                                    f"{LOOK_EVERY} launches the count is cut to what fits at their median, never "
                                    f"below {MIN_BUDGET_REPS}")


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
    budget_ms: float | None = Field(None, description="timing stopped after n of planned_reps launches: at their "
                                    "median, more would have taken over this plan's budget")
    warmup: int | None = Field(None, description="warm-up launches made before the timed ones (under a budget, "
                               "a slow kernel's are fewer than the plan's)")


class DeviceTimer(Protocol):
    """What :func:`measure` needs from a backend; every call only enqueues work on the stream."""

    def flush_l2(self) -> None: ...
    def launch(self) -> None: ...
    def record(self, index: int, which: int) -> None:
        """Record event ``which`` (0 start, 1 stop) of pair ``index``."""
    def elapsed_ms(self, count: int) -> list[float]:
        """Synchronise, then return the elapsed time of pairs 0..count-1."""


class Measured(NamedTuple):
    samples_ms: list[float]
    warmup: int  # warm-up launches made


def measure(timer: DeviceTimer, plan: TimingPlan) -> Measured:
    warmup = warm_up(timer, plan)
    target, done, seen = plan.reps, 0, []
    while done < target:
        if plan.flush_l2:
            timer.flush_l2()
        timer.record(done, 0)
        timer.launch()
        timer.record(done, 1)
        done += 1
        if look_due(done, target, plan):
            seen = timer.elapsed_ms(done)
            target = reps_after_look(seen, plan)
    return Measured(seen if len(seen) == done else timer.elapsed_ms(done), warmup)


def warm_up(timer: DeviceTimer, plan: TimingPlan) -> int:
    """The plan's warm-up launches, returning how many were made. Under a budget the first is timed (event pair 0,
    which the timed launches reuse) to size the rest (:func:`budgeted_warmup`)."""
    made, count = 0, plan.warmup
    while made < count:
        if plan.flush_l2:
            timer.flush_l2()
        sized = made == 0 and plan.budget_ms is not None
        if sized:
            timer.record(0, 0)
        timer.launch()
        if sized:
            timer.record(0, 1)
            count = budgeted_warmup(timer.elapsed_ms(1)[0], plan)
        made += 1
    return made


def budgeted_warmup(first_ms: float, plan: TimingPlan) -> int:
    """How many warm-up launches in all, the first having taken ``first_ms``: the plan's, cut under a budget to
    about :data:`WARMUP_SHARE` of it, never below :data:`MIN_WARMUP`."""
    if plan.budget_ms is None or first_ms <= 0:
        return plan.warmup
    return min(plan.warmup, max(MIN_WARMUP, math.ceil(WARMUP_SHARE * plan.budget_ms / first_ms)))


def look_due(done: int, target: int, plan: TimingPlan) -> bool:
    """Whether to look at the samples after ``done`` of ``target`` timed launches (the last one needs no look):
    every few launches for a bound, once for a budget."""
    if done % LOOK_EVERY or done >= target:
        return False
    return plan.stop_above_ms is not None or (plan.budget_ms is not None and done == LOOK_EVERY)


def reps_after_look(samples_ms: Sequence[float], plan: TimingPlan) -> int:
    """How many timed launches to take in all, from the samples so far: none more once clearly above the bound,
    else the plan's, cut to what fits its budget."""
    if clearly_above(samples_ms, plan):
        return len(samples_ms)
    return budgeted_reps(samples_ms, plan)


def budgeted_reps(samples_ms: Sequence[float], plan: TimingPlan) -> int:
    if plan.budget_ms is None:
        return plan.reps
    per_launch = statistics.median(samples_ms)
    fits = math.ceil(plan.budget_ms / per_launch) if per_launch > 0 else plan.reps
    return min(plan.reps, max(MIN_BUDGET_REPS, len(samples_ms), fits))


def clearly_above(samples_ms: Sequence[float], plan: TimingPlan) -> bool:
    """Whether the median's interval lies wholly above the plan's bound: timing stops there."""
    return plan.stop_above_ms is not None and median_interval(samples_ms).low_ms > plan.stop_above_ms


def summarize(samples_ms: Sequence[float], clock: str = "cuda-events", plan: TimingPlan | None = None,
              warmup: int | None = None) -> TimingStats:
    """The statistics of ``samples_ms``; with the ``plan`` they were timed by, whether it stopped early; with
    ``warmup``, the warm-up launches made before them."""
    if not samples_ms:
        raise ValueError("no timing samples")
    data = sorted(float(s) for s in samples_ms)
    mean = statistics.fmean(data)
    stdev = statistics.pstdev(data) if len(data) > 1 else 0.0
    cuts = plan is not None and (plan.stop_above_ms is not None or plan.budget_ms is not None)
    cut = cuts and plan is not None and len(data) < plan.reps
    above = cut and plan is not None and clearly_above(data, plan)
    budget = plan.budget_ms if cut and not above and plan is not None else None
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
        stopped_above_ms=plan.stop_above_ms if above and plan is not None else None,
        planned_reps=plan.reps if cut and plan is not None else None,
        budget_ms=budget,
        warmup=warmup,
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
