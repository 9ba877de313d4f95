"""A compact Levenberg-Marquardt solver in numpy for small least-squares problems.

``levenberg_marquardt(fun, jac, x0)`` minimises ``S(x) = ||r(x)||^2`` for a residual vector
``r`` (a few hundred entries) of a few parameters (grpofit's laws have 3 or 4) with the
analytic Jacobian ``J = dr/dx``. It is the classic Marquardt iteration with MINPACK's
(``lmder``) scaling and stopping rules, so that it reaches the optimum MINPACK reaches without
importing scipy (``import scipy.optimize`` costs more than a whole fit):

- **Step**: ``p`` solves ``min ||J p + r||^2 + lam ||D p||^2``, i.e. the normal equations
  ``(J'J + lam D^2) p = -J'r``, computed stably (no ``J'J`` formed) as the least-squares
  solution of the augmented system ``[J; sqrt(lam) D] p = [-r; 0]``, from one SVD of
  ``J D^-1`` per Jacobian (each trial ``lam`` then costs a few ``k``-vector operations).
- **Scaling** (Marquardt, MINPACK ``mode=1``): ``D = diag`` of the column norms of ``J``
  (``D^2 = diag(J'J)``), never decreasing over the iterations (1 for an all-zero column).
- **Damping** (trust-region style, Nielsen 1999): the gain ratio
  ``rho = actual / predicted reduction`` with ``predicted = ||J p||^2 + 2 lam ||D p||^2``; a
  step is taken when ``rho > 1e-4`` and then ``lam *= max(1/3, 1 - (2 rho - 1)^3)``,
  otherwise ``lam *= nu, nu *= 2`` (``nu`` reset to 2 after a success). Start
  ``lam = 1e-3`` (relative to ``D^2``: a near Gauss-Newton first step from a good start).
- **Stopping** (MINPACK's tests and ``info`` codes): 1 the relative actual and predicted
  reductions of ``S`` are both ``<= ftol`` (and ``rho <= 2``); 2 the scaled step
  ``||D p|| <= xtol ||D x||``; 3 both; 4 the largest cosine between ``r`` and a column of
  ``J`` is ``<= gtol``; 5 ``max_nfev`` residual evaluations without convergence (failure);
  6/7 ``ftol``/``xtol`` at machine precision (converged as far as doubles allow). A
  non-finite residual at a trial point rejects that step; at the start it is a failure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["LMResult", "levenberg_marquardt", "MESSAGES"]

_EPS = float(np.finfo(float).eps)
MESSAGES = {
    0: "failed: non-finite residuals or Jacobian at the start",
    1: "converged: relative reduction of the sum of squares below ftol",
    2: "converged: relative change of the parameters below xtol",
    3: "converged: sum of squares and parameters within ftol and xtol",
    4: "converged: residuals orthogonal to the Jacobian columns",
    5: "did not converge within the evaluation cap",
    6: "converged: no further reduction of the sum of squares possible (machine precision)",
    7: "converged: no further change of the parameters possible (machine precision)",
}


@dataclass
class LMResult:
    x: np.ndarray
    ssr: float  #: ``||r(x)||^2``
    info: int  #: MINPACK-style code (see :data:`MESSAGES`)
    nfev: int
    njev: int

    @property
    def ok(self) -> bool:
        """Converged (codes 1-4, 6, 7) to finite parameters and sum of squares."""
        return self.info in (1, 2, 3, 4, 6, 7) and bool(np.all(np.isfinite(self.x)) and math.isfinite(self.ssr))

    @property
    def message(self) -> str:
        return MESSAGES.get(self.info, f"info {self.info}")


def levenberg_marquardt(
    fun: Callable,
    jac: Callable[[np.ndarray], np.ndarray] | None,
    x0,
    *,
    ftol: float = 1.49012e-8,
    xtol: float = 1.49012e-8,
    gtol: float = 0.0,
    max_nfev: int | None = None,
    lam0: float = 1e-3,
) -> LMResult:
    """Minimise ``||fun(x)||^2`` from ``x0``; ``jac(x)`` is ``d fun / dx`` as an ``(n, k)`` array.

    With ``jac=None``, ``fun(x)`` returns ``(r, J)`` at once: the Jacobian of a trial point is
    then ready when the step is taken (cheaper when both share most of their work, as the
    laws' curves and Jacobians do). Defaults as MINPACK's ``lmder`` (``ftol = xtol =
    1.49012e-8``, ``gtol = 0``, ``max_nfev = 100 (k + 1)``). Never raises on non-finite
    numbers: see :class:`LMResult`."""
    x = np.array(x0, dtype=float).ravel()
    k = x.size
    max_nfev = 100 * (k + 1) if max_nfev is None else int(max_nfev)
    evaluate = fun if jac is None else (lambda q: (fun(q), None))
    with np.errstate(all="ignore"):
        r, J_next = evaluate(x)
        r = np.asarray(r, dtype=float).ravel()
        nfev, njev = 1, 0
        ssr = float(r @ r)
        if not math.isfinite(ssr):
            return LMResult(x, math.inf, 0, nfev, njev)
        d = np.zeros(k)
        lam, nu = lam0, 2.0
        while True:
            if ssr == 0.0:
                return LMResult(x, ssr, 4, nfev, njev)
            J = np.asarray(jac(x) if J_next is None else J_next, dtype=float).reshape(r.size, k)
            njev += 1
            # (direct ufunc reductions: the ndarray methods add a Python call each)
            sq = np.add.reduce(J * J, axis=0)
            if not math.isfinite(np.add.reduce(sq)):  # a non-finite (or overflowing) Jacobian
                return LMResult(x, ssr, 0 if njev == 1 else 5, nfev, njev)
            norms = np.sqrt(sq)
            np.maximum(d, norms, out=d)
            if np.minimum.reduce(d) == 0.0:
                d[d == 0.0] = 1.0
            if _gradient_converged(r @ J, norms, ssr, gtol):
                return LMResult(x, ssr, 4, nfev, njev)
            u, sv, vt = np.linalg.svd(J / d, full_matrices=False)
            utr = r @ u
            sv2 = sv * sv
            dx = d * x
            xnorm = math.sqrt(float(dx @ dx))
            while True:  # inner loop: increase lam until a step reduces S
                # the step p: z = D p is the least-squares solution of [J D^-1; sqrt(lam) I] z
                # = [-r; 0], from the SVD J D^-1 = U S V' as z = -V diag(s / (s^2 + lam)) U'r
                z = -((sv / (sv2 + lam) * utr) @ vt)
                pnorm = math.sqrt(float(z @ z))
                x_new = x + z / d
                r_new, J_new = evaluate(x_new)
                if jac is not None:
                    r_new = np.asarray(r_new, dtype=float).ravel()
                nfev += 1
                ssr_new = float(r_new @ r_new)
                jp = sv * (vt @ z)  # ||J p|| = ||S V' z||
                prered = (float(jp @ jp) + 2.0 * lam * pnorm * pnorm) / ssr
                actred = 1.0 - ssr_new / ssr if math.isfinite(ssr_new) else -math.inf
                rho = actred / prered if prered > 0.0 else 0.0
                if rho > 1e-4:
                    lam *= max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3)
                    nu = 2.0
                    x, r, ssr, J_next = x_new, r_new, ssr_new, J_new
                    dx = d * x
                    xnorm = math.sqrt(float(dx @ dx))
                    accepted = True
                else:
                    lam *= nu
                    nu *= 2.0
                    accepted = False
                info = _stop_code(actred, prered, rho, pnorm, xnorm, lam, ftol, xtol, nfev >= max_nfev)
                if info:
                    return LMResult(x, ssr, info, nfev, njev)
                if accepted:
                    break


def _gradient_converged(g: np.ndarray, norms: np.ndarray, ssr: float, gtol: float) -> bool:
    """The gradient test: with ``gtol > 0``, whether the cosine between ``r`` and every column of
    ``J`` is at most ``gtol`` (``g = r @ J``); with ``gtol = 0``, whether the gradient is exactly 0."""
    if gtol > 0.0:
        cos = np.abs(g) / (np.where(norms > 0.0, norms, np.inf) * math.sqrt(ssr))
        return float(np.max(cos)) <= gtol
    return g @ g == 0.0


def _stop_code(
    actred: float,
    prered: float,
    rho: float,
    pnorm: float,
    xnorm: float,
    lam: float,
    ftol: float,
    xtol: float,
    out_of_evaluations: bool,
) -> int:
    """MINPACK's ``info`` after a trial step: 1 (relative reduction within ``ftol``), 2 (step within
    ``xtol``), 3 (both), 5 (``max_nfev`` reached), 6/7 (``ftol``/``xtol`` too small for machine
    precision, or the damping overflowed); 0 to go on."""
    info = 0
    if abs(actred) <= ftol and prered <= ftol and 0.5 * rho <= 1.0:
        info = 1
    if pnorm <= xtol * xnorm:
        info = 3 if info == 1 else 2
    if info:
        return info
    if out_of_evaluations:
        return 5
    if abs(actred) <= _EPS and prered <= _EPS and 0.5 * rho <= 1.0:
        return 6
    if pnorm <= _EPS * xnorm or not math.isfinite(lam) or lam > 1e300:
        return 7
    return 0
