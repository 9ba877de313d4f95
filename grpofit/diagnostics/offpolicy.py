"""Off-policy and async health: the rollout engine and the trainer disagree.

The failure users of async trainers report most is divergence after about 100 steps. The
metrics are verl's rollout correction (``rollout_corr/rollout_is_mean``, ``rollout_is_std``,
``rollout_is_eff_sample_size``, ``rollout_corr/kl``, ``training/rollout_probs_diff_mean``),
TRL's ``sampling/importance_sampling_ratio/*`` and ``sampling/sampling_logp_difference/*``, and
OpenRLHF's ``vllm_kl``. One rule per metric, each on its rolling median:

- ``is_mean``: the importance-ratio mean outside ``[is_mean_low, is_mean_high]``;
- ``is_ess``: the effective sample size fraction below ``ess_min``;
- ``is_std``: the importance-ratio std above ``is_std_max``;
- ``rollout_kl``: ``|rollout-vs-train KL|`` above ``rollout_kl_max``.

Out of range over a sustained stretch (``rise_min_duration`` of the points, or to the end) ->
fail; single points out of range -> warn; otherwise pass. A column that never changes carries
no signal and is skipped.
"""

from __future__ import annotations

import numpy as np

from grpofit.diagnostics.base import Context, fmt
from grpofit.diagnostics.findings import Finding, Panel, constant, sustained
from grpofit.fitting.collapse import rolling_median


def _bounds(ctx: Context, role: str):
    th = ctx.th
    if role == "is_mean":
        return th.is_mean_low, th.is_mean_high, "importance-ratio mean", False
    if role == "is_ess":
        return th.ess_min, None, "effective sample size fraction", False
    if role == "is_std":
        return None, th.is_std_max, "importance-ratio std", False
    return None, th.rollout_kl_max, "|rollout-vs-train KL|", True


def _rule(ctx: Context, role: str) -> Finding | None:
    series = ctx.series(role)
    if series is None or constant(series[1]):
        return None
    s, v = series
    lo, hi, what, absolute = _bounds(ctx, role)
    col = ctx.roles[role]
    x = np.abs(v) if absolute else v
    lev = rolling_median(x, min(ctx.window, max(3, x.size // 10) | 1))

    def out(a):
        bad = np.zeros(a.size, bool)
        if lo is not None:
            bad |= a < lo
        if hi is not None:
            bad |= a > hi
        return bad

    rng = (
        f"[{fmt(lo)}, {fmt(hi)}]"
        if lo is not None and hi is not None
        else (f">= {fmt(lo)}" if lo is not None else f"<= {fmt(hi)}")
    )
    lines = [(b, label, "red") for b, label in ((lo, "low"), (hi, "high")) if b is not None]
    panel = Panel(what, col, s, x, lines, logy=bool(np.min(x) > 0 and np.max(x) / np.min(x) > 50))
    details = {"column": col, "healthy_range": [lo, hi], "median": float(np.median(x)), "worst_level": None}
    start, n_run = sustained(s, out(lev), max(3, int(ctx.th.rise_min_duration * x.size)))
    if start is not None:
        i = int(np.searchsorted(s, start))
        seg = lev[i : i + n_run]
        worst = float(seg.min() if lo is not None and seg.min() < lo else seg.max())
        details["worst_level"] = worst
        return Finding(
            role,
            "fail",
            f"{col} ({what}) out of its healthy range {rng} from step {start:g} for {n_run} points "
            f"(level {fmt(worst)})",
            start,
            details,
            panel=panel,
        )
    bad = out(x)
    if bad.any():
        first = float(s[np.flatnonzero(bad)[0]])
        return Finding(
            role,
            "warn",
            f"{col} ({what}) out of {rng} on {int(bad.sum())} point(s), first at step {first:g} (not sustained)",
            first,
            details,
            panel=panel,
        )
    return Finding(role, "pass", f"{col} within {rng} (median {fmt(float(np.median(x)))})", None, details, panel=panel)


def rules(ctx: Context) -> list[Finding]:
    """One finding per off-policy metric the run logs (module docstring)."""
    return [f for f in (_rule(ctx, r) for r in ("is_mean", "is_ess", "is_std", "rollout_kl")) if f is not None]
