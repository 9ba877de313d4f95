"""Pruning with the sweep's finished trials as a population prior (``population=True``)."""

from __future__ import annotations

import numpy as np
import pytest

H = 200.0


def curve(plateau, tau, n=200, seed=0, start=0.1, sd=0.02):
    s = np.arange(1, n + 1, dtype=float)
    rng = np.random.default_rng(seed)
    return s, np.clip(start + (plateau - start) * (1 - np.exp(-s / tau)) + sd * rng.standard_normal(n), 0, 1)


def finished(k=3):
    return [(f"w{i}", *curve(0.8 + 0.01 * i, 25.0, seed=i)) for i in range(k)]


def test_sibling_draws_follow_the_prior_forecast_interval():
    """The draws are a distribution through the prior-combined forecast's median and 80/95%
    ends (the level over the horizon's last tenth), inside [0, 1] for a bounded metric."""
    from grpofit.forecasting.prune import sibling_draws, sibling_prior

    prior = sibling_prior(finished())
    assert prior is not None and len(prior.runs) == 3
    s, v = curve(0.3, 25.0, seed=9)
    s, v = s[:50], v[:50]
    d = sibling_draws(prior, s, v, H)
    pf = prior.forecast(s, v, np.linspace(0.9 * H + 0.1, H, 20), n_final=20, seed=0)
    assert d.shape == (1200,) and d.min() >= 0.0 and d.max() <= 1.0
    q = np.percentile(d, [2.5, 10, 50, 90, 97.5])
    want = [pf.final["pi95"][0], pf.final["pi80"][0], pf.final["median"], pf.final["pi80"][1], pf.final["pi95"][1]]
    np.testing.assert_allclose(q, want, atol=0.01)
    assert sibling_prior(finished(1)) is None  # one finished trial is no population


class _Fake:
    """horizon_draws stand-in: a trial's draws from where its values are now; the trial named
    ``open_ended`` (by its first value) is still rising and speeding up."""

    def __init__(self):
        self.calls = 0

    def __call__(self, steps, values, horizon, *, seed=0, **_):
        from grpofit.forecasting.horizon import HorizonDraws

        self.calls += 1
        rng = np.random.default_rng(len(steps))
        level = float(np.mean(values[-10:]))
        opened = float(steps[-1]) < horizon * 0.95  # every trial still running is open-ended here
        return HorizonDraws(level + 0.01 * rng.standard_normal(600), {}, "forecast", None, None, opened)


@pytest.mark.parametrize("population", [False, True])
def test_population_judges_a_trial_its_own_forecast_cannot(monkeypatch, population):
    """Three finished trials near 0.8 and a fourth like them that levels off at 0.7, its own
    forecast open-ended: without the population it is never stopped; with it, the finished
    trials' prior says (at 40% of the steps, not yet at 20%) that it ends below them and it is
    stopped. With one finished trial the prior is not used. (A trial unlike the finished ones,
    say at 0.25, gets a prior tempered to nothing: no interval, so no stop.)"""
    from grpofit.forecasting import horizon as module
    from grpofit.forecasting.prune import SweepJudge

    monkeypatch.setattr(module, "horizon_draws", _Fake())
    judge = SweepJudge(H, min_step=40, check_every=40, population=population)
    for name, s, v in finished(3):
        for a, b in zip(s, v):
            judge.observe(name, a, b)
        judge.end(name)
    s, v = curve(0.7, 25.0, seed=7)
    stopped_at = None
    for a, b in zip(s, v):
        judge.observe("late", a, b)
        if judge.should_stop("late"):
            stopped_at = a
            break
    assert (stopped_at is not None) == population
    if population:
        assert stopped_at == 80.0 and judge.finished() == ["w0", "w1", "w2"]
    lone = SweepJudge(H, min_step=40, check_every=40, population=True)
    name, s0, v0 = finished(1)[0]
    for a, b in zip(s0, v0):
        lone.observe(name, a, b)
    for a, b in zip(s[:80], v[:80]):
        lone.observe("late", a, b)
    assert not lone.should_stop("late")


def test_sweep_rule_sequential_uses_the_finished_runs_prior():
    """The rule replay mirrors the judge: a run whose own draws are open-ended is stopped on the
    finished runs' prior only when the rule asks for the population (three runs have finished)."""
    from benchmarks.sweep_rule import Forecasts, schedule_steps, sequential
    from benchmarks.sweeps import Sweep

    runs = finished(3) + [("late", *curve(0.7, 25.0, seed=7))]
    truth = np.array([0.8, 0.81, 0.82, 0.7])
    sw = Sweep("t", "generated", [r[0] for r in runs], [r[1] for r in runs], [r[2] for r in runs], truth, H)
    fc = Forecasts(sw)
    rng = np.random.default_rng(0)
    for c in (*schedule_steps(H, 0.2, 0.2), "end"):
        for i in range(4):
            fc[i, c] = (0.8 + 0.01 * (i % 3) + 0.01 * rng.standard_normal(600), i == 3 and c != "end")
    import benchmarks.sweep_rule as sr

    order = sr.trial_order
    sr.trial_order = lambda s: [0, 1, 2, 3]
    try:
        rule = {"schedule": (0.2, 0.2), "margin": 0.0, "confidence": 0.95}
        assert sequential(sw, fc, rule)[3] is None  # open-ended: never stopped on its own forecast
        assert sequential(sw, fc, {**rule, "population": True})[3] == 80.0
    finally:
        sr.trial_order = order


def test_sweep_doc_renders_the_report_cost_and_the_bands():
    from benchmarks.sweeps import render_bands, render_report_cost

    rec = {
        "sweeps": [
            {
                "sweep": "s",
                "methods": {
                    "ray: grpofit (every 5% from 10%)": {
                        "regret": 0.0,
                        "best_killed": False,
                        "compute": 0.5,
                        "per_report_ms": {"mean": 41.25, "max": 900.0, "cpu_mean": 40.0, "cpu_max": 880.0},
                    }
                },
            }
        ]
    }
    text = "\n".join(render_report_cost(rec))
    assert "| s | ray: grpofit (every 5% from 10%) | 0.0000 | no | 50% | 41.2 / 900 | 40.0 / 880 |" in text
    bands = {
        "tune": {
            "10%": {
                "runs": 4,
                "open_ended": 1,
                "own": {"with_band": 3, "width": 0.5, "coverage": 1.0},
                "prior": {"with_band": 0, "width": None, "coverage": None},
            }
        }
    }
    assert "| tune | 10% | 4 | 1 | 0.500 / 100% (3) | - |" in "\n".join(render_bands(bands))
    assert render_bands(None) == [] and render_report_cost(None) == []
