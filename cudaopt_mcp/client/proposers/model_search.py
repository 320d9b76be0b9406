"""The tuner's choice in a space whose valid configurations are listed: a short random start, then a Gaussian
process on the log scores (:mod:`.gaussian_process`) ranks untried configurations by expected improvement.

The ranked ones are the best configuration's neighbours (one parameter changed) and the untried mixes of the three
best (each parameter taken from one of them) while any is untried, else every untried one (a random sample of them
in a very large space). The mixes make the two- and three-parameter moves a one-parameter search cannot: on sgemm,
the best tile needs MINB and WIDE_MIN changed together from where the neighbours lead. Replayed on the H200's
sgemm table (60 seeds, budget 60), the median evaluations to within 3 % of the best per shape went from 32 / 16 /
39 (neighbours only) to 26.5 / 16 / 21, and the seeds that never got there from 20 / 5 / 12 to 9 / 2 / 3; the
score (the three shapes' geomean) from 12 to 13. A failed configuration and one still being evaluated count as
the worst score so far, so every tried point informs the model and none is proposed next to a pending one by
mistake.

Once every valid neighbour is tried, a value that no one-parameter change can reach because a constraint ties it to
other parameters is reached by the untried configurations that differ least from the best (sgemm: WIDE_MIN other
than -1 needs MINB 1 and TN 8, so from a best with MINB 2 no neighbour has it, and two of sgemm's three shapes have
their best there). Replayed on the kept sgemm table (200 seeds, budget 60), the single shapes' median evaluations
to within 3 % went from 27 / 15 / 27 (166 / 195 / 184 seeds getting there) to 23.5 / 15 / 23 (198 / 200 / 199), the
score unchanged at 13 (200 / 200). Its cost: where half the space fails, a few more failing configurations are
proposed late (test_tuner's steering test: 46 of 120 late proposals, 39 before).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Collection, Mapping, Sequence

import numpy as np

from cudaopt_mcp.client.proposers.gaussian_process import GaussianProcess, positions
from harness_tools.task.tunable_space import Config, TunableSpace

START = 5  # scored random configurations before the model chooses
POOL = 2000  # untried configurations ranked at most, when the best has no untried neighbour
MIXED = 3  # the best configurations whose values are mixed into candidates


def next_config(space: TunableSpace, scores: Mapping[Config, float | None], pending: Collection[Config],
                untried: Sequence[Config], rng: random.Random) -> tuple[Config, str]:
    """(configuration, how it was chosen). ``scores``: ms of each evaluated configuration, None for a failed one."""
    logs = {c: math.log(s) for c, s in scores.items() if s is not None and s > 0 and math.isfinite(s)}
    if len(logs) < START:
        return rng.choice(untried), f"random start, {len(logs)} of {START} scored"
    worst = max(logs.values())
    data = {c: logs.get(c, worst) for c in [*scores, *pending] if space.contains(c)}
    ranked = sorted(logs, key=logs.__getitem__)
    allowed = set(untried)
    near = [c for c in neighbours(space, ranked[0]) if c in allowed]
    reaching = [] if near else nearest_reaching(space, ranked[0], untried)
    close = set(near) | set(reaching)
    mixed = [c for c in mixes(ranked[:MIXED], rng) if c in allowed and c not in close]
    pool = near + reaching + mixed or (list(untried) if len(untried) <= POOL else rng.sample(list(untried), POOL))
    model = GaussianProcess(positions(space.values, list(data)), np.array(list(data.values())))
    choice = pool[int(np.argmax(model.expected_improvement(positions(space.values, pool))))]
    where = ("next to the best" if choice in near else "nearest the best with a value its constraints tie to others"
             if choice in close else "a mix of the best" if mixed else "anywhere")
    return choice, f"GP expected improvement, {where}"


def neighbours(space: TunableSpace, config: Config) -> list[Config]:
    """The configurations that differ from ``config`` in one parameter (valid or not)."""
    return [config[:i] + (v,) + config[i + 1:] for i, vs in enumerate(space.values) for v in vs if v != config[i]]


def nearest_reaching(space: TunableSpace, config: Config, untried: Sequence[Config]) -> list[Config]:
    """For each one-parameter change of ``config`` that the constraints forbid, the untried configurations with that
    value that differ from ``config`` in the fewest parameters (all of them when several tie)."""
    if not untried:
        return []
    table, centre = np.array(untried), np.array(config)
    found: dict[Config, None] = {}
    for i, v in ((i, v) for i, vs in enumerate(space.values) for v in vs if v != config[i]):
        if space.is_valid(config[:i] + (v,) + config[i + 1:]):
            continue  # reachable in one change (and tried, or it would be a neighbour)
        rows = np.flatnonzero(table[:, i] == v)
        if rows.size:
            changed = (table[rows] != centre).sum(axis=1)
            found.update(dict.fromkeys(tuple(int(x) for x in table[r]) for r in rows[changed == changed.min()]))
    return list(found)


def mixes(configs: Sequence[Config], rng: random.Random) -> list[Config]:
    """The configurations taking each parameter's value from one of ``configs`` (valid or not): all of them, or
    POOL drawn at random where there are more (many parameters)."""
    choices = [sorted({c[i] for c in configs}) for i in range(len(configs[0]))]
    if math.prod(len(vs) for vs in choices) <= POOL:
        return list(itertools.product(*choices))
    return list({tuple(rng.choice(vs) for vs in choices) for _ in range(POOL)})
