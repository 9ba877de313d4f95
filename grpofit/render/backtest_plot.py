"""One figure per backtested run: the data, each cut and its 95% interval for the final level
next to the actual final level. Drawn on a :class:`matplotlib.figure.Figure` (no pyplot)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["save_backtest_figure"]


def save_backtest_figure(run, entry: dict, plot_dir) -> Path:
    from matplotlib.figure import Figure

    from grpofit.core.errors import UsageError
    from grpofit.render.plotting import figure_name, safe_label, short_title

    steps, values = run.series(entry["metric"])
    fig = Figure(figsize=(7, 4.2))
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(steps, values, ".", ms=3, color="tab:blue", label=safe_label(entry["metric"]))
    cuts = entry.get("cuts") or []
    if cuts:
        last = float(steps[-1])
        span = last - float(steps[0])
        w0 = last - 0.1 * span
        ax.hlines(cuts[0]["actual"], w0, last, color="k", lw=2, label="final level (last 10%)")
        colors = ["tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink"]
        for i, c in enumerate(cuts):
            color = colors[i % len(colors)]
            ax.axvline(c["step"], color=color, ls=":", lw=1)
            pred = c.get("predicted") or {}
            if pred.get("median") is not None:
                x = w0 + (i + 1) * (last - w0) / (len(cuts) + 1)
                lo, hi = pred["pi95"]
                if hi is None:  # a lower bound: an arrow up from it
                    ax.annotate(
                        "",
                        xy=(x, max(pred["median"], lo) + 0.05 * (max(values) - min(values))),
                        xytext=(x, lo),
                        arrowprops={"arrowstyle": "->", "color": color},
                    )
                    ax.plot(
                        [x], [pred["median"]], "o", color=color, ms=4, label=f"cut {c['fraction']:.0%}: lower bound"
                    )
                    continue
                ax.errorbar(
                    [x],
                    [pred["median"]],
                    yerr=[[pred["median"] - lo], [hi - pred["median"]]],
                    fmt="o",
                    color=color,
                    ms=4,
                    capsize=3,
                    label=f"cut {c['fraction']:.0%}: 95% PI",
                )
    ax.set_title(short_title(run.name), fontsize=8)
    ax.set_xlabel("step")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = Path(plot_dir) / figure_name(run.name, ".png")
    from grpofit.runtime.atomic import replacing

    try:
        with replacing(path) as tmp:  # never a half-written figure (interrupt, full disk)
            fig.savefig(tmp, dpi=100, format="png")
    except UsageError as e:
        raise UsageError(
            f"cannot write the figure: {e.message}", path=str(path), fix="choose a writable --plot-dir"
        ) from None
    return path
