"""An inertia interval that holds 0, ``[0, hi]``: an overdamped approach the data cannot tell
from one without inertia. Its upper end is the one end the data set; at the profile's full
two-sided threshold it covered the true inertia in 98-100% of the overdamped generated runs."""

from __future__ import annotations

import numpy as np
import pytest

from grpofit.fitting import fit_series
from grpofit.fitting.intervals import INERTIA_FAR, _inertia_far_end


def _forced_run(seed: int, n_per_stratum: int, index: int, regime: str, forcing_sd: float):
    from grpofit.testing.synthetic import make_forced_run, sample_forced_truth

    child = np.random.SeedSequence([seed, 0x5EED]).spawn(12 * n_per_stratum)[index]
    truth = sample_forced_truth(np.random.default_rng(child), regime=regime, forcing_sd=forcing_sd)
    return truth, make_forced_run(truth, seed=child.spawn(1)[0])


def test_the_far_end_takes_the_rows_beyond_the_fit_at_a_fraction_of_their_threshold():
    xs = np.array([0.0, 0.2, 0.4, 0.6, 0.8])  # 1/zeta, the fit at 0.4
    d = np.array([0.5, 0.2, 0.0, 0.5, 4.0])
    thr = np.array([1.0, 1.0, np.inf, 1.0, 1.0])
    ti = [100.0 * x * x / 4 for x in xs]  # timescale 100
    top = _inertia_far_end(np.stack([xs, d, thr]), 0.4, ti)
    # the row at 0.6 is inside at the full threshold (0.5 <= 1), outside at INERTIA_FAR of it
    assert INERTIA_FAR < 0.5
    assert ti[2] < top < ti[3]


def test_an_overdamped_run_s_inertia_interval_is_narrower_and_holds_the_truth():
    """Seed 11 (tuning), overdamped, no forcing: true inertia 5.30 (damping ratio 2.5); the
    interval was [0, 9.77], now [0, 8.52]. The damping ratio's interval is unchanged."""
    truth, table = _forced_run(11, 100, 0, "overdamped", 0.0)
    osc = fit_series(table["step"], table["reward"]).models["oscillator"].params
    lo, hi = osc["inertia"].ci95
    assert lo == 0.0 and truth["inertia"] <= hi < 9.0
    assert osc["damping_ratio"].ci95[0] == pytest.approx(1.918, abs=2e-3)
    assert osc["damping_ratio"].ci95[1] is None


def test_a_forced_overdamped_run_s_shape_intervals_widen_on_the_side_that_decides_no_call():
    """Seed 11 (tuning), overdamped, forcing sd 0.03 (the state-space likelihood finds the
    forcing): true damping ratio 2.48, inertia 0.70. The least-squares damping-ratio interval
    [1.19, 1.86] missed the truth above it (the forcing read as a slow start); its upper end
    and the inertia's lower end widen by the timescale's inflation, its lower end (the
    overdamped call) and the inertia's upper end stay."""
    truth, table = _forced_run(11, 100, 928, "overdamped", 0.03)
    osc = fit_series(table["step"], table["reward"]).models["oscillator"]
    z, ti = osc.params["damping_ratio"], osc.params["inertia"]
    assert z.ci95_ls == pytest.approx((1.191, 1.863), abs=2e-3)  # the least-squares interval
    assert z.ci95[0] == pytest.approx(z.ci95_ls[0]) and z.ci95[0] <= truth["damping_ratio"] <= z.ci95[1]
    assert ti.ci95[1] == pytest.approx(ti.ci95_ls[1]) and ti.ci95[0] < ti.ci95_ls[0] <= truth["inertia"]
    assert osc.regime == "overdamped"


def test_an_unforced_overdamped_run_s_shape_intervals_are_not_widened():
    """The same rule leaves a run without forcing (seed 11, forcing sd 0) as least squares gave it."""
    _, table = _forced_run(11, 100, 0, "overdamped", 0.0)
    osc = fit_series(table["step"], table["reward"]).models["oscillator"].params
    assert osc["inertia"].ci95_ls is None and osc["damping_ratio"].ci95_ls is None
