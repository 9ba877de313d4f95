"""Warm-started refits: each refresh starts the forecast's likelihood search from the
last fit's parameters. It must give the cold fit's answer and cost fewer likelihood evaluations
(counted, not timed: the benchmark times it)."""

from __future__ import annotations

import numpy as np
import pytest

from grpofit.commands.forecast import ForecastOptions, forecast_run
from grpofit.forecasting import likelihood
from grpofit.laws.registry import MODELS
from grpofit.testing.planted import planted_run
from grpofit.watch.monitor import Monitor
from grpofit.watch.replay import prefix
from tests.reallogs import real_log


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


@pytest.mark.slow
def test_warm_fit_law_reaches_the_cold_optimum_with_fewer_evaluations(run, monkeypatch):
    from grpofit.forecasting.statespace import LAWS  # noqa: F401 - the laws watch refits

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


@pytest.mark.slow
def test_a_bad_warm_start_falls_back_to_the_cold_starts(run):
    s, v = run.series("reward")
    series = likelihood.reduce_series(s[:150] - s[0], v[:150], level_sd=0.5)
    kw = {"t_guess": 30.0, "t_max": 900.0}
    cold = likelihood.fit_law("one", series, **kw)
    for bad in (np.array([np.nan, 0.0]), np.array([1.0, 2.0, 3.0])):  # not finite; wrong law
        assert likelihood.fit_law("one", series, warm=bad, **kw).reml == cold.reml


@pytest.mark.slow
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
    # the draws come from a tempered posterior: a hair apart in the maxima moves the
    # mean of a wide predictive by a few percent of its width
    assert abs(w["mean"] - c["mean"]) <= 0.2 * width  # measured: 0.14 of the width (prior sd 4), 0.12 (8)
    # the 95% ends of a still-rising run's wide predictive move more with the draws than its centre
    # measured: 0.32 of the width with the levels' prior sd 4 in the logit, 0.36 with 8 (the ends of
    # the tempered draws; the maxima agree, the BIC check below)
    assert np.allclose(w["pi95"], c["pi95"], atol=0.4 * width)
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


# --------------------------------------------------------------------------- the verdicts' curve fit


def _fit_numbers(fit):
    """The preferred law, the SSR and the parameters of every law (what the verdicts read)."""
    out = {"preferred": fit.preferred, "collapse": None if fit.collapse is None else fit.collapse.step}
    for name in MODELS:
        m = fit.models[name]
        out[name] = (m.ssr, {k: p.value for k, p in m.params.items()})
    return out


def _counting_solver(monkeypatch):
    from grpofit.fitting import solve as solve_mod

    calls = {"n": 0}
    real = solve_mod._Problem.evaluate

    def counted(self, q):
        calls["n"] += 1
        return real(self, q)

    monkeypatch.setattr(solve_mod._Problem, "evaluate", counted)
    return calls


def _refreshes(run, first=0.5, growth=0.08):
    n = int(run.steps.size)
    k, ks = max(30, int(first * n)), []
    while k < n:
        ks.append(k)
        k = int(k * (1 + growth)) + 1
    return ks + [n]


REAL_RUNS = [("heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_TrainReward.csv", "GRPO_online")]  # collapses: two fits


@pytest.mark.slow
@pytest.mark.real_logs
@pytest.mark.parametrize("source", ["planted collapse", *[f for f, _ in REAL_RUNS]])
def test_warm_curve_fit_reaches_the_cold_optimum_with_fewer_evaluations(source, monkeypatch):
    """Refit a growing run as watch does (every 5% of growth): the fit started from the last
    refresh's optimum has the cold fit's optimum (SSR and every parameter), for fewer solver
    evaluations over the refreshes."""
    from grpofit.fitting.analysis import fit_run
    from grpofit.readers import read_path

    if source == "planted collapse":
        full = planted_run("dynamical_instability", seed=0, n_steps=300, kind="collapse")
    else:
        path = real_log(source)
        key = dict(REAL_RUNS)[source]
        full = next(r for r in read_path(str(path)) if key is None or key in r.name)
    calls = _counting_solver(monkeypatch)
    warm, n_warm, n_cold = {}, 0, 0
    for k in _refreshes(full):
        p = prefix(full, k)
        calls["n"] = 0
        w = fit_run(p, warm=warm)
        n_warm += calls["n"]
        calls["n"] = 0
        c = fit_run(p)
        n_cold += calls["n"]
        a, b = _fit_numbers(w), _fit_numbers(c)
        assert (a["preferred"], a["collapse"]) == (b["preferred"], b["collapse"]), k
        for law in MODELS:
            (sa, pa), (sb, pb) = a[law], b[law]
            assert sa == pytest.approx(sb, rel=1e-5, abs=1e-12), (k, law)  # the solver's tolerance is 1e-6
            for name, x in pb.items():
                y = pa[name]
                assert (x is None) == (y is None), (k, law, name)
                if x is not None:
                    assert y == pytest.approx(x, rel=2e-3, abs=1e-6 * max(1.0, abs(x))), (k, law, name)
    assert "whole" in warm and set(warm["whole"]) == set(MODELS)
    # never more; fewer where the oscillator's grid start is far from its optimum (the real run)
    assert n_warm <= n_cold and (source == "planted collapse" or n_warm < 0.9 * n_cold), (n_warm, n_cold)


def test_a_warm_start_worse_than_the_grid_is_dropped():
    """A start far from the optimum that the solver cannot bring below the grid's best point is
    not kept: the fit is the cold one."""
    from grpofit.fitting import fit_series

    run = planted_run(None, seed=1, n_steps=300)
    s, v = run.series("reward")
    cold = fit_series(s, v)
    bad = {"exponential": np.array([5.0, -5.0, 1e-3]), "oscillator": np.array([5.0, -5.0, 1e-3, 0.0])}
    warm = fit_series(s, v, warm=bad)
    for law in bad:
        assert warm.models[law].ssr == pytest.approx(cold.models[law].ssr, rel=1e-9)
    assert bad["exponential"][0] != 5.0  # the optimum found was stored back


def test_monitor_keeps_the_curve_fit_optimum_between_refreshes(run):
    mon = Monitor(rules=False, forecast=False)
    mon.update(prefix(run, 150), force_fit=True)
    st = mon.runs[run.name]
    first = {k: v.copy() for k, v in st.fit_warm["whole"].items()}
    mon.update(prefix(run, 158), force_fit=True)
    assert set(first) == set(MODELS)
    assert not np.array_equal(first["oscillator"], st.fit_warm["whole"]["oscillator"])  # refit, stored
    cold = Monitor(rules=False, forecast=False, warm_start=False)
    cold.update(prefix(run, 150), force_fit=True)
    assert cold.runs[run.name].fit_warm == {}  # warm_start=False: every refit from the grid
