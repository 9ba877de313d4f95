"""Figures : a grid for many runs, residual legends, titles with
metric/p*/regime/verdict, no 'step (step)', --overlay, and the user's backend left alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpofit.cli import main

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_logs"
RUNS = [SAMPLES / "healthy_slow_start.csv", SAMPLES / "bandit_g16.csv", SAMPLES / "dead_run",
        SAMPLES / "group_sweep" / "bandit_G4.csv"]


def _results():
    from grpofit.commands.pipeline import fit_paths

    return fit_paths([str(r) for r in RUNS]).results


@pytest.mark.slow
def test_many_runs_make_a_grid_with_titled_panels_and_residual_legends():
    from grpofit.render.plotting import fit_figure

    fig = fit_figure(_results())
    w, h = fig.get_size_inches()
    assert w <= 18 and h > 10  # 3 columns by 2 rows, not one row of 4 panels
    data_axes = [ax for ax in fig.axes if ax.get_ylabel() != "residual"]
    resid_axes = [ax for ax in fig.axes if ax.get_ylabel() == "residual"]
    assert len(data_axes) == len(resid_axes) == 4
    healthy = data_axes[0].get_title()
    assert healthy.startswith("healthy_slow_start.csv\nreward · p* 0.729 · overdamped")
    labels = resid_axes[0].get_legend_handles_labels()[1]
    assert labels == ["exponential residual", "oscillator residual"]
    assert resid_axes[0].get_xlabel() == "step"  # not 'step (step)'


def test_overlay_puts_every_run_on_one_axis():
    from grpofit.render.plotting import fit_figure

    fig = fit_figure(_results()[:2], overlay=True)
    ax = fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert len(fig.axes) == 2 and len(labels) == 2
    assert labels[0].startswith("healthy_slow_start.csv: ") and "p* 0.729" in labels[0]


@pytest.mark.slow
def test_the_users_backend_is_never_switched(tmp_path):
    import matplotlib

    before = matplotlib.get_backend()
    matplotlib.use("svg", force=True)
    try:
        with pytest.raises(SystemExit) as exc:
            main(["fit", str(RUNS[0]), str(RUNS[1]), "--plot", str(tmp_path / "f.png"), "--overlay"])
        assert exc.value.code == 0 and (tmp_path / "f.png").stat().st_size > 10_000
        assert matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(before, force=True)


@pytest.mark.slow
def test_diagnosis_figure_titles_use_the_table_headers_and_thresholds_apply_where_read(tmp_path):
    from grpofit.diagnostics import Thresholds, diagnose_run
    from grpofit.render.plotting import diagnosis_figure
    from grpofit.readers import read_path

    run = read_path(str(SAMPLES / "wandb"))[0]
    d = diagnose_run(run)
    fig = diagnosis_figure(d, run, Thresholds(), {"verdict": "warn"})
    title = fig.axes[0].get_title()
    assert "verdict warn" in title and "train-eval: fail" in title and "p* 0.902" in title
    zero = next(ax for ax in fig.axes if ax.get_ylabel() == "zero-variance groups")
    (warn,) = [c for c in zero.collections if c.get_label() == "warn (late run)"]
    (segment,) = warn.get_segments()
    assert segment[0][0] >= 290  # the late run (last quarter of 400 steps), not the whole run


@pytest.mark.slow
def test_fit_panels_label_the_data_as_fitted_part_only_after_a_collapse():
    from grpofit.commands.pipeline import fit_paths
    from grpofit.render.plotting import fit_figure

    results = fit_paths([str(SAMPLES / "healthy_slow_start.csv"), str(SAMPLES / "collapse_run")]).results
    fig = fit_figure(results)
    healthy, collapsed = [ax for ax in fig.axes if ax.get_ylabel() != "residual"]
    assert healthy.get_legend_handles_labels()[1][0] == "reward"
    assert collapsed.get_legend_handles_labels()[1][:2] == ["reward (fitted part)", "after the collapse (not fitted)"]
    assert collapsed.get_title().startswith("collapse_run/checkpoint-400\n")  # not a bare checkpoint-400


def test_overlay_of_one_export_names_the_runs_and_shows_each_collapse():
    from grpofit.render.plotting import fit_figure, overlay_names

    names, source = overlay_names(["x/e.csv::[paper]GRPO_online", "x/e.csv::[paper]GSPO_online"])
    assert names == ["[paper]GRPO_online", "[paper]GSPO_online"] and source == "e.csv"
    assert overlay_names(["a/r1.csv", "b/r2.csv"]) == (["r1.csv", "r2.csv"], None)
    from grpofit.commands.pipeline import fit_paths

    results = fit_paths([str(SAMPLES / "collapse_run"), str(SAMPLES / "healthy_slow_start.csv")]).results
    fig = fit_figure(results, overlay=True)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert labels[0].startswith("collapse_run/checkpoint-400 (collapse at step 395): ")
    assert labels[1].startswith("healthy_slow_start.csv: ")
    # the points after the collapse are drawn (faint), not dropped
    n_points = sum(len(line.get_xdata()) for line in fig.axes[0].lines if line.get_linestyle() == "None")
    assert n_points == 600 + 400
