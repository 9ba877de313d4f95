"""``grpofit.forecast`` and ``grpofit.backtest`` as a notebook user meets them: the CLI's
documents, HTML tables, fan charts on the caller's axes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import grpofit
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
HEALTHY = ROOT / "sample_logs" / "healthy_slow_start.csv"


@pytest.fixture(scope="module")
def healthy_forecast():
    return grpofit.forecast(HEALTHY, horizon=600, at=[400])


@pytest.mark.slow
def test_forecast_returns_the_cli_document(capsys, healthy_forecast):
    fc = healthy_forecast
    code, out, _ = run_cli(capsys, "forecast", HEALTHY, "--horizon", "600", "--at", "400", "--format", "json")
    assert code == 0
    cli = json.loads(out)["runs"][0]
    assert json.loads(fc.to_json()) == cli
    assert fc.horizon == 600 == cli["horizon"]["step"]
    assert fc.expected == pytest.approx(cli["at"][0]["mean"]) and fc.expected is not None
    lo, hi = fc.pi95
    assert lo < fc.expected < hi
    assert fc.plateau == cli["plateau"]["value"]
    html = fc._repr_html_()
    assert "<table>" in html and "remaining_gain" in html
    assert "Forecast(run=" in repr(fc)


@pytest.mark.slow
def test_forecast_until_and_in_memory_runs():
    rng = np.random.default_rng(5)
    steps = np.arange(300)
    values = 0.8 - 0.6 * np.exp(-steps / 50) + rng.normal(0, 0.01, steps.size)
    fc = grpofit.forecast((steps, values), horizon=299, until=150)
    assert fc.to_dict()["seen"]["steps"] == [0, 150]
    assert fc.rest[0].size == 149  # the steps after --until, kept for the plot
    lo, hi = fc.pi95
    assert lo < float(values[-20:].mean()) < hi  # what happened lies in the 95% interval
    from grpofit.core.errors import UsageError

    with pytest.raises(UsageError, match="--horizon"):
        grpofit.forecast((steps, values), horizon=0)


def test_forecast_plot_draws_on_the_callers_axes(healthy_forecast):
    import matplotlib
    from matplotlib.figure import Figure

    before = matplotlib.get_backend()
    fig = Figure()
    ax = fig.add_subplot(1, 1, 1)
    fc = healthy_forecast
    assert fc.plot(ax=ax) is fig
    labels = ax.get_legend_handles_labels()[1]
    assert "median forecast" in labels and "95%" in labels and "planned end" in labels
    assert fc.plot().axes  # a new Figure when no axes are given
    assert matplotlib.get_backend() == before


@pytest.mark.slow
def test_backtest_returns_the_cli_document(capsys):
    bt = grpofit.backtest(HEALTHY, cuts=[50])
    code, out, _ = run_cli(capsys, "backtest", HEALTHY, "--cuts", "50", "--format", "json")
    assert code == 0
    assert json.loads(bt.to_json()) == json.loads(out)
    cut = bt.to_dict()["runs"][0]["cuts"][0]
    assert cut["fraction"] == 0.5
    assert bt.coverage == bt.to_dict()["summary"]["coverage"]
    assert "<table>" in bt._repr_html_() and "50%" in bt._repr_html_()


@pytest.mark.slow
def test_backtest_of_runs_in_memory():
    rng = np.random.default_rng(2)
    steps = np.arange(300)
    values = 0.7 - 0.5 * np.exp(-steps / 50) + rng.normal(0, 0.01, steps.size)
    bt = grpofit.backtest([(steps, values)], cuts=[60])
    cut = bt.to_dict()["runs"][0]["cuts"][0]
    assert cut["step"] == 179 and cut["covered"] is True and bt.coverage == 1.0
