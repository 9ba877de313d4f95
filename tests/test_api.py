"""The Python API as a notebook user meets it: lazy import, the CLI's documents, HTML, plots."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import grpofit
from grpofit.cli import main

ROOT = Path(__file__).resolve().parents[1]
HEALTHY = ROOT / "sample_logs" / "healthy_slow_start.csv"


def cli_json(capsys, *args) -> dict:
    with pytest.raises(SystemExit):
        main([*map(str, args), "--format", "json"])
    return json.loads(capsys.readouterr().out)


@pytest.mark.subprocess
def test_import_is_lazy_and_instant():
    code = "import sys, grpofit; print(sorted(m for m in ('numpy', 'pandas', 'scipy', 'lmfit') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert {"read", "fit", "diagnose", "predict"} <= set(dir(grpofit))
    with pytest.raises(AttributeError):
        grpofit.no_such_name  # noqa: B018


def test_fit_returns_the_cli_document(capsys):
    runs = grpofit.read(HEALTHY)
    assert len(runs) == 1 and runs[0].name == str(HEALTHY)
    res = grpofit.fit(runs[0])
    cli = cli_json(capsys, "fit", HEALTHY)["runs"][0]
    assert json.loads(res.to_json()) == cli
    plateau = cli["models"][cli["preferred"]]["params"]["plateau"]["value"]
    assert res.param("plateau") == pytest.approx(plateau)
    assert res.params["exponential"]["timescale"] == pytest.approx(
        cli["models"]["exponential"]["params"]["timescale"]["value"]
    )
    assert "<table>" in res._repr_html_() and "plateau" in res._repr_html_()


def test_inputs_in_memory_give_the_same_fit():
    import pandas as pd

    from_path = grpofit.fit(HEALTHY)
    from_frame = grpofit.fit(pd.read_csv(HEALTHY))
    assert from_frame.param("plateau") == pytest.approx(from_path.param("plateau"), rel=1e-9)
    rng = np.random.default_rng(3)
    steps = np.arange(300)
    values = 0.8 - 0.6 * np.exp(-steps / 40) + rng.normal(0, 0.01, steps.size)
    res = grpofit.fit((steps, values))
    ci = res.to_dict()["models"]["exponential"]["params"]["plateau"]["ci95"]
    assert ci[0] < 0.8 < ci[1]
    from grpofit.core.errors import UsageError

    with pytest.raises(UsageError, match="cannot read a int"):
        grpofit.read(42)


def test_fit_on_a_multi_run_source_asks_to_pick_one():
    from grpofit.core.errors import UsageError

    with pytest.raises(UsageError, match="holds 3 runs"):
        grpofit.fit(ROOT / "sample_logs" / "group_sweep")


@pytest.mark.slow
def test_plot_draws_on_the_callers_axes_and_keeps_the_backend():
    import matplotlib

    before = matplotlib.get_backend()
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.add_subplot(1, 1, 1)
    out = grpofit.fit(HEALTHY).plot(ax=ax)
    assert out is fig and len(ax.lines) >= 3
    assert grpofit.fit(HEALTHY).plot().axes
    assert matplotlib.get_backend() == before


@pytest.mark.slow
def test_diagnose_takes_paths_and_runs(capsys):
    folder = ROOT / "sample_logs"
    cli = cli_json(capsys, "diagnose", folder)
    capsys.readouterr()
    api = grpofit.diagnose(folder)
    assert api.verdicts == {r["run"]: r["verdict"] for r in cli["runs"]}
    assert api.passed is False and api.to_dict()["gate"] == cli["gate"]
    runs = grpofit.read(HEALTHY)
    one = grpofit.diagnose(runs)
    assert one.verdicts == {str(HEALTHY): "pass"} and one.passed
    assert "verdict" in one._repr_html_()


def test_predict_matches_the_cli(capsys):
    args = dict(lr=1e-6, momentum=0.9, refresh_interval=4, curvature=2000)
    cli = cli_json(
        capsys, "predict", "--lr", "1e-6", "--momentum", "0.9", "--refresh-interval", "4", "--curvature", "2000"
    )
    assert grpofit.predict(**args).to_dict() == cli


def test_fit_result_param_accessor():
    """One accessor for a fitted parameter: value, stderr, ci95 and whether it is identified."""
    from grpofit.fitting.analysis import fit_run

    result = fit_run(grpofit.read(HEALTHY)[0])
    p = result.param("plateau")
    assert p is result.models[result.preferred].params["plateau"]
    assert p.identified and p.ci95[0] < p.value < p.ci95[1] and (p.stderr is None or p.stderr > 0)
    assert result.param("inertia", "oscillator") is result.models["oscillator"].params["inertia"]
    assert result.param("no_such") is None and result.param("plateau", "no_such_law") is None
    from grpofit.fitting.results import Estimate

    assert not Estimate(None).identified
    assert not Estimate(0.3, note="not identifiable: no rise").identified
