"""``forecast_series``: from the steps seen so far to the contract's forecast entry.

1. Refuse only what the data cannot support ("cannot forecast yet: ..."): fewer than
   :data:`MIN_POINTS` points, or a fall back below the run's start (:func:`_fallen_back`). A flat
   run is forecast at its level; a run that collapsed is forecast from the points after the fall
   (the level it sits at), with the collapse named (:func:`_after_collapse`).
2. The metric's bounds (:mod:`.bounds`): when both are known the laws are fitted to the logit of
   the metric's position inside them, so every draw mapped back lies inside the bounds (theory
   §8: no clipping afterwards; a draw at the link's limit is the bound, and a band whose end comes
   within 5% of its width of a bound reaches it, and lattice draws are spread over their cells
   before the percentiles, :func:`_band`); observation noise is binomial
   with a known batch, else profiled with the relative variance a mean of binary rewards has in
   the logit (:class:`_Link`).
3. Fit the state-space laws (:mod:`.likelihood`, each with a random-walk level drift,
   :mod:`.walk`: one mode, damped oscillator, fast + slow modes) and mix them.
4. Draw the future (:mod:`.predictive`: parameters from a tempered posterior, so where the data
   leave the rise's end open the draws spread over it, upward as well as down) at the horizon, the
   ``--at`` steps, a fan grid and (for backtests) the final window; the laws' own error is added
   to them (:mod:`.discrepancy`: the rolling-origin check's error, and the continuation's rate
   uncertain by a share of the late slope, which keeps a noiseless run's band from shrinking to one
   curve); the logged reward adds observation noise (binomial draws when the logged values lie on a
   lattice of ``1/n``).
5. Summarise from the draws alone (no floor at persistence, no blend with it): mean and 80/95%
   prediction intervals, plateau (``lower_bound`` when the late slope is still significantly
   positive), steps to 90/95% of the gain (taken on the metric), the gain still expected by the
   horizon with its 95% interval, and a recommendation read from that interval
   (:func:`_recommend`: "no further gain"/"done" only when its upper end is small).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from grpofit.core.numbers import finite as _num
from grpofit.fitting.bounds import Bounds, edge_of, lattice, metric_bounds
from grpofit.fitting.drift import late_slope, persistence
from grpofit.forecasting.discrepancy import add_rate_error, add_validation_error, tail_noise_var, vouched_slope
from grpofit.forecasting.likelihood import fit_law, reduce_series
from grpofit.forecasting.predictive import TEMPER, law_weights, sample_future
from grpofit.forecasting.statespace import LAWS

__all__ = ["forecast_series", "Forecast", "MIN_POINTS"]

#: fewer seen points than this: "cannot forecast yet"
MIN_POINTS = 12
FAN_POINTS = 30
#: the slowest timescale searched, in multiples of the furthest step asked about: beyond it a
#: mode is a straight line over the whole forecast anyway
T_MAX_FACTOR = 3.0


@dataclass
class Forecast:
    """The contract's entry (``doc``) and what plots and backtests need beside it."""

    doc: dict
    steps: np.ndarray | None = None
    values: np.ndarray | None = None
    fan: dict | None = None  #: {"step", "q025", "q10", "q50", "q90", "q975"} of the logged reward
    final: dict | None = None  #: prediction of the mean over ``final_steps``
    extra: dict = field(default_factory=dict)


def _step_out(x):
    v = _num(x)
    if v is None:
        return None
    return int(round(v)) if abs(v - round(v)) < 1e-6 or abs(v) > 100 else round(v, 3)


def _about_step(x) -> str:
    """An estimated step in a sentence: whole steps from 10 on (``28``, not ``28.12``), three
    significant digits below (fractional steps such as epochs: ``1.79``)."""
    v = float(x)
    return str(int(round(v))) if abs(v) >= 10 else f"{v:.3g}"


def empty_doc(steps, horizon_step, horizon_source, at_steps, note: str) -> dict:
    """Every field present, every number null, and the reason in ``note``."""
    seen = {
        "steps": [_step_out(steps[0]), _step_out(steps[-1])] if len(steps) else [None, None],
        "n_points": int(len(steps)),
    }
    at = [{"step": _step_out(horizon_step), "mean": None, "pi80": None, "pi95": None}]
    at += [{"step": _step_out(s), "mean": None, "pi80": None, "pi95": None} for s in at_steps]
    null = {"value": None, "ci95": None, "kind": None}
    return {
        "seen": seen,
        "horizon": {"step": _step_out(horizon_step), "source": horizon_source},
        "at": at,
        "plateau": {"value": None, "ci95": None, "kind": None},
        "steps_to_90": dict(null),
        "steps_to_95": dict(null),
        "remaining_gain": dict(null),
        "recommendation": None,
        "note": note,
    }


def _clean(steps, values):
    steps = np.asarray(steps, dtype=float).ravel()
    values = np.asarray(values, dtype=float).ravel()
    keep = np.isfinite(steps) & np.isfinite(values)
    steps, values = steps[keep], values[keep]
    order = np.argsort(steps, kind="stable")
    return steps[order], values[order]


def _fallen_back(steps: np.ndarray, values: np.ndarray) -> str | None:
    """The refusal for a run that rose and is now falling back below where it started: its late
    slope significantly negative (:func:`~.drift.late_slope`, the last half) and the level it has
    reached (the last tenth's mean) at or below the first tenth's. A relaxation toward a
    plateau, even one that overshoots, settles above its start; extrapolated, such a fall goes
    on below anything the run has logged (a real run, cut halfway through a dip from 1.35 to
    0.1 and back to 1.0, was forecast at -0.07 with "keep going"). ``None`` otherwise."""
    drift = late_slope(steps, values)
    if not drift.falling:
        return None
    start = float(values[: max(1, values.size // 10)].mean())
    now = persistence(values)
    if now > start:
        return None
    return (
        f"cannot forecast: the reward is falling ({drift.slope:.3g} per step since step "
        f"{_step_out(drift.from_step)}) and is back at or below where the run started ({now:.3g} over the "
        f"last tenth of the steps seen, {start:.3g} over the first); a relaxation toward a plateau does "
        "not describe it (a collapse under way, or an unstable run: see grpofit diagnose)"
    )


def forecast_series(
    steps,
    values,
    *,
    horizon_step=None,
    horizon_source=None,
    at_steps=(),
    batch: int | None = None,
    final_steps=None,
    seed: int = 0,
    laws=None,
    warm: dict | None = None,
    walk: bool = True,
    validate: bool = True,
    bounds: Bounds | None = None,
    metric: str | None = None,
    collapse_check: bool = True,
    lean: bool = False,
) -> Forecast:
    """Forecast a run from ``(steps, values)`` seen so far (see the module docstring).

    ``final_steps``: the steps whose mean reward a backtest compares with (``Forecast.final``).
    ``laws``: the state-space laws to mix (default: every row of
    :data:`~.statespace.LAWS`, in its order).
    ``warm``: law -> ``theta`` of an earlier forecast of the same run (``extra["fits"]``):
    each law's search starts there (:func:`~.likelihood.fit_law`), as ``grpofit watch`` does.
    ``bounds``: the metric's range (:mod:`.bounds`; default from ``metric``, the batch and the
    values, :func:`~.bounds.metric_bounds`). ``validate``: the rolling-origin check of the
    model's extrapolation on the seen steps (:mod:`.validate`): its error at the horizon's
    distance is added to the draws as a model discrepancy (:mod:`.discrepancy`, beside the
    rate error of the continuation) and reported in ``doc["point"]``.
    ``lean``: what a ranking of many runs reads only (the draws, the ``at`` entries, the plateau,
    the notes): the steps to 90/95% of the gain, the recommendation that reads them and the fan
    chart are not computed (``None``), nor the whole run's fit where the collapse check does not
    need it (``extra["baseline"]``). The ``at`` entries and the draws are the same numbers as
    without it (the same random streams, the same collapse decision).
    """
    steps, values = _clean(steps, values)
    at_steps = [float(s) for s in at_steps]
    if bounds is None:
        bounds = metric_bounds(metric, values, batch=batch)
    n = steps.size

    def refuse(note: str, baseline=None) -> Forecast:
        out = _refused(steps, values, horizon_step, horizon_source, at_steps, bounds, note)
        if baseline is not None:
            out.extra["baseline"] = baseline
        return out

    if n < MIN_POINTS:
        return refuse(f"cannot forecast yet: {n} points seen, a forecast needs at least {MIN_POINTS}")
    from grpofit.fitting import fit_series
    from grpofit.fitting.analysis import confirmed_collapse

    # the whole run's fit: lean, only where the collapse check needs it (a candidate collapse to
    # test), the same call it would make (``extra["baseline"]`` is then not kept)
    baseline = None if lean else fit_series(steps, values, bounds=bounds)
    # the collapse fit and diagnose name (one computation for every surface)
    collapse, before = (
        confirmed_collapse(steps, values, whole=baseline, bounds=bounds) if collapse_check else (None, None)
    )
    if collapse is not None:
        return _after_collapse(
            collapse,
            steps,
            values,
            (baseline, before),
            bounds,
            dict(
                horizon_step=horizon_step,
                horizon_source=horizon_source,
                at_steps=at_steps,
                batch=batch,
                final_steps=final_steps,
                seed=seed,
                laws=laws,
                walk=walk,
                validate=validate,
                bounds=bounds,
                collapse_check=False,
                lean=lean,
            ),
        )
    falling = _fallen_back(steps, values)
    if falling is not None:
        return refuse(falling, baseline)

    step0 = float(steps[0])
    t = steps - step0
    t_last = float(t[-1])
    link = _Link(bounds, values, batch)
    series = reduce_series(t, link.z, link.point_var, level_sd=link.level_sd, rel_var=link.rel_var)
    horizon_t = None if horizon_step is None else float(horizon_step) - step0
    far = max([t_last] + [s - step0 for s in at_steps] + ([horizon_t] if horizon_t is not None else []))
    from grpofit.laws.models import guess_exponential

    t_guess = float(guess_exponential(series.t, series.y)["timescale"])
    from grpofit.forecasting.walk import fit_walk_law

    fitter = fit_walk_law if walk else fit_law
    fits = _fit_laws(fitter, laws or LAWS, series, t_guess, T_MAX_FACTOR * max(far, t_last), warm)
    if not fits:
        return refuse("cannot forecast: no law could be fitted to the seen steps", baseline)

    # the times the future is drawn at: now, the horizon, --at steps, a fan grid, the final window
    fan_end = far if far > t_last else 2.0 * t_last
    fan_t = np.linspace(t_last, fan_end, FAN_POINTS)
    pieces = _draw_times(t_last, horizon_t, at_steps, step0, fan_t, final_steps)
    sizes = [p.size for p in pieces]
    tf = np.concatenate(pieces)
    drift = late_slope(steps, values)
    temper = TEMPER if drift.rising else 1.0
    weights = law_weights(fits, temper)
    target = _validation_target(final_steps, horizon_t, step0, t_last, fan_end)
    point = None
    if validate and target > 0:
        from grpofit.forecasting.validate import rolling_origin

        point = rolling_origin(fits, weights, series, t, link.z, target, seed=seed)
    draws = sample_future(fits, series, tf, seed=seed, unlink=link.unlink, temper=temper, gain_times=not lean)
    noise_var = tail_noise_var(fits, weights, link, t)
    add_validation_error(draws, point, tf - t_last, target, noise_var, np.random.default_rng(seed + 2))
    add_rate_error(draws, vouched_slope(t, link.z), tf - t_last, np.random.default_rng(seed + 3))
    rng = np.random.default_rng(seed + 1)

    def logged(j0: int, j1: int) -> np.ndarray:
        """Draws of the logged reward at columns ``j0:j1``: the expected one plus observation noise."""
        return link.logged(draws.latent[:, j0:j1], draws.obs_sd, rng)

    offs = np.cumsum([0] + sizes)
    lat = link.metric(draws.latent[:, : offs[2]])  # now and the horizon (the metric is elementwise)
    now = lat[:, 0]
    h_cols = lat[:, offs[1] : offs[2]]
    at_entries = _at_entries(horizon_step, horizon_t, at_steps, step0, logged, offs, bounds, link.lattice_step)
    fan = None if lean else _fan(fan_t + step0, logged(offs[3], offs[4]))
    final = None
    if len(pieces) > 4:
        level = link.window_mean(draws.latent[:, offs[4] : offs[5]], draws.obs_sd, len(final_steps), rng)
        final = _final_interval(level, bounds)
    pers = persistence(values)

    doc = {
        "seen": {"steps": [_step_out(steps[0]), _step_out(steps[-1])], "n_points": int(n)},
        "horizon": {"step": _step_out(horizon_step), "source": horizon_source},
        "at": at_entries,
    }
    saturated = _saturation_seen(draws, fits)
    doc["plateau"] = _plateau(link.metric(draws.plateau), now, drift.rising, bounds.two_sided or saturated)
    quiet = _no_rise(baseline)
    doc["steps_to_90"] = _withheld(quiet) if quiet else _steps_to(draws.t90, step0)
    doc["steps_to_95"] = _withheld(quiet) if quiet else _steps_to(draws.t95, step0)
    doc["remaining_gain"] = _remaining_gain(h_cols, now, horizon_t)
    doc["recommendation"] = None if lean else _recommend(doc, steps, horizon_step, _small_gain(bounds, values))
    doc["note"] = _horizon_note(horizon_step, horizon_t, step0)
    doc["bounds"] = bounds.doc()
    doc["current"] = {
        "step": _step_out(steps[-1]),
        "mean": float(np.mean(now)),
        "ci95": np.percentile(now, [2.5, 97.5]).tolist(),
    }
    doc["point"] = {"method": "model", "persistence": pers, "model_weight": 1.0, "floor": None, "validation": point}
    doc["still_rising"] = bool(drift.rising)
    doc["late_slope"] = drift.summary()
    doc["laws"] = {
        f.law: {"weight": float(w), "bic": float(f.bic), "params": f.params()} for f, w in zip(fits, weights)
    }
    doc["observation_noise"] = f"binomial, batch {batch}" if link.point_var is not None else "estimated"
    doc["link"] = "logit" if link.linked else "identity"
    best = fits[int(np.argmax(weights))]
    from grpofit.forecasting.likelihood import unpack
    from grpofit.forecasting.statespace import design

    ct = np.linspace(0.0, fan_end, 200)
    curve = (ct + step0, link.metric(design(best.law, ct, unpack(best.law, best.theta)[0]) @ best.beta))
    return Forecast(
        doc,
        steps,
        values,
        fan,
        final,
        extra={"baseline": baseline, "draws": draws, "fits": fits, "curve": curve, "law": best.law, "link": link},
    )


def _fit_laws(fitter, laws, series, t_guess: float, t_max: float, warm: dict | None) -> list:
    """The fits of ``laws`` (in order) that succeeded; the single exponential's ``theta`` is the
    prior of the laws after it, and ``warm`` (law -> ``theta``) starts each search."""
    fits, prior = [], None
    for law in laws:
        f = fitter(law, series, t_guess=t_guess, t_max=t_max, prior=prior, warm=(warm or {}).get(law))
        if f is not None:
            fits.append(f)
            if law == "one":
                prior = f.theta
    return fits


def _draw_times(t_last: float, horizon_t, at_steps, step0: float, fan_t: np.ndarray, final_steps) -> list:
    """The pieces of times (from the first seen step) the future is drawn at, in order: now, the
    horizon (if any), the ``--at`` steps, the fan grid and (if given) up to 20 of the final window's
    steps. A step before the first seen one is drawn at the first step (the law starts there)."""
    pieces = [
        np.array([t_last]),
        np.array([] if horizon_t is None else [max(horizon_t, 0.0)]),
        np.array([max(s - step0, 0.0) for s in at_steps]),
        fan_t,
    ]
    if final_steps is not None and len(final_steps):
        fs = np.asarray(final_steps, dtype=float) - step0
        if fs.size > 20:
            fs = fs[np.linspace(0, fs.size - 1, 20).round().astype(int)]
        pieces.append(fs)
    return pieces


def _validation_target(final_steps, horizon_t, step0: float, t_last: float, fan_end: float) -> float:
    """The distance past the last seen step the rolling-origin check measures at: the final
    window's mean step, else the horizon (if still ahead), else the fan's end."""
    if final_steps is not None and len(final_steps):
        return float(np.mean(np.asarray(final_steps, dtype=float))) - step0 - t_last
    if horizon_t is not None and horizon_t > t_last:
        return horizon_t - t_last
    return fan_end - t_last


def _at_entries(
    horizon_step, horizon_t, at_steps, step0: float, logged, offs, bounds: Bounds, step: float = 0.0
) -> list[dict]:
    """The ``doc["at"]`` entries: the horizon's first, then each ``--at`` step's, drawn in that
    order with ``logged(j0, j1)``; a step before the first seen one gets no numbers. ``step``: the
    logged values' lattice step (:func:`_band`), 0 when they are not on one."""
    empty = {"mean": None, "pi80": None, "pi95": None}
    entries = []
    if horizon_t is not None:
        entries.append(
            _at_entry(horizon_step, logged(offs[1], offs[1] + 1)[:, 0], bounds, step)
            if horizon_t >= 0
            else {"step": _step_out(horizon_step), **empty}
        )
    else:
        entries.append({"step": None, **empty})
    for j, s in enumerate(at_steps):
        entries.append(
            _at_entry(s, logged(offs[2] + j, offs[2] + j + 1)[:, 0], bounds, step)
            if s >= step0
            else {"step": _step_out(s), **empty}
        )
    return entries


def _fan(fan_steps: np.ndarray, fan_draws: np.ndarray) -> dict:
    """The fan chart: its steps, the draws' mean and their 2.5/10/50/90/97.5 percentiles."""
    fan = {"step": fan_steps, "mean": fan_draws.mean(axis=0)}
    for name, q in (("q025", 2.5), ("q10", 10.0), ("q50", 50.0), ("q90", 90.0), ("q975", 97.5)):
        fan[name] = np.percentile(fan_draws, q, axis=0)
    return fan


def _final_interval(level: np.ndarray, bounds: Bounds) -> dict:
    """``Forecast.final`` from draws of the final window's mean: mean, median, 95% interval."""
    final = {
        "mean": float(level.mean()),
        "median": float(np.median(level)),
        "pi95": _band(level, 95.0, bounds),
        "kind": "interval",
    }
    final["model_median"] = final["median"]
    return final


def _remaining_gain(h_cols: np.ndarray, now: np.ndarray, horizon_t) -> dict:
    """``doc["remaining_gain"]``: the expected gain from now to the horizon with its 95% interval,
    or all ``None`` without a horizon (or one before the first seen step)."""
    if horizon_t is not None and horizon_t >= 0:
        gain = h_cols[:, 0] - now
        return {
            "value": float(np.mean(gain)),
            "ci95": np.percentile(gain, [2.5, 97.5]).tolist(),
            "kind": "estimate",
        }
    return {"value": None, "ci95": None, "kind": None}


def _horizon_note(horizon_step, horizon_t, step0: float) -> str | None:
    """``doc["note"]``: why there is no forecast at the horizon (none given, or it lies before the
    first seen step), else ``None``."""
    if horizon_t is not None and horizon_t < 0:
        return (
            f"the planned end (step {_step_out(horizon_step)}) lies before the first seen step "
            f"({_step_out(step0)}): no forecast there"
        )
    if horizon_step is not None:
        return None
    return (
        "cannot forecast yet: no plan length (the run's config names no trainer.total_training_steps "
        "or max_steps; pass --horizon N); the plateau, and the steps to 90/95% of a gain seen, are still given"
    )


def _refused(steps, values, horizon_step, horizon_source, at_steps, bounds: Bounds, note: str) -> Forecast:
    doc = empty_doc(steps, horizon_step, horizon_source, at_steps, note)
    doc["bounds"] = bounds.doc()
    return Forecast(doc, steps, values)


def _after_collapse(collapse, steps, values, fits, bounds: Bounds, options: dict) -> Forecast:
    """A run that collapsed: the forecast of the level it fell to, from the points after the
    fall was detected, with the collapse named; refused when too few points follow it. A run
    that recovered from its collapse: the forecast from the points after the recovery.
    ``fits``: the whole run's fit and the fit of the part before the collapse (``extra["before"]``:
    the plateau ``fit`` states for the run)."""
    baseline, before = fits
    recovered = bool(collapse.recovered)
    after = steps >= collapse.recovered_step if recovered else steps > collapse.detected_step
    named = (
        f"the reward collapsed at step {_step_out(collapse.step)} (from {collapse.level_before:.3g} to "
        f"{collapse.level_after:.3g})"
    ) + (f" and recovered by step {_step_out(collapse.recovered_step)}" if recovered else "")
    fall = "the recovery" if recovered else "the fall"
    k = int(after.sum())
    if k < MIN_POINTS:
        out = _refused(
            steps,
            values,
            options["horizon_step"],
            options["horizon_source"],
            options["at_steps"],
            bounds,
            f"cannot forecast yet: {named} and only {k} points follow {fall}; a forecast of the "
            f"level after it needs at least {MIN_POINTS}",
        )
        out.extra.update(baseline=baseline, before=before, collapse=collapse)
        return out
    fc = forecast_series(steps[after], values[after], **options)
    if not recovered and _still_falling(fc.extra.get("baseline")):
        for key in ("steps_to_90", "steps_to_95"):  # the rest of the fall is no gain to reach a share of
            fc.doc[key] = _withheld(f"no gain after the collapse at step {_step_out(collapse.step)}")
    fc.doc["seen"] = {"steps": [_step_out(steps[0]), _step_out(steps[-1])], "n_points": int(steps.size)}
    fc.doc["collapse"] = {
        "step": _step_out(collapse.step),
        "detected_step": _step_out(collapse.detected_step),
        "level_before": float(collapse.level_before),
        "level_after": float(collapse.level_after),
        "recovered": recovered,
        "recovered_step": _step_out(collapse.recovered_step) if recovered else None,
    }
    text = f"{named}; forecast from the {k} points after {fall}" + (
        "" if recovered else " (the level it sits at, not the plateau before it)"
    )
    fc.doc["note"] = text if fc.doc.get("note") is None else f"{text}; {fc.doc['note']}"
    if fc.doc.get("recommendation"):
        fc.doc["recommendation"] = f"{fc.doc['recommendation']} (after a collapse: see grpofit diagnose)"
    fc.steps, fc.values = steps, values
    fc.extra["baseline"] = baseline
    fc.extra["collapse"] = collapse  # the shared judgement's, which the command's entry names
    fc.extra["before"] = before
    return fc


class _Link:
    """The coordinates the laws are fitted in: the logit of the metric's position inside its
    bounds when both are known (:mod:`.bounds`), else the metric itself; and the observation
    noise in them (binomial with a known batch on [0, 1]; else profiled, its relative variance
    ``1 / (p (1 - p))`` in the logit, as for a mean of binary rewards)."""

    #: prior sd of the plateau and the modes' amplitudes in the logit. It bounds how far a rise the
    #: seen steps cannot place the end of may carry on: the mean-field bandit's rise is a straight
    #: line in the logit (theory §8), and with 4 the plateau could not lie far enough above a run
    #: cut before its steep part (pi80 of the runs that moved covered 53-72%, forecasts 0.23 low
    #: at the 10% cut). Chosen on the tuning grid of benchmarks/forecast_calibration.py (seed 101:
    #: 2.5, 4, 8 and 16 tried; 8: moved pi80 63-79%, pi95 82-98%, median error 0.156 at 10%)
    LEVEL_SD = 8.0

    def __init__(self, bounds: Bounds, values: np.ndarray, batch: int | None):
        self.bounds = bounds
        self.linked = bounds.two_sided
        self.batch = batch if (batch and self.linked and bounds.low == 0.0 and bounds.high == 1.0) else None
        self.point_var = self.rel_var = None
        self.lattice = None
        if not self.linked:
            self.z = values
            self.level_sd = None
            return
        found = None if (batch and self.batch) else lattice(bounds, values)  # taken once
        self.edge = edge_of(batch or found)
        self.lattice = self.batch or found
        self.z = bounds.to_link(values, self.edge)
        self.level_sd = self.LEVEL_SD
        p = self._smooth(bounds.position(values))
        if self.batch:
            self.point_var = 1.0 / (self.batch * p * (1.0 - p))
        else:
            rv = 1.0 / (p * (1.0 - p))
            self.norm = float(np.median(rv))
            self.rel_var = rv / self.norm

    def _clip(self, p):
        return np.clip(p, max(self.edge, 0.01), 1.0 - max(self.edge, 0.01))

    def _smooth(self, p: np.ndarray) -> np.ndarray:
        k = 5
        pad = np.pad(p, (k // 2, k // 2), mode="edge")
        return self._clip(np.median(np.lib.stride_tricks.sliding_window_view(pad, k), axis=1))

    @property
    def lattice_step(self) -> float:
        """The step between the values the logged metric can take (a mean of binary rewards), 0
        when it is not on a lattice."""
        if not (self.linked and self.lattice):
            return 0.0
        return (self.bounds.high - self.bounds.low) / self.lattice

    @property
    def unlink(self):
        return self.bounds.from_link if self.linked else None

    def metric(self, z):
        """The metric at ``z``; a two-sided link's positions within :attr:`edge` of a bound are the
        bound itself (:meth:`at_bound`)."""
        return self.at_bound(z, self.bounds.from_link(z)) if self.linked else np.asarray(z, dtype=float)

    def at_bound(self, z, y):
        """``y`` (the metric at ``z``) with the draws at or past the link's limit set to the bound.
        Observed values closer to a bound than :attr:`edge` were held at it for the logit (a value
        at the bound has no finite logit), so the fitted coordinates cannot tell a run sitting at
        the bound from one ``edge`` inside it: a draw there is the bound (censored at it), and a run
        sitting at 1.0 gets a band that reaches 1.0 instead of stopping short of it by ~1e-5."""
        z = np.asarray(z, dtype=float)
        limit = math.log(1.0 - self.edge) - math.log(self.edge) - 1e-9
        return np.where(z >= limit, self.bounds.high, np.where(z <= -limit, self.bounds.low, y))

    def _noise_sd(self, z: np.ndarray, obs_sd: np.ndarray) -> np.ndarray:
        """Observation sd in the fitted coordinates at latent ``z`` (draws x columns)."""
        if not self.linked:
            return np.broadcast_to(obs_sd[:, None], z.shape)
        if self.batch:
            p = self._clip(self.bounds.position(self.metric(z)))
            return np.sqrt(1.0 / (self.batch * p * (1.0 - p)))
        p = self._clip(self.bounds.position(self.metric(z)))
        return obs_sd[:, None] * np.sqrt(1.0 / (p * (1.0 - p)) / self.norm)

    def logged(self, z: np.ndarray, obs_sd: np.ndarray, rng) -> np.ndarray:
        """Draws of the logged value at latent ``z``: the metric plus observation noise (inside the
        bounds: a binomial batch, or noise added in the logit)."""
        # binomial draws reach the bounds by themselves: the position unsnapped (:meth:`at_bound`)
        if self.batch:
            return rng.binomial(self.batch, self.bounds.from_link(z)) / float(self.batch)
        if self.linked and self.lattice:
            # logged means of n binary rewards: binomial, plus what the profiled noise has beyond it
            n = self.lattice
            p = self._clip(self.bounds.position(self.metric(z)))
            extra = np.maximum(obs_sd[:, None] ** 2 / self.norm - 1.0 / n, 0.0) / (p * (1.0 - p))
            q = self.bounds.position(self.bounds.from_link(z + np.sqrt(extra) * rng.standard_normal(z.shape)))
            return self.bounds.low + (self.bounds.high - self.bounds.low) * rng.binomial(n, q) / float(n)
        return self.metric(z + self._noise_sd(z, obs_sd) * rng.standard_normal(z.shape))

    def window_mean(self, z: np.ndarray, obs_sd: np.ndarray, count: int, rng) -> np.ndarray:
        """Draws of the mean logged value over ``count`` steps whose latent draws are ``z``."""
        m = self.metric(z).mean(axis=1)
        if not self.linked:
            return m + obs_sd / math.sqrt(count) * rng.standard_normal(m.shape)
        zm = self.bounds.to_link(m, 1e-12)
        sd = self._noise_sd(zm[:, None], obs_sd)[:, 0] / math.sqrt(count)
        return self.metric(zm + sd * rng.standard_normal(zm.shape))


#: a band's end closer to a bound of the metric than this share of the band's width is the bound
#: itself (:func:`_band`)
NEAR_BOUND = 0.05


def _band(draws: np.ndarray, level: float, bounds: Bounds, step: float = 0.0) -> list[float]:
    """The central ``level``% interval of ``draws``; an end within :data:`NEAR_BOUND` of the band's
    width of a bound of the metric is moved to the bound. The logit squeezes the last stretch before
    a bound to nothing: a run still creeping toward 1.0 (a deterministic one: 0.99988 at the cut,
    0.99999 later) gets draws whose extreme stops at 0.9997, a band that misses the run by 1e-4
    while looking confident. Reaching the bound widens the band by at most that share.

    ``step``: the draws lie on a lattice of this step (logged means of binary rewards). Each draw
    is then spread evenly over its lattice cell before the percentiles are taken (the continuous
    central interval of a discrete value): the percentiles of the lattice draws themselves are
    lattice values, and a band that includes both end values whole holds more than ``level``% (a
    binomial of 64 at 0.7: 83% for an 80% band, 97% for a 95% one)."""
    if step > 0:
        draws = np.clip(draws + step * (_spread(draws.size) - 0.5), bounds.low, bounds.high)
    tail = 0.5 * (100.0 - level)
    lo, hi = (float(v) for v in np.percentile(draws, [tail, 100.0 - tail]))
    if bounds.two_sided:
        near = NEAR_BOUND * max(hi - lo, 0.0)
        if bounds.high - hi <= near:
            hi = float(bounds.high)
        if lo - bounds.low <= near:
            lo = float(bounds.low)
    return [lo, hi]


def _spread(n: int) -> np.ndarray:
    """``n`` positions spread evenly over [0, 1) in no order related to the draws' (the golden
    ratio's multiples, modulo 1): the within-cell offsets of :func:`_band`."""
    return np.mod(0.5 + np.arange(n) * 0.6180339887498949, 1.0)


def _at_entry(step, draws: np.ndarray, bounds: Bounds, lattice_step: float = 0.0) -> dict:
    return {
        "step": _step_out(step),
        "mean": float(np.mean(draws)),
        "pi80": _band(draws, 80.0, bounds, lattice_step),
        "pi95": _band(draws, 95.0, bounds, lattice_step),
        "kind": "interval",
    }


def _plateau(p: np.ndarray, now: np.ndarray, rising: bool, upper_known: bool) -> dict:
    """The plateau's median and 95% interval from its draws (on the metric); still rising: a
    lower bound at least where the run already is, its upper end from the draws where the
    metric is bounded or the draws hold the rise's end (``upper_known``), else null."""
    lo, mid, hi = (float(v) for v in np.percentile(p, [2.5, 50.0, 97.5]))
    if not rising:
        return {"value": mid, "ci95": [lo, hi], "kind": "estimate"}
    value = max(lo, float(np.percentile(now, 50.0)))
    return {"value": value, "ci95": [value, hi if upper_known and hi > value else None], "kind": "lower_bound"}


def _saturation_seen(draws, fits) -> bool:
    """Whether the data hold the slowest timescale well below its upper bound, for the laws
    carrying most of the mixture: a law holds it when 97.5% of its draws lie below half its
    bound, and the laws that do carry at least half of the draws. Then the rise's end is
    identified; otherwise where the run stops is not in the seen steps."""
    held = 0
    for i, f in enumerate(fits):
        mine = draws.law == i
        if np.any(mine) and np.percentile(draws.slow[mine], 97.5) < 0.5 * math.exp(float(f.upper[0])):
            held += int(mine.sum())
    return held >= 0.5 * draws.law.size


def _no_rise(baseline) -> str | None:
    """Why the steps seen show no gain to reach a share of, or None. The same test ``fit`` states
    (:func:`grpofit.fitting.regime.signal_test`, with the model-free trend test): where it finds no
    significant rise or fall, ``fit`` calls the timescale not identifiable, and a step reaching 90%
    of a gain the data do not show would be a number drawn from the noise."""
    sig = getattr(baseline, "signal", None) or {}
    reason = str(sig.get("reason") or "")
    if sig.get("detected") is False and reason.startswith("no significant"):
        return reason.split(";")[0] + " in the steps seen"
    return None


def _still_falling(fit) -> bool:
    """Whether the law fitted after a fall goes on falling (its plateau below its start)."""
    plateau, initial = (fit.param(k) if fit is not None else None for k in ("plateau", "initial"))
    if plateau is None or initial is None or plateau.value is None or initial.value is None:
        return False
    return float(plateau.value) < float(initial.value)


def _withheld(reason: str) -> dict:
    """A step reaching a share of the gain that is not given, and why."""
    return {"value": None, "ci95": None, "kind": None, "reason": reason}


def _steps_to(times: np.ndarray, step0: float) -> dict:
    """The step reaching a share of the gain: the draws' median and 95% interval (an end the
    draws put beyond 60 slowest timescales is null: not reached)."""
    ok = times[~np.isnan(times)]
    if ok.size < 0.5 * times.size:
        return {"value": None, "ci95": None, "kind": None}
    lo, mid, hi = (float(v) for v in np.percentile(ok, [2.5, 50.0, 97.5]))
    conv = lambda x: _step_out(step0 + x) if math.isfinite(x) else None
    return {"value": conv(mid), "ci95": [conv(lo), conv(hi)], "kind": "estimate"}


#: a remaining gain below this share of the metric's range (its bounds, else the range seen) is
#: "no further gain"
SMALL_GAIN = 0.02


def _small_gain(bounds: Bounds, values: np.ndarray) -> float:
    span = (bounds.high - bounds.low) if bounds.two_sided else float(np.ptp(values))
    return SMALL_GAIN * max(span, 1e-12)


def _recommend(doc: dict, steps: np.ndarray, horizon_step, small: float) -> str | None:
    """From the remaining gain's 95% interval: "no further gain expected" (or "done") only when
    its upper end is small; "keep going" when its lower end is above small; else "cannot tell yet"."""
    last = float(steps[-1])
    if horizon_step is None:
        return None
    h = _step_out(horizon_step)
    if float(horizon_step) <= last:
        return f"done: the planned end (step {h}) is already reached"
    gain = doc["remaining_gain"]
    if gain["value"] is None:
        return None
    lo, hi = gain["ci95"]
    g = f"{gain['value']:.3g} [{lo:.3g}, {hi:.3g}]"
    if hi <= small:
        s95 = doc["steps_to_95"]
        if s95.get("ci95") and s95["ci95"][1] is not None and s95["ci95"][1] <= last:
            return f"done: within 5% of the plateau since about step {_about_step(s95['value'])}; at most {hi:.3g} more expected by step {h}"
        return f"no further gain expected: the reward is expected to change by {g} before step {h}"
    if lo > small:
        return f"keep going: {g} of reward still expected before step {h}"
    return f"cannot tell yet: the gain by step {h} lies in {g} (95%)"
