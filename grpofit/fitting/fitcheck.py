"""Does the fitted plateau agree with where the data already is?

A plateau is an extrapolation. When the run's last steps already sit beyond it (above it for a
rising reward, below it for a falling one) the fit misses the late data: the table marks p*
with ``!`` and the evidence says by how much, so a misfit is never a quiet pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grpofit.runtime.compiled import compiled_filter

#: standard errors of the late mean by which the late data must lie past p*, and standard
#: errors of the level reached by which a bound on the plateau stays short of that level
#: (:func:`plateau_bound`, :func:`statement_bound`)
LATE_Z = 3.0


def late_level_check(
    fit: Any,
    *,
    fraction: float = 0.25,
    minimum: int = 10,
    z: float | None = None,
    share_min: float = 0.75,
    gain_share: float = 0.05,
) -> dict | None:
    """``{"late_mean", "late_steps", "n", "stderr", "plateau", "difference", "share_beyond",
    "disagrees", "past_curve", "note"}`` for a fit result (its fitted ``steps``/``values`` and preferred model), or None.

    The late window is the last ``fraction`` of the points (at least ``minimum``). The plateau
    disagrees when the late mean lies beyond it in the direction of travel by more than ``z``
    (:data:`LATE_Z`) standard errors (``stderr``: the sd of the late points, doubled for
    autocorrelation, over sqrt(n)) and
    by at least ``gain_share`` of the fitted gain ``|p* - p0|``, and at least ``share_min`` of the
    late points (a 5-point rolling median) are beyond it too. ``past_curve``: the late mean
    also lies beyond the preferred law's own curve over the window by those ``z`` standard
    errors (:func:`_past_curve`).
    """
    if fit is None:
        return None
    z = LATE_Z if z is None else z
    plateau = getattr(fit.param("plateau"), "value", None)  # of the preferred law; None if it failed
    initial = getattr(fit.param("initial"), "value", None)
    steps = np.asarray(getattr(fit, "steps", []), float)
    values = np.asarray(getattr(fit, "values", []), float)
    if plateau is None or initial is None or not np.isfinite(plateau) or values.size < 2 * minimum:
        return None
    n = max(minimum, int(round(fraction * values.size)))
    late = values[-n:]
    mean = float(late.mean())
    sign = 1.0 if plateau >= initial else -1.0  # direction of travel
    med = _centred_median5(late)
    share = float(np.mean(sign * (med - plateau) > 0))
    se = 2.0 * float(late.std(ddof=1)) / np.sqrt(late.size)
    diff = mean - float(plateau)
    gain = abs(float(plateau) - float(initial))
    disagrees = bool(sign * diff > max(z * se, gain_share * gain, 1e-12) and share >= share_min)
    lo, hi = float(steps[-n]), float(steps[-1])
    past_curve = _past_curve(fit, steps[-n:], late, sign, z * se)
    note = None
    if disagrees:
        where = "above" if sign > 0 else "below"
        note = (
            f"p* {plateau:.3g} misses the late data: steps {lo:g}-{hi:g} ({n} points) average {mean:.3g}, "
            f"{share:.0%} of them {where} p*"
        )
    return {
        "late_mean": mean,
        "late_steps": [lo, hi],
        "n": n,
        "stderr": float(se),
        "plateau": float(plateau),
        "difference": diff,
        "share_beyond": share,
        "disagrees": disagrees,
        "past_curve": past_curve,
        "note": note,
    }


def _past_curve(fit: Any, steps: np.ndarray, late: np.ndarray, sign: float, margin: float) -> bool:
    """Whether the late points lie beyond the preferred law's own curve over the same steps, in
    the direction of travel, by more than ``margin`` (the late check's ``z`` standard errors):
    data past p* that the law draws itself (an underdamped law's overshoot, a rise not yet
    finished) are not a drift past the law."""
    law = (getattr(fit, "models", None) or {}).get(getattr(fit, "preferred", None) or "")
    if law is None or not hasattr(law, "predict"):
        return True  # no curve to compare with (a summary-only fit): the plateau alone decides
    curve = law.predict(steps)
    if not np.all(np.isfinite(curve)):
        return True
    return bool(sign * (float(late.mean()) - float(curve.mean())) > margin)


def _centred_median5(x: np.ndarray) -> np.ndarray:
    """The centred 5-point rolling median (windows clipped at the ends), one numpy call for the
    interior: the same values as a median per window, without a Python loop per point."""
    from numpy.lib.stride_tricks import sliding_window_view

    from grpofit.laws.models import median  # np.median's value on finite windows, without its overhead

    k, h, n = 5, 2, x.size
    finite = bool(np.isfinite(x).all())
    if finite and n > k and compiled_filter() is not None:  # the same medians, by the compiled window
        from grpofit.fitting.collapse import rolling_median

        return rolling_median(x, k)
    med = np.empty(n)
    if n >= k:
        windows = sliding_window_view(x, k)
        # finite windows of 5: the median is the middle order statistic
        med[h : n - h] = np.partition(windows, h, axis=1)[:, h] if finite else np.median(windows, axis=1)
        ends = [*range(h), *range(n - h, n)]
    else:
        ends = range(n)
    pick = median if finite else np.median
    for i in ends:
        med[i] = pick(x[max(0, i - h) : i + h + 1])
    return med


#: series longer than this are reduced to block means before the late-slope test (its HAC sum
#: is a Python loop over a fifth of the points)
SLOPE_POINTS = 4096


def still_moving(steps, values) -> dict | None:
    """The forecast's model-free late-slope test (:func:`grpofit.fitting.drift.late_slope`:
    the last half of the points, HAC standard error, fixed-b critical value) and the level the
    run has reached (:func:`~grpofit.fitting.drift.persistence`, the mean of its last tenth).

    ``{"direction": "rising" | "falling" | None, "slope_per_step", "stderr", "from_step",
    "level"}``; None for fewer than 16 points. Long series are tested on :data:`SLOPE_POINTS`
    block means (the same line, a fraction of the cost)."""
    from grpofit.fitting.drift import late_slope, persistence

    steps = np.asarray(steps, float)
    values = np.asarray(values, float)
    if values.size < 16:
        return None
    level = persistence(values)
    if values.size > SLOPE_POINTS:
        k = values.size // SLOPE_POINTS
        m = k * SLOPE_POINTS
        steps = steps[values.size - m :].reshape(SLOPE_POINTS, k).mean(axis=1)
        values = values[values.size - m :].reshape(SLOPE_POINTS, k).mean(axis=1)
    d = late_slope(steps, values)
    direction = "rising" if d.rising else "falling" if d.falling else None
    return {
        "direction": direction,
        "slope_per_step": d.slope,
        "stderr": d.stderr,
        "from_step": d.from_step,
        "level": level,
    }


def whole_trend(steps, values) -> tuple[float, float] | None:
    """``(z, critical value)`` of the model-free slope test (:func:`~grpofit.fitting.drift.late_slope`)
    over the whole run (long series on :data:`SLOPE_POINTS` block means); None below 16 points."""
    from grpofit.fitting.drift import late_slope
    from grpofit.fitting.hac import critical_value

    steps = np.asarray(steps, float)
    values = np.asarray(values, float)
    if values.size < 16:
        return None
    if values.size > SLOPE_POINTS:
        k = values.size // SLOPE_POINTS
        m = k * SLOPE_POINTS
        steps = steps[values.size - m :].reshape(SLOPE_POINTS, k).mean(axis=1)
        values = values[values.size - m :].reshape(SLOPE_POINTS, k).mean(axis=1)
    d = late_slope(steps, values, 1.0)
    if d.slope is None or not d.stderr:
        return None
    n = values.size
    bw = max(2, int(np.ceil(n / 5)))
    return d.slope / d.stderr, critical_value(bw / n)


def plateau_bound(plateau: dict | None, moving: dict | None, late: dict | None = None) -> tuple[str, float | None]:
    """``("lower_bound", bound)`` when the data show the run drifting past the law's plateau
    while still rising (the plateau is at least where the run is: a fitted p* below it would be
    a tight number below where the run is heading), ``("upper_bound", bound)`` for the mirror
    case of a still-falling run below it, else ``("estimate", None)``. ``bound`` is the level
    reached (``moving["level"]``, the mean of the last tenth) less (plus) :data:`LATE_Z` of its
    standard errors (:func:`level_stderr`, the late check's ``level_stderr``): the level is a
    mean of noisy points, and a run wandering about its plateau under the forcing sits above it
    for a while (at forcing sd 0.03 a settled run was printed "≥ 0.682 (still rising)", the
    level itself, while its true plateau was 0.675; the bound is now 0.594).

    The drift must be in the data, not in the noise around a settled run, nor in a curve the
    law draws itself: the late slope is significant (``moving``, :func:`still_moving`), the late
    data miss p* and lie beyond the law's own curve (``late``, :func:`late_level_check`:
    ``disagrees``, ``past_curve``; an underdamped law's overshoot is not a drift past it), and
    where the law's 95% interval is pinned down by the data the level reached lies beyond that
    interval too (where that interval is missing or reaches the fit bounds, it says nothing and
    is not asked for). A run settled at its plateau shows a significant late slope
    and a level past p* in a few percent of runs by chance (its wander under the forcing), and
    a bound printed there is contradicted by the true plateau: on 240 settled runs of the
    project's generator the slope and the level alone printed 33 bounds, 31 of them contradicted,
    these conditions none (docs/fit_coverage.md has the measurement)."""
    value = (plateau or {}).get("value")
    if not moving or value is None or moving.get("direction") is None:
        return "estimate", None
    level = moving["level"]
    lo = hi = value
    ci = (plateau or {}).get("ci95")
    pinned = ci is not None and None not in ci and "not pinned down" not in str((plateau or {}).get("note") or "")
    if not (late or {}).get("disagrees") or not (late or {}).get("past_curve", True):
        return "estimate", None
    if pinned:
        lo, hi = min(ci[0], value), max(ci[1], value)
    # the level is a mean of noisy late points over a wander: the bound is where the run is at
    # least (at most), LATE_Z of the level's standard errors short of it
    margin = _margin(late)
    if moving["direction"] == "rising" and level > hi:
        return "lower_bound", float(level - margin)
    if moving["direction"] == "falling" and level < lo:
        return "upper_bound", float(level + margin)
    return "estimate", None


def statement_bound(
    plateau: dict | None, moving: dict | None, initial: float | None, late: dict | None = None
) -> tuple[str, float | None, str | None]:
    """``(kind, level, reason)`` of the plateau every surface states: a bound where the run is
    still moving past the law's p* (:func:`plateau_bound`, reason ``"moving"``), or where the
    data do not pin p* down (its 95% interval runs to the fit bound: the law's value is the
    box's as much as the data's) and p* lies beyond the level the run has reached in the law's
    direction (``initial`` -> p*): the plateau of a monotone approach is at least (at most)
    that level less (plus) :data:`LATE_Z` of its standard errors (:func:`level_stderr`), which
    the data do show (reason ``"unidentified"``); else ``("estimate", None, None)``.

    The margin matters: generated runs cut while still rising or overshooting (recovery_set 240,
    seed 11, cut at 1, 2 and 4 times their slowest time) got 195 such bounds, 21 of them
    contradicted by the true plateau at the level itself (an overshoot, or a settled run's noise
    above its plateau), 7 with the late mean's standard errors alone, none with the level's."""
    kind, level = plateau_bound(plateau, moving, late)
    if level is not None:
        return kind, level, "moving"
    value = (plateau or {}).get("value")
    reached = (moving or {}).get("level")
    if value is None or reached is None or initial is None or "not pinned down" not in str(plateau.get("note") or ""):
        return "estimate", None, None
    margin = _margin(late)
    if initial < value and reached < value:
        return "lower_bound", float(reached - margin), "unidentified"
    if initial > value and reached > value:
        return "upper_bound", float(reached + margin), "unidentified"
    return "estimate", None, None


def mark_bounds(summary: dict, moving: dict | None, late: dict | None = None) -> None:
    """Give every law's plateau its ``kind`` (``estimate``, ``lower_bound``, ``upper_bound``)
    and, for a bound, ``bound`` (the level reached; for a run still moving past the law, less
    its margin, :func:`plateau_bound`), ``bound_reason`` (``moving`` or
    ``unidentified``, :func:`statement_bound`) and a ``bound_note``; ``value`` and ``ci95``
    stay the law's own fit."""
    for law in (summary.get("models") or {}).values():
        params = law.get("params") or {}
        plateau = params.get("plateau")
        if not plateau:
            continue
        initial = (params.get("initial") or {}).get("value")
        kind, level, reason = statement_bound(plateau, moving, initial, late)
        plateau["kind"] = kind
        if level is not None:
            plateau["bound"] = level
            plateau["bound_reason"] = reason
            plateau["bound_note"] = (
                bound_note(plateau, moving) if reason == "moving" else unidentified_note(plateau, level, moving)
            )


def unidentified_note(plateau: dict, bound: float, moving: dict | None = None) -> str:
    """Why a plateau the data do not pin down is reported as a bound (``bound``: the level
    reached, ``moving["level"]``, less its margin)."""
    rising = plateau.get("kind") != "upper_bound"
    reached = (moving or {}).get("level", bound)
    return (
        f"p* not identified: the law's {plateau['value']:.4g} has a 95% interval that runs to the fit bound "
        f"(the box's, not the data's); the run has reached {reached:.3g} (its last tenth), so the plateau of "
        f"the law's monotone approach is at {'least' if rising else 'most'} {bound:.3g} (that level "
        f"{LATE_Z:g} of its standard errors {'below' if rising else 'above'} it; "
        "grpofit forecast gives the plateau's interval)"
    )


def bound_note(plateau: dict, moving: dict) -> str:
    """Why a plateau is reported as a bound (``plateau["bound"]``), with the slope, the level
    and the law's own p*."""
    rising = moving["direction"] == "rising"
    bound = plateau.get("bound", moving["level"])
    slope, se = moving.get("slope_per_step"), moving.get("stderr")
    z = f", {abs(slope) / se:.1f} standard errors" if slope is not None and se else ""
    ci = plateau.get("ci95")
    # an interval that runs to the fit bounds is the box's, not the data's: not quoted
    pinned = "not pinned down" not in str(plateau.get("note") or "")
    ci_text = f" [{ci[0]:.4g}, {ci[1]:.4g}]" if ci and None not in ci and pinned else ""
    return (
        f"still {moving['direction']}: the slope from step {moving['from_step']:g} is {slope:.3g} per step{z}; "
        f"the last tenth averages {moving['level']:.3g}, {'above' if rising else 'below'} the fitted p* "
        f"{plateau['value']:.4g}{ci_text}: the plateau is at {'least' if rising else 'most'} "
        f"{bound:.3g} (the level {LATE_Z:g} of its standard errors {'below' if rising else 'above'} it), "
        "and the fitted timescale is that of the rise up to p*, not of the drift past it "
        "(grpofit forecast gives the plateau's interval)"
    )


def fit_checks(summary: dict | None, fit: Any) -> tuple[dict | None, dict | None]:
    """``(fit_check, trend)`` of a fit (JSON-safe); each law's plateau in ``summary`` (the fit's
    contract dict, when there is one) is marked as a bound where the run is still moving past
    it (:func:`mark_bounds`)."""
    from grpofit.core.jsonout import jsonable

    check, moving = _late_checks(fit)
    check = jsonable(check)
    if summary is None:
        return check, None
    mark_bounds(summary, moving, check)
    return check, jsonable(trend_check(summary, check))


#: the level's wander is read from the means of this many last tenths of the run
LEVEL_BLOCKS = 5


def level_stderr(values, late_stderr: float) -> float:
    """The standard error of the level reached (the mean of the last tenth,
    :func:`~grpofit.fitting.drift.persistence`) as an estimate of where the run settles: the
    late mean's (``late_stderr``, :func:`late_level_check`) and the sd of the means of the last
    :data:`LEVEL_BLOCKS` tenths together. A run settled under the forcing wanders about its
    plateau from tenth to tenth by more than its points' noise says (at forcing sd 0.03 the
    late mean's alone put the bound above the true plateau in 7 of 14 bounds on two seeds);
    a run still moving has tenth means that differ by its drift."""
    y = np.asarray(values, float)
    k = max(1, y.size // 10)
    if y.size < LEVEL_BLOCKS * k or LEVEL_BLOCKS < 2:
        return float(late_stderr)
    means = y[y.size - LEVEL_BLOCKS * k :].reshape(LEVEL_BLOCKS, k).mean(axis=1)
    return float(np.hypot(late_stderr, means.std(ddof=1)))


def _margin(late: dict | None) -> float:
    """:data:`LATE_Z` standard errors of the level reached (``level_stderr``, or the late
    mean's ``stderr`` where that is missing)."""
    late = late or {}
    se = late.get("level_stderr")
    return LATE_Z * float((late.get("stderr") or 0.0) if se is None else se)


def _late_checks(fit: Any) -> tuple[dict | None, dict | None]:
    """``(late_level_check, still_moving)`` of a fit, computed once per fit result (every
    surface that states the plateau takes these: the tables, the JSON, the plot, the API)."""
    store = getattr(fit, "__dict__", None)
    cached = store.get("_late_checks") if store is not None else None
    if cached is not None:
        return dict(cached[0]) if cached[0] is not None else None, cached[1]
    check = late_level_check(fit)
    moving = still_moving(getattr(fit, "steps", []), getattr(fit, "values", [])) if check is not None else None
    if check is not None:
        check["still_moving"] = moving
        check["level_stderr"] = level_stderr(getattr(fit, "values", []), check["stderr"])
    if store is not None:
        store["_late_checks"] = (check, moving)
    return (dict(check) if check is not None else None), moving


def plateau_statement(fit: Any, model: str | None = None) -> dict | None:
    """What every surface says about a fit's plateau (the preferred law's unless ``model``):
    ``{"kind": "estimate" | "lower_bound" | "upper_bound", "value", "ci95", "law_value"}``;
    for a bound ``value`` is the level reached (the plateau is at least/most that), ``ci95``
    None, ``law_value`` the law's own p* and ``reason`` ``moving`` or ``unidentified``
    (:func:`statement_bound`). None when the law has no plateau."""
    est = fit.param("plateau", model) if fit is not None else None
    if est is None or getattr(est, "value", None) is None:
        return None
    late, moving = _late_checks(fit)
    ci = list(est.ci95) if getattr(est, "ci95", None) else None
    initial = getattr(fit.param("initial", model), "value", None)
    note = getattr(est, "note", None)
    kind, level, reason = statement_bound({"value": est.value, "ci95": ci, "note": note}, moving, initial, late)
    if level is not None:
        return {"kind": kind, "value": float(level), "ci95": None, "law_value": float(est.value), "reason": reason}
    return {"kind": "estimate", "value": float(est.value), "ci95": ci, "law_value": float(est.value)}


def with_fit_check(summary: dict, fit: Any) -> dict:
    """``summary`` (a fit's contract dict) with its ``fit_check`` and ``trend`` added (:func:`fit_checks`)."""
    summary["fit_check"], summary["trend"] = fit_checks(summary, fit)
    return summary


#: metrics that fall by design (fitted as a decay; a fall is their progress, not a collapse)
_DECAYING = ("loss", "kl", "cost", "perplexity", "ppl", "error", "regret", "entropy", "nll")


def metric_kind(name: str | None) -> str:
    """``decays`` for a metric that falls by design (loss, KL, cost, entropy, ...), else ``rises``."""
    import re

    low = str(name or "").lower()
    words = re.split(r"[^a-z0-9]+", low)
    return "decays" if any(w in _DECAYING or any(w.endswith(d) for d in ("loss", "cost")) for w in words) else "rises"


def trend_check(summary: dict, late: dict | None = None) -> dict | None:
    """Which way the fitted law goes, and whether that is the metric's expected direction.

    ``{"direction": "rising" | "falling", "expected", "unexpected", "from", "to", "timescale",
    "note"}`` from a fit summary's preferred model (None when its interval of ``p* - p0``
    cannot tell a direction, or no law beats a constant). A reward that falls gets
    ``unexpected``: its ``p*`` is where it falls to, not a plateau reached by learning.
    ``late``: the run's :func:`late_level_check`, whose late mean the note quotes.
    """
    models = summary.get("models") or {}
    model = models.get(summary.get("preferred") or "") or {}
    params = model.get("params") or {}
    p0, pstar = params.get("initial") or {}, params.get("plateau") or {}
    a, b = p0.get("value"), pstar.get("value")
    if a is None or b is None or (summary.get("signal") or {}).get("detected") is False:
        return None
    ca, cb = p0.get("ci95"), pstar.get("ci95")
    if ca and cb and None not in ca and None not in cb and not (ca[1] < cb[0] or cb[1] < ca[0]):
        return None  # the intervals overlap: no direction the data supports
    direction = "falling" if b < a else "rising"
    metric = summary.get("metric") or "metric"
    kind = metric_kind(metric)
    expected = "falling" if kind == "decays" else "rising"
    tau = (params.get("timescale") or {}).get("value")
    tau_text = f", timescale {tau:.3g} steps" if isinstance(tau, (int, float)) else ""
    if direction == expected == "falling":
        note = f"{metric} decays from {a:.3g} to {b:.3g}{tau_text}: fitted as a decay"
    elif direction == "falling":
        seen = ""
        if late and late.get("late_mean") is not None:
            lo, hi = late.get("late_steps") or (None, None)
            seen = f", {late['late_mean']:.3g} over steps {lo:g}-{hi:g}"
        note = (
            f"{metric} is falling: {a:.3g} at the start{seen}{tau_text}; p* {b:.3g} is where the fall "
            "leads, not a plateau reached by learning"
        )
    else:
        note = None
    return {
        "direction": direction,
        "expected": expected,
        "unexpected": direction != expected,
        "from": float(a),
        "to": float(b),
        "note": note,
    }
