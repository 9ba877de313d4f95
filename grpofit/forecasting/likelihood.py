"""Exact Gaussian likelihood of a state-space law, its maximum and its curvature.

For one law (:mod:`.statespace`) and nonlinear parameters ``theta`` (log timescales and the log
forcing sd, or its ratio to the observation sd when that is not known) the observations ``y``
at times ``t`` are ``N(X beta, P(theta) + diag(v))``: ``P`` the forcing's covariance (the
matrix a Kalman filter propagates, :mod:`.kalman` checks it), ``v`` the observation variance of
each (binned) point. The levels ``beta`` (plateau, amplitudes) have a broad Gaussian prior and
are integrated out in closed form (:func:`system`), so the likelihood is a proper marginal
likelihood, comparable between laws; an unknown observation scale is profiled out. Model
choice: ``BIC = 2 nll + k ln n`` over the maximised parameters. Everything is dense linear
algebra on at most :data:`MAX_POINTS` points (long series are binned), no Python loop over
points.

:func:`fit_law` maximises it from a few starts (scipy's L-BFGS-B, :mod:`.lbfgsb`, in log
coordinates with bounds) and returns a
:class:`LawFit` carrying a Laplace approximation of the parameters' uncertainty (numerical
Hessian of the negative log likelihood).
"""

from __future__ import annotations

import functools
import math
import operator
from dataclasses import dataclass, field

import numpy as np

from grpofit.fitting.binning import bin_tail
from grpofit.fitting.drift import persistence
from grpofit.forecasting.statespace import LAWS, design, forcing_q, forcing_times, process_cov_parts

__all__ = ["Series", "LawFit", "reduce_series", "evaluate", "fit_law", "MAX_POINTS"]

#: at most this many points enter the likelihood: the first :data:`RAW_HEAD` as logged, then
#: equal-width bins (the bin mean's observation variance is the point variance / count)
MAX_POINTS = 90
RAW_HEAD = 25
LOG2PI = math.log(2.0 * math.pi)


@dataclass
class Series:
    """The (binned) data the likelihood sees."""

    t: np.ndarray  #: time from the first logged step
    y: np.ndarray  #: bin means
    count: np.ndarray  #: points per bin
    point_var: np.ndarray | None  #: known observation variance per point (binomial), or None
    scale: float  #: the data's range (for bounds)
    noise: float  #: a robust first guess of the per-point noise sd
    dt: float  #: median logging interval
    level: float = 0.0  #: prior mean of the plateau: the mean of the last tenth of the points
    level_sd: float = 1.0  #: prior sd of the plateau and of each mode's amplitude (reward units)
    #: relative observation variance per (binned) point when the noise is profiled (a link
    #: stretches it near the bounds, :mod:`.bounds`); None: the same for every point
    rel_var: np.ndarray | None = None
    #: arrays derived from the times alone (:func:`memo`), built once and reused by every
    #: evaluation of the likelihood; not copied by ``dataclasses.replace``
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def obs_var(self) -> np.ndarray:
        """Observation variance of each point: known, or in units of the profiled scale."""
        if self.point_var is not None:
            return self.point_var / self.count
        if self.rel_var is not None:
            return self.rel_var / self.count
        return 1.0 / self.count


def memo(series: Series, key: str, inputs: tuple, build):
    """``build()``, kept in ``series`` under ``key`` while ``inputs`` (arrays it is computed from)
    are the same objects: the likelihood's search evaluates thousands of parameter points on the
    same times, and the lag matrices do not depend on the parameters."""
    hit = series._memo.get(key)
    if hit is not None and len(hit[0]) == len(inputs) and all(map(operator.is_, hit[0], inputs)):
        return hit[1]
    value = build()
    series._memo[key] = (inputs, value)
    return value


def remembered(nll):
    """``theta -> nll(theta)`` (``theta`` as a float array), a point asked for again returned from
    a dictionary: the search and the Hessian's steps come back to some."""
    seen: dict = {}

    def f(theta) -> float:
        theta = np.asarray(theta, dtype=float)
        key = theta.tobytes()
        value = seen.get(key)
        if value is None:
            value = seen[key] = nll(theta)
        return value

    return f


def lags(series: Series, s=None, t=None, key: str = "lags"):
    """``((values, index), min(s_i, t_j))`` for ``s``, ``t`` (default: the series' own times):
    the lags ``|t_j - s_i| = values[index]`` (distinct values; the ``lag`` of
    :func:`~.statespace.process_cov`) and :func:`~.walk.walk_cov`'s ``min``, computed as they
    compute them; kept in the series under ``key`` while ``s`` and ``t`` are the same arrays."""
    s = series.t if s is None else s
    t = series.t if t is None else t

    def build():
        sf = np.asarray(s, dtype=float)
        tf = np.asarray(t, dtype=float)
        d = np.abs(tf[None, :] - sf[:, None])
        values, index = np.unique(d, return_inverse=True)
        return (values, index.reshape(d.shape)), np.minimum(sf[:, None], tf[None, :])

    return memo(series, key, (s, t), build)


@functools.cache
def _trtrs():
    """LAPACK's ``dtrtrs`` (``scipy.linalg.lapack``), the routine
    ``scipy.linalg.solve_triangular`` calls for float64 arrays, looked up once."""
    from scipy.linalg.lapack import dtrtrs

    return dtrtrs


def tri_solve(L: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``scipy.linalg.solve_triangular(L, b, lower=True, check_finite=False)``: the same LAPACK
    call (``trtrs``) with the same arguments, without the wrapper's per-call validation (the
    likelihood's search makes tens of thousands of these calls on small matrices)."""
    if not (
        isinstance(L, np.ndarray)
        and isinstance(b, np.ndarray)
        and L.dtype == np.float64
        and b.dtype == np.float64
        and L.ndim == 2
        and b.ndim in (1, 2)
        and b.size
        and L.shape[0] == L.shape[1] == b.shape[0]
    ):
        from scipy.linalg import solve_triangular

        return solve_triangular(L, b, lower=True, check_finite=False)
    trtrs = _trtrs()
    if L.flags.f_contiguous:
        x, info = trtrs(L, b, overwrite_b=False, lower=True, trans=0, unitdiag=False)
    else:  # the transposed system, as solve_triangular solves a C-ordered matrix
        x, info = trtrs(L.T, b, overwrite_b=False, lower=False, trans=True, unitdiag=False)
    if info > 0:
        raise np.linalg.LinAlgError(f"singular matrix: resolution failed at diagonal {info - 1}")
    if info < 0:
        raise ValueError(f"illegal value in {-info}-th argument of internal trtrs")
    return x


def reduce_series(
    t: np.ndarray,
    y: np.ndarray,
    point_var: np.ndarray | None = None,
    *,
    level_sd: float | None = None,
    rel_var: np.ndarray | None = None,
) -> Series:
    """Bin a long series to at most :data:`MAX_POINTS` points (the head stays as logged).

    ``level_sd``: the prior sd of the levels (default twice the data's range). ``rel_var``:
    relative observation variance per point (profiled noise only)."""
    t = np.asarray(t, dtype=float)
    y = np.asarray(y, dtype=float)
    out = _reduce(t, y, point_var)
    if rel_var is not None and point_var is None:
        rv = np.asarray(rel_var, dtype=float)
        out.rel_var = rv if t.size <= MAX_POINTS else bin_tail(t, [rv], RAW_HEAD, MAX_POINTS)[1][0]
    out.level = persistence(y)
    out.level_sd = float(level_sd) if level_sd else 2.0 * out.scale
    return out


def _reduce(t: np.ndarray, y: np.ndarray, point_var) -> Series:
    n = t.size
    dt = float(np.median(np.diff(t))) if n > 1 else 1.0
    d = np.diff(y)
    noise = float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2.0)) if n > 2 else 0.0
    scale = float(np.ptp(y)) if n else 0.0
    noise = max(noise, 1e-3 * max(scale, 1e-12), 1e-12)
    scale = max(scale, noise)
    if n <= MAX_POINTS:
        pv = None if point_var is None else np.asarray(point_var, dtype=float)
        return Series(t, y, np.ones(n), pv, scale, noise, dt)
    if point_var is None:
        tb, (yb,), cb = bin_tail(t, [y], RAW_HEAD, MAX_POINTS)
        return Series(tb, yb, cb, None, scale, noise, dt)
    tb, (yb, pv), cb = bin_tail(t, [y, np.asarray(point_var, dtype=float)], RAW_HEAD, MAX_POINTS)
    return Series(tb, yb, cb, pv, scale, noise, dt)


def unpack(law: str, theta: np.ndarray):
    """``(times, sd)`` from the log-coordinates ``theta``: the law's form reads its times off
    the first coordinates (``from_log``, e.g. ``two``'s ``theta[0] = log T_slow``,
    ``theta[1] = log(T_slow / (2 T_fast)) >= 0``: the modes never swap and the slow one stays
    within its bound), the next one is ``log sd``. ``sd`` is the forcing's stationary sd
    when the observation noise is known, else its ratio to the per-point observation sd."""
    theta = np.asarray(theta, dtype=float)
    times = LAWS[law].from_log(theta)
    return times, math.exp(theta[len(times)])


@dataclass
class Evaluation:
    reml: float  #: the objective: negative log marginal likelihood (levels integrated out)
    nll: float  #: the same number (kept apart for callers that name it so)
    beta: np.ndarray | None = None
    beta_cov: np.ndarray | None = None
    sigma: float | None = None  #: per-point observation sd (profiled) when it is not known
    dof: int = 0  #: degrees of freedom of the profiled scale


def system(law: str, theta, series: Series):
    """``(times, sd, X, b0, Sb, S)``: the law's times and forcing, its design matrix at the seen
    points, the levels' prior mean and covariance, and the covariance of the seen points
    ``S = P + diag(v) + X Sb X'`` (in units of the profiled scale when the noise is unknown).

    The levels (plateau, amplitudes) get a broad Gaussian prior: plateau around the last tenth
    of the points, amplitudes around 0, sd :attr:`Series.level_sd` each. Integrating them out
    gives a proper marginal likelihood (comparable between laws) and keeps two nearly equal
    slow modes from trading huge opposite amplitudes."""
    times, sd = unpack(law, theta)
    unit = prior_unit(series)
    X, shape, XSX = _times_parts(law, times, series, unit)
    static = _static(series)
    b0, Sb = _level_prior(static, X.shape[1], series.level, unit)
    return times, sd, X, b0, Sb, covariance(law, times, sd, shape, XSX, static)


def prior_unit(series: Series) -> float:
    """The levels' prior sd in the likelihood's units (those of the profiled scale when the
    noise is unknown)."""
    return series.level_sd if series.point_var is not None else series.level_sd / series.noise


def covariance(law: str, times, sd: float, shape: np.ndarray, XSX: np.ndarray, static: "_Static") -> np.ndarray:
    """``S = P + diag(v) + X Sb X'`` (a new array) from the parts of :func:`_times_parts`."""
    if sd <= 0:
        S = np.zeros(shape.shape)
    else:  # process_cov(law, series.t, series.t, times, sd)
        q = forcing_q(law, times, sd)
        S = (q * q) * shape
    np.einsum("ii->i", S)[...] += static.obs_var  # the diagonal (a view of it)
    S += XSX  # X @ Sb @ X.T
    return S


@dataclass
class _Static:
    """What :func:`system` needs of a series besides the parameters, built once per series."""

    obs_var: np.ndarray  #: :meth:`Series.obs_var`
    times: dict = field(default_factory=dict)  #: {times: parts} (:func:`_times_parts`)
    forcing: dict = field(default_factory=dict)  #: {forcing times: P1} (:func:`_forcing_parts`)
    priors: dict = field(default_factory=dict)  #: {(levels, level, unit): (b0, Sb)}


def _static(series: Series) -> _Static:
    """The series' :class:`_Static` (kept while its times, counts and variances are the same arrays)."""
    return memo(
        series, "static", (series.t, series.count, series.point_var, series.rel_var), lambda: _Static(series.obs_var())
    )


def _level_prior(static: _Static, p: int, level: float, unit: float):
    """``(b0, Sb)``: the levels' prior mean (the plateau at ``level``, amplitudes 0) and
    covariance (``unit^2`` on the diagonal); read only."""
    key = (p, level, unit)
    hit = static.priors.get(key)
    if hit is None:
        b0 = np.zeros(p)
        b0[0] = level
        hit = static.priors[key] = (b0, np.eye(p) * unit * unit)
    return hit


#: parameter points whose time-dependent parts :func:`system` keeps per series and law
_TIMES_KEPT = 16


def _times_parts(law: str, times, series: Series, unit: float):
    """``(X, P1, X Sb X')``: the design matrix, the forcing's covariance at unit strength
    (:func:`~.statespace.process_cov_parts`) and the levels' prior covariance at the seen points,
    which depend on the law's times and not on its forcing sd (nor on the walk): the search's
    finite-difference steps along those coordinates, and the Laplace Hessian's, reuse them. Kept
    for the last :data:`_TIMES_KEPT` distinct ``times`` (compared exactly)."""
    kept = _static(series).times
    key = (law, unit) + tuple(map(float, times))
    hit = kept.get(key)
    if hit is not None:
        return hit
    X = design(law, series.t, times)
    Sb = np.eye(X.shape[1]) * unit * unit
    parts = (X, _forcing_parts(law, times, series), X @ Sb @ X.T)
    if len(kept) >= _TIMES_KEPT:
        del kept[next(iter(kept))]
    kept[key] = parts
    return parts


def _forcing_parts(law: str, times, series: Series) -> np.ndarray:
    """:func:`~.statespace.process_cov_parts` at the seen points (read only), kept for the last
    :data:`_TIMES_KEPT` distinct times it depends on (:func:`~.statespace.forcing_times`:
    ``two``'s search steps along its fast time reuse it)."""
    kept = _static(series).forcing
    key = (law,) + forcing_times(law, times)
    hit = kept.get(key)
    if hit is None:
        hit = process_cov_parts(law, series.t, series.t, times, lag=lags(series)[0])
        if len(kept) >= _TIMES_KEPT:
            del kept[next(iter(kept))]
        kept[key] = hit
    return hit


def evaluate(law: str, theta, series: Series, *, levels: bool = False) -> Evaluation:
    """Negative log marginal likelihood of ``theta`` (levels integrated out; the observation
    scale profiled when the noise is unknown); ``inf`` when singular."""
    known = series.point_var is not None
    with np.errstate(all="ignore"):
        times, sd, X, b0, Sb, S = system(law, theta, series)
        g = gaussian_nll(S, series.y - X @ b0, known)
    if g is None:
        return Evaluation(math.inf, math.inf)
    nll, L, w, s2 = g
    out = Evaluation(nll, nll, sigma=None if known else math.sqrt(s2), dof=series.t.size)
    if levels:
        V = tri_solve(L, X @ Sb)
        out.beta = b0 + V.T @ w
        out.beta_cov = s2 * (Sb - V.T @ V)
    return out


def gaussian_nll(S: np.ndarray, resid: np.ndarray, known: bool):
    """``(nll, L, w, s2)`` of ``resid ~ N(0, s2 S)``: ``s2 = 1`` when the noise is known, else
    profiled (``q / n``); ``L`` the Cholesky factor of ``S`` and ``w = L^-1 resid``. ``None``
    when ``S`` is not positive definite or the value is not finite. Call inside ``errstate``."""
    n = resid.size
    try:
        L = np.linalg.cholesky(S)
    except np.linalg.LinAlgError:
        return None
    w = tri_solve(L, resid)
    q = float(w @ w)
    logdet = 2.0 * float(np.log(L.diagonal()).sum())
    if known:
        s2 = 1.0
        nll = 0.5 * (q + logdet + n * LOG2PI)
    else:
        s2 = q / n
        if not s2 > 0:
            return None
        nll = 0.5 * (n * math.log(s2) + logdet + n * (LOG2PI + 1.0))
    return (nll, L, w, s2) if math.isfinite(nll) else None


@dataclass
class LawFit:
    """The maximum of one law's likelihood and the Laplace approximation around it."""

    law: str
    theta: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    theta_cov: np.ndarray
    reml: float
    nll: float
    beta: np.ndarray
    beta_cov: np.ndarray
    sigma: float | None  #: profiled per-point observation sd (None: known, binomial)
    dof: int
    n: int
    known_noise: bool

    @property
    def k(self) -> int:
        """Parameters maximised (the levels are integrated out)."""
        return self.theta.size + (0 if self.known_noise else 1)

    @property
    def bic(self) -> float:
        return 2.0 * self.nll + self.k * math.log(max(self.n, 2))

    def params(self) -> dict:
        times, sd = unpack(self.law, self.theta)
        out = {name: float(v) for name, v in zip(LAWS[self.law].times, times)}
        out.update({name: float(v) for name, v in zip(LAWS[self.law].levels, self.beta)})
        out["forcing_sd"] = float(sd if self.known_noise else sd * self.sigma)
        out["noise_sd"] = None if self.sigma is None else float(self.sigma)
        return out


def bounds_for(law: str, series: Series, t_max: float):
    """Box bounds of ``theta`` (log coordinates)."""
    t_lo = math.log(max(series.dt / 4.0, 1e-300))  # relative to the stride: steps 1e-10 apart work too
    t_hi = max(math.log(max(t_max, 10.0 * series.dt, 1e-300)), t_lo + math.log(40.0))
    lo, hi = LAWS[law].log_bounds(t_lo, t_hi, series.dt)
    lo, hi = list(lo), list(hi)
    if series.point_var is not None:  # the forcing sd itself
        lo.append(math.log(1e-4 * series.noise))
        hi.append(math.log(0.5 * series.scale))
    else:  # its ratio to the observation sd
        lo.append(math.log(1e-3))
        hi.append(math.log(max(series.scale / series.noise, 10.0)))
    return np.array(lo), np.array(hi)


def _starts(law: str, series: Series, t_guess: float, prior=None) -> list[np.ndarray]:
    """Starting points (the law's form's ``starts``); ``prior`` is the fitted ``one`` law's
    ``theta`` (its timescale and forcing start the richer laws, so they cannot end worse than
    it for a bad start)."""
    if series.point_var is not None:
        sd0 = [0.3 * series.noise, 0.05 * series.scale + 0.1 * series.noise]
    else:
        sd0 = [0.3, 0.05 * series.scale / series.noise + 0.1]
    out = LAWS[law].starts(t_guess, sd0, prior)
    return [np.asarray(s, dtype=float) for s in out]


def fit_law(law: str, series: Series, *, t_guess: float, t_max: float, prior=None, warm=None) -> LawFit | None:
    """Maximise ``law``'s marginal likelihood; ``None`` when every start fails.

    ``warm``: a ``theta`` of the same law fitted before (``grpofit watch`` refitting a run that
    has grown a little): the search starts there alone, and falls back to the usual starts only
    when it fails."""
    known = series.point_var is not None
    lo, hi = bounds_for(law, series, t_max)
    t_guess = float(np.clip(t_guess, math.exp(lo[0]) * 1.01, math.exp(hi[0]) * 0.99))

    def f(theta):
        return evaluate(law, theta, series).reml

    best = minimise(f, lo, hi, lambda: _starts(law, series, t_guess, prior), warm)
    if best is None:
        return None
    theta = np.clip(best.x, lo, hi)
    ev = evaluate(law, theta, series, levels=True)
    if not math.isfinite(ev.reml):
        return None
    cov = laplace_cov(f, theta, lo, hi)
    return LawFit(
        law, theta, lo, hi, cov, ev.reml, ev.nll, ev.beta, ev.beta_cov, ev.sigma, ev.dof, int(series.t.size), known
    )


def minimise(f, lo: np.ndarray, hi: np.ndarray, starts, warm=None):
    """The best bounded L-BFGS-B minimum of ``f`` (scipy's, :mod:`.lbfgsb`; ``None`` when
    every start fails), as ``.x`` and ``.fun``: from
    ``warm`` alone when it is a finite point of the right shape and succeeds, else from each of
    ``starts()`` (a callable, so the usual starts are only built when needed)."""
    from grpofit.forecasting.lbfgsb import minimize

    def search(points):
        best = None
        for x0 in points:
            x0 = np.minimum(np.maximum(x0, lo + 1e-6), hi - 1e-6)  # np.clip, without its overhead
            res = _Minimum(*minimize(f, x0, lo, hi, maxiter=40, eps=1e-5, ftol=1e-7))
            if np.isfinite(res.fun) and (best is None or res.fun < best.fun):
                best = res
        return best

    best = None
    if warm is not None and np.shape(warm) == lo.shape and np.all(np.isfinite(warm)):
        best = search([np.asarray(warm, dtype=float)])
    return best if best is not None else search(starts())


@dataclass
class _Minimum:
    x: np.ndarray
    fun: float


def laplace_cov(f, theta: np.ndarray, lo: np.ndarray, hi: np.ndarray, h: float = 0.02) -> np.ndarray:
    """Inverse of the numerical Hessian of ``f`` at ``theta`` (made positive definite; a flat
    direction gets the variance of a uniform distribution over its whole bound range)."""
    k = theta.size
    H = np.zeros((k, k))
    width = np.maximum(hi - lo, 1e-9)
    steps = [np.zeros(k)]  # the points' steps from theta, in the order the formulas read them
    for i in range(k):
        ei = np.zeros(k)
        ei[i] = h
        steps += [ei, -ei]
        for j in range(i):
            ej = np.zeros(k)
            ej[j] = h
            steps += [ei + ej, ei - ej, -ei + ej, -ei - ej]
    x = theta + np.array(steps)
    finite = np.all(np.isfinite(x), axis=1)
    x = np.clip(x, lo, hi)
    many = getattr(f, "many", None)
    if many is not None:  # every point in one call (the compiled objective of :mod:`.filtered`)
        values = np.where(finite, many(np.where(finite[:, None], x, theta)), math.inf)
    else:
        values = np.array([f(xi) if ok else math.inf for xi, ok in zip(x, finite)])
    f0, at = values[0], iter(values[1:])
    for i in range(k):
        fp, fm = next(at), next(at)
        H[i, i] = (fp - 2.0 * f0 + fm) / (h * h)
        for j in range(i):
            v = (next(at) - next(at) - next(at) + next(at)) / (4.0 * h * h)
            H[i, j] = H[j, i] = v
    H[~np.isfinite(H)] = 0.0
    w, V = np.linalg.eigh(0.5 * (H + H.T))
    cap = 1.0 / ((width.max() ** 2) / 12.0)  # no direction vaguer than uniform over its bounds
    w = np.maximum(w, cap)
    return (V / w) @ V.T
