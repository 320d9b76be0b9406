"""The tuner's Gaussian process against the textbook formulas, computed here independently."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cudaopt_mcp.client.proposers.gaussian_process import GaussianProcess


def _matern52(a: np.ndarray, b: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    out = np.empty((len(a), len(b)))
    for i, p in enumerate(a):
        for j, q in enumerate(b):
            r = math.sqrt(5.0 * sum(((p[k] - q[k]) / lengths[k]) ** 2 for k in range(len(p))))
            out[i, j] = (1 + r + r * r / 3) * math.exp(-r)
    return out


@pytest.mark.parametrize("n", [6, 40])
def test_the_posterior_is_the_textbook_one_for_the_chosen_lengths_and_noise(n):
    rng = np.random.default_rng(n)
    x, at = rng.random((n, 3)), rng.random((25, 3))
    y = np.sin(4 * x[:, 0]) + x[:, 1] ** 2 + 0.01 * rng.standard_normal(n)
    model = GaussianProcess(x, y)
    shift, scale = y.mean(), y.std()
    k = _matern52(x, x, model.lengths) + (model.noise + 1e-8) * np.eye(n)
    cross = _matern52(at, x, model.lengths)
    mean = cross @ np.linalg.solve(k, (y - shift) / scale) * scale + shift
    var = 1.0 - np.einsum("ij,ji->i", cross, np.linalg.solve(k, cross.T))
    got_mean, got_std = model.predict(at)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(got_std, np.sqrt(np.maximum(var, 1e-12)) * scale, rtol=1e-6, atol=1e-9)


def test_the_chosen_hyperparameters_are_the_likeliest_of_the_last_sweep():
    rng = np.random.default_rng(3)
    x = rng.random((30, 2))
    y = np.cos(6 * x[:, 0])  # the second parameter does not matter: its length should come out long
    model = GaussianProcess(x, y)
    assert model.lengths[1] > model.lengths[0]
    yn = (y - y.mean()) / y.std()

    def likelihood(lengths, noise):
        k = _matern52(x, x, lengths) + (noise + 1e-8) * np.eye(len(x))
        return -0.5 * yn @ np.linalg.solve(k, yn) - 0.5 * np.linalg.slogdet(k)[1]

    best = likelihood(model.lengths, model.noise)
    for i in range(2):
        for value in (0.08, 0.15, 0.25, 0.4, 0.7, 1.2, 2.5):
            tried = model.lengths.copy()
            tried[i] = value
            assert likelihood(tried, model.noise) <= best + 1e-9


def test_a_long_run_is_modelled_on_a_bounded_set_that_keeps_its_best_points():
    rng = np.random.default_rng(7)
    x = rng.random((3000, 4))  # more than MODEL_POINTS: a fit on all of them would take minutes here
    y = ((x - 0.3) ** 2).sum(axis=1) + 0.001 * rng.standard_normal(3000)
    model = GaussianProcess(x, y)
    best = np.argsort(y)[:20]
    mean, std = model.predict(x[best])
    np.testing.assert_allclose(mean, y[best], atol=0.01)  # the best points are kept: the model goes through them
    far = np.array([[0.95, 0.95, 0.95, 0.95]])
    assert model.predict(far)[0][0] > y[best].max() + 0.5  # and the rest still shapes it
    ei = model.expected_improvement(np.vstack([x[best[:1]] + 0.01, far]))
    assert ei[0] > ei[1]
