"""Early-warning rules that only look backwards: they judge a run in progress, point by point.

``diagnose`` judges a finished run with centred medians and asks that a fall last until the end;
live, that costs a window of steps before anything is said. These two rules use trailing
(causal) medians instead, so what they say at step ``t`` depends only on steps ``<= t``:

- **reward drop** (``fail``, mode ``dynamical_instability``): with ``w`` the collapse window of
  :func:`grpofit.fitting.collapse.default_window` for the points seen, ``level(i)`` the median of the last
  ``w`` points up to ``i``, ``peak`` its running maximum, ``start`` the median of the first ``w``
  points and ``sd`` the point noise (:func:`grpofit.fitting.collapse.noise_sd`), the reward has dropped
  when ``peak - level >= max(min_drop * (peak - start), noise_k * sd)`` (the thresholds of
  :func:`~grpofit.fitting.collapse.find_collapse`) for the last ``hold = max(3, w // 4)`` points in a row,
  with at least ``3 w`` points seen. The onset reported is the last step whose level was still
  within half the threshold of the peak.
- **gradient-norm spike** (``warn``, a precursor): a gradient-norm point at least
  ``spike_factor`` (default 5) times the median of all earlier points (at least 20 of them).
  HeteroRL's GRPO run spikes x8.5 at step 749, ~150 steps before its reward collapses; healthy
  runs spike too (an isolated x12 in the Unsloth run), so this is only ever a warning.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from grpofit.fitting.collapse import default_window, noise_sd
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


def finite_points(steps, values) -> tuple[np.ndarray, np.ndarray]:
    """The points whose step and value are both finite, as float arrays."""
    s = np.asarray(steps, float)
    v = np.asarray(values, float)
    keep = np.isfinite(s) & np.isfinite(v)
    return (s, v) if keep.all() else (s[keep], v[keep])


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
                    new = trailing_median(v[:n], w)[k:]
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
        s, v = finite_points(steps, values)
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


class GradSpike:
    """The gradient-norm spike rule (module docstring), point by point: the points already seen
    are kept in two heaps (the lower half as a max-heap, the upper half as a min-heap), so the
    median of all earlier points costs ``O(log n)`` per new point instead of a sort of them all."""

    def __init__(self, *, spike_factor: float = 5.0) -> None:
        self.spike_factor = spike_factor
        self._lo: list[float] = []  #: the lower half, negated (a max-heap)
        self._hi: list[float] = []  #: the upper half (a min-heap)
        self.n = 0  #: finite points taken in
        self.last_step: float | None = None

    def median(self) -> float:
        """The median of the points taken in (``np.median`` of them; at least one)."""
        if len(self._lo) > len(self._hi):
            return -self._lo[0]
        return (-self._lo[0] + self._hi[0]) / 2

    def _push(self, x: float) -> None:
        if not self._lo or x <= -self._lo[0]:
            heapq.heappush(self._lo, -x)
        else:
            heapq.heappush(self._hi, x)
        if len(self._lo) > len(self._hi) + 1:
            heapq.heappush(self._hi, -heapq.heappop(self._lo))
        elif len(self._hi) > len(self._lo):
            heapq.heappush(self._lo, -heapq.heappop(self._hi))

    def update(self, steps: np.ndarray, values: np.ndarray) -> Signal | None:
        """Take in the points after the ones already seen; the first of them that spikes, or
        None. A series that no longer extends the one seen (fewer points, another step at the
        last point seen) is taken afresh."""
        s, v = finite_points(steps, values)
        k = self.n
        if k and (s.size < k or float(s[k - 1]) != self.last_step):
            self.__init__(spike_factor=self.spike_factor)
            k = 0
        hit = None
        for i, x in enumerate(v[k:].tolist(), start=k):
            if hit is None and i >= MIN_BASELINE:
                base = self.median()
                if base > 0 and x >= self.spike_factor * base:
                    hit = (i, x, base)
            self._push(x)
        self.n = int(v.size)
        if v.size:
            self.last_step = float(s[-1])
        if hit is None:
            return None
        i, x, base = hit
        return Signal(
            rule="grad_norm_spike",
            status="warn",
            mode="dynamical_instability",
            step=float(s[-1]),
            onset=float(s[i]),
            evidence=f"gradient norm spiked to {x:.3g}, x{x / base:.1f} its median so far, at step {s[i]:g}",
        )


def grad_spike(steps: np.ndarray, values: np.ndarray, *, spike_factor: float = 5.0) -> Signal | None:
    """The first gradient-norm spike of a whole series (a fresh :class:`GradSpike`), or None."""
    return GradSpike(spike_factor=spike_factor).update(steps, values)
