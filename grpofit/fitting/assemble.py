"""From a least-squares solution to a :class:`~grpofit.fitting.results.ModelFit`: fit
statistics on every point, HAC intervals, the damping-ratio profile and the regime.

:func:`exponential_fit` and :func:`oscillator_fit` assemble the two laws fitted from the
profile grid; :func:`law_fit` any other law of the registry (:mod:`grpofit.laws.registry`);
:func:`failed` and :func:`degenerate` read each law's row for its parameter names."""

from __future__ import annotations

import math

import numpy as np

from grpofit.fitting import hac
from grpofit.fitting.hac import blocked_parts, hac_meat, sandwich
from grpofit.fitting.intervals import Ctx, estimates, extend, profile_intervals, widen_to_grid
from grpofit.fitting.profile import Binned, Profile
from grpofit.fitting.regime import Signal, information_criteria, regime_rule, reversal_test
from grpofit.fitting.results import Estimate, ModelFit, num
from grpofit.fitting.solve import Solution
from grpofit.fitting.statespace_ci import Points
from grpofit.fitting.turnover import turnover_test
from grpofit.laws.models import EXPONENTIAL, LEVELS, OSCILLATOR, CurveModel, damping_ratio
from grpofit.laws.registry import MODELS

__all__ = ["exponential_fit", "oscillator_fit", "law_fit", "failed", "degenerate", "gain_stat", "on_points"]

_AT_ZERO = 1e-4  # inertia / timescale below this counts as "at its bound 0"


def failed(model: CurveModel, message: str, step0: float, n: int) -> ModelFit:
    params = {k: Estimate(None, None, None, "fit failed") for k in (*model.param_names, *model.derived_names)}
    return ModelFit(
        model.name,
        None,
        None,
        None,
        params,
        regime="indeterminate" if model.reports_regime else None,
        regime_reason="the fit failed" if model.reports_regime else None,
        ok=False,
        message=message,
        step0=step0,
        n_points=n,
    )


def gain_stat(x, cov) -> tuple[float, float | None]:
    """``(plateau - initial, its stderr)`` (``None`` without a covariance)."""
    gain = float(x[0] - x[1])
    if cov is None or not np.all(np.isfinite(cov[:2, :2])):
        return gain, None
    var = cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]
    return gain, math.sqrt(max(var, 0.0))


def _stats(fit_ssr: float, ctx: Ctx, k: int):
    aic, bic = information_criteria(fit_ssr, ctx.n, k)
    r2 = 1.0 - fit_ssr / ctx.sst if ctx.sst > 0 else None
    return r2, aic, bic


def on_points(jacobian, x, t, y, func=None):
    """``(Jacobian, residuals)`` of the curve with parameters ``x`` on every point. Without
    ``func`` the curve is ``plateau + (initial - plateau) * g`` with ``g`` the Jacobian's
    ``initial`` column (the two grid-fitted laws: one evaluation).

    A series longer than :data:`~grpofit.fitting.hac.BLOCK` gets its Jacobian as a function of
    a row range instead (``rows(lo, hi)``, for :func:`~grpofit.fitting.hac.blocked_parts`) and
    its residuals block by block: no ``(n, k)`` array is ever held."""
    p, p0 = x[0], x[1]
    n, block = t.size, hac.BLOCK
    if n <= block:
        jac = jacobian(t, *x)
        return jac, (p + (p0 - p) * jac[:, 1] if func is None else func(t, *x)) - y
    r = np.empty(n)
    for lo in range(0, n, block):
        tb = t[lo : lo + block]
        r[lo : lo + block] = (p + (p0 - p) * jacobian(tb, *x)[:, 1] if func is None else func(tb, *x)) - y[
            lo : lo + block
        ]
    return (lambda lo, hi: jacobian(t[lo:hi], *x)), r


def _full(model: CurveModel, x, ctx: Ctx, full):
    """``(Jacobian, residuals)`` on every point (``full`` if the caller has them)."""
    if full is not None:
        return full
    if ctx.n > hac.BLOCK:
        return on_points(model.jacobian, x, ctx.t, ctx.y, model.func)
    return model.jacobian(ctx.t, *x), model.func(ctx.t, *x) - ctx.y


def _hac_cov(jac, r, bw: int, cols: int | None = None):
    """:func:`~grpofit.fitting.hac.sandwich` of the first ``cols`` columns (all by default) of
    a Jacobian array, or of a long series' row function (summed by blocks)."""
    if callable(jac):
        parts = blocked_parts(jac, r, bw)
        k = cols or parts.bread.shape[0]
        return sandwich(None, r, bw, parts.meat[:k, :k], bread=parts.bread[:k, :k])
    return sandwich(jac if cols is None else jac[:, :cols], r, bw)


def exponential_fit(sol: Solution, ctx: Ctx, step0: float, full=None):
    """``(ModelFit, covariance)`` of the exponential (HAC sandwich on every point);
    ``full = (jacobian, residuals)`` on every point when the caller has them."""
    if not sol.ok:
        return failed(EXPONENTIAL, sol.message or "fit failed", step0, ctx.n), None
    x = sol.x
    jac, r = _full(EXPONENTIAL, x, ctx, full)
    cov = _hac_cov(jac, r, ctx.bw)
    if cov is None:  # gain 0: timescale column vanishes; levels still have errors
        cov2 = _hac_cov(jac, r, ctx.bw, 2)
        cov = np.full((3, 3), np.nan)
        if cov2 is not None:
            cov[:2, :2] = cov2
    params = estimates(EXPONENTIAL.param_names, x, cov, ctx)
    widen_to_grid(params, ("timescale",), ctx)
    ssr = float(r @ r)
    r2, aic, bic = _stats(ssr, ctx, 3)
    fit = ModelFit(
        "exponential", r2, aic, bic, params, ok=True, message=sol.message, step0=step0, ssr=ssr, n_points=ctx.n
    )
    return fit, cov


def no_signal(fit: ModelFit, signal: Signal) -> None:
    """Strip the dynamics of a fit to a series without a significant rise."""
    why = f"not identifiable: {signal.reason}"
    for name in fit.params:  # the dynamics: everything but the levels
        if name not in LEVELS:
            fit.params[name] = Estimate(fit.params[name].value, None, None, why)
    spec = MODELS.get(fit.model)
    if spec is not None and spec.reports_regime:
        fit.regime, fit.regime_reason = "indeterminate", signal.reason


def oscillator_fit(
    sol: Solution, prof: Profile | None, b: Binned, ctx: Ctx, step0: float, signal: Signal | None = None, full=None
) -> ModelFit:
    """The oscillator's ModelFit: HAC intervals, the damping-ratio profile, the regime
    (``full`` as in :func:`exponential_fit`)."""
    if not sol.ok:
        return failed(OSCILLATOR, sol.message or "fit failed", step0, ctx.n)
    x = sol.x
    p, p0, ts, ti = x
    jac, r = _full(OSCILLATOR, x, ctx, full)
    at_zero = ti <= _AT_ZERO * ts
    cov_full, cov_red = _oscillator_covariances(jac, r, ctx.bw, at_zero)
    zeta = damping_ratio(ts, ti)
    names = OSCILLATOR.param_names
    ssr = float(r @ r)
    r2, aic, bic = _stats(ssr, ctx, 4)
    fit = ModelFit("oscillator", r2, aic, bic, {}, ok=True, message=sol.message, step0=step0, ssr=ssr, n_points=ctx.n)
    cov_lv = cov_full if cov_full is not None else cov_red
    if (signal is not None and not signal.detected) or prof is None:
        return _without_profile(fit, x, cov_lv, ctx, zeta, prof, signal)

    f_hat = OSCILLATOR.func(b.t, *x)
    pi = profile_intervals(prof, x, r, b, ctx, f_hat)
    inertia_zero_inside = pi.zeta[1] is None
    if cov_full is not None and not inertia_zero_inside:
        params = estimates(names, x, cov_full, ctx)
        params["inertia"].ci95 = pi.inertia
        params["inertia"].note = "95% interval from the profile likelihood"
    else:
        params = estimates(names[:3], x[:3], cov_red, ctx)
        note = "at its bound 0" if at_zero else "consistent with 0"
        params["inertia"] = Estimate(float(ti), None, pi.inertia, f"{note}; 95% interval from the profile likelihood")
    # the levels and the timescale along the accepted profile belong in their intervals too
    for name, rng in (("plateau", pi.plateau), ("initial", pi.initial), ("timescale", pi.timescale)):
        extend(params[name], rng[0], rng[1], ctx.bounds[name], name)
    # the timescale's own profile likelihood (its likelihood is skewed towards long times when
    # the gain is small against the noise; the delta method is symmetric)
    ts_rng = prof.timescale_range(prof.best_ssr, pi.threshold) if math.isfinite(pi.threshold) else None
    if ts_rng is not None:
        extend(params["timescale"], ts_rng[0], ts_rng[1], ctx.bounds["timescale"], "timescale")
    widen_to_grid(params, ("timescale", "inertia"), ctx)
    zeta_se = _damping_ratio_se(cov_full, zeta, ts, ti)
    note = "95% interval from the profile likelihood"
    if inertia_zero_inside:
        note += "; no upper end (inertia consistent with 0)"
    zeta_ci = pi.zeta
    fit.regime, fit.regime_reason = regime_rule(zeta_ci)
    if pi.flat:
        fit.regime, fit.regime_reason = "indeterminate", "inertia not identifiable (flat profile)"
    elif fit.regime == "underdamped":
        zeta_ci, note = _check_turnover(fit, params, prof, float(zeta), float(ts), b, ctx, f_hat, r, ssr, zeta_ci, note)
    params["damping_ratio"] = Estimate(num(zeta), zeta_se, zeta_ci, note)
    fit.params = {k: params[k] for k in (*names, "damping_ratio")}
    return fit


def _oscillator_covariances(jac, r: np.ndarray, bw, at_zero: bool) -> tuple:
    """The oscillator's HAC covariances: of all four parameters (``None`` with the inertia at its
    bound 0) and of the three without the inertia. ``jac`` callable: a long series, J'J and the
    meat summed by blocks."""
    if callable(jac):
        parts = blocked_parts(jac, r, bw)
        cov_full = None if at_zero else sandwich(None, r, bw, parts.meat, bread=parts.bread)
        cov_red = sandwich(None, r, bw, parts.meat[:3, :3], bread=parts.bread[:3, :3])
    else:
        meat = hac_meat(jac * r[:, None], bw)
        cov_full = None if at_zero else sandwich(jac, r, bw, meat)
        cov_red = sandwich(jac[:, :3], r, bw, meat[:3, :3])
    return cov_full, cov_red


def _without_profile(fit: ModelFit, x, cov_lv, ctx: Ctx, zeta, prof: Profile | None, signal) -> ModelFit:
    """``fit`` with the delta-method estimates only and an indeterminate regime: no profile
    likelihood, or no signal detected."""
    names = OSCILLATOR.param_names
    params = (
        estimates(names, x, cov_lv, ctx)
        if cov_lv is not None and cov_lv.shape[0] == 4
        else {**estimates(names[:3], x[:3], cov_lv, ctx), "inertia": Estimate(float(x[3]))}
    )
    params["damping_ratio"] = Estimate(num(zeta))
    fit.params = params
    if prof is None:
        fit.regime, fit.regime_reason = "indeterminate", "profile likelihood not available"
    else:
        no_signal(fit, signal)
    return fit


def _damping_ratio_se(cov_full, zeta, ts: float, ti: float) -> float | None:
    """The damping ratio's delta-method standard error from the timescale's and the inertia's
    covariance (``None`` without it, with the inertia at 0 or a negative variance)."""
    if cov_full is None or not ti > 0:
        return None
    gvec = np.array([0.5 * zeta / ts, -0.5 * zeta / ti])
    var = gvec @ cov_full[2:, 2:] @ gvec
    return math.sqrt(var) if var >= 0 else None


def _check_turnover(fit, params, prof, zeta: float, ts: float, b, ctx: Ctx, f_hat, r, ssr: float, zeta_ci, note: str):
    """For an underdamped fit: test that the turn-over is observed and survives the forcing
    (theory §6); when not, set the regime indeterminate and (turn-over not observed) widen the
    intervals. Returns the damping ratio's interval and its note."""
    rev = reversal_test(prof, zeta, ts, b, ctx, f_hat, r)
    forced = None
    if rev.shown:  # ... and once the forcing is allowed for (theory §6)
        ok = np.isfinite(prof.ssr)
        forced = turnover_test(
            ctx.t,
            ctx.y,
            prof.zeta[ok],
            prof.ts[ok],
            zeta,
            ts,
            ctx.bounds["timescale"],
            ssr / ctx.n,
            Points.of_fit(ctx),
        )
    if forced is not None and not forced.shown:
        # the regime only, as the observed-overshoot test does (grpofit.fitting.overshoot): the
        # intervals stay those of the fitted law (widening the damping ratio's to the
        # accepted no-turn-over curves took grpofit compare's power to tell refresh
        # interval 1 from 32 by the damping ratio from 37 to 9 of 40 pairs)
        fit.regime, fit.regime_reason = "indeterminate", forced.reason
        note += (
            "; the fitted law's interval: with the forcing allowed for, a curve without a "
            "turn-over in the window also fits (regime indeterminate)"
        )
    if not rev.shown:
        fit.regime, fit.regime_reason = "indeterminate", rev.reason
        why = "widened to the curves without a turn-over in the window (not observed)"
        extend(params["plateau"], *rev.plateau, ctx.bounds["plateau"], "plateau", why)
        extend(params["timescale"], *rev.timescale, ctx.bounds["timescale"], "timescale", why)
        # kept for the state-space intervals that replace these (statespace_ci); the inertia's
        # is widened there too, after its profile interval has set the state-space grid
        ctx.__dict__["_widen"] = [
            ("plateau", *rev.plateau, why),
            ("timescale", *rev.timescale, why),
            ("inertia", *rev.inertia, why),
        ]
        hi = None if math.isinf(rev.zeta_hi) else max(zeta_ci[1], rev.zeta_hi)
        zeta_ci = (zeta_ci[0], hi)
        note += "; widened: the turn-over is not observed"
    return zeta_ci, note


def degenerate(y, ctx: Ctx, step0: float) -> dict[str, ModelFit]:
    """Constant values (or a single step): levels only, nothing else identifiable."""
    c = float(np.mean(y))
    why = "constant series: no rise, not identifiable" if ctx.sst <= 0 else "all points at one step"
    lv = Estimate(
        c, 0.0 if ctx.sst <= 0 else None, (c, c) if ctx.sst <= 0 else None, "constant series" if ctx.sst <= 0 else why
    )
    out = {}
    for model in MODELS.values():
        params = {
            k: lv if k in LEVELS else Estimate(None, None, None, why)
            for k in (*model.param_names, *model.derived_names)
        }
        ssr = float(np.sum((y - c) ** 2))
        aic, bic = information_criteria(ssr, ctx.n, len(model.param_names))
        out[model.name] = ModelFit(
            model.name,
            None,
            aic,
            bic,
            params,
            regime="indeterminate" if model.reports_regime else None,
            regime_reason=why if model.reports_regime else None,
            ok=True,
            message=why,
            step0=step0,
            ssr=ssr,
            n_points=ctx.n,
        )
    return out


def law_fit(sol: Solution, ctx: Ctx, step0: float, signal: Signal | None = None) -> ModelFit:
    """The ModelFit of a registry law other than the two the profile grid fits: the HAC
    sandwich on every point for every parameter (its ``time_params`` widened to the logging
    interval), its ``derived`` quantities as values without an interval, AIC/BIC with its
    number of parameters; the dynamics stripped without a significant rise."""
    model = sol.model
    if not sol.ok:
        return failed(model, sol.message or "fit failed", step0, ctx.n)
    x = sol.x
    jac, r = _full(model, x, ctx, None)
    params = estimates(model.param_names, x, _hac_cov(jac, r, ctx.bw), ctx)
    widen_to_grid(params, model.time_params, ctx)
    for name, value in model.derived(dict(zip(model.param_names, x.tolist()))).items():
        params[name] = Estimate(num(value), None, None, "derived from the fitted parameters")
    ssr = float(r @ r)
    r2, aic, bic = _stats(ssr, ctx, len(model.param_names))
    fit = ModelFit(model.name, r2, aic, bic, params, ok=True, message=sol.message, step0=step0, ssr=ssr, n_points=ctx.n)
    if model.reports_regime:
        fit.regime, fit.regime_reason = "indeterminate", "no regime rule for this law"
    if signal is not None and not signal.detected:
        no_signal(fit, signal)
    return fit
