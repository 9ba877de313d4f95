"""Entropy collapse: exploration gone while the reward is still rising.

With ``H_first`` and ``H_last`` the mean entropy over the first and the last ``entropy_window``
points (at most a third of the run each) and "still rising" meaning the reward's slope over its
last ``entropy_window`` points (before any collapse) is positive at t > 2 (autocorrelation
allowed for) and worth at least 10% of its gain, or the fitted exponential still has 20% of its
gain ahead, its plateau's 95% interval above the fitted end level:

- ``H_last < entropy_floor_abs`` (nats per token; TRL's documentation notes 2-10 nats for base
  models) while the reward still rises -> fail;
- ``H_last < (1 - entropy_fall) H_first`` while the reward still rises -> warn;
- either one after the reward has saturated -> pass: a low entropy at the end of a converged run
  is the run being done, not broken (the verl GSM8K runs end near 0.05 nats).

An entropy column that never changes (logged as 0 throughout) is not an entropy: no finding.
"""

from __future__ import annotations

import numpy as np

from grpofit.diagnostics.base import Context, fmt, model_param
from grpofit.diagnostics.findings import Finding, Panel, constant


def still_rising(ctx: Context, n_last: int) -> tuple[bool, float | None]:
    """Is the reward (before any collapse) still rising over its last ``n_last`` points?
    Returns ``(rising, rise over the window)``."""
    s, v = ctx.pre
    k = min(int(n_last), s.size)
    if k < 6:
        return False, None
    t, y = s[-k:].astype(float), v[-k:].astype(float)
    tc = t - t.mean()
    sxx = float(tc @ tc)
    if sxx <= 0:
        return False, None
    slope = float(tc @ (y - y.mean())) / sxx
    resid = y - y.mean() - slope * tc
    sd = float(np.std(resid, ddof=2)) if k > 2 else 0.0
    rho = float(np.corrcoef(resid[:-1], resid[1:])[0, 1]) if k > 3 and np.std(resid) > 0 else 0.0
    rho = min(max(rho if np.isfinite(rho) else 0.0, 0.0), 0.9)
    se = sd / np.sqrt(sxx) * np.sqrt((1 + rho) / (1 - rho))
    rise = slope * (t[-1] - t[0])
    start, end, _ = ctx.reward_gain
    gain = max(abs(end - start), ctx.noise, 1e-12)
    if se > 0 and slope / se > 2.0 and rise >= 0.1 * gain:
        return True, rise
    left = remaining_gain(ctx)
    return (left is not None and left >= 0.2), rise


def remaining_gain(ctx: Context) -> float | None:
    """Share of the fitted exponential's gain still ahead at the end of the fitted part, when its
    plateau is significantly above the fitted end level (the 95% interval's lower end); else None."""
    fit = ctx.fit
    try:
        p = fit.param("plateau", "exponential")  # None when the exponential was not fitted
    except AttributeError:  # no fit
        return None
    if p is None:
        return None
    model = fit.models["exponential"]
    plateau = model_param(fit, "exponential", "plateau")
    initial = model_param(fit, "exponential", "initial")
    ci = getattr(p, "ci95", None)
    if plateau is None or initial is None or not ci or ci[0] is None or plateau == initial:
        return None
    s, _ = ctx.pre
    try:
        end = float(np.asarray(model.predict(np.asarray([s[-1]], float)), float)[0])
    except Exception:  # a model that cannot predict says nothing
        return None
    if not (ci[0] > end if plateau > initial else ci[1] is not None and ci[1] < end):
        return None
    return float((plateau - end) / (plateau - initial))


def rules(ctx: Context) -> list[Finding]:
    """The entropy floor and fall (module docstring)."""
    th = ctx.th
    es = ctx.series("entropy", before_collapse=True)
    if es is None or constant(es[1]):
        return []
    s, h = es
    col = ctx.roles["entropy"]
    k = max(3, min(int(th.entropy_window), h.size // 3))
    h_first, h_last = float(np.mean(h[:k])), float(np.mean(h[-k:]))
    if not h_first > 0:
        return []
    rising, rise = still_rising(ctx, k)
    floor = h_last < th.entropy_floor_abs
    fall = h_last < (1.0 - th.entropy_fall) * h_first
    details = {
        "entropy_first": h_first,
        "entropy_last": h_last,
        "window": k,
        "reward_still_rising": rising,
        "reward_late_rise": rise,
    }
    panel = Panel(
        "entropy floor",
        col,
        s,
        h,
        [
            (th.entropy_floor_abs, f"floor {th.entropy_floor_abs:g}", "red"),
            ((1.0 - th.entropy_fall) * h_first, f"-{100 * th.entropy_fall:.0f}%", "orange"),
        ],
    )
    text = f"{col} {fmt(h_first)} -> {fmt(h_last)} (mean of the first and last {k} points)"
    start = float(s[-k])
    if rising and floor:
        return [
            Finding(
                "entropy_collapse",
                "fail",
                f"entropy collapsed below {th.entropy_floor_abs:g} while the reward still rises "
                f"({fmt(rise)} over the last {k} points): {text}",
                start,
                details,
                panel=panel,
            )
        ]
    if rising and fall:
        return [
            Finding(
                "entropy_collapse",
                "warn",
                f"entropy fell {100 * (1 - h_last / h_first):.0f}% while the reward still rises: {text}",
                start,
                details,
                panel=panel,
            )
        ]
    if floor or fall:
        return [
            Finding(
                "entropy_collapse",
                "pass",
                f"{text}; low after the reward saturated (the run is done)",
                None,
                details,
                panel=panel,
            )
        ]
    return [Finding("entropy_collapse", "pass", text, None, details, panel=panel)]
