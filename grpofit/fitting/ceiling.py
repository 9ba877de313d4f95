"""The R² noise ceiling: an estimate of the best R² a smooth law can reach, with its uncertainty.

``ceiling = 1 - noise_sd^2 / var(y)`` with ``noise_sd = 1.4826 MAD(diff y) / sqrt(2)`` (the
point-to-point noise), or ``sqrt(var(diff y) / 2)`` where the differences sit on a lattice (a
reward averaged over a few rollouts: :func:`on_lattice`). It is an *estimate*, not a bound:
``noise_sd`` is itself estimated, so a good fit exceeds the ceiling about as often as it falls
short of it. Its standard error comes from a delete-a-block jackknife of ``noise_sd`` over
:data:`BLOCKS` contiguous blocks of the differences (``se = 2 (1 - ceiling) se(noise_sd) /
noise_sd``); the uncertainty of ``var(y)`` is much smaller and left out. Only numpy is imported.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["r2_ceiling", "diff_sd", "BLOCKS", "on_lattice", "point_sd", "spread"]

#: jackknife blocks of the point-to-point differences
BLOCKS = 10


def _middle(x: np.ndarray) -> float:
    """The median of a finite 1-d array (the middle element, or the mean of the two middle
    ones), found by partitioning ``x`` itself (its order changes)."""
    n = x.size
    k = n // 2
    if n % 2:
        x.partition(k)
        return x[k]
    x.partition((k - 1, k))
    return (x[k - 1] + x[k]) / 2.0


def _median(x: np.ndarray) -> float:
    """``np.median`` of a finite 1-d array (the same value), without its per-call overhead; it
    runs 22 times per fit."""
    return _middle(x.copy())


def on_lattice(dev: np.ndarray, mad: float) -> bool:
    """Do the differences of a series sit on a lattice too coarse for their MAD to measure the noise?

    A reward averaged over a few rollouts takes few distinct values, and so do its differences:
    the MAD of ``dev = |d - median(d)|`` then lands on a lattice point, and
    ``1.4826 MAD / sqrt 2`` (exact for normal noise) is off by up to half a lattice step (30-40%
    of the sd at 8 rollouts a step). That is the case when the MAD spans fewer than
    :data:`LATTICE_STEPS` of the smallest gap between distinct values of ``dev`` (gaps below
    1e-9 of the largest value are rounding, not the lattice; a long series' ``dev`` is sampled
    with a stride, at most :data:`LATTICE_SAMPLE` values from every part of it); the noise
    variance is then ``var(d) / 2`` (:func:`point_sd`), right for any noise distribution.
    Continuous noise has gaps far below its MAD."""
    if not mad > 0:
        return True  # half or more of the differences are the same value: nothing else is a lattice
    stride = -(-dev.size // LATTICE_SAMPLE)  # rounded up: at most LATTICE_SAMPLE values, from every part
    s = np.sort(dev[::stride])
    gaps = s[1:] - s[:-1]
    gaps = gaps[gaps > 1e-9 * float(s[-1])]
    return bool(gaps.size) and mad < LATTICE_STEPS * float(np.minimum.reduce(gaps))


#: the MAD must span this many lattice steps to be read as on a continuum (:func:`on_lattice`)
LATTICE_STEPS = 20
#: at most this many differences are examined for a lattice (a stride through a long run's)
LATTICE_SAMPLE = 512


def spread(e: np.ndarray) -> float:
    """The variance of ``e`` (the same for ``e`` shifted by a constant: take it after the median is
    subtracted, before the absolute values), through two reductions."""
    n = e.size
    m = float(np.add.reduce(e)) / n
    return max(float(e @ e) / n - m * m, 0.0)


def point_sd(mad: float, var_d: float, lattice: bool) -> float:
    """The point noise sd from the differences' MAD, or from their variance ``var_d`` where they
    sit on a lattice (:func:`on_lattice`; the mean difference is taken out of ``var_d``, so a
    steady drift adds nothing to it, only its curvature)."""
    return float(math.sqrt(var_d / 2.0)) if lattice else float(1.4826 * mad / math.sqrt(2.0))


def _sd(d: np.ndarray, scratch: bool = False, lattice: bool | None = None) -> tuple[float, bool]:
    """``(sd, lattice)``: :func:`point_sd` of the differences ``d`` and whether they were taken
    as lattice-valued (``lattice`` given: that estimator, as the jackknife keeps the whole
    series'); ``scratch``: ``d`` may be overwritten (a long run's jackknife then holds no further
    copies of it)."""
    med = _middle(d) if scratch else _median(d)
    e = np.subtract(d, med, out=d if scratch else None)
    var_d = spread(e) if lattice is not False else 0.0  # before the absolute values
    np.abs(e, out=e)
    mad = _middle(e)
    if lattice is None:
        lattice = on_lattice(e, mad)
    return point_sd(mad, var_d, lattice), lattice


def diff_sd(d: np.ndarray, scratch: bool = False) -> float:
    """The point noise sd from a series' differences ``d`` (:func:`point_sd`; ``scratch``: ``d``
    may be overwritten). grpofit's noise floor (:func:`grpofit.fitting.hac.noise_floor`)."""
    return _sd(d, scratch)[0]


def r2_ceiling(y: np.ndarray) -> tuple[float | None, float | None]:
    """``(ceiling, se)``; ``(None, None)`` for a constant series, ``se`` None below 2 blocks of 3.
    Every jackknife replicate uses the whole series' estimator (MAD or lattice variance)."""
    y = np.asarray(y, dtype=float)
    finite = np.isfinite(y)
    if not finite.all():
        y = y[finite]
    if y.size < 3:
        return None, None
    var_y = float(np.var(y))
    if not var_y > 0:
        return None, None
    d = np.diff(y)
    sd, lattice = _sd(d)
    value = 1.0 - sd * sd / var_y
    B = min(BLOCKS, d.size // 3)
    if B < 2 or sd <= 0:
        return value, None if sd > 0 else 0.0
    reps = _jackknife_sds(d, B, lattice)
    se_sd = math.sqrt((B - 1) / B * float(np.sum((reps - reps.mean()) ** 2)))
    return value, 2.0 * (1.0 - value) * se_sd / sd


def _jackknife_sds(d: np.ndarray, B: int, lattice: bool) -> np.ndarray:
    """:func:`point_sd` of ``d`` with each of ``B`` contiguous blocks left out in turn (the
    whole series' estimator, ``lattice``), block by block as :func:`_sd` finds it. The replicates
    that leave out blocks of one length are found together, one row each (the blocks' lengths
    differ by at most one: two batches of numpy calls instead of ``B``)."""
    n = d.size
    edges = (np.arange(B + 1) * n) // B  # np.linspace(0, n, B + 1).astype(int)'s cuts
    reps = np.empty(B)
    lengths = edges[1:] - edges[:-1]
    for length in np.unique(lengths).tolist():
        m = n - length
        same = np.flatnonzero(lengths == length)
        per = max(1, BATCH_ELEMENTS // m)  # a long run's replicates a few at a time: memory stays O(n)
        for start in range(0, same.size, per):
            _replicates(d, edges, same[start : start + per], length, lattice, reps)
    return reps


#: the most elements the jackknife's batched replicates hold at once (a 10^6-point run: one at a time)
BATCH_ELEMENTS = 1 << 18


def _replicates(d, edges, blocks, length, lattice, reps) -> None:
    """Fill ``reps[blocks]``: one row per left-out block of ``length`` (the differences before
    the block, then those after it)."""
    m = d.size - length
    if blocks.size == 1:
        b = int(blocks[0])
        rows = np.concatenate([d[: edges[b]], d[edges[b + 1] :]])[None, :]
    else:
        j = np.arange(m)
        rows = d[j[None, :] + np.where(j[None, :] >= edges[blocks][:, None], length, 0)]
    med = _row_middle(rows)
    rows -= med[:, None]
    if lattice:
        mean = np.add.reduce(rows, axis=1) / m
        var_d = np.maximum(np.add.reduce(rows * rows, axis=1) / m - mean * mean, 0.0)
        reps[blocks] = np.sqrt(var_d / 2.0)
    else:
        np.abs(rows, out=rows)
        reps[blocks] = 1.4826 * _row_middle(rows) / math.sqrt(2.0)


def _row_middle(rows: np.ndarray) -> np.ndarray:
    """:func:`_middle` of each row (partitioned in place)."""
    m = rows.shape[1]
    k = m // 2
    if m % 2:
        rows.partition(k, axis=1)
        return rows[:, k].copy()
    rows.partition((k - 1, k), axis=1)
    return (rows[:, k - 1] + rows[:, k]) / 2.0
