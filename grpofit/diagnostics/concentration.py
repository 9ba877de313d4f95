"""Policy concentration: the entropy collapses while the reward is still far from its plateau.

With ``H0`` the median entropy over its first points (before any reward collapse; the points
in the first tenth of the entropy's own timescale, at most a window, so a fast fall is not
already inside ``H0``):

- ``left_half`` = entropy level / ``H0`` at the step where the reward reaches half its gain;
  ``<= entropy_half_fail`` -> fail, ``<= entropy_half_warn`` -> warn. The half-gain step is read
  where the run crosses it (:func:`half_gain_step`): the start level comes from the first tenth
  of the reward timescale (a median of a fixed first window sits past a fast rise), and both series are smoothed with windows
  that shrink *symmetrically* at the edges, so a rise over the first few steps is not delayed;
- ``ratio`` = reward timescale / entropy timescale (one quick exponential fit to the entropy);
  ``>= entropy_ratio_fail`` with the entropy down >= 50% -> fail, ``>= entropy_ratio_warn``
  with the entropy down >= ``entropy_min_drop`` -> warn;
- final entropy ``<= entropy_floor_warn`` x ``H0`` -> warn (near-deterministic policy);
- otherwise pass: a gradual decline during learning is normal. No entropy column -> unknown.
"""

from __future__ import annotations

import numpy as np

from grpofit.diagnostics.base import Context, Verdict, fmt, quick_exponential, worst
from grpofit.fitting.collapse import rolling_median


def symmetric_level(values: np.ndarray, window: int) -> np.ndarray:
    """Centred rolling median whose window shrinks symmetrically at the edges (point ``i`` uses
    ``values[i-k : i+k+1]``, ``k = min(window // 2, i, n-1-i)``): exact on a monotone series,
    so the level of a fast rise is not pulled ahead (or behind) near the ends."""
    v = np.asarray(values, dtype=float)
    n = v.size
    out = rolling_median(v, window)
    h = window // 2
    for i in list(range(min(h, n))) + list(range(max(n - h, 0), n)):
        k = min(h, i, n - 1 - i)
        out[i] = float(np.median(v[i - k : i + k + 1]))
    return out


def _start_points(s: np.ndarray, timescale: float | None, w: int) -> int:
    """How many first points give a start level: those in the first tenth of the series' own
    timescale (at least one, at most ``w``; ``w`` when there is no timescale)."""
    dt = float(np.median(np.diff(s))) if s.size > 1 else 1.0
    if not (timescale and timescale > 0 and dt > 0):
        return w
    return int(np.clip(np.floor(0.1 * timescale / dt), 1, w))


def half_gain_step(ctx: Context) -> float | None:
    """First step where the reward's level crosses half its gain; None without a real gain.

    The gain runs from the start level to the end level of the healthy part. The start is the
    median of the points in the first tenth of the reward timescale (at least one point, at
    most a window): a median over a fixed first window sits past a rise that takes a few steps
    and would delay the crossing."""
    _, end, significant = ctx.reward_gain
    if not significant:
        return None
    s, v = ctx.pre
    if s.size < 3:
        return None
    w = min(ctx.window, max(3, v.size // 5) | 1)
    lev = symmetric_level(v, w)
    start = float(np.median(v[: _start_points(s, ctx.reward_timescale, w)]))
    half = start + 0.5 * (end - start)
    hit = np.flatnonzero(lev >= half) if end > start else np.flatnonzero(lev <= half)
    return float(s[hit[0]]) if hit.size else None


def check(ctx: Context) -> Verdict:
    """Judge policy concentration (module docstring)."""
    th = ctx.th
    es = ctx.series("entropy", before_collapse=True)
    if es is None:
        return Verdict("unknown", "no entropy column")
    s, h = es
    col = ctx.roles["entropy"]
    w = min(ctx.window, max(3, h.size // 5) | 1)
    T_h = _entropy_timescale(s, h)
    h0 = float(np.median(h[: _start_points(s, T_h, w)]))
    if not h0 > 0:
        return Verdict("unknown", f"{col} does not start positive ({fmt(h0)}); cannot judge concentration")
    lev = symmetric_level(h, w)
    left_end = float(np.median(h[-w:])) / h0
    drop = 1.0 - left_end
    T_r = ctx.reward_timescale
    half = half_gain_step(ctx)
    ratio = T_r / T_h if (T_h and T_r and half is not None) else None
    left_half = float(np.interp(half, s, lev)) / h0 if half is not None else None

    found = []  # (status, text, start)
    if left_half is not None and left_half <= th.entropy_half_warn:
        st = "fail" if left_half <= th.entropy_half_fail else "warn"
        found.append(
            (
                st,
                f"{col} down to {100 * left_half:.0f}% of its start {fmt(h0)} by step {half:g}, when the reward is only half-way to its plateau",
                half,
            )
        )
    if ratio is not None:
        st = _ratio_status(th, ratio, drop)
        if st is not None:
            found.append((st, f"entropy timescale {fmt(T_h)} vs reward {fmt(T_r)} steps (x{ratio:.1f} faster)", None))
    if left_end <= th.entropy_floor_warn:
        found.append(("warn", f"{col} ends at {100 * left_end:.0f}% of its start (near-deterministic policy)", None))

    mid_step = _half_drop_step(s, lev, h0, drop)
    details = {
        "entropy_start": h0,
        "entropy_left_end": left_end,
        "entropy_left_at_reward_half": left_half,
        "entropy_timescale": T_h,
        "reward_timescale": T_r,
        "timescale_ratio": ratio,
    }
    if found:
        status = worst(f[0] for f in found)
        starts = [f[2] for f in found if f[2] is not None] + ([mid_step] if mid_step is not None else [])
        text = "; ".join(f[1] for f in found if f[0] == status)
        return Verdict(status, text, start_step=min(starts) if starts else None, details=details)
    text = f"{col} {fmt(h0)} -> {fmt(h0 * left_end)} ({100 * left_end:.0f}% left)"
    if ratio is not None:
        text += f"; entropy timescale {fmt(T_h)} vs reward {fmt(T_r)} steps"
    if left_half is not None:
        text += f"; {100 * left_half:.0f}% left at the reward's half-gain step {half:g}"
    return Verdict("pass", text, details=details)


def _entropy_timescale(s: np.ndarray, h: np.ndarray) -> float | None:
    """The timescale of a falling exponential fitted to the entropy (``None`` unless it falls
    and explains more than 20% of the variance)."""
    q = quick_exponential(s, h)
    return q.timescale if (q is not None and q.gain < 0 and q.r2 > 0.2) else None


def _ratio_status(th, ratio: float, drop: float) -> str | None:
    """``fail``/``warn`` when the entropy falls that many times faster than the reward rises and
    has dropped enough (half for a fail, ``entropy_min_drop`` for a warn), else ``None``."""
    if ratio >= th.entropy_ratio_fail and drop >= 0.5:
        return "fail"
    if ratio >= th.entropy_ratio_warn and drop >= th.entropy_min_drop:
        return "warn"
    return None


def _half_drop_step(s: np.ndarray, lev: np.ndarray, h0: float, drop: float) -> float | None:
    """The first step where the entropy's level has lost half of its total drop (``None`` if it
    did not drop)."""
    target = h0 * (1.0 - 0.5 * max(drop, 0.0))
    hit = np.flatnonzero(lev <= target)
    return float(s[hit[0]]) if hit.size and drop > 0 else None
