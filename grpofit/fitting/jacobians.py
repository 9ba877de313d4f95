"""The laws' Jacobians as the least-squares fit evaluates them (inside its ``np.errstate``): the
law's own ``raw_jacobian``, except the oscillator's where grpofit's compiled kernel was built
(``grpofit/_filter.c``, ``oscillator_jacobian``). The fit asks for it some ten times per run on
a few dozen bins or a few hundred points; in numpy its near-critical and overdamped branches are
a few dozen array operations each, so the operations' own overhead was most of its cost. The
kernel performs the same operations per point (the same branches, the series and the closed
form), so both agree to round-off (``tests/test_fit_kernel.py``)."""

from __future__ import annotations

import numpy as np

from grpofit.laws import oscillator as _osc
from grpofit.laws.models import CurveModel
from grpofit.runtime.compiled import compiled_filter

__all__ = ["raw_jacobian", "oscillator_jacobian", "oscillator_residuals", "relaxation_derivatives"]

#: the oscillator's branch switches and series coefficients, as its numpy code uses them
_U_SWITCH2 = _osc._U_SWITCH**2
_SERIES = np.ascontiguousarray(_osc._SERIES_T, dtype=np.float64)


def raw_jacobian(model: CurveModel):
    """``model``'s Jacobian without an ``np.errstate`` of its own: the compiled oscillator's
    where the kernel was built, else the law's ``raw_jacobian`` (or ``jacobian``)."""
    own = model.raw_jacobian or model.jacobian
    if own is _osc.raw_oscillator_jacobian and compiled_filter() is not None:
        return oscillator_jacobian
    return own


def oscillator_jacobian(t, plateau, initial, timescale, inertia):
    """:func:`grpofit.laws.oscillator.raw_oscillator_jacobian` by the compiled kernel (scalar
    parameters; anything else goes to the numpy code): ``(n, 4)``."""
    kernel = compiled_filter()
    if kernel is None or np.ndim(timescale) or np.ndim(inertia) or np.ndim(plateau) or np.ndim(initial):
        return _osc.raw_oscillator_jacobian(t, plateau, initial, timescale, inertia)
    t = np.ascontiguousarray(t, dtype=np.float64).ravel()
    jac = np.empty((4, t.size))
    kernel.oscillator_jacobian(
        t.size,
        t,
        float(plateau),
        float(initial),
        float(timescale),
        float(inertia),
        _U_SWITCH2,
        _osc._Z_SERIES,
        _SERIES,
        jac,
    )
    return jac.T


def relaxation_derivatives(t, timescale: float, inertia: float):
    """``(g, dg/dtimescale, dg/dinertia)`` of the oscillator's unit response at ``t``
    (:func:`grpofit.laws.models.relaxation_derivatives`, scalar times): the compiled kernel's
    where it was built (the Jacobian of the curve from 0 to 1), else the law's."""
    if compiled_filter() is None:
        from grpofit.laws.models import relaxation_derivatives as numpy_derivatives

        return numpy_derivatives(t, timescale, inertia)
    jac = oscillator_jacobian(t, 0.0, 1.0, timescale, inertia)
    return jac[:, 1], jac[:, 2], jac[:, 3]


def oscillator_residuals(t, sw, y, x: list, c_ts: float, c_ti: float):
    """The oscillator's weighted residuals ``sw (curve - y)`` and its weighted Jacobian ``(n,
    4)`` with the timescale's and inertia's columns multiplied by ``c_ts`` and ``c_ti`` (the
    solve's chain rule to its internal coordinates), by the compiled kernel in one pass
    (``None`` where it was not built): :meth:`grpofit.fitting.solve._Problem.evaluate`."""
    kernel = compiled_filter()
    if kernel is None:
        return None
    n = t.size
    r, jac = np.empty(n), np.empty((4, n))
    kernel.oscillator_residuals(
        n, t, sw, y, x[0], x[1], x[2], x[3], _U_SWITCH2, _osc._Z_SERIES, _SERIES, c_ts, c_ti, r, jac
    )
    return r, jac.T
