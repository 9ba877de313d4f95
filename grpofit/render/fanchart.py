"""The fan chart of a forecast: data, the fitted law, the median forecast with its 80% and 95%
bands, and the planned end. Drawn on a :class:`matplotlib.figure.Figure` (the user's pyplot
backend is never switched); matplotlib is imported only here."""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["draw_fan", "save_fan_figure"]


def draw_fan(ax, fc, entry: dict, *, rest=None) -> None:
    """One run's fan chart on ``ax``; ``rest`` = ``(steps, values)`` not seen (``--until``)."""
    from grpofit.render.plotting import safe_label, short_title

    if fc.steps is not None and fc.steps.size:
        ax.plot(fc.steps, fc.values, ".", ms=3, color="tab:blue", label="seen")
    if rest is not None and rest[0].size:
        ax.plot(rest[0], rest[1], ".", ms=3, color="0.6", label="not seen (after --until)")
    curve = fc.extra.get("curve")
    one_sided = fc.fan is not None and bool(fc.fan.get("one_sided"))
    if curve is not None:
        cs, cv = curve
        if one_sided and fc.steps is not None and fc.steps.size:
            # the law's continued rise is what the seen steps cannot confirm: drawn over them only
            inside = cs <= fc.steps[-1]
            cs, cv = cs[inside], cv[inside]
        ax.plot(cs, cv, "-", color="tab:red", lw=1.2, label=f"fit ({fc.extra.get('law')})")
    if one_sided:
        _one_sided(ax, fc)
    elif fc.fan is not None:
        s = fc.fan["step"]
        ax.fill_between(s, fc.fan["q025"], fc.fan["q975"], color="tab:orange", alpha=0.2, lw=0, label="95%")
        ax.fill_between(s, fc.fan["q10"], fc.fan["q90"], color="tab:orange", alpha=0.35, lw=0, label="80%")
        ax.plot(s, fc.fan["q50"], "-", color="tab:orange", lw=1.5, label="median forecast")
    h = (entry.get("horizon") or {}).get("step")
    if h is not None:
        ax.axvline(h, color="k", ls=":", lw=1, label="planned end")
    title = short_title(entry.get("run", ""))
    if entry.get("note"):
        import textwrap

        title += "\n" + "\n".join(textwrap.wrap(entry["note"], 95)[:3])
    ax.set_title(title, fontsize=8)
    ax.set_xlabel("step")
    ax.set_ylabel(safe_label(entry.get("metric") or "reward"))
    ax.legend(fontsize=7, loc="lower right")


def _one_sided(ax, fc) -> None:
    """The upper ends are unknown (the rise's end is not in the seen steps): only the lower
    bounds are drawn, as lines with the region above them shaded up to the frame (open, no
    upper edge), and the point forecast dashed."""
    s = fc.fan["step"]
    top = max(
        float(np.nanmax(fc.values)) if fc.values is not None and fc.values.size else 0.0,
        float(np.nanmax(fc.fan["q50"])),
    )
    lo, hi = ax.get_ylim()
    span = max(top - min(lo, float(np.nanmin(fc.fan["q025"]))), 1e-12)
    ceiling = max(hi, top + 0.15 * span)
    ax.fill_between(
        s, fc.fan["q025"], ceiling, color="tab:orange", alpha=0.12, lw=0, hatch="//", edgecolor="tab:orange"
    )
    ax.plot(s, fc.fan["q025"], "-", color="tab:orange", lw=1.0, label="95% lower bound (upper end unknown)")
    ax.plot(s, fc.fan["q10"], "-", color="tab:orange", lw=1.8, label="80% lower bound")
    ax.plot(s, fc.fan["q50"], "--", color="tab:orange", lw=1.2, label="point forecast")
    ax.set_ylim(top=ceiling)


def save_fan_figure(items: list, path: Path) -> None:
    """``items``: ``(Forecast, entry, rest)`` per run; one panel each, written by suffix."""
    from matplotlib.figure import Figure

    from grpofit.core.errors import UsageError
    from grpofit.render.plotting import check_suffix

    path = Path(path)
    check_suffix(path)
    n = max(len(items), 1)
    cols = min(n, 2)
    rows = int(np.ceil(n / cols))
    fig = Figure(figsize=(6.5 * cols, 4.2 * rows))
    for i, (fc, entry, rest) in enumerate(items):
        draw_fan(fig.add_subplot(rows, cols, i + 1), fc, entry, rest=rest)
    fig.tight_layout()
    from grpofit.runtime.atomic import replacing

    try:
        with replacing(path) as tmp:  # never a half-written figure (interrupt, full disk)
            fig.savefig(tmp, dpi=110, format=path.suffix.lower().lstrip("."))
    except UsageError as e:
        raise UsageError(
            f"cannot write the figure: {e.message}", path=str(path), fix="choose a writable path"
        ) from None
