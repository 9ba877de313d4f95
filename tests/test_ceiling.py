"""Issue 12.6: the R² noise ceiling is an estimate with an honest standard error, not a bound."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from grpofit.ceiling import r2_ceiling
from grpofit.models import oscillator

ROOT = Path(__file__).resolve().parents[1]


def test_ceiling_standard_error_covers_the_true_ceiling():
    covered, n_runs = 0, 200
    for i in range(n_runs):
        rng = np.random.default_rng(i)
        n = int(rng.integers(60, 1500))
        t = np.arange(n, dtype=float)
        sig = rng.uniform(0.01, 0.08)
        y = oscillator(t, 0.7, 0.1, n / rng.uniform(3, 20), rng.uniform(0, n / 20)) + rng.normal(0, sig, n)
        true = 1 - sig**2 / np.var(y)
        value, se = r2_ceiling(y)
        covered += abs(value - true) <= 1.96 * se
    assert 0.88 <= covered / n_runs <= 0.99, covered  # near the nominal 95%


def test_a_fit_can_exceed_the_ceiling_and_the_output_says_estimate(tmp_path):
    from grpofit.analysis import fit_run
    from grpofit.readers import read_path
    from grpofit.render import _fit_caption

    (run,) = read_path(str(ROOT / "sample_logs" / "healthy_slow_start.csv"))
    fit = fit_run(run)
    doc = fit.summary()
    r2 = doc["models"][doc["preferred"]]["r2"]
    ceiling, se = doc["noise"]["r2_ceiling"], doc["noise"]["r2_ceiling_se"]
    assert r2 > ceiling  # the README's own example: not a bound
    assert r2 <= ceiling + 2 * se  # but within its uncertainty
    caption = _fit_caption(doc)
    assert "best reachable" not in caption and "an estimate, not a bound" in caption
