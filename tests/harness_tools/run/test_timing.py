"""Timing statistics and the measurement method, driven by a scripted device timer."""

from __future__ import annotations

import math

import pytest

from harness_tools.run.timing import TimingPlan, geomean, measure, summarize


def test_summary_statistics():
    s = summarize([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (s.median_ms, s.min_ms, s.max_ms, s.mean_ms, s.n) == (3.0, 1.0, 5.0, 3.0, 5)
    assert s.iqr_ms == pytest.approx(2.0)  # quartiles 2 and 4
    assert s.cv == pytest.approx(math.sqrt(2) / 3)
    assert s.samples_ms == [4.0, 1.0, 3.0, 2.0, 5.0]


def test_summary_of_one_sample_and_of_none():
    assert summarize([2.5]).cv == 0.0
    with pytest.raises(ValueError):
        summarize([])


def test_geomean():
    assert geomean([1.0, 4.0]) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])


class ScriptedTimer:
    """Records the order of operations a backend would enqueue."""

    def __init__(self):
        self.ops: list[str] = []

    def flush_l2(self):
        self.ops.append("flush")

    def launch(self):
        self.ops.append("launch")

    def record(self, index, which):
        self.ops.append(f"{'start' if which == 0 else 'stop'}{index}")

    def elapsed_ms(self, count):
        self.ops.append("sync")
        return [float(i + 1) for i in range(count)]


def test_measure_flushes_outside_the_event_pair():
    timer = ScriptedTimer()
    samples, warmup = measure(timer, TimingPlan(warmup=2, reps=3))
    assert samples == [1.0, 2.0, 3.0] and warmup == 2  # no budget: no look during the warm-up
    assert timer.ops == ["flush", "launch", "flush", "launch",
                         "flush", "start0", "launch", "stop0",
                         "flush", "start1", "launch", "stop1",
                         "flush", "start2", "launch", "stop2", "sync"]


def test_measure_without_flush():
    timer = ScriptedTimer()
    measure(timer, TimingPlan(warmup=0, reps=1, flush_l2=False))
    assert timer.ops == ["start0", "launch", "stop0", "sync"]


def test_a_plan_with_a_bound_stops_at_the_first_look_whose_interval_lies_above_it():
    timer = ScriptedTimer()  # the i-th sample is i + 1 ms
    samples = measure(timer, TimingPlan(warmup=0, reps=30, flush_l2=False, stop_above_ms=0.5)).samples_ms
    assert samples == [1.0, 2.0, 3.0, 4.0, 5.0]  # five samples: their range, [1, 5], is the interval
    assert timer.ops[-2:] == ["stop4", "sync"] and timer.ops.count("sync") == 1

    timer = ScriptedTimer()
    samples = measure(timer, TimingPlan(warmup=0, reps=30, flush_l2=False, stop_above_ms=1.0)).samples_ms
    assert len(samples) == 10  # at 5 the interval starts at the bound itself; at 10 it starts at 2
    assert timer.ops.count("sync") == 2


def test_nothing_that_could_be_under_the_bound_is_cut_short():
    timer = ScriptedTimer()
    samples = measure(timer, TimingPlan(warmup=0, reps=12, flush_l2=False, stop_above_ms=2.5)).samples_ms
    assert len(samples) == 12  # at 5 and 10 the interval starts at 1 and 2: it could hold the bound
    assert timer.ops.count("sync") == 3  # two looks and the end; the last launch needs no look
    stats = summarize(samples, plan=TimingPlan(reps=12, stop_above_ms=2.5))
    assert stats.stopped_above_ms is None and stats.planned_reps is None

    timer = ScriptedTimer()
    assert len(measure(timer, TimingPlan(warmup=0, reps=12, flush_l2=False)).samples_ms) == 12
    assert timer.ops.count("sync") == 1  # no bound, no look: one synchronisation at the end, as always


def test_the_statistics_of_a_stopped_plan_say_so():
    stats = summarize([3.0, 1.0, 2.0, 4.0, 5.0], plan=TimingPlan(reps=30, stop_above_ms=0.5))
    assert (stats.n, stats.planned_reps, stats.stopped_above_ms, stats.median_ms) == (5, 30, 0.5, 3.0)


class SteadyTimer(ScriptedTimer):
    """Every launch takes ``ms``."""

    def __init__(self, ms: float):
        super().__init__()
        self.ms = ms

    def elapsed_ms(self, count):
        self.ops.append("sync")
        return [self.ms] * count


@pytest.mark.parametrize(("ms", "reps", "timed"), [
    (4.0, 30, 13),    # 50 ms of launches fit 12.5 of 4 ms: 13
    (26.0, 30, 10),   # a slow kernel keeps MIN_BUDGET_REPS
    (0.01, 30, 30),   # a fast kernel keeps its plan
    (4.0, 8, 8),      # a plan under the floor is not raised to it
])
def test_a_budget_cuts_a_slow_kernels_launches_after_one_look(ms, reps, timed):
    timer = SteadyTimer(ms)
    samples = measure(timer, TimingPlan(warmup=0, reps=reps, flush_l2=False, budget_ms=50.0)).samples_ms
    assert len(samples) == timed
    assert timer.ops.count("sync") == (2 if reps > 5 and timed > 5 else 1)  # one look after 5, then the end
    stats = summarize(samples, plan=TimingPlan(reps=reps, budget_ms=50.0))
    if timed < reps:
        assert (stats.n, stats.planned_reps, stats.budget_ms, stats.stopped_above_ms) == (timed, reps, 50.0, None)
    else:
        assert (stats.planned_reps, stats.budget_ms) == (None, None)


def test_a_budget_and_a_bound_together_stop_at_whichever_comes_first():
    timer = SteadyTimer(4.0)  # under the bound: the budget decides
    assert len(measure(timer, TimingPlan(warmup=0, reps=30, flush_l2=False, budget_ms=50.0,
                                     stop_above_ms=5.0)).samples_ms) == 13
    assert timer.ops.count("sync") == 3  # looks at 5 and 10 (the bound's), the end at 13

    timer = SteadyTimer(4.0)  # clearly above the bound at the first look: five samples, whatever the budget
    samples = measure(timer, TimingPlan(warmup=0, reps=30, flush_l2=False, budget_ms=50.0, stop_above_ms=1.0)).samples_ms
    assert len(samples) == 5 and timer.ops.count("sync") == 1
    stats = summarize(samples, plan=TimingPlan(reps=30, budget_ms=50.0, stop_above_ms=1.0))
    assert (stats.stopped_above_ms, stats.budget_ms, stats.planned_reps) == (1.0, None, 30)


@pytest.mark.parametrize(("ms", "warmup", "made"), [
    (26.0, 10, 2),    # a slow kernel: a fifth of the 50 ms budget is under one launch; never fewer than two
    (2.5, 10, 4),     # 10 ms of warm-up at 2.5 ms a launch
    (0.01, 10, 10),   # a fast kernel keeps its plan
    (2.5, 3, 3),      # a plan under the cut keeps its own
    (26.0, 1, 1),     # a plan of one is not raised
])
def test_a_budget_cuts_a_slow_kernels_warm_up_after_timing_the_first(ms, warmup, made):
    timer = SteadyTimer(ms)
    samples, warmed = measure(timer, TimingPlan(warmup=warmup, reps=12, flush_l2=False, budget_ms=50.0))
    assert warmed == made
    ops = timer.ops
    assert ops[:3] == ["start0", "launch", "stop0"] and ops[3] == "sync"  # the first warm-up launch is timed
    timed_from = ops.index("start0", 1)  # the timed launches reuse pair 0 after the warm-up
    assert ops[:timed_from].count("launch") == made
    stats = summarize(samples, plan=TimingPlan(reps=12, budget_ms=50.0), warmup=warmed)
    assert stats.warmup == made


def test_without_a_budget_the_warm_up_is_the_plans_and_untimed():
    timer = SteadyTimer(26.0)
    samples, warmed = measure(timer, TimingPlan(warmup=10, reps=3))
    assert warmed == 10 and len(samples) == 3
    assert timer.ops[:20] == ["flush", "launch"] * 10 and timer.ops.count("sync") == 1
