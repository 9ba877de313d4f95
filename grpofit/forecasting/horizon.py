"""Draws of a run's expected reward at one step: the one seam between ranking and the engine.

``grpofit rank``, the Optuna pruner and the Ray Tune stopper need, per run, samples of the reward
it will have at a common horizon step, and the contract's forecast entry for that step. They get
both from :func:`horizon_draws` and from nothing else in :mod:`.engine`, so a new engine (a
better-calibrated predictive, bounded metrics, population priors) changes this module only.

The draws are of the *expected* reward at the horizon (the latent curve, not one logged step's
sampling noise): "which run ends best" is about the level a run reaches, and one step's batch
noise would blur every comparison equally. They are the engine's joint predictive draws at the
horizon, mapped back from the coordinates the laws were fitted in (the logit of a bounded metric's
position) by the engine's own link, so they lie inside the metric's bounds. The intervals shown (``entry``) are the engine's own, for the logged reward, exactly as
``grpofit forecast`` prints them. When the engine gives no upper end at the horizon, or the run is
still rising (its late slope significantly positive) and faster over the second half of its
points than over the first, ``open_ended`` is set: the draws' upper tail is the law's guess, not
something the data hold. A slow starter looks exactly like
that: on a bandit sweep, a run at 0.1 after 20% of its steps was forecast at 0.32 [0, 0.60]
(95%) and ended at 0.95.

When the engine refuses (too few points, no rise yet, a collapse, a fall back below the start),
a run whose seen steps already reach the horizon still has a known final level: draws from the
mean of its last tenth and that mean's standard error (``kind="seen"``). A run that collapsed or
fell back is taken to stay at its current level, with the scatter of its last tenth as the
spread (``kind="current level"``): it is not a contender unless its level already is. Anything
else has no draws (``draws is None``): the ranking says "cannot tell yet" for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["HorizonDraws", "horizon_draws", "N_DRAWS"]

#: draws returned per run
N_DRAWS = 1200


@dataclass
class HorizonDraws:
    """Draws at the horizon for one run and what the forecast says about it."""

    draws: np.ndarray | None  #: (N,) expected reward at the horizon, or None
    entry: dict  #: the engine's forecast document for the run (``at[0]`` is the horizon)
    kind: str  #: "forecast", "seen", "current level" or "none"
    note: str | None  #: why there is no forecast, or what the draws assume
    forecast: object = None  #: the engine's :class:`~.engine.Forecast` (plots)
    #: the run is still rising (late slope significantly positive) or its forecast has no upper
    #: end at the horizon: the draws' upper tail is the law's guess, so the run is not stopped on it
    open_ended: bool = False
    #: the effective number of independent draws: what the draws of one parameter draw of the
    #: engine's importance sampling have in common counted once (:func:`~.predictive.cluster_ess`;
    #: None: the draws are independent, ``kind`` "seen" or "current level")
    ess: float | None = None


def _bounded(values: np.ndarray) -> bool:
    return bool(values.size and values.min() >= 0.0 and values.max() <= 1.0)


def _level_draws(values: np.ndarray, rng, *, spread: str) -> np.ndarray:
    """Normal draws around the mean of the last tenth: ``spread="se"`` its standard error,
    ``"sd"`` the scatter of the points themselves."""
    tail = values[-max(3, values.size // 10) :]
    mean = float(tail.mean())
    sd = float(tail.std(ddof=1)) if tail.size > 1 else 0.0
    if spread == "se":
        sd /= math.sqrt(tail.size)
    out = mean + sd * rng.standard_normal(N_DRAWS)
    return np.clip(out, 0.0, 1.0) if _bounded(values) else out


def _accelerating(steps: np.ndarray, values: np.ndarray) -> bool:
    """Whether the straight-line slope over the second half of the points exceeds the first
    half's: a rise that is speeding up (a slow start), not settling."""
    half = steps.size // 2
    if half < 3:
        return False
    first = np.polyfit(steps[:half], values[:half], 1)[0]
    second = np.polyfit(steps[half:], values[half:], 1)[0]
    return bool(second > first)


def horizon_draws(
    steps,
    values,
    horizon: float,
    *,
    horizon_source: str | None = None,
    batch: int | None = None,
    seed: int = 0,
    lean: bool = False,
) -> HorizonDraws:
    """Draws of the run's expected reward at step ``horizon`` from ``(steps, values)`` seen so
    far (see the module docstring for what is drawn when the engine refuses). ``lean``: the
    engine's lean forecast (no steps to 90/95%, no fan chart; the same draws and intervals)."""
    from grpofit.forecasting.engine import forecast_series
    from grpofit.forecasting.predictive import cluster_ess

    steps = np.asarray(steps, dtype=float)
    values = np.asarray(values, dtype=float)
    keep = np.isfinite(steps) & np.isfinite(values)
    steps, values = steps[keep], values[keep]
    fc = forecast_series(
        steps, values, horizon_step=horizon, horizon_source=horizon_source, batch=batch, seed=seed, lean=lean
    )
    doc = fc.doc
    at = doc["at"][0] if doc.get("at") else {}
    rng = np.random.default_rng(seed + 7)
    seen_all = bool(steps.size) and float(steps[-1]) >= float(horizon)
    draws = fc.extra.get("draws") if at.get("mean") is not None else None
    if draws is not None:
        step0 = float(steps[0])
        col = int(np.argmin(np.abs(draws.tf - (float(horizon) - step0))))
        # the draws are in the coordinates the laws were fitted in (the logit of a bounded
        # metric's position): the engine's link maps them back, inside the bounds by construction
        lat = fc.extra["link"].metric(draws.latent[:, col])
        pick = rng.choice(lat.size, N_DRAWS, replace=lat.size < N_DRAWS)
        p95 = at.get("pi95") or [None, None]
        # no upper end, or still rising faster than before (a sigmoid start, which the laws read
        # as an early plateau): nothing is stopped on the law's extrapolation
        open_ended = (
            at.get("kind") == "lower_bound"
            or p95[1] is None
            or (bool(doc.get("still_rising")) and _accelerating(steps, values))
        )
        ess = cluster_ess(lat[pick], draws.theta[pick]) if draws.theta is not None else None
        return HorizonDraws(lat[pick], doc, "forecast", None, fc, open_ended, ess)
    note = doc.get("note")
    if steps.size >= 3 and seen_all:
        return HorizonDraws(
            _level_draws(values[steps <= horizon], rng, spread="se"),
            doc,
            "seen",
            "the seen steps reach the horizon: its level is the mean of the last tenth",
            fc,
        )
    if steps.size >= 3 and note and note.startswith("cannot forecast:"):
        return HorizonDraws(
            _level_draws(values, rng, spread="sd"),
            doc,
            "current level",
            note + "; taken to stay at its current level",
            fc,
        )
    return HorizonDraws(None, doc, "none", note, fc)
