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

For the laws the kernel knows (:data:`LAW_CODES`) the objective also evaluates many points in
one call (``f.many(thetas)``, the kernel's ``walk_search``: the law's system is built in C by
its Python form's operations, its design here once per distinct set of times: the same bits as
one evaluation at a time): L-BFGS-B's finite-difference gradient
(:func:`~.lbfgsb.forward_gradient`) and the Laplace Hessian (:func:`~.likelihood.laplace_cov`)
take all their points at once.

Without the kernel (no C compiler at install, or ``GRPOFIT_PURE_PYTHON`` set), or for a law
without a Kalman form, :func:`filtered_objective` gives ``None`` and the dense evaluation runs.
"""

from __future__ import annotations

import math

import numpy as np

from grpofit.forecasting.likelihood import Series, _static, memo, prior_unit, remembered
from grpofit.forecasting.statespace import LAWS, design
from grpofit.runtime.compiled import compiled_filter

__all__ = ["filtered_objective", "filtered_conditional", "designs", "spacings", "LAW_CODES"]

#: the laws whose forcing the kernel builds itself (``walk_search``'s codes; a law not listed is
#: evaluated one point at a time, its system built by its Python form)
LAW_CODES = {"one": 0, "two": 1, "oscillator": 2}

#: the law's times whose parts (system, design) an objective keeps (the search's steps along the
#: forcing sd and the walk, and the Laplace Hessian's, come back to them)
_TIMES_KEPT = 8


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
    code = LAW_CODES.get(law)
    if code is not None and getattr(kernel, "walk_search", None) is not None:
        return _searched(kernel.walk_search, law, code, series, known, u2, dts, step_of, resid, obs_var)
    walk_nll = kernel.walk_nll
    kalman, from_log = form.kalman, form.from_log
    parts: dict = {}

    def times_parts(theta, key):
        """``(A, W, h, X)`` at the law's times (``theta[:-2]``; ``W = B B'`` at forcing sd 1:
        the forcing's strength is linear in its sd, ``q^2 = 2 sd^2 / T``), kept for the last few
        times (the search's steps along the sd and the walk, and the Hessian's, reuse them).
        Entries that are not finite need no check here: the kernel gives ``inf`` for them."""
        hit = parts.get(key)
        if hit is not None:
            return hit
        times = from_log(theta)
        A, B, H = (np.asarray(x, dtype=float) for x in kalman(times, 1.0))
        with np.errstate(all="ignore"):
            W = B @ B.T
            X = np.ascontiguousarray(design(law, series.t, times), dtype=float)
        hit = (np.ascontiguousarray(A), W, np.ascontiguousarray(H.reshape(-1)), X)
        if len(parts) >= _TIMES_KEPT:
            del parts[next(iter(parts))]
        parts[key] = hit
        return hit

    def nll(theta) -> float:
        A, W, h, X = times_parts(theta, theta[:-2].tobytes())
        sd2 = math.exp(2.0 * float(theta[-2]))
        qw = math.exp(float(theta[-1]))
        if not (math.isfinite(sd2) and math.isfinite(qw)):
            return math.inf
        return walk_nll(n, A.shape[0], p, D, known, qw, u2, sd2, step_of, A, W, h, dts, resid, X, obs_var)

    return remembered(nll)


def _searched(walk_search, law: str, code: int, series: Series, known: bool, u2: float, dts, step_of, resid, obs_var):
    """The objective of a law the kernel knows: ``f(theta)``, and ``f.many(thetas)`` the values at
    the rows of ``thetas`` in one call. The law's design is built here, once per distinct set of
    times among the rows, by the law's own columns (:func:`designs`); the kernel builds the rest."""
    t = np.ascontiguousarray(series.t, dtype=float)
    n, D = int(t.size), int(dts.size)
    form = LAWS[law]
    k = len(form.times)

    def many(thetas) -> np.ndarray:
        thetas = np.ascontiguousarray(thetas, dtype=float)
        rows: dict = {}  # the law's times of each row -> its design's index
        times, index = [], []
        for row in thetas:
            key = row[:k].tobytes()
            u = rows.get(key)
            if u is None:
                u = rows[key] = len(times)
                times.append(form.from_log(row))
            index.append(u)
        X = designs(law, t, times)
        xi = np.array(index, dtype=np.int64)
        out = np.empty(thetas.shape[0])
        walk_search(
            code, n, D, known, u2, thetas.shape[0], len(times), step_of, dts, resid, obs_var, thetas, X, xi, out
        )
        return out

    def nll(theta) -> float:
        return float(many(theta[None, :])[0])

    f = remembered(nll)
    f.many = many
    return f


def designs(law: str, t: np.ndarray, times: list) -> np.ndarray:
    """``design(law, t, times[u])`` for every ``u``, stacked ``(U, n, levels)``, the same bits as
    one :func:`~.statespace.design` per set of times: a law whose columns are plain
    exponentials takes them with its times as columns of arrays (every entry the same
    operations); the oscillator's relaxation one set of times at a time by its scalar path
    (cheaper than its array path), under one ``errstate``."""
    t = np.asarray(t, dtype=float)
    if law == "oscillator":
        from grpofit.laws.base import huge_ok
        from grpofit.laws.oscillator import raw_relaxation_derivatives

        with huge_ok():  # relaxation's own errstate, once
            parts = ([raw_relaxation_derivatives(t, float(a), float(b), derivatives=False)[0] for a, b in times],)
    elif len(times) == 1:
        return design(law, t, times[0])[None]
    else:
        cols = np.array(times, dtype=float)  # (U, number of times)
        parts = LAWS[law].columns(t[None, :], tuple(cols[:, i : i + 1] for i in range(cols.shape[1])))
    X = np.empty((len(times), t.size, len(parts) + 1))
    X[..., 0] = 1.0
    for i, col in enumerate(parts, start=1):
        X[..., i] = col
    return X


def filtered_conditional(law: str, theta, q: float, series: Series, tf: np.ndarray):
    """``(mean, cov, beta, beta_cov, nll, quad)`` of :func:`~.predictive._conditional` by the
    kernel's filter (``walk_conditional``): the latent at ``tf`` given the seen points for the
    law's ``theta`` (its log times, then log sd; no walk coordinate) and walk variance ``q``
    per step, in units of the profiled scale when the noise is not known (``quad``: the
    residual's quadratic form that scale is drawn from). ``None`` where the kernel or the law's
    code is missing, a time of ``tf`` lies before the last seen point (that would need a
    smoother), or the filter fails: the dense conditional runs then."""
    kernel = compiled_filter()
    code = LAW_CODES.get(law)
    if kernel is None or code is None or getattr(kernel, "walk_conditional", None) is None:
        return None
    tf = np.ascontiguousarray(tf, dtype=float)
    if not tf.size or not tf.min() >= series.t[-1]:
        return None
    k = len(LAWS[law].times)
    p = len(LAWS[law].levels)
    t, resid, obs_var, u2, D, step_of, dts = _seen_parts(series)
    b0 = np.zeros(p)
    b0[0] = series.level
    mean, cov = np.empty(tf.size), np.empty((tf.size, tf.size))
    beta, beta_cov = np.empty(p), np.empty((p, p))
    sd = math.exp(float(theta[k]))
    got = kernel.walk_conditional(
        code,
        t.size,
        D,
        tf.size,
        series.point_var is not None,
        u2,
        sd * sd,
        float(q),
        np.ascontiguousarray(theta[:k], dtype=float),
        step_of,
        dts,
        t,
        resid,
        obs_var,
        tf,
        b0,
        mean,
        cov,
        beta,
        beta_cov,
    )
    if got is None:
        return None
    return mean, cov, beta, beta_cov, got[0], got[1]


def _seen_parts(series: Series) -> tuple:
    """What the filtered conditional reads of the seen points, built once per series: the times,
    the residual from the levels' prior mean, the observation variances, the levels' prior
    variance and the spacings."""

    def build():
        dts, step_of = spacings(series)
        unit = prior_unit(series)
        return (
            np.ascontiguousarray(series.t, dtype=float),
            np.ascontiguousarray(series.y - series.level, dtype=float),
            np.ascontiguousarray(_static(series).obs_var, dtype=float),
            unit * unit,
            int(dts.size),
            step_of,
            dts,
        )

    inputs = (series.t, series.y, series.count, series.point_var, series.rel_var, series.level, series.level_sd)
    return memo(series, "seen_parts", inputs, build)
