"""A float array grown in place, for series that gain a few points per poll."""

from __future__ import annotations

import numpy as np


class Grow:
    """A float column grown in place: appends go into spare capacity (doubled when full), so
    a run that gains a few rows per poll does not copy its whole history every poll (that
    churn is what made a long watch's memory creep). :meth:`view` is the filled part; a
    view handed out stays valid (later appends only write past its end)."""

    __slots__ = ("buf", "n")

    def __init__(self, capacity: int = 64) -> None:
        self.buf = np.empty(max(16, int(capacity)))
        self.n = 0

    def extend(self, values: np.ndarray) -> None:
        k = int(values.size)
        need = self.n + k
        if need > self.buf.size:
            new = np.empty(max(need, 2 * self.buf.size))
            new[: self.n] = self.buf[: self.n]
            self.buf = new
        self.buf[self.n : need] = values
        self.n = need

    def fill(self, value: float, k: int) -> None:
        self.extend(np.full(k, value))

    def view(self) -> np.ndarray:
        return self.buf[: self.n]

    @property
    def nbytes(self) -> int:
        return int(self.buf.nbytes)
