"""Is the run still rising? A model-free test of the late slope (docs/theory.md §7).

The slope of an ordinary least-squares line through the last half of the seen points (at
least :data:`MIN_POINTS`), with a Newey-West (Bartlett) standard error whose bandwidth is a
fifth of those points, and the fixed-b critical value of Kiefer & Vogelsang (the forcing makes
neighbouring points correlated, and a white-noise standard error would call a wander a
trend). ``rising`` when the slope is positive beyond the one-sided 97.5% critical value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from grpofit.fitting.hac import critical_value, hac_scalar

__all__ = ["Drift", "late_slope", "persistence", "MIN_POINTS"]

MIN_POINTS = 8


def persistence(y) -> float:
    """The level a run has reached: the mean of the last tenth of its points (at least one).
    The forecast's baseline ("it stays where it is") and the prior centre of its plateau."""
    y = np.asarray(y, dtype=float)
    return float(y[-max(1, y.size // 10) :].mean())


@dataclass
class Drift:
    slope: float | None  #: reward per step
    stderr: float | None
    rising: bool
    falling: bool
    from_step: float | None

    def summary(self) -> dict:
        return {"slope_per_step": self.slope, "stderr": self.stderr, "rising": self.rising, "from_step": self.from_step}


def late_slope(steps: np.ndarray, values: np.ndarray, fraction: float = 0.5) -> Drift:
    """The slope of the last ``fraction`` of the series and whether it is significantly non-zero."""
    n = steps.size
    k = max(MIN_POINTS, int(n * fraction))
    if n < MIN_POINTS or k > n:
        return Drift(None, None, False, False, None)
    x = np.asarray(steps[-k:], dtype=float)
    y = np.asarray(values[-k:], dtype=float)
    xc = x - x.mean()
    sxx = float(xc @ xc)
    if sxx <= 0:
        return Drift(None, None, False, False, None)
    slope = float(xc @ (y - y.mean())) / sxx
    r = y - y.mean() - slope * xc
    s = xc * r
    bw = max(2, int(math.ceil(k / 5)))
    lrv = float(hac_scalar(s[None, :], bw)[0])  # the Bartlett sum in O(k), not O(k * bw)
    se = math.sqrt(max(lrv, 1e-300)) / sxx
    cv = critical_value(bw / k)
    return Drift(slope, se, slope > cv * se, slope < -cv * se, float(x[0]))
