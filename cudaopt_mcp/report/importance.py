"""Which tunables matter, from what the search measured.

A parameter's importance is the share of the variance of log(score) that its values explain (the
correlation ratio η²: between-group over total sum of squares), over the correct configurations tried.
It is computed per parameter, so it is a first-order measure: two parameters that only matter together
each show part of it. The log makes a 2x change count the same at any speed.
"""

from __future__ import annotations

import math
from itertools import combinations

from pydantic import BaseModel, Field

from cudaopt_mcp.report.run_reading import RunData

MIN_SCORED = 4  # fewer configurations say nothing about importance


class Scored(BaseModel):
    """One tried configuration: its best score (None when it never passed)."""

    tunables: dict[str, int]
    score_ms: float | None


class Importance(BaseModel):
    names: list[str] = Field(description="parameters, most important first")
    shares: dict[str, float] = Field(description="η² of each parameter, 0..1")
    scored: int = Field(description="correct configurations behind the numbers")


def tried_configurations(data: RunData) -> list[Scored]:
    """Every configuration of the tunables that a candidate tried, with its best correct score."""
    scores: dict[tuple, Scored] = {}
    by_candidate = {p.candidate_id: p for p in data.points if p.candidate_id}
    for candidate in data.candidates.values():
        if not candidate.tunables or set(candidate.tunables) != set(data.params):
            continue
        key = tuple(candidate.tunables[n] for n in data.params)
        point = by_candidate.get(candidate.candidate_id)
        score = point.score_ms if point is not None and point.correct else None
        known = scores.get(key)
        if known is None:
            scores[key] = Scored(tunables=dict(candidate.tunables), score_ms=score)
        elif score is not None and (known.score_ms is None or score < known.score_ms):
            known.score_ms = score
    return list(scores.values())


def importance(data: RunData, tried: list[Scored]) -> Importance | None:
    scored = [t for t in tried if t.score_ms and t.score_ms > 0]
    if len(data.params) < 1 or len(scored) < MIN_SCORED:
        return None
    logs = [math.log(t.score_ms) for t in scored]  # type: ignore[arg-type]
    mean = sum(logs) / len(logs)
    total = sum((v - mean) ** 2 for v in logs)
    shares = {}
    for name in data.params:
        groups: dict[int, list[float]] = {}
        for t, v in zip(scored, logs):
            groups.setdefault(t.tunables[name], []).append(v)
        between = sum(len(g) * (sum(g) / len(g) - mean) ** 2 for g in groups.values())
        shares[name] = round(between / total, 4) if total > 0 and len(groups) > 1 else 0.0
    names = sorted(shares, key=lambda n: -shares[n])
    return Importance(names=names, shares=shares, scored=len(scored))


def top_pairs(ranking: Importance | None, params: dict[str, list[int]], count: int = 3) -> list[tuple[str, str]]:
    """The pairs of the most important parameters (each with at least two values), most important first."""
    names = ranking.names if ranking else list(params)
    varied = [n for n in names if len(params.get(n, [])) > 1][:3]
    pairs = sorted(combinations(varied, 2), key=lambda pair: -(ranking.shares[pair[0]] + ranking.shares[pair[1]])
                   if ranking else 0)
    return pairs[:count]
