"""The entropy-reward law (Cui et al. 2025, "The Entropy Mechanism of RL for Reasoning LMs").

Across a run the reward follows ``R = -a exp(H) + b``: reward is bought with entropy. With the
entropy spent (``H = 0``) the law's ceiling is ``b - a``: a second estimate, independent of the
reward curve's shape, of where the run can still go.

The law is linear in ``x = exp(H)``: ordinary least squares of the reward on ``x`` at the
entropy's steps (before any reward collapse). The ceiling's standard error is the regression's
prediction error at ``x = 1``, widened for autocorrelated residuals by ``sqrt((1 + rho) / (1 - rho))``
(``rho`` the lag-1 autocorrelation of the residuals); the interval is +-1.96 of it.

``entropy_reward_law``: with ``a > 0`` and R2 at least ``entropy_law_min_r2``, the fitted
plateau's lower 95% end above the ceiling's upper end -> warn (the plateau forecast exceeds what
the entropy can still buy); otherwise pass with both numbers. Law not supported (``a <= 0``, a
poor R2, too few points, no entropy spread) -> unknown with the reason (never gates).
"""

from __future__ import annotations

import numpy as np

from grpofit.diagnostics.base import Context, fmt, model_param
from grpofit.diagnostics.findings import Finding, Panel, constant


def fit_law(h: np.ndarray, r: np.ndarray) -> dict | None:
    """``{"a", "b", "ceiling", "stderr", "ci95", "r2", "n"}`` of ``R = -a exp(H) + b``; None below 8 points."""
    x = np.exp(np.asarray(h, float))
    y = np.asarray(r, float)
    n = x.size
    if n < 8 or np.ptp(x) <= 0:
        return None
    xm, ym = x.mean(), y.mean()
    sxx = float(((x - xm) ** 2).sum())
    slope = float(((x - xm) * (y - ym)).sum() / sxx)
    b = ym - slope * xm
    a = -slope
    resid = y - (b - a * x)
    sst = float(((y - ym) ** 2).sum())
    r2 = 1.0 - float(resid @ resid) / sst if sst > 0 else 0.0
    s2 = float(resid @ resid) / (n - 2)
    rho = float(np.corrcoef(resid[:-1], resid[1:])[0, 1]) if np.std(resid) > 0 else 0.0
    rho = min(max(rho if np.isfinite(rho) else 0.0, 0.0), 0.95)
    se = np.sqrt(s2 * (1.0 / n + (1.0 - xm) ** 2 / sxx)) * np.sqrt((1 + rho) / (1 - rho))
    ceiling = b - a
    return {
        "a": a,
        "b": b,
        "ceiling": ceiling,
        "stderr": float(se),
        "ci95": [ceiling - 1.96 * se, ceiling + 1.96 * se],
        "r2": r2,
        "n": n,
        "residual_lag1": rho,
    }


def _plateau(ctx: Context):
    fit = ctx.fit
    pref = getattr(fit, "preferred", None)
    for name in ([pref] if pref else []) + ["exponential"]:
        try:
            p = fit.param("plateau", name)
        except AttributeError:  # no fit
            return None
        v = model_param(fit, name, "plateau")
        if p is not None and v is not None:
            ci = getattr(p, "ci95", None) or (None, None)
            return v, ci[0], ci[1]
    return None


def rules(ctx: Context) -> list[Finding]:
    """The entropy-reward law's ceiling against the fitted plateau (module docstring)."""
    es = ctx.series("entropy", before_collapse=True)
    if es is None or constant(es[1]):
        return []
    s, h = es
    rs, rv = ctx.pre
    inside = (s >= rs[0]) & (s <= rs[-1])
    s, h = s[inside], h[inside]
    r = np.interp(s, rs, rv)
    col = ctx.roles["entropy"]
    law = fit_law(h, r)
    if law is None:
        return [
            Finding("entropy_reward_law", "unknown", f"too few points or no spread in {col} to fit R = -a exp(H) + b")
        ]
    plat = _plateau(ctx)
    details = dict(law)
    if plat is not None:
        details.update(plateau=plat[0], plateau_ci95=[plat[1], plat[2]])
    order = np.argsort(h)
    hx = h[order]
    panel = Panel(
        "entropy-reward law R = -a exp(H) + b",
        f"reward vs {col}",
        h,
        r,
        [(law["ceiling"], f"ceiling b-a {fmt(law['ceiling'])}", "red")]
        + ([(plat[0], f"plateau {fmt(plat[0])}", "tab:orange")] if plat else []),
        other=(hx, law["b"] - law["a"] * np.exp(hx), "law"),
    )
    if law["a"] <= 0 or law["r2"] < ctx.th.entropy_law_min_r2:
        why = "the reward does not rise as the entropy falls" if law["a"] <= 0 else f"R2 {law['r2']:.2f}"
        return [
            Finding(
                "entropy_reward_law",
                "unknown",
                f"the law R = -a exp(H) + b does not hold here ({why})",
                None,
                details,
                panel=panel,
            )
        ]
    lo, hi = law["ci95"]
    text = f"entropy-reward law ceiling b - a = {fmt(law['ceiling'])} [{fmt(lo)}, {fmt(hi)}] (a {fmt(law['a'])}, R2 {law['r2']:.2f})"
    if plat is None:
        return [
            Finding("entropy_reward_law", "pass", text + "; no fitted plateau to compare", None, details, panel=panel)
        ]
    p, plo, phi = plat
    ptext = f"fitted plateau {fmt(p)}" + (f" [{fmt(plo)}, {fmt(phi)}]" if plo is not None and phi is not None else "")
    floor = plo if plo is not None else p
    if floor > hi:
        return [
            Finding(
                "entropy_reward_law",
                "warn",
                f"the plateau forecast exceeds what the entropy can still buy: {ptext} above the {text}",
                None,
                details,
                panel=panel,
            )
        ]
    return [Finding("entropy_reward_law", "pass", f"{text}; {ptext}", None, details, panel=panel)]
