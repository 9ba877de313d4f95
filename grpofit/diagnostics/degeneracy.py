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
    rv = ctx.values
    in01 = bool(rv.min() >= -1e-9 and rv.max() <= 1.0 + 1e-9)
    p_late = float(np.median(late(rv, th.late_fraction, w)))
    G = ctx.group_size
    expected = expected_zero_std(p_late, G or ASSUMED_G) if in01 else None
    pinned_low, pinned_high = _pinned(in01, p_late, th.pin_margin)

    zs = ctx.series("zero_std_frac")
    ss = ctx.series("reward_std")
    z_late = std_ratio = None
    start = None
    if zs is not None:
        z_late, start = _zero_std_late(zs, th, w)
    if ss is not None:
        std_ratio, std_start = _reward_std_ratio(ss, th, w, in01)
        if zs is None and std_ratio is not None:
            start = std_start
    if zs is None and ss is None and not (pinned_low or pinned_high):
        return Verdict("unknown", "no zero-variance-group or reward_std column, and the reward is not pinned at 0 or 1")

    if start is None and (pinned_low or pinned_high):
        start = _pinned_start(ctx, pinned_low)

    excess = _excess(z_late, expected)
    spread = std_ratio if zs is None else None  # reward_std speaks only without a zero-variance column
    degenerate = _is_degenerate(th, z_late, spread, pinned_low or pinned_high)
    top = _at_top(in01, p_late, ctx.reward_gain)
    explained = excess is None or excess < th.zero_std_excess

    parts = _summary_parts(z_late, expected, G, spread, p_late)
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
        why = _failure_reason(pinned_low or (in01 and p_late < 0.5 and explained), explained, top)
        tail = _grad_norm_tail(ctx)
        return Verdict("fail", f"{why}: {numbers}{tail}", start_step=start, details=details)
    if _many_zero_std(th, z_late, excess):
        return Verdict("warn", f"{numbers}: many groups give no gradient", start_step=start, details=details)
    return Verdict("pass", ", ".join(parts) + " over the late run", details=details)


def _zero_std_late(zs, th, w: int) -> tuple[float, float | None]:
    """The late median of the zero-variance-group fraction and the step from which its rolling
    level stays at or above the warn threshold (``None`` if it does not)."""
    s, z = zs
    z_late = float(np.median(late(z, th.late_fraction, w)))
    lev = rolling_median(z, min(w, max(3, z.size // 4) | 1))
    return z_late, onset_to_end(s, lev >= th.zero_std_warn)


def _reward_std_ratio(ss, th, w: int, in01: bool) -> tuple[float | None, float | None]:
    """The late ``reward_std`` as a fraction of its reference (0.5 for a 0/1 reward, else its
    largest rolling level; ``None`` if that is not positive) and the step from which the rolling
    level stays collapsed (``None`` without a ratio or if it does not)."""
    s, sd = ss
    s_late = float(np.median(late(sd, th.late_fraction, w)))
    ref = 0.5 if in01 else float(np.max(rolling_median(sd, w)))
    std_ratio = s_late / ref if ref > 0 else None
    if std_ratio is None:
        return None, None
    lev = rolling_median(sd, w)
    return std_ratio, onset_to_end(s, lev <= th.std_collapse * ref)


def _is_degenerate(th, z_late: float | None, std_ratio: float | None, pinned: bool) -> bool:
    """Whether the late run is degenerate: most groups zero-variance, the reward spread collapsed
    (``std_ratio``, used only without a zero-variance column) or the 0/1 reward pinned."""
    return (
        (z_late is not None and z_late >= th.zero_std_fail)
        or (std_ratio is not None and std_ratio <= th.std_collapse)
        or pinned
    )


def _summary_parts(z_late, expected, G, std_ratio, p_late: float) -> list[str]:
    """The verdict's numbers, in order: the zero-variance fraction (with its mean-field
    expectation), the ``reward_std`` ratio (given only without a zero-variance column), the reward."""
    parts = []
    if z_late is not None:
        parts.append(f"zero-variance groups {100 * z_late:.0f}%")
        if expected is not None:
            gtxt = f"G={G}" if G else f"G>={ASSUMED_G} assumed"
            parts[-1] += f" (mean-field {100 * expected:.0f}% for {gtxt})"
    if std_ratio is not None:
        parts.append(f"reward_std at {100 * std_ratio:.0f}% of its reference")
    parts.append(f"reward {fmt(p_late)}")
    return parts


def _failure_reason(dead: bool, explained: bool, top: bool) -> str:
    """The name of a degenerate run's failure: a dead run, degeneracy beyond the reward level
    (a DAPO failure when not at the top), or degenerate advantages."""
    if not explained:
        why = "degeneracy beyond the reward level"
        if not top:  # groups all-right or all-wrong at a mid-range reward
            why = "DAPO failure (groups all-right or all-wrong while the reward is far from its ceiling), " + why
        return why
    return "dead run" if dead else "degenerate advantages"


def _grad_norm_tail(ctx: Context) -> str:
    """``", grad_norm X"`` with the late median gradient norm, or ``""`` without that column."""
    gn = ctx.series("grad_norm")
    if gn is None:
        return ""
    return f", grad_norm {fmt(float(np.median(late(gn[1], ctx.th.late_fraction, ctx.window))))}"


def _pinned(in01: bool, p_late: float, margin: float) -> tuple[bool, bool]:
    """Whether a 0/1 reward's late level is pinned within ``margin`` of 0, and of 1."""
    return (in01 and p_late <= margin), (in01 and p_late >= 1.0 - margin)


def _pinned_start(ctx: Context, pinned_low: bool) -> float | None:
    """The step from which the reward's level stays pinned (at 0 if ``pinned_low``, else at 1)."""
    lev, margin = ctx.level, ctx.th.pin_margin
    return onset_to_end(ctx.steps, (lev <= margin) if pinned_low else (lev >= 1.0 - margin))


def _excess(z_late: float | None, expected: float | None) -> float | None:
    """The zero-variance fraction beyond its mean-field expectation, ``None`` without either."""
    return z_late - expected if (z_late is not None and expected is not None) else None


def _at_top(in01: bool, p_late: float, reward_gain) -> bool:
    """Whether the reward is at the top: a 0/1 reward at 0.5 or more, or another reward that rose."""
    r_start, r_end, rose = reward_gain
    return (in01 and p_late >= 0.5) or (not in01 and rose and r_end > r_start)


def _many_zero_std(th, z_late: float | None, excess: float | None) -> bool:
    """Whether the zero-variance fraction reaches the warn threshold or exceeds the reward
    level's expectation by the excess threshold."""
    if z_late is None:
        return False
    return z_late >= th.zero_std_warn or (excess is not None and excess >= th.zero_std_excess)
