"""The seen steps' own verdict on the point forecast: rolling-origin validation at the horizon.

The likelihood scores one-step-ahead predictions, and one step ahead a forcing excursion that
reverts slowly and a level that has moved for good look alike; a far final level is exactly
where they differ (docs/theory.md §7). So the point forecast is checked far ahead, on the seen steps
alone (nothing after the cut enters):

- the target is the mean of the seen part's last tenth;
- candidate origins leave :data:`SHARES` of the seen points before them (at least
  :data:`MIN_POINTS`); of these, the :data:`N_ORIGINS` whose gap to the target is in the ratio to
  the points before them closest to the real horizon's ratio to the seen part are used (a 25%
  cut asks for a gap three times the seen part, which no origin inside it can give: the
  furthest-ahead origins that still leave enough points are used then);
- from each origin the laws (their fitted parameters, their mixture weights) predict the target
  given only the points before the origin; persistence predicts it with the mean of the last
  tenth before the origin;
- the mean absolute errors of the two, ``me`` and ``pe``, give the model's weight in the point
  forecast, ``pe^2 / (me^2 + pe^2)`` (inverse squared error: equal errors, equal weights;
  :func:`model_weight`).

The parameters are the ones fitted on all seen steps (a fixed-parameter rolling origin): the
check needs no refit and costs a few small Cholesky factorisations.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from grpofit.fitting.drift import persistence

__all__ = ["rolling_origin", "model_weight", "SHARES", "MIN_POINTS"]

#: candidate origins: these shares of the seen points lie before them
SHARES = (0.3, 0.35, 0.4, 0.5, 0.6, 0.7)
#: at least this many points before an origin, and this many seen points for any validation
MIN_POINTS = 12
MIN_SEEN = 20
#: origins used: those whose horizon ratio is closest (in log) to the real one
N_ORIGINS = 3


def model_weight(validation: dict | None) -> float:
    """The model's weight in the point forecast (the rest is persistence's): the inverse squared
    error share of the rolling-origin validation, 1/2 without one (no evidence either way)."""
    if not validation:
        return 0.5
    me, pe = validation["model_error"], validation["persistence_error"]
    if me * me + pe * pe <= 0:
        return 0.5
    return float(pe * pe / (me * me + pe * pe))


def _sub(series, upto: float):
    keep = series.t <= upto
    pv = None if series.point_var is None else series.point_var[keep]
    rv = None if series.rel_var is None else series.rel_var[keep]
    sub = dataclasses.replace(
        series, t=series.t[keep], y=series.y[keep], count=series.count[keep], point_var=pv, rel_var=rv
    )
    sub.level = persistence(sub.y)
    return sub


def rolling_origin(fits, weights, series, t: np.ndarray, y: np.ndarray, horizon: float, seed: int = 0) -> dict | None:
    """``{"model_error", "persistence_error", "origins", "model_weight"}`` or ``None`` when the
    seen part is too short to hold a validation origin. ``t`` from the first seen step;
    ``horizon``: from the last seen step to the step forecast."""
    from grpofit.forecasting.predictive import _conditional

    n = t.size
    span = float(t[-1] - t[0])
    if span <= 0 or horizon <= 0 or n < MIN_SEEN:
        return None
    target_from = t[-1] - 0.1 * span
    target_t = t[t >= target_from]
    actual = float(y[t >= target_from].mean())
    if target_t.size > 10:
        target_t = target_t[np.linspace(0, target_t.size - 1, 10).round().astype(int)]
    end = 0.5 * (target_from + t[-1])
    ratio = horizon / span
    cands = []
    for share in SHARES:
        k = int(round(share * n))
        if k < MIN_POINTS:
            continue
        o = float(t[k - 1])
        if o >= target_from or o <= t[0]:
            continue
        cands.append((abs(np.log((end - o) / (o - t[0]) / ratio)), o, k))
    cands = sorted(cands)[:N_ORIGINS]
    rng = np.random.default_rng(seed + 7)
    m_err, p_err, origins = [], [], []
    for _, o, k in sorted(cands, key=lambda c: c[1]):
        pers = persistence(y[:k])
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
        origins.append(o)
    if not origins:
        return None
    out = {"model_error": float(np.mean(m_err)), "persistence_error": float(np.mean(p_err)), "origins": origins}
    out["model_weight"] = model_weight(out)
    return out
