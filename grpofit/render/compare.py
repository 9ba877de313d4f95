"""Render a ``grpofit.compare/1`` document as a table, and draw the two sides' overlay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grpofit.render.tables import esc, num

TITLES = {
    "plateau": "plateau p*",
    "timescale": "timescale 1/K_eff",
    "inertia": "inertia M/C",
    "damping_ratio": "damping ratio",
}


def _ci(ci) -> str:
    if not ci:
        return "-"
    lo, hi = ci
    return f"[{num(lo)}, {num(hi)}]"


def compare_table(doc: dict) -> Any:
    """One row per quantity: A, B, difference [95%], p, verdict."""
    from rich.table import Table

    a, b = doc.get("a") or {}, doc.get("b") or {}

    def who(side):
        runs = side.get("runs") or []
        return runs[0] if len(runs) == 1 else f"{len(runs)} runs"

    table = Table(
        title=esc(f"A: {who(a)}   B: {who(b)}"),
        title_justify="left",
        caption=esc(f"law: {doc.get('law')}; 'same' = 95% interval of B - A inside the margin"),
    )
    for col in ("quantity", "A", "B", "B - A [95%]", "p", "verdict"):
        table.add_column(col, justify="left" if col in ("quantity", "verdict") else "right")
    for q, d in (doc.get("differences") or {}).items():
        a_txt = num(d.get("a")) + (f" {_ci(d['a_ci95'])}" if d.get("a_ci95") else "")
        b_txt = num(d.get("b")) + (f" {_ci(d['b_ci95'])}" if d.get("b_ci95") else "")
        table.add_row(
            TITLES.get(q, q),
            a_txt,
            b_txt,
            (f"{num(d.get('difference'))} {_ci(d.get('ci95'))}" if d.get("ci95") else num(d.get("difference"))),
            num(d.get("p_value"), 2),
            d.get("verdict") or "-",
        )
    return table


def save_compare_figure(a_fits: list, b_fits: list, path: Path, law: str = "oscillator") -> None:
    """Data and the fitted curves of ``law`` (the document's ``law``) of both sides on one axis
    (A blue, B orange).

    Draws on a :class:`matplotlib.figure.Figure` (the user's pyplot backend is never switched)."""
    import numpy as np
    from matplotlib.figure import Figure

    from grpofit.render.plotting import check_suffix, safe_label

    check_suffix(Path(path), option="--plot")
    fig = Figure(figsize=(8, 4.5))
    ax = fig.subplots()
    for fits, colour, label in ((a_fits, "tab:blue", "A"), (b_fits, "tab:orange", "B")):
        for i, f in enumerate(fits):
            steps, values = f.column_steps, f.column_values
            if steps is None:
                steps, values = f.steps, f.values
            ax.plot(steps, values, ".", ms=2, color=colour, alpha=0.35)
            osc = f.models.get(law)
            if osc is not None and osc.ok:
                grid = np.linspace(float(f.steps[0]), float(f.steps[-1]), 400)
                ax.plot(
                    grid,
                    osc.predict(grid),
                    "-",
                    color=colour,
                    lw=1.6,
                    label=safe_label(f"{label}: {f.run}") if i == 0 else None,
                )
    ax.set_xlabel("step")
    ax.set_ylabel("reward")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    from grpofit.core.errors import UsageError
    from grpofit.runtime.atomic import replacing

    try:
        with replacing(path) as tmp:  # never a half-written figure (interrupt, full disk)
            fig.savefig(tmp, dpi=110, format=Path(path).suffix.lower().lstrip("."))
    except UsageError as e:
        raise UsageError(
            f"cannot write the figure: {e.message}", path=str(path), fix="choose a writable path"
        ) from None
