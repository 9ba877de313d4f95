"""The search objective of a law with its walk by a Kalman filter (the compiled kernel's
``walk_nll``), where the kernel was built and the law has a Kalman form.

:func:`grpofit.forecasting.walk.search_objective` evaluates the negative log marginal likelihood
thousands of times per forecast (L-BFGS-B's finite-difference gradients, the Laplace Hessian).
The dense evaluation builds the points' covariance (at most :data:`~.likelihood.MAX_POINTS`
squared entries) and takes its Cholesky factor: ``O(n^3)`` per evaluation. The same Gaussian
likelihood is a state-space model with at most three states (the law's forcing, ``m = 1`` or
``2``, from its form's ``kalman(times, sd)``, and the walk), so a Kalman filter gives it in
``O(n)``: the levels ``beta`` (prior ``N(b0, u^2 I)``) are integrated out by running their
columns through the same filter (the augmented filter) and solving ``p x p`` at the end.
``tests/test_filtered.py`` checks it against the dense evaluation (to round-off) on every law.

Without the kernel (no C compiler at install, or ``GRPOFIT_PURE_PYTHON`` set), or for a law
without a Kalman form, :func:`filtered_objective` gives ``None`` and the dense evaluation runs.
"""

from __future__ import annotations

import math

import numpy as np

from grpofit.forecasting.likelihood import Series, _static, memo, prior_unit, unpack
from grpofit.forecasting.statespace import LAWS, design
from grpofit.runtime.compiled import compiled_filter

__all__ = ["filtered_objective", "spacings"]

#: designs kept per objective (the search's steps along the forcing sd and the walk reuse them)
_DESIGNS_KEPT = 8


def spacings(series: Series) -> tuple[np.ndarray, np.ndarray]:
    """``(dts, step_of)``: the distinct spacings before each point (the first from ``t = 0``)
    and each point's index into them; kept in the series while its times are the same array."""

    def build():
        gaps = np.diff(np.asarray(series.t, dtype=float), prepend=0.0)
        dts, step_of = np.unique(gaps, return_inverse=True)
        return np.ascontiguousarray(dts), np.ascontiguousarray(step_of.reshape(-1), dtype=np.int64)

    return memo(series, "spacings", (series.t,), build)


def filtered_objective(law: str, series: Series):
    """``theta -> nll`` (``theta``: the law's log coordinates, then the walk's ``log q``), the
    value :func:`grpofit.forecasting.walk.search_objective`'s dense evaluation gives, or ``None``
    when the kernel or the law's Kalman form is missing. A point asked for again is not
    recomputed."""
    kernel = compiled_filter()
    form = LAWS.get(law)
    if kernel is None or form is None or form.kalman is None or getattr(kernel, "walk_nll", None) is None:
        return None
    known = series.point_var is not None
    unit = prior_unit(series)
    obs_var = np.ascontiguousarray(_static(series).obs_var, dtype=float)
    dts, step_of = spacings(series)
    # the levels' prior mean is the plateau at ``series.level`` (X's first column is 1), amplitudes 0
    resid = np.ascontiguousarray(series.y - series.level, dtype=float)
    n, p, D = int(series.t.size), len(form.levels), int(dts.size)
    u2 = unit * unit
    walk_nll = kernel.walk_nll
    seen: dict = {}
    designs: dict = {}

    def columns(times):
        """The design at ``times`` (``None`` when not finite), kept for the last few times."""
        key = tuple(map(float, times))
        X = designs.get(key, False)
        if X is False:
            with np.errstate(all="ignore"):
                X = np.ascontiguousarray(design(law, series.t, times), dtype=float)
            if not np.isfinite(X).all():
                X = None
            if len(designs) >= _DESIGNS_KEPT:
                del designs[next(iter(designs))]
            designs[key] = X
        return X

    def f(theta) -> float:
        theta = np.asarray(theta, dtype=float)
        key = theta.tobytes()
        value = seen.get(key)
        if value is not None:
            return value
        times, sd = unpack(law, theta[:-1])
        A, B, H = (np.asarray(x, dtype=float) for x in form.kalman(times, sd))
        W = B @ B.T
        X = columns(times)
        qw = math.exp(float(theta[-1]))
        if X is None or not (math.isfinite(float(A.sum() + W.sum())) and math.isfinite(qw)):
            value = math.inf
        else:
            value = walk_nll(n, A.shape[0], p, D, known, qw, u2, step_of, A, W, H.reshape(-1), dts, resid, X, obs_var)
        seen[key] = value
        return value

    return f
