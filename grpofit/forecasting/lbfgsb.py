"""Bounded minimisation without a gradient: scipy's L-BFGS-B, imported when first needed.

``scipy.optimize`` is imported here, inside :func:`minimize`, not when the package loads:
``grpofit --help`` and the commands that never maximise a likelihood do not pay for it (about
0.3 s). The gradient is scipy's forward differences of absolute step ``eps``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["minimize"]


def minimize(f, x0, lo, hi, *, maxiter: int, eps: float, ftol: float) -> tuple[np.ndarray, float]:
    """``(x, f(x))`` where ``scipy.optimize.minimize(f, x0, method="L-BFGS-B", bounds=...,
    options={"maxiter", "eps", "ftol"})`` stops (``res.x``, ``res.fun``); the start is clipped
    into the bounds first."""
    from scipy.optimize import minimize as scipy_minimize

    lo = np.asarray(lo, dtype=float)
    hi = np.asarray(hi, dtype=float)
    x0 = np.clip(np.atleast_1d(np.asarray(x0, dtype=float)).ravel(), lo, hi)
    res = scipy_minimize(
        f,
        x0,
        method="L-BFGS-B",
        bounds=list(zip(lo.tolist(), hi.tolist())),
        options={"maxiter": maxiter, "eps": eps, "ftol": ftol},
    )
    return res.x, float(res.fun)
