"""scipy's L-BFGS-B for a bounded problem without a gradient, driven without ``scipy.optimize``.

``scipy.optimize.minimize(f, x0, method="L-BFGS-B", bounds=..., options=...)`` is a loop around
one compiled routine, ``setulb``: it asks for the objective and its gradient at a point, or
reports a new iterate, or stops. Importing ``scipy.optimize`` for it costs about a third of a
second (:mod:`grpofit.runtime.compiled`). :func:`minimize` loads the routine alone and repeats what
scipy does around it, call for call:

- the start clipped into the bounds; the objective and its gradient evaluated there first;
- the gradient by forward differences of absolute step ``eps`` (``approx_derivative``'s
  ``2-point`` scheme: a step that would leave the bounds is reversed when it fits on the other
  side, else shortened to the distance to the farther bound; a step lost to round-off is
  replaced by ``sqrt(machine eps) max(1, |x|)``);
- a point asked for again (the same coordinates) is not re-evaluated;
- the same stopping rules (``maxiter`` iterations, ``maxfun`` evaluations, ``ftol`` as
  ``factr``, ``gtol``) and the same workspace sizes.

So the iterates, and the point and value returned, are scipy's to the last bit
(``tests/test_lbfgsb.py`` compares them). Bounds that fix a variable (scipy removes it from
the problem), a scipy version it was not written against (:data:`SCIPY_VERSIONS`) or a routine
that cannot be loaded: scipy's ``minimize`` itself.
"""

from __future__ import annotations

import numpy as np

__all__ = ["minimize"]

#: scipy's defaults for L-BFGS-B
MAXCOR = 10
GTOL = 1e-5
MAXLS = 20
MAXFUN = 15000


def minimize(f, x0, lo, hi, *, maxiter: int, eps: float, ftol: float) -> tuple[np.ndarray, float]:
    """``(x, f(x))`` where L-BFGS-B stops, as ``scipy.optimize.minimize(f, x0,
    method="L-BFGS-B", bounds=list(zip(lo, hi)), options={"maxiter", "eps", "ftol"})`` gives
    them (``res.x``, ``res.fun``)."""
    lo = np.array([float(v) for v in lo])
    hi = np.array([float(v) for v in hi])
    x0 = np.atleast_1d(np.asarray(x0)).astype(float).ravel()
    setulb = _setulb()
    if setulb is None or x0.shape != lo.shape or not np.all(lo < hi):
        return _scipy(f, x0, lo, hi, maxiter=maxiter, eps=eps, ftol=ftol)
    return _drive(setulb, f, np.clip(x0, lo, hi), lo, hi, maxiter, eps, ftol)


#: the scipy versions whose ``_minimize_lbfgsb`` loop, ``ScalarFunction`` and ``approx_derivative``
#: this module repeats (``setulb``'s arguments changed in 1.15); others: scipy's ``minimize``
SCIPY_VERSIONS = ((1, 17),)


def _setulb():
    from grpofit.runtime.compiled import scipy_extension, scipy_version

    if scipy_version() not in SCIPY_VERSIONS:
        return None
    try:
        return scipy_extension("scipy.optimize._lbfgsb").setulb
    except (ImportError, AttributeError):
        return None


def _scipy(f, x0, lo, hi, *, maxiter, eps, ftol):
    from scipy.optimize import minimize as scipy_minimize

    res = scipy_minimize(f, x0, method="L-BFGS-B", bounds=list(zip(lo, hi)),
                         options={"maxiter": maxiter, "eps": eps, "ftol": ftol})
    return res.x, res.fun


class _Objective:
    """``f`` and its forward-difference gradient, kept for the last point (scipy's
    ``ScalarFunction`` with ``approx_derivative(method="2-point", abs_step=eps)``)."""

    def __init__(self, f, x0: np.ndarray, lo: np.ndarray, hi: np.ndarray, eps: float):
        self.f, self.lo, self.hi, self.eps = f, lo, hi, eps
        self.rstep = float(np.finfo(np.float64).eps ** 0.5)
        self.lo_, self.hi_ = lo.tolist(), hi.tolist()
        self.unbounded = bool(np.all((lo == -np.inf) & (hi == np.inf)))
        self.nfev = 0
        self._at(x0)

    def value(self, x: np.ndarray) -> float:
        self.nfev += 1
        fx = self.f(np.copy(x))
        if not np.isscalar(fx):
            fx = np.asarray(fx).item()
        return fx

    def _at(self, x: np.ndarray) -> None:
        self.x = np.array(x, dtype=np.float64)
        self.fx = self.value(self.x)
        self.g = self._gradient(self.x, self.fx)

    def _gradient(self, x: np.ndarray, fx: float) -> np.ndarray:
        """Forward differences, as ``approx_derivative`` takes them; its elementwise arithmetic
        on the few coordinates is done on Python floats (the same IEEE operations)."""
        eps, rstep = self.eps, self.rstep
        unbounded = self.unbounded
        values, dx = [], []
        for i, xi in enumerate(x.tolist()):
            h = eps if (xi + eps) - xi != 0 else rstep * (1.0 if xi >= 0 else -1.0) * max(1.0, abs(xi))
            if not unbounded:  # _adjust_scheme_to_bounds, one-sided
                below, above = xi - self.lo_[i], self.hi_[i] - xi
                out = xi + h
                fitting = abs(h) <= max(below, above)
                if (out < self.lo_[i] or out > self.hi_[i]) and fitting:
                    h = h * -1
                elif not fitting:
                    h = above if above >= below else -below
            moved = np.copy(x)
            moved[i] = xi + h
            values.append(self.value(moved))
            dx.append((xi + h) - xi)
        with np.errstate(all="ignore"):
            return (np.array(values, dtype=np.float64) - np.float64(fx)) / np.array(dx, dtype=np.float64)

    def value_and_gradient(self, x: np.ndarray):
        if not np.array_equal(x, self.x):
            self._at(x)
        return self.fx, self.g


def _drive(setulb, f, x0: np.ndarray, lo: np.ndarray, hi: np.ndarray, maxiter: int, eps: float, ftol: float):
    n = x0.size
    m = MAXCOR
    objective = _Objective(f, x0, lo, hi, eps)
    factr = ftol / np.finfo(float).eps
    nbd = np.full(n, 2, dtype=np.int32)  # both bounds finite (lo < hi checked)
    x = np.array(x0, dtype=np.float64)
    fx = np.array(0.0, dtype=np.float64)
    g = np.zeros((n,), dtype=np.float64)
    wa = np.zeros(2 * m * n + 5 * n + 11 * m * m + 8 * m, np.float64)
    iwa = np.zeros(3 * n, dtype=np.int32)
    task = np.zeros(2, dtype=np.int32)
    ln_task = np.zeros(2, dtype=np.int32)
    lsave = np.zeros(4, dtype=np.int32)
    isave = np.zeros(44, dtype=np.int32)
    dsave = np.zeros(29, dtype=np.float64)
    iterations = 0
    finite_lo, finite_hi = np.isfinite(lo), np.isfinite(hi)
    if not (np.all(finite_lo) and np.all(finite_hi)):
        nbd = np.where(finite_lo, np.where(finite_hi, 2, 1), np.where(finite_hi, 3, 0)).astype(np.int32)
    low = np.where(finite_lo, lo, 0.0)
    upp = np.where(finite_hi, hi, 0.0)
    while True:
        g = g.astype(np.float64)
        setulb(m, x, low, upp, nbd, fx, g, factr, GTOL, wa, iwa, task, lsave, isave, dsave, MAXLS, ln_task)
        if task[0] == 3:  # the objective and its gradient at x
            fx, g = objective.value_and_gradient(x)
        elif task[0] == 1:  # a new iterate
            iterations += 1
            if iterations >= maxiter:
                task[0], task[1] = 5, 504
            elif objective.nfev > MAXFUN:
                task[0], task[1] = 5, 502
        else:
            break
    return x, fx
