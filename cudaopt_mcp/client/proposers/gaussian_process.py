"""The tuner's model once it has a few scores: a Gaussian process on the log score, and expected improvement
over every untried valid configuration (exact when the valid list is known, over a sample otherwise).

A configuration is seen as each parameter's position in its sorted value list, scaled to [0, 1], so tile sizes
32/64/128 are evenly spaced. The kernel is Matérn 5/2 with one length per parameter (ARD): a parameter that does
not matter gets a long one and stops steering the search. The lengths and the noise are chosen by the marginal
likelihood over a small grid, one parameter at a time, so no optimiser library is needed (numpy only).

A fit costs the cube of its points, and a long run must not spend more choosing than the GPU spends measuring: the
model keeps at most MODEL_POINTS scored points and chooses its lengths on at most HYPER_POINTS of them (the best
half, and the rest spread over the others by score). A proposal with 1,000 points scored took 3.3 s before and
0.7 s with these bounds on a 2-core host; up to 256 points nothing changes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from harness_tools.run.host_blas import HOST_BLAS

LENGTHS = (0.08, 0.15, 0.25, 0.4, 0.7, 1.2, 2.5)  # per parameter, in the scaled positions
NOISES = (1e-4, 1e-2, 0.1)  # of the standardised log scores' variance
SWEEPS = 2  # passes over the parameters when choosing lengths
MODEL_POINTS = 1024  # the most scored points a model is fitted to (_kept_points: the best half and a spread)
HYPER_POINTS = 256  # the most of those the lengths and noise are chosen on
XI = 0.01  # expected improvement's margin, in standardised units: a little exploration among near-ties


def positions(values: Sequence[Sequence[int]], configs: Sequence[Sequence[int]]) -> np.ndarray:
    """Each configuration as its values' positions in the sorted value lists, scaled to [0, 1]."""
    columns = []
    for i, vs in enumerate(values):
        order = {v: k / (len(vs) - 1) if len(vs) > 1 else 0.0 for k, v in enumerate(sorted(vs))}
        columns.append([order[c[i]] for c in configs])
    return np.array(columns, dtype=float).T.reshape(len(configs), len(values))


def _squared_differences(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per parameter, each pair's squared distance: (len(a), len(b), parameters)."""
    return (a[:, None, :] - b[None, :, :]) ** 2


def _matern_of(r2: np.ndarray) -> np.ndarray:
    """Matérn 5/2 of the squared scaled distances."""
    d = np.sqrt(np.maximum(r2, 0.0) * 5.0)
    return (1.0 + d + d * d / 3.0) * np.exp(-d)


def _matern(a: np.ndarray, b: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The kernel between two sets of points, a parameter at a time: memory for one (len(a), len(b)) array."""
    r2 = np.zeros((len(a), len(b)))
    for k, length in enumerate(lengths):
        r2 += ((a[:, None, k] - b[None, :, k]) / length) ** 2
    return _matern_of(r2)


def _kept_points(y: np.ndarray, limit: int) -> np.ndarray:
    """The indices of at most ``limit`` points: all of them, or the best ``limit // 2`` and the rest spread evenly
    over the others by score, so a long run's proposals stay fast (a fit costs the cube of its points)."""
    if len(y) <= limit:
        return np.arange(len(y))
    order = np.argsort(y, kind="stable")
    best, rest = order[:limit // 2], order[limit // 2:]
    spread = rest[np.linspace(0, len(rest) - 1, limit - len(best)).round().astype(int)]
    return np.sort(np.concatenate([best, spread]))


class _Evidence:
    """The marginal likelihood of (lengths, noise) on a set of points: their squared differences are computed once,
    so each value tried costs one weighted sum (at 300 points, recomputing them was two thirds of a fit), and each
    pair asked for again (a sweep tries the current values again) is remembered."""

    def __init__(self, x: np.ndarray, y: np.ndarray):
        self._squared, self._y = _squared_differences(x, x), y
        self._known: dict[tuple[bytes, float], float] = {}

    def __call__(self, lengths: np.ndarray, noise: float) -> float:
        key = (lengths.tobytes(), noise)
        if key not in self._known:
            self._known[key] = self._compute(lengths, noise)
        return self._known[key]

    def _compute(self, lengths: np.ndarray, noise: float) -> float:
        k = _matern_of(self._squared @ (1.0 / lengths**2)) + (noise + 1e-8) * np.eye(len(self._y))
        try:
            factor = np.linalg.cholesky(k)  # the determinant, and the check that k is positive definite
        except np.linalg.LinAlgError:
            return -math.inf
        # one solve with k: numpy has no triangular solve, and two with the factor cost twice as much
        return float(-0.5 * self._y @ np.linalg.solve(k, self._y) - np.log(np.diag(factor)).sum())


class GaussianProcess:
    """Fitted to (positions, log scores); predicts a mean and a standard deviation in the same units."""

    def __init__(self, x: np.ndarray, y: np.ndarray):
        kept = _kept_points(y, MODEL_POINTS)
        x, y = x[kept], y[kept]
        self._x = x
        self._shift, self._scale = float(y.mean()), float(y.std()) or 1.0
        self._y = (y - self._shift) / self._scale
        with HOST_BLAS:  # the in-process server may be computing an oracle meanwhile (harness_tools.run.host_blas)
            chosen = _kept_points(self._y, HYPER_POINTS)
            self.lengths, self.noise = self._choose_hyperparameters(_Evidence(x[chosen], self._y[chosen]))
            k = _matern(x, x, self.lengths) + (self.noise + 1e-8) * np.eye(len(x))
            self._alpha = np.linalg.solve(k, self._y)
            self._inverse = np.linalg.inv(k)  # a prediction's variance is then one product, not a solve

    def _choose_hyperparameters(self, evidence: _Evidence) -> tuple[np.ndarray, float]:
        lengths, noise = np.full(self._x.shape[1], 0.4), NOISES[0]
        for _ in range(SWEEPS):
            for i in range(len(lengths)):
                lengths[i] = max(LENGTHS, key=lambda v: evidence(_with(lengths, i, v), noise))
            noise = max(NOISES, key=lambda v: evidence(lengths, v))
        return lengths, noise

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cross = _matern(x, self._x, self.lengths)
        with HOST_BLAS:
            mean = cross @ self._alpha
            explained = ((cross @ self._inverse) * cross).sum(axis=1)
        std = np.sqrt(np.maximum(1.0 - explained, 1e-12))
        return mean * self._scale + self._shift, std * self._scale

    def expected_improvement(self, x: np.ndarray) -> np.ndarray:
        """Of each row over the best score so far (lower is better), in standardised units."""
        mean, std = self.predict(x)
        mean, std = (mean - self._shift) / self._scale, std / self._scale
        gain = self._y.min() - mean - XI
        z = gain / std
        return gain * _normal_cdf(z) + std * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


def _with(lengths: np.ndarray, i: int, value: float) -> np.ndarray:
    changed = lengths.copy()
    changed[i] = value
    return changed


def _normal_cdf(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))
