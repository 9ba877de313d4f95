"""Fits of series whose values or steps are near the limits of double precision.

Sums of squares of values near ``1e300`` overflow, those of values near ``1e-300`` underflow.
The method is affine-invariant (levels move with the values, times with the steps; R^2,
damping ratios, signal statistics and the HAC bandwidth in points do not change), so such a
series is fitted on ``(step - step0) / tau`` and ``(value - c) / s`` (``s``, ``tau`` of order
the data's spread) and the result is mapped back exactly:
levels ``c + s v``, their errors ``s e``; times ``tau v``; ``SSR s^2``; ``AIC``/``BIC``
``+ 2 n ln s``. A number that does not fit in a double after mapping back is reported as
``None`` with a note. Series in the ordinary range are fitted as they are (bit-identical).
"""

from __future__ import annotations

import math

import numpy as np

from grpofit.fitting.results import Estimate, FitResult
from grpofit.laws.models import LEVELS, median
from grpofit.laws.registry import MODELS

__all__ = ["scales", "scaled", "unscale"]

#: spreads outside ``[_TINY, _HUGE]`` are rescaled
_HUGE = 1e100
_TINY = 1e-100
_TOO_BIG = "not representable as a double after rescaling (beyond ~1.8e308)"


def _half_spread(a: np.ndarray, c: float) -> float:
    """``max |a - c| / 2`` without overflow for finite ``a`` and ``c``."""
    return float(np.max(np.abs(a * 0.5 - c * 0.5)))


def scales(steps: np.ndarray, values: np.ndarray) -> tuple[float, float, float, float]:
    """``(step0, tau, c, s)`` with ``t' = (step - step0) / tau``, ``y' = (value - c) / s``;
    ``tau = 1`` and ``(c, s) = (0, 1)`` when the spread is ordinary (no rescaling)."""
    step0 = float(steps[0])
    hs_t = _half_spread(steps, step0)
    tau = 1.0
    if hs_t > 0 and not (_TINY <= 2.0 * hs_t <= _HUGE):
        tau = 2.0 * hs_t if math.isfinite(2.0 * hs_t) else hs_t
    c = median(values)
    hs_y = _half_spread(values, c)
    if hs_y > 0 and not (_TINY <= 2.0 * hs_y <= _HUGE):
        s = 2.0 * hs_y if math.isfinite(2.0 * hs_y) else hs_y
    elif hs_y == 0 and abs(c) > _HUGE:  # a huge constant: its mean would overflow
        s = 1.0
    else:
        c, s = 0.0, 1.0
    return step0, tau, c, s


def scaled(a: np.ndarray, origin: float, scale: float) -> np.ndarray:
    """``(a - origin) / scale`` without intermediate overflow."""
    return (a * 0.5 - origin * 0.5) / (scale * 0.5)


def _map(x, a: float, b: float):
    """``a + b x`` for a number (``None`` stays ``None``; overflow -> inf)."""
    if x is None:
        return None
    with np.errstate(over="ignore"):
        return float(np.float64(a) + np.float64(b) * np.float64(x))


def _estimate(e: Estimate, a: float, b: float, err_scale: float) -> Estimate:
    value = _map(e.value, a, b)
    stderr = _map(e.stderr, 0.0, err_scale)
    ci = None if e.ci95 is None else (_map(e.ci95[0], a, b), _map(e.ci95[1], a, b))
    note = e.note
    if e.value is not None and not math.isfinite(value):
        note = f"{note}; value {_TOO_BIG}" if note else f"value {_TOO_BIG}"
    return Estimate(value, stderr, ci, note)


def unscale(
    res: FitResult, steps: np.ndarray, values: np.ndarray, step0: float, tau: float, c: float, s: float
) -> FitResult:
    """Map a fit of the rescaled series back to the original units (module docstring)."""
    shift = 2.0 * math.log(s)  # ln s^2
    for fit in res.models.values():
        fit.step0 = step0
        times = MODELS[fit.model].time_params  # in steps; the rest is dimensionless
        for name, e in list(fit.params.items()):
            if name in LEVELS:
                fit.params[name] = _estimate(e, c, s, s)
            elif name in times:
                fit.params[name] = _estimate(e, 0.0, tau, tau)
        if fit.ssr is not None:
            fit.ssr = _map(fit.ssr, 0.0, s * s) if math.isfinite(s * s) else math.inf
        if fit.aic is not None:
            fit.aic = fit.aic + res.n_points * shift
        if fit.bic is not None:
            fit.bic = fit.bic + res.n_points * shift
    for key in ("noise_sd", "residual_sd"):
        if res.noise.get(key) is not None:
            res.noise[key] = _map(res.noise[key], 0.0, s)
    res.steps, res.values = steps, values
    return res
