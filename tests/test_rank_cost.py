"""What ``grpofit rank`` skips on many runs changes no number it shows: the engine's lean forecast,
the blocked gain times, the batched square roots of the draws, and the slim result a worker sends."""

from __future__ import annotations

import pickle

import numpy as np
import pytest


def _rising(n=120, seed=0, plateau=0.8, tau=60.0):
    rng = np.random.default_rng(seed)
    s = np.arange(1, n + 1, dtype=float)
    mean = 0.1 + (plateau - 0.1) * (1 - np.exp(-s / tau))
    return s, rng.binomial(64, mean) / 64.0


def test_from_link_is_the_logistic_without_overflow():
    from grpofit.fitting.bounds import Bounds

    b = Bounds(-1.0, 3.0, "test")
    z = np.array([-1e4, -800.0, -30.0, -1.0, 0.0, 0.5, 30.0, 800.0, np.inf, -np.inf])
    with np.errstate(over="ignore"):
        ref = -1.0 + 4.0 / (1.0 + np.exp(-z))
    np.testing.assert_allclose(b.from_link(z), ref, rtol=1e-15, atol=1e-15)
    assert b.from_link(2.0) == pytest.approx(-1.0 + 4.0 / (1.0 + np.exp(-2.0)), rel=1e-15)
    assert np.isnan(b.from_link(np.nan))


def test_gain_times_in_blocks_equal_one_draw_at_a_time():
    """More draws than a block: each row is what the draw alone gives."""
    from grpofit.fitting.bounds import Bounds
    from grpofit.forecasting.predictive import GAIN_BLOCK, _gain_times_link

    rng = np.random.default_rng(4)
    k = 2 * GAIN_BLOCK + 7
    betas = np.column_stack([rng.normal(1.0, 1.0, k), rng.normal(-3.0, 1.0, k)])
    unlink = Bounds(0.0, 1.0, "test").from_link
    times = (40.0,)
    together = _gain_times_link("one", times, betas, unlink)
    alone = np.vstack([_gain_times_link("one", times, betas[i : i + 1], unlink) for i in range(k)])
    assert together.shape == (k, 2)
    np.testing.assert_allclose(together, alone, rtol=1e-12)
    assert np.all(np.isfinite(together[:, 0])) and np.all(together[:, 1] >= together[:, 0])


def test_lean_forecast_has_the_same_draws_and_intervals():
    from grpofit.forecasting.engine import forecast_series

    s, v = _rising()
    full = forecast_series(s, v, horizon_step=300, horizon_source="--horizon", seed=3)
    lean = forecast_series(s, v, horizon_step=300, horizon_source="--horizon", seed=3, lean=True)
    assert full.doc["at"] == lean.doc["at"]
    assert full.doc["plateau"] == lean.doc["plateau"]
    assert full.doc["remaining_gain"] == lean.doc["remaining_gain"]
    np.testing.assert_array_equal(full.extra["draws"].latent, lean.extra["draws"].latent)
    np.testing.assert_array_equal(full.extra["draws"].plateau, lean.extra["draws"].plateau)
    assert lean.fan is None and full.fan is not None
    assert lean.doc["steps_to_90"]["value"] is None and lean.doc["recommendation"] is None
    assert full.doc["steps_to_90"]["value"] is not None and full.doc["recommendation"]


@pytest.mark.slow
def test_rank_worker_result_is_small_and_the_same():
    """The worker's result carries the draws' quantiles and the entry, not the engine's joint
    draws at every time (~400 KB a run before) nor the 1,200 draws (~10 KB)."""
    from grpofit.commands.rank import RankItem, _draws_one
    from grpofit.forecasting.horizon import horizon_draws
    from grpofit.forecasting.rank import N_QUANTILES, summarise

    s, v = _rising(seed=1)
    item = RankItem("r", "reward", s, v, None, None, None)
    lean = _draws_one(item, (300.0, "--horizon", 0, False))
    plotted = _draws_one(item, (300.0, "--horizon", 0, True))
    whole = horizon_draws(s, v, 300.0, horizon_source="--horizon", seed=0)
    assert len(pickle.dumps(lean)) < 3_000
    assert len(pickle.dumps(plotted)) < 10_000
    assert len(pickle.dumps(whole)) > 100_000
    for res in (lean, plotted):
        assert res.draws.dtype == np.float32 and res.draws.size == N_QUANTILES
        np.testing.assert_array_equal(res.draws, summarise(whole.draws))
        assert res.ess == whole.ess and 5 < res.ess < 1200
        assert res.entry["at"] == whole.entry["at"]
        assert res.open_ended == whole.open_ended and res.kind == whole.kind
    assert lean.forecast is None
    assert plotted.forecast.fan["q50"].shape == whole.forecast.fan["q50"].shape


@pytest.mark.slow
def test_lean_forecast_names_the_same_collapse():
    """Lean, the whole run's fit is only made when a collapse candidate needs it: the collapse
    named and the forecast after it are the same."""
    from grpofit.forecasting.engine import forecast_series

    rng = np.random.default_rng(5)
    s = np.arange(1, 221, dtype=float)
    mean = np.where(s < 150, 0.1 + 0.7 * (1 - np.exp(-s / 30.0)), 0.05)
    v = rng.binomial(64, mean) / 64.0
    full = forecast_series(s, v, horizon_step=400, horizon_source="--horizon", seed=1)
    lean = forecast_series(s, v, horizon_step=400, horizon_source="--horizon", seed=1, lean=True)
    assert full.doc.get("collapse") is not None
    assert lean.doc["collapse"] == full.doc["collapse"]
    assert lean.doc["at"] == full.doc["at"] and lean.doc["note"] == full.doc["note"]
    assert lean.extra["baseline"] is None and full.extra["baseline"] is not None
