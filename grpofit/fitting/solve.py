"""The final least-squares fit of each model: Levenberg-Marquardt in numpy, MINPACK as fallback.

Each model is fitted by :func:`grpofit.fitting.lm.levenberg_marquardt` (MINPACK ``lmder``'s
scaling and stopping rules, no scipy import) with the analytic Jacobian, on the log-binned
data weighted by the bin counts, from the starting point the vectorised grid of
:mod:`.profile` found (it usually converges in a few iterations). Only when it reports
failure (evaluation cap, non-finite start) is the same problem handed to MINPACK itself
(``scipy.optimize.leastsq``, imported then). ``Solution.method`` says which: ``"lm"`` or
``"leastsq"`` (``+fixed`` when parameters were held at bounds), ``"lm+bounded"`` (lmfit's
bound map) or ``"lmfit"``.

Bounds, the cheap way: the solver works in internal coordinates ``(plateau, initial,
log timescale, sqrt inertia)``, so the timescale stays positive and the inertia reaches its
bound 0 smoothly (``inertia = u^2``, the way lmfit's bound transform reaches a bound: the
gradient vanishes there). A solution that ends outside the model's bounds (a plateau
extrapolated beyond :data:`grpofit.laws.models.LEVEL_MARGIN`, a timescale beyond the run) is
re-solved with the offending parameters fixed at their bounds; if that does not give a
bounded optimum, the problem lmfit's bounded ``Minimizer.leastsq`` solves (lmfit's bound map on
every parameter, :func:`solve_bounded`) is solved by the same LM, and lmfit itself is imported
only if that fails. The result is the same optimum lmfit reaches (``tests/test_fitting.py``
checks it against :func:`grpofit.laws.models.lmfit_model` and :func:`solve_lmfit`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from grpofit.fitting.jacobians import oscillator_jacobian, oscillator_residuals, raw_jacobian
from grpofit.fitting.lm import levenberg_marquardt
from grpofit.fitting.profile import Binned
from grpofit.laws.models import CurveModel

__all__ = ["Solution", "solve", "solve_many", "better", "binned_ssr", "solve_bounded", "solve_lmfit", "TOL"]

_MAX_NFEV = 300
#: relative tolerance of the solver on the SSR and the parameters (the binned data are exact
#: only to ~3e-4 of the gain, tighter is wasted work)
TOL = 1e-6
#: relative slack when checking a solution against its bounds (round-off at a bound)
_BOUND_SLACK = 1e-9
_LEVELS = ("plateau", "initial")
_LOG_TIMES = ("timescale",)
#: MINPACK ``lmder`` exit codes (``info``)
_MESSAGES = {
    1: "converged: relative reduction of the sum of squares below ftol",
    2: "converged: relative change of the parameters below xtol",
    3: "converged: sum of squares and parameters within ftol and xtol",
    4: "converged: residuals orthogonal to the Jacobian columns",
    5: f"did not converge in {_MAX_NFEV} evaluations",
    6: "ftol too small: no further reduction of the sum of squares possible",
    7: "xtol too small: no further improvement of the parameters possible",
}
_SQRT_TIMES = ("inertia",)


@dataclass
class Solution:
    model: CurveModel
    x: np.ndarray
    ssr: float  # weighted (binned) sum of squares at x
    ok: bool
    message: str
    method: str = "lm"  #: "lm" (numpy LM), "leastsq" (MINPACK fallback), "+fixed", "lm+bounded", "lmfit"


def binned_ssr(b: Binned, model: CurveModel, x) -> float:
    with np.errstate(all="ignore"):
        r = model.func(b.t, *x) - b.y
    return float(np.sum(b.w * r * r))


def _failed(model: CurveModel, message: str) -> Solution:
    return Solution(model, np.full(len(model.param_names), np.nan), math.inf, False, message)


def _start_vector(model: CurveModel, start: dict, bounds: dict) -> np.ndarray:
    x = np.empty(len(model.param_names))
    for i, name in enumerate(model.param_names):
        lo, hi = bounds[name]
        v = float(start[name])
        x[i] = min(max(v, lo), hi) if math.isfinite(v) else 0.5 * (lo + hi)
    return x


class _Problem:
    """Residuals and Jacobian of one model in internal coordinates, some parameters fixed."""

    def __init__(self, model: CurveModel, b: Binned, x_full: np.ndarray, free: np.ndarray):
        self.model, self.b = model, b
        # the solver runs inside np.errstate(all="ignore"): the law's Jacobian without its own
        self.raw_jacobian = raw_jacobian(model)
        self.sw = np.sqrt(b.w)
        self.x_full = x_full.copy()
        self.free = free
        self.all_free = bool(free.all())
        names = model.param_names
        self.log_idx = [i for i, n in enumerate(names) if n in _LOG_TIMES]
        self.sqrt_idx = [i for i, n in enumerate(names) if n in _SQRT_TIMES]
        rows = np.cumsum(free) - 1  # parameter index -> row among the free ones
        self.log_rows = [(i, int(rows[i])) for i in self.log_idx if free[i]]
        self.sqrt_rows = [int(rows[i]) for i in self.sqrt_idx if free[i]]
        self.sqrt_free = [i for i in self.sqrt_idx if free[i]]
        # the compiled oscillator's residuals and chained Jacobian at once (its coordinates
        # are (plateau, initial, log timescale, sqrt inertia), every one free)
        self.compiled = (
            self.raw_jacobian is oscillator_jacobian
            and self.all_free
            and self.log_rows == [(2, 2)]
            and self.sqrt_rows == [3]
            and b.t.flags.c_contiguous
            and b.y.flags.c_contiguous
            and b.t.dtype == np.float64
            and b.y.dtype == np.float64
        )

    def to_internal(self, x: np.ndarray) -> np.ndarray:
        q = x.copy()
        for i in self.log_idx:
            q[i] = math.log(x[i])
        for i in self.sqrt_idx:
            # a start at exactly 0 would stay there (zero gradient): start just inside
            q[i] = math.sqrt(max(x[i], 1e-6 * x[self.log_idx[0]] if self.log_idx else 1e-12))
        return q[self.free]

    def to_external(self, q: np.ndarray) -> np.ndarray:
        return np.array(self._external(q))

    def _external(self, q) -> list[float]:
        """The law's parameters for internal ``q``, as Python floats (scalar maths is cheaper
        on them than on numpy scalars)."""
        if self.all_free:
            x = q.tolist()
        else:
            x = self.x_full.tolist()
            for i, v in zip(np.flatnonzero(self.free).tolist(), q.tolist()):
                x[i] = v
        for i, _ in self.log_rows:
            x[i] = math.exp(min(x[i], 700.0))
        for i in self.sqrt_free:
            x[i] = x[i] * x[i]
        return x

    _last_r = _last_j = (None, None)

    def residual(self, q):
        # scipy's leastsq evaluates the start once more to check shapes: serve it from here
        if self._last_r[0] is not None and np.array_equal(q, self._last_r[0]):
            return self._last_r[1]
        x = self.to_external(q)
        r = self.sw * (self.model.func(self.b.t, *x) - self.b.y)
        self._last_r = (np.array(q, copy=True), r)
        return r

    def jacobian(self, q):
        """``d residual / d q`` as rows = parameters (``col_deriv=1``: no transpose)."""
        if self._last_j[0] is not None and np.array_equal(q, self._last_j[0]):
            return self._last_j[1].copy()
        out = self._jacobian(q)
        self._last_j = (np.array(q, copy=True), out)
        return out.copy()

    def evaluate(self, q):
        """``(residuals, d residual / d q)`` at once, the Jacobian ``(n, k)`` (rows = residuals),
        for :mod:`.lm`: one evaluation of the law's Jacobian gives both (its ``initial`` column
        is the relaxation ``g``, the curve is ``plateau + (initial - plateau) g``)."""
        x = self._external(q)
        if self.compiled:  # the oscillator, every parameter free: one compiled pass
            return oscillator_residuals(self.b.t, self.sw, self.b.y, x, x[2], 2.0 * float(q[3]))
        jac = self.raw_jacobian(self.b.t, *x)
        r = self.sw * (x[0] + (x[1] - x[0]) * jac[:, 1] - self.b.y)
        return r, self._chain(jac.T, x, q).T

    def _jacobian(self, q):
        x = self.to_external(q)
        return self._chain(self.raw_jacobian(self.b.t, *x).T, x, q)

    def _chain(self, jac, x, q):
        """The law's Jacobian ``(k, n)`` to internal coordinates, weighted, free rows only."""
        out = (jac if self.all_free else jac[self.free]) * self.sw
        # chain rule: d/d log T = T d/dT, d/du = 2u d/dTi
        for i, row in self.log_rows:
            out[row] *= x[i]
        for row in self.sqrt_rows:
            out[row] *= 2.0 * q[row]
        return out


def _violations(model: CurveModel, x: np.ndarray, bounds: dict) -> dict[int, float]:
    """``{index: bound}`` of the parameters outside their bounds (slack for round-off)."""
    out = {}
    for i, name in enumerate(model.param_names):
        lo, hi = bounds[name]
        tol = _BOUND_SLACK * max(abs(lo), abs(hi), 1.0)
        if not math.isfinite(x[i]):
            continue
        if x[i] < lo - tol:
            out[i] = lo
        elif x[i] > hi + tol:
            out[i] = hi
    return out


def _minpack(problem: _Problem, x0: np.ndarray):
    """The fallback: MINPACK ``lmder`` via ``scipy.optimize.leastsq`` (imported only here)."""
    from scipy.optimize import leastsq

    q0 = problem.to_internal(x0)
    # full_output=False: MINPACK's covariance is not wanted (grpofit computes HAC ones)
    with warnings.catch_warnings():  # ier 5 (maxfev) warns; it is reported in the message
        warnings.simplefilter("ignore", RuntimeWarning)
        q, ier = leastsq(
            problem.residual,
            q0,
            Dfun=problem.jacobian,
            col_deriv=1,
            full_output=False,
            ftol=TOL,
            xtol=TOL,
            gtol=0.0,
            maxfev=_MAX_NFEV,
        )
    x = problem.to_external(np.atleast_1d(q))
    return x, "MINPACK " + _MESSAGES.get(int(ier), f"lmder returned {ier}")


def _leastsq(problem: _Problem, x0: np.ndarray):
    """grpofit's numpy Levenberg-Marquardt (:mod:`.lm`, MINPACK's scaling and stopping rules);
    MINPACK itself only when it reports failure. Returns ``(x, message, used_minpack, ssr)``
    (``ssr`` is None after MINPACK: its caller computes it)."""
    q0 = problem.to_internal(x0)
    res = levenberg_marquardt(problem.evaluate, None, q0, ftol=TOL, xtol=TOL, gtol=0.0, max_nfev=_MAX_NFEV)
    if res.ok:
        return problem.to_external(res.x), res.message, False, res.ssr
    x, msg = _minpack(problem, x0)
    return x, msg, True, None


def _snap_to_zero(problem: _Problem, x: np.ndarray, ssr: float, bounds: dict):
    """``inertia = u^2`` approaches its bound 0 only asymptotically (and slowly: the Jacobian
    column of ``u`` vanishes with it, so the other parameters can stall short of their
    optimum): when the fit ends within ``1e-4`` timescales of 0, the others are re-solved
    with the inertia held at exactly 0 and that solution is taken when it fits no worse (the
    optimum on the bound, as lmfit's bound transform would put it)."""
    for i in problem.sqrt_idx:
        scale = x[problem.log_idx[0]] if problem.log_idx else 1.0
        if 0.0 < x[i] <= 1e-4 * scale:
            held = x.copy()
            held[i] = 0.0
            free = problem.free.copy()
            free[i] = False
            candidates = [held]
            if free.any():
                x2, _, _, _ = _leastsq(_Problem(problem.model, problem.b, held, free), held)
                if np.all(np.isfinite(x2)) and not _violations(problem.model, x2, bounds):
                    candidates.insert(0, x2)
            for cand in candidates:
                s0 = binned_ssr(problem.b, problem.model, cand)
                if s0 <= ssr:
                    x, ssr = cand, s0
                    break
    return x, ssr


def _kkt(problem: _Problem, x: np.ndarray, fixed: dict[int, float], bounds: dict) -> bool:
    """Is the solution with parameters held at their bounds a bounded optimum? (the SSR
    must not decrease by moving any of them back inside: its gradient points outwards)"""
    model, b = problem.model, problem.b
    r = model.func(b.t, *x) - b.y
    grad = model.jacobian(b.t, *x).T @ (b.w * r)  # half the SSR gradient
    ssr = float(b.w @ (r * r))
    for i, v in fixed.items():
        lo, hi = bounds[model.param_names[i]]
        inward = -grad[i] if v >= hi else grad[i]  # SSR change per unit step inside, negated
        if inward * (hi - lo) < -1e-6 * max(ssr, 1e-300):
            return False
    return True


def solve(model: CurveModel, b: Binned, start: dict, bounds: dict) -> Solution:
    """One model fitted by Levenberg-Marquardt (:mod:`.lm`; MINPACK on failure) with its analytic
    Jacobian on the binned data weighted by the counts; bounds as in the module docstring.

    Never raises: a failure comes back as ``Solution(ok=False, message=...)``."""
    x0 = _start_vector(model, start, bounds)
    k = x0.size
    try:
        with np.errstate(all="ignore"):
            problem = _Problem(model, b, x0, np.ones(k, dtype=bool))
            x, msg, minpack, ssr = _leastsq(problem, x0)
            method = "leastsq" if minpack else "lm"
            fixed: dict[int, float] = {}
            for _ in range(k + 1):
                bad = _violations(model, x, bounds)
                if not bad:
                    break
                # levels first: a plateau extrapolated past its bound drags the timescale out
                # with it, and comes back inside once the plateau is held
                levels = {i: v for i, v in bad.items() if model.param_names[i] in _LEVELS}
                fixed.update(levels or bad)
                if len(fixed) >= k:
                    return solve_bounded(model, b, start, bounds)
                held = x0.copy()
                free = np.ones(k, dtype=bool)
                for i, v in fixed.items():
                    held[i], free[i] = v, False
                problem = _Problem(model, b, held, free)
                x, msg, minpack, ssr = _leastsq(problem, held)
                method = ("leastsq" if minpack else "lm") + "+fixed"
            else:
                return solve_bounded(model, b, start, bounds)
            if fixed and not _kkt(problem, x, fixed, bounds):
                return solve_bounded(model, b, start, bounds)
            if ssr is None:
                ssr = binned_ssr(b, model, x)
            x, ssr = _snap_to_zero(problem, x, ssr, bounds)
    except Exception as exc:  # scipy failure: report, never raise
        return _failed(model, f"fit failed: {exc}")
    ok = bool(np.all(np.isfinite(x)) and math.isfinite(ssr))
    return Solution(model, x, ssr if ok else math.inf, ok, msg, method)


def solve_many(models: tuple[CurveModel, ...], b: Binned, starts: list[dict], bounds: dict) -> list[Solution]:
    """:func:`solve` for each model with its start."""
    return [solve(m, b, s, bounds) for m, s in zip(models, starts)]


def _bound_maps(lo: float, hi: float):
    """lmfit's (Minuit's) map of an unbounded internal value to ``[lo, hi]``: ``(to internal,
    to external, d external / d internal)`` for one parameter."""
    if math.isinf(lo) and math.isinf(hi):
        return (lambda v: v), (lambda q: q), (lambda q: 1.0)
    if math.isinf(hi):
        return (
            lambda v: math.sqrt((v - lo + 1.0) ** 2 - 1.0),
            lambda q: lo - 1.0 + math.sqrt(q * q + 1.0),
            lambda q: q / math.sqrt(q * q + 1.0),
        )
    if math.isinf(lo):
        return (
            lambda v: math.sqrt((hi - v + 1.0) ** 2 - 1.0),
            lambda q: hi + 1.0 - math.sqrt(q * q + 1.0),
            lambda q: -q / math.sqrt(q * q + 1.0),
        )
    half = (hi - lo) / 2.0
    return (
        lambda v: math.asin(min(max(2.0 * (v - lo) / (hi - lo) - 1.0, -1.0), 1.0)),
        lambda q: lo + (math.sin(q) + 1.0) * half,
        lambda q: math.cos(q) * half,
    )


def solve_bounded(model: CurveModel, b: Binned, start: dict, bounds: dict) -> Solution:
    """The fallback for a fit whose optimum the held-at-a-bound re-solve does not reach: the
    problem lmfit's ``Minimizer.leastsq`` solves (every parameter through lmfit's bound map,
    analytic Jacobian, the same start), solved by :mod:`.lm`. lmfit itself
    (:func:`solve_lmfit`) only when that fails: importing it takes scipy.stats and
    scipy.optimize with it, 1.2 s and 80 MB, for 3 of the 27 shared real-log fits."""
    names = model.param_names
    maps = [_bound_maps(*bounds[n]) for n in names]
    x0 = _start_vector(model, start, bounds)
    sw = np.sqrt(b.w)
    try:
        q0 = np.array([m[0](float(v)) for m, v in zip(maps, x0)])
    except ValueError:  # a start the map cannot take (outside a one-sided bound)
        return solve_lmfit(model, b, start, bounds)

    def evaluate(q):
        ql = q.tolist()
        x = [m[1](v) for m, v in zip(maps, ql)]
        r = sw * (model.func(b.t, *x) - b.y)
        scale = np.array([m[2](v) for m, v in zip(maps, ql)])
        return r, model.jacobian(b.t, *x) * sw[:, None] * scale[None, :]

    with np.errstate(all="ignore"):
        res = levenberg_marquardt(evaluate, None, q0, ftol=TOL, xtol=TOL, gtol=0.0, max_nfev=_MAX_NFEV)
        if not res.ok:
            return solve_lmfit(model, b, start, bounds)
        x = np.array([m[1](v) for m, v in zip(maps, res.x.tolist())])
        ssr = binned_ssr(b, model, x)
    if not (np.all(np.isfinite(x)) and math.isfinite(ssr)):
        return solve_lmfit(model, b, start, bounds)
    return Solution(model, x, ssr, True, res.message, "lm+bounded")


def solve_lmfit(model: CurveModel, b: Binned, start: dict, bounds: dict) -> Solution:
    """The fallback: lmfit's ``Minimizer.leastsq`` with ``Parameters`` carrying the bounds
    (lmfit maps them to unbounded internal coordinates), analytic Jacobian, binned data."""
    try:
        import lmfit
    except ImportError as exc:  # pragma: no cover - lmfit is a dependency
        return _failed(model, f"fit failed: {exc}")
    names = model.param_names
    x0 = _start_vector(model, start, bounds)
    params = lmfit.Parameters()
    for name, v in zip(names, x0):
        lo, hi = bounds[name]
        params.add(name, value=float(v), min=lo, max=hi)
    sw = np.sqrt(b.w)

    def residual(p):
        return sw * (model.func(b.t, *[p[n].value for n in names]) - b.y)

    def jacobian(p):
        return model.jacobian(b.t, *[p[n].value for n in names]) * sw[:, None]

    try:
        with np.errstate(all="ignore"):
            res = lmfit.Minimizer(residual, params, calc_covar=False).leastsq(
                Dfun=jacobian, max_nfev=_MAX_NFEV, ftol=TOL, xtol=TOL
            )
            x = np.array([res.params[n].value for n in names], dtype=float)
            ssr = binned_ssr(b, model, x)
    except Exception as exc:  # lmfit/scipy failure: report, never raise
        return _failed(model, f"fit failed: {exc}")
    ok = bool(np.all(np.isfinite(x)) and math.isfinite(ssr))
    return Solution(model, x, ssr if ok else math.inf, ok, str(res.message or ""), "lmfit")


def better(a: Solution | None, b: Solution | None) -> Solution | None:
    """The solution with the lower SSR (a failed one only when both failed)."""
    if a is None or not a.ok:
        return b if (b is not None and b.ok) else (a or b)
    if b is None or not b.ok:
        return a
    return b if b.ssr < a.ssr else a
