"""where the rise's end is not in the seen steps, every number the forecast derives
from the unknown upper end is one-sided (or null with a reason), in JSON, text and the fan chart;
and the point forecast is a blend of the model and persistence that a still-rising run never
puts below the level it has reached."""

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
def test_lower_bound_forecast_is_one_sided_everywhere_in_json(rising_far_csv, capsys):
    path, t, y = rising_far_csv
    code, out, _ = run_cli(capsys, "forecast", path, "--horizon", "600", "--at", "300", "--format", "json")
    assert code == 0
    r = json.loads(out)["runs"][0]
    assert r["plateau"]["kind"] == "lower_bound" and r["plateau"]["ci95"][1] is None
    for a in r["at"]:
        assert a["kind"] == "lower_bound" and a["pi80"][1] is None and a["pi95"][1] is None
        assert a["pi95"][0] <= a["pi80"][0] <= a["mean"]
    for key in ("steps_to_90", "steps_to_95"):
        s = r[key]
        assert s["kind"] in ("lower_bound", "unknown")
        if s["kind"] == "lower_bound":  # a bound past the seen steps, no upper end
            assert s["ci95"] == [s["value"], None] and s["value"] > t[-1]
        else:  # a bound not past the seen steps says nothing: null, with the reason
            assert s["value"] is None and s["ci95"] is None and "rise's end" in s["reason"]
    g = r["remaining_gain"]
    assert g["kind"] == "lower_bound" and g["ci95"][1] is None and g["ci95"][0] <= g["value"]
    # the point forecast of a still-rising run is not below where it already is
    assert r["still_rising"] and r["at"][0]["mean"] >= r["point"]["persistence"] - 1e-12
    assert r["point"]["persistence"] == pytest.approx(float(y[-12:].mean()))


@pytest.mark.slow
def test_lower_bound_forecast_is_one_sided_in_the_text_table(rising_far_csv, capsys):
    path, _, _ = rising_far_csv
    code, out, _ = run_cli(capsys, "forecast", path, "--horizon", "600")
    assert code == 0
    flat = " ".join(out.split())
    assert "at least" in flat and "upper end unknown" in flat
    # no two-sided interval with an unknown end ('[0.8, ?]') and no bare two-sided step interval
    assert ", ?]" not in flat
    for label in ("step reaching 90% of the gain", "step reaching 95% of the gain"):
        row = next(line for line in out.splitlines() if label in line)
        assert "at least step" in row or "unknown" in row


@pytest.mark.slow
def test_fan_chart_is_drawn_one_sided(rising_far_csv, tmp_path):
    from matplotlib.figure import Figure

    from grpofit.forecasting.engine import forecast_series
    from grpofit.render.fanchart import draw_fan, save_fan_figure

    _, t, y = rising_far_csv
    fc = forecast_series(t, y, horizon_step=600)
    assert fc.fan["one_sided"] is True
    ax = Figure().add_subplot(1, 1, 1)
    draw_fan(ax, fc, {"run": "rising", "horizon": {"step": 600}})
    labels = [line.get_label() for line in ax.get_lines()]
    assert "95% lower bound (upper end unknown)" in labels and "80% lower bound" in labels
    assert "median forecast" not in labels
    # one shaded region only (open above the 95% bound), not the two two-sided bands
    assert len(ax.collections) == 1
    fit = next(line for line in ax.get_lines() if line.get_label().startswith("fit"))
    assert fit.get_xdata().max() <= t[-1]  # the law's rise is not drawn past the seen steps
    save_fan_figure([(fc, {"run": "rising", "horizon": {"step": 600}}, None)], tmp_path / "fan.png")
    assert (tmp_path / "fan.png").stat().st_size > 10_000


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


def test_blend_floors_a_rising_run_at_persistence_and_widens_the_interval():
    from grpofit.forecasting.engine import _Blend

    b = _Blend(persistence=0.60, weight=0.8, sign=1)
    assert b.point(0.55) == pytest.approx(0.60)  # the model below where a rising run is: floored
    assert b.point(0.70) == pytest.approx(0.68)
    entry = {"mean": 0.55, "pi80": [0.50, 0.60], "pi95": [0.45, 0.65]}
    b.apply(entry, "mean")
    assert entry["mean"] == pytest.approx(0.60)
    assert entry["pi95"] == pytest.approx([0.45, 0.70])  # holds both the model's and the moved spread
    f = _Blend(persistence=0.60, weight=1.0, sign=-1)
    assert f.point(0.7) == pytest.approx(0.60) and f.point(0.5) == pytest.approx(0.5)
    assert _Blend(0.6, 1.0, 0).method() == "model"


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
