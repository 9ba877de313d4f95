"""Figures: fits (data, every fitted law in its registry style, residuals, plateau band) and per-run diagnosis panels.

Functions build and return a :class:`matplotlib.figure.Figure` (never ``plt.show()``); ``save_*``
writes it by the file's suffix (PNG, SVG or PDF). matplotlib is imported only here, lazily.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from grpofit.core.errors import UsageError

SUFFIXES = (".png", ".svg", ".pdf")


def _pyplot():
    """Load matplotlib's Figure (kept under this name for the ``--jobs`` preload). Figures are
    drawn on :class:`matplotlib.figure.Figure` objects: the user's pyplot backend is never
    switched (a notebook keeps its inline backend)."""
    import matplotlib.figure

    return matplotlib.figure


def preload() -> None:
    """matplotlib's figure and Agg canvas imported and its default font loaded (a process that
    will fork figure-drawing children does this once for all of them)."""
    _pyplot()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = new_figure(figsize=(1, 1), dpi=DPI)
    fig.text(0, 0, "0", fontsize=7)
    FigureCanvasAgg(fig).draw()


def new_figure(**kw):
    """A :class:`matplotlib.figure.Figure` outside pyplot (no backend switch, nothing to close)."""
    from matplotlib.figure import Figure

    return Figure(**kw)


def check_suffix(path: Path, option: str | None = None) -> None:
    """A :class:`UsageError` unless ``path`` ends in .png, .svg or .pdf (``option`` names the flag)."""
    if Path(path).suffix.lower() not in SUFFIXES:
        if option:
            raise UsageError(
                f"{option} {path}: cannot tell the figure format from the suffix",
                fix="end the file name in .png, .svg or .pdf",
            )
        raise UsageError(
            f"cannot tell the figure format from {Path(path).name!r}",
            path=str(path),
            fix="end the file name in .png, .svg or .pdf",
        )


def _save(fig, path: Path, *, tight: bool = True) -> None:
    path = Path(path)
    check_suffix(path)
    from grpofit.runtime.atomic import replacing

    try:
        with replacing(path) as tmp:  # never a half-written figure (interrupt, full disk)
            fmt = path.suffix.lower().lstrip(".")
            if fmt == "png" and not tight:  # drawn at the figure's own size and dpi
                from grpofit.render.png import write_figure_png

                write_figure_png(fig, tmp)
                return
            fig.savefig(
                tmp,
                dpi=110 if tight else DPI,
                bbox_inches="tight" if tight else None,
                format=fmt,
                **({"pil_kwargs": {"compress_level": 1}} if fmt == "png" else {}),
            )  # zlib's fastest: ~10% larger
    except UsageError as e:
        raise UsageError(
            f"cannot write the figure: {e.message}", path=str(path), fix="choose a writable path"
        ) from None
    finally:
        pass  # a Figure outside pyplot needs no closing: it is freed with its last reference


#: characters of one line of a figure's text at most (a longer name is cut in its middle: a
#: 100k-character run name would otherwise make a figure of gigapixels)
MAX_LABEL = 120


def clip_line(line: str, limit: int = MAX_LABEL) -> str:
    """``line`` cut in its middle to at most ``limit`` characters (its start and end kept)."""
    if len(line) <= limit:
        return line
    head = (limit - 1) * 2 // 3
    return line[:head] + "\u2026" + line[len(line) - (limit - 1 - head) :]


def clip_lines(text: str, limit: int = MAX_LABEL) -> str:
    """Each line of ``text`` cut to ``limit`` characters (:func:`clip_line`)."""
    return "\n".join(clip_line(ln, limit) for ln in str(text).split("\n"))


def safe_label(text: str) -> str:
    """Text from the logs as a figure label: control characters and undecodable bytes escaped,
    ``$`` kept literal (matplotlib would read it as the start of math), each line at most
    :data:`MAX_LABEL` characters. Only the line breaks the titles are made of are kept: a tab or
    carriage return (from a file name) is escaped too, as the font has no glyph for it
    (matplotlib warned on stderr)."""
    from grpofit.core.safetext import printable

    text = printable(clip_lines(str(text), 4 * MAX_LABEL)).replace("\t", "\\x09").replace("\r", "\\x0d")
    return clip_lines(text).replace("$", r"\$")


def short_title(run_name: str) -> str:
    """A panel title: the file's name, and the run's name on a second line for multi-run files."""
    import os

    path, _, run = run_name.partition("::")
    path = path.rstrip("/")
    base = os.path.basename(path) or path
    if base.startswith("checkpoint-") and os.path.basename(os.path.dirname(path)):  # which run's checkpoint
        base = f"{os.path.basename(os.path.dirname(path))}/{base}"
    base, run = clip_line(base), clip_line(run)
    return f"{base}\n{run}" if run else base


def step_label(step_column: str) -> str:
    """The x label: ``step``, or ``step (train/global_step)`` when the column has another name."""
    return "step" if step_column in ("step", "", None) else f"step ({step_column})"


def fit_title(result: Any, verdict: str | None = None) -> str:
    """``run`` then ``metric · p* 0.73 · overdamped · verdict pass`` (what the table's row says)."""
    plateau = result.param("plateau")
    parts = [str(result.metric)]
    if plateau is not None and plateau.value is not None:
        parts.append(plateau_title(result, plateau.value))
    regime = next((m.regime for m in result.models.values() if m.regime), None)  # the oscillator's
    if regime:
        parts.append(regime)
    if verdict:
        parts.append(f"verdict {verdict}")
    return short_title(str(result.run)) + "\n" + " · ".join(parts)


def plateau_title(result: Any, value: float) -> str:
    """``p* 0.73``, or what the fit table says instead (:mod:`grpofit.fitting.fitcheck`): ``p* ≥ 0.98``
    for a run still moving past its fitted plateau, ``p* 0.73 (misses the late data)`` when the
    run's last quarter already sits beyond it."""
    from grpofit.fitting.fitcheck import _late_checks

    check, _ = _late_checks(result)  # computed once per fit: the same statement as the tables
    if check is None:
        return f"p* {value:.3g}"
    from grpofit.fitting.fitcheck import plateau_statement

    st = plateau_statement(result) or {}
    kind, level = st.get("kind"), (st.get("value") if st.get("kind") in ("lower_bound", "upper_bound") else None)
    if level is not None:
        why = "not identified" if st.get("reason") == "unidentified" else None
        why = why or f"still {'rising' if kind == 'lower_bound' else 'falling'}"
        return f"p* {'≥' if kind == 'lower_bound' else '≤'} {level:.3g} ({why})"
    return f"p* {value:.3g}" + (" (misses the late data)" if check["disagrees"] else "")


def draw_fit(
    result: Any,
    ax_data,
    ax_resid=None,
    *,
    collapse_values=None,
    verdict: str | None = None,
    distinct: bool = False,
    compact: bool = False,
) -> None:
    """Data, every fitted law's curve and the plateau with its 95% interval; residuals below, with a
    legend per model. The title carries the metric, p*, regime and (when given) the verdict.
    ``distinct``: a law whose curve the preferred law's already draws (within 1% of the data's
    range everywhere) is named in the preferred law's legend entry instead of drawn again.
    ``compact``: the data's points get no legend entry when the y label names them (no collapse)."""
    import numpy as np

    steps, values = result.steps, result.values
    fitted_part = " (fitted part)" if result.collapse is not None else ""  # the rest is drawn apart
    from grpofit.render.diagnosis_panels import thin

    points = ax_data.plot(
        *thin(steps, values, DISPLAY_POINTS), ".", ms=3, color="0.45", label=safe_label(f"{result.metric}{fitted_part}")
    )[0]
    if collapse_values is not None:
        cs, cv = collapse_values
        ax_data.plot(*thin(cs, cv, DISPLAY_POINTS), ".", ms=3, color="0.75", label="after the collapse (not fitted)")
    from grpofit.laws.registry import MODELS

    grid = np.linspace(steps[0], steps[-1], 400)
    curves = {name: np.asarray(model.predict(grid), float) for name, model in result.models.items() if model.ok}
    same: dict[str, list[str]] = {name: [] for name in curves}
    if distinct and result.preferred in curves:
        span = float(np.nanmax(values) - np.nanmin(values)) if np.size(values) else 0.0
        for name in list(curves):
            if name != result.preferred and np.nanmax(np.abs(curves[name] - curves[result.preferred])) <= 0.01 * span:
                same[result.preferred].append(name)
                del curves[name]
    # no law beats a constant: the curves are drawn faint, so a ringing fit of noise is not read
    # as dynamics, and the plateau is the run's level (what the tables say)
    flat = (getattr(result, "signal", None) or {}).get("detected") is False
    for name, model in result.models.items():
        if name not in curves:
            continue
        style = MODELS[name].style if name in MODELS else {}  # each law's line, from its registry row
        r2 = model.r2
        label = f"{name} (R² {r2:.3f})" if r2 is not None else name
        if same[name]:
            label += f"; {', '.join(same[name])}: the same curve"
        if flat:
            label += ", no better than a constant"
        ax_data.plot(grid, curves[name], lw=0.8 if flat else 1.8, alpha=0.45 if flat else 1.0, label=label, **style)
        if ax_resid is not None:
            ax_resid.plot(
                steps,
                values - model.predict(steps),
                ".",
                ms=2,
                color=style.get("color"),
                alpha=0.6,
                label=f"{name} residual",
            )
    from grpofit.fitting.fitcheck import plateau_statement

    plateau = plateau_statement(result)  # what the tables say: an estimate, or a bound
    if plateau is not None and plateau["kind"] != "estimate":
        sign = "≥" if plateau["kind"] == "lower_bound" else "≤"
        ax_data.axhline(
            plateau["value"],
            color="tab:blue",
            lw=1,
            ls="--",
            label=f"plateau p* {sign} {plateau['value']:.3g} (still moving)",
        )
    elif plateau is not None:  # one legend entry for the line and its band (each entry costs a figure ~4 ms)
        band = " and its 95% interval" if plateau["ci95"] else ""
        what = "the run's level (no significant rise)" if flat else f"plateau p* ({result.preferred})"
        ax_data.axhline(plateau["value"], color="tab:blue", lw=1, label=f"{what}{band}")
        if plateau["ci95"]:
            ax_data.axhspan(*plateau["ci95"], color="tab:blue", alpha=0.12)
    collapse = result.collapse
    if collapse is not None:
        ax_data.axvline(collapse.step, color="k", ls=":", lw=1.2, label=f"collapse at step {collapse.step:g}")
    ax_data.set_ylabel(safe_label(result.metric))
    handles, labels = ax_data.get_legend_handles_labels()
    if compact and collapse_values is None:  # the y label names the data: no legend entry for it
        labels = [lab for h, lab in zip(handles, labels) if h is not points]
        handles = [h for h in handles if h is not points]
    if handles:
        ax_data.legend(handles, labels, fontsize=7, loc="best")
    ax_data.set_title(safe_label(fit_title(result, verdict)), fontsize=9)
    if ax_resid is not None:
        ax_resid.axhline(0, color="k", lw=0.8)
        ax_resid.set_ylabel("residual")
        ax_resid.set_xlabel(safe_label(step_label(result.step_column)))
        if ax_resid.get_legend_handles_labels()[0]:
            ax_resid.legend(fontsize=6, loc="best", markerscale=3)


#: points of a fitted series drawn at most (:func:`grpofit.render.diagnosis_panels.thin`: each
#: bucket keeps its lowest and highest, so a spike stays; for display only, every point is fitted)
DISPLAY_POINTS = 1500

#: runs per row of the ``fit --plot`` grid
GRID_COLUMNS = 3


def fit_figure(results: list, *, overlay: bool = False):
    """(data, residual) panels per run in a grid of up to :data:`GRID_COLUMNS` columns; points
    after a collapse drawn apart. ``overlay``: every run on one axis (compare GRPO vs GSPO)."""
    if overlay:
        return overlay_figure(results)
    import math

    n = len(results)
    cols = min(GRID_COLUMNS, n)
    rows = math.ceil(n / cols)
    fig = new_figure(figsize=(6 * cols, 5.5 * rows), layout="constrained")
    outer = fig.add_gridspec(rows, cols)
    for i, result in enumerate(results):
        inner = outer[i // cols, i % cols].subgridspec(2, 1, height_ratios=[3, 1])
        ax_data = fig.add_subplot(inner[0])
        ax_resid = fig.add_subplot(inner[1], sharex=ax_data)
        draw_fit(result, ax_data, ax_resid, collapse_values=_after_collapse(result))
    return fig


def overlay_figure(results: list):
    """Every run's data and preferred fit on one axis, residuals of the preferred fits below."""
    import numpy as np

    fig = new_figure(figsize=(9, 6.5), layout="constrained")
    ax, ax_resid = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    names, source = overlay_names([str(r.run) for r in results])
    for i, (result, name) in enumerate(zip(results, names)):
        colour = f"C{i % 10}"
        ax.plot(result.steps, result.values, ".", ms=2, color=colour, alpha=0.35)
        after = _after_collapse(result)
        if after is not None:  # the part after a collapse is not fitted, but it is data: drawn faint
            ax.plot(*after, "x", ms=2, color=colour, alpha=0.25)
            ax.axvline(result.collapse.step, color=colour, ls=":", lw=1)
            name = f"{name} (collapse at step {result.collapse.step:g})"
        model = result.models.get(result.preferred or "")
        if model is None or not model.ok:
            ax.plot([], [], ".", color=colour, label=safe_label(f"{name} (no fit)"))
            continue
        plateau = result.param("plateau")
        p = f", p* {plateau.value:.3g}" if plateau is not None and plateau.value is not None else ""
        grid = np.linspace(result.steps[0], result.steps[-1], 400)
        ax.plot(grid, model.predict(grid), lw=1.8, color=colour, label=safe_label(f"{name}: {result.preferred}{p}"))
        ax_resid.plot(result.steps, result.values - model.predict(result.steps), ".", ms=2, color=colour, alpha=0.6)
    metrics = sorted({str(r.metric) for r in results})
    ax.set_ylabel(safe_label(", ".join(metrics)))
    of = f" of {source}" if source else ""
    ax.set_title(
        safe_label(f"{len(results)} runs{of} overlaid: {', '.join(metrics)} with each run's preferred fit"), fontsize=9
    )
    ax.legend(fontsize=7, loc="best")
    ax_resid.axhline(0, color="k", lw=0.8)
    ax_resid.set_ylabel("residual")
    ax_resid.set_xlabel(
        safe_label(step_label(results[0].step_column) if len({r.step_column for r in results}) == 1 else "step")
    )
    return fig


def overlay_names(runs: list[str]) -> tuple[list[str], str | None]:
    """Legend names for an overlay, and the file they all come from (then only the run names
    are shown: ``[paper]GRPO_online``, not the export's long file name three times)."""
    paths = {r.partition("::")[0] for r in runs}
    if len(paths) == 1 and all("::" in r for r in runs):
        return [r.partition("::")[2] for r in runs], short_title(paths.pop())
    return [short_title(r).replace("\n", " ") for r in runs], None


def _after_collapse(result: Any):
    """``(steps, values)`` of the series from the collapse on, or None."""
    collapse, steps = result.collapse, result.column_steps
    if collapse is None or steps is None:
        return None
    keep = steps >= collapse.step
    return steps[keep], result.column_values[keep]


def save_fit_figure(results: list, path: Path, *, overlay: bool = False) -> None:
    check_suffix(path)
    _save(fit_figure(results, overlay=overlay), path)


def save_what_if_figure(figure_data: Any, path: Path) -> None:
    """The run, its baseline trajectory and the what-if trajectory (``predict --plot``)."""
    check_suffix(path)
    if figure_data is None:
        raise UsageError(
            "--plot needs a trajectory to draw", path=str(path), fix="add --from-run RUN and a --what-if-* option"
        )
    from grpofit.dynamics import plot_what_if

    result, observed, passed = figure_data
    _save(plot_what_if(result, observed=observed, **passed), path)


# --------------------------------------------------------------------------- diagnose

#: role -> (panel title, how its thresholds are drawn)
DIAGNOSTIC_PANELS = (
    ("eval_reward", "eval reward"),
    ("zero_std_frac", "zero-variance groups"),
    ("reward_std", "within-group reward std"),
    ("entropy", "entropy"),
    ("grad_norm", "gradient norm"),
    ("is_ratio", "importance ratio"),
    ("clip_ratio", "clip fraction"),
)


def _half_gain_step(fit: Any) -> float | None:
    """Where the preferred fitted curve covers half its gain (the entropy rule's reading step)."""
    import numpy as np

    model = fit.models.get(fit.preferred or "")
    if model is None or not model.ok:
        return None
    grid = np.linspace(fit.steps[0], fit.steps[-1], 800)
    y = np.asarray(model.predict(grid), float)
    half = y[0] + 0.5 * (y[-1] - y[0])
    hit = np.flatnonzero(y >= half) if y[-1] > y[0] else np.flatnonzero(y <= half)
    return float(grid[hit[0]]) if hit.size and abs(y[-1] - y[0]) > 0 else None


def _threshold_lines(role: str, steps, values, th, fit: Any = None) -> list[tuple[float, str, str, float, float]]:
    """``(level, label, colour, from step, to step)`` of the rule thresholds drawn on a diagnostic
    panel, each only over the steps where its rule reads the metric: the late run for
    zero-variance groups, the reward's half-gain step for entropy, after the baseline window for
    a rise (the baseline over its own window)."""
    import numpy as np

    keep = np.isfinite(values)
    v, s = values[keep], steps[keep]
    if v.size == 0:
        return []
    nb = max(1, int(th.baseline_fraction * v.size))
    base = float(np.median(v[:nb]))
    first, last = float(s[0]), float(s[-1])
    if role == "zero_std_frac":
        late = float(s[-max(1, int(round(th.late_fraction * v.size)))])
        return [
            (th.zero_std_warn, "warn (late run)", "orange", late, last),
            (th.zero_std_fail, "fail (late run)", "red", late, last),
        ]
    if role == "entropy":
        half = _half_gain_step(fit) if fit is not None else None
        if half is None:
            return []
        w = 0.04 * (last - first)
        return [
            (th.entropy_half_warn * base, "warn at the reward's half-gain step", "orange", half - w, half + w),
            (th.entropy_half_fail * base, "fail at the reward's half-gain step", "red", half - w, half + w),
        ]
    if role in ("grad_norm", "is_ratio", "clip_ratio") and base > 0:
        end_base = float(s[nb - 1])
        return [
            (base, "baseline", "0.5", first, end_base),
            (th.rise_warn * base, f"x{th.rise_warn:g} warn", "orange", end_base, last),
            (th.rise_fail * base, f"x{th.rise_fail:g} fail", "red", end_base, last),
        ]
    return []


#: figure panels beyond the reward's: at most this many (the rest are named in the title)
MAX_PANELS = 9
#: the figure's width in inches (at :data:`DPI`: 1,100 pixels, a laptop screen's width)
WIDTH = 11.0
DPI = 100


def _grid(fig, top: float, n: int, cols: int, row_h: float, height: float):
    """``n`` axes in rows of ``cols`` below ``top`` inches from the figure's top, placed by hand
    (no layout engine: a layout pass measures every tick label of every panel again)."""
    left, right, gap, title = 0.75, 0.55, 1.2, 0.32  # inches: tick labels, a twin axis' labels, titles
    width = (WIDTH - left - right - gap * (cols - 1)) / cols
    axes = []
    for i in range(n):
        r, c = divmod(i, cols)
        x0 = left + c * (width + gap)
        y1 = top + r * row_h + title
        axes.append(
            fig.add_axes(
                [x0 / WIDTH, 1 - (y1 + row_h - title - 0.38) / height, width / WIDTH, (row_h - title - 0.38) / height]
            )
        )
    return axes


def diagnosis_figure(diagnosis: Any, run: Any, thresholds: Any, entry: dict | None = None):
    """The reward with its fit and the collapse mark, then one panel per finding
    (:func:`grpofit.render.diagnosis_panels.finding_panels`): a rule that warns or fails, a benchmark
    that decouples, a check's own series; a run with no finding gets the reward panel alone.
    About 1,100 pixels wide and at most about 1,000 high."""
    import math

    from grpofit.core.vocabulary import MODE_TITLES  # the table's column headers
    from grpofit.render.diagnosis_panels import draw_extra, finding_panels

    panels, unshown = finding_panels(diagnosis, run)
    if len(panels) > MAX_PANELS:
        unshown = [_panel_name(p) for p in panels[MAX_PANELS:]] + unshown
        panels = panels[:MAX_PANELS]
    n = len(panels)
    cols = 1 if n == 1 else 2 if n <= 4 else 3
    rows = math.ceil(n / cols)
    fit = diagnosis.fit
    verdict = (entry or {}).get("verdict") or diagnosis.verdict
    statuses = ", ".join(f"{MODE_TITLES.get(m, m)}: {v.status}" for m, v in diagnosis.diagnostics.items())
    lines = short_title(diagnosis.name).split("\n") + [fit_title(fit, verdict).split("\n")[-1], statuses]
    if unshown:
        lines.append("not drawn: " + ", ".join(unshown))
    elif not panels:
        lines.append("no rule or check flags this run")
    head, reward_h, row_h = 0.12 + 0.15 * len(lines), 3.0, 2.35  # inches
    height = head + reward_h + rows * row_h + 0.1
    fig = new_figure(figsize=(WIDTH, height), dpi=DPI)
    ax = fig.add_axes(
        [0.75 / WIDTH, 1 - (head + reward_h - 0.45) / height, (WIDTH - 1.3) / WIDTH, (reward_h - 0.45) / height]
    )
    draw_fit(fit, ax, None, collapse_values=_after_collapse(fit), verdict=verdict, distinct=True, compact=True)
    ax.set_xlabel(safe_label(step_label(run.step_column)), fontsize=8)
    ax.set_title(safe_label("\n".join(lines)), fontsize=8, y=1.0, pad=4)
    ax.locator_params(axis="x", nbins=5)  # each tick label is text to lay out and draw
    ax.locator_params(axis="y", nbins=4)
    axes = _grid(fig, head + reward_h, n, cols, row_h, height)
    series = [(a, p) for a, p in zip(axes, panels) if p[0] == "series"]
    draw_extra(
        [a for a, p in zip(axes, panels) if p[0] != "series"], [p for p in panels if p[0] != "series"], diagnosis, run
    )
    for a, (_, mode, role) in series:
        draw_series(a, role, run, diagnosis, thresholds, mode)
    for a in fig.axes[1:]:  # the panels and their second axes: fewer ticks to draw on a small panel
        for axis in ("x", "y"):
            if (a.get_xscale() if axis == "x" else a.get_yscale()) == "linear":
                a.locator_params(axis=axis, nbins=4)
        if a.get_yscale() == "log":
            sparse_log_ticks(a)
    for i, a in enumerate(axes):  # the bottom panel of each column names the step
        if i + cols >= n and not a.get_xlabel():
            a.set_xlabel(safe_label(step_label(run.step_column)), fontsize=7)
    for a in fig.axes:
        ticks_in_view(a)
    return fig


def ticks_in_view(ax) -> None:
    """Fix each axis' major ticks to those its locator puts inside the (final) view: a locator
    also returns one tick past each end, which matplotlib builds (five artists each, about a
    millisecond) but never draws. The ticks drawn, and their labels, are the same."""
    from matplotlib.ticker import FixedLocator

    for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        lo, hi = sorted(limits)
        slack = 1e-10 * (hi - lo)
        locs = axis.get_major_locator()()
        axis.set_major_locator(FixedLocator([t for t in locs if lo - slack <= t <= hi + slack]))


def log_ticks(lo: float, hi: float, most: int = 5) -> list[float]:
    """A few labelled ticks of a log axis from ``lo`` to ``hi``: powers of ten (every second,
    third, ... one over many decades), or 1-2-5 steps (1-2-3-...-9 within a narrow range) when
    fewer than three powers of ten fall inside; at most about ``most``."""
    import math

    if not (0 < lo < hi and math.isfinite(hi)):
        return []
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for subs in ((1,), (1, 2, 5), (1, 2, 3, 4, 5, 6, 7, 8, 9)):
        ticks = [10.0**k * m for k in range(a, b + 1) for m in subs if lo <= 10.0**k * m <= hi]
        if len(ticks) >= 3 or subs[-1] == 9:
            break
    powers = [10.0**k for k in range(a, b + 1) if lo <= 10.0**k <= hi]
    if len(ticks) > most and len(powers) >= 2:  # a stride through 1-2-5 steps reads oddly
        ticks = powers
    stride = math.ceil(len(ticks) / most) if ticks else 1
    return ticks[::stride]


def sparse_log_ticks(ax) -> None:
    """A log y axis with a few plain-number ticks (:func:`log_ticks`) and no minor ticks: the
    default draws a tick object per minor tick and lays its labels out as math text."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    lo, hi = sorted(ax.get_ylim())  # the autoscaled limits: every line drawn is in them
    ticks = log_ticks(lo, hi)
    if not ticks:
        return
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))


def _panel_name(panel: tuple) -> str:
    if panel[0] == "rule":
        return f"{panel[2].rule} {panel[2].status}"
    if panel[0] == "eval":
        return f"eval {panel[1]['benchmark']}"
    return f"{panel[1]} {panel[2]}"


def draw_series(ax, role: str, run: Any, diagnosis: Any, thresholds: Any, mode: str) -> None:
    """A check's own series with its thresholds where the check reads them; the title names the
    mode and its status (the check flagged it)."""
    import numpy as np

    from grpofit.render.diagnosis_panels import _COLOUR, thin

    column = diagnosis.roles[role]
    title = dict(DIAGNOSTIC_PANELS).get(role, role)
    fit = diagnosis.fit
    steps, values = run.series(column)
    if role == "eval_reward" and fit is not None:  # on its own axis: an eval in percent, a reward in [0, 2]
        twin = ax.twinx()
        twin.plot(*thin(fit.steps, fit.values), ".", color="0.75", ms=1.5)
        twin.set_ylabel(safe_label(f"train {fit.metric}"), fontsize=7, color="0.5")
        twin.tick_params(labelsize=6)
        ax.set_zorder(twin.get_zorder() + 1)  # the eval drawn over the train points
        ax.patch.set_visible(False)
    ax.plot(
        *thin(steps, values),
        ".-" if role == "eval_reward" else "-",
        lw=0.9,
        ms=3,
        color="tab:purple",
        label=safe_label(column),
    )
    for level, label, colour, x0, x1 in _threshold_lines(role, steps, values, thresholds, fit):
        ax.hlines(level, x0, x1, color=colour, ls="--", lw=0.9, label=label)
    if role in ("grad_norm", "is_ratio") and np.nanmin(values) > 0:
        ax.set_yscale("log")
    if diagnosis.collapse is not None:
        ax.axvline(diagnosis.collapse.step, color="k", ls=":", lw=1.0)
    status = diagnosis.diagnostics[mode].own_status or diagnosis.diagnostics[mode].status
    ax.set_title(
        safe_label(f"{title} ({mode}): {status}"), fontsize=7, loc="left", color=_COLOUR.get(status, "k"), y=1.0, pad=3
    )
    ax.set_ylabel(title, fontsize=7)
    ax.tick_params(labelsize=6)
    ax.legend(fontsize=6, loc="best")


def figure_name(run_name: str, suffix: str = ".png") -> str:
    """A file name for a run's figure, one per run: a name that is already a plain file name
    (letters, digits, ``._-``) is kept; any other (path separators, spaces, odd or undecodable
    characters, over 150 characters) becomes ``_``-joined and gets 8 hex digits of its hash, so
    ``x/run.csv``, ``x_run.csv`` and ``x run.csv`` get three different figures."""
    import hashlib
    import re

    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", run_name).strip("._") or "run"
    if stem == run_name and len(stem) <= 150:
        return stem + suffix
    digest = hashlib.sha1(run_name.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"{stem[-150:]}-{digest}{suffix}"


def save_diagnosis_figure(
    diagnosis: Any, run: Any, plot_dir: Path, thresholds: Any, suffix: str = ".png", entry: dict | None = None
) -> Path:
    """Write one judged run's figure into ``plot_dir`` (created); returns its path. ``entry``: the
    run's gated JSON entry (its verdict goes into the title)."""
    import matplotlib

    path = Path(plot_dir) / figure_name(diagnosis.name, suffix)
    with one_collection(), matplotlib.rc_context(FAST_TEXT):
        _save(diagnosis_figure(diagnosis, run, thresholds, entry), path, tight=False)  # placed by hand
    return path


@contextlib.contextmanager
def one_collection():
    """Python's cycle collector paused while one figure is built and drawn, then run once over
    the youngest generation: a figure's artists (tens of thousands of objects, freed only by
    the collector: they refer to each other) would otherwise set off a dozen collections each,
    most of them promoting objects about to be dropped; this way all of them are still in the
    youngest generation when the figure is done, and one pass frees them (8% of a figure's
    time). Where the caller has paused the collector it stays paused."""
    import gc

    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect(0)


#: the diagnosis figures' text unhinted: most of a figure's time is matplotlib laying out and
#: rendering its text glyph by glyph, and FreeType's hinting (the font's own instructions, run
#: for every glyph drawn) takes about a sixth of it; at these sizes the difference in the
#: pixels is slight
FAST_TEXT = {"text.hinting": "none"}
