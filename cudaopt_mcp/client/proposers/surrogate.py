"""The tuner's own model for when TPE keeps asking for tried or invalid points: a kernel-weighted estimate of
each untried valid configuration's log score from the scored ones, with a bonus where few scored points are near.

TPE samples from its density ratio and, late in a run on a constrained space, mostly lands on points already
tried (replayed on sgemm: over half of 40 proposals fell back to random picks). Ranking the untried points keeps
the choice informed by every score to the end of the budget. Distances are taken over each parameter's position
in its value list, scaled to [0, 1], so tile sizes 32/64/128 are evenly spaced as the search sees them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from harness_tools.task.tunable_space import Config, TunableSpace

BANDWIDTH = 0.3  # of the scaled distance: a neighbour one value step away in two parameters still counts
EXPLORATION = 1.0  # times the scores' spread, where no scored point is near


def best_untried(space: TunableSpace, scores: Mapping[Config, float | None], untried: Sequence[Config]) -> Config:
    """The untried configuration with the lowest estimated log score, less the exploration bonus.

    ``scores`` maps evaluated configurations to milliseconds, None for a failed one (counted as worse than the
    worst score, so its neighbourhood is avoided). Ties go to the earlier entry of ``untried``."""
    measured = [math.log(s) for s in scores.values() if s is not None and s > 0]
    if not measured or not untried:
        return untried[0]
    worst, spread = max(measured), (max(measured) - min(measured)) or 1.0
    points = [(_position(space, c), math.log(s) if s is not None and s > 0 else worst + spread)
              for c, s in scores.items() if space.contains(c)]
    return min(untried, key=lambda c: _acquisition(_position(space, c), points, spread))


def _acquisition(x: list[float], points: list[tuple[list[float], float]], spread: float) -> float:
    weights = [math.exp(-_distance2(x, p) / (2 * BANDWIDTH**2)) for p, _ in points]
    total = sum(weights)
    mean = sum(w * y for w, (_, y) in zip(weights, points)) / total if total > 1e-12 else \
        sum(y for _, y in points) / len(points)
    return mean - EXPLORATION * spread / math.sqrt(1.0 + total)


def _position(space: TunableSpace, config: Config) -> list[float]:
    return [values.index(v) / (len(values) - 1) if len(values) > 1 else 0.0 for v, values in zip(config, space.values)]


def _distance2(a: list[float], b: list[float]) -> float:
    return sum((x - y) ** 2 for x, y in zip(a, b))
