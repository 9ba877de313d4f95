"""Figures : a grid for many runs, residual legends, titles with
metric/p*/regime/verdict, no 'step (step)', --overlay, and the user's backend left alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpofit.cli import main

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_logs"
RUNS = [
    SAMPLES / "healthy_slow_start.csv",
    SAMPLES / "bandit_g16.csv",
    SAMPLES / "dead_run",
    SAMPLES / "group_sweep" / "bandit_G4.csv",
]


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
    from grpofit.readers import read_path
    from grpofit.render.plotting import _threshold_lines, diagnosis_figure

    run = read_path(str(SAMPLES / "wandb"))[0]
    d = diagnose_run(run)
    fig = diagnosis_figure(d, run, Thresholds(), {"verdict": "warn"})
    title = fig.axes[0].get_title()
    assert "verdict warn" in title and "train-eval: fail" in title and "p* 0.902" in title
    # only the panels that carry a finding: the eval reward (train-eval fails), not the passing
    # zero-variance groups, entropy or gradient norm
    ylabels = [ax.get_ylabel() for ax in fig.axes[1:]]
    assert ylabels == ["eval reward", "train train/reward"]  # the train reward on the panel's own second axis
    assert fig.axes[1].get_title(loc="left") == "eval reward (train_eval_decoupling): fail"
    steps, values = run.series(d.roles["zero_std_frac"])
    warn = next(t for t in _threshold_lines("zero_std_frac", steps, values, Thresholds()) if t[1] == "warn (late run)")
    assert warn[3] >= 290  # the late run (last quarter of 400 steps), not the whole run


def test_diagnosis_figure_fits_a_laptop_screen_and_draws_each_series_once():
    from grpofit.diagnostics import Thresholds, diagnose_run
    from grpofit.readers import read_path
    from grpofit.render.diagnosis_panels import finding_panels
    from grpofit.render.plotting import diagnosis_figure

    for path in ("collapse_run", "wandb", "healthy_slow_start.csv"):
        run = read_path(str(SAMPLES / path))[0]
        d = diagnose_run(run)
        fig = diagnosis_figure(d, run, Thresholds())
        w, h = fig.get_size_inches() * fig.dpi
        assert w <= 1100 and h <= 1000, (path, w, h)
        panels, _ = finding_panels(d, run)
        assert all(p[0] != "rule" or p[2].status in ("warn", "fail") for p in panels)
        drawn = [
            p[2].panel.label if p[0] == "rule" else d.roles[p[2]] if p[0] == "series" else p[1]["metric"]
            for p in panels
        ]
        assert len(drawn) == len(set(drawn)), (path, drawn)
        labels = fig.axes[0].get_legend_handles_labels()[1]
        assert sum("R²" in label for label in labels) >= 1


def test_thin_keeps_spikes_and_order():
    import numpy as np

    from grpofit.render.diagnosis_panels import thin

    x = np.arange(10_000.0)
    y = np.sin(x / 300)
    y[4321] = 50.0
    y[777] = np.nan
    tx, ty = thin(x, y, 1000)
    assert tx.size <= 1100 and np.all(np.diff(tx) > 0)
    assert 50.0 in ty and np.nanmin(ty) == np.nanmin(y)
    assert thin(x[:50], y[:50], 1000)[0].size == 50


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


def test_log_ticks_are_few_plain_and_inside_the_range():
    from grpofit.render.plotting import log_ticks

    assert log_ticks(1e-6, 1e3) == [1e-6, 1e-4, 1e-2, 1.0, 100.0]  # every second power over many decades
    assert log_ticks(0.008, 0.25) == pytest.approx([0.01, 0.02, 0.05, 0.1, 0.2])  # 1-2-5 within a decade or two
    assert log_ticks(0.03, 9) == [0.1, 1.0]  # powers, not a stride through 1-2-5 steps
    assert log_ticks(2, 9) == [2.0, 4.0, 6.0, 8.0]
    for lo, hi in [(0.03, 400), (0.9, 1.4), (3e-5, 2e-3)]:
        ticks = log_ticks(lo, hi)
        assert 1 <= len(ticks) <= 5 and all(lo <= t <= hi for t in ticks)
    assert log_ticks(0, 1) == [] and log_ticks(1, 1) == []


def test_a_run_no_law_beats_a_constant_is_drawn_as_its_level():
    """A flat noisy run: the laws' curves ring through the noise (R² < 0.1); the figure labels
    them as no better than a constant, draws them faint, and names the line the run's level."""
    import numpy as np

    from grpofit.fitting import fit_series
    from grpofit.render.plotting import fit_figure

    rng = np.random.default_rng(3)
    t = np.arange(1.0, 61.0)
    res = fit_series(t, np.clip(0.45 + rng.normal(0, 0.25, t.size), 0, 1), run="flat", metric="reward")
    assert res.signal.get("detected") is False
    ax = fit_figure([res]).axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert any(lab.startswith("the run's level (no significant rise)") for lab in labels)
    laws = [line for line in ax.get_lines() if "no better than a constant" in str(line.get_label())]
    assert laws and all(line.get_alpha() < 1 for line in laws)
