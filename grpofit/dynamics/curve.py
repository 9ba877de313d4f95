"""The deterministic oscillator curve ``p(t)`` for given mass, damping and stiffness.

Stable coefficients (``C > 0``, ``K_eff > 0``) are evaluated by :func:`grpofit.laws.models.oscillator`
(the tested, overflow-safe implementation the fitter uses); this module keeps its own
evaluation only for what that parametrisation cannot represent: anti-damping (``C <= 0``, the
closed form's "unstable" regime), ``K_eff <= 0`` and a negative mass.
"""

from __future__ import annotations

import math

import numpy as np

from grpofit.laws import models

__all__ = ["oscillator_curve"]


def _series_cs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``C(x) = cosh(sqrt x)``, ``S(x) = sinh(sqrt x)/sqrt x`` by their series (|x| <= 1)."""
    c = np.ones_like(x)
    s = np.ones_like(x)
    tc = np.ones_like(x)
    ts = np.ones_like(x)
    for k in range(1, 12):
        tc = tc * x / ((2 * k - 1) * (2 * k))
        ts = ts * x / ((2 * k) * (2 * k + 1))
        c += tc
        s += ts
    return c, s


def oscillator_curve(
    t: np.ndarray, plateau: float, initial: float, mass: float, damping: float, stiffness: float
) -> np.ndarray:
    """Deterministic oscillator from rest: ``p(t) = p* + e(t)``, ``e(0) = initial - p*``, ``e'(0) = 0``.

    ``M e'' + C e' + K_eff e = 0``; with ``a = C/(2M)``, ``b^2 = a^2 - K_eff/M``:
    ``e(t) = e0 exp(-a t) [cosh(b t) + (a/b) sinh(b t)]`` (cos/sin when ``b^2 < 0``).

    For ``C > 0``, ``K_eff > 0`` and ``M >= 0`` this is
    ``models.oscillator(t, p*, p0, timescale=C/K_eff, inertia=M/C)``. Otherwise (``C <= 0``
    gives the growing, unstable solution) it is evaluated here with the exponentials combined
    and by series when ``|b t| < 1``.
    """
    t = np.asarray(t, dtype=float)
    if damping > 0 and stiffness > 0 and mass >= 0:
        return models.oscillator(t, plateau, initial, timescale=damping / stiffness, inertia=mass / damping)
    return _unstable_curve(t, plateau, initial, mass, damping, stiffness)


def _unstable_curve(
    t: np.ndarray, plateau: float, initial: float, mass: float, damping: float, stiffness: float
) -> np.ndarray:
    """The same solution for coefficients :func:`grpofit.laws.models.oscillator` cannot take."""
    e0 = initial - plateau
    a = damping / (2.0 * mass)
    b2 = a * a - stiffness / mass
    x = b2 * t * t
    out = np.empty_like(t)
    small = np.abs(x) <= 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        if small.any():
            c, s = _series_cs(x[small])
            ts = t[small]
            out[small] = np.exp(-a * ts) * (c + a * ts * s)
        big = ~small
        if big.any():
            tb = t[big]
            if b2 > 0:
                b = math.sqrt(b2)
                out[big] = 0.5 * ((1 + a / b) * np.exp(-(a - b) * tb) + (1 - a / b) * np.exp(-(a + b) * tb))
            else:
                w = math.sqrt(-b2)
                out[big] = np.exp(-a * tb) * (np.cos(w * tb) + (a / w) * np.sin(w * tb))
    return plateau + e0 * out
