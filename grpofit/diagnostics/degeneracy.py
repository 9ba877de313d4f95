"""Advantage degeneracy: groups whose rewards are all equal give zero advantage and no gradient.

Inputs: the fraction of zero-variance groups ``z`` (``frac_reward_zero_std``, ``zero_std_ratio``),
the reward spread ``reward_std``, the reward level ``p`` and, when known, the group size ``G``.
For 0/1 rewards the mean-field expectation is ``z_exp = p^G + (1 - p)^G`` (with ``G = 4`` assumed
when unknown: the largest expectation of common group sizes, so the excess is conservative).

Late-run values (last ``late_fraction`` of the points) decide:

- *degenerate*: ``z >= zero_std_fail``, or (no ``z``) ``reward_std`` below ``std_collapse`` x its
  reference, or a 0/1 reward pinned within ``pin_margin`` of 0 or 1;
- degenerate at the top (0/1 reward >= 0.5, or a reward that rose to its best level) and
  explained by the reward level (``z - z_exp < zero_std_excess``) -> **warn**: the learning
  signal is exhausted because the run has *saturated*; the run is done, not broken;
- degenerate otherwise (a dead run: reward near 0, most groups all-wrong, tiny gradients;
  or far more zero-variance groups than the reward level explains) -> **fail**;
- not degenerate but ``z >= zero_std_warn`` or ``z - z_exp >= zero_std_excess`` -> warn;
- no ``z``, no ``reward_std`` and a reward that is not pinned -> unknown.
"""

from __future__ import annotations

import numpy as np

from grpofit.diagnostics.base import Context, Verdict, fmt, late, onset_to_end
from grpofit.fitting.collapse import rolling_median

#: G assumed for the mean-field expectation when the run's group size is unknown: the smallest
#: common GRPO group, which gives the largest (most forgiving) expectation
ASSUMED_G = 4


def expected_zero_std(p: float, group_size: int) -> float:
    """Mean-field fraction of all-equal groups for 0/1 rewards: ``p^G + (1 - p)^G``."""
    p = min(max(float(p), 0.0), 1.0)
    return p**group_size + (1.0 - p) ** group_size


def check(ctx: Context) -> Verdict:
    """Judge advantage degeneracy (module docstring)."""
    th = ctx.th
    w = ctx.window
    rs, rv = ctx.steps, ctx.values
    in01 = bool(rv.min() >= -1e-9 and rv.max() <= 1.0 + 1e-9)
    p_late = float(np.median(late(rv, th.late_fraction, w)))
    G = ctx.group_size
    g_used = G or ASSUMED_G
    expected = expected_zero_std(p_late, g_used) if in01 else None
    pinned_low = in01 and p_late <= th.pin_margin
    pinned_high = in01 and p_late >= 1.0 - th.pin_margin

    zs = ctx.series("zero_std_frac")
    ss = ctx.series("reward_std")
    z_late = std_ratio = None
    start = None
    if zs is not None:
        s, z = zs
        z_late = float(np.median(late(z, th.late_fraction, w)))
        lev = rolling_median(z, min(w, max(3, z.size // 4) | 1))
        start = onset_to_end(s, lev >= th.zero_std_warn)
    if ss is not None:
        s, sd = ss
        s_late = float(np.median(late(sd, th.late_fraction, w)))
        ref = 0.5 if in01 else float(np.max(rolling_median(sd, w)))
        std_ratio = s_late / ref if ref > 0 else None
        if zs is None and std_ratio is not None:
            lev = rolling_median(sd, w)
            start = onset_to_end(s, lev <= th.std_collapse * ref)
    if zs is None and ss is None and not (pinned_low or pinned_high):
        return Verdict("unknown", "no zero-variance-group or reward_std column, and the reward is not pinned at 0 or 1")

    if start is None and (pinned_low or pinned_high):
        lev = ctx.level
        start = onset_to_end(rs, (lev <= th.pin_margin) if pinned_low else (lev >= 1.0 - th.pin_margin))

    excess = z_late - expected if (z_late is not None and expected is not None) else None
    degenerate = (
        (z_late is not None and z_late >= th.zero_std_fail)
        or (zs is None and std_ratio is not None and std_ratio <= th.std_collapse)
        or pinned_low
        or pinned_high
    )
    r_start, r_end, rose = ctx.reward_gain
    top = (in01 and p_late >= 0.5) or (not in01 and rose and r_end > r_start)
    explained = excess is None or excess < th.zero_std_excess

    parts = []
    if z_late is not None:
        parts.append(f"zero-variance groups {100 * z_late:.0f}%")
        if expected is not None:
            gtxt = f"G={G}" if G else f"G>={ASSUMED_G} assumed"
            parts[-1] += f" (mean-field {100 * expected:.0f}% for {gtxt})"
    if std_ratio is not None and zs is None:
        parts.append(f"reward_std at {100 * std_ratio:.0f}% of its reference")
    parts.append(f"reward {fmt(p_late)}")
    where = f" from step {start:g}" if start is not None else " over the late run"
    numbers = ", ".join(parts) + where
    details = {"zero_std_late": z_late, "expected_zero_std": expected, "reward_late": p_late, "group_size": G}

    if degenerate and top and not pinned_low and explained:
        return Verdict(
            "warn",
            f"learning signal exhausted: {numbers}; the reward has saturated (the run is done)",
            start_step=start,
            details=details,
        )
    if degenerate:
        why = "dead run" if (pinned_low or (in01 and p_late < 0.5 and explained)) else "degenerate advantages"
        if not explained:
            why = "degeneracy beyond the reward level"
            if not top:  # groups all-right or all-wrong at a mid-range reward
                why = "DAPO failure (groups all-right or all-wrong while the reward is far from its ceiling), " + why
        gn = ctx.series("grad_norm")
        tail = ""
        if gn is not None:
            tail = f", grad_norm {fmt(float(np.median(late(gn[1], th.late_fraction, w))))}"
        return Verdict("fail", f"{why}: {numbers}{tail}", start_step=start, details=details)
    if z_late is not None and (z_late >= th.zero_std_warn or (excess is not None and excess >= th.zero_std_excess)):
        return Verdict("warn", f"{numbers}: many groups give no gradient", start_step=start, details=details)
    return Verdict("pass", ", ".join(parts) + " over the late run", details=details)
