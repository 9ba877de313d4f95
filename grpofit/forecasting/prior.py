"""Population priors from finished runs (empirical Bayes), and forecasts that combine them with a
run's own data (docs/prior.md).

1. **Summaries.** Each finished run is fitted once with the damped oscillator started at rest
   (theory.md §1; its means binned to at most :data:`BINS` points): plateau, initial level, log
   timescale, log inertia, and the log of its noise level (the scatter of successive differences).
   With its covariates (learning rate, momentum, refresh interval, group size, KL weight, model
   size: from the config, a bandit's ``.meta.json`` or ``--covariate``), its final level (mean of
   the last 10% of steps) and the law's misfit there, that is all a prior keeps
   (:class:`RunSummary`).
2. **Population.** For a target run, each parameter's population mean is a ridge regression on
   the covariates that the prior's runs vary and the target names (transformed as the closed
   forms of theory.md §2 suggest: log rate, log(1 - momentum), log refresh interval, log group
   size, log model size); the spread is the residuals' (a Student-style inflation for few runs,
   correlations shrunk towards none) plus the regression's own uncertainty at the target. Before
   the first step the final levels are regressed by a Gaussian process (:mod:`.gp`) where it
   predicts them better leave-one-out (:func:`_regression`).
3. **Similarity.** The run's seen steps are checked against the prior's predictive distribution
   (their mean level and their noise level): a run unlike the prior's runs (another task, another
   reward scale) gets a tempered prior (weight ``w`` < 1: its precision times ``w``), so its own
   data overrule the prior; the output says so.
4. **Combination.** A maximum a posteriori fit of the law to the seen steps with the tempered
   Gaussian prior as a penalty; parameter draws from its Laplace approximation give the final
   level (law + the population's misfit + observation noise). Before the first step the draws come
   from the prior alone.
5. **Calibration.** The spreads are multiplied by a factor learned leave-one-out on the prior's
   own runs at the same cut fraction (0%, 10%, 25%), so a prior that is too confident about its
   population says so by widening, never by narrowing below the law's spread.

``weight`` reported per forecast: the share of the final level's posterior precision that the
(tempered) prior supplies, ``w Var_post / Var_prior``: 1 before the first step, near 0 when the
run's own data decide.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field

import numpy as np

from grpofit.core.vocabulary import SCHEMAS
from grpofit.forecasting.covariates import (
    COVARIATES,
    _transform,
    covariates_of,
    parse_covariates,
)

__all__ = [
    "PARAMS",
    "PRIOR_SCHEMA",
    "Prior",
    "RunSummary",
    "build_prior",
    "covariates_of",
    "load_prior",
    "parse_covariates",
    "prior_block",
    "summarise_run",
]

PRIOR_SCHEMA = SCHEMAS["prior"]
#: the law's parameters the prior is over (plus the log noise level, which is checked, not fitted)
PARAMS = ("plateau", "initial", "log_timescale", "log_inertia")
BINS = 80
FINAL_FRACTION = 0.1
#: calibration cut fractions (0 = before the first step)
CAL_CUTS = (0.0, 0.1, 0.25)
#: at most this many runs are forecast leave-one-out to calibrate a prior
CAL_RUNS = 40
N_DRAWS = 2000
#: the stacked forecasts: the law with the prior (MAP), the population's remaining gains, persistence
METHODS = ("law", "gain", "stay")


# ---------------------------------------------------------------------------------- summaries


@dataclass
class RunSummary:
    run: str
    params: dict  #: PARAMS -> value, and "log_noise"
    final_level: float
    misfit: float  #: final level minus the law's mean over the final window
    span: float  #: steps from the first to the last logged step
    n_points: int
    covariates: dict = field(default_factory=dict)
    levels: list = field(default_factory=list)  #: persistence (mean of the last tenth seen) at LEVEL_CUTS


#: cut fractions at which a run's persistence is kept (for the remaining-gain prior)
LEVEL_CUTS = tuple(round(0.05 * k, 2) for k in range(1, 20))


def level_at(levels, frac: float) -> float:
    return float(np.interp(frac, LEVEL_CUTS, levels))


def _levels(t: np.ndarray, y: np.ndarray) -> list:
    span = float(t[-1]) if t.size else 0.0
    out = []
    for c in LEVEL_CUTS:
        seen = y[t <= c * span]
        seen = seen if seen.size else y[:1]
        out.append(float(seen[-max(1, seen.size // 10) :].mean()))
    return out


def _bin(t: np.ndarray, y: np.ndarray, bins: int):
    """Means of ``y`` in at most ``bins`` equal-count groups: (t, y, counts)."""
    n = t.size
    if n <= bins:
        return t, y, np.ones(n)
    edges = np.linspace(0, n, bins + 1).round().astype(int)
    counts = np.diff(edges).astype(float)
    tb = np.add.reduceat(t, edges[:-1]) / counts
    yb = np.add.reduceat(y, edges[:-1]) / counts
    return tb, yb, counts


def noise_level(y: np.ndarray) -> float:
    """The observation noise's sd: the MAD of successive differences / sqrt(2)."""
    d = np.diff(np.asarray(y, dtype=float))
    if d.size < 2:
        return float("nan")
    s = 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2.0)
    if s <= 0:
        s = float(np.std(d)) / math.sqrt(2.0)
    return s


def _law(t, z):
    from grpofit.laws.models import oscillator

    return oscillator(t, z[0], z[1], math.exp(z[2]), math.exp(z[3]))


def _law_jacobian(t, z):
    """Columns ``d law / d(plateau, initial, log timescale, log inertia)``, ``(n, 4)``: the
    oscillator's analytic Jacobian with the log parameters' chain rule (finite differences cost
    four more evaluations of the law per step of the fit)."""
    from grpofit.laws.models import oscillator_jacobian

    ts, ti = math.exp(z[2]), math.exp(z[3])
    J = np.array(oscillator_jacobian(t, z[0], z[1], ts, ti), dtype=float)
    J[:, 2] *= ts
    J[:, 3] *= ti
    return np.nan_to_num(J, nan=0.0, posinf=0.0, neginf=0.0)


def _bounds(span: float):
    lo_t, hi_t = math.log(max(span, 1.0) / 500.0), math.log(20.0 * max(span, 1.0))
    return lo_t, hi_t


def _fit(t, y, w, z0, prior=None):
    """Least squares of the law on binned points (weights ``w`` = 1/sd), with an optional
    Gaussian penalty ``(mean, inverse Cholesky factor)``; returns (z, J) (J of all rows)."""
    from scipy.optimize import least_squares

    span = float(t[-1]) if t.size else 1.0
    lo_t, hi_t = _bounds(max(span, 1.0))
    lo = np.array([-np.inf, -np.inf, lo_t, lo_t - 3.0])
    hi = np.array([np.inf, np.inf, hi_t + 3.0, hi_t + 3.0])
    z0 = np.clip(np.asarray(z0, dtype=float), lo + 1e-6, hi - 1e-6)

    def resid(z):
        r = (y - _law(t, z)) * w
        if prior is not None:
            r = np.concatenate([r, prior[1] @ (z - prior[0])])
        return r

    def jac(z):
        J = -_law_jacobian(t, z) * np.broadcast_to(w, t.shape)[:, None]
        return np.vstack([J, prior[1]]) if prior is not None else J

    res = least_squares(resid, z0, jac=jac, bounds=(lo, hi), method="trf", x_scale="jac", max_nfev=200)
    return res.x, res.jac, res.fun


def summarise_run(name: str, steps, values, covariates: dict | None = None) -> RunSummary | None:
    """One finished run's summary (None when it has too few points or no finite law fit)."""
    steps = np.asarray(steps, dtype=float)
    values = np.asarray(values, dtype=float)
    keep = np.isfinite(steps) & np.isfinite(values)
    steps, values = steps[keep], values[keep]
    if steps.size < 12:
        return None
    t = steps - steps[0]
    span = float(t[-1])
    sigma = noise_level(values)
    tb, yb, cnt = _bin(t, values, BINS)
    k = max(1, yb.size // 10)
    p_end, p_start = float(yb[-k:].mean()), float(yb[:k].mean())
    best = None
    for frac in (0.1, 0.3):
        for ti in (0.02, 0.2):
            z0 = [p_end, p_start, math.log(max(frac * span, 1.0)), math.log(max(ti * span * frac, 0.5))]
            try:
                z, _, r = _fit(tb, yb, np.sqrt(cnt), z0)
            except (ValueError, FloatingPointError):
                continue
            cost = float(r @ r)
            if np.all(np.isfinite(z)) and (best is None or cost < best[1]):
                best = (z, cost)
    if best is None:
        return None
    z = best[0]
    window = t >= span * (1.0 - FINAL_FRACTION)
    final = float(values[window].mean())
    misfit = final - float(np.mean(_law(t[window], z)))
    params = dict(zip(PARAMS, map(float, z)))
    params["log_noise"] = float(math.log(max(sigma, 1e-12))) if math.isfinite(sigma) else None
    return RunSummary(
        str(name), params, final, float(misfit), span, int(steps.size), dict(covariates or {}), _levels(t, values)
    )


# ---------------------------------------------------------------------------------- population


@dataclass
class Population:
    """The prior for one target: mean, covariance of :data:`PARAMS`, noise level, misfit."""

    mean: np.ndarray
    cov: np.ndarray
    log_noise: tuple  #: (mean, sd)
    misfit_sd: float
    used: list  #: covariates regressed on
    n: int


def _inflate(n: int) -> float:
    """Predictive-variance inflation for a new member of a population of ``n`` (a Student-t
    with n-1 degrees of freedom matched in variance, and the mean's own uncertainty)."""
    dof = max(n - 1, 1)
    t_var = dof / (dof - 2.0) if dof > 2 else 3.0
    return (1.0 + 1.0 / max(n, 1)) * t_var


def _ridge_fit(X: np.ndarray, y: np.ndarray, x0: np.ndarray):
    """Ridge prediction at ``x0``, residual variance, leverage, residuals, the predictor and the
    leave-one-out mean squared error; lambda by leave-one-out."""
    n = X.shape[0]
    mu_x, sd_x = X.mean(axis=0), X.std(axis=0)
    sd_x[sd_x == 0] = 1.0
    Z = (X - mu_x) / sd_x
    z0 = (x0 - mu_x) / sd_x
    ybar = y.mean()
    yc = y - ybar
    best = None
    ZtZ, Zty = Z.T @ Z, Z.T @ yc
    for lam in (0.01, 0.1, 1.0, 10.0, 100.0, 1e4):
        Ainv = np.linalg.inv(ZtZ + lam * np.eye(Z.shape[1]))
        h = np.einsum("ij,jk,ik->i", Z, Ainv, Z) + 1.0 / n  # the hat matrix's diagonal (n x n never formed)
        r = yc - Z @ (Ainv @ Zty)
        loo = r / np.clip(1.0 - h, 1e-3, None)
        score = float(np.mean(loo**2))
        if best is None or score < best[0]:
            best = (score, Ainv, r, h)
    _, Ainv, r, h = best
    beta = Ainv @ Zty
    pred = ybar + float(z0 @ beta)
    lev = 1.0 / n + float(z0 @ Ainv @ z0)
    dof = max(n - float(h.sum()), 1.0)
    return pred, float(r @ r) / dof, lev, r, lambda Xa: ybar + ((Xa - mu_x) / sd_x) @ beta, best[0]


#: a run whose residual lies beyond this many robust sds (1.4826 MAD) is left out of its population
OUTLIER_SDS = 3.0


def _inliers(r: np.ndarray) -> np.ndarray:
    """The residuals within :data:`OUTLIER_SDS` robust sds of their median (all of them when the
    robust sd is 0)."""
    med = float(np.median(r))
    scale = 1.4826 * float(np.median(np.abs(r - med)))
    return np.abs(r - med) <= OUTLIER_SDS * scale if scale > 0 else np.ones(r.size, bool)


#: the Gaussian-process regression (:mod:`.gp`) is tried with at least this many runs per
#: parameter it fits (the linear mean's d + 1 coefficients, d + 2 scales: 2 d + 3); 0: never
GP_RUNS_PER_COEF = 2
#: ... and at most this many runs (its cost grows as the cube of the runs; beyond, the ridge)
GP_MAX_RUNS = 100
_GP_CACHE: dict = {}


def _gp_cached(X: np.ndarray, y: np.ndarray):
    """:func:`.gp.gp_fit`, memoised on the data (a prior's calibration regresses the same runs'
    parameters at every cut)."""
    from grpofit.forecasting.gp import gp_fit

    key = (X.shape, X.tobytes(), y.tobytes())
    if key not in _GP_CACHE:
        if len(_GP_CACHE) > 4096:
            _GP_CACHE.clear()
        _GP_CACHE[key] = gp_fit(X, y)
    return _GP_CACHE[key]


def _regression(X: np.ndarray, y: np.ndarray, x0: np.ndarray, gp: bool = False):
    """The ridge (:func:`_ridge_fit`) or, with enough runs (and not too many), the Gaussian process
    (:func:`.gp.gp_fit`: a linear mean plus a smooth deviation), whichever has the smaller
    leave-one-out mean squared error: (prediction, residual variance, leverage, residuals,
    predictor). The GP's residual variance is its noise variance, its leverage the variance of
    its regression function at ``x0`` over it; its residuals are its leave-one-out residuals."""
    ridge = _ridge_fit(X, y, x0)
    n, d = X.shape
    if not gp or GP_RUNS_PER_COEF <= 0 or n < GP_RUNS_PER_COEF * (2 * d + 3) or n > GP_MAX_RUNS:
        return ridge[:5]
    proc = _gp_cached(X, y)
    if proc is None or not float(np.mean(proc.loo**2)) < ridge[5]:
        return ridge[:5]
    sn2 = max(proc.noise_var, 1e-300)
    return float(proc.predict(x0)[0]), sn2, proc.f_var(x0) / sn2, proc.loo, proc.predict


def _ridge(X: np.ndarray, y: np.ndarray, x0: np.ndarray, gp: bool = False):
    """The population regression's prediction at ``x0``, residual variance, leverage and
    residuals (:func:`_regression`). Runs whose residuals are outliers (:func:`_inliers`) are left
    out and the regression refitted once: a run whose summary fit went astray (a timescale of 3
    steps on a run that settled within two bins) neither moves nor widens the population of every
    target. Their residuals (from the refit) are kept for the parameters' correlations."""
    fit = _regression(X, y, x0, gp)
    keep = _inliers(fit[3])
    if keep.all() or keep.sum() < X.shape[1] + 3:
        return fit[:4]
    pred, var, lev, r, predict = _regression(X[keep], y[keep], x0, gp)
    out = y - predict(X)
    out[keep] = r  # the kept runs' own residuals (the GP's: leave-one-out)
    return pred, var, lev, out


def _used(summaries, covariates) -> list:
    """The covariates to regress on: named by the target, known and varied in the prior's runs
    (at most n - 3 of them)."""
    n = len(summaries)
    used = []
    if covariates and n >= 4:
        for name in COVARIATES:
            if name not in covariates or _transform(name, covariates[name]) is None:
                continue
            col = [(_transform(name, s.covariates[name]) if name in s.covariates else None) for s in summaries]
            if any(c is None for c in col) or len({round(c, 9) for c in col}) < 2:
                continue
            used.append(name)
    return used[: max(0, n - 3)]


def regress(summaries, Y: np.ndarray, covariates, used=None, gp: bool = False):
    """Per column of ``Y`` (runs x k): the population mean at the target's covariates, the
    predictive variance of a new member (residual variance x (1 + leverage), Student-inflated)
    and the residuals (for correlations)."""
    n = len(summaries)
    used = _used(summaries, covariates) if used is None else used
    k = Y.shape[1]
    mean, var, resid = np.empty(k), np.empty(k), np.empty((n, k))
    if used:
        X = np.array([[_transform(u, s.covariates[u]) for u in used] for s in summaries], dtype=float)
        x0 = np.array([_transform(u, covariates[u]) for u in used], dtype=float)
        for j in range(k):
            pred, rv, lev, r = _ridge(X, Y[:, j], x0, gp)
            mean[j], resid[:, j] = pred, r
            var[j] = rv * (1.0 + lev) * _inflate(n) / (1.0 + 1.0 / n)
    else:
        for j in range(k):  # the mean and spread of the runs that are not outliers (:func:`_ridge`)
            keep = _inliers(Y[:, j]) if n >= 4 else np.ones(n, bool)
            mean[j] = Y[keep, j].mean()
            var[j] = Y[keep, j].var(ddof=1) * _inflate(n) if keep.sum() > 1 else np.nan
        resid = Y - mean
    return mean, var, resid, used


def population(summaries: list[RunSummary], covariates: dict | None) -> Population:
    """The law's prior for a target with ``covariates`` (see the module docstring, 2)."""
    n = len(summaries)
    Y = np.array([[s.params[p] for p in PARAMS] for s in summaries], dtype=float)
    mean, var, resid, used = regress(summaries, Y, covariates)
    R = np.corrcoef(resid.T) if n > 2 else np.eye(len(PARAMS))
    # floors: a population of identical fits still leaves room (the level's noise, 5% in log time)
    noise = np.array([s.params.get("log_noise") for s in summaries if s.params.get("log_noise") is not None])
    sig = float(np.exp(np.median(noise))) if noise.size else 0.01
    floors = np.array([sig, sig, 0.05, 0.3]) ** 2
    var = np.where(np.isfinite(var), np.maximum(var, floors), np.array([1.0, 1.0, 4.0, 9.0]))
    R = np.nan_to_num(R, nan=0.0)
    lam = n / (n + 5.0)  # correlations shrunk towards none with few runs
    R = lam * R + (1.0 - lam) * np.eye(len(PARAMS))
    np.fill_diagonal(R, 1.0)
    sd = np.sqrt(var)
    cov = R * np.outer(sd, sd) + np.eye(len(PARAMS)) * 1e-12
    ln_sd = float(np.std(noise, ddof=1)) if noise.size > 1 else 1.0
    mis = np.array([s.misfit for s in summaries])
    mis_sd = float(np.sqrt(np.mean(mis**2))) if mis.size else 0.0
    return Population(
        mean,
        cov,
        (float(np.median(noise)) if noise.size else math.log(sig), math.sqrt(max(ln_sd, 0.2) ** 2 * _inflate(n))),
        mis_sd,
        used,
        n,
    )


# ---------------------------------------------------------------------------------- forecasting


@dataclass
class PriorForecast:
    final: dict | None  #: {"mean", "median", "pi80", "pi95"} of the final-window level
    plateau: dict | None
    weight: float  #: the prior's share of the final level's precision
    tempering: float  #: w: 1 = the prior as built, < 1 = the run is unlike the prior's runs
    check: dict  #: the predictive check of the seen steps
    used: list
    note: str | None
    parts: dict = field(default_factory=dict)  #: METHODS -> unscaled draws of the final level (or None)
    shares: dict = field(default_factory=dict)  #: METHODS -> share of the stacked mixture
    fit: object = None  #: the law's :class:`LawFit` (None before the first step)


def _window_mean(tf: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """The law's mean over ``tf`` for each parameter row of ``Z``."""
    from grpofit.laws.models import oscillator

    ts = np.exp(Z[:, 2])[:, None]
    ti = np.exp(Z[:, 3])[:, None]
    with np.errstate(all="ignore"):
        vals = oscillator(tf[None, :], Z[:, 0:1], Z[:, 1:2], ts, ti)
    return np.nanmean(vals, axis=1)


def _check(pop: Population, prior_draws, t_seen, y_seen, sigma) -> tuple[dict, float]:
    """The predictive check of the seen steps: their mean level and their noise level against
    the prior's; ``w`` = 1 inside the chi-square(2) 95% region, then falling as ``(q95/d2)^2``."""
    n_seen = t_seen.size
    sub = t_seen if n_seen <= 40 else t_seen[np.linspace(0, n_seen - 1, 40).astype(int)]
    seen_mean = _window_mean(sub, prior_draws[:400])
    sig_pop = math.exp(pop.log_noise[0])
    m_pred = float(np.nanmean(seen_mean))
    sd_pred = math.sqrt(float(np.nanvar(seen_mean)) + pop.misfit_sd**2 + sig_pop**2 / n_seen)
    z_level = (float(y_seen.mean()) - m_pred) / max(sd_pred, 1e-12)
    z_noise = (math.log(sigma) - pop.log_noise[0]) / max(pop.log_noise[1], 1e-6)
    d2 = z_level**2 + z_noise**2
    q95 = 5.991
    w = 1.0 if d2 <= q95 else float((q95 / d2) ** 2)
    return (
        {
            "seen_level": float(y_seen.mean()),
            "prior_level": m_pred,
            "prior_level_sd": sd_pred,
            "z_level": z_level,
            "noise": sigma,
            "prior_noise": sig_pop,
            "z_noise": z_noise,
            "distance2": d2,
        },
        w,
    )


@dataclass
class LawFit:
    """The MAP fit of the law to a run's seen steps with the tempered prior, as its Laplace
    approximation: the mode ``z``, the posterior precision ``H`` (data and prior) and the prior's
    part ``Pw`` (``w`` times the population's precision, mean ``m0``), with what draws of the
    final level need. :func:`law_posterior` re-weights the run's data by a learning rate."""

    z: np.ndarray
    H: np.ndarray
    Pw: np.ndarray
    m0: np.ndarray
    t_seen: np.ndarray
    y_seen: np.ndarray
    sigma: float
    t_final: np.ndarray
    n_final: int
    misfit_sd: float


def law_posterior(fit: LawFit, eta: float = 1.0):
    """Mean and covariance of the law's posterior with the run's data weighted by ``eta`` (a power
    posterior, ``prior x likelihood^eta``), from the Laplace approximation: the data's precision
    ``D = H - Pw`` and their mode ``D^-1 (H z - Pw m0)`` give ``(Pw + eta D)^-1 (Pw m0 + eta (H z
    - Pw m0))``. ``eta`` = 1 is the fit itself; ``eta`` < 1 lets the population count for more
    where the law's extrapolations from runs' seen steps are worse than their fits promise
    (chosen by leave-one-out, :func:`_learn_eta`)."""
    if eta >= 1.0:
        H, mean = fit.H, fit.z
    else:
        H = fit.Pw + eta * (fit.H - fit.Pw)
        mean = np.linalg.solve(H, fit.Pw @ fit.m0 + eta * (fit.H @ fit.z - fit.Pw @ fit.m0))
    cov = np.linalg.inv(H)
    return mean, 0.5 * (cov + cov.T) + np.eye(len(mean)) * 1e-12


def law_levels(fit: LawFit, eta: float, rng, n: int = N_DRAWS, tail: bool = True):
    """Draws of the final level from the law's (``eta``-weighted) posterior: the law's mean over
    the final window, the population's misfit there and the noise of the window's mean. Returns
    (levels, plateau draws, z): ``z`` is the standardised gap between the level the run has
    reached and the law's mean over the same steps (:func:`_tail_gap`; None without ``tail``)."""
    try:
        mean, cov = law_posterior(fit, eta)
        Zd = rng.multivariate_normal(mean, cov, size=n, method="eigh")
    except (np.linalg.LinAlgError, ValueError):
        Zd = np.repeat(fit.z[None, :], n, axis=0)
    z_tail = _tail_gap(fit.t_seen, fit.y_seen, Zd, fit.sigma) if tail else None
    return (*_levels_of(Zd, fit.t_final, fit.n_final, fit.misfit_sd, fit.sigma, rng), z_tail)


def _levels_of(Zd, t_final, n_final, misfit_sd, sigma, rng):
    final = _window_mean(t_final, Zd)
    ok = np.isfinite(final)
    level = final[ok] + misfit_sd * rng.standard_normal(int(ok.sum()))
    level = level + sigma / math.sqrt(max(n_final, 1)) * rng.standard_normal(level.size)
    return level, Zd[ok, 0]


def _law_fit(pop, t_seen, y_seen, sigma, w, t_final, n_final) -> LawFit:
    """The MAP fit of the law to the seen steps (binned) with the tempered prior as a penalty."""
    P = np.linalg.inv(pop.cov)
    L_inv = np.linalg.inv(np.linalg.cholesky(pop.cov))
    tb, yb, cnt = _bin(t_seen, y_seen, 60)
    wts = np.sqrt(cnt) / sigma
    pen = (pop.mean, math.sqrt(w) * L_inv)
    z0 = pop.mean.copy()
    z0[1] = float(yb[: max(1, yb.size // 5)].mean())
    z, J, r = _fit(tb, yb, wts, z0, pen)
    nd = tb.size
    chi = float(r[:nd] @ r[:nd]) / max(nd - 2, 1)
    if chi > 1.0:  # correlated or misjudged noise: the data count for less
        wts = wts / math.sqrt(chi)
        z, J, r = _fit(tb, yb, wts, z, pen)
    H = J.T @ J
    return LawFit(z, H, w * P, pop.mean, t_seen, y_seen, sigma, t_final, n_final, pop.misfit_sd)


def _law_draws(pop, t_seen, y_seen, sigma, w, t_final, n_final, rng, prior_draws, eta: float = 1.0):
    """Final-level draws of the law: from the prior alone (nothing seen) or the MAP fit of the
    seen steps with the tempered prior as a penalty, by its Laplace approximation, the run's data
    weighted by ``eta`` (:func:`law_posterior`). Returns (levels, plateau draws, z, fit): ``z``
    is the standardised gap between the level the run has reached (:func:`persistence`'s window)
    and the fitted law's mean over the same steps (None before the first step)."""
    if t_seen is None:
        return (*_levels_of(prior_draws, t_final, n_final, pop.misfit_sd, sigma, rng), None, None)
    fit = _law_fit(pop, t_seen, y_seen, sigma, w, t_final, n_final)
    return (*law_levels(fit, eta, rng), fit)


def _tail_gap(t_seen, y_seen, Zd, sigma) -> float | None:
    """The level reached (the mean of the last tenth seen) minus the law's mean over the same
    steps, over the sd of that difference (the mean's noise and the law's spread there)."""
    k = max(1, t_seen.size // 10)
    tail = t_seen[-k:]
    tail = tail if tail.size <= 20 else tail[np.linspace(0, tail.size - 1, 20).round().astype(int)]
    m = _window_mean(tail, Zd[:400])
    m = m[np.isfinite(m)]
    if not m.size:
        return None
    sd = math.sqrt(sigma**2 / k + float(np.var(m)))
    return (float(y_seen[-k:].mean()) - float(np.median(m))) / max(sd, 1e-12)


def _contradiction(z: float | None) -> float:
    """The law's share factor when the run's own recent level contradicts its fitted law: 1
    inside the chi-square(1) 95% region, then falling as ``(q95/z^2)^2`` (the similarity check's
    form, :func:`_check`)."""
    if z is None:
        return 1.0
    q = 3.841
    z2 = z * z
    return 1.0 if z2 <= q else float((q / z2) ** 2)


def _shares(parts: dict, shares: dict, check: dict) -> dict:
    """The stack's shares for one forecast: the calibrated shares of the members present, the law's
    cut (:func:`_contradiction`) when the run's own recent level contradicts its fitted law
    (``check["z_reached"]``), while another member remains."""
    out = {m: float(shares.get(m, 0.0)) for m in METHODS if parts.get(m) is not None}
    if "law" in out and len(out) > 1:
        out["law"] *= _contradiction((check or {}).get("z_reached"))  # the run's recent level overrules its law
    return out


def _noise_var(s: RunSummary, frac: float) -> float:
    """The variance that a run's own noise adds to its remaining gain at ``frac``: the mean of the
    last tenth seen (``frac`` of its points / 10) and the final window's mean (10% of its points)."""
    ln = s.params.get("log_noise")
    if ln is None:
        return 0.0
    k = max(1, int(frac * s.n_points) // 10)
    nf = max(1, int(FINAL_FRACTION * s.n_points))
    return math.exp(2.0 * ln) * (1.0 / k + 1.0 / nf)


def own_noise_var(values, sigma: float, n_final: int) -> float:
    """The variance that the target's own noise adds to "level reached + gain": the mean of its
    last tenth seen and the mean of its final window (``n_final`` steps)."""
    k = max(1, np.asarray(values).size // 10)
    return sigma**2 * (1.0 / k + 1.0 / max(n_final, 1))


def _stay_draws(summaries, frac, level_now, w, rng, own_var=0.0):
    """Persistence as a member of the stack: the level reached stays, with the spread of the
    population's remaining gains (root mean square, less the part the runs' own noise put in it,
    tempered by ``w``) plus the target's own noise (``own_var``), Student-t."""
    n = len(summaries)
    if level_now is None:
        return None
    g = np.array([s.final_level - level_at(s.levels, frac) for s in summaries])
    noise = float(np.mean([_noise_var(s, frac) for s in summaries])) if summaries else 0.0
    var = max(float(np.mean(g**2)) - noise, 0.0) if g.size else 1.0
    sd = math.sqrt(var / max(w, 1e-6) + own_var)
    return level_now + max(sd, 1e-9) * rng.standard_t(max(n - 1, 1), size=N_DRAWS)


def _gain_draws(summaries, covariates, frac, level_now, w, rng, own_var=0.0):
    """Final-level draws from the population of remaining gains: ``final - persistence`` at the
    same cut fraction (before the first step: the final levels themselves), regressed on the
    covariates, Student-t with n - 1 degrees of freedom; tempered (``w`` < 1) by widening: the
    second moment (spread and size) over ``w``, so a run unlike the population does not take its
    remaining gain as known however alike the population's gains are. After
    the first step the spread is the population's less the part its runs' own noise put in it,
    plus the target's own noise (``own_var``): a noisy run is not narrowed by quiet ones."""
    n = len(summaries)
    if level_now is None:
        Y = np.array([[s.final_level] for s in summaries])
        base, noise = 0.0, 0.0
    else:
        Y = np.array([[s.final_level - level_at(s.levels, frac)] for s in summaries])
        base = level_now
        noise = float(np.mean([_noise_var(s, frac) for s in summaries]))
    mean, var, _, _ = regress(summaries, Y, covariates, gp=level_now is None)
    var_raw = float(var[0]) / _inflate(n) * (1.0 + 1.0 / n) if n > 1 else 1.0
    dof = max(n - 1, 1)
    w = max(w, 1e-6)
    # tempered: the spread over w, and for a run unlike the population the gain's size is not
    # known from it either (the tempered second moment, (v + g^2) / w - g^2)
    sd = math.sqrt(max(var_raw - noise, 1e-12) / w + float(mean[0]) ** 2 * (1.0 / w - 1.0) + own_var)
    return base + float(mean[0]) + sd * rng.standard_t(dof, size=N_DRAWS)


def _precision_share(prior_level, post_level, w) -> float:
    """``w Var_post / Var_prior``, never above ``w`` (a posterior wider than the tempered prior
    alone means the law's Gaussian picture fails: the prior then has at most its tempering)."""
    vp = float(np.var(prior_level))
    return float(min(w, w * float(np.var(post_level)) / max(vp, 1e-300)))


# ---------------------------------------------------------------------------------- the prior


@dataclass
class Prior:
    runs: list  #: RunSummary
    calibration: dict = field(default_factory=dict)  #: "0.1" -> {"law", "gain", "law_share"}
    source: str = ""
    skipped: list = field(default_factory=list)  #: {"run", "reason"}

    def to_json(self) -> dict:
        pop = population(self.runs, None) if len(self.runs) > 1 else None
        doc = {
            "schema": PRIOR_SCHEMA,
            "law": "oscillator (plateau, initial, log timescale, log inertia)",
            "n_runs": len(self.runs),
            "source": self.source,
            "runs": [asdict(r) for r in self.runs],
            "skipped": self.skipped,
            "calibration": self.calibration,
        }
        if pop is not None:
            doc["population"] = {
                "mean": dict(zip(PARAMS, map(float, pop.mean))),
                "sd": dict(zip(PARAMS, map(float, np.sqrt(np.diag(pop.cov))))),
                "log_noise": {"mean": pop.log_noise[0], "sd": pop.log_noise[1]},
                "misfit_sd": pop.misfit_sd,
            }
        return doc

    def save(self, path: str) -> None:
        from grpofit.runtime.atomic import write_text

        write_text(path, json.dumps(self.to_json(), indent=1, allow_nan=False) + "\n")

    def calib(self, frac: float) -> dict:
        default = {
            "factors": {m: 1.0 for m in METHODS},
            "shares": {m: 1.0 / len(METHODS) for m in METHODS},
            "narrow": 1.0,
        }
        if not self.calibration:
            return default
        k = min(self.calibration, key=lambda x: abs(float(x) - frac))
        return {**default, **self.calibration[k]}

    def forecast(
        self,
        steps,
        values,
        final_steps,
        *,
        covariates: dict | None = None,
        n_final: int | None = None,
        fraction: float | None = None,
        seed: int = 0,
        first_step: float | None = None,
        calibration: dict | None = None,
    ) -> PriorForecast:
        """The prior-combined forecast of the mean over ``final_steps`` from ``(steps, values)``
        seen (empty: before the first step; then ``first_step`` says where the run starts)."""
        from grpofit.fitting.drift import persistence

        rng = np.random.default_rng(seed)
        steps = np.asarray(steps if steps is not None else [], dtype=float)
        values = np.asarray(values if values is not None else [], dtype=float)
        step0 = float(steps[0]) if steps.size else float(first_step or 0.0)
        final_steps = np.asarray(final_steps, dtype=float)
        n_final = n_final or final_steps.size
        t_final = final_steps - step0
        if t_final.size > 20:
            t_final = t_final[np.linspace(0, t_final.size - 1, 20).round().astype(int)]
        if fraction is None:
            span = float(final_steps[-1]) - step0 if final_steps.size else 0.0
            fraction = 0.0 if not steps.size or span <= 0 else (float(steps[-1]) - step0) / span
        cal = self.calib(fraction) if calibration is None else calibration
        pop = population(self.runs, covariates)
        sig_pop = math.exp(pop.log_noise[0])
        prior_draws = rng.multivariate_normal(pop.mean, pop.cov, size=N_DRAWS, method="cholesky")
        prior_level, _, _, _ = _law_draws(pop, None, None, sig_pop, 1.0, t_final, n_final, rng, prior_draws)
        seen = steps.size >= 4
        check, w, note, z_tail, own, fit = {}, 1.0, None, None, 0.0, None
        if seen:
            t_seen = steps - step0
            sigma = noise_level(values)
            sigma = sigma if math.isfinite(sigma) and sigma > 0 else sig_pop
            check, w = _check(pop, prior_draws, t_seen, values, sigma)
            eta = float(cal.get("eta", 1.0))
            law, plateau, z_tail, fit = _law_draws(
                pop, t_seen, values, sigma, w, t_final, n_final, rng, prior_draws, eta
            )
            own = own_noise_var(values, sigma, n_final)
            gain = _gain_draws(self.runs, covariates, fraction, persistence(values), w, rng, own)
            stay = _stay_draws(self.runs, fraction, persistence(values), w, rng, own)
            weight = _precision_share(prior_level, law, w)
            check["z_reached"] = z_tail
            note = _seen_note(values, check, sigma, sig_pop, w, weight, len(self.runs))
        else:
            law, plateau = prior_level, prior_draws[:, 0]
            gain = _gain_draws(self.runs, covariates, fraction, None, 1.0, rng)
            stay = None
            weight = 1.0
            note = "before the first step: the forecast is the prior's"
        parts = {"law": law, "gain": gain, "stay": stay}
        shares = _shares(parts, cal["shares"], check)
        level = _stack(parts, shares, cal["factors"], rng, float(cal.get("narrow", 1.0)), own)
        bounded = bool(all(0.0 <= r.final_level <= 1.0 for r in self.runs)) and (
            values.size == 0 or (values.min() >= 0.0 and values.max() <= 1.0)
        )
        if bounded:
            level = np.clip(level, 0.0, 1.0)
        q = lambda p: float(np.percentile(level, p))
        # the mean of the draws winsorised at 1/99%: a few wild extrapolations do not move it
        lo1, hi99 = np.percentile(level, [1.0, 99.0])
        out = {
            "mean": float(np.clip(level, lo1, hi99).mean()),
            "median": q(50),
            "pi80": [q(10), q(90)],
            "pi95": [q(2.5), q(97.5)],
        }
        pl = {
            "value": float(np.median(plateau)),
            "ci95": [float(np.percentile(plateau, 2.5)), float(np.percentile(plateau, 97.5))],
            "kind": "estimate",
        }
        return PriorForecast(out, pl, weight, w, check, pop.used, note, parts, shares, fit)


def _seen_note(values, check, sigma, sig_pop, w, weight, n_runs) -> str | None:
    """What a forecast after the first step says about the prior's part: tempered (the run is
    unlike the prior's runs), or little weight (the run's own data decide), or nothing."""
    if w < 0.5:
        return (
            f"the run is unlike the prior's runs (its seen level {values.mean():.3g} against the "
            f"prior's {check['prior_level']:.3g} ± {check['prior_level_sd']:.2g}, noise {sigma:.2g} "
            f"against {sig_pop:.2g}): the prior was tempered to weight {w:.2g}, the run's own data decide"
        )
    if weight < 0.05:
        few = ", too few runs to pin a population" if n_runs < 4 else ""
        return f"the prior's {n_runs} runs add little here (weight {weight:.2g}{few}): the run's own data decide"
    return None


def _scaled(x: np.ndarray, factor: float) -> np.ndarray:
    m = float(np.median(x))
    return m + factor * (x - m)


def _mixture(parts, shares, factors, rng) -> np.ndarray:
    """Draws of the stacked forecast: each method's draws (widened by its calibration factor) in
    proportion to its share (renormalised over the methods present)."""
    total = sum(shares.values()) or 1.0
    out = []
    for m, sh in shares.items():
        k = int(round(sh / total * N_DRAWS))
        if k:
            out.append(rng.choice(_scaled(parts[m], float(factors.get(m, 1.0))), k))
    return np.concatenate(out) if out else parts["law"]


def _disagreement(parts, shares) -> float:
    """The variance of the members' medians, weighted by their shares: how far apart the stack's
    forecasts are."""
    ms = [m for m, sh in shares.items() if sh > 0 and parts.get(m) is not None]
    if len(ms) < 2:
        return 0.0
    w = np.array([shares[m] for m in ms], dtype=float)
    c = np.array([float(np.median(parts[m])) for m in ms])
    w = w / w.sum()
    return float(w @ (c - w @ c) ** 2)


def _stack(parts, shares, factors, rng, narrow: float = 1.0, own_var: float = 0.0) -> np.ndarray:
    """The stacked forecast's draws (:func:`_mixture`), narrowed by the calibration's ``narrow``
    beyond what is never narrowed (:func:`_narrow_at`): the run's own noise (``own_var``) and the
    members' disagreement (:func:`_disagreement`). A member the run's data support is not
    squeezed out of the interval by others' narrower leave-one-out errors."""
    level = _mixture(parts, shares, factors, rng)
    if narrow >= 1.0:
        return level
    return _scaled(level, _narrow_at(level, narrow, own_var + _disagreement(parts, shares)))


def _factor(zs: np.ndarray) -> float:
    """Spread factor from standardised errors: root mean square pooled with one pseudo-
    observation at 1, never below 1."""
    return max(1.0, math.sqrt((1.0 + float(np.sum(zs**2))) / (1.0 + zs.size))) if zs.size else 1.0


def _narrow(zs: np.ndarray) -> float:
    """The stacked interval's narrowing factor from its leave-one-out standardised errors: the
    upper 95% confidence bound of their scale, ``sqrt(sum z^2 / chi2_m(0.05))``, when it is below
    1, else 1. Intervals are narrowed only when the errors show with 95% confidence that they
    are too wide, and only down to that bound (never the run's own noise nor the members'
    disagreement: :func:`_stack`). The errors are the un-narrowed stacks', whose whole spread
    is counted as narrowable: the bound errs wide."""
    m = zs.size
    if m < 4:
        return 1.0
    # the chi-square's 5% point (Wilson-Hilferty)
    q = m * (1.0 - 2.0 / (9.0 * m) - 1.6449 * math.sqrt(2.0 / (9.0 * m))) ** 3
    return min(1.0, math.sqrt(float(np.sum(zs**2)) / q))


def _narrow_at(level: np.ndarray, narrow: float, own_var: float) -> float:
    """The narrowing factor for one forecast: the calibration's applies to the part of the 95%
    interval beyond the run's own noise (``own_var``: the noise of its level reached and of its
    final window's mean), which is never narrowed: a noisy run is not narrowed by quiet runs'
    leave-one-out errors. ``half' = sqrt(narrow^2 (half^2 - own) + own)`` in 95% half-widths."""
    if narrow >= 1.0 or own_var <= 0.0:
        return min(1.0, narrow)
    lo, hi = np.percentile(level, [2.5, 97.5])
    half = (hi - lo) / 2.0
    need = 1.96 * math.sqrt(own_var)
    if half <= need:
        return 1.0
    return math.sqrt(narrow**2 * (half**2 - need**2) + need**2) / half


def _z(draws, actual) -> tuple[float, float]:
    lo, med, hi = np.percentile(draws, [2.5, 50, 97.5])
    half = max((hi - lo) / 2.0 / 1.96, 1e-12)
    return (actual - med) / half, abs(actual - med)


#: the learning rates (the run's data's weight against the population in the law's posterior) tried
ETAS = (1.0, 0.5, 0.25, 0.125, 0.0625)


def _log_score(draws: np.ndarray, actual: float) -> float:
    """The log density of ``actual`` under a normal matched to the draws' median and 95% range."""
    lo, med, hi = np.percentile(draws, [2.5, 50, 97.5])
    sd = max((hi - lo) / 3.92, 1e-12)
    return -math.log(sd) - 0.5 * ((actual - med) / sd) ** 2


def _learn_eta(rows, rng) -> float:
    """The law's learning rate at one cut, by leave-one-out predictive evidence: of :data:`ETAS`,
    the one whose law forecasts of the prior's own runs have the highest summed log score, kept
    only when its gain over the full rate (1) is shown with 95% confidence (a one-sided paired t
    test over the runs): the run's data count fully unless the runs' own ends show that the
    law's extrapolations from this much of a run are worse than its fits promise. The rows' law
    draws and their recent-level gap are replaced by those at the chosen rate."""
    from scipy.stats import t as student_t

    fits = [(j, r[3]) for j, r in enumerate(rows) if r[3] is not None]
    if len(fits) < 4:
        return 1.0
    scores = {}
    for eta in ETAS:
        seed = int(rng.integers(1 << 31))
        scores[eta] = np.array(
            [
                _log_score(law_levels(f, eta, np.random.default_rng(seed + j), 400, tail=False)[0], rows[j][2])
                for j, f in fits
            ]
        )
    best = max(ETAS, key=lambda e: float(scores[e].sum()))
    d = scores[best] - scores[1.0]
    se = float(np.std(d, ddof=1)) / math.sqrt(d.size)
    if best >= 1.0 or not float(d.mean()) > float(student_t.ppf(0.95, d.size - 1)) * se:
        return 1.0
    for j, f in fits:
        level, _, z_tail = law_levels(f, best, rng)
        rows[j][0]["law"] = level
        rows[j][1]["z_reached"] = z_tail
    return best


def _calibrate(runs: list[RunSummary], series: dict, cuts=CAL_CUTS, seed: int = 0) -> dict:
    """Per cut: each method's spread factor and its share of the stacked mixture, from
    leave-one-out forecasts of the prior's own runs (at most :data:`CAL_RUNS`): the factor from
    the standardised errors (:func:`_factor`), the shares from the inverse mean squared errors;
    then the stacked forecast's narrowing factor from its own standardised errors (:func:`_narrow`)."""
    if len(runs) < 4:
        return {}
    rng = np.random.default_rng(seed)
    idx = np.arange(len(runs))
    if idx.size > CAL_RUNS:
        idx = np.sort(rng.choice(idx, CAL_RUNS, replace=False))
    flat = {"factors": {m: 1.0 for m in METHODS}, "shares": {m: 1.0 for m in METHODS}}
    out = {}
    for c in cuts:
        z = {m: [] for m in METHODS}
        err = {m: [] for m in METHODS}
        rows = []
        for i in idx:
            s = runs[i]
            steps, values = series[s.run]
            others = Prior([r for r in runs if r is not s])
            span = float(steps[-1] - steps[0])
            window = steps >= steps[-1] - FINAL_FRACTION * span
            seen = steps <= steps[0] + c * span if c > 0 else np.zeros(steps.size, bool)
            try:
                pf = others.forecast(
                    steps[seen],
                    values[seen],
                    steps[window],
                    covariates=s.covariates,
                    fraction=c,
                    first_step=float(steps[0]),
                    calibration=flat,
                )
            except (np.linalg.LinAlgError, ValueError):
                continue
            rows.append((pf.parts, pf.check, s.final_level, pf.fit))
        eta = _learn_eta(rows, rng) if c > 0 else 1.0
        for parts, _, actual, _ in rows:
            for m in METHODS:
                if parts.get(m) is not None:
                    zz, ee = _z(parts[m], actual)
                    z[m].append(zz)
                    err[m].append(ee)
        factors = {m: _factor(np.array(z[m])) for m in METHODS}
        inv = {m: 1.0 / max(float(np.mean(np.square(err[m]))), 1e-12) ** 2 for m in METHODS if err[m]}
        total = sum(inv.values()) or 1.0
        shares = {m: round(v / total, 4) for m, v in inv.items()}
        zs = [
            _z(_mixture(parts, _shares(parts, shares, check), factors, rng), actual)[0]
            for parts, check, actual, _ in rows
        ]
        out[f"{c:g}"] = {"factors": factors, "shares": shares, "narrow": round(_narrow(np.array(zs)), 4)}
        if c > 0:
            out[f"{c:g}"]["eta"] = eta
    return out


def build_prior(items, *, source: str = "", calibrate: bool = True, seed: int = 0, cache: dict | None = None) -> Prior:
    """A prior from ``items``: ``(name, steps, values, covariates)`` of finished runs
    (``cache``: name -> :class:`RunSummary` already made, e.g. by a leave-one-out loop)."""
    runs, skipped, series = [], [], {}
    for name, steps, values, cov in items:
        s = cache[name] if cache is not None and name in cache else summarise_run(name, steps, values, cov)
        if cache is not None:
            cache[name] = s
        if s is None:
            skipped.append({"run": str(name), "reason": "too few points or no law fit"})
            continue
        runs.append(s)
        series[s.run] = (np.asarray(steps, dtype=float), np.asarray(values, dtype=float))
    prior = Prior(runs, {}, source, skipped)
    if calibrate:
        prior.calibration = _calibrate(runs, series, seed=seed)
    return prior


def from_json(doc: dict, source: str = "") -> Prior:
    from grpofit.core.errors import UsageError

    if not isinstance(doc, dict) or doc.get("schema") != PRIOR_SCHEMA:
        raise UsageError(
            f"{source or 'the prior'} is not a {PRIOR_SCHEMA} document",
            fix="build one with grpofit forecast --prior RUNS... --save-prior FILE",
        )
    runs = []
    for r in doc.get("runs", []):
        runs.append(
            RunSummary(
                r["run"],
                dict(r["params"]),
                float(r["final_level"]),
                float(r["misfit"]),
                float(r["span"]),
                int(r["n_points"]),
                dict(r.get("covariates") or {}),
                list(r.get("levels") or []),
            )
        )
    return Prior(runs, dict(doc.get("calibration") or {}), doc.get("source") or source, list(doc.get("skipped") or []))


def load_prior(
    paths, *, metric: str | None = None, step: str | None = None, exclude=(), calibrate: bool = True, on_run=None
) -> Prior:
    """A prior from ``paths``: saved ``grpofit.prior/1`` documents and/or finished runs (files,
    folders). Runs named in ``exclude`` are left out (the run being forecast)."""
    from grpofit.core.errors import GrpofitError, UsageError
    from grpofit.fitting.analysis import resolve_column
    from grpofit.readers import read_path

    items, saved = [], []
    for path in paths:
        if str(path).endswith(".json") and os.path.isfile(path):
            try:
                with open(path, encoding="utf-8") as f:
                    head = f.read(4096)
                if PRIOR_SCHEMA in head:
                    with open(path, encoding="utf-8") as f:
                        saved.append(from_json(json.load(f), str(path)))
                    continue
            except (OSError, ValueError) as e:
                raise UsageError(
                    f"{path}: cannot read the prior ({e})", fix="pass a grpofit.prior/1 JSON or finished runs"
                ) from None
        for run in read_path(path, step=step):
            if run.name in exclude:
                continue
            try:
                column = resolve_column(run, "reward", metric)
            except GrpofitError:
                continue
            s, v = run.series(column)
            items.append((run.name, s, v, covariates_of(run)))
    built = build_prior(items, source=", ".join(map(str, paths)), calibrate=calibrate and not saved) if items else None
    if not saved:
        if built is None or not built.runs:
            raise UsageError(
                f"--prior {' '.join(map(str, paths))}: no finished run could be summarised",
                fix="pass finished runs with a reward column, or a saved grpofit.prior/1 file",
            )
        return built
    runs = [r for p in saved for r in p.runs if r.run not in exclude] + (built.runs if built else [])
    calib = saved[0].calibration if len(saved) == 1 and built is None else {}
    return Prior(runs, calib, ", ".join(map(str, paths)), [s for p in saved for s in p.skipped])


def prior_block(prior: Prior, pf: PriorForecast) -> dict:
    """The contract's ``"prior"`` entry of a forecast run."""
    return {
        "runs": len(prior.runs),
        "source": prior.source,
        "weight": round(pf.weight, 4),
        "tempering": round(pf.tempering, 4),
        "covariates": pf.used,
        "check": pf.check or None,
        "used": [r.run for r in prior.runs][:200],
        "note": pf.note,
    }


def resolve_prior(prior, *, metric: str | None = None, step: str | None = None) -> Prior | None:
    """What ``forecast(..., prior=...)`` and ``--prior`` take: a :class:`Prior`, a path or list of
    paths (finished runs and/or saved ``grpofit.prior/1`` files), or a loaded prior document."""
    if prior is None or isinstance(prior, Prior):
        return prior
    if isinstance(prior, dict):
        return from_json(prior)
    paths = [prior] if isinstance(prior, (str, os.PathLike)) else list(prior)
    return load_prior([str(p) for p in paths], metric=metric, step=step)


#: a gain smaller than this share of the level reached is "no further gain"
SMALL_GAIN = 0.01


def _recommend(gain: dict, horizon_step, last: float) -> str:
    """From the prior-combined remaining gain's 95% interval: "no further gain expected" only when
    its upper end is small; "keep going" when its lower end is above zero; else "cannot tell yet"."""
    h = f"{horizon_step:g}" if isinstance(horizon_step, float) else str(horizon_step)
    if float(horizon_step) <= last:
        return f"done: the planned end (step {h}) is already reached"
    lo, hi = gain["ci95"]
    v = gain["value"]
    if hi <= SMALL_GAIN:
        return f"no further gain expected (with the prior): at most {hi:.3g} more by step {h}"
    if lo > 0:
        return (
            f"keep going (with the prior): {v:.3g} of reward still expected before step {h} (95%: {lo:.3g} to {hi:.3g})"
        )
    return f"cannot tell yet (with the prior): the gain by step {h} is between {lo:.3g} and {hi:.3g}"


def apply_prior(
    entry: dict, prior: Prior, steps, values, horizon_step, *, covariates: dict | None = None, seed: int = 0
) -> PriorForecast | None:
    """Combine ``prior`` with the run's seen ``(steps, values)`` for the horizon step and write
    it into the forecast ``entry``: ``at[0]`` gets the prior-combined mean and intervals (the
    forecast without the prior is kept under ``without_prior``), ``remaining_gain`` follows, and
    ``prior`` says how many runs, from where, and the weight the prior got."""
    from grpofit.fitting.drift import persistence

    steps = np.asarray(steps, dtype=float)
    values = np.asarray(values, dtype=float)
    keep = np.isfinite(steps) & np.isfinite(values)
    steps, values = steps[keep], values[keep]
    exclude = {entry.get("run")}
    if any(r.run in exclude for r in prior.runs):
        prior = Prior([r for r in prior.runs if r.run not in exclude], prior.calibration, prior.source, prior.skipped)
    if len(prior.runs) < 2:
        entry["prior"] = {
            "runs": len(prior.runs),
            "source": prior.source,
            "weight": 0.0,
            "note": "a prior needs at least two finished runs other than this one",
        }
        return None
    if horizon_step is None:
        entry["prior"] = {
            "runs": len(prior.runs),
            "source": prior.source,
            "weight": 0.0,
            "note": "no plan length (pass --horizon N): the prior forecasts the planned end",
        }
        return None
    first = float(steps[0]) if steps.size else 0.0
    pf = prior.forecast(
        steps, values, [float(horizon_step)], covariates=covariates, n_final=1, seed=seed, first_step=first
    )
    at0 = entry["at"][0]
    at0["without_prior"] = {k: at0.get(k) for k in ("mean", "pi80", "pi95")}
    at0.update(
        {
            "mean": pf.final["mean"],
            "median": pf.final["median"],
            "pi80": pf.final["pi80"],
            "pi95": pf.final["pi95"],
            "kind": "interval",
            "method": "prior",
        }
    )
    if steps.size:
        now = persistence(values)
        entry["remaining_gain"] = {
            "value": pf.final["median"] - now,
            "ci95": [pf.final["pi95"][0] - now, pf.final["pi95"][1] - now],
            "kind": "estimate",
            "source": "prior",
        }
        entry["recommendation"] = _recommend(entry["remaining_gain"], horizon_step, float(steps[-1]))
    for key in ("plateau", "steps_to_90", "steps_to_95"):  # the run's own law: said so, not mixed with the prior's
        if isinstance(entry.get(key), dict) and entry[key].get("value") is not None:
            entry[key]["source"] = "the run's own data (without the prior)"
    entry["prior"] = prior_block(prior, pf)
    entry["prior"]["plateau"] = pf.plateau
    if pf.note and (entry.get("note") or "").startswith("cannot forecast"):
        entry["note"] = f"{entry['note']}; with the prior: {pf.note}"
    elif entry.get("note") and entry["note"].startswith("cannot forecast"):
        entry["note"] = f"{entry['note']}; the prior's forecast is given instead"
    elif pf.note:
        entry["note"] = pf.note if not entry.get("note") else f"{entry['note']}; {pf.note}"
    return pf
