"""The R² noise ceiling: an estimate of the best R² a smooth law can reach, with its uncertainty.

``ceiling = 1 - noise_sd^2 / var(y)`` with ``noise_sd = 1.4826 MAD(diff y) / sqrt(2)`` (the
point-to-point noise). It is an *estimate*, not a bound: ``noise_sd`` is itself estimated, so a
good fit exceeds the ceiling about as often as it falls short of it. Its standard error comes
from a delete-a-block jackknife of ``noise_sd`` over :data:`BLOCKS` contiguous blocks of the
differences (``se = 2 (1 - ceiling) se(noise_sd) / noise_sd``); the uncertainty of ``var(y)`` is
much smaller and left out. Only numpy is imported.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["r2_ceiling", "BLOCKS"]

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


def _sd(d: np.ndarray, scratch: bool = False) -> float:
    """``1.4826 MAD(d) / sqrt 2``; ``scratch``: ``d`` may be overwritten (a long run's jackknife
    then holds no further copies of it)."""
    med = _middle(d) if scratch else _median(d)
    e = np.subtract(d, med, out=d if scratch else None)
    np.abs(e, out=e)
    return float(1.4826 * _middle(e) / math.sqrt(2.0))


def r2_ceiling(y: np.ndarray) -> tuple[float | None, float | None]:
    """``(ceiling, se)``; ``(None, None)`` for a constant series, ``se`` None below 2 blocks of 3."""
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
    sd = _sd(d)
    value = 1.0 - sd * sd / var_y
    B = min(BLOCKS, d.size // 3)
    if B < 2 or sd <= 0:
        return value, None if sd > 0 else 0.0
    edges = np.linspace(0, d.size, B + 1).astype(int)
    reps = np.array([_sd(np.concatenate([d[: edges[b]], d[edges[b + 1]:]]), scratch=True) for b in range(B)])
    se_sd = math.sqrt((B - 1) / B * float(np.sum((reps - reps.mean()) ** 2)))
    return value, 2.0 * (1.0 - value) * se_sd / sd
