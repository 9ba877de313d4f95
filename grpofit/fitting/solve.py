"""The final least-squares fit of each model: one lmfit ``Minimizer.leastsq`` call per series.

Both models are fitted in the same call (residuals stacked, Jacobian block-diagonal, so each
block is its own least squares) on the log-binned data weighted by the bin counts, with the
analytic Jacobians, lmfit ``Parameters`` carrying the bounds. The exploration that finds the
starting points (grid, profile) is done with vectorised numpy in :mod:`.profile`, so this call
usually converges in a few iterations.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

from grpofit.fitting.profile import Binned
from grpofit.models import CurveModel

__all__ = ["Solution", "solve", "solve_many", "better", "binned_ssr", "METHOD"]

#: lmfit method: "leastsq" (MINPACK Levenberg-Marquardt, lmfit maps the bounds) is several
#: times cheaper per iteration than "least_squares" (scipy TRF, native bounds); both use the
#: analytic Jacobian
METHOD = "leastsq"
_MAX_NFEV = 300
#: relative tolerance of the solver on the SSR and the parameters (the binned data are exact
#: only to ~3e-4 of the gain, tighter is wasted work)
TOL = 1e-6
_LOCAL = threading.local()


def _lmfit_classes():
    """lmfit's ``Minimizer`` without its textbook covariance (grpofit replaces it by HAC), and
    ``Parameters`` whose copy shares the parent's expression interpreter.

    lmfit copies the ``Parameters`` at the start of every fit, and a fresh copy builds a new
    asteval interpreter (about half of lmfit's fixed cost per call). grpofit's parameters
    have no constraint expressions, so the copy can share the interpreter safely."""
    classes = getattr(_LOCAL, "classes", None)
    if classes is None:
        import lmfit

        class _Minimizer(lmfit.Minimizer):
            def _calculate_uncertainties_correlations(self):  # noqa: D401 - lmfit hook
                self.result.errorbars = False

        class _Parameters(lmfit.Parameters):
            def __init__(self, usersyms=None, *, _share=None):
                if _share is None:
                    super().__init__(usersyms=usersyms)
                    return
                dict.__init__(self)
                self._asteval = _share._asteval
                self._ast_msgs = _share._ast_msgs

            def __deepcopy__(self, memo):
                new = _Parameters(_share=self)
                for key, par in self.items():
                    p = lmfit.Parameter(name=par.name, value=float(par.value), min=par.min,
                                        max=par.max, vary=par.vary)
                    p.init_value = par.init_value
                    dict.__setitem__(new, key, p)
                    p._expr_eval = new._asteval
                return new

        classes = _LOCAL.classes = (_Minimizer, _Parameters)
    return classes


def _parameters(models: tuple[CurveModel, ...], starts: list[dict], bounds: dict):
    """A (per-thread, reused) lmfit ``Parameters`` named ``<model>_<param>``, set to the
    starts within the bounds."""
    _, params_cls = _lmfit_classes()
    cache = getattr(_LOCAL, "params", None)
    if cache is None:
        cache = _LOCAL.params = {}
    key = tuple(m.name for m in models)
    params = cache.get(key)
    if params is None:
        params = params_cls()
        for model in models:
            for name in model.param_names:
                params.add(f"{model.name}_{name}", value=0.0)
        cache[key] = params
    for model, start in zip(models, starts):
        for name in model.param_names:
            lo, hi = bounds[name]
            par = params[f"{model.name}_{name}"]
            par.min, par.max = -np.inf, np.inf
            par.value = float(np.clip(start[name], lo, hi))
            par.min, par.max = lo, hi
    return params


@dataclass
class Solution:
    model: CurveModel
    x: np.ndarray
    ssr: float  # weighted (binned) sum of squares at x
    ok: bool
    message: str


def binned_ssr(b: Binned, model: CurveModel, x) -> float:
    with np.errstate(all="ignore"):
        r = model.func(b.t, *x) - b.y
    return float(np.sum(b.w * r * r))


def solve(model: CurveModel, b: Binned, start: dict, bounds: dict) -> Solution:
    """One model fitted alone (see :func:`solve_many`)."""
    return solve_many((model,), b, [start], bounds)[0]


def solve_many(models: tuple[CurveModel, ...], b: Binned, starts: list[dict],
               bounds: dict) -> list[Solution]:
    """Fit several models in one lmfit ``leastsq`` call (their residuals stacked, the
    Jacobian block-diagonal, so each block is that model's own least squares) on the
    log-binned data weighted by the bin counts, with the analytic Jacobians."""
    sw = np.sqrt(b.w)
    tb, yb = b.t, b.y
    keys = [[f"{m.name}_{nm}" for nm in m.param_names] for m in models]
    sizes = [len(k) for k in keys]
    nb = tb.size
    jac = np.zeros((nb * len(models), sum(sizes)))

    def residual(p):
        return np.concatenate([
            sw * (m.func(tb, *[p[k].value for k in ks]) - yb) for m, ks in zip(models, keys)
        ])

    def jacobian(p):
        col = 0
        for i, (m, ks) in enumerate(zip(models, keys)):
            jac[i * nb:(i + 1) * nb, col:col + len(ks)] = (
                m.jacobian(tb, *[p[k].value for k in ks]) * sw[:, None])
            col += len(ks)
        return jac

    try:
        params = _parameters(models, starts, bounds)
        minimizer_cls, _ = _lmfit_classes()
        with np.errstate(all="ignore"):
            mini = minimizer_cls(residual, params)
            if METHOD == "least_squares":
                res = mini.least_squares(jac=jacobian, x_scale="jac", max_nfev=_MAX_NFEV,
                                         ftol=1e-7, xtol=1e-7, gtol=1e-8)
            else:
                res = mini.leastsq(Dfun=jacobian, max_nfev=_MAX_NFEV, ftol=TOL, xtol=TOL)
            msg = str(getattr(res, "message", "") or "")
            if getattr(res, "aborted", False):
                msg = f"did not converge in {_MAX_NFEV} evaluations"
            out = []
            for m, ks in zip(models, keys):
                x = np.array([res.params[k].value for k in ks], dtype=float)
                ssr = binned_ssr(b, m, x)
                ok = bool(np.all(np.isfinite(x)) and math.isfinite(ssr))
                out.append(Solution(m, x, ssr if ok else math.inf, ok, msg))
        return out
    except Exception as exc:  # lmfit/scipy failure: report, never raise
        return [Solution(m, np.full(len(m.param_names), np.nan), math.inf, False,
                         f"fit failed: {exc}") for m in models]


def better(a: Solution | None, b: Solution | None) -> Solution | None:
    """The solution with the lower SSR (a failed one only when both failed)."""
    if a is None or not a.ok:
        return b if (b is not None and b.ok) else (a or b)
    if b is None or not b.ok:
        return a
    return b if b.ssr < a.ssr else a
