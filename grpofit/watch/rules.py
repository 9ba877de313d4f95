"""Early-warning rules that only look backwards: they judge a run in progress, point by point.

``diagnose`` judges a finished run with centred medians and asks that a fall last until the end;
live, that costs a window of steps before anything is said. These two rules use trailing
(causal) medians instead, so what they say at step ``t`` depends only on steps ``<= t``:

- **reward drop** (``fail``, mode ``dynamical_instability``): with ``w`` the collapse window of
  :func:`grpofit.collapse.default_window` for the points seen, ``level(i)`` the median of the last
  ``w`` points up to ``i``, ``peak`` its running maximum, ``start`` the median of the first ``w``
  points and ``sd`` the point noise (:func:`grpofit.collapse.noise_sd`), the reward has dropped
  when ``peak - level >= max(min_drop * (peak - start), noise_k * sd)`` (the thresholds of
  :func:`~grpofit.collapse.find_collapse`) for the last ``hold = max(3, w // 4)`` points in a row,
  with at least ``3 w`` points seen. The onset reported is the last step whose level was still
  within half the threshold of the peak.
- **gradient-norm spike** (``warn``, a precursor): a gradient-norm point at least
  ``spike_factor`` (default 5) times the median of all earlier points (at least 20 of them).
  HeteroRL's GRPO run spikes x8.5 at step 749, ~150 steps before its reward collapses; healthy
  runs spike too (an isolated x12 in the Unsloth run), so this is only ever a warning.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grpofit.collapse import default_window, noise_sd
from grpofit.watch.grow import Grow

MIN_BASELINE = 20


@dataclass
class Signal:
    """One rule firing: when it was seen, where it starts and why."""

    rule: str
    status: str  #: warn | fail
    mode: str
    step: float  #: the last step seen when the rule fired (the detection step)
    onset: float | None
    evidence: str


def trailing_median(values: np.ndarray, window: int) -> np.ndarray:
    """``out[i] = median(values[max(0, i - window + 1) : i + 1])`` (causal)."""
    v = np.asarray(values, float)
    n = v.size
    if n == 0:
        return v.copy()
    out = np.empty(n)
    head = min(window - 1, n)
    for i in range(head):
        out[i] = np.median(v[: i + 1])
    if n >= window:
        rows = np.lib.stride_tricks.sliding_window_view(v, window)
        out[window - 1 :] = np.median(rows, axis=1)
    return out


class RewardDrop:
    """The reward-drop rule (module docstring), kept up to date point by point: the trailing
    levels of the points already seen are kept, so an update costs the new points only."""

    def __init__(self, *, min_drop: float = 0.5, noise_k: float = 4.0) -> None:
        self.min_drop = min_drop
        self.noise_k = noise_k
        self.w = 0
        self._level = Grow()
        self.last = None  #: (n, last step) the cached levels belong to

    @property
    def level(self) -> np.ndarray:
        return self._level.view()

    def _levels(self, s: np.ndarray, v: np.ndarray, w: int) -> np.ndarray:
        n = v.size
        k = self._level.n
        if w == self.w and self.last is not None and k <= n and k and s[k - 1] == self.last[1] and k == self.last[0]:
            if n > k:
                if k >= w - 1:  # full windows only: one sliding view over the new points
                    rows = np.lib.stride_tricks.sliding_window_view(v[k - w + 1 :], w)
                    new = np.median(rows, axis=1)
                else:
                    new = trailing_median(v[: n], w)[k:]
                    new[: max(0, w - 1 - k)] = np.nan
                self._level.extend(new)
        else:
            level = trailing_median(v, w)
            level[: w - 1] = np.nan  # shrunken windows are too noisy to set a peak
            self._level = Grow(2 * n)
            self._level.extend(level)
            self.w = w
        self.last = (n, float(s[-1]))
        return self.level

    def update(self, steps: np.ndarray, values: np.ndarray) -> Signal | None:
        s = np.asarray(steps, float)
        v = np.asarray(values, float)
        keep = np.isfinite(s) & np.isfinite(v)
        if not keep.all():
            s, v = s[keep], v[keep]
        n = v.size
        w = default_window(n)
        if n < 3 * w:
            return None
        level = self._levels(s, v, w)
        peak = np.fmax.accumulate(level)
        start = float(np.median(v[:w]))
        sd = noise_sd(v)
        hold = max(3, w // 4)
        p = float(peak[-1])
        thr = max(self.min_drop * (p - start), self.noise_k * sd, 1e-12)
        tail_peak = peak[-hold:]
        below = (tail_peak - level[-hold:]) >= np.maximum(self.min_drop * (tail_peak - start), self.noise_k * sd)
        if not below.all():
            return None
        band = p - 0.5 * thr
        inside = np.flatnonzero(level >= band)
        onset = float(s[min(int(inside[-1]) + 1, n - 1)]) if inside.size else None
        return Signal(
            rule="reward_drop",
            status="fail",
            mode="dynamical_instability",
            step=float(s[-1]),
            onset=onset,
            evidence=(
                f"reward level {float(level[-1]):.3g} is {p - float(level[-1]):.3g} below its peak {p:.3g} "
                f"(threshold {thr:.3g}) for {hold} points"
                + (f", falling since step {onset:g}" if onset is not None else "")
            ),
        )


def reward_drop(steps: np.ndarray, values: np.ndarray, *, min_drop: float = 0.5, noise_k: float = 4.0) -> Signal | None:
    """The reward-drop rule on everything seen so far (a fresh :class:`RewardDrop`)."""
    return RewardDrop(min_drop=min_drop, noise_k=noise_k).update(steps, values)


def grad_spike(steps: np.ndarray, values: np.ndarray, *, spike_factor: float = 5.0, since: int = 0) -> Signal | None:
    """The first gradient-norm spike at index >= ``since`` (module docstring), or None."""
    s = np.asarray(steps, float)
    v = np.asarray(values, float)
    keep = np.isfinite(s) & np.isfinite(v)
    s, v = s[keep], v[keep]
    n = v.size
    if n <= MIN_BASELINE:
        return None
    for i in range(max(since, MIN_BASELINE), n):
        base = float(np.median(v[:i]))  # one median per new point: callers pass ``since``
        if base > 0 and v[i] >= spike_factor * base:
            return Signal(
                rule="grad_norm_spike",
                status="warn",
                mode="dynamical_instability",
                step=float(s[-1]),
                onset=float(s[i]),
                evidence=f"gradient norm spiked to {v[i]:.3g}, x{v[i] / base:.1f} its median so far, at step {s[i]:g}",
            )
    return None
