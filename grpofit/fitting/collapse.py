"""Change points in a training curve: a reward *collapse* and a sustained metric *rise*.

Both work on a robust level, the centred rolling median over ``w`` points
(``w = clip(round(0.03 n), 7, 51)``, odd, so it scales with the run's length and step grid),
and on the point noise ``sd = 1.4826 * median(|diff(values)|) / sqrt(2)`` (robust to trends
and to the break itself).

Collapse: with ``peak(i) = max(level[:i+1])`` and ``start`` the lower of ``median(values[:w])``
and the lowest 3-point median of those ``w`` points (:func:`start_level`: a rise or overshoot
inside the first window must not count as the start), the reward has collapsed at ``i`` when

    peak(i) - level(i) >= max(min_drop * (peak(i) - start), noise_k * sd)

(``sd`` becomes the sd of the level, ``sd * sqrt(pi / 2) / sqrt(w)``, with ``level_noise=True``:
what :func:`grpofit.fitting.analysis.fit_run` uses, since it then tests the candidate against the law)

and the level then stays below ``peak(i) - threshold / 2`` until the end of the run, for at
least ``w`` points. A single dip moves no median; noise is below ``noise_k * sd``; a fall that
climbs back into the plateau band (an underdamped oscillation, a temporary dip) is not a
collapse, and neither is a fall whose median from detection to the end is less than the
threshold below the peak (an overshoot settling at its plateau; the running peak then starts
afresh from there, so a later fall from the settled level is still seen): oscillation is
judged by the fit's damping ratio instead. When the plateau band was last reached long before
the detection (more than ``max(w, n // 10)`` points: an overshoot's peak), the run settled lower:
the band is then taken from the highest level of those last points, a dip that climbs back into
it is ringing (the search starts afresh there), and the onset is where the level left it. A rise is never a collapse: the median level before the onset
must exceed the median after it by the threshold.

A collapse that *recovered* (:func:`_recovered`): the same fall, below the band for at least
``max(2 w, n // 20)`` points, at least the full threshold below the level before it, then back
in the band for good (the level never again below the midpoint of the fall) with ``w`` points
left. It is returned when no collapse lasts to the end (one that does wins), with
``recovered=True`` and ``recovered_step``.

That is only a *candidate*. A collapse is a sustained fall below the run's own settled level
that the fitted law cannot explain: :func:`explained_by_law` compares, by BIC, the oscillator
fitted to the whole run (it overshoots and rings) with a break model (the oscillator fitted
before the onset, a constant level after it). Unless the break wins clearly, the fall is an
oscillation, not a collapse (:func:`grpofit.fitting.analysis.fit_run` applies it).

Rise (gradient norm, importance ratios, clip fractions): with ``baseline = median`` of the first
``max(w, baseline_fraction * n)`` points *after the initial transient* (:func:`early_baseline`:
a series that starts at ``factor`` x that median or more is still relaxing, e.g. the large
gradients of the first steps; the baseline window then starts where its level first falls
below ``(1 + factor) / 2`` x, and nothing before it counts as a rise, nor a level that is
still above ``factor`` x the new baseline where the transient ends), the metric has risen at
``i`` when
``level(i) >= factor * baseline`` and stays above ``(1 + factor) / 2 * baseline`` for
``min_duration * span`` steps or until the end. The *precursor* is the first point that
exceeds ``spike_factor * baseline`` in the ``lookback * span`` steps before the rise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grpofit.laws.models import median
from grpofit.runtime.compiled import compiled_filter

MIN_WINDOW = 7
MAX_WINDOW = 51
#: points per block of the element-wise work on a long run (its temporaries stay this short)
_BLOCK = 1 << 18


def default_window(n: int, *, fraction: float = 0.03) -> int:
    """Odd rolling-window length in points: ``clip(round(fraction * n), 7, 51)``."""
    w = int(round(fraction * n))
    w = min(max(w, MIN_WINDOW), MAX_WINDOW)
    return w if w % 2 else w + 1


def rolling_median(values: np.ndarray, window: int) -> np.ndarray:
    """Centred rolling median over ``window`` points; the window shrinks at both edges."""
    v = np.asarray(values, dtype=float)
    n = v.size
    if n == 0:
        return v.copy()
    h = window // 2
    if n <= window:
        return np.array([np.median(v[max(0, i - h) : i + h + 1]) for i in range(n)])
    kernel = compiled_filter()
    if kernel is not None and np.isfinite(v).all():  # one sliding sorted window, compiled
        out = np.empty(n)
        kernel.rolling_median(n, h, np.ascontiguousarray(v), out)
        return out
    return _rolling_median_numpy(v, h)


def _rolling_median_numpy(v: np.ndarray, h: int) -> np.ndarray:
    """:func:`rolling_median` in numpy (``n`` above the window's ``2 h + 1`` points)."""
    n = v.size
    out = np.empty(n)
    # one padded sliding view: rows h..n-h-1 are the full windows, the h rows at either end
    # the shrunken edge windows (padding NaN, ignored there)
    pad = np.full(h, np.nan)
    rows = np.lib.stride_tricks.sliding_window_view(np.concatenate([pad, v, pad]), 2 * h + 1)
    windows = rows[h : n - h]
    has_nan = bool(np.isnan(v).any())
    # in blocks of rows: a median over the whole view would copy n x window floats at once
    # (51 windows x 8 bytes = 408 bytes a point); a block keeps that copy near 10 MB
    step = max(1, (1 << 20) // (2 * h + 1))
    for a in range(0, windows.shape[0], step):
        block = windows[a : a + step]
        if has_nan:
            out[h + a : h + a + block.shape[0]] = np.median(block, axis=1)
        else:  # odd window: the median is the middle order statistic (np.median without its overhead)
            out[h + a : h + a + block.shape[0]] = np.partition(block, h, axis=1)[:, h]
    if h:
        edges = _nan_row_median(np.concatenate([rows[:h], rows[n - h :]]))
        out[:h] = edges[:h]
        out[n - h :] = edges[h:]
    return out


def _nan_row_median(rows: np.ndarray) -> np.ndarray:
    """Median of each row ignoring NaN (every row has a value); np.sort puts NaN last."""
    srt = np.sort(rows, axis=1)
    cnt = np.isfinite(rows).sum(axis=1)
    r = np.arange(rows.shape[0])
    return 0.5 * (srt[r, (cnt - 1) // 2] + srt[r, cnt // 2])


def noise_sd(values: np.ndarray) -> float:
    """Point noise ``1.4826 * median(|diff|) / sqrt(2)``; the plain sd of diffs when that is 0."""
    v = np.asarray(values, dtype=float)
    if v.size < 3:
        return 0.0
    d = np.diff(v)
    sd = 1.4826 * median(np.abs(d, out=d), overwrite=True) / np.sqrt(2.0)  # in place: one array of differences
    if sd <= 0.0:
        sd = float(np.std(np.diff(v))) / np.sqrt(2.0)
    return sd


def _r(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), digits)


@dataclass
class Collapse:
    """A sustained fall of the reward from its running peak."""

    step: float  #: onset: the last step the level was still within the plateau band
    detected_step: float  #: first step where the drop exceeded the threshold
    peak_step: float  #: step of the running peak (the plateau) before the fall
    level_before: float  #: median reward over the window before the onset
    level_after: float  #: median reward while collapsed
    start_level: float  #: median reward over the first window of the run
    drop: float  #: ``level_before - level_after``
    relative_drop: float | None  #: ``drop / |level_before|``
    gain_fraction: float | None  #: ``drop / (level_before - start_level)``: share of the gain lost
    duration: float  #: steps the level stayed collapsed
    recovered: bool  #: the level climbed back into the plateau band before the end
    threshold: float  #: the drop threshold that was used
    noise_sd: float  #: point noise of the reward
    recovered_step: float | None = None  #: first step the level was back in the plateau band

    def summary(self) -> dict:
        return {
            "step": _r(self.step, 6),
            "detected_step": _r(self.detected_step, 6),
            "peak_step": _r(self.peak_step, 6),
            "level_before": _r(self.level_before),
            "level_after": _r(self.level_after),
            "drop": _r(self.drop),
            "relative_drop": _r(self.relative_drop),
            "gain_fraction": _r(self.gain_fraction),
            "duration": _r(self.duration, 6),
            "recovered": bool(self.recovered),
            "recovered_step": _r(self.recovered_step, 6),
            "threshold": _r(self.threshold),
            "noise_sd": _r(self.noise_sd),
        }

    def describe(self) -> str:
        rel = f", -{100 * self.relative_drop:.0f}%" if self.relative_drop is not None else ""
        levels = f"({self.level_before:.3g} -> {self.level_after:.3g}{rel})"
        if self.recovered:
            return f"reward collapsed at step {self.step:g} {levels} and recovered by step {self.recovered_step:g}"
        return f"reward collapses at step {self.step:g} {levels}"


@dataclass
class Rise:
    """A sustained rise of a positive metric (e.g. the gradient norm) above its early baseline."""

    step: float  #: first step where the level reached ``factor * baseline`` (and stayed)
    baseline: float  #: median of the early part of the run
    level: float  #: median of the raw values from ``step`` to the end of the rise
    ratio: float  #: ``level / baseline``
    duration: float  #: steps the level stayed raised
    to_end: bool  #: the rise lasts until the end of the run
    precursor_step: float | None  #: first spike above ``spike_factor * baseline`` before ``step``
    precursor_ratio: float | None  #: that spike over the baseline

    @property
    def first_step(self) -> float:
        """The earliest sign: the precursor spike when there is one, else the rise."""
        return self.precursor_step if self.precursor_step is not None else self.step

    def summary(self) -> dict:
        return {
            "step": _r(self.step, 6),
            "baseline": _r(self.baseline, 6),
            "level": _r(self.level, 6),
            "ratio": _r(self.ratio, 3),
            "duration": _r(self.duration, 6),
            "to_end": bool(self.to_end),
            "precursor_step": _r(self.precursor_step, 6),
            "precursor_ratio": _r(self.precursor_ratio, 3),
        }


def _prepare(steps, values, window: int | None):
    """Finite ``(steps, values, n, window)``, or None when the series is under three windows."""
    s = np.asarray(steps, dtype=float)
    v = np.asarray(values, dtype=float)
    keep = np.isfinite(s) & np.isfinite(v)
    if not keep.all():  # no copy of a series that is all finite
        s, v = s[keep], v[keep]
    n = v.size
    w = window or default_window(n)
    if n < 3 * w:
        return None
    return s, v, n, w


def _first(mask: np.ndarray) -> int:
    """Index of the first True of a boolean array, -1 when there is none (``np.argmax``: no
    index array as long as the run, which ``np.flatnonzero`` makes on a long one)."""
    if mask.size == 0:
        return -1
    i = int(np.argmax(mask))
    return i if mask[i] else -1


def _last(mask: np.ndarray) -> int:
    """Index of the last True of a boolean array, -1 when there is none."""
    i = _first(mask[::-1])
    return -1 if i < 0 else mask.size - 1 - i


def _runs_of(mask: np.ndarray, start: int = 0):
    """Yield ``(i, j)`` for each maximal run ``mask[i:j]`` of True at or after ``start``."""
    n = mask.size
    i = start
    while i < n:
        nxt = _first(mask[i:])
        if nxt < 0:
            return
        i += nxt
        rest = _first(~mask[i:])
        j = n if rest < 0 else i + rest
        yield i, j
        i = j


def find_collapse(
    steps: np.ndarray,
    values: np.ndarray,
    *,
    min_drop: float = 0.5,
    noise_k: float = 4.0,
    window: int | None = None,
    after_step: float | None = None,
    level_noise: bool = False,
) -> Collapse | None:
    """The first sustained fall of ``values`` from its running peak, or None (module docstring).

    ``min_drop``: fraction of the gain (peak minus start level) the level must lose;
    ``noise_k``: the drop must also exceed ``noise_k`` point-noise sds. The fall must last until
    the end of the run (at least ``w`` points). ``after_step``: look only after this step, with
    the running peak started afresh there (the start level stays the run's): after an
    overshoot that the law explains, the next candidate is a fall from the level the run
    settled at, not from the overshoot's peak. ``level_noise``: the noise term is ``noise_k``
    sds of the rolling-median level (``1.2533 sd / sqrt(w)``, the sd of a median of ``w``
    points) rather than of a point; for callers that then test the candidate against the law
    fitted to the whole run (:func:`grpofit.fitting.analysis.fit_run` does, :func:`explained_by_law`).
    """
    prepared = _prepare(steps, values, window)
    if prepared is None:
        return None
    s, v, n, w = prepared
    i0 = 0 if after_step is None else int(np.searchsorted(s, after_step, side="right"))
    level = rolling_median(v, w)
    sd = noise_sd(v)
    k_sd = noise_k * sd * (level_noise_factor(w) if level_noise else 1.0)
    start = start_level(v, w)
    dip = None  # the first collapse that recovered; a later one that lasts to the end wins
    for _ in range(MAX_RESETS):
        if n - i0 < 2 * w:
            return dip
        found, reset, recovered = _collapse_from(s, v, level, sd, start, i0, w, min_drop, k_sd)
        dip = dip or recovered
        if reset is None:
            return found or dip
        i0 = reset
    return dip


#: how often the running peak may start afresh after an overshoot that settles (ringing)
MAX_RESETS = 12


def start_level(values: np.ndarray, w: int) -> float:
    """The run's start level: the median of its first ``w`` points, or the lowest 3-point
    median among them when that is lower (a rise faster than ``w`` points, or an overshoot
    within them, would otherwise count as the start and hide the gain)."""
    head = np.asarray(values[:w], dtype=float)
    return float(min(median(head), float(np.min(rolling_median(head, 3)))))


def level_noise_factor(w: int) -> float:
    """sd of the median of ``w`` independent Gaussian points over the point sd: ``sqrt(pi/2) / sqrt(w)``."""
    return float(np.sqrt(np.pi / 2.0) / np.sqrt(w))


def _collapse_from(s, v, level, sd, start, i0, w, min_drop, k_sd):
    """``(collapse, None, dip)``, ``(None, None, dip)``, or ``(None, i, dip)``: a fall from an
    overshoot that settles less than the threshold below its peak; the search restarts at ``i``
    with a fresh running peak (so a later collapse within the same stretch below the old peak is
    seen). ``dip``: the first collapse in this stretch that recovered (:func:`_recovered`), or None."""
    n = v.size
    peak = np.full(n, -np.inf)
    peak[i0:] = np.maximum.accumulate(level[i0:])
    thr = np.subtract(peak, start)  # in place from here: a long run holds few n-point arrays
    thr *= min_drop
    np.maximum(thr, k_sd, out=thr)
    np.maximum(thr, 1e-12, out=thr)
    below = np.empty(n, dtype=bool)
    for a in range(0, n, _BLOCK):  # peak - level >= thr by blocks: no third point-long array
        np.greater_equal(
            np.subtract(peak[a : a + _BLOCK], level[a : a + _BLOCK]), thr[a : a + _BLOCK], out=below[a : a + _BLOCK]
        )
    below[: i0 + w] = False
    dip = None
    for i, _ in _runs_of(below, i0 + w):
        p, t = float(peak[i]), float(thr[i])
        band = p - 0.5 * t
        rest = _first(level[i:] >= band)
        j = n if rest < 0 else i + rest
        if j < n and dip is None:
            dip = _recovered(s, v, level, start, i0, i, j, w, p, t, sd)
        if j < n or n - i < w:
            continue  # climbed back (oscillation, dip, a collapse that recovered) or too close to the end to tell
        if p - median(v[i:]) < t:
            return None, i, dip  # settled (e.g. after an overshoot) less than the threshold below the peak
        # onset: the last point before i still inside the plateau band
        inside = _last(level[i0:i] >= band)
        k = inside + i0 if inside >= 0 else i
        m = max(w, n // 10)
        if i - k > m:
            # the band was last reached long before (an overshoot's peak); the run settled lower
            # and fell from there: the onset is where the level left the band of its settled
            # level (the highest level of the m points before detection); a dip that climbs back into
            # that band is ringing around the settled level: the search starts afresh there
            a = max(i0, i - m)
            lband = float(np.max(level[a:i])) - 0.5 * t
            under = _first(level[i:] < lband)
            if under < 0:
                return None, i, dip  # never left the settled level's band
            i2 = i + under
            back = _first(level[i2:] >= lband)
            if back >= 0:
                return None, i2 + back, dip
            k = _last(level[a:i2] >= lband) + a  # level[a:i] reaches its own max, above lband
        onset = min(k + 1, i)
        peak_idx = i0 + _first(level[i0 : i + 1] >= p)  # p is the max of these levels
        lo = max(i0, onset - max(w, n // 10))
        before = median(v[lo:onset]) if onset > lo else float(level[onset])
        after = median(v[i:j])
        drop = before - after
        if drop < 0.5 * t:
            # not a fall from a settled level: the onset sits in the rise, or the level only
            # settled below an overshoot's peak and never came back to its band; the search
            # starts afresh at the detection (a later fall from the settled level is still seen)
            return None, i, dip
        return _collapse(s, onset, i, peak_idx, j, before, after, start, t, sd), None, dip
    return None, None, dip


def _recovered(s, v, level, start, i0, i, j, w, p, t, sd) -> Collapse | None:
    """A collapse that recovered, or None: the level left the plateau band at the onset, was
    detected ``t`` below the running peak at ``i`` and first climbed back into the band at ``j``.

    The recovery must hold: it is the first return to the band after which the level never
    again falls below the midpoint between the level before the onset and the median from
    detection to ``j`` (a rolling median that flickers into the band once and falls back has
    not recovered), with at least ``w`` points after it. The collapse counts when it is long
    and deep: at least ``max(2 w, n // 20)`` points from detection to the first return to the
    band (a dip of a few batches moves no rolling median; one of a window or so is a dip, not a
    collapse), the median
    over them at least the full threshold ``t`` below the level before the onset, and the onset
    inside the stretch the peak was set in (not long after an overshoot's peak: ringing).
    Whether the law rings through it is tested after (:func:`explained_by_law`, with the
    recovery in the break model)."""
    n = v.size
    if j - i < max(2 * w, n // 20):
        return None  # back in the band within a window or two: a dip
    band = p - 0.5 * t
    inside = _last(level[i0:i] >= band)
    k = inside + i0 if inside >= 0 else i
    m = max(w, n // 10)
    if i - k > m:
        return None
    onset = min(k + 1, i)
    lo = max(i0, onset - m)
    before = median(v[lo:onset]) if onset > lo else float(level[onset])
    mid = 0.5 * (before + median(v[i:j]))
    low = _last(level[i:] < mid)
    back = _first(level[i + low + 1 :] >= band) if low >= 0 else 0
    if back < 0:
        return None
    r = i + low + 1 + back if low >= 0 else j
    if n - r < w:
        return None
    after = median(v[i:r])
    if before - after < t:
        return None
    peak_idx = i0 + _first(level[i0 : i + 1] >= p)
    return _collapse(s, onset, i, peak_idx, r, before, after, start, t, sd, recovered=True)


def _collapse(s, onset, i, peak_idx, end, before, after, start, t, sd, recovered=False) -> Collapse:
    """The :class:`Collapse` from its indices (onset, detection ``i``, peak, ``end``: the first
    point back in the band, or the run's end) and levels; ``recovered`` sets ``recovered_step``."""
    drop = before - after
    gain = before - start
    return Collapse(
        step=float(s[onset]),
        detected_step=float(s[i]),
        peak_step=float(s[peak_idx]),
        level_before=before,
        level_after=after,
        start_level=start,
        drop=drop,
        relative_drop=drop / abs(before) if before != 0 else None,
        gain_fraction=drop / gain if gain > 0 else None,
        duration=float(s[end - 1] - s[onset]),
        recovered=recovered,
        threshold=t,
        noise_sd=sd,
        recovered_step=float(s[end]) if recovered else None,
    )


def early_baseline(
    values: np.ndarray, *, factor: float = 3.0, baseline_fraction: float = 0.2, window: int | None = None
) -> tuple[float, int]:
    """``(baseline, start)``: the median of ``max(w, baseline_fraction * n)`` points from
    ``start``, the end of the initial transient (module docstring; ``start = 0`` without one)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    n = v.size
    if n == 0:
        return float("nan"), 0
    w = window or default_window(n)
    nb = max(w, int(baseline_fraction * n))
    base = median(v[:nb])
    start = 0
    if base > 0 and n >= 3 * w:
        level = rolling_median(v, w)
        if level[0] >= factor * base:
            low = np.flatnonzero(level < 0.5 * (1.0 + factor) * base)
            if low.size:
                start = int(low[0])
                base = median(v[start : start + nb])
    return float(base), start


def find_rise(
    steps: np.ndarray,
    values: np.ndarray,
    *,
    factor: float = 3.0,
    min_duration: float = 0.05,
    baseline_fraction: float = 0.2,
    spike_factor: float = 4.0,
    lookback: float = 0.2,
    window: int | None = None,
) -> Rise | None:
    """The first sustained rise of ``level`` to ``factor * baseline``, or None (module docstring).

    Meant for positive metrics (gradient norm, importance ratios, clip fractions); returns None
    when the baseline is not positive.
    """
    prepared = _prepare(steps, values, window)
    if prepared is None:
        return None
    s, v, n, w = prepared
    baseline, start = early_baseline(v, factor=factor, baseline_fraction=baseline_fraction, window=w)
    if not baseline > 0:
        return None
    level = rolling_median(v, w)
    ratio = level / baseline
    span = float(s[-1] - s[0])
    hold = 0.5 * (1.0 + factor)
    for i, _ in _runs_of(ratio >= factor, start):
        if i == start and start > 0:
            continue  # still high where the transient ends: the relaxation, not a rise
        rest = np.flatnonzero(ratio[i:] < hold)
        j = n if rest.size == 0 else i + int(rest[0])
        duration = float(s[j - 1] - s[i])
        to_end = j == n and n - i >= w
        if not (to_end or duration >= min_duration * span):
            continue
        lvl = median(v[i:j])
        t0 = s[i] - lookback * span
        window_idx = np.flatnonzero((s >= max(t0, s[start])) & (s < s[i]) & (v >= spike_factor * baseline))
        pre_step = pre_ratio = None
        if window_idx.size:
            m = int(window_idx[0])
            pre_step, pre_ratio = float(s[m]), float(v[m] / baseline)
        return Rise(
            step=float(s[i]),
            baseline=baseline,
            level=lvl,
            ratio=lvl / baseline,
            duration=duration,
            to_end=j == n,
            precursor_step=pre_step,
            precursor_ratio=pre_ratio,
        )
    return None


#: a candidate collapse is a collapse only when the break model beats the law fitted to the
#: whole run by more than this in BIC ("strong" evidence on Kass and Raftery's scale)
BREAK_DELTA_BIC = 6.0


def break_evidence(
    collapse: Collapse, steps: np.ndarray, values: np.ndarray, whole_curve: np.ndarray, pre_curve: np.ndarray
) -> float | None:
    """``BIC(law on the whole run) - BIC(break)``: positive when a break explains the data better.

    The break model is the law fitted to the part before the onset plus a constant level after
    it (two more parameters: the level and the break step); the alternative is the same law
    fitted to the whole run, which may ring through the fall as an oscillation.
    ``n ln(SSR_whole / SSR_break) - 2 ln n``; None when either part is too short. A collapse
    that recovered: the constant level only until the recovery, the law fitted before the fall
    after it (one more parameter, the recovery step: ``- 3 ln n``).
    """
    s = np.asarray(steps, dtype=float)
    v = np.asarray(values, dtype=float)
    ok = np.isfinite(s) & np.isfinite(v) & np.isfinite(whole_curve) & np.isfinite(pre_curve)
    s, v, wc, pc = s[ok], v[ok], np.asarray(whole_curve)[ok], np.asarray(pre_curve)[ok]
    before = s < collapse.step
    if before.sum() < 3 or (~before).sum() < 3:
        return None
    after = np.zeros_like(before)
    extra = 2.0
    if collapse.recovered and collapse.recovered_step is not None:
        after = s >= collapse.recovered_step  # back on the law fitted before the fall
        extra = 3.0  # the recovery step
    post = v[~before & ~after]
    ssr_break = float(
        np.sum((v[before] - pc[before]) ** 2) + np.sum((post - post.mean()) ** 2) + np.sum((v[after] - pc[after]) ** 2)
    )
    ssr_whole = float(np.sum((v - wc) ** 2))
    n = v.size
    if not (ssr_break > 0 and ssr_whole > 0):
        return None if ssr_break == ssr_whole else (np.inf if ssr_break == 0 else -np.inf)
    return float(n * np.log(ssr_whole / ssr_break) - extra * np.log(n))


def explained_by_law(
    collapse: Collapse, steps: np.ndarray, values: np.ndarray, whole_curve: np.ndarray, pre_curve: np.ndarray
) -> bool:
    """True when the law fitted to the whole run explains the fall about as well as a break
    does (:func:`break_evidence` at most :data:`BREAK_DELTA_BIC`): an oscillation it rings
    through, not a collapse. No evidence either way (None): not explained (the candidate stands)."""
    d = break_evidence(collapse, steps, values, whole_curve, pre_curve)
    return d is not None and d <= BREAK_DELTA_BIC
