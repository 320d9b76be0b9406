"""How sure a timing is: a distribution-free confidence interval for a median, and for a score.

Median: with ``n`` samples sorted, the interval between the ``j``-th smallest and the ``j``-th largest
covers the true median with probability ``1 - 2 * P(B <= j - 1)`` for ``B ~ Binomial(n, 1/2)`` (order
statistics; no assumption about the distribution, which for kernel timings is skewed and often bimodal).
We take the narrowest such interval whose coverage is at least 95 %; with fewer than 6 samples no
interval reaches 95 %, so the whole range is given with its (lower) coverage.

Score (the geometric mean of the performance cases' medians): the geometric means of the cases' lower
and of their upper bounds. That is a bound that holds when every case's interval holds, so it is
conservative, which is the side to err on when deciding that something got faster.

Deciding "faster": :func:`clearly_faster` only when the intervals do not overlap *and* the gap is at least a
floor: intervals from one evaluation's samples say nothing of the drift between evaluations (buffer placement,
clocks), which on the H200 moves identical code by 0.2-3.5 % while its in-evaluation intervals are ~0.05 % wide.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, Field

CONFIDENCE = 0.95


class Interval(BaseModel):
    low_ms: float
    high_ms: float
    coverage: float = Field(description="probability that the interval holds the true value (for a score: "
                                        "the lowest of its cases')")

    def relative_half_width(self) -> float:
        middle = (self.low_ms + self.high_ms) / 2
        return (self.high_ms - self.low_ms) / 2 / middle if middle > 0 else 0.0


def median_interval(samples_ms: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    data = sorted(float(s) for s in samples_ms)
    n = len(data)
    if n == 0:
        raise ValueError("no timing samples")
    j, coverage = 1, _coverage(n, 1)
    while j + 1 <= (n + 1) // 2 and _coverage(n, j + 1) >= confidence:
        j += 1
        coverage = _coverage(n, j)
    return Interval(low_ms=data[j - 1], high_ms=data[n - j], coverage=round(coverage, 4))


def score_interval(medians: Sequence[Interval]) -> Interval:
    """The interval of a geometric mean of medians, from the medians' intervals (see the module docstring)."""
    if not medians or any(m.low_ms <= 0 for m in medians):
        raise ValueError("a score interval needs positive case intervals")
    low = math.exp(sum(math.log(m.low_ms) for m in medians) / len(medians))
    high = math.exp(sum(math.log(m.high_ms) for m in medians) / len(medians))
    return Interval(low_ms=low, high_ms=high, coverage=min(m.coverage for m in medians))


def clearly_faster(new: Interval, old: Interval, min_gain: float = 0.0) -> bool:
    """Whether ``new`` is faster than ``old`` beyond the noise: its whole interval lies below ``old``'s, by at
    least ``min_gain`` (a fraction of ``old``'s lower bound)."""
    return new.high_ms < old.low_ms * (1.0 - min_gain)


def _coverage(n: int, j: int) -> float:
    """P(x_(j) <= median <= x_(n-j+1)) = 1 - 2 P(B <= j-1), B ~ Binomial(n, 1/2)."""
    tail = sum(math.comb(n, i) for i in range(j)) / 2 ** n
    return max(0.0, 1.0 - 2.0 * tail)
