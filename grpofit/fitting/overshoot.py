"""The overshoot observed in the data, next to the fitted damping ratio.

A fitted damping ratio below one is a statement about the continuous-time law; "the reward
oscillates" is a statement about the run. The second needs an overshoot in the data: the
smoothed reward goes past the level it settles at, in the direction it was moving, and then
comes back. Measured on the data alone (no law):

- ``level``: centred rolling median over ``w = clip(3% n, 7, 51)`` points (odd);
- ``start`` = median of the first ``w // 2`` points; ``settled`` = median of the last quarter
  (at least ``w`` points); direction ``d = sign(settled - start)``; ``x = d (level - settled)``
  (positive: beyond the settled level);
- overshoot = ``max(x)`` over all but the last ``w`` points (a return must be observable) at its
  peak; reversal = that peak minus the lowest ``x`` after it (how far the run came back). A
  monotone approach has its peak at the end and no reversal;
- noise: ``se = 1.2533 sd / sqrt(w)`` for a rolling median of ``w`` points with the point noise
  ``sd`` (:func:`grpofit.fitting.collapse.noise_sd`); the settled level's ``se_s`` likewise over its
  points;
- the model without overshoot (the null): a monotone approach plus the wander the settled run
  shows. A slow process (noise in the dynamics) moves the smoothed level further than white
  point noise: when ``1.4826 median|x|`` over the smoothed points after the level first reaches
  the settled one (robust: a real overshoot is a minority of them) exceeds ``se``, it replaces
  ``se`` (and ``se_s`` grows in proportion);
- the overshoot is the largest of ``k = (n - w) / w`` windows, so the threshold is
  ``z_k = max(3, Phi^-1(1 - 0.0027 / k))`` (the chance that a run without overshoot passes it).
  *Significant* when the overshoot exceeds ``z_k sqrt(se^2 + se_s^2)`` and the reversal
  ``z_k sqrt(2) se``, both at least ``1e-3`` of the gain (a noise-free run still needs a visible
  turn, not rounding). Measured on generated overdamped runs (zeta 1.5 .. 3,
  :func:`grpofit.testing.synthetic.make_forced_run`, 200 per forcing level 0 / 0.005 / 0.015 /
  0.03): called significant in 1.5% / 0% / 4% / 1.5% (the white-noise test: 13% / 18% / 58% /
  84% of 100); the price is power under strong forcing (underdamped zeta 0.35 .. 0.7: 79% / 75% /
  51% / 13%). This test can only take an oscillation verdict away, never add one.
- the excursion must persist: its width at half its height at least a quarter of the fitted
  timescale ``Ts`` (``timescale``, :func:`apply_to_fit` passes the oscillator's). A law's own
  overshoot is wider than ``Ts``: its half-period ``pi / w_d`` exceeds ``pi Ts / (2 zeta)`` and
  its half-height width is about two thirds of that. A bump of a few steps is a spike, not an
  overshoot, least of all on a run still rising, whose "settled" level is only where it has got
  to: a 7-step bump of +0.3 on a run rising 0.2 -> 0.6 with ``Ts = 200`` was called significant
  in 20 of 20 seeds (z 5 to 7). Without a timescale, only a run still moving in its direction
  of travel (:func:`grpofit.fitting.fitcheck.still_moving`) is held to it, with a tenth of the run.

:func:`apply_to_fit` attaches it to the oscillator fit (``observed_overshoot``) and turns an
``underdamped`` regime without a significant overshoot into ``indeterminate``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Overshoot", "observed_overshoot", "apply_to_fit"]

#: overshoot and reversal must exceed this many standard errors of the smoothed level
Z = 3.0
#: chance that the largest excursion of a run without overshoot passes the threshold
ALPHA = 0.0027
#: ... and this fraction of the gain
MIN_FRACTION = 1e-3


@dataclass
class Overshoot:
    value: float | None  #: overshoot past the settled level, as a fraction of the gain (0: none)
    peak_step: float | None  #: where the smoothed reward is furthest past the settled level
    reversal: float | None  #: how far it came back after that peak, fraction of the gain
    z: float | None  #: min(overshoot / its threshold, reversal / its threshold) x Z
    significant: bool
    reason: str

    def summary(self) -> dict[str, Any]:
        def r(x):
            return None if x is None or not math.isfinite(x) else round(float(x), 4)

        return {
            "value": r(self.value),
            "peak_step": self.peak_step,
            "reversal": r(self.reversal),
            "z": r(self.z),
            "significant": bool(self.significant),
            "reason": self.reason,
        }

    def text(self) -> str:
        if self.value is None:
            return "observed overshoot: -"
        return f"observed overshoot {100 * self.value:.0f}% of the gain" + (
            f" at step {self.peak_step:g}, came back {100 * (self.reversal or 0):.0f}%" if self.value > 0 else ""
        )


def _z_max(k: float) -> float:
    """The level the largest of ``k`` independent standard normals passes with probability ``ALPHA``."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(1.0 - ALPHA / max(k, 1.0))


def observed_overshoot(steps, values, *, timescale: float | None = None) -> Overshoot:
    """The overshoot in the data (module docstring); ``timescale``: the fitted law's ``Ts``,
    which a still-moving run's excursion must persist a quarter of."""
    from grpofit.fitting.collapse import default_window, noise_sd, rolling_median
    from grpofit.laws.models import median  # np.median's value, without its per-call overhead

    s = np.asarray(steps, dtype=float)
    v = np.asarray(values, dtype=float)
    keep = np.isfinite(s) & np.isfinite(v)
    if not keep.all():  # no copy of a series that is all finite
        s, v = s[keep], v[keep]
    n = v.size
    if n < 8:
        return Overshoot(None, None, None, None, False, "too few points")
    scale = float(np.max(np.abs(v)))
    if scale > 0:
        v = v / scale  # every result is a ratio or a test: scale-free, and no overflow near 1e308
    w = min(default_window(n), max(3, (n // 5) | 1))
    level = rolling_median(v, w)
    start = median(v[: max(1, w // 2)])
    m = max(w, n // 4)
    settled = median(v[-m:])
    gain = settled - start
    sd = noise_sd(v)
    se = 1.2533 * sd / math.sqrt(w)
    se_s = 1.2533 * sd / math.sqrt(m)
    if not abs(gain) > Z * math.sqrt(se**2 + se_s**2) or gain == 0:
        return Overshoot(None, None, None, None, False, "no significant rise or fall to overshoot")
    d = 1.0 if gain > 0 else -1.0
    x = level - settled
    x *= d  # in place: one point-long temporary
    # the no-overshoot null: a monotone approach plus the wander the settled run shows (a slow
    # process wanders further than white point noise); its scale from every smoothed point after
    # the level first reaches the settled one, robustly (a real overshoot is a minority of them)
    reached = np.flatnonzero(x[: n - w // 2] >= 0)
    if reached.size:
        after = np.abs(x[reached[0] : n - w // 2])
        wander = 1.4826 * median(after)
        if wander > se:
            se_s *= wander / se
            se = wander
    ip = int(np.argmax(x[: n - w]))  # a peak needs w points after it to show the return
    over = max(float(x[ip]), 0.0)
    back = float(x[ip] - np.min(x[ip:])) if over > 0 else 0.0
    g = abs(gain)
    zk = max(Z, _z_max((n - w) / w))
    thr_o = max(zk * math.sqrt(se**2 + se_s**2), MIN_FRACTION * g)
    thr_r = max(zk * math.sqrt(2.0) * se, MIN_FRACTION * g)
    z = zk * min(over / thr_o, back / thr_r)
    significant = over > thr_o and back > thr_r
    short = _too_short(s, v, x, ip, over, d, timescale) if significant else None
    if short is not None:
        significant = False
        reason = short
    elif over <= 0:
        reason = "the smoothed reward never goes past the level it settles at"
    elif significant:
        reason = (
            f"past the settled level by {100 * over / g:.0f}% of the gain and back by {100 * back / g:.0f}% "
            f"({z:.1f} standard errors)"
        )
    else:
        reason = (
            f"past the settled level by {100 * over / g:.1f}% of the gain and back by {100 * back / g:.1f}%: "
            f"within the noise ({z:.1f} standard errors, needs {zk:.1f})"
        )
    return Overshoot(over / g, float(s[ip]) if over > 0 else None, back / g, z, significant, reason)


def _too_short(s, v, x, ip: int, over: float, d: float, timescale: float | None) -> str | None:
    """Why the excursion at ``ip`` is too short to be an overshoot (module docstring), or None."""
    fitted = timescale is not None and math.isfinite(timescale) and timescale > 0
    moving = None
    if not fitted:
        from grpofit.fitting.fitcheck import still_moving

        moving = (still_moving(s, v) or {}).get("direction")
        if moving != ("rising" if d > 0 else "falling"):
            return None  # settled, and no timescale to hold the excursion to
    half = x >= 0.5 * over
    a, b = ip, ip
    while a > 0 and half[a - 1]:
        a -= 1
    while b < x.size - 1 and half[b + 1]:
        b += 1
    width = float(s[b] - s[a])
    need = 0.25 * timescale if fitted else 0.1 * float(s[-1] - s[0])
    if width >= need:
        return None
    return (
        f"a {width:g}-step excursion past the level it settles at: too short to be an overshoot (needs {need:.3g} steps, "
        + ("a quarter of the fitted timescale)" if fitted else f"a tenth of a run still {moving})")
    )


def apply_to_fit(result) -> None:
    """Attach the observed overshoot to ``result``'s oscillator fit; an ``underdamped`` regime
    without a significant overshoot becomes ``indeterminate`` (the damping ratio and its
    interval stay: they describe the fitted law)."""
    osc = result.models.get("oscillator") if result.models else None
    if osc is None:
        return
    ts = getattr(osc.params.get("timescale"), "value", None)
    ob = observed_overshoot(result.steps, result.values, timescale=ts)
    osc.observed_overshoot = ob.summary()
    if osc.regime == "underdamped" and not ob.significant:
        osc.regime = "indeterminate"
        osc.regime_reason = (
            "the fitted damping ratio is below one (the continuous-time law), but the "
            f"data show no significant overshoot: {ob.reason}"
        )
