"""The single-exponential saturation ``R(t) = p* - (p* - p0) exp(-t/T)``: curve, Jacobian, guess,
bounds and its state-space form (one mode with Ornstein-Uhlenbeck forcing, ``one`` in the
forecast's ``laws``).

The ``raw_*`` functions are the same computations without a ``np.errstate`` of their own (it
costs about as much as evaluating a curve of a hundred points): for the fitter, which runs inside
one ``np.errstate(all="ignore")``. Everyone else calls the public functions.
"""

from __future__ import annotations

import math

import numpy as np

from grpofit.laws.base import (
    CurveModel,
    StateSpaceForm,
    crossing,
    exp_neg,
    huge_ok,
    level_bounds,
    level_ends,
    run_span,
    smooth,
    time_bounds,
)

__all__ = [
    "exponential",
    "exponential_jacobian",
    "raw_exponential_jacobian",
    "guess_exponential",
    "ONE_MODE",
    "EXPONENTIAL",
]


def exponential(t, plateau, initial, timescale):
    """Single-exponential saturation.

    ``R(t) = p* - (p* - p0) * exp(-t / T)`` with ``p* = plateau``, ``p0 = initial``,
    ``T = timescale`` (steps, > 0).
    """
    t = np.asarray(t, dtype=float)
    with huge_ok():
        return plateau - (plateau - initial) * np.exp(-t / timescale)


def exponential_jacobian(t, plateau, initial, timescale):
    """Columns ``dR/d(plateau, initial, timescale)`` of :func:`exponential`, shape ``(n, 3)``.

    ``dR/dp* = 1 - E``, ``dR/dp0 = E``, ``dR/dT = -(p* - p0) E t / T^2`` with ``E = exp(-t/T)``.
    """
    with huge_ok():
        return raw_exponential_jacobian(t, plateau, initial, timescale)


def raw_exponential_jacobian(t, plateau, initial, timescale):
    """:func:`exponential_jacobian` without its ``np.errstate`` (see the ``raw_`` note)."""
    t = np.asarray(t, dtype=float)
    x = t / timescale
    jac = np.empty((3, t.size))  # filled by rows, returned as the (n, 3) view
    e = exp_neg(np.negative(x, out=jac[1]))
    np.subtract(1.0, e, out=jac[0])
    np.multiply(e, x, out=jac[2])
    jac[2] *= -(plateau - initial) / timescale
    return jac.T


def guess_exponential(t: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Plateau from the tail mean, initial from the head, ``T = t_half / ln 2`` from the
    first crossing of the half-rise level by the smoothed series."""
    p0, pst = level_ends(y)
    span = max(run_span(t), 1e-12)
    ys = smooth(y)
    t_half = crossing(t, ys, 0.5 * (p0 + pst), rising=pst >= p0)
    tau = (t_half / np.log(2.0)) if t_half and t_half > 0 else 0.2 * span
    return {"plateau": pst, "initial": p0, "timescale": float(np.clip(tau, 1e-3 * span, span))}


def _bounds_exponential(t, y):
    lv = level_bounds(y)
    return {"plateau": lv, "initial": lv, "timescale": time_bounds(t)}


# ---------------------------------------------------------------------------------------------
# state-space form: ``e' = -e/T + q xi``, levels ``(p*, p0 - p*)``, searched ``(log T, log sd)``


def _columns(t, times):
    return (np.exp(-t / times[0]),)


def _modes(times):
    return np.array([-1.0 / float(times[0])]), np.array([1.0])


def _from_log(theta):
    return (math.exp(theta[0]),)


def _log_bounds(t_lo, t_hi, dt):
    return [t_lo], [t_hi]


def _starts(t_guess, sd0, prior):
    return [[math.log(t_guess), math.log(sd0[0])], [math.log(3.0 * t_guess), math.log(sd0[1])]]


def _kalman(times, sd):
    T = float(times[0])
    return np.array([[-1.0 / T]]), np.array([[math.sqrt(2.0 * sd * sd / T)]]), np.array([[1.0]])


ONE_MODE = StateSpaceForm(
    "one",
    ("plateau", "amplitude"),
    ("timescale",),
    "one mode + forcing",
    columns=_columns,
    modes=_modes,
    from_log=_from_log,
    log_bounds=_log_bounds,
    starts=_starts,
    kalman=_kalman,
)


EXPONENTIAL = CurveModel(
    name="exponential",
    func=exponential,
    jacobian=exponential_jacobian,
    param_names=("plateau", "initial", "timescale"),
    bounds=_bounds_exponential,
    guess=guess_exponential,
    formula="p* - (p* - p0) exp(-t/T)",
    raw_jacobian=raw_exponential_jacobian,
    time_params=("timescale",),
    statespace=ONE_MODE,
    statespace_intervals=True,
    titles={"plateau": "plateau p*", "initial": "initial p0", "timescale": "timescale 1/K_eff"},
    style={"color": "tab:orange", "ls": "--"},
)
