"""Intervals for what-if predictions: the measured curvature's interval (from the fitted
timescale's) propagated through the closed form (theory.md §2), and the regime decided only where
the whole interval agrees.

``K = (1 - mu) / (eta (T + K_ref))`` is measured on a grid over the fitted timescale's 95% interval
(and, when the momentum was not found in the run's logs or config, over the momenta it could
plausibly be: :data:`ASSUMED_MOMENTA` and the value passed); each ``K`` gives the new settings'
timescale, inertia, damping ratio, regime and stability. The regime is reported when every grid
point agrees, else "cannot tell", and the output says which assumed setting it depends on.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from grpofit.dynamics._common import _f
from grpofit.dynamics.closed import closed_form, measure_curvature

__all__ = ["ASSUMED_MOMENTA", "what_if_intervals"]

#: momenta a run may have used when its logs do not say (plain SGD to Adam's default beta1 and above)
ASSUMED_MOMENTA = (0.0, 0.5, 0.8, 0.9, 0.95)
GRID = 25


def _grid(lo: float, hi: float, n: int = GRID) -> np.ndarray:
    if not (lo > 0 and hi > 0) or hi <= lo:
        return np.array([lo if lo > 0 else hi])
    return np.exp(np.linspace(math.log(lo), math.log(hi), n))


def what_if_intervals(
    *,
    timescale: float,
    timescale_ci95,
    lr: float,
    momentum: float,
    refresh_interval: float,
    changes: dict,
    adam: bool = False,
    lr_raw: float | None = None,
    momentum_assumed: bool = False,
    delta: float = 1.0,
) -> dict[str, Any]:
    """The what-if's timescale, inertia and damping ratio with 95% intervals, its regime and
    stability over the interval ("cannot tell" where they differ).

    ``lr``/``momentum``: the heavy-ball values the base run was measured with (for Adam,
    ``lr = lr_raw (1 - beta1)``). ``changes``: the what-if settings as the user gave them (an Adam
    rate is mapped with the momentum of each grid point). ``momentum_assumed``: the momentum came
    from a flag, not the run's logs: it is varied over :data:`ASSUMED_MOMENTA` as well.
    """
    lo, hi = timescale_ci95 if timescale_ci95 is not None else (timescale, timescale)
    ts = _grid(float(lo), float(hi)) if lo and hi and lo > 0 else np.array([timescale])
    moms = sorted({float(momentum)} | (set(ASSUMED_MOMENTA) if momentum_assumed else set()))
    rows = []
    for mu in moms:
        eta = lr if not adam else float(lr_raw if lr_raw is not None else lr / (1 - momentum)) * (1.0 - mu)
        kref = float(refresh_interval)
        new_mu = float(changes.get("momentum", mu))
        new_kref = float(changes.get("refresh_interval", kref))
        if "lr" in changes:
            new_eta = float(changes["lr"]) * ((1.0 - new_mu) if adam else 1.0)
        else:
            new_eta = eta if not adam or "momentum" not in changes else eta / (1.0 - mu) * (1.0 - new_mu)
        for T in ts:
            try:
                K = measure_curvature(float(T), eta, mu, kref, delta)
                c = closed_form(new_eta, new_mu, new_kref, K, delta)
            except Exception:  # noqa: BLE001 - a grid point outside the closed form's domain is skipped
                continue
            rows.append(
                {
                    "mu": mu,
                    "T": float(T),
                    "K": K,
                    "timescale": c.timescale,
                    "inertia": c.inertia,
                    "damping_ratio": c.damping_ratio,
                    "regime": c.regime,
                    "stable": bool(c.stable),
                    "at_given": mu == float(momentum),
                    "lr_eff": new_eta,
                }
            )
    if not rows:
        return {"note": "the closed form has no value over the measured interval"}

    def span(key, sel=rows):
        v = [r[key] for r in sel if r[key] is not None and math.isfinite(r[key])]
        return [_f(min(v)), _f(max(v))] if v else None

    def verdict(key, sel):
        vals = {r[key] for r in sel}
        return vals.pop() if len(vals) == 1 else "cannot tell"

    given = [r for r in rows if r["at_given"]] or rows
    out: dict[str, Any] = {
        "curvature_ci95": span("K", given),
        "timescale_ci95": span("timescale", given),
        "inertia_ci95": span("inertia", given),
        "damping_ratio_ci95": span("damping_ratio", given),
        "regime": verdict("regime", rows),
        "stable": verdict("stable", rows),
        "regime_at_given_momentum": verdict("regime", given),
        "from": f"the fitted timescale's 95% interval [{_f(lo)}, {_f(hi)}] through the closed form",
    }
    if adam:
        out["lr_eff_adam"] = span("lr_eff", given)
        out["lr_note"] = "Adam-effective rate lr (1 - beta1), not the lr passed"
    if momentum_assumed:
        out["assumed"] = {"momentum": list(moms), "why": "the momentum is not in the run's logs or config"}
        if out["regime"] == "cannot tell" and out["regime_at_given_momentum"] != "cannot tell":
            out["note"] = (
                f"the regime depends on the assumed momentum: {out['regime_at_given_momentum']} at "
                f"{momentum:g}, but not for every momentum in {list(moms)}; the logs do not name it"
            )
    if timescale_ci95 is None:
        out["note"] = "the fitted timescale has no 95% interval: the regime is the point estimate's, and may not hold"
    if out["regime"] == "cannot tell" and "note" not in out:
        out["note"] = "the measured interval does not decide the regime: it differs across the curvature's 95% interval"
    return out
