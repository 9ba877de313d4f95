"""predict --plot figure: drawn on a Figure, titled with the lr, plateau line labelled."""

from __future__ import annotations

import matplotlib
import pytest

from grpofit.dynamics import plot_what_if, predict, what_if


def _result():
    base = predict(0.1, 0.5, 1, 0.28)
    return what_if(base, lr=0.05, plateau=0.5, initial=0.1, steps=80)


@pytest.mark.slow
def test_what_if_plot_saved_titled_backend_unchanged(tmp_path):
    backend = matplotlib.get_backend()
    fig = plot_what_if(_result())
    path = tmp_path / "whatif.png"
    fig.savefig(path)
    assert path.stat().st_size > 1000
    assert matplotlib.get_backend() == backend
    ax = fig.axes[0]
    assert "lr 0.05" in ax.get_title()
    labels = ax.get_legend_handles_labels()[1]
    assert any(lab.startswith("plateau 0.5") for lab in labels)


def test_what_if_plot_names_adam_effective_rate():
    fig = plot_what_if(_result(), lr_passed=0.5, adam_beta1=0.9)
    title = fig.axes[0].get_title()
    assert "lr 0.5" in title and "Adam-effective lr 0.05" in title


@pytest.mark.slow
def test_predict_plot_shows_the_lr_the_user_passed(capsys, tmp_path, monkeypatch):
    """``predict --plot`` through the CLI: the title carries the --lr as given and the Adam wording."""
    from pathlib import Path

    import grpofit.render.plotting as plotting
    from tests.conftest import run_cli

    drawn = []
    monkeypatch.setattr(plotting, "_save", lambda fig, path: drawn.append(fig))
    sample = Path(__file__).resolve().parents[1] / "sample_logs" / "healthy_slow_start.csv"
    code, _, err = run_cli(
        capsys,
        "predict",
        "--from-run",
        sample,
        "--lr",
        "0.5",
        "--momentum",
        "0.9",
        "--refresh-interval",
        "1",
        "--adam",
        "--what-if-lr",
        "1.0",
        "--plot",
        tmp_path / "w.png",
    )
    assert code == 0, err
    titles = " ".join(t.get_text() for fig in drawn for ax in fig.axes for t in [ax.title, *fig.texts])
    titles += " ".join(fig._suptitle.get_text() for fig in drawn if getattr(fig, "_suptitle", None))
    # the title is the what-if's: --what-if-lr 1.0 as given, and its Adam-effective rate 1.0 x (1 - 0.9)
    assert "at lr 1 (Adam, beta1=0.9; Adam-effective lr 0.1)" in titles, titles
    labels = [lab for fig in drawn for ax in fig.axes for lab in ax.get_legend_handles_labels()[1]]
    assert any(lab.startswith("baseline: lr_eff=0.05 ") for lab in labels), labels
