"""A plateau the run is still moving past is reported as a bound, never as a tight number below
(or, for a falling metric, above) where the run is heading."""

from __future__ import annotations

import numpy as np
import pytest

from grpofit.fitting import fit_series
from grpofit.fitting.fitcheck import plateau_bound, still_moving


def _ar(rng, n, sd, phi=0.6):
    e = np.empty(n)
    e[0] = rng.normal(0, sd)
    for i in range(1, n):
        e[i] = phi * e[i - 1] + rng.normal(0, sd * np.sqrt(1 - phi**2))
    return e


def _bound_of(steps, y):
    fit = fit_series(steps, y)
    plateau = {"value": fit.param("plateau").value}
    return plateau_bound(plateau, still_moving(steps, y)), plateau["value"]


def test_a_jump_then_a_creep_gives_a_lower_bound():
    rng = np.random.default_rng(3)
    steps = np.arange(1.0, 301.0)
    y = 0.6 + 0.3 * (1 - np.exp(-steps / 5)) + 2e-4 * steps + _ar(rng, steps.size, 0.01)
    (kind, level), value = _bound_of(steps, y)
    assert kind == "lower_bound"
    assert level > value and abs(level - y[-30:].mean()) < 1e-12


def test_a_still_falling_loss_gives_an_upper_bound():
    rng = np.random.default_rng(4)
    steps = np.arange(1.0, 301.0)
    y = 2.0 - 1.0 * (1 - np.exp(-steps / 6)) - 1e-3 * steps + _ar(rng, steps.size, 0.02)
    (kind, level), value = _bound_of(steps, y)
    assert kind == "upper_bound" and level < value


@pytest.mark.slow
def test_settled_runs_are_rarely_called_bounds():
    """Saturated runs with correlated noise: the late-slope test is one-sided at 2.5% and the bound
    also needs the level past p*, so few of 40 seeds may be flagged."""
    steps = np.arange(1.0, 401.0)
    flagged = 0
    for seed in range(40):
        rng = np.random.default_rng(100 + seed)
        y = 0.2 + 0.5 * (1 - np.exp(-steps / 40)) + _ar(rng, steps.size, 0.02)
        (kind, _), _ = _bound_of(steps, y)
        flagged += kind != "estimate"
    assert flagged <= 3


def test_long_series_are_tested_on_block_means():
    steps = np.arange(1.0, 200_001.0)
    y = 0.5 + 1e-6 * steps + np.random.default_rng(5).normal(0, 0.01, steps.size)
    moving = still_moving(steps, y)
    assert moving["direction"] == "rising"
    assert abs(moving["slope_per_step"] - 1e-6) < 2e-7
