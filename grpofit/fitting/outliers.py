"""Single bad values: a logged value far outside the run's own range is named and excluded.

A corrupted export cell (``40`` in a reward that lives in [0, 1]), a ``-1e9`` sentinel or a
counter written into the reward column must not move a fit's plateau to ``-3e6`` or pass a
collapsed run through the gate. The test is deliberately blunt, so that it never takes a
collapse, a spike or a step of the run itself for a glitch:

- the run's own range is ``[lo, hi]``, its order statistics with the few most extreme values on
  each side left out (``trim`` of them: the outliers themselves never widen it);
- its span is the largest of ``hi - lo``, the level's own size ``max(|lo|, |hi|)`` and ten times
  the point-to-point noise (the differences' MAD), so a flat run is not judged by a zero span;
- a value more than ``FACTOR`` spans outside ``[lo, hi]`` is an outlier.

A collapse falls back into the range the run has visited (it starts near its floor); a spike of
a rule's column is never looked at (only the fitted reward column is tested, and a column passed
with ``--metric`` only when it is no KL, grad norm, clip fraction, entropy or loss:
:func:`rewardlike`). At most ``trim`` values
per side can be excluded: more are the run's own behaviour, and nothing is excluded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from grpofit.laws.models import median

__all__ = ["Outliers", "find_outliers", "FACTOR", "MIN_POINTS"]

#: how many spans outside the run's own range a value must lie to be excluded
FACTOR = 2.0
#: fewer finite points than this and nothing is tested (the range is not known)
MIN_POINTS = 12


@dataclass
class Outliers:
    """The points excluded from one column (indices into the finite values given)."""

    index: np.ndarray
    steps: np.ndarray
    values: np.ndarray
    lo: float
    hi: float

    @property
    def count(self) -> int:
        return int(self.index.size)

    def warning(self, column: str) -> str:
        shown = ", ".join(f"{_num(v)} at step {_num(s)}" for s, v in zip(self.steps[:3], self.values[:3]))
        more = f" and {self.count - 3} more" if self.count > 3 else ""
        return (
            f"{self.count} outlier value(s) of {column!r} excluded ({shown}{more}): far outside the run's "
            f"own range [{_num(self.lo)}, {_num(self.hi)}]; check the log for corrupted values"
        )

    def summary(self) -> dict:
        return {
            "count": self.count,
            "steps": [float(s) for s in self.steps[:20]],
            "values": [float(v) for v in self.values[:20]],
            "range": [self.lo, self.hi],
        }


def _num(x: float) -> str:
    return f"{float(x):.6g}"


def find_outliers(steps: np.ndarray, values: np.ndarray) -> Outliers | None:
    """The isolated values of ``values`` (finite) far outside the rest's range; None when none.
    ``O(n log n)`` at worst: one partition for the order statistics, one for the noise."""
    values = np.asarray(values, dtype=float)
    n = values.size
    if n < MIN_POINTS:
        return None
    trim = max(2, n // 200)
    part = np.partition(values, (trim, n - 1 - trim))
    lo, hi = float(part[trim]), float(part[n - 1 - trim])
    d = np.abs(np.diff(values))
    # the median of |diff| alone, not the noise floor (ceiling.diff_sd): on lattice-valued rewards
    # that one takes var(diff) / 2, which the very value under test would inflate
    noise = median(d, overwrite=True) * 1.4826 / math.sqrt(2.0)  # d is finite: np.median's value
    span = max(hi - lo, abs(lo), abs(hi), 10.0 * noise)
    if not np.isfinite(span) or span <= 0:
        return None
    low, high = values < lo - FACTOR * span, values > hi + FACTOR * span
    if int(low.sum()) > trim or int(high.sum()) > trim:  # not isolated: the run's own behaviour
        return None
    index = np.flatnonzero(low | high)
    if index.size == 0:
        return None
    return Outliers(index, np.asarray(steps, float)[index], values[index], lo, hi)


def exclude(run, column: str) -> Outliers | None:
    """Test ``run``'s ``column`` once and set its outliers to NaN in the run itself (every later
    ``run.series(column)``, the fit, the rules, the plots and the forecast then see the same
    points); the warning goes to ``run.warnings``. Returns what was excluded (None: nothing)."""
    done = run.__dict__.setdefault("_outliers", {})
    if column in done:
        return done[column]
    done[column] = None
    values = run.metrics.get(column)
    if values is None or not rewardlike(column):
        return None
    keep = np.isfinite(values)
    found = find_outliers(run.steps[keep], values[keep])
    if found is not None:
        cleaned = np.array(values, dtype=float)  # a copy: the reader's arrays may be shared or read-only
        cleaned[np.flatnonzero(keep)[found.index]] = np.nan
        run.metrics[column] = cleaned
        run.warnings.append(found.warning(column))
        run.stats["outliers"] = run.stats.get("outliers", 0) + found.count
    done[column] = found
    return found


def rewardlike(column: str) -> bool:
    """Whether ``column`` is tested: a reward or score, not a metric whose spikes are the signal
    (KL, grad norm, clip fraction, entropy: their own roles) nor one that falls by design (a loss)."""
    from grpofit.core.roles import detect_roles
    from grpofit.fitting.fitcheck import metric_kind

    if metric_kind(column) == "decays":
        return False
    roles = detect_roles([column])
    return not any(col == column and role not in ("reward", "eval_reward") for role, col in roles.items())


def excluded(run, column: str) -> Outliers | None:
    """What :func:`exclude` took out of ``run``'s ``column`` (None: nothing, or not tested)."""
    return run.__dict__.get("_outliers", {}).get(column)
