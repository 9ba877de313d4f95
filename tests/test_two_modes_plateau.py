"""A run of two classes of prompts (a fast and a slow mode) under strong forcing: the one-mode
law's least-squares p* is pulled off the plateau, the state-space posterior that mixes in the
fast + slow law is not; where that law carries the likelihood the plateau's value is the
posterior mean, with the law's own p* in the note."""

from __future__ import annotations

import numpy as np
import pytest

from grpofit.fitting import fit_series


def _forced_run(seed: int, n_per_stratum: int, index: int, regime: str, forcing_sd: float):
    """Run ``index`` of ``forced_recovery_set(n_per_stratum, seed)`` without drawing the others."""
    from grpofit.testing.synthetic import make_forced_run, sample_forced_truth

    child = np.random.SeedSequence([seed, 0x5EED]).spawn(12 * n_per_stratum)[index]
    truth = sample_forced_truth(np.random.default_rng(child), regime=regime, forcing_sd=forcing_sd)
    return truth, make_forced_run(truth, seed=child.spawn(1)[0])


@pytest.mark.parametrize(("index", "ls_value"), [(1130, 0.5905), (1109, 0.748)])
def test_a_two_class_run_gets_the_posterior_mean_as_its_plateau(index, ls_value):
    """Two-class runs under forcing sd 0.03 (seed 11, the tuning seed): least squares gave p*
    0.5905 for a true 0.628 (run 1130) and 0.748 for 0.787 (run 1109), both off by more than 0.03."""
    truth, table = _forced_run(11, 100, index, "two_class", 0.03)
    res = fit_series(table["step"], table["reward"])
    e = res.param("plateau")
    assert abs(e.value - truth["plateau"]) <= 0.03
    assert e.ci95[0] <= e.value <= e.ci95[1]
    assert "posterior mean with a fast and a slow mode" in e.note
    assert f"least-squares p* is {ls_value}" in e.note


def test_a_one_mode_run_keeps_its_least_squares_plateau():
    """An overdamped run without forcing: the fast + slow law adds nothing, p* is the law's."""
    truth, table = _forced_run(11, 100, 0, "overdamped", 0.0)
    res = fit_series(table["step"], table["reward"])
    e = res.param("plateau")
    assert "posterior mean" not in (e.note or "")
    assert abs(e.value - truth["plateau"]) <= 0.03
