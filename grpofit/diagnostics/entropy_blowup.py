"""Entropy blow-up: the entropy rising several-fold while the reward falls is instability.

A policy whose token distribution flattens (entropy 0.3 -> 6.9 in the Reasoning-from-Scratch 7_3
run, saturating near 11.9 nats, ``ln`` of the vocabulary, as responses hit the length cap in 7_5)
produces noise; this is dynamical instability, not the concentration the entropy rules watch for.

``entropy_blowup``: the entropy's rolling median reaches ``entropy_blowup_factor`` x its early
median (the first ``baseline_fraction`` of the points) over a sustained stretch (at least
``rise_min_duration`` of the points, or to the end). With the reward level after the onset lower
than before it (by 3 sds of the compared medians and 10% of the reward's range) -> fail;
without a reward fall -> warn. The evidence gives the onset (first several-fold step), the step
where the rise is half-way (on a log scale) to its peak (the finding's start step: a small early
median makes "several-fold" come early), and the peak.
"""

from __future__ import annotations

import numpy as np

from grpofit.diagnostics.base import Context, fmt
from grpofit.diagnostics.findings import Finding, Panel, constant, sustained
from grpofit.fitting.collapse import rolling_median


def rules(ctx: Context) -> list[Finding]:
    """The entropy blow-up rule (module docstring)."""
    th = ctx.th
    es = ctx.series("entropy")
    if es is None or constant(es[1]):
        return []
    s, h = es
    col = ctx.roles["entropy"]
    n = h.size
    w = min(ctx.window, max(3, n // 10) | 1)
    nb = max(w, int(th.baseline_fraction * n))
    base = float(np.median(h[:nb]))
    if not base > 0:
        return []
    lev = rolling_median(h, w)
    min_points = max(3, int(th.rise_min_duration * n))
    onset, length = sustained(s, lev >= th.entropy_blowup_factor * base, min_points)
    peak_i = int(np.argmax(lev))
    ratio = float(lev[peak_i] / base)
    panel = Panel(
        "entropy blow-up",
        col,
        s,
        h,
        [(base, "early median", "0.5"), (th.entropy_blowup_factor * base, f"x{th.entropy_blowup_factor:g}", "red")],
        logy=bool(np.min(h) > 0),
    )
    details = {"entropy_baseline": base, "peak": float(lev[peak_i]), "peak_step": float(s[peak_i]), "peak_ratio": ratio}
    if onset is None:
        return [
            Finding(
                "entropy_blowup",
                "pass",
                f"{col} peaks at x{ratio:.1f} its early median {fmt(base)}",
                None,
                details,
                panel=panel,
            )
        ]
    i0 = int(np.searchsorted(s, onset))
    mid_level = np.sqrt(base * lev[peak_i])
    after = np.flatnonzero((lev >= mid_level) & (np.arange(n) >= i0))
    mid_step = float(s[after[0]]) if after.size else onset
    # the reward before the onset vs after it
    rs, rv = ctx.steps, ctx.values
    before = rv[(rs < onset) & (rs >= onset - (s[-1] - s[0]) * 0.2)]
    stop = s[min(i0 + length, n - 1)]
    during = rv[(rs >= onset) & (rs <= stop)]
    fell = False
    r_before = r_after = None
    if before.size >= 3 and during.size >= 3:
        r_before, r_after = float(np.median(before)), float(np.median(during))
        sd = ctx.noise * 1.25 * np.sqrt(1.0 / before.size + 1.0 / during.size)
        spread = float(np.ptp(ctx.level)) if ctx.level.size else 0.0
        fell = (r_before - r_after) > max(3.0 * sd, 0.1 * spread)
    details.update(onset_step=onset, half_way_step=mid_step, reward_before=r_before, reward_after=r_after)
    text = (
        f"{col} blows up x{ratio:.0f} above its early median {fmt(base)} (to {fmt(float(lev[peak_i]))} by step {s[peak_i]:g}); "
        f"several-fold from step {onset:g}, half-way (log scale) at step {mid_step:g}"
    )
    if fell:
        return [
            Finding(
                "entropy_blowup",
                "fail",
                text + f" while the reward falls {fmt(r_before)} -> {fmt(r_after)}",
                mid_step,
                details,
                panel=panel,
            )
        ]
    return [Finding("entropy_blowup", "warn", text + " (the reward does not fall)", mid_step, details, panel=panel)]
