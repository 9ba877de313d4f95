"""predict --plot figure: drawn on a Figure, titled with the lr, plateau line labelled."""

from __future__ import annotations

import matplotlib

from grpofit.dynamics import plot_what_if, predict, what_if


def _result():
    base = predict(0.1, 0.5, 1, 0.28)
    return what_if(base, lr=0.05, plateau=0.5, initial=0.1, steps=80)


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
