"""Confidence intervals of medians and scores: the textbook ranks, and the coverage they promise, measured."""

from __future__ import annotations

import random

import pytest

from harness_tools.run.statistics import Interval, clearly_faster, median_interval, score_interval
from harness_tools.run.timing import summarize


@pytest.mark.parametrize(("n", "low", "high"), [(10, 2, 9), (30, 10, 21), (100, 40, 61)])
def test_median_interval_uses_the_order_statistics_of_the_tables(n, low, high):
    got = median_interval(list(range(1, n + 1)))
    assert (got.low_ms, got.high_ms) == (low, high)
    assert got.coverage >= 0.95


def test_too_few_samples_give_the_whole_range_with_its_true_coverage():
    got = median_interval([3.0, 1.0, 2.0, 5.0, 4.0])
    assert (got.low_ms, got.high_ms, got.coverage) == (1.0, 5.0, 0.9375)


@pytest.mark.parametrize("n", [10, 30, 100])
def test_the_interval_holds_the_true_median_as_often_as_it_says(n):
    """Skewed, kernel-like timings (lognormal, true median 1.0): the promised >= 95 % coverage, measured."""
    rng = random.Random(n)
    trials = 2000
    hits = 0
    for _ in range(trials):
        ci = median_interval([rng.lognormvariate(0.0, 0.3) for _ in range(n)])
        hits += ci.low_ms <= 1.0 <= ci.high_ms
    assert hits / trials >= 0.94, hits / trials


def test_score_interval_is_the_geomean_of_the_case_bounds():
    got = score_interval([Interval(low_ms=1.0, high_ms=4.0, coverage=0.96), Interval(low_ms=4.0, high_ms=9.0, coverage=0.97)])
    assert got.low_ms == pytest.approx(2.0) and got.high_ms == pytest.approx(6.0) and got.coverage == 0.96


def test_faster_only_when_the_intervals_do_not_overlap():
    best = Interval(low_ms=1.00, high_ms=1.10, coverage=0.95)
    assert clearly_faster(Interval(low_ms=0.80, high_ms=0.99, coverage=0.95), best)
    assert not clearly_faster(Interval(low_ms=0.80, high_ms=1.00, coverage=0.95), best)  # touching is not beating
    assert not clearly_faster(Interval(low_ms=1.20, high_ms=1.30, coverage=0.95), best)


def test_a_gain_under_the_floor_is_not_faster_however_narrow_the_intervals():
    # on the H200 identical code drifts by up to a few % between evaluations while each one's interval is ~0.05 %
    best = Interval(low_ms=1.000, high_ms=1.001, coverage=0.95)
    narrow_gain = Interval(low_ms=0.9950, high_ms=0.9955, coverage=0.95)  # 0.45 % below, intervals 0.05 % wide
    assert clearly_faster(narrow_gain, best) and not clearly_faster(narrow_gain, best, min_gain=0.01)
    assert clearly_faster(Interval(low_ms=0.980, high_ms=0.985, coverage=0.95), best, min_gain=0.01)


def test_every_timing_summary_carries_its_median_interval():
    stats = summarize([float(x) for x in range(1, 101)])
    assert stats.median_ci is not None and (stats.median_ci.low_ms, stats.median_ci.high_ms) == (40.0, 61.0)
