"""Figures: fits (data, both laws, residuals, plateau band) and per-run diagnosis panels.

Functions build and return a :class:`matplotlib.figure.Figure` (never ``plt.show()``); ``save_*``
writes it by the file's suffix (PNG, SVG or PDF). matplotlib is imported only here, lazily.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grpofit.errors import UsageError

SUFFIXES = (".png", ".svg", ".pdf")
MODEL_STYLE = {"exponential": dict(color="tab:orange", ls="--"), "oscillator": dict(color="tab:red", ls="-")}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def check_suffix(path: Path) -> None:
    if Path(path).suffix.lower() not in SUFFIXES:
        raise UsageError(
            f"cannot tell the figure format from {Path(path).name!r}",
            path=str(path),
            fix="end the file name in .png, .svg or .pdf",
        )


def _save(fig, path: Path) -> None:
    path = Path(path)
    check_suffix(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110, bbox_inches="tight")
    except OSError as e:
        raise UsageError(f"cannot write the figure: {e.strerror}", path=str(path), fix="choose a writable path") from None
    finally:
        _pyplot().close(fig)


def draw_fit(result: Any, ax_data, ax_resid=None, *, collapse_values=None) -> None:
    """Data, both fitted curves and the plateau with its 95% interval; residuals below."""
    import numpy as np

    steps, values = result.steps, result.values
    ax_data.plot(steps, values, ".", ms=3, color="0.45", label=f"{result.metric} (fitted part)")
    if collapse_values is not None:
        cs, cv = collapse_values
        ax_data.plot(cs, cv, ".", ms=3, color="0.75", label="after the collapse (not fitted)")
    grid = np.linspace(steps[0], steps[-1], 400)
    for name, model in result.models.items():
        if not model.ok:
            continue
        style = MODEL_STYLE.get(name, {})
        r2 = model.r2
        ax_data.plot(grid, model.predict(grid), lw=1.8, label=f"{name} (R² {r2:.3f})" if r2 is not None else name, **style)
        if ax_resid is not None:
            ax_resid.plot(steps, values - model.predict(steps), ".", ms=2, color=style.get("color"), alpha=0.6)
    pref = result.models.get(result.preferred or "")
    plateau = pref.params.get("plateau") if pref is not None and pref.ok else None
    if plateau is not None and plateau.value is not None:
        ax_data.axhline(plateau.value, color="tab:blue", lw=1, label=f"plateau p* ({result.preferred})")
        if plateau.ci95:
            ax_data.axhspan(*plateau.ci95, color="tab:blue", alpha=0.12, label="p* 95% interval")
    collapse = getattr(result, "collapse", None)
    if collapse is not None:
        ax_data.axvline(collapse.step, color="k", ls=":", lw=1.2, label=f"collapse at step {collapse.step:g}")
    ax_data.set_ylabel(result.metric)
    ax_data.legend(fontsize=7, loc="best")
    ax_data.set_title(str(result.run), fontsize=9)
    if ax_resid is not None:
        ax_resid.axhline(0, color="k", lw=0.8)
        ax_resid.set_ylabel("residual")
        ax_resid.set_xlabel(f"step ({result.step_column})")


def fit_figure(results: list, *, collapses: list | None = None):
    """One column of (data, residual) panels per run."""
    plt = _pyplot()
    n = len(results)
    fig, axes = plt.subplots(
        2, n, figsize=(6 * n, 5.5), squeeze=False, sharex="col", gridspec_kw={"height_ratios": [3, 1]}
    )
    for i, result in enumerate(results):
        draw_fit(result, axes[0, i], axes[1, i], collapse_values=(collapses or [None] * n)[i])
    fig.tight_layout()
    return fig


def save_fit_figure(results: list, path: Path) -> None:
    check_suffix(path)
    _save(fit_figure(results), path)


def save_what_if_figure(figure_data: Any, path: Path) -> None:
    """The run, its baseline trajectory and the what-if trajectory (``predict --plot``)."""
    check_suffix(path)
    if figure_data is None:
        raise UsageError(
            "--plot needs a trajectory to draw", path=str(path), fix="add --from-run RUN and a --what-if-* option"
        )
    from grpofit.dynamics import plot_what_if

    _pyplot()
    result, observed = figure_data
    _save(plot_what_if(result, observed=observed), path)
