"""Equal-width step bins for the likelihoods that see a long run through a few points.

The first ``head`` points are kept as logged (the rise lives there); the rest are averaged in
``max_points - head`` equal-width bins of steps, empty bins dropped. Each bin carries its count,
so a likelihood can give a bin mean the variance ``s^2 / count``.
"""

from __future__ import annotations

import numpy as np


def bin_tail(
    t: np.ndarray, columns: list[np.ndarray], head: int, max_points: int
) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """``(t, columns, counts)`` binned as the module says (call only when ``t.size > max_points``)."""
    nb = max_points - head
    edges = np.linspace(t[head], t[-1], nb + 1)
    idx = np.searchsorted(edges, t[head:], side="right")
    idx -= 1  # in place: one index array for a long run, not three
    np.clip(idx, 0, nb - 1, out=idx)
    cnt = np.bincount(idx, minlength=nb).astype(float)
    keep = cnt > 0
    cnt = cnt[keep]

    def mean(v: np.ndarray) -> np.ndarray:
        return np.concatenate([v[:head], np.bincount(idx, weights=v[head:], minlength=nb)[keep] / cnt])

    return mean(t), [mean(np.asarray(v, dtype=float)) for v in columns], np.concatenate([np.ones(head), cnt])
