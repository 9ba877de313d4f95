"""The forecast's shortcuts compute the same numbers as the plain formulas they replace, bit for
bit: the search's dense objective against the walk likelihood (its Kalman filter is checked to
round-off in tests/test_filtered.py), the one-root process covariance
against its matrix product, the shared gain times against the per-draw ones, the forcing parts
kept per slow time against fresh ones."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grpofit.forecasting import predictive
from grpofit.forecasting.likelihood import reduce_series
from grpofit.forecasting.statespace import LAWS, _modes, process_cov_parts
from grpofit.forecasting.walk import _nll, dense_objective


def _series(known: bool):
    rng = np.random.default_rng(11)
    t = np.arange(300.0)
    y = np.clip(0.75 - 0.45 * np.exp(-t / 60.0) + 0.03 * rng.standard_normal(t.size), 0, 1)
    pv = np.full(t.size, 0.2 * 0.8 / 64) if known else None
    return reduce_series(t, y, pv, level_sd=0.5)


def _theta_of(law: str) -> list[float]:
    """A law the table below does not list: the middle of its time coordinates' bounds."""
    lo, hi = LAWS[law].log_bounds(math.log(0.25), math.log(3000.0), 1.0)
    return [0.5 * (a + b) for a, b in zip(lo, hi)] + [math.log(0.4), -9.0]


THETAS = {
    "one": [math.log(60.0), math.log(0.4), -9.0],
    "oscillator": [math.log(60.0), math.log(4.0), math.log(0.4), -9.0],  # overdamped
    "two": [math.log(200.0), math.log(5.0), math.log(0.4), -9.0],
}


@pytest.mark.parametrize("known", [False, True])
@pytest.mark.parametrize("law", list(LAWS))
def test_dense_objective_is_the_walk_likelihood(law, known):
    series = _series(known)
    f = dense_objective(law, series)
    rng = np.random.default_rng(5)
    base = np.array(THETAS[law] if law in THETAS else _theta_of(law))
    for _ in range(25):
        theta = base + rng.normal(0.0, 0.7, base.size)
        if law == "oscillator" and rng.random() < 0.5:
            theta[1] = theta[0] - 0.5  # underdamped: a complex pair
        want = _nll(law, theta, series, levels=False)[0]
        assert f(theta) == want and f(theta.copy()) == want  # the repeat comes from the memo


def test_one_root_start_correction_is_the_matrix_product():
    from grpofit.forecasting.statespace import _unit_cov

    s = np.linspace(0.0, 400.0, 90)
    t = np.linspace(100.0, 900.0, 40)
    for T in (0.3, 7.0, 250.0, 1e5):
        lam, r, _ = _modes("one", (T,), 1.0)
        for a, b in ((s, s), (s, t)):
            tot = lam[:, None] + lam[None, :]
            M = (r[:, None] * r[None, :]) / (-tot)
            d = np.abs(b[None, :] - a[:, None])
            es, et = np.exp(np.outer(a, lam)), np.exp(np.outer(b, lam))
            want = np.real(M.sum(axis=0)[0] * np.exp(lam[0] * d)) - np.real((es @ M) @ et.T)
            assert np.array_equal(_unit_cov(lam, r, a, a if b is a else b, None), want)


def test_two_forcing_parts_depend_on_the_slow_time_only():
    series = _series(False)
    s = series.t
    for fast in (2.0, 9.0, 40.0):
        assert np.array_equal(
            process_cov_parts("two", s, s, (fast, 300.0)), process_cov_parts("two", s, s, (1.0, 300.0))
        )


@pytest.mark.parametrize("law, times", [("one", (80.0,)), ("oscillator", (80.0, 5.0)), ("oscillator", (80.0, 30.0))])
def test_gain_times_of_one_shape_are_the_per_draw_ones(law, times):
    from grpofit.laws.models import relaxation

    betas = np.random.default_rng(2).normal(size=(7, 2))
    grid = np.concatenate([[0.0], np.geomspace(min(times) * 1e-3, max(times) * 60.0, 400)])
    one = relaxation(grid, *map(float, times)) if law == "oscillator" else np.exp(-grid / times[0])
    want = predictive._crossings(grid, np.broadcast_to(one, (7, grid.size)), (0.9, 0.95))
    assert np.array_equal(predictive._gain_times(law, times, betas), want, equal_nan=True)
