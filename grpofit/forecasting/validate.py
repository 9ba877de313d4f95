"""The seen steps' own verdict on the point forecast: rolling-origin validation at the horizon.

The likelihood scores one-step-ahead predictions, and one step ahead a forcing excursion that
reverts slowly and a level that has moved for good look alike; a far final level is exactly
where they differ (theory.md §7). So the point forecast is checked at the horizon it is asked
about, on the seen steps alone:

- origins inside the seen part, placed so that the gap from each origin to the seen part's last
  tenth is in the same ratio to the points before it as the real horizon is to the seen part
  (at least :data:`MIN_SHARE` of the seen points before each origin);
- from each origin, the laws (their fitted parameters, their mixture weights) predict the mean
  of the seen part's last tenth given only the points before the origin; persistence predicts
  the mean of the last tenth before the origin;
- the mean absolute errors of the two are compared. Where persistence was the better
  predictor of the seen part's own end, the point forecast is persistence's (the mean of the
  last tenth seen), and the interval is widened to hold both the model's and the same spread
  around persistence.

The parameters are the ones fitted on all seen steps (a fixed-parameter rolling origin): the
check needs no refit and costs a few small Cholesky factorisations.
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["rolling_origin", "MIN_SHARE"]

#: at least this share of the seen points lies before every validation origin
MIN_SHARE = 0.3
#: origins: the one matching the horizon ratio and its neighbours at these multiples of it
SPREAD = (0.8, 1.0, 1.25)


def _sub(series, upto: float):
    keep = series.t <= upto
    pv = None if series.point_var is None else series.point_var[keep]
    sub = dataclasses.replace(series, t=series.t[keep], y=series.y[keep], count=series.count[keep], point_var=pv)
    k = max(1, int(keep.sum()) // 10)
    sub.level = float(sub.y[-k:].mean())
    return sub


def rolling_origin(fits, weights, series, t: np.ndarray, y: np.ndarray, horizon: float, seed: int = 0) -> dict | None:
    """``{"model_error", "persistence_error", "origins", "choice"}`` or ``None`` when the seen
    part is too short to hold a validation origin. ``t`` from the first seen step; ``horizon``:
    from the last seen step to the step forecast."""
    from grpofit.forecasting.predictive import _conditional

    span = float(t[-1] - t[0])
    if span <= 0 or horizon <= 0 or t.size < 20:
        return None
    target_from = t[-1] - 0.1 * span
    target_t = t[t >= target_from]
    actual = float(y[t >= target_from].mean())
    if target_t.size > 10:
        target_t = target_t[np.linspace(0, target_t.size - 1, 10).round().astype(int)]
    # origin o with (end - o) / (o - start) = horizon / span, the end being the target's centre
    end = 0.5 * (target_from + t[-1])
    ratio = horizon / span
    rng = np.random.default_rng(seed + 7)
    m_err, p_err, origins = [], [], []
    for mult in SPREAD:
        o = t[0] + (end - t[0]) / (1.0 + ratio * mult)
        before = t <= o
        if before.sum() < max(MIN_SHARE * t.size, 12) or o >= target_from:
            continue
        k = max(1, int(before.sum()) // 10)
        pers = float(y[before][-k:].mean())
        sub = _sub(series, o)
        if sub.t.size < 8:
            continue
        preds, ws = [], []
        for fit, w in zip(fits, weights):
            if w <= 0:
                continue
            try:
                with np.errstate(all="ignore"):
                    mean = _conditional(fit, fit.theta, sub, target_t, rng)[0]
            except (np.linalg.LinAlgError, ValueError):
                continue
            if np.all(np.isfinite(mean)):
                preds.append(float(mean.mean()))
                ws.append(w)
        if not preds:
            continue
        model = float(np.average(preds, weights=ws))
        m_err.append(abs(model - actual))
        p_err.append(abs(pers - actual))
        origins.append(float(o))
    if not origins:
        return None
    me, pe = float(np.mean(m_err)), float(np.mean(p_err))
    return {"model_error": me, "persistence_error": pe, "origins": origins,
            "choice": "persistence" if pe < me else "model"}
