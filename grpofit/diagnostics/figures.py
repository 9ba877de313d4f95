"""``--plot-dir`` figures of issue 16's rules and of several eval series, beside each run's
diagnosis figure (:mod:`grpofit.plotting`):

- ``<run>.rules.png``: one panel per rule finding that has one (the series it read, its threshold
  lines, the start step; the title carries the rule, its status and its mode);
- ``<run>.evals.png``: one panel per benchmark (the eval points, the fitted exponential, the
  plateau's 95% interval, the train reward on a second axis; the title says whether it decouples).

Drawn on :class:`matplotlib.figure.Figure` objects: the process's backend is never touched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

_COLOUR = {"pass": "tab:green", "warn": "tab:orange", "fail": "tab:red", "unknown": "0.4"}


def _figure(n: int, *, width: float = 8.0, height: float = 2.3):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, 0.9 + height * n))
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    return fig, axes


def _write(fig, path: Path) -> Path:
    from grpofit.atomic import replacing

    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp:
        fig.savefig(tmp, dpi=100, bbox_inches="tight", format="png")
    return path


def rules_figure(diagnosis: Any):
    """One panel per finding with a panel; None when there is none."""
    from grpofit.plotting import safe_label, short_title

    items = [(mode, f) for mode, v in diagnosis.diagnostics.items() for f in v.findings if f.panel is not None]
    if not items:
        return None
    fig, axes = _figure(len(items))
    for ax, (mode, f) in zip(axes, items):
        p = f.panel
        scatter = p.title.startswith("entropy-reward law")
        ax.plot(p.steps, p.values, "." if scatter else "-", ms=2, lw=0.9, color="tab:purple", label=safe_label(p.label))
        for level, label, colour in p.lines:
            if level is not None and np.isfinite(level):
                ax.axhline(level, color=colour, ls="--", lw=0.9, label=safe_label(label))
        if p.other is not None:
            xs, ys, label = p.other
            if scatter:
                ax.plot(xs, ys, "-", color="k", lw=1.0, label=safe_label(label))
            else:
                twin = ax.twinx()
                twin.plot(xs, ys, "-", color="0.6", lw=0.8)
                twin.set_ylabel(safe_label(label), fontsize=7, color="0.4")
                twin.tick_params(labelsize=6)
        if f.start_step is not None and not scatter:
            ax.axvline(f.start_step, color=_COLOUR.get(f.status, "k"), ls=":", lw=1.2)
        if p.logy and np.all(np.asarray(p.values)[np.isfinite(p.values)] > 0):
            ax.set_yscale("log")
        ax.set_title(safe_label(f"{f.rule} ({mode}): {f.status}" + ("" if f.gates else ", reported only")), fontsize=8,
                     loc="left", color=_COLOUR.get(f.status, "k"))
        ax.set_xlabel("entropy H" if scatter else "step", fontsize=7)
        ax.set_ylabel(safe_label(p.title), fontsize=7)
        ax.tick_params(labelsize=6)
        ax.legend(fontsize=6, loc="best")
    fig.suptitle(safe_label(short_title(diagnosis.name) + ": rules"), fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / fig.get_figheight()))
    return fig


def evals_figure(diagnosis: Any, run: Any):
    """One panel per benchmark; None without eval series."""
    from grpofit.diagnostics.evals import profile_fit
    from grpofit.plotting import safe_label, short_title

    entries = [e for e in diagnosis.evals if e["metric"] in run.metrics]
    if not entries:
        return None
    fig, axes = _figure(len(entries))
    fit = diagnosis.fit
    for ax, e in zip(axes, entries):
        s, v = run.series(e["metric"])
        ax.plot(s, v, "o", ms=3, color="tab:blue", label="eval")
        pf = profile_fit(s, v) if s.size >= 5 else None
        if pf is not None:
            tt = np.linspace(s[0], s[-1], 200)
            T = pf["timescale"]
            ax.plot(tt, pf["plateau"] + (pf["initial"] - pf["plateau"]) * np.exp(-(tt - pf["t0"]) / T), "--", color="tab:orange", label="exponential")
        plat = e.get("plateau") or {}
        ci = plat.get("ci95")
        if plat.get("value") is not None and plat.get("kind") == "estimate":
            ax.axhline(plat["value"], color="tab:orange", lw=0.8, alpha=0.7)
        if ci and ci[0] is not None and ci[1] is not None:
            ax.axhspan(ci[0], ci[1], color="tab:orange", alpha=0.12, label="plateau 95%")
        if fit is not None:
            twin = ax.twinx()
            twin.plot(fit.steps, fit.values, "-", color="0.7", lw=0.7)
            twin.set_ylabel(safe_label(f"train {fit.metric}"), fontsize=7, color="0.5")
            twin.tick_params(labelsize=6)
        status = e.get("status", "unknown")
        title = f"{e['benchmark']}: gain {e['gain']:.3g}" if e.get("gain") is not None else e["benchmark"]
        title += f", {status}" + (" (decouples)" if e.get("decouples") else "")
        ax.set_title(safe_label(title), fontsize=8, loc="left", color=_COLOUR.get(status, "k"))
        ax.set_ylabel(safe_label(e["metric"]), fontsize=6)
        ax.tick_params(labelsize=6)
        ax.legend(fontsize=6, loc="lower right")
    axes[-1].set_xlabel("step", fontsize=7)
    fig.suptitle(safe_label(short_title(diagnosis.name) + ": eval series"), fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / fig.get_figheight()))
    return fig


def save_rule_figures(diagnosis: Any, run: Any, plot_dir: Path | str) -> list[Path]:
    """Write ``<run>.rules.png`` and ``<run>.evals.png`` (when there is something to draw)."""
    from grpofit.plotting import figure_name

    out = []
    for suffix, make in ((".rules.png", lambda: rules_figure(diagnosis)), (".evals.png", lambda: evals_figure(diagnosis, run))):
        fig = make()
        if fig is not None:
            out.append(_write(fig, Path(plot_dir) / figure_name(diagnosis.name, suffix)))
    return out
