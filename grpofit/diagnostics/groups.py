"""Advantage degeneracy from the group statistics the frameworks log.

The zero-variance fraction (TRL ``frac_reward_zero_std``; OpenRLHF's
``dynamic_filtering_pass_rate`` read as one minus the fraction) is judged by the
advantage-degeneracy check itself. This module adds the within-group spread:

``within_group_std``: the mean within-group reward std (TRL ``reward_std``, OpenRLHF
``group_reward_std``) over the last ``group_std_window`` points below ``group_std_floor``: the
advantages are 0/0. At the reward's top (a 0/1 reward at or above 0.5, or a reward that rose to
its best level) the run has saturated -> warn (done, not broken); otherwise it is the DAPO
failure (groups all-right or all-wrong while the reward is far from its ceiling) -> fail.
"""

from __future__ import annotations

import numpy as np

from grpofit.diagnostics.base import Context, fmt, late
from grpofit.diagnostics.findings import Finding, Panel


def rules(ctx: Context) -> list[Finding]:
    """The within-group std floor (module docstring)."""
    th = ctx.th
    ss = ctx.series("reward_std")
    if ss is None:
        return []
    s, sd = ss
    col = ctx.roles["reward_std"]
    k = max(3, min(int(th.group_std_window), sd.size))
    mean_late = float(np.mean(sd[-k:]))
    details = {"column": col, "late_mean": mean_late, "window": k}
    panel = Panel("within-group reward std", col, s, sd, [(th.group_std_floor, f"floor {th.group_std_floor:g}", "red")])
    if mean_late >= th.group_std_floor:
        return [
            Finding(
                "within_group_std",
                "pass",
                f"{col} {fmt(mean_late)} over the last {k} points",
                None,
                details,
                panel=panel,
            )
        ]
    rv = ctx.values
    in01 = bool(rv.min() >= -1e-9 and rv.max() <= 1.0 + 1e-9)
    p_late = float(np.median(late(rv, th.late_fraction, ctx.window)))
    r_start, r_end, rose = ctx.reward_gain
    top = (in01 and p_late >= 0.5) or (not in01 and rose and r_end > r_start)
    low = sd < th.group_std_floor
    start = (
        float(s[np.flatnonzero(~low)[-1] + 1])
        if (~low).any() and low[-1] and np.flatnonzero(~low)[-1] + 1 < s.size
        else float(s[-k])
    )
    text = f"{col} {fmt(mean_late)} over the last {k} points (below {th.group_std_floor:g}), reward {fmt(p_late)}"
    if top:
        return [
            Finding(
                "within_group_std",
                "warn",
                f"no within-group spread left: {text}; the reward has saturated (the run is done)",
                start,
                details,
                panel=panel,
            )
        ]
    return [
        Finding(
            "within_group_std",
            "fail",
            f"DAPO failure, groups all-right or all-wrong while the reward is far from its ceiling: {text}",
            start,
            details,
            panel=panel,
        )
    ]
