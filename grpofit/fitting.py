"""Fit the two laws to one series, with honest uncertainties.

``fit_series(steps, values)`` fits the single exponential and the damped oscillator
(:mod:`grpofit.models`) through lmfit and returns a :class:`FitResult` whose ``summary()`` is
one entry of the contract's ``fit`` runs list.

Method (documented here once; the README links to it):

- **Time origin**: ``t = step - step[0]``; steps are used as logged.
- **Data reduction**: points after ``10 dt`` are pooled in log-spaced bins 12% of their time
  wide and the fits are weighted least squares on the bin means (exact up to ``3e-4`` of the
  gain for a relaxation curve of any timescale); SSR, R^2, AIC/BIC and all uncertainties
  are then computed on every point.
- **Starts**: deterministic data-driven guesses (:func:`grpofit.models.guess_exponential`:
  tail mean, head, half-rise crossing; :func:`grpofit.models.guess_oscillator`: 10%/50%
  crossings for the slow start, overshoot for an underdamped run). They centre a fixed grid
  over (damping ratio x timescale) evaluated on the bins with the two levels solved
  linearly; each model starts from the better of its guess and its grid point. The grid is
  also the damping ratio's profile likelihood (below).
- **Solver**: one lmfit ``Minimizer.leastsq`` call (MINPACK Levenberg-Marquardt, lmfit maps
  the bounds) for both models at once (residuals stacked, Jacobian block-diagonal, so each
  block is its own least squares), with the analytic Jacobians (:data:`METHOD` switches to
  ``least_squares``/TRF, ~2x slower per fit here). Restarts only for a poor fit: from the
  exponential's solution when the oscillator (which nests it at inertia 0) fits worse, and
  from the grid's best point when that beats the fit by more than ``2 sigma^2``.
- **Bounds**: ``timescale`` in ``[dt/10, 10 spans]``, ``inertia`` in ``[0, 10 spans]``,
  ``plateau`` and ``initial`` within one data range of the observed range
  (:data:`grpofit.models.LEVEL_MARGIN`): a plateau is never extrapolated further. Intervals
  that reach a bound are clipped to it and say so in ``note`` (not pinned down by the data).
- **Uncertainties**: training-curve residuals are autocorrelated and heteroscedastic, so the
  textbook covariance is far too narrow. grpofit uses the HAC (Newey-West, Bartlett kernel)
  sandwich ``B^-1 Omega B^-1`` from the Jacobian and residuals on every point
  (``B = J'J``, ``Omega = sum_j w_j sum_t s_t s_{t-j}'``, ``s_t = J_t r_t``). Bandwidth: the
  larger of Andrews' plug-in for a "white + AR(1)" fit of the residual autocorrelation and
  :data:`MIN_BANDWIDTH_FRACTION` of the series (slow forcing is often too weak to see in the
  residual ACF yet inflates the long-run variance several times); the 95% critical value is
  the fixed-b one for Bartlett (Kiefer-Vogelsang 2005:
  ``1.96 + 2.9694 b + 0.4160 b^2 - 0.5324 b^3``, ``b = L/n``). Timescale and inertia
  intervals are widened by half the logging interval on each side (time is resolved only to
  the logging grid).
- **Damping ratio and inertia**: inertia sits at its bound 0 in overdamped runs, where the
  Jacobian is singular and delta-method intervals fail. Their 95% intervals come from the
  profile likelihood over the grid of damping ratios (:data:`ZETA_GRID`, 0.15 .. 12, plus
  infinity = inertia 0) and the fit itself: ``zeta`` is inside when
  ``dSSR(zeta) <= PROFILE_CALIBRATION * cv^2 * LRV(v r) / sum(v^2)`` (a sandwich-adjusted
  likelihood ratio; ``v`` is the constrained minus the best curve, ``LRV`` its HAC long-run
  variance, floored at the uncorrelated value). The ends are interpolated, then refined
  once by profiling at them. ``ci95`` of the damping ratio is ``[lo, None]`` when infinity
  (inertia 0) is inside. The levels' and timescale's intervals also cover the curves the
  profile accepts.
- **Regime** (:func:`regime_rule`): ``critical`` if the damping-ratio interval lies inside
  :data:`CRITICAL_BAND` ``[0.9, 1.1]``; ``overdamped`` if its lower end exceeds 1;
  ``underdamped`` if its upper end is below 1; otherwise ``indeterminate`` (straddles one,
  the profile is flat, no detectable rise, or the fit failed).
- **Preferred model**: the oscillator when its BIC is lower than the exponential's by more
  than :data:`PREFER_DELTA_BIC` (= 2), else the exponential (the simpler law wins ties).
  ``AIC = n ln(SSR/n) + 2k``, ``BIC = n ln(SSR/n) + k ln n`` (lmfit's convention).
- **No rise**: when ``plateau - initial`` is within its 95% interval of 0, timescale,
  inertia and damping ratio get no interval (note: "no detectable rise").
- **Noise floor** (``FitResult.noise``): ``noise_sd = 1.4826 MAD(diff(y)) / sqrt(2)``,
  ``residual_sd`` of the preferred model, ``r2_ceiling = 1 - noise_sd^2 / var(y)`` (the best
  R^2 any smooth model can reach), ``fit_vs_noise = residual_sd / noise_sd`` and the HAC
  bandwidth used.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grpofit.errors import TooFewPoints
from grpofit.models import (
    EXPONENTIAL,
    MODELS,
    OSCILLATOR,
    CurveModel,
    damping_ratio,
    relaxation,
)

__all__ = [
    "MIN_POINTS",
    "PREFER_DELTA_BIC",
    "CRITICAL_BAND",
    "Estimate",
    "ModelFit",
    "FitResult",
    "fit_series",
    "regime_rule",
    "noise_floor",
]

#: fewer finite points than this raise :class:`grpofit.errors.TooFewPoints`
MIN_POINTS = 8
#: the oscillator is preferred when ``BIC(exponential) - BIC(oscillator) > PREFER_DELTA_BIC``
PREFER_DELTA_BIC = 2.0
#: ``critical`` only when the whole 95% interval of the damping ratio lies in this band
CRITICAL_BAND = (0.9, 1.1)
#: damping ratios of the profile grid (plus infinity = inertia 0)
ZETA_GRID = np.geomspace(0.15, 12.0, 19)
_TS_FACTORS = np.geomspace(0.2, 5.0, 9)
_BIN_WIDTH = 0.12  # log-bins are this fraction of their time wide
_MAX_NFEV = 300
#: profile-likelihood thresholds are ``PROFILE_CALIBRATION * cv^2 * HAC(v r)/sum(v^2)``: with
#: the plain cut (1.0) the damping-ratio interval covered the truth in 82-87% of the synthetic
#: recovery runs (misses just outside the ends); 1.3 gives ~90% at 10-20% indeterminate
#: regimes among clearly damped runs (1.5: 90-95%, up to 23% indeterminate)
PROFILE_CALIBRATION = 1.3
#: the HAC bandwidth is at least this fraction of the series (fixed-b): the slow forcing of a
#: training curve is often too weak to detect in the residual autocorrelation (c ~ 0.01) yet
#: inflates the long-run variance several times (1 + 2 c tau with tau ~ 100s of points)
MIN_BANDWIDTH_FRACTION = 0.1
#: lmfit method: "leastsq" (MINPACK Levenberg-Marquardt, lmfit maps the bounds) is several
#: times cheaper per iteration than "least_squares" (scipy TRF, native bounds); both use the
#: analytic Jacobian
METHOD = "leastsq"
_AT_ZERO = 1e-4  # inertia / timescale below this counts as "at its bound 0"


# ---------------------------------------------------------------------------------------------
# results


def _num(x: Any) -> float | None:
    """A JSON-safe float: ``None`` for ``None``, NaN and infinity."""
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


@dataclass
class Estimate:
    """A parameter value with its standard error and 95% interval (``None`` + ``note`` why)."""

    value: float | None
    stderr: float | None = None
    ci95: tuple[float | None, float | None] | None = None
    note: str | None = None

    def __post_init__(self):
        self.value = _num(self.value)
        self.stderr = _num(self.stderr)
        if self.ci95 is not None:
            self.ci95 = (_num(self.ci95[0]), _num(self.ci95[1]))

    def summary(self) -> dict:
        """``{"value", "stderr", "ci95"}`` (+ ``"note"`` when there is one); JSON-safe.

        ``ci95`` is ``[lo, hi]``; an end is ``None`` when it is unbounded (a damping ratio with
        inertia consistent with 0 has no upper end)."""
        ci = None
        if self.ci95 is not None:
            lo, hi = _num(self.ci95[0]), _num(self.ci95[1])
            ci = None if lo is None and hi is None else [lo, hi]
        out = {"value": _num(self.value), "stderr": _num(self.stderr), "ci95": ci}
        if self.note:
            out["note"] = self.note
        return out


@dataclass
class ModelFit:
    """One model fitted to one series."""

    model: str
    r2: float | None
    aic: float | None
    bic: float | None
    params: dict[str, Estimate]
    regime: str | None = None
    regime_reason: str | None = None
    ok: bool = True
    message: str = ""
    step0: float = 0.0  #: the step that is ``t = 0``
    ssr: float | None = None
    n_points: int = 0

    def values(self) -> dict[str, float | None]:
        return {k: e.value for k, e in self.params.items()}

    def predict(self, steps) -> np.ndarray:
        """The fitted curve at absolute run steps (NaN when the fit failed)."""
        steps = np.asarray(steps, dtype=float)
        model = MODELS[self.model]
        vals = self.values()
        if not self.ok or any(vals.get(k) is None for k in model.param_names):
            return np.full(steps.shape, np.nan)
        return model(steps - self.step0, vals)

    def summary(self) -> dict:
        """``{"r2", "aic", "bic", "params"}`` (+ ``"regime"`` for the oscillator), JSON-safe."""
        out: dict[str, Any] = {
            "r2": _num(self.r2),
            "aic": _num(self.aic),
            "bic": _num(self.bic),
            "params": {k: e.summary() for k, e in self.params.items()},
        }
        if self.model == "oscillator":
            out["regime"] = self.regime or "indeterminate"
            if self.regime_reason:
                out["regime_reason"] = self.regime_reason
        if not self.ok:
            out["ok"] = False
            out["message"] = self.message
        return out


@dataclass
class FitResult:
    """Both models fitted to one series of one run."""

    run: str
    metric: str
    step_column: str
    steps: np.ndarray
    values: np.ndarray
    n_points: int
    models: dict[str, ModelFit]
    preferred: str | None
    noise: dict[str, float | None] = field(default_factory=dict)
    preferred_reason: str = ""

    def summary(self) -> dict:
        """One entry of the contract's ``fit`` runs list (additive key: ``noise``)."""
        first, last = (self.steps[0], self.steps[-1]) if self.steps.size else (None, None)
        return {
            "run": self.run,
            "metric": self.metric,
            "step_column": self.step_column,
            "n_points": int(self.n_points),
            "steps": [_step(first), _step(last)],
            "models": {k: m.summary() for k, m in self.models.items()},
            "preferred": self.preferred,
            "noise": {k: _num(v) for k, v in self.noise.items()},
        }


def _step(x) -> int | float | None:
    v = _num(x)
    if v is not None and v.is_integer():
        return int(v)
    return v


# ---------------------------------------------------------------------------------------------
# noise floor and autocorrelation


def noise_floor(y: np.ndarray) -> float:
    """``1.4826 * MAD(diff(y)) / sqrt(2)``: the point-to-point noise sd, robust to the trend."""
    d = np.diff(np.asarray(y, dtype=float))
    if d.size == 0:
        return 0.0
    mad = np.median(np.abs(d - np.median(d)))
    return float(1.4826 * mad / math.sqrt(2.0))


def _acf(r: np.ndarray, maxlag: int) -> np.ndarray:
    """Autocorrelation of ``r`` (mean removed) at lags ``0..maxlag-1``."""
    n = r.size
    x = r - r.mean()
    nfft = 1 << (2 * n - 1).bit_length()
    f = np.fft.rfft(x, nfft)
    ac = np.fft.irfft(f * np.conj(f), nfft)[:maxlag]
    return ac / ac[0] if ac[0] > 0 else np.zeros(maxlag)


def _bandwidth(r: np.ndarray) -> int:
    """Bartlett bandwidth from Andrews' plug-in rule for a "white + AR(1)" residual model.

    The residual autocorrelation at lags ``1..m`` is fitted by ``c phi^j`` over a grid of
    correlation times (white noise if ``c`` is within 2.5 standard errors of 0); then ``f0 = 1 + 2c phi/(1-phi)``, ``f1 = 2c phi/(1-phi)^2``,
    ``alpha = (2 f1/f0)^2``, ``L = 1.1447 (alpha n)^(1/3)``, clipped to ``[n^(1/4), n/2]``.
    """
    n = r.size
    lo = max(1, int(math.ceil(max(n ** 0.25, MIN_BANDWIDTH_FRACTION * n))))
    if n < 12:
        return lo
    m = max(4, min(n // 3, 400))
    rho = _acf(r, m + 1)[1:]
    j = np.arange(1, m + 1, dtype=float)
    taus = np.geomspace(0.5, max(1.0, n / 2.0), 40)
    phis = np.exp(-1.0 / taus)[:, None]
    basis = phis**j[None, :]
    bb = np.sum(basis * basis, axis=1)
    c = np.clip((basis @ rho) / bb, 0.0, 1.0)
    sse = np.sum((rho[None, :] - c[:, None] * basis) ** 2, axis=1)
    k = int(np.argmin(sse))
    c, phi = float(c[k]), float(phis[k, 0])
    if c <= 2.5 / math.sqrt(n * bb[k]):  # not significant against white-noise ACF scatter
        return lo
    f0 = 1.0 + 2.0 * c * phi / (1.0 - phi)
    f1 = 2.0 * c * phi / (1.0 - phi) ** 2
    alpha = (2.0 * f1 / f0) ** 2
    bw = 1.1447 * (alpha * n) ** (1.0 / 3.0)
    return int(np.clip(math.ceil(bw), lo, max(lo, n // 2)))


def _critical_value(b: float) -> float:
    """Fixed-b 97.5% quantile for the Bartlett kernel (Kiefer & Vogelsang 2005)."""
    b = min(max(b, 0.0), 1.0)
    return 1.959964 + 2.9694 * b + 0.4160 * b * b - 0.5324 * b**3


def _bartlett_weights(bw: int) -> np.ndarray:
    return 1.0 - np.arange(bw) / bw


def _hac_meat(s: np.ndarray, bw: int) -> np.ndarray:
    """``Omega = sum_{|j|<L} (1 - |j|/L) sum_t s_t s_{t-j}'`` for the rows ``s_t`` of ``s``."""
    n, k = s.shape
    nfft = 1 << (n + bw).bit_length()
    f = np.fft.rfft(s, nfft, axis=0)
    cross = np.fft.irfft(f[:, :, None] * np.conj(f[:, None, :]), nfft, axis=0)[:bw]
    w = _bartlett_weights(bw)
    g = np.tensordot(w[1:], cross[1:], axes=(0, 0)) if bw > 1 else np.zeros((k, k))
    return cross[0] + g + g.T


def _hac_scalar(u: np.ndarray, bw: int) -> np.ndarray:
    """Row-wise long-run variance ``sum_{|j|<L} (1-|j|/L) sum_t u_t u_{t-j}`` of ``u`` (m, n)."""
    n = u.shape[1]
    nfft = 1 << (n + bw).bit_length()
    f = np.fft.rfft(u, nfft, axis=1)
    ac = np.fft.irfft(f * np.conj(f), nfft, axis=1)[:, :bw]
    w = _bartlett_weights(bw)
    return ac[:, 0] + 2.0 * (ac[:, 1:] @ w[1:])


def _sandwich(jac: np.ndarray, r: np.ndarray, bw: int, meat: np.ndarray | None = None
              ) -> np.ndarray | None:
    """HAC covariance ``B^-1 Omega B^-1`` (``None`` if ``J'J`` is singular)."""
    bread = jac.T @ jac
    try:
        cond = np.linalg.cond(bread)
        if not np.isfinite(cond) or cond > 1e14:
            return None
        binv = np.linalg.inv(bread)
    except np.linalg.LinAlgError:
        return None
    if meat is None:
        meat = _hac_meat(jac * r[:, None], bw)
    cov = binv @ meat @ binv
    return 0.5 * (cov + cov.T)


# ---------------------------------------------------------------------------------------------
# log-binned data for the grid / profile


@dataclass
class _Binned:
    t: np.ndarray
    y: np.ndarray
    w: np.ndarray
    yy: float  # sum w y^2 over bins (of bin means)


def _log_bins(t: np.ndarray, y: np.ndarray) -> _Binned:
    """Points before ``10 dt`` kept; later ones pooled in bins ``12%`` of their time wide.

    A relaxation curve with any timescale ``T`` departs from linear inside such a bin by
    ``O((0.12 t/T)^2 e^{-t/T} / 24) <= 3e-4`` of its gain, so least squares on the bin means
    weighted by the counts is the full least squares up to that (and 20-60x cheaper)."""
    n = t.size
    dt = float(np.median(np.diff(t))) if n > 1 else 1.0
    t_ind = 10.0 * dt
    ids = np.arange(n, dtype=np.int64)
    late = t >= t_ind
    if late.any():
        first_late = int(np.argmax(late))
        bid = np.floor(np.log(t[late] / t_ind) / math.log1p(_BIN_WIDTH)).astype(np.int64)
        ids[late] = first_late + bid
    _, inv = np.unique(ids, return_inverse=True)
    w = np.bincount(inv).astype(float)
    tb = np.bincount(inv, weights=t) / w
    yb = np.bincount(inv, weights=y) / w
    return _Binned(tb, yb, w, float(np.sum(w * yb * yb)))


def _linear_levels(b: _Binned, g: np.ndarray):
    """Best ``y = alpha + beta g`` per row of ``g`` (weighted): ``(ssr, plateau, initial)``.

    ``plateau = alpha``, ``initial = alpha + beta``; rows with a singular system get ``inf``."""
    w = b.w
    s0 = w.sum()
    s1 = g @ w
    s2 = (g * g) @ w
    y0 = float(w @ b.y)
    y1 = g @ (w * b.y)
    det = s0 * s2 - s1 * s1
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = (s2 * y0 - s1 * y1) / det
        beta = (s0 * y1 - s1 * y0) / det
        ssr = b.yy - alpha * y0 - beta * y1
    bad = ~(det > 1e-12 * s0 * np.maximum(s2, 1e-300)) | ~np.isfinite(ssr)
    ssr = np.where(bad, np.inf, np.maximum(ssr, 0.0))
    return ssr, alpha, alpha + beta


@dataclass
class _Profile:
    zeta: np.ndarray  # grid incl. inf at the end
    ssr: np.ndarray  # binned profile ssr per zeta
    ts: np.ndarray
    plateau: np.ndarray
    initial: np.ndarray
    center: float  # the timescale the grid was centred on
    best_ssr: float = math.inf  # binned ssr of the final fit


def _in_bounds(plat, init, lv):
    return (plat >= lv[0]) & (plat <= lv[1]) & (init >= lv[0]) & (init <= lv[1])


def _profile(b: _Binned, center: float, lv: tuple[float, float], tb: tuple[float, float],
             zetas: np.ndarray | None = None) -> _Profile:
    """Binned SSR minimised over timescale and levels, for each damping ratio of the grid.

    Timescales ``center * 5^(-1..1)`` (9 values; every law has ``integral of g = Ts``, so the
    best timescale moves little with the damping ratio), then one parabolic step in
    ``log Ts`` around each row's minimum. Levels are solved linearly; out-of-bounds levels
    are excluded."""
    if zetas is None:
        zetas = np.append(ZETA_GRID, np.inf)
    q = np.where(np.isinf(zetas), 0.0, 1.0 / (4.0 * zetas**2))  # inertia / timescale
    ts = np.clip(center * _TS_FACTORS, tb[0], tb[1])
    tsg = np.broadcast_to(ts[None, :], (zetas.size, ts.size))
    g = relaxation(b.t[None, :], tsg.reshape(-1, 1), (q[:, None] * tsg).reshape(-1, 1))
    ssr, plat, init = _linear_levels(b, g)
    ssr = np.where(_in_bounds(plat, init, lv), ssr, np.inf).reshape(tsg.shape)
    k = np.argmin(ssr, axis=1)
    rows = np.arange(zetas.size)
    lt = np.log(ts)
    km = np.clip(k, 1, ts.size - 2)
    s_m, s_0, s_p = ssr[rows, km - 1], ssr[rows, km], ssr[rows, km + 1]
    h = lt[1] - lt[0] if ts.size > 1 else 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        curv = s_m - 2 * s_0 + s_p
        shift = np.where(np.isfinite(curv) & (curv > 0), 0.5 * h * (s_m - s_p) / curv, 0.0)
    ts_ref = np.clip(np.exp(lt[km] + np.clip(shift, -h, h)), tb[0], tb[1])
    g2 = relaxation(b.t[None, :], ts_ref[:, None], (q * ts_ref)[:, None])
    ssr2, plat2, init2 = _linear_levels(b, g2)
    ssr2 = np.where(_in_bounds(plat2, init2, lv), ssr2, np.inf)
    ssr_grid = ssr[rows, k]
    use = ssr2 < ssr_grid
    return _Profile(
        zeta=zetas,
        ssr=np.where(use, ssr2, ssr_grid),
        ts=np.where(use, ts_ref, ts[k]),
        plateau=np.where(use, plat2, plat.reshape(tsg.shape)[rows, k]),
        initial=np.where(use, init2, init.reshape(tsg.shape)[rows, k]),
        center=float(center),
    )


def _binned_ssr(b: _Binned, model: CurveModel, x: np.ndarray) -> float:
    r = model.func(b.t, *x) - b.y
    return float(np.sum(b.w * r * r))


# ---------------------------------------------------------------------------------------------
# one lmfit solve

_TEMPLATES = threading.local()


def _minimizer_class():
    """lmfit's Minimizer without its textbook covariance (grpofit replaces it by HAC)."""
    cls = getattr(_TEMPLATES, "minimizer", None)
    if cls is None:
        import lmfit

        class _Minimizer(lmfit.Minimizer):
            def _calculate_uncertainties_correlations(self):  # noqa: D401 - lmfit hook
                self.result.errorbars = False

        cls = _TEMPLATES.minimizer = _Minimizer
    return cls


def _parameters(models: tuple[CurveModel, ...], starts: list[dict], bounds: dict):
    """A (per-thread, reused) lmfit ``Parameters`` named ``<model>_<param>``, set to the
    starts within the bounds."""
    import lmfit

    cache = getattr(_TEMPLATES, "params", None)
    if cache is None:
        cache = _TEMPLATES.params = {}
    key = tuple(m.name for m in models)
    params = cache.get(key)
    if params is None:
        params = lmfit.Parameters()
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
class _Solution:
    model: CurveModel
    x: np.ndarray
    ssr: float  # weighted (binned) sum of squares at x
    ok: bool
    message: str


def _solve(model: CurveModel, b: _Binned, start: dict, bounds: dict) -> _Solution:
    """One model fitted alone (see :func:`_solve_many`)."""
    return _solve_many((model,), b, [start], bounds)[0]


def _solve_many(models: tuple[CurveModel, ...], b: _Binned, starts: list[dict],
                bounds: dict) -> list[_Solution]:
    """Fit several models in one lmfit ``leastsq`` call (their residuals stacked, the
    Jacobian block-diagonal, so each block is that model's own least squares), on the
    log-binned data weighted by the bin counts (the full least squares up to the curve's
    change inside a bin), with the analytic Jacobians. One call instead of one per model
    halves lmfit's fixed cost per run."""
    sw = np.sqrt(b.w)
    tb, yb = b.t, b.y
    keys = [[f"{m.name}_{nm}" for nm in m.param_names] for m in models]
    sizes = [len(k) for k in keys]
    nb = tb.size

    def residual(p):
        return np.concatenate([
            sw * (m.func(tb, *[p[k].value for k in ks]) - yb) for m, ks in zip(models, keys)
        ])

    def jacobian(p):
        jac = np.zeros((nb * len(models), sum(sizes)))
        col = 0
        for i, (m, ks) in enumerate(zip(models, keys)):
            jac[i * nb:(i + 1) * nb, col:col + len(ks)] = (
                m.jacobian(tb, *[p[k].value for k in ks]) * sw[:, None])
            col += len(ks)
        return jac

    try:
        params = _parameters(models, starts, bounds)
        with np.errstate(all="ignore"):
            mini = _minimizer_class()(residual, params)
            if METHOD == "least_squares":
                res = mini.least_squares(jac=jacobian, x_scale="jac", max_nfev=_MAX_NFEV,
                                         ftol=1e-7, xtol=1e-7, gtol=1e-8)
            else:
                res = mini.leastsq(Dfun=jacobian, max_nfev=_MAX_NFEV, ftol=1e-6, xtol=1e-6)
        msg = str(getattr(res, "message", "") or "")
        if getattr(res, "aborted", False):
            msg = f"did not converge in {_MAX_NFEV} evaluations"
        r = residual(res.params)
        out = []
        for i, (m, ks) in enumerate(zip(models, keys)):
            x = np.array([res.params[k].value for k in ks], dtype=float)
            ri = r[i * nb:(i + 1) * nb]
            ssr = float(ri @ ri)
            ok = bool(np.all(np.isfinite(x)) and math.isfinite(ssr))
            out.append(_Solution(m, x, ssr if ok else math.inf, ok, msg))
        return out
    except Exception as exc:  # lmfit/scipy failure: report, never raise
        return [_Solution(m, np.full(len(m.param_names), np.nan), math.inf, False,
                          f"fit failed: {exc}") for m in models]


def _better(a: _Solution | None, b: _Solution | None) -> _Solution | None:
    if a is None or not a.ok:
        return b if (b is not None and b.ok) else (a or b)
    if b is None or not b.ok:
        return a
    return b if b.ssr < a.ssr else a


# ---------------------------------------------------------------------------------------------
# intervals


@dataclass
class _Ctx:
    t: np.ndarray
    y: np.ndarray
    n: int
    sst: float
    bounds: dict
    bw: int = 1
    cv: float = 1.959964


def _ic(ssr: float, n: int, k: int) -> tuple[float | None, float | None]:
    if not (ssr > 0 and math.isfinite(ssr)):
        return None, None
    ll = n * math.log(ssr / n)
    return ll + 2 * k, ll + k * math.log(n)


def _clip_interval(lo, hi, bounds, name) -> tuple[tuple[float, float], str | None]:
    blo, bhi = bounds
    note = None
    if lo < blo or hi > bhi:
        note = f"{name} not pinned down by the data: interval clipped to the fit bounds"
    return (max(lo, blo), min(hi, bhi)), note


def _failed(model: CurveModel, message: str, step0: float, n: int) -> ModelFit:
    params = {k: Estimate(None, None, None, "fit failed") for k in model.param_names}
    if model is OSCILLATOR:
        params["damping_ratio"] = Estimate(None, None, None, "fit failed")
    return ModelFit(
        model.name, None, None, None, params,
        regime="indeterminate" if model is OSCILLATOR else None,
        regime_reason="the fit failed" if model is OSCILLATOR else None,
        ok=False, message=message, step0=step0, n_points=n,
    )


def regime_rule(ci: tuple[float | None, float | None] | None) -> tuple[str, str]:
    """Regime from the 95% interval of the damping ratio (``None`` end = unbounded).

    ``critical`` if ``[lo, hi]`` lies inside :data:`CRITICAL_BAND`; ``overdamped`` if
    ``lo > 1``; ``underdamped`` if ``hi < 1``; else ``indeterminate``."""
    if ci is None or ci[0] is None and ci[1] is None:
        return "indeterminate", "damping ratio not identifiable"
    lo = ci[0] if ci[0] is not None else 0.0
    hi = ci[1] if ci[1] is not None else math.inf
    text = f"damping ratio 95% interval [{lo:.3g}, {'inf' if math.isinf(hi) else f'{hi:.3g}'}]"
    if CRITICAL_BAND[0] <= lo and hi <= CRITICAL_BAND[1]:
        return "critical", f"{text} inside {list(CRITICAL_BAND)}"
    if lo > 1.0:
        return "overdamped", f"{text} above one"
    if hi < 1.0:
        return "underdamped", f"{text} below one"
    return "indeterminate", f"{text} straddles one"


def _estimates(names, x, cov, ctx: _Ctx, bounds) -> dict[str, Estimate]:
    out = {}
    for i, name in enumerate(names):
        if cov is None or not (cov[i, i] >= 0) or not math.isfinite(cov[i, i]):
            out[name] = Estimate(float(x[i]), None, None, "covariance not computable (singular)")
            continue
        se = math.sqrt(cov[i, i])
        ci, note = _clip_interval(x[i] - ctx.cv * se, x[i] + ctx.cv * se, bounds[name], name)
        out[name] = Estimate(float(x[i]), se, ci, note)
    return out


def _widen_to_grid(params: dict[str, Estimate], names, ctx: _Ctx) -> None:
    """Times are resolved only to the logging interval: widen their intervals by half the
    median step spacing on each side (it matters only when a rise spans a few points)."""
    half = 0.5 * float(np.median(np.diff(ctx.t)))
    for name in names:
        e = params.get(name)
        if e is not None and e.ci95 is not None and e.ci95[0] is not None and e.ci95[1] is not None:
            lo, hi = ctx.bounds[name]
            e.ci95 = (max(lo if name != "inertia" else 0.0, e.ci95[0] - half), min(hi, e.ci95[1] + half))


def _no_rise(x, cov, cv) -> bool:
    """True when the gain ``plateau - initial`` is not distinguishable from 0."""
    gain = x[0] - x[1]
    if cov is None:
        return abs(gain) <= 0
    var = cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]
    return abs(gain) <= cv * math.sqrt(max(var, 0.0))


def _exponential_fit(sol: _Solution, ctx: _Ctx, step0: float) -> ModelFit:
    if not sol.ok:
        return _failed(EXPONENTIAL, sol.message or "fit failed", step0, ctx.n)
    t, y, x = ctx.t, ctx.y, sol.x
    r = EXPONENTIAL.func(t, *x) - y
    jac = EXPONENTIAL.jacobian(t, *x)
    cov = _sandwich(jac, r, ctx.bw)
    if cov is None:  # gain 0: timescale column vanishes; levels still have errors
        cov2 = _sandwich(jac[:, :2], r, ctx.bw)
        cov = np.full((3, 3), np.nan)
        if cov2 is not None:
            cov[:2, :2] = cov2
    params = _estimates(EXPONENTIAL.param_names, x, cov, ctx, ctx.bounds)
    _widen_to_grid(params, ("timescale",), ctx)
    if _no_rise(x, None if np.isnan(cov[0, 0]) else cov, ctx.cv):
        params["timescale"] = Estimate(float(x[2]), None, None, "no detectable rise: timescale not identifiable")
    ssr = float(r @ r)
    aic, bic = _ic(ssr, ctx.n, 3)
    r2 = 1.0 - ssr / ctx.sst if ctx.sst > 0 else None
    return ModelFit("exponential", r2, aic, bic, params, ok=True, message=sol.message,
                    step0=step0, ssr=ssr, n_points=ctx.n)


def _oscillator_fit(sol: _Solution, prof: _Profile | None, b: _Binned, ctx: _Ctx,
                    step0: float) -> ModelFit:
    if not sol.ok:
        return _failed(OSCILLATOR, sol.message or "fit failed", step0, ctx.n)
    t, y, x = ctx.t, ctx.y, sol.x
    p, p0, ts, ti = x
    r = OSCILLATOR.func(t, *x) - y
    jac = OSCILLATOR.jacobian(t, *x)
    at_zero = ti <= _AT_ZERO * ts
    meat = _hac_meat(jac * r[:, None], ctx.bw)
    cov_full = None if at_zero else _sandwich(jac, r, ctx.bw, meat)
    cov_red = _sandwich(jac[:, :3], r, ctx.bw, meat[:3, :3])
    zeta = damping_ratio(ts, ti)
    names = OSCILLATOR.param_names
    ssr = float(r @ r)
    aic, bic = _ic(ssr, ctx.n, 4)
    r2 = 1.0 - ssr / ctx.sst if ctx.sst > 0 else None
    fit = ModelFit("oscillator", r2, aic, bic, {}, ok=True, message=sol.message,
                   step0=step0, ssr=ssr, n_points=ctx.n)

    cov_lv = cov_full if cov_full is not None else cov_red
    if _no_rise(x, cov_lv, ctx.cv):
        params = _estimates(names[:2], x[:2], cov_lv, ctx, ctx.bounds)
        why = "no detectable rise: not identifiable"
        params["timescale"] = Estimate(float(ts), None, None, why)
        params["inertia"] = Estimate(float(ti), None, None, why)
        params["damping_ratio"] = Estimate(_num(zeta), None, None, why)
        fit.params = params
        fit.regime, fit.regime_reason = "indeterminate", "no detectable rise"
        return fit

    # profile likelihood over the damping ratio
    accepted, zeta_ci, ti_ci, ts_range, p_range, p0_range = _profile_intervals(prof, x, r, b, ctx)
    inertia_consistent_with_zero = zeta_ci is not None and zeta_ci[1] is None
    if cov_full is not None and not inertia_consistent_with_zero:
        params = _estimates(names, x, cov_full, ctx, ctx.bounds)
        params["inertia"].ci95 = ti_ci if ti_ci is not None else params["inertia"].ci95
        if ti_ci is not None:
            params["inertia"].note = "95% interval from the profile likelihood"
    else:
        params = _estimates(names[:3], x[:3], cov_red, ctx, ctx.bounds)
        note = "at its bound 0" if at_zero else "consistent with 0"
        params["inertia"] = Estimate(float(ti), None, ti_ci,
                                     f"{note}; 95% interval from the profile likelihood")
    # the levels and the timescale along the accepted profile belong in their intervals too
    for name, rng in {"plateau": p_range, "initial": p0_range, "timescale": ts_range}.items():
        e = params[name]
        if rng is not None and e.ci95 is not None:
            lo, hi = min(e.ci95[0], rng[0]), max(e.ci95[1], rng[1])
            (lo, hi), note = _clip_interval(lo, hi, ctx.bounds[name], name)
            e.ci95 = (lo, hi)
            e.note = note or e.note
    _widen_to_grid(params, ("timescale", "inertia"), ctx)
    # damping ratio
    zeta_se = None
    if cov_full is not None and ti > 0:
        gvec = np.array([0.5 * zeta / ts, -0.5 * zeta / ti])
        var = gvec @ cov_full[2:, 2:] @ gvec
        zeta_se = math.sqrt(var) if var >= 0 else None
    note = "95% interval from the profile likelihood"
    if zeta_ci is not None and zeta_ci[1] is None:
        note += "; no upper end (inertia consistent with 0)"
    if zeta_ci is None:
        note = "profile likelihood not available"
    params["damping_ratio"] = Estimate(_num(zeta), zeta_se, zeta_ci, note)
    fit.params = {k: params[k] for k in (*names, "damping_ratio")}
    fit.regime, fit.regime_reason = regime_rule(zeta_ci)
    if accepted:
        fit.regime, fit.regime_reason = "indeterminate", "inertia not identifiable (flat profile)"
    return fit


def _profile_intervals(prof: _Profile | None, x, r, b: _Binned, ctx: _Ctx):
    """Intervals from the profile likelihood over the damping ratio (see module docstring).

    The rows are the grid plus the fit itself, ordered by ``1/zeta`` (0 = inertia 0). A row
    is accepted when ``dSSR <= cv^2 HAC(v r) / sum(v^2)``; the interval is the hull of the
    accepted rows, its ends interpolated towards the first rejected neighbour (quadratically
    from the fit itself, linearly in ``dSSR - threshold`` otherwise), then refined once by
    profiling at the interpolated ends."""
    if prof is None:
        return (None,) * 6
    p_fit, p0_fit, ts_fit, ti_fit = (float(v) for v in x)
    scale = float(r @ r) / max(ctx.n - 4, 1)
    f_hat = OSCILLATOR.func(b.t, *x)
    finite = np.isfinite(prof.ssr)
    rows = {
        "zeta": np.append(prof.zeta[finite], damping_ratio(ts_fit, ti_fit)),
        "ssr": np.append(prof.ssr[finite], prof.best_ssr),
        "ts": np.append(prof.ts[finite], ts_fit),
        "plat": np.append(prof.plateau[finite], p_fit),
        "init": np.append(prof.initial[finite], p0_fit),
    }
    rows["thr"] = _thresholds(rows, slice(0, rows["zeta"].size - 1), f_hat, r, b, ctx, scale)
    rows["thr"][-1] = math.inf
    fit_zeta = rows["zeta"][-1]
    out = _hull(rows, fit_zeta, ctx)
    # refine: profile at the two interpolated ends and interpolate again
    new = [z for z in out[6] if z is not None and np.isfinite(z) and z > 0]
    if new:
        extra = _profile(b, ts_fit, ctx.bounds["plateau"], ctx.bounds["timescale"],
                         zetas=np.array(new, dtype=float))
        keep = np.isfinite(extra.ssr)
        if keep.any():
            add = {"zeta": extra.zeta[keep], "ssr": extra.ssr[keep], "ts": extra.ts[keep],
                   "plat": extra.plateau[keep], "init": extra.initial[keep]}
            n0 = rows["zeta"].size
            for key, val in add.items():
                rows[key] = np.append(rows[key], val)
            thr_new = _thresholds(rows, slice(n0, rows["zeta"].size), f_hat, r, b, ctx, scale)
            rows["thr"] = np.append(rows["thr"], thr_new[n0:])
            out = _hull(rows, fit_zeta, ctx)
    return out[:6]


def _thresholds(rows: dict, which: slice, f_hat, r, b: _Binned, ctx: _Ctx, scale: float):
    """``cv^2 * HAC(v r) / sum(v^2)`` for the rows in ``which`` (``v`` = constrained curve
    minus fitted curve); rows far outside get the median of the others (they are rejected
    anyway, the value only shapes the interpolation)."""
    ref = float(np.min(rows["ssr"]))
    d = rows["ssr"] - ref
    thr = np.full(rows["zeta"].size, np.nan)
    idx = np.arange(rows["zeta"].size)[which]
    cand = idx[d[idx] <= ctx.cv**2 * 40.0 * scale]
    if cand.size:
        z = rows["zeta"][cand]
        q = np.where(np.isinf(z), 0.0, 1.0 / (4.0 * np.where(np.isinf(z), 1.0, z) ** 2))
        ts = rows["ts"][cand]
        g = relaxation(b.t[None, :], ts[:, None], (q * ts)[:, None])
        plat, init = rows["plat"][cand, None], rows["init"][cand, None]
        vb = plat + (init - plat) * g - f_hat[None, :]  # smooth at the bin scale
        v = np.stack([np.interp(ctx.t, b.t, row) for row in vb])
        vv = np.sum(v * v, axis=1)
        u = v * r[None, :]
        # HAC long-run variance, never below the uncorrelated (White) value sum v^2 r^2:
        # training-curve residuals are positively correlated, a smaller HAC value is noise
        lrv = np.maximum(_hac_scalar(u, ctx.bw), np.sum(u * u, axis=1))
        with np.errstate(divide="ignore", invalid="ignore"):
            infl = np.where(vv > 0, lrv / vv, scale)
        thr[cand] = PROFILE_CALIBRATION * ctx.cv**2 * np.maximum(infl, 1e-300)
    known = thr[np.isfinite(thr)]
    if "thr" in rows:
        known = np.concatenate([known, rows["thr"][np.isfinite(rows["thr"])]])
    base = float(np.median(known)) if known.size else PROFILE_CALIBRATION * ctx.cv**2 * scale
    thr[idx] = np.where(np.isfinite(thr[idx]), thr[idx], base)
    return thr


def _hull(rows: dict, fit_zeta: float, ctx: _Ctx):
    """Hull of the accepted rows and its interpolated ends; see :func:`_profile_intervals`.

    Returns ``(flat, zeta_ci, inertia_ci, ts_range, plateau_range, initial_range,
    (zeta_hi_end, zeta_lo_end))`` where the last pair are the interpolated ends to refine."""
    zeta = rows["zeta"]
    fit_i = zeta.size - 1 if "fit_index" not in rows else rows["fit_index"]
    inf = np.isinf(zeta)
    xs = np.where(inf, 0.0, 1.0 / np.where(inf, 1.0, zeta))  # 1/zeta
    ti = np.where(inf, 0.0, rows["ts"] / (4.0 * np.where(inf, 1.0, zeta) ** 2))
    d = np.maximum(rows["ssr"] - float(np.min(rows["ssr"])), 0.0)
    # the fit itself is row fit_i (appended first after the grid)
    fit_rows = np.flatnonzero(zeta == fit_zeta)
    d[fit_rows] = 0.0
    thr = rows["thr"]
    order = np.argsort(xs, kind="stable")
    xs, d, thr, ti = xs[order], d[order], thr[order], ti[order]
    ts, plat, init = rows["ts"][order], rows["plat"][order], rows["init"][order]
    acc = d <= thr
    idx = np.flatnonzero(acc)
    i_lo, i_hi = int(idx.min()), int(idx.max())

    def frac(i_in: int, i_out: int) -> float:
        if d[i_in] == 0.0 and d[i_out] > 0:  # quadratic from the minimum
            return float(np.sqrt(min(thr[i_out] / d[i_out], 1.0)))
        a_, b_ = d[i_in] - thr[i_in], d[i_out] - thr[i_out]
        return float(np.clip(a_ / (a_ - b_), 0.0, 1.0)) if a_ != b_ else 0.0

    edges_ti = list(ti[idx])
    ends = [None, None]
    if i_lo == 0:  # 1/zeta = 0, i.e. inertia 0, is inside
        x_lo = 0.0
    else:
        f = frac(i_lo, i_lo - 1)
        x_lo = xs[i_lo] + f * (xs[i_lo - 1] - xs[i_lo])
        edges_ti.append(ti[i_lo] + f * (ti[i_lo - 1] - ti[i_lo]))
        if 0.0 < f < 1.0 and x_lo > 0:
            ends[0] = 1.0 / x_lo
    if i_hi == xs.size - 1 or xs[i_hi] >= 1.0 / ZETA_GRID[0]:
        x_hi = math.inf  # the smallest damping ratio of the grid is inside
    else:
        f = frac(i_hi, i_hi + 1)
        x_hi = xs[i_hi] + f * (xs[i_hi + 1] - xs[i_hi])
        edges_ti.append(ti[i_hi] + f * (ti[i_hi + 1] - ti[i_hi]))
        if 0.0 < f < 1.0:
            ends[1] = 1.0 / x_hi
    zeta_ci = (0.0 if math.isinf(x_hi) else 1.0 / x_hi, None if x_lo <= 0 else 1.0 / x_lo)
    ti_lo = 0.0 if i_lo == 0 else float(min(edges_ti))
    ti_hi = ctx.bounds["inertia"][1] if math.isinf(x_hi) else float(max(edges_ti))
    span = lambda arr: (float(np.min(arr[idx])), float(np.max(arr[idx])))
    flat = bool(acc.all())
    return flat, zeta_ci, (ti_lo, ti_hi), span(ts), span(plat), span(init), ends


# ---------------------------------------------------------------------------------------------
# the entry point


def fit_series(steps, values, *, run: str = "", metric: str = "", step_column: str = "",
               seed: int = 0) -> FitResult:
    """Fit both laws to ``values`` against ``steps`` (non-finite points are dropped).

    Raises :class:`grpofit.errors.TooFewPoints` below :data:`MIN_POINTS` finite points. A
    model that cannot be fitted comes back as ``ModelFit(ok=False, message=...)``. The method
    is deterministic; ``seed`` is accepted for interface stability and currently unused.
    """
    steps = np.asarray(steps, dtype=float).ravel()
    values = np.asarray(values, dtype=float).ravel()
    keep = np.isfinite(steps) & np.isfinite(values)
    steps, values = steps[keep], values[keep]
    if steps.size < MIN_POINTS:
        raise TooFewPoints(
            f"{steps.size} finite points of {metric or 'the metric'}; a fit needs at least {MIN_POINTS}",
            path=run or None,
            fix="log the metric more often, pick another one with --metric, or pass a longer run",
            n=int(steps.size),
            minimum=MIN_POINTS,
        )
    if np.any(np.diff(steps) < 0):
        order = np.argsort(steps, kind="stable")
        steps, values = steps[order], values[order]
    step0 = float(steps[0])
    t = steps - step0
    y = values
    n = y.size
    ctx = _Ctx(t, y, n, float(np.sum((y - y.mean()) ** 2)), OSCILLATOR.bounds(t, y))
    noise_sd = noise_floor(y)
    if t[-1] <= 0 or ctx.sst <= 0:
        models = _degenerate(t, y, ctx, step0)
        return _result(run, metric, step_column, steps, values, models, noise_sd, ctx)

    bounds, lv, tb = ctx.bounds, ctx.bounds["plateau"], ctx.bounds["timescale"]
    binned = _log_bins(t, y)
    g_exp, g_osc = EXPONENTIAL.guess(t, y), OSCILLATOR.guess(t, y)
    # the fixed grid over (damping ratio, timescale), centred on the guess; it is also the
    # profile likelihood of the damping ratio
    prof = _profile(binned, g_osc["timescale"], lv, tb)
    with np.errstate(all="ignore"):
        ssr_go = _binned_ssr(binned, OSCILLATOR, np.array([g_osc[k] for k in OSCILLATOR.param_names]))
        ssr_ge = _binned_ssr(binned, EXPONENTIAL, np.array([g_exp[k] for k in EXPONENTIAL.param_names]))
    k = int(np.argmin(prof.ssr))
    osc_start = g_osc if ssr_go <= prof.ssr[k] else _row_start(prof, k)
    last = prof.zeta.size - 1
    exp_start = g_exp if ssr_ge <= prof.ssr[last] else _row_start(prof, last, exponential=True)
    exp, osc = _solve_many((EXPONENTIAL, OSCILLATOR), binned, [exp_start, osc_start], bounds)
    # poor fits: the oscillator nests the exponential (inertia 0), so it must not fit worse
    if exp.ok and (not osc.ok or osc.ssr > exp.ssr * (1 + 1e-9)):
        p, p0, ts = exp.x
        start = {"plateau": p, "initial": p0, "timescale": ts, "inertia": 0.02 * ts}
        osc = _better(osc, _solve(OSCILLATOR, binned, start, bounds))
    if osc.ok and not exp.ok:
        p, p0, ts, ti = osc.x
        exp = _solve(EXPONENTIAL, binned, {"plateau": p, "initial": p0, "timescale": ts + ti}, bounds)
    if osc.ok:
        r = OSCILLATOR.func(t, *osc.x) - y
        scale = float(r @ r) / max(n - 4, 1)
        k = int(np.argmin(prof.ssr))
        if prof.ssr[k] < osc.ssr - 2.0 * scale:  # the grid beats the fit: restart from it
            osc = _better(osc, _solve(OSCILLATOR, binned, _row_start(prof, k), bounds))
            r = OSCILLATOR.func(t, *osc.x) - y
        if not (prof.center / 3.0 <= osc.x[2] <= prof.center * 3.0):
            prof = _profile(binned, osc.x[2], lv, tb)
        prof.best_ssr = osc.ssr
        ctx.bw = _bandwidth(r)
        ctx.cv = _critical_value(ctx.bw / n)
    elif exp.ok:
        ctx.bw = _bandwidth(EXPONENTIAL.func(t, *exp.x) - y)
        ctx.cv = _critical_value(ctx.bw / n)

    models = {
        "exponential": _exponential_fit(exp, ctx, step0),
        "oscillator": _oscillator_fit(osc, prof if osc.ok else None, binned, ctx, step0),
    }
    return _result(run, metric, step_column, steps, values, models, noise_sd, ctx)


def _row_start(prof: _Profile, k: int, *, exponential: bool = False) -> dict[str, float]:
    z = prof.zeta[k]
    start = {"plateau": float(prof.plateau[k]), "initial": float(prof.initial[k]),
             "timescale": float(prof.ts[k])}
    if not exponential:
        start["inertia"] = 0.0 if np.isinf(z) else float(prof.ts[k] / (4.0 * z * z))
    return start


def _degenerate(t, y, ctx: _Ctx, step0: float) -> dict[str, ModelFit]:
    """Constant values (or a single step): levels only, nothing else identifiable."""
    c = float(np.mean(y))
    why = "constant series: no rise, not identifiable" if ctx.sst <= 0 else "all points at one step"
    lv = Estimate(c, 0.0 if ctx.sst <= 0 else None, (c, c) if ctx.sst <= 0 else None,
                  "constant series" if ctx.sst <= 0 else why)
    out = {}
    for model in (EXPONENTIAL, OSCILLATOR):
        params = {"plateau": lv, "initial": lv, "timescale": Estimate(None, None, None, why)}
        if model is OSCILLATOR:
            params["inertia"] = Estimate(None, None, None, why)
            params["damping_ratio"] = Estimate(None, None, None, why)
        ssr = float(np.sum((y - c) ** 2))
        aic, bic = _ic(ssr, ctx.n, len(model.param_names))
        out[model.name] = ModelFit(
            model.name, None, aic, bic, params,
            regime="indeterminate" if model is OSCILLATOR else None,
            regime_reason=why if model is OSCILLATOR else None,
            ok=True, message=why, step0=step0, ssr=ssr, n_points=ctx.n,
        )
    return out


def _result(run, metric, step_column, steps, values, models, noise_sd, ctx: _Ctx) -> FitResult:
    exp_fit, osc_fit = models["exponential"], models["oscillator"]
    preferred, reason = None, "no model could be fitted"
    if exp_fit.ok and osc_fit.ok and exp_fit.bic is not None and osc_fit.bic is not None:
        delta = exp_fit.bic - osc_fit.bic
        if delta > PREFER_DELTA_BIC:
            preferred, reason = "oscillator", f"BIC lower by {delta:.1f} > {PREFER_DELTA_BIC:g}"
        else:
            preferred, reason = "exponential", f"BIC of the oscillator not lower by more than {PREFER_DELTA_BIC:g}"
    elif exp_fit.ok:
        preferred, reason = "exponential", "only fit that succeeded"
    elif osc_fit.ok:
        preferred, reason = "oscillator", "only fit that succeeded"
    best = models.get(preferred) if preferred else None
    var_y = ctx.sst / ctx.n if ctx.n else 0.0
    resid_sd = None
    if best is not None and best.ssr is not None:
        k = 4 if best.model == "oscillator" else 3
        resid_sd = math.sqrt(best.ssr / max(ctx.n - k, 1))
    noise = {
        "noise_sd": noise_sd,
        "residual_sd": resid_sd,
        "r2_ceiling": (1.0 - noise_sd**2 / var_y) if var_y > 0 else None,
        "fit_vs_noise": (resid_sd / noise_sd) if (resid_sd is not None and noise_sd > 0) else None,
        "hac_bandwidth": ctx.bw,
    }
    return FitResult(run, metric, step_column, steps, values, int(ctx.n), models, preferred,
                     noise, reason)
