"""Gradient-norm spike clusters before a failure: the warnings a run gave before it broke.

When the run fails dynamically (a reward collapse, or a sustained grad-norm rise), the points
at ``spike_warn`` x or more above the early median (the first ``baseline_fraction`` of the
points) *before* the failure are its precursors; spikes closer than ``spike_cluster_gap`` of the
step span form one cluster. ``grad_norm_spikes`` warns with every cluster's step range, size and
largest ratio (the HeteroRL GSPO run has spikes up to 40x its baseline around steps 440-560,
600 steps before its reward collapses). Without such a failure an isolated spike is already
reported by the dynamical-instability check, so there is no finding.
"""

from __future__ import annotations

import numpy as np

from grpofit.diagnostics.base import Context, fmt
from grpofit.diagnostics.findings import Finding, Panel, constant
from grpofit.fitting.collapse import default_window


def clusters(steps: np.ndarray, ratio: np.ndarray, factor: float, gap: float) -> list[dict]:
    """``[{"first", "last", "points", "max_ratio", "max_step"}]`` of the spikes ``ratio >= factor``."""
    idx = np.flatnonzero(ratio >= factor)
    out: list[dict] = []
    for i in idx:
        if out and steps[i] - out[-1]["last"] <= gap:
            c = out[-1]
            c["last"] = float(steps[i])
            c["points"] += 1
            if ratio[i] > c["max_ratio"]:
                c["max_ratio"], c["max_step"] = float(ratio[i]), float(steps[i])
        else:
            out.append(
                {
                    "first": float(steps[i]),
                    "last": float(steps[i]),
                    "points": 1,
                    "max_ratio": float(ratio[i]),
                    "max_step": float(steps[i]),
                }
            )
    return out


def _failure_step(ctx: Context, s: np.ndarray, v: np.ndarray) -> float | None:
    steps = []
    if ctx.collapse is not None:
        steps.append(float(ctx.collapse.step))
    rise = ctx.rise(s, v)
    if rise is not None:
        steps.append(float(rise.step))
    return min(steps) if steps else None


def rules(ctx: Context) -> list[Finding]:
    """The grad-norm spike clusters before a dynamical failure (module docstring)."""
    th = ctx.th
    gs = ctx.series("grad_norm")
    if gs is None or constant(gs[1]):
        return []
    s, v = gs
    failure = _failure_step(ctx, s, v)
    if failure is None:
        return []
    col = ctx.roles["grad_norm"]
    nb = max(default_window(v.size), int(th.baseline_fraction * v.size))
    base = float(np.median(v[:nb]))
    if not base > 0:
        return []
    before = s < failure
    ratio = v[before] / base
    found = clusters(s[before], ratio, th.spike_warn, th.spike_cluster_gap * float(s[-1] - s[0]))
    panel = Panel(
        "gradient-norm spikes",
        col,
        s,
        v,
        [(base, "early median", "0.5"), (th.spike_warn * base, f"x{th.spike_warn:g}", "orange")],
        logy=bool(np.min(v) > 0),
    )
    details = {"baseline": base, "failure_step": failure, "clusters": found}
    if not found:
        top = float(ratio.max()) if ratio.size else float("nan")
        return [
            Finding(
                "grad_norm_spikes",
                "pass",
                f"no {col} point reaches x{th.spike_warn:g} its early median {fmt(base)} "
                f"before step {failure:g} (max x{top:.1f})",
                None,
                details,
                panel=panel,
            )
        ]
    parts = [
        f"steps {c['first']:g}-{c['last']:g} ({c['points']} points, up to x{c['max_ratio']:.0f} at step {c['max_step']:g})"
        if c["points"] > 1
        else f"step {c['first']:g} (x{c['max_ratio']:.0f})"
        for c in found[:4]
    ]
    more = f" and {len(found) - 4} more" if len(found) > 4 else ""
    text = (
        f"{col} spikes >= x{th.spike_warn:g} its early median {fmt(base)} before step {failure:g}: "
        + "; ".join(parts)
        + more
    )
    return [Finding("grad_norm_spikes", "warn", text, found[0]["first"], details, panel=panel)]
