"""Level drift the laws cannot see: a random walk added to every law (docs/theory.md §7).

Real runs keep moving after their relaxation: the level steps up or down by amounts the
law's stationary forcing cannot produce (a mix of prompt classes, learning-rate schedules,
slow degradation). Over a long horizon this drift dominates the error of a final-level
forecast, and a law without it gives a confident, wrong interval.

The drift is modelled as a random walk ``w_t`` started at 0 at the first logged step,
``Cov(w_s, w_t) = q min(s, t)``, added to the law's forcing covariance. Its variance per step
``q`` is one more parameter of the same marginal likelihood (log coordinate, the last entry of
``theta``), estimated jointly with the law's timescales and forcing from the seen steps only.
A walk's predictive mean is flat at its filtered current value, and its variance grows with
the horizon: the forecast keeps the law's remaining relaxation, starts from where the run is,
and widens as far as the seen steps say the level wanders.

The lower bound of ``q`` is a walk whose sd over the seen span is 1% of the noise (no walk, in
effect); the upper bound one whose sd over the seen span is twice the data's range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from grpofit.forecasting.likelihood import (
    LawFit,
    Series,
    _level_prior,
    _static,
    _times_parts,
    bounds_for,
    covariance,
    gaussian_nll,
    lags,
    laplace_cov,
    minimise,
    prior_unit,
    remembered,
    system,
    tri_solve,
    unpack,
)
from grpofit.forecasting.likelihood import _starts as law_starts

__all__ = ["WalkFit", "walk_cov", "walk_system", "fit_walk_law", "walk_q", "search_objective", "dense_objective"]


@dataclass
class WalkFit(LawFit):
    """A law fitted with a random-walk level drift; ``theta[-1]`` is ``log q``."""

    walk: bool = True

    def params(self) -> dict:
        out = LawFit.params(
            LawFit(
                self.law,
                self.theta[:-1],
                self.lower[:-1],
                self.upper[:-1],
                self.theta_cov[:-1, :-1],
                self.reml,
                self.nll,
                self.beta,
                self.beta_cov,
                self.sigma,
                self.dof,
                self.n,
                self.known_noise,
            )
        )
        q = math.exp(float(self.theta[-1]))
        out["drift_sd_per_step"] = float(math.sqrt(q) * (1.0 if self.known_noise else self.sigma))
        return out


def walk_q(fit, theta) -> float:
    """The walk's variance per step for ``theta`` (0 for a law fitted without a walk)."""
    return math.exp(float(theta[-1])) if getattr(fit, "walk", False) else 0.0


def walk_cov(s: np.ndarray, t: np.ndarray, q: float) -> np.ndarray:
    """``q min(s, t)`` for times from the first logged step."""
    return q * np.minimum(np.asarray(s, dtype=float)[:, None], np.asarray(t, dtype=float)[None, :])


def walk_system(law: str, theta, series: Series, walk: bool = True):
    """:func:`grpofit.forecasting.likelihood.system` with the walk's covariance added."""
    if not walk:
        return system(law, theta, series)
    times, sd, X, b0, Sb, S = system(law, theta[:-1], series)
    S += math.exp(float(theta[-1])) * lags(series)[1]  # walk_cov(series.t, series.t, q); S is new
    return times, sd, X, b0, Sb, S


def _nll(law: str, theta, series: Series, levels: bool = True) -> tuple[float, object]:
    """``(nll, (beta, beta_cov, sigma))``; ``levels=False``: the levels' posterior is not
    computed (``None``), as the search needs the value only."""
    known = series.point_var is not None
    with np.errstate(all="ignore"):
        times, sd, X, b0, Sb, S = walk_system(law, theta, series)
        g = gaussian_nll(S, series.y - X @ b0, known)
    if g is None:
        return math.inf, None
    nll, L, w, s2 = g
    if not levels:
        return nll, None
    V = tri_solve(L, X @ Sb)
    return nll, (b0 + V.T @ w, s2 * (Sb - V.T @ V), None if known else math.sqrt(s2))


def _levels_at(law: str, theta, series: Series) -> tuple[float, object]:
    """:func:`_nll` at the search's maximum, by the compiled filter where it applies
    (:func:`~.filtered.filtered_conditional`, the same numbers to round-off, in time linear in
    the points), else the dense evaluation."""
    from grpofit.forecasting.filtered import filtered_conditional

    got = filtered_conditional(law, theta[:-1], math.exp(float(theta[-1])), series, series.t[-1:])
    if got is None:
        return _nll(law, theta, series)
    _, _, beta, beta_cov, nll, quad = got
    if not math.isfinite(nll):
        return math.inf, None
    if series.point_var is not None:
        return nll, (beta, beta_cov, None)
    s2 = quad / series.t.size  # the profiled scale, as the dense evaluation takes it
    return nll, (beta, s2 * beta_cov, math.sqrt(s2))


def search_objective(law: str, series: Series):
    """``theta -> _nll(law, theta, series, levels=False)[0]`` for the search's and the Laplace
    Hessian's thousands of evaluations: by a Kalman filter where the compiled kernel is built
    and the law has a Kalman form (:mod:`.filtered`, ``O(n)``; equal to round-off), else
    :func:`dense_objective` (the same arithmetic as ``_nll``)."""
    from grpofit.forecasting.filtered import filtered_objective

    fast = filtered_objective(law, series)
    return fast if fast is not None else dense_objective(law, series)


def dense_objective(law: str, series: Series):
    """``theta -> _nll(law, theta, series, levels=False)[0]``, the same arithmetic: what does
    not depend on ``theta`` is looked up once, and a point asked for again (the search and the
    Hessian's steps come back to some) is not recomputed."""
    known = series.point_var is not None
    unit = prior_unit(series)
    static = _static(series)
    minimum = lags(series)[1]

    def nll(theta) -> float:
        with np.errstate(all="ignore"):
            times, sd = unpack(law, theta[:-1])
            X, shape, XSX = _times_parts(law, times, series, unit)
            S = covariance(law, times, sd, shape, XSX, static)
            S += math.exp(float(theta[-1])) * minimum  # walk_cov(series.t, series.t, q)
            b0 = _level_prior(static, X.shape[1], series.level, unit)[0]
            g = gaussian_nll(S, series.y - X @ b0, known)
        return math.inf if g is None else g[0]

    return remembered(nll)


def walk_bounds(series: Series) -> tuple[float, float]:
    """Bounds of ``log q`` (see the module docstring), in the likelihood's units."""
    unit = series.noise if series.point_var is not None else 1.0
    span = max(float(series.t[-1] - series.t[0]), series.dt, 1e-12)
    scale = series.scale if series.point_var is not None else series.scale / series.noise
    lo = math.log((0.01 * unit) ** 2 / span)
    hi = math.log((2.0 * scale) ** 2 / span)
    return lo, max(hi, lo + 1.0)


def fit_walk_law(law: str, series: Series, *, t_guess: float, t_max: float, prior=None, warm=None) -> WalkFit | None:
    """Maximise the law's marginal likelihood with the walk (``None`` when every start fails).

    ``warm``: a ``theta`` of the same law (with its walk) fitted before, as ``grpofit watch``
    passes: the search starts there alone, and falls back to the usual starts only when it fails.

    Starts: the law's own starts, each with a walk whose sd over the seen span is a tenth of
    the noise (the search goes down to no walk where the data ask for none)."""
    lo, hi = bounds_for(law, series, t_max)
    qlo, qhi = walk_bounds(series)
    lo, hi = np.append(lo, qlo), np.append(hi, qhi)
    t_guess = float(np.clip(t_guess, math.exp(lo[0]) * 1.01, math.exp(hi[0]) * 0.99))
    unit = series.noise if series.point_var is not None else 1.0
    span = max(float(series.t[-1] - series.t[0]), series.dt, 1e-12)
    q_mid = math.log((0.1 * unit) ** 2 / span)
    prior_law = None if prior is None else np.asarray(prior)[:-1]

    f = search_objective(law, series)
    best = minimise(
        f, lo, hi, lambda: [np.append(start, q_mid) for start in law_starts(law, series, t_guess, prior_law)], warm
    )
    if best is None:
        return None
    theta = np.clip(best.x, lo, hi)
    nll, levels = _levels_at(law, theta, series)
    if not math.isfinite(nll):
        return None
    beta, beta_cov, sigma = levels
    cov = laplace_cov(f, theta, lo, hi)
    return WalkFit(
        law,
        theta,
        lo,
        hi,
        cov,
        nll,
        nll,
        beta,
        beta_cov,
        sigma,
        int(series.t.size),
        int(series.t.size),
        series.point_var is not None,
    )
