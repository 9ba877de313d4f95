"""``fit_series``: the fit of every law of the registry (:data:`grpofit.laws.registry.MODELS`) to one
series, start to finish, and the choice of the preferred law."""

from __future__ import annotations

import math

import numpy as np

from grpofit.core.errors import TooFewPoints
from grpofit.fitting.assemble import (
    degenerate,
    exponential_fit,
    gain_stat,
    law_fit,
    no_signal,
    on_points,
    oscillator_fit,
)
from grpofit.fitting.hac import bandwidth, critical_value, noise_floor
from grpofit.fitting.intervals import Ctx, reconcile_stderr
from grpofit.fitting.jacobians import raw_jacobian
from grpofit.fitting.profile import log_bins, profile
from grpofit.fitting.regime import PREFER_DELTA_BIC, signal_test
from grpofit.fitting.results import Estimate, FitResult, ModelFit
from grpofit.fitting.scaling import scaled, scales, unscale
from grpofit.fitting.solve import better, binned_ssr, solve
from grpofit.fitting.statespace_ci import apply_to_models
from grpofit.laws.models import EXPONENTIAL, OSCILLATOR, median
from grpofit.laws.registry import MODELS

__all__ = ["fit_series", "MIN_POINTS"]

#: fewer finite points than this raise :class:`grpofit.core.errors.TooFewPoints`
MIN_POINTS = 8


def _clean(steps, values, run: str, metric: str):
    steps = np.asarray(steps, dtype=float).ravel()
    values = np.asarray(values, dtype=float).ravel()
    keep = np.isfinite(steps) & np.isfinite(values)
    if not keep.all():  # no copy of a series that is all finite
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
    return steps, values


def fit_series(
    steps,
    values,
    *,
    run: str = "",
    metric: str = "",
    step_column: str = "",
    seed: int = 0,
    warm: dict | None = None,
    bounds=None,
) -> FitResult:
    """Fit every law of :data:`grpofit.laws.registry.MODELS` to ``values`` against ``steps``
    (non-finite points are dropped).

    Raises :class:`grpofit.core.errors.TooFewPoints` below :data:`MIN_POINTS` finite points. A
    model that cannot be fitted comes back as ``ModelFit(ok=False, message=...)``. The method
    (see :mod:`grpofit.fitting`) is deterministic; ``seed`` is accepted for interface
    stability and unused.

    ``warm``: a dict the caller keeps between refits of a growing series (``grpofit watch``), law
    name -> the parameters its last fit found. The exponential's and the oscillator's least
    squares start there instead of at the grid's best point, and the start is kept only when the
    solve ends no higher than that grid point (else it is solved from the grid, as cold): the
    same optimum for fewer evaluations. The optima found are stored back into it.

    ``bounds``: the metric's range (:class:`grpofit.fitting.bounds.Bounds`); by default it is
    read from ``metric`` and the values (:func:`grpofit.fitting.bounds.metric_bounds`). Every
    law's plateau and start are held inside it (:func:`grpofit.fitting.bounds.hold_levels`).
    """
    steps, values = _clean(steps, values, run, metric)
    with np.errstate(all="ignore"):  # every non-finite intermediate is handled explicitly
        step0, tau, c, s = scales(steps, values)
        if tau == 1.0 and s == 1.0 and c == 0.0:
            res = _fit(steps, values, run, metric, step_column, warm=warm)
        else:  # values or steps near the limits of double precision: fit the rescaled series
            res = _fit(scaled(steps, step0, tau), scaled(values, c, s), run, metric, step_column)
            res = unscale(res, steps, values, step0, tau, c, s)
    from grpofit.fitting.overshoot import apply_to_fit

    apply_to_fit(res)  # "underdamped" needs an overshoot observed in the data
    from grpofit.fitting.bounds import hold_levels, metric_bounds

    hold_levels(res, metric_bounds(metric, values) if bounds is None else bounds)
    return res


def _fit(steps, values, run, metric, step_column, warm: dict | None = None) -> FitResult:
    step0 = float(steps[0])
    # a run logged from step 0 (not -0.0) is its own time axis: no copy of its steps
    t = steps if step0 == 0.0 and math.copysign(1.0, step0) > 0 else steps - step0
    y = values
    n = y.size
    ctx = Ctx(t, y, n, float(np.sum((y - y.mean()) ** 2)), _bounds(t, y), dt=median(np.diff(t)))
    noise_sd = noise_floor(y)
    if t[-1] <= 0 or ctx.sst <= 0:
        models = degenerate(y, ctx, step0)
        return _result(run, metric, step_column, steps, values, models, noise_sd, ctx, None)

    bounds, lv, tb = ctx.bounds, ctx.bounds["plateau"], ctx.bounds["timescale"]
    binned = log_bins(t, y)
    g_exp = EXPONENTIAL.guess(t, y)
    # the grid over (damping ratio, timescale), centred on the data-driven guess, levels solved
    # in closed form: the starting points and the damping ratio's profile likelihood at once
    prof = profile(binned, g_exp["timescale"], lv, tb)
    k = int(np.argmin(prof.ssr))
    last = prof.zeta.size - 1
    osc_start, exp_start = _grid_starts(prof, k, last, g_exp)
    exp = _solve_from(EXPONENTIAL, binned, exp_start, bounds, warm, float(prof.ssr[last]))
    osc = _solve_from(OSCILLATOR, binned, osc_start, bounds, warm, float(prof.ssr[k]))
    exp, osc = _nested_repair(exp, osc, binned, bounds)
    if warm is not None:  # the next refit of this series starts here
        warm.update({sol.model.name: sol.x.copy() for sol in (exp, osc) if sol.ok})
    # every statistic on every point needs the curve and its Jacobian there: one evaluation
    # per model (the curve is ``plateau + (initial - plateau) * g`` and ``g`` is the
    # Jacobian's ``initial`` column)
    exp_full = _on_points(EXPONENTIAL, exp, t, y)
    osc_full = _on_points(OSCILLATOR, osc, t, y)
    if osc.ok:
        if not (prof.center / 3.0 <= osc.x[2] <= prof.center * 3.0):
            prof = profile(binned, osc.x[2], lv, tb)
        prof.best_ssr = min(osc.ssr, float(np.min(prof.ssr)))
        ctx.bw = bandwidth(osc_full[1])
        ctx.cv = critical_value(ctx.bw / n)
    elif exp.ok:
        ctx.bw = bandwidth(exp_full[1])
        ctx.cv = critical_value(ctx.bw / n)

    # every other law of the registry from its own guess (none by default)
    others = {
        m.name: solve(m, binned, m.guess(t, y), bounds)
        for m in MODELS.values()
        if m is not EXPONENTIAL and m is not OSCILLATOR
    }
    exp_fit, exp_cov = exponential_fit(exp, ctx, step0, full=exp_full)
    exp_full = None  # a long series' residuals: not held past their last use
    gain, gain_se = gain_stat(exp.x, exp_cov) if exp.ok else (None, None)
    osc_ssr = float(osc_full[1] @ osc_full[1]) if osc.ok else None
    ssrs = [(exp_fit.ssr, 3), (osc_ssr, 4)]
    ssrs += [(_point_ssr(sol, t, y), len(sol.model.param_names)) for sol in others.values()]
    signal = _with_trend(signal_test(ctx.sst, n, ssrs, gain, gain_se, ctx.cv), t, y)
    if not signal.detected and exp_fit.ok:
        no_signal(exp_fit, signal)
    fits = {
        "exponential": exp_fit,
        "oscillator": oscillator_fit(osc, prof if osc.ok else None, binned, ctx, step0, signal, full=osc_full),
    }
    osc_full = None
    fits.update({name: law_fit(sol, ctx, step0, signal) for name, sol in others.items()})
    models = {name: fits[name] for name in MODELS}  # the registry's order
    # the plateau's and timescale's intervals from the likelihood with the forcing (theory §6)
    apply_to_models(models, ctx, signal)
    if signal is not None and not signal.detected and signal.reason.startswith("no significant"):
        level_plateau(models, y)  # a flat run: its plateau is its level, not a law's extrapolation
    _reconcile_all(models)
    return _result(run, metric, step_column, steps, values, models, noise_sd, ctx, signal)


def _grid_starts(prof, k: int, last: int, g_exp: dict) -> tuple[dict, dict]:
    """The oscillator's and the exponential's starting points: the profile grid's best row
    ``k`` and its last (exponential) row ``last``, or the data-driven guess where they are not finite."""
    osc_start = prof.row(k) if np.isfinite(prof.ssr[k]) else {**g_exp, "inertia": 0.0}
    exp_start = prof.row(last, exponential=True) if np.isfinite(prof.ssr[last]) else g_exp
    return osc_start, exp_start


def _nested_repair(exp, osc, binned, bounds: dict) -> tuple:
    """``(exp, osc)`` after repairing poor fits: the oscillator nests the exponential (inertia 0),
    so it is re-solved from the exponential when it failed or fits worse, and a failed
    exponential is solved from the oscillator."""
    if exp.ok and (not osc.ok or osc.ssr > exp.ssr * (1 + 1e-9)):
        p, p0, ts = exp.x
        start = {"plateau": p, "initial": p0, "timescale": ts, "inertia": 0.02 * ts}
        osc = better(osc, solve(OSCILLATOR, binned, start, bounds))
    if osc.ok and not exp.ok:
        p, p0, ts, ti = osc.x
        exp = solve(EXPONENTIAL, binned, {"plateau": p, "initial": p0, "timescale": ts + ti}, bounds)
    return exp, osc


def _with_trend(signal, t, y):
    """``signal``, or, when it was refused only for a plateau not identified, the same with the
    whole run's trend (a rise whose plateau is not identified)."""
    if not signal.detected and "standard errors from 0" in signal.reason:
        from grpofit.fitting.fitcheck import whole_trend
        from grpofit.fitting.regime import with_trend

        return with_trend(signal, whole_trend(t, y))
    return signal


def _reconcile_all(models: dict) -> None:
    """Reconcile every parameter's ± stderr with its interval (once every interval is final)."""
    for fit in models.values():
        for e in fit.params.values():
            reconcile_stderr(e)


#: batches of the run whose means give a flat run's level its standard error (serial correlation)
LEVEL_BATCHES = 10


def level_plateau(models: dict[str, ModelFit], y) -> None:
    """A run without a significant rise or fall (no law beats a constant, no significant
    slope): every law's plateau is the run's level, its mean, with the 95% interval of
    :data:`LEVEL_BATCHES` batch means (robust to serial correlation). The law's p* of such a
    run is an extrapolation of noise that can sit at the fit box's edge."""
    y = np.asarray(y, dtype=float)
    y = y[np.isfinite(y)]
    if y.size < 2 * LEVEL_BATCHES:
        return
    mean = float(np.mean(y))
    batches = np.array([float(np.mean(b)) for b in np.array_split(y, LEVEL_BATCHES)])
    se = float(np.std(batches, ddof=1)) / math.sqrt(LEVEL_BATCHES)
    q = 2.262  # Student t, 9 degrees of freedom, 97.5%
    note = (
        f"no significant rise: the plateau is the run's level (its mean over {y.size} points; 95% interval "
        f"from {LEVEL_BATCHES} batch means)"
    )
    for fit in models.values():
        if fit.ok and "plateau" in fit.params:
            fit.params["plateau"] = Estimate(mean, se, (mean - q * se, mean + q * se), note)


def _bounds(t, y) -> dict[str, tuple[float, float]]:
    """Every registry law's parameter bounds in one dict (a law whose parameters are already
    covered is not asked: the oscillator's bounds cover the exponential's)."""
    out: dict[str, tuple[float, float]] = {}
    for model in sorted(MODELS.values(), key=lambda m: -len(m.param_names)):
        if not set(model.param_names) <= out.keys():
            for name, rng in model.bounds(t, y).items():
                out.setdefault(name, rng)
    return out


def _point_ssr(sol, t, y) -> float | None:
    """The sum of squares of a solution on every point (``None`` if it failed)."""
    if not sol.ok:
        return None
    r = sol.model.func(t, *sol.x) - y
    return float(r @ r)


def _solve_from(model, binned, start: dict, bounds: dict, warm: dict | None, grid_ssr: float):
    """``model`` solved from the last refit's optimum in ``warm`` when that point fits the new
    data better than the grid's ``start`` and the solve from it ends no higher than the grid's
    best point (``grid_ssr``, where the cold solve starts); else from ``start``, as cold. An
    optimum with its inertia at the bound 0 is not a start (the solver moves off that bound
    slowly): the grid's is."""
    x = None if warm is None else warm.get(model.name)
    if x is not None and math.isfinite(grid_ssr) and np.all(np.isfinite(x)):
        names = model.param_names
        at_bound = "inertia" in names and x[names.index("inertia")] <= 1e-4 * abs(x[names.index("timescale")])
        first = dict(zip(names, map(float, x)))
        cold_x = [start[n] for n in names]
        if not at_bound and binned_ssr(binned, model, x) < binned_ssr(binned, model, cold_x):
            sol = solve(model, binned, first, bounds)
            if sol.ok and sol.ssr <= grid_ssr * (1.0 + 1e-12):
                return sol
    return solve(model, binned, start, bounds)


def _on_points(model, sol, t, y):
    """``(Jacobian, residuals)`` of a solution on every point (``None`` if it failed)."""
    if not sol.ok:
        return None
    return on_points(raw_jacobian(model), sol.x, t, y)  # inside fit_series' errstate


def _result(run, metric, step_column, steps, values, models, noise_sd, ctx: Ctx, signal) -> FitResult:
    preferred, reason = _prefer(models, signal, ctx.bounds)
    best = models.get(preferred) if preferred else None
    var_y = ctx.sst / ctx.n if ctx.n else 0.0
    resid_sd = None
    if best is not None and best.ssr is not None:
        k = len(MODELS[best.model].param_names)
        resid_sd = math.sqrt(best.ssr / max(ctx.n - k, 1))
    noise = {
        "noise_sd": noise_sd,
        "residual_sd": resid_sd,
        "r2_ceiling": (1.0 - noise_sd**2 / var_y) if var_y > 0 else None,
        "r2_ceiling_se": _ceiling_se(values),
        "fit_vs_noise": (resid_sd / noise_sd) if (resid_sd is not None and noise_sd > 0) else None,
        "hac_bandwidth": ctx.bw,
    }
    if signal is None:
        sig = {"detected": False, "reason": "constant series" if ctx.sst <= 0 else "one step"}
    else:
        sig = signal.summary()
    return FitResult(run, metric, step_column, steps, values, int(ctx.n), models, preferred, noise, reason, sig)


def _ceiling_se(values) -> float | None:
    """Standard error of the R² noise ceiling (an estimate, not a bound: :mod:`grpofit.fitting.ceiling`)."""
    from grpofit.fitting.ceiling import r2_ceiling

    return r2_ceiling(values)[1]


#: a damping ratio below this, with no upper end to its interval, is a degenerate oscillator
DEGENERATE_ZETA = 0.05
#: a parameter within this fraction of its box's width from the box's edge sits at the edge
EDGE = 0.005


def degenerate_fit(fit: ModelFit, bounds: dict | None) -> str | None:
    """Why ``fit`` is a degenerate fit that nothing in the data identifies (None if it is not):
    its inertia at the fit box's edge, or a damping ratio near 0 whose interval has no upper
    end (a sine arc of an unbounded period: the law's extra parameters stand in for a curve)."""
    why = []
    for name in ("inertia",):
        e, box = fit.params.get(name), (bounds or {}).get(name)
        if e is None or e.value is None or box is None:
            continue
        lo, hi = box
        if math.isfinite(hi) and e.value >= hi - EDGE * (hi - lo):
            why.append(f"{name} {e.value:.4g} at the fit box's edge {hi:.4g}")
    z = fit.params.get("damping_ratio")
    if z is not None and z.value is not None and z.value < DEGENERATE_ZETA and (z.ci95 is None or z.ci95[1] is None):
        why.append(f"damping ratio {z.value:.2g} near 0, its interval open")
    return "; ".join(why) or None


def _prefer(models: dict[str, ModelFit], signal, bounds: dict | None = None) -> tuple[str | None, str]:
    """The preferred law, walking the registry's order (the simplest law first): a later law
    replaces the current choice when its BIC is lower by more than :data:`PREFER_DELTA_BIC`,
    the series shows a significant rise and its fit is not :func:`degenerate_fit`. With two laws:
    the oscillator when it beats the exponential so, else the exponential (the simpler law wins
    ties)."""
    ok = [(name, fit) for name, fit in models.items() if fit.ok]
    if not ok:
        return None, "no model could be fitted"
    if len(ok) < 2 or any(fit.bic is None for _, fit in ok):
        return ok[0][0], "only fit that succeeded"
    if signal is not None and not signal.detected:
        return ok[0][0], f"{signal.reason}: the simpler law"
    best, best_fit = ok[0]
    reason = None
    skipped = []
    for name, fit in ok[1:]:
        delta = best_fit.bic - fit.bic
        why = degenerate_fit(fit, bounds) if delta > PREFER_DELTA_BIC else None
        if why:
            skipped.append(f"the {name}'s BIC is lower by {delta:.1f}, but its fit is degenerate ({why})")
        elif delta > PREFER_DELTA_BIC:
            best, best_fit = name, fit
            reason = f"BIC lower by {delta:.1f} > {PREFER_DELTA_BIC:g}"
    if reason is None and skipped:
        reason = "; ".join(skipped) + ": the simpler law"
    if reason is None:
        others = " or ".join(f"the {name}" for name, _ in ok[1:])
        reason = f"BIC of {others} not lower by more than {PREFER_DELTA_BIC:g}"
    return best, reason
