"""where the rise's end is not in the seen steps the forecast says so by being
wide upward (two-sided intervals, not lower bounds floored at today's level), and every interval
and draw stays inside the metric's bounds (from its name, the config, the values or --bounds)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from grpofit.cli import main


def run_cli(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


@pytest.fixture(scope="module")
def rising_far_csv(tmp_path_factory):
    """A fast jump, then a slow drift nowhere near its end (the rise's end is not in sight)."""
    rng = np.random.default_rng(5)
    t = np.arange(1, 121, dtype=float)
    y = 0.9 - 0.3 * np.exp(-t / 3.0) - 0.2 * np.exp(-t / 400.0) + 0.01 * rng.standard_normal(t.size)
    path = tmp_path_factory.mktemp("bounds") / "rising.csv"
    path.write_text("step,reward\n" + "\n".join(f"{int(s)},{float(v)!r}" for s, v in zip(t, y)) + "\n")
    return path, t, y


@pytest.mark.slow
def test_rising_run_gets_two_sided_intervals_inside_its_bounds(rising_far_csv, capsys):
    """a run still rising with its end not in sight gets finite, two-sided intervals
    (wide upward, not floored at today's level), every one inside the metric's bounds, and the
    truth at the horizon inside the 95% band."""
    path, t, y = rising_far_csv
    code, out, _ = run_cli(capsys, "forecast", path, "--horizon", "600", "--at", "300", "--format", "json")
    assert code == 0
    r = json.loads(out)["runs"][0]
    assert r["bounds"]["low"] == 0.0 and r["bounds"]["high"] == 1.0 and "[0, 1]" in r["bounds"]["source"]
    now = r["point"]["persistence"]
    for a, step in zip(r["at"], (600, 300)):
        assert a["kind"] == "interval" and None not in a["pi80"] and None not in a["pi95"]
        assert 0.0 < a["pi95"][0] < a["pi80"][0] < a["mean"] < a["pi80"][1] < a["pi95"][1] < 1.0
        truth = 0.9 - 0.3 * np.exp(-step / 3.0) - 0.2 * np.exp(-step / 400.0)
        assert a["pi95"][0] <= truth <= a["pi95"][1]
        assert a["pi95"][1] > now + 0.05  # room to keep rising
    g = r["remaining_gain"]
    assert g["kind"] == "estimate" and g["ci95"][0] < g["value"] < g["ci95"][1]
    assert r["recommendation"].startswith(("keep going", "cannot tell yet"))


@pytest.mark.slow
def test_bounds_option_and_the_text_table(rising_far_csv, capsys):
    path, _, _ = rising_far_csv
    code, out, _ = run_cli(capsys, "forecast", path, "--horizon", "600", "--bounds", "0,0.95", "--format", "json")
    assert code == 0
    r = json.loads(out)["runs"][0]
    assert r["bounds"] == {"low": 0.0, "high": 0.95, "source": "--bounds"}
    assert all(a["pi95"][1] < 0.95 for a in r["at"])
    code, out, _ = run_cli(capsys, "forecast", path, "--horizon", "600")
    flat = " ".join(out.split())
    assert code == 0 and "bounds" in flat and ", ?]" not in flat
    code, _, err = run_cli(capsys, "forecast", path, "--bounds", "1,0")
    assert code == 2 and "--bounds" in err


@pytest.mark.slow
def test_fan_chart_of_a_rising_run_has_both_bands(rising_far_csv, tmp_path):
    from matplotlib.figure import Figure

    from grpofit.forecasting.engine import forecast_series
    from grpofit.render.fanchart import draw_fan

    _, t, y = rising_far_csv
    fc = forecast_series(t, y, horizon_step=600)
    assert not fc.fan.get("one_sided")
    assert np.all(fc.fan["q025"] < fc.fan["q10"]) and np.all(fc.fan["q90"] < fc.fan["q975"])
    assert np.all(fc.fan["q025"] > 0.0) and np.all(fc.fan["q975"] < 1.0)
    ax = Figure().add_subplot(1, 1, 1)
    draw_fan(ax, fc, {"run": "rising", "horizon": {"step": 600}})
    assert len(ax.collections) == 2


@pytest.mark.slow
def test_two_sided_forecast_keeps_its_bands():
    """A run whose plateau is in sight keeps two-sided intervals, steps and bands."""
    from matplotlib.figure import Figure

    from grpofit.forecasting.engine import forecast_series
    from grpofit.render.fanchart import draw_fan

    rng = np.random.default_rng(2)
    t = np.arange(1, 301, dtype=float)
    y = 0.8 - 0.5 * np.exp(-t / 30.0) + 0.01 * rng.standard_normal(t.size)
    fc = forecast_series(t, y, horizon_step=400)
    d = fc.doc
    assert d["plateau"]["kind"] == "estimate" and d["at"][0]["kind"] == "interval"
    assert d["steps_to_95"]["kind"] == "estimate" and None not in d["steps_to_95"]["ci95"]
    assert d["remaining_gain"]["ci95"][1] is not None
    ax = Figure().add_subplot(1, 1, 1)
    draw_fan(ax, fc, {"run": "flat", "horizon": {"step": 400}})
    assert len(ax.collections) == 2 and "median forecast" in [ln.get_label() for ln in ax.get_lines()]


def test_model_weight_from_the_rolling_origin_errors():
    from grpofit.forecasting.validate import model_weight

    assert model_weight(None) == 0.5
    assert model_weight({"model_error": 0.01, "persistence_error": 0.01}) == pytest.approx(0.5)
    assert model_weight({"model_error": 0.01, "persistence_error": 0.03}) == pytest.approx(0.9)
    assert model_weight({"model_error": 0.03, "persistence_error": 0.01}) == pytest.approx(0.1)


def test_bounds_from_the_metric_the_config_and_the_option():
    from grpofit.core.errors import UsageError
    from grpofit.fitting.bounds import Bounds, lattice, metric_bounds, parse_bounds

    v = np.array([0.2, 0.5, 0.7])
    assert metric_bounds("val/accuracy", v).source == "metric: val/accuracy is a rate"
    assert metric_bounds("reward", v, batch=64).source == "binary rewards, batch 64"
    assert metric_bounds("reward", np.array([-0.5, 1.5])).two_sided is False
    cfg = {"trainer.reward_range": [0, 3]}
    assert metric_bounds("reward", np.array([0.5, 2.0]), config=cfg).doc() == {
        "low": 0.0,
        "high": 3.0,
        "source": "config: trainer.reward_range",
    }
    assert metric_bounds("reward", v, option=parse_bounds("-1,2")).doc() == {
        "low": -1.0,
        "high": 2.0,
        "source": "--bounds",
    }
    for bad in ("1", "a,b", "2,1", "0,inf"):
        with pytest.raises(UsageError):
            parse_bounds(bad)
    b = Bounds(-1.0, 2.0, "x")
    z = np.array([-50.0, -3.0, 0.0, 4.0, 50.0, 800.0])
    y = b.from_link(z)
    assert np.all((y >= -1.0) & (y <= 2.0)) and np.all(np.diff(y) >= 0)
    assert b.from_link(b.to_link(np.array([-0.5, 0.5, 1.5]))) == pytest.approx([-0.5, 0.5, 1.5])
    assert lattice(Bounds(0, 1, "x"), np.array([0, 3, 17, 64]) / 64.0) == 64
    assert lattice(Bounds(0, 1, "x"), np.array([0.1234567, 0.5, 0.7])) is None


def test_rolling_origin_has_origins_at_a_25_percent_cut(monkeypatch):
    """A 25% cut asks for a gap of about three seen parts: the furthest-ahead origins that leave
    enough points are used, so the check (and the weight) exists there too."""
    from grpofit.forecasting.validate import rolling_origin

    class Fit:  # never called: _conditional is replaced below
        pass

    import grpofit.forecasting.predictive as pred
    from grpofit.forecasting.likelihood import reduce_series

    t = np.arange(60, dtype=float)
    y = 0.6 - 0.3 * np.exp(-t / 5.0)
    # a model that knows the plateau: it beats persistence from every origin inside the rise
    monkeypatch.setattr(pred, "_conditional", lambda fit, theta, sub, tt, rng: (np.full(tt.size, 0.6),))
    Fit.theta = None
    v = rolling_origin([Fit()], np.array([1.0]), reduce_series(t, y), t, y, horizon=3.0 * 59)
    assert v is not None and len(v["origins"]) == 3 and min(v["origins"]) >= 0.3 * 59 - 1
    assert v["model_error"] < v["persistence_error"] and v["model_weight"] > 0.5


@pytest.mark.slow
@pytest.mark.parametrize(
    "setting",
    [
        # sits at 1.0 (within float precision) from before the cut on
        dict(arms=64, lr=0.253, beta=0.248, momentum=0.95, refresh_interval=1, steps=2117, seed=303003),
        # still creeping toward 1.0 at the cut (0.9998), 0.99989 at the end
        dict(arms=64, lr=0.103, beta=0.0543, momentum=0.0, refresh_interval=1, steps=1996, seed=303010),
    ],
)
def test_deterministic_run_at_the_bound_is_inside_its_band(setting):
    """a deterministic bandit run (the exact mean-field gradient: no sampling noise) at or creeping
    toward 1.0, cut at 25%: the values later in the run lie inside pi95 and pi80 (the logit's bands
    used to stop 1e-5 to 1e-4 short of the bound, confidently missing the run)."""
    from grpofit.dynamics.simulation import simulate_bandit
    from grpofit.forecasting.engine import forecast_series

    c = simulate_bandit(group_size=0, measure=False, **setting).columns
    s, y = c["step"], c["reward"]
    k = int(round(0.25 * s.size))
    mid = (k - 1 + s.size - 1) // 2
    fc = forecast_series(s[:k], y[:k], horizon_step=float(s[-1]), at_steps=[float(s[mid])], seed=k)
    assert fc.doc["bounds"]["high"] == 1.0
    for entry, actual in zip(fc.doc["at"], (y[-1], y[mid])):
        assert actual > 0.999
        for key in ("pi80", "pi95"):
            lo, hi = entry[key]
            assert lo <= actual <= hi, (key, entry[key], actual)
            assert 0.0 <= lo and hi <= 1.0


def test_a_band_reaches_a_bound_only_when_its_end_is_within_a_share_of_its_width():
    from grpofit.fitting.bounds import UNBOUNDED, Bounds
    from grpofit.forecasting.engine import NEAR_BOUND, _band

    unit = Bounds(0.0, 1.0, "test")
    near = np.linspace(0.6, 0.9998, 2001)  # pi95's upper end 0.99 below 1 by << 5% of its width
    lo, hi = _band(near, 95.0, unit)
    assert hi == 1.0 and lo == pytest.approx(np.percentile(near, 2.5))
    far = np.linspace(0.3, 0.8, 2001)  # 0.2 from the bound: untouched at either end
    assert _band(far, 95.0, unit) == pytest.approx([np.percentile(far, 2.5), np.percentile(far, 97.5)])
    low = np.geomspace(1e-5, 0.3, 2001)  # pi80's lower end 3e-5: reaches 0
    assert _band(low, 80.0, unit)[0] == 0.0
    assert _band(near, 95.0, UNBOUNDED)[1] < 1.0  # no bound, no move
    assert 0.0 < NEAR_BOUND <= 0.05


@pytest.mark.slow
def test_the_fit_plateau_the_forecast_states_stays_inside_the_bounds(capsys):
    """verl's off-policy twin cut at step 40: the fit's law puts the plateau's 95% interval past 1
    ([0.942, 1.02]) for a score in [0, 1]; the fit holds it at the bound and the forecast, which
    states the fit's plateau, says so. Uncut, ``fit`` itself printed [0.957, 1.01]."""
    from tests.reallogs import real_log

    log = real_log("verl_grpo_qwen2_7b_fsdp_offpolicy.tfevents")
    code, out, _ = run_cli(capsys, "forecast", log, "--until", "40", "--horizon", "200", "--format", "json")
    assert code == 0
    r = json.loads(out)["runs"][0]
    p = r["plateau"]
    assert p["source"] == "fit" and p["kind"] == "estimate"
    assert p["ci95"][1] == pytest.approx(1.0) and p["ci95"][0] < p["value"] < 1.0
    assert "[0, 1]" in p["ci95_clipped"]
    code, out, _ = run_cli(capsys, "fit", log, "--format", "json")
    for law in json.loads(out)["runs"][0]["models"].values():
        q = law["params"]["plateau"]
        assert q["ci95"][1] <= 1.0 and q["value"] <= 1.0
        assert "held inside the metric's bounds [0, 1]" in q["note"]


@pytest.mark.parametrize("n,p", [(64, 0.7), (32, 0.4), (128, 0.93)])
def test_a_band_of_lattice_draws_holds_its_level_not_its_end_values_whole(n, p):
    """Draws of a logged mean of ``n`` binary rewards lie on a lattice of step 1/n: their
    percentiles are lattice values, and a band holding both end values whole holds more than its
    level (a binomial of 64 at 0.7: 83% for an 80% band, 97% for a 95% one). Spread over their cells, the draws give
    a band whose probability under the same binomial is the level within a fraction of one
    value's mass, on average over positions of the mass's centre."""
    from scipy.stats import binom

    from grpofit.fitting.bounds import Bounds
    from grpofit.forecasting.engine import _band

    unit = Bounds(0.0, 1.0, "test")

    def held(band):
        lo, hi = band
        return binom.cdf(np.floor(hi * n + 1e-9), n, p) - binom.cdf(np.ceil(lo * n - 1e-9) - 1, n, p)

    spread, whole = {80.0: [], 95.0: []}, {80.0: [], 95.0: []}
    for seed in range(40):
        draws = np.random.default_rng(seed).binomial(n, p, 1500) / n
        for level in (80.0, 95.0):
            spread[level].append(held(_band(draws, level, unit, 1.0 / n)))
            whole[level].append(held(_band(draws, level, unit)))
    for level, tol in ((80.0, 0.03), (95.0, 0.015)):
        assert np.mean(spread[level]) == pytest.approx(level / 100.0, abs=tol)
        assert np.mean(whole[level]) > np.mean(spread[level])
    # without a lattice step, the band is the draws' own percentiles (as before)
    d = np.random.default_rng(0).binomial(n, p, 1500) / n
    assert _band(d, 80.0, unit, 0.0) == _band(d, 80.0, unit)


def test_fit_holds_a_rates_levels_inside_its_bounds_unless_the_values_alone_guessed_them():
    """A rising accuracy whose law's 95% interval for p* passes 1 is held at 1 (named a rate);
    with bounds guessed from values in [0, 1] only the interval ends of a p* inside them are
    held: a law whose own p* lies past 1 says the metric may be a sum still below 1."""
    from grpofit.fitting import fit_series
    from grpofit.fitting.bounds import Bounds, metric_bounds

    rng = np.random.default_rng(5)
    t = np.arange(1.0, 121.0)
    y = np.clip(1.15 - 1.1 * np.exp(-t / 150.0) + rng.normal(0, 0.02, t.size), 0, 1)  # still rising at 0.6
    assert metric_bounds("accuracy", y).guessed is False and metric_bounds("reward", y).guessed is True
    named = fit_series(t, y, metric="accuracy")
    raw = fit_series(t, y, metric="reward", bounds=Bounds(None, None, None))
    guessed = fit_series(t, y, metric="reward")
    for law, m in named.models.items():
        p_raw, p_named, p_guess = (
            raw.models[law].params["plateau"],
            m.params["plateau"],
            guessed.models[law].params["plateau"],
        )
        assert p_named.value <= 1.0 and p_named.ci95[1] <= 1.0
        if p_raw.value > 1.0:  # the law says past 1: held when named, left when guessed
            assert p_named.value == 1.0 and "held inside the metric's bounds [0, 1]" in p_named.note
            assert p_guess.value == pytest.approx(p_raw.value) and p_guess.ci95 == pytest.approx(p_raw.ci95)
        elif p_raw.ci95[1] > 1.0:
            assert p_guess.ci95[1] == 1.0 and "taken as a rate" in p_guess.note
