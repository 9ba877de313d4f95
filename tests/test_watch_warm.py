"""Warm-started refits (issue 18): each refresh starts the forecast's likelihood search from the
last fit's parameters. It must give the cold fit's answer and cost fewer likelihood evaluations
(counted, not timed: the benchmark times it)."""

from __future__ import annotations

import numpy as np
import pytest

from grpofit.forecasting import likelihood
from grpofit.forecasting.command import ForecastOptions, forecast_run
from grpofit.testing.planted import planted_run
from grpofit.watch.monitor import Monitor
from grpofit.watch.replay import prefix


@pytest.fixture(scope="module")
def run():
    return planted_run(None, seed=0, n_steps=300)


def _counting(monkeypatch):
    calls = {"n": 0}
    real = likelihood.evaluate

    def counted(*a, **k):
        calls["n"] += 1
        return real(*a, **k)

    monkeypatch.setattr(likelihood, "evaluate", counted)
    return calls


def test_warm_fit_law_reaches_the_cold_optimum_with_fewer_evaluations(run, monkeypatch):
    from grpofit.forecasting.engine import LAWS_USED  # noqa: F401 - the laws watch refits

    s, v = run.series("reward")
    t = s - s[0]
    before = likelihood.reduce_series(t[:150], v[:150], level_sd=0.5)
    after = likelihood.reduce_series(t[:158], v[:158], level_sd=0.5)
    kw = {"t_guess": 30.0, "t_max": 3.0 * 300}
    last = likelihood.fit_law("one", before, **kw)
    calls = _counting(monkeypatch)
    cold = likelihood.fit_law("one", after, **kw)
    n_cold = calls["n"]
    calls["n"] = 0
    warm = likelihood.fit_law("one", after, warm=last.theta, **kw)
    n_warm = calls["n"]
    assert warm.reml == pytest.approx(cold.reml, abs=1e-3)
    assert np.allclose(warm.theta[0], cold.theta[0], atol=0.02)  # the timescale (log)
    assert n_warm < 0.8 * n_cold, (n_warm, n_cold)


def test_a_bad_warm_start_falls_back_to_the_cold_starts(run):
    s, v = run.series("reward")
    series = likelihood.reduce_series(s[:150] - s[0], v[:150], level_sd=0.5)
    kw = {"t_guess": 30.0, "t_max": 900.0}
    cold = likelihood.fit_law("one", series, **kw)
    for bad in (np.array([np.nan, 0.0]), np.array([1.0, 2.0, 3.0])):  # not finite; wrong law
        assert likelihood.fit_law("one", series, warm=bad, **kw).reml == cold.reml


def test_monitor_refits_warm_and_agrees_with_a_cold_fit(run):
    mon = Monitor(rules=False, horizon=300.0)
    for k in (150, 158):  # the second refresh is a 5% growth: warm
        mon.update(prefix(run, k), force_fit=True)
    st = mon.runs[run.name]
    assert (st.forecast_fits, st.warm_fits, st.cold_n) == (2, 1, 150)
    warm = st.forecast
    cold, _, _ = forecast_run(prefix(run, 158), ForecastOptions(horizon=300))
    w, c = warm["at"][0], cold["at"][0]
    width = c["pi95"][1] - c["pi95"][0]
    assert abs(w["mean"] - c["mean"]) <= 0.05 * width
    assert np.allclose(w["pi95"], c["pi95"], atol=0.1 * width)
    for law, entry in cold["laws"].items():  # each law's maximum: the same, or a hair apart
        assert abs(warm["laws"][law]["bic"] - entry["bic"]) <= 2.0, law


def test_a_cold_refit_comes_back_once_the_run_grew_by_half(run, monkeypatch):
    from grpofit.watch import monitor as monitor_mod

    seen = []

    def fake(run, *, metric=None, horizon=None, warm=None):  # the scheduling only
        seen.append(warm)
        return {"at": [{"mean": None}], "note": "stub"}, {"one": np.array([float(run.steps.size), 0.0])}

    monkeypatch.setattr(monitor_mod, "forecast_fit", fake)
    mon = Monitor(rules=False, horizon=300.0, cold_growth=0.5)
    for k in (100, 140, 151, 160):
        mon.update(prefix(run, k), force_fit=True)
    st = mon.runs[run.name]
    # 100: cold; 140: warm from 100's fit; 151 >= 1.5 x 100: cold again; 160: warm from 151's
    assert [None if w is None else w["one"][0] for w in seen] == [None, 100.0, None, 151.0]
    assert (st.forecast_fits, st.warm_fits, st.cold_n) == (4, 2, 151)
    off = Monitor(rules=False, horizon=300.0, warm_start=False)
    seen.clear()
    for k in (100, 110):
        off.update(prefix(run, k), force_fit=True)
    assert seen == [None, None]
