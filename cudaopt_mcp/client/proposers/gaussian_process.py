"""The tuner's model once it has a few scores: a Gaussian process on the log score, and expected improvement
over every untried valid configuration (exact when the valid list is known, over a sample otherwise).

A configuration is seen as each parameter's position in its sorted value list, scaled to [0, 1], so tile sizes
32/64/128 are evenly spaced. The kernel is Matérn 5/2 with one length per parameter (ARD): a parameter that does
not matter gets a long one and stops steering the search. The lengths and the noise are chosen by the marginal
likelihood over a small grid, one parameter at a time, so no optimiser library is needed (numpy only).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from harness_tools.run.host_blas import HOST_BLAS

LENGTHS = (0.08, 0.15, 0.25, 0.4, 0.7, 1.2, 2.5)  # per parameter, in the scaled positions
NOISES = (1e-4, 1e-2, 0.1)  # of the standardised log scores' variance
SWEEPS = 2  # passes over the parameters when choosing lengths
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


def _matern(squared: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The kernel from :func:`_squared_differences`: computed once per fit, so each length tried costs one weighted
    sum instead of the differences again (at 300 points that was two thirds of a fit)."""
    d = np.sqrt(np.maximum(squared @ (1.0 / lengths**2), 0.0) * 5.0)
    return (1.0 + d + d * d / 3.0) * np.exp(-d)


class GaussianProcess:
    """Fitted to (positions, log scores); predicts a mean and a standard deviation in the same units."""

    def __init__(self, x: np.ndarray, y: np.ndarray):
        self._x = x
        self._squared = _squared_differences(x, x)
        self._likelihoods: dict[tuple[bytes, float], float] = {}
        self._shift, self._scale = float(y.mean()), float(y.std()) or 1.0
        self._y = (y - self._shift) / self._scale
        with HOST_BLAS:  # the in-process server may be computing an oracle meanwhile (harness_tools.run.host_blas)
            self.lengths, self.noise = self._choose_hyperparameters()
            k = self._covariance(self.lengths, self.noise)
            self._alpha = np.linalg.solve(k, self._y)
            self._inverse = np.linalg.inv(k)  # a prediction's variance is then one product, not a solve

    def _covariance(self, lengths: np.ndarray, noise: float) -> np.ndarray:
        return _matern(self._squared, lengths) + (noise + 1e-8) * np.eye(len(self._x))

    def _likelihood(self, lengths: np.ndarray, noise: float) -> float:
        key = (lengths.tobytes(), noise)  # a sweep tries the current lengths and noise again: asked once
        if key not in self._likelihoods:
            self._likelihoods[key] = self._fresh_likelihood(lengths, noise)
        return self._likelihoods[key]

    def _fresh_likelihood(self, lengths: np.ndarray, noise: float) -> float:
        k = self._covariance(lengths, noise)
        try:
            factor = np.linalg.cholesky(k)  # the determinant, and the check that k is positive definite
        except np.linalg.LinAlgError:
            return -math.inf
        # one solve with k: numpy has no triangular solve, and two with the factor cost twice as much
        return float(-0.5 * self._y @ np.linalg.solve(k, self._y) - np.log(np.diag(factor)).sum())

    def _choose_hyperparameters(self) -> tuple[np.ndarray, float]:
        lengths, noise = np.full(self._x.shape[1], 0.4), NOISES[0]
        for _ in range(SWEEPS):
            for i in range(len(lengths)):
                lengths[i] = max(LENGTHS, key=lambda v: self._likelihood(_with(lengths, i, v), noise))
            noise = max(NOISES, key=lambda v: self._likelihood(lengths, v))
        return lengths, noise

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cross = _matern(_squared_differences(x, self._x), self.lengths)
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
