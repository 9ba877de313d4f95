"""``forecast_series``: from the steps seen so far to the contract's forecast entry.

1. Refuse what the data cannot support ("cannot forecast yet: ..."): fewer than
   :data:`MIN_POINTS` points, no rise above the noise (neither grpofit's signal test on the
   seen part nor a significant slope over all of it, :mod:`.drift`), a collapse (a relaxation
   law does not describe what follows a collapse), or a fall back below the run's start
   (:func:`_fallen_back`).
2. Fit the state-space laws (:mod:`.likelihood`: one mode, damped oscillator, fast + slow
   modes; forcing + observation noise; binomial observation variance when the batch size is
   known and the rewards lie in [0, 1]) and mix them by BIC weight.
3. Draw the future (:mod:`.predictive`) at the horizon, the ``--at`` steps, a fan grid and (for
   backtests) the final window; the logged reward adds observation noise to the expected one.
   Rewards seen inside [0, 1] are forecast inside [0, 1].
4. The point forecast: the model's, held against persistence (the mean of the last tenth
   seen): a significantly rising run is not forecast below it (falling: not above), then shrunk
   towards it by the rolling-origin weight of :mod:`.validate` (:class:`_Blend`; intervals widened
   to hold both spreads).
5. Summarise: mean and 80/95% prediction intervals, plateau (``lower_bound`` when the late
   slope is still significantly positive), steps to 90/95% of the gain, the gain still
   expected by the horizon, and a recommendation. When the rise's end is not in the seen steps
   every number derived from the unknown upper end is one-sided (``kind: lower_bound``, upper
   end null) or null with a ``reason``; the fan is marked ``one_sided``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from grpofit.fitting.drift import late_slope, persistence
from grpofit.forecasting.likelihood import fit_law, reduce_series
from grpofit.forecasting.predictive import law_weights, sample_future
from grpofit.forecasting.statespace import LAWS
from grpofit.core.numbers import finite as _num

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


def empty_doc(steps, horizon_step, horizon_source, at_steps, note: str) -> dict:
    """Every field present, every number null, and the reason in ``note``."""
    seen = {"steps": [_step_out(steps[0]), _step_out(steps[-1])] if len(steps) else [None, None],
            "n_points": int(len(steps))}
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


def _point_var(values: np.ndarray, batch: int | None):
    """Binomial variance per point from a running median of the reward (or None)."""
    if not batch or batch < 1 or values.min() < 0.0 or values.max() > 1.0:
        return None
    k = 5
    pad = np.pad(values, (k // 2, k // 2), mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(pad, k)
    p = np.clip(np.median(windows, axis=1), 0.02, 0.98)
    return p * (1.0 - p) / float(batch)


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
    start = float(values[:max(1, values.size // 10)].mean())
    now = persistence(values)
    if now > start:
        return None
    return (f"cannot forecast: the reward is falling ({drift.slope:.3g} per step since step "
            f"{_step_out(drift.from_step)}) and is back at or below where the run started ({now:.3g} over the "
            f"last tenth of the steps seen, {start:.3g} over the first); a relaxation toward a plateau does "
            "not describe it (a collapse under way, or an unstable run: see grpofit diagnose)")


def forecast_series(steps, values, *, horizon_step=None, horizon_source=None, at_steps=(),
                    batch: int | None = None, final_steps=None, seed: int = 0,
                    laws=None, warm: dict | None = None, walk: bool = True,
                    validate: bool = True) -> Forecast:
    """Forecast a run from ``(steps, values)`` seen so far (see the module docstring).

    ``final_steps``: the steps whose mean reward a backtest compares with (``Forecast.final``).
    ``laws``: the state-space laws to mix (default: every row of
    :data:`~.statespace.LAWS`, in its order).
    ``warm``: law -> ``theta`` of an earlier forecast of the same run (``extra["fits"]``):
    each law's search starts there (:func:`~.likelihood.fit_law`), as ``grpofit watch`` does.
    """
    steps, values = _clean(steps, values)
    at_steps = [float(s) for s in at_steps]
    n = steps.size
    if n < MIN_POINTS:
        return Forecast(empty_doc(steps, horizon_step, horizon_source, at_steps,
                                  f"cannot forecast yet: {n} points seen, a forecast needs at least {MIN_POINTS}"),
                        steps, values)
    from grpofit.fitting.analysis import confirmed_collapse
    from grpofit.fitting import fit_series

    baseline = fit_series(steps, values)
    collapse, _ = confirmed_collapse(steps, values, whole=baseline)  # the collapse fit and diagnose name
    if collapse is not None:
        return Forecast(empty_doc(steps, horizon_step, horizon_source, at_steps,
                                  f"cannot forecast: the reward collapses at step {_step_out(collapse.step)}; "
                                  "a relaxation law does not describe what follows a collapse"),
                        steps, values, extra={"baseline": baseline, "collapse": collapse})
    if not (baseline.signal.get("detected") or late_slope(steps, values, 1.0).rising):
        reason = baseline.signal.get("reason") or "the reward does not rise above its noise"
        return Forecast(empty_doc(steps, horizon_step, horizon_source, at_steps,
                                  f"cannot forecast yet: no rise yet ({reason})"),
                        steps, values, extra={"baseline": baseline})
    falling = _fallen_back(steps, values)
    if falling is not None:
        return Forecast(empty_doc(steps, horizon_step, horizon_source, at_steps, falling),
                        steps, values, extra={"baseline": baseline})

    step0 = float(steps[0])
    t = steps - step0
    t_last = float(t[-1])
    point_var = _point_var(values, batch)
    bounded = bool(values.min() >= 0.0 and values.max() <= 1.0)
    series = reduce_series(t, values, point_var, level_sd=0.5 if bounded else None)
    horizon_t = None if horizon_step is None else float(horizon_step) - step0
    far = max([t_last] + [s - step0 for s in at_steps] + ([horizon_t] if horizon_t is not None else []))
    from grpofit.laws.models import guess_exponential

    t_guess = float(guess_exponential(series.t, series.y)["timescale"])
    from grpofit.forecasting.walk import fit_walk_law

    fitter = fit_walk_law if walk else fit_law
    fits, prior = [], None
    for law in laws or LAWS:
        f = fitter(law, series, t_guess=t_guess, t_max=T_MAX_FACTOR * max(far, t_last), prior=prior,
                   warm=(warm or {}).get(law))
        if f is not None:
            fits.append(f)
            if law == "one":
                prior = f.theta
    if not fits:
        return Forecast(empty_doc(steps, horizon_step, horizon_source, at_steps,
                                  "cannot forecast: no law could be fitted to the seen steps"),
                        steps, values, extra={"baseline": baseline})

    # the times the future is drawn at: now, the horizon, --at steps, a fan grid, the final window
    fan_end = far if far > t_last else 2.0 * t_last
    fan_t = np.linspace(t_last, fan_end, FAN_POINTS)
    # a step before the first seen one has no forecast (the law starts at the first step)
    pieces = [np.array([t_last]), np.array([] if horizon_t is None else [max(horizon_t, 0.0)]),
              np.array([max(s - step0, 0.0) for s in at_steps]), fan_t]
    if final_steps is not None and len(final_steps):
        fs = np.asarray(final_steps, dtype=float) - step0
        if fs.size > 20:
            fs = fs[np.linspace(0, fs.size - 1, 20).round().astype(int)]
        pieces.append(fs)
    sizes = [p.size for p in pieces]
    tf = np.concatenate(pieces)
    draws = sample_future(fits, series, tf, seed=seed)
    rng = np.random.default_rng(seed + 1)
    drift = late_slope(steps, values)
    lat = np.clip(draws.latent, 0.0, 1.0) if bounded else draws.latent

    def logged(cols: np.ndarray) -> np.ndarray:
        """Draws of the logged reward: the expected one plus observation noise."""
        if point_var is not None:
            sd = np.sqrt(np.clip(cols, 0.0, 1.0) * (1.0 - np.clip(cols, 0.0, 1.0)) / float(batch))
        else:
            sd = draws.obs_sd[:, None]
        out = cols + sd * rng.standard_normal(cols.shape)
        return np.clip(out, 0.0, 1.0) if bounded else out

    offs = np.cumsum([0] + sizes)
    now = lat[:, 0]
    at_entries = []
    h_cols = lat[:, offs[1]:offs[2]]
    a_cols = lat[:, offs[2]:offs[3]]
    if horizon_t is not None:
        at_entries.append(_at_entry(horizon_step, logged(h_cols[:, 0:1])[:, 0]) if horizon_t >= 0 else
                          {"step": _step_out(horizon_step), "mean": None, "pi80": None, "pi95": None})
    else:
        at_entries.append({"step": None, "mean": None, "pi80": None, "pi95": None})
    for j, s in enumerate(at_steps):
        at_entries.append(_at_entry(s, logged(a_cols[:, j:j + 1])[:, 0]) if s >= step0 else
                          {"step": _step_out(s), "mean": None, "pi80": None, "pi95": None})
    fan_draws = logged(lat[:, offs[3]:offs[4]])
    fan = {"step": fan_t + step0, "mean": fan_draws.mean(axis=0)}
    for name, q in (("q025", 2.5), ("q10", 10.0), ("q50", 50.0), ("q90", 90.0), ("q975", 97.5)):
        fan[name] = np.percentile(fan_draws, q, axis=0)
    final = None
    if len(pieces) > 4:
        window = lat[:, offs[4]:offs[5]].mean(axis=1)
        n_final = len(final_steps)
        if point_var is not None:
            m = np.clip(window, 0.0, 1.0)
            sd = np.sqrt(m * (1.0 - m) / float(batch) / n_final)
        else:
            sd = draws.obs_sd / math.sqrt(n_final)
        level = window + sd * rng.standard_normal(window.shape)
        final = {"mean": float(level.mean()), "median": float(np.median(level)),
                 "pi95": [float(np.percentile(level, 2.5)), float(np.percentile(level, 97.5))],
                 "kind": "interval"}
    weights = law_weights(fits)
    pers = persistence(values)
    if final is not None:
        target = float(np.mean(np.asarray(final_steps, dtype=float))) - step0 - t_last
    elif horizon_t is not None and horizon_t > t_last:
        target = horizon_t - t_last
    else:
        target = fan_end - t_last
    point = None
    if validate:
        from grpofit.forecasting.validate import model_weight, rolling_origin

        point = rolling_origin(fits, weights, series, t, values, target, seed=seed) if target > 0 else None
        blend = _Blend(pers, model_weight(point), 1 if drift.rising else -1 if drift.falling else 0)
    else:
        blend = _Blend(pers, 1.0, 0)
    if final is not None:
        final["model_median"] = final["median"]
        blend.apply(final, "median")
    for entry, s_at in zip(at_entries, ([horizon_t] if horizon_t is not None else [None]) + [s - step0 for s in at_steps]):
        if entry.get("mean") is not None and s_at is not None and s_at > t_last:
            blend.apply(entry, "mean")
    blend.apply_fan(fan)
    open_ended = bool(drift.rising) and not _saturation_seen(draws, fits)
    if open_ended:
        # still rising and no draw of the slowest timescale is held below its bound: the data do
        # not say where the rise stops, so the future's upper ends are unknown (lower bounds)
        # the bound is the lower end of the prediction, but never above where the run already is
        # (the law's continued rise is exactly what the data cannot confirm)
        floor80, floor95 = float(np.percentile(now, 10.0)), float(np.percentile(now, 2.5))
        for entry in at_entries:
            if entry.get("pi95") is not None:
                entry["pi80"] = [min(entry["pi80"][0], floor80), None]
                entry["pi95"] = [min(entry["pi95"][0], floor95), None]
                entry["kind"] = "lower_bound"
        fan["one_sided"] = True
        fan["q10"] = np.minimum(fan["q10"], floor80)
        fan["q025"] = np.minimum(fan["q025"], floor95)
        if final is not None:
            final["pi95"] = [min(final["pi95"][0], floor95), None]
            final["kind"] = "lower_bound"

    doc = {
        "seen": {"steps": [_step_out(steps[0]), _step_out(steps[-1])], "n_points": int(n)},
        "horizon": {"step": _step_out(horizon_step), "source": horizon_source},
        "at": at_entries,
    }
    doc["plateau"] = _plateau(draws, now, bounded, drift.rising, fits)
    doc["steps_to_90"] = _steps_to(draws.t90, step0, open_ended, float(steps[-1]))
    doc["steps_to_95"] = _steps_to(draws.t95, step0, open_ended, float(steps[-1]))
    if horizon_t is not None and horizon_t >= 0:
        gain = h_cols[:, 0] - now
        if horizon_t > t_last:
            gain = gain + blend.shift(float(np.mean(h_cols[:, 0])))
        lo = float(np.percentile(gain, 2.5))
        doc["remaining_gain"] = {"value": float(np.mean(gain)),
                                 "ci95": [lo, None if open_ended else float(np.percentile(gain, 97.5))],
                                 "kind": "lower_bound" if open_ended else "estimate"}
    else:
        doc["remaining_gain"] = {"value": None, "ci95": None, "kind": None}
    doc["recommendation"] = _recommend(doc, steps, drift.rising, horizon_step)
    doc["note"] = None if horizon_step is not None else (
        "cannot forecast yet: no plan length (the run's config names no trainer.total_training_steps "
        "or max_steps; pass --horizon N); the plateau and the steps to 90/95% are still given")
    if open_ended and doc["note"] is None:
        doc["note"] = ("still rising, and the seen steps do not show where the rise stops: the upper ends of "
                       "the prediction intervals are unknown (lower bounds)")
    if horizon_t is not None and horizon_t < 0:
        doc["note"] = (f"the planned end (step {_step_out(horizon_step)}) lies before the first seen step "
                       f"({_step_out(step0)}): no forecast there")
    doc["current"] = {"step": _step_out(steps[-1]), "mean": float(np.mean(now)),
                      "ci95": [float(np.percentile(now, 2.5)), float(np.percentile(now, 97.5))]}
    doc["point"] = {"method": blend.method(), "persistence": pers, "model_weight": blend.weight,
                    "floor": {1: "rising: not below persistence", -1: "falling: not above persistence",
                              0: None}[blend.sign], "validation": point}
    doc["still_rising"] = bool(drift.rising)
    doc["late_slope"] = drift.summary()
    doc["laws"] = {f.law: {"weight": float(w), "bic": float(f.bic), "params": f.params()}
                   for f, w in zip(fits, weights)}
    doc["observation_noise"] = (f"binomial, batch {batch}" if point_var is not None else "estimated")
    best = fits[int(np.argmax(weights))]
    from grpofit.forecasting.likelihood import unpack
    from grpofit.forecasting.statespace import design

    ct = np.linspace(0.0, fan_end, 200)
    curve = (ct + step0, design(best.law, ct, unpack(best.law, best.theta)[0]) @ best.beta)
    return Forecast(doc, steps, values, fan, final, extra={"baseline": baseline, "draws": draws,
                                                            "fits": fits, "curve": curve,
                                                            "law": best.law})


@dataclass
class _Blend:
    """The point forecast from the model's and persistence's (the mean of the last tenth seen).

    ``sign`` > 0 (the late slope is significantly positive): the model's value is first raised to
    persistence if below it (a run still rising is not forecast below the level it has reached;
    < 0: falling, not above it); then ``persistence + weight (model - persistence)``, the weight
    from the rolling-origin validation (:func:`~.validate.model_weight`). Intervals are widened
    to hold both the model's and the same spread moved to the point."""

    persistence: float
    weight: float
    sign: int

    def point(self, model: float) -> float:
        base = max(model, self.persistence) if self.sign > 0 else min(model, self.persistence) if self.sign < 0 else model
        return self.persistence + self.weight * (base - self.persistence)

    def shift(self, model: float) -> float:
        return self.point(model) - model

    def method(self) -> str:
        return "model" if self.weight >= 1.0 and self.sign == 0 else "blend of model and persistence"

    def apply(self, entry: dict, key: str) -> None:
        d = self.shift(entry[key])
        for k in ("mean", "median"):
            if entry.get(k) is not None:
                entry[k] = entry[k] + d
        for k in ("pi80", "pi95"):
            iv = entry.get(k)
            if iv is not None:
                entry[k] = [min(iv[0], iv[0] + d), None if iv[1] is None else max(iv[1], iv[1] + d)]

    def apply_fan(self, fan: dict) -> None:
        d = np.array([self.shift(float(x)) for x in fan["q50"]])
        for k in ("mean", "q50"):
            fan[k] = fan[k] + d
        for k in ("q025", "q10"):
            fan[k] = np.minimum(fan[k], fan[k] + d)
        for k in ("q90", "q975"):
            fan[k] = np.maximum(fan[k], fan[k] + d)


def _at_entry(step, draws: np.ndarray) -> dict:
    return {
        "step": _step_out(step),
        "mean": float(np.mean(draws)),
        "pi80": [float(np.percentile(draws, 10.0)), float(np.percentile(draws, 90.0))],
        "pi95": [float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))],
        "kind": "interval",
    }


def _plateau(draws, now: np.ndarray, bounded: bool, rising: bool, fits) -> dict:
    p = np.clip(draws.plateau, 0.0, 1.0) if bounded else draws.plateau
    lo, mid, hi = (float(np.percentile(p, q)) for q in (2.5, 50.0, 97.5))
    if not rising:
        return {"value": mid, "ci95": [lo, hi], "kind": "estimate"}
    # still rising: the plateau is at least where the run already is
    floor = float(np.percentile(now, 50.0))
    value = max(lo, floor)
    # an upper end only where the data hold the rise's end and the draws reach above where the
    # run already is (else "at least x and at most x" of a run still rising: no upper end known)
    upper_known = _saturation_seen(draws, fits) and hi > value
    return {"value": value, "ci95": [value, hi if upper_known else None], "kind": "lower_bound"}


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


def _steps_to(times: np.ndarray, step0: float, open_ended: bool = False, last: float = math.inf) -> dict:
    """The step reaching a share of the gain, with its 95% interval. ``open_ended`` (the rise's
    end is not in the seen steps): the gain itself has no known upper end, so neither has the
    step reaching a share of it; the value is a lower bound (the draws' 2.5% point) and the
    interval's upper end is null, or null with a ``reason`` when that bound is not past the
    ``last`` step seen (it would say nothing)."""
    ok = times[~np.isnan(times)]
    if ok.size < 0.5 * times.size:
        return {"value": None, "ci95": None, "kind": None}
    mid = float(np.percentile(ok, 50.0))
    lo, hi = float(np.percentile(ok, 2.5)), float(np.percentile(ok, 97.5))
    conv = lambda x: _step_out(step0 + x) if math.isfinite(x) else None
    if open_ended:
        low = conv(lo)
        if low is None or step0 + lo <= last:
            return {"value": None, "ci95": None, "kind": "unknown",
                    "reason": "the rise's end is not in the seen steps (the gain has no known upper end)"}
        return {"value": low, "ci95": [low, None], "kind": "lower_bound"}
    return {"value": conv(mid), "ci95": [conv(lo), conv(hi)], "kind": "estimate"}


def _recommend(doc: dict, steps: np.ndarray, rising: bool, horizon_step) -> str | None:
    last = float(steps[-1])
    s95 = doc["steps_to_95"]["value"]
    gain = doc["remaining_gain"]["value"]
    if horizon_step is None:
        if s95 is not None and s95 <= last and not rising:
            return "done: the run is within 5% of its plateau gain"
        return None
    g = f"{gain:.3g}" if gain is not None else "?"
    if float(horizon_step) <= last:
        return f"done: the planned end (step {_step_out(horizon_step)}) is already reached"
    if gain is not None and gain <= 0:  # settling (past an overshoot), saturated or drifting
        return (f"no further gain expected: the reward is expected to change by {g} before step "
                f"{_step_out(horizon_step)}")
    if rising or s95 is None or s95 > float(horizon_step):
        return f"keep going: {g} of reward still expected before step {_step_out(horizon_step)}"
    if s95 <= last:
        return f"done: within 5% of the plateau since about step {s95}; {g} more expected by step {_step_out(horizon_step)}"
    return f"diminishing returns after step {s95}: {g} of reward still expected before step {_step_out(horizon_step)}"
