"""The range a metric can take, and the link that keeps a forecast inside it (theory.md §8).

A reward that is a rate, an accuracy, a pass@k or a mean of 0/1 rewards lives in [0, 1]; a
configured reward has the range the config names; ``--bounds LO,HI`` says it outright. Where
bounds are known the forecaster works on the logit of the metric's position inside them,
``z = log((y - lo) / (hi - y))``: every law, forcing and drift acts on ``z``, and every draw
mapped back lies inside ``[lo, hi]`` by construction (no clipping afterwards; the engine takes a
draw at the link's limit, where observed values at a bound were held, as the bound itself). The logit
is also the softmax bandit's natural coordinate: the mean-field rise ``p' = c p (1 - p)`` of §8
is a straight line in ``z``, so the slow start of a sigmoid rise is no slow start there.

Where the bounds come from, in order (:func:`metric_bounds`): the option; the config's
``reward_range`` / ``reward_min`` + ``reward_max`` keys (at any prefix); the metric's name
(:data:`RATE_WORDS`); a known batch of binary rewards (the binomial observation noise); every
value seen in [0, 1] (taken as a rate: ``--bounds`` overrides). Otherwise the metric is unbounded
and the forecast works on the metric itself.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

__all__ = ["Bounds", "metric_bounds", "parse_bounds", "lattice", "edge", "edge_of", "hold_levels", "RATE_WORDS"]

#: words in a metric's name that make it a share in [0, 1]
RATE_WORDS = (
    "acc",
    "accuracy",
    "rate",
    "pass@",
    "pass_at",
    "passk",
    "success",
    "correct",
    "solved",
    "win_rate",
    "exact_match",
    "em",
    "frac",
    "fraction",
    "percent_correct",
)
#: observed values are kept this share of the range away from the bounds before the logit
#: (at least; a lattice of logged values or a batch size sets it when known)
MIN_EDGE = 1e-5
#: where the bounds of a metric come from the values alone
GUESSED_SOURCE = "every value seen lies in [0, 1] (taken as a rate; pass --bounds LO,HI to change)"
#: the largest batch :func:`lattice` infers from the logged values
MAX_LATTICE = 4096


@dataclass(frozen=True)
class Bounds:
    low: float | None
    high: float | None
    source: str | None
    #: taken from the values alone (every value seen lies in [0, 1]), not from the metric's
    #: name, the config, a batch of binary rewards or the option
    guessed: bool = False

    @property
    def two_sided(self) -> bool:
        return self.low is not None and self.high is not None

    def doc(self) -> dict:
        return {"low": self.low, "high": self.high, "source": self.source}

    def position(self, y) -> np.ndarray:
        return (np.asarray(y, dtype=float) - self.low) / (self.high - self.low)

    def to_link(self, y, edge: float = MIN_EDGE) -> np.ndarray:
        """The logit of the position of observed values, held ``edge`` (a share of the range)
        inside the bounds (an observation at a bound has no finite logit)."""
        p = np.clip(self.position(y), edge, 1.0 - edge)
        return np.log(p) - np.log1p(-p)

    def from_link(self, z) -> np.ndarray:
        """The metric from the link: inside ``(low, high)`` for every finite ``z``."""
        z = np.asarray(z, dtype=float)
        # the logistic from exp(-|z|) <= 1 alone (one exponential, nothing overflows):
        # 1 / (1 + e) for z >= 0, e / (1 + e) below
        e = np.exp(-np.abs(z))
        d = 1.0 + e
        p = np.where(z >= 0, 1.0, e) / d
        return self.low + (self.high - self.low) * p


UNBOUNDED = Bounds(None, None, None)


def parse_bounds(text: str | None) -> Bounds | None:
    """``"LO,HI"`` (the option) as :class:`Bounds`; raises ``UsageError`` on a bad value."""
    if text is None:
        return None
    from grpofit.core.errors import UsageError

    parts = [p.strip() for p in str(text).split(",")]
    try:
        lo, hi = (float(p) for p in parts)
    except ValueError:
        raise UsageError(
            f"--bounds {text!r} is not two numbers", fix="pass the metric's range, e.g. --bounds 0,1"
        ) from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise UsageError(f"--bounds {text!r}: need finite LO < HI", fix="pass the metric's range, e.g. --bounds 0,1")
    return Bounds(lo, hi, "--bounds")


def _config_range(config: Mapping[str, Any] | None):
    if not config:
        return None
    from grpofit.readers.config import as_number

    for key, value in config.items():
        if key.split(".")[-1] == "reward_range" and isinstance(value, (list, tuple)) and len(value) == 2:
            lo, hi = as_number(value[0]), as_number(value[1])
            if lo is not None and hi is not None and lo < hi:
                return Bounds(float(lo), float(hi), f"config: {key}")
    for key in config:
        if key.split(".")[-1] == "reward_max":
            other = key[: -len("reward_max")] + "reward_min"
            lo, hi = as_number(config.get(other, 0.0)), as_number(config[key])
            if lo is not None and hi is not None and lo < hi:
                return Bounds(float(lo), float(hi), f"config: {key}" + (f", {other}" if other in config else ""))
    return None


def _is_rate(metric: str | None) -> bool:
    if not metric:
        return False
    words = re.split(r"[^a-z0-9@]+", metric.lower())
    name = metric.lower()
    return any(w in words for w in RATE_WORDS) or any(w in name for w in ("pass@", "accuracy", "success_rate"))


def metric_bounds(
    metric: str | None,
    values,
    *,
    option: Bounds | None = None,
    config: Mapping[str, Any] | None = None,
    batch: int | None = None,
) -> Bounds:
    """The bounds of a metric (see the module docstring for the order); :data:`UNBOUNDED`
    when none applies. Values outside name-derived bounds void them (the name misled)."""
    if option is not None:
        return option
    hit = _config_range(config)
    if hit is not None:
        return hit
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    inside = bool(v.size and v.min() >= 0.0 and v.max() <= 1.0)
    if not inside:
        return UNBOUNDED
    if _is_rate(metric):
        return Bounds(0.0, 1.0, f"metric: {metric} is a rate")
    if batch:
        return Bounds(0.0, 1.0, f"binary rewards, batch {batch}")
    return Bounds(0.0, 1.0, GUESSED_SOURCE, guessed=True)


def lattice(bounds: Bounds, values: np.ndarray) -> int | None:
    """``n`` when every value's position inside the bounds is a whole number of ``1/n`` (the
    logged mean of ``n`` binary rewards), the smallest such ``n`` up to :data:`MAX_LATTICE`;
    else ``None``."""
    p = np.unique(bounds.position(values))
    gaps = np.diff(p)
    gaps = gaps[gaps > 1e-9]
    if gaps.size == 0:
        return None
    ns = np.arange(1, MAX_LATTICE + 1, dtype=float)
    for v in p[:20]:  # candidates from a few values (one at a time: few survive), then all of them
        x = v * ns
        ns = ns[np.abs(x - np.round(x)) < 1e-6]
        if not ns.size:
            return None
    for n in ns:
        if np.all(np.abs(p * n - np.round(p * n)) < 1e-6):
            return int(n)
    return None


def edge(bounds: Bounds, values: np.ndarray, batch: int | None) -> float:
    """How far inside the bounds (a share of the range) observed values are held for the logit:
    half a batch's resolution when the batch is known or the values lie on a lattice
    (:func:`lattice`), else :data:`MIN_EDGE`."""
    return edge_of(batch or lattice(bounds, values))


def edge_of(n: int | None) -> float:
    """:func:`edge` for a batch or lattice of ``n`` (``None``: neither)."""
    if n:
        return float(min(max(0.5 / n, MIN_EDGE), 0.02))
    return MIN_EDGE


#: the fitted parameters that are levels of the metric itself, held inside its bounds
LEVELS = ("plateau", "initial")


def hold_levels(result: Any, bounds: Bounds | None) -> None:
    """Hold every law's levels (:data:`LEVELS`: the plateau ``p*`` and the start ``p0``),
    their values and 95% interval ends, inside the metric's two-sided ``bounds``, saying so in
    the estimate's note: a rate's plateau cannot exceed 1, whatever the law's least squares
    reach on noisy points. Every surface states the fit's plateau from these estimates
    (``fit``, ``diagnose``, ``compare``, ``forecast``, ``watch``, the API and the plots).

    Bounds guessed from the values alone (:attr:`Bounds.guessed`) hold only the interval ends
    of a level whose value lies inside them: a law whose own value lies past 1 says the metric
    may not be a rate (a sum of reward functions still below 1), and is left as fitted."""
    if bounds is None or not bounds.two_sided:
        return
    lo, hi = bounds.low, bounds.high
    why = f"held inside the metric's bounds [{lo:g}, {hi:g}] (" + (
        "every value seen lies in [0, 1]: taken as a rate)" if bounds.guessed else f"{bounds.source})"
    )
    for law in (getattr(result, "models", None) or {}).values():
        for name in LEVELS:
            est = (getattr(law, "params", None) or {}).get(name)
            if est is None or (bounds.guessed and est.value is not None and not lo <= est.value <= hi):
                continue
            held = est.value is not None and not lo <= est.value <= hi
            if est.value is not None:
                est.value = min(max(est.value, lo), hi)
            if est.ci95 is not None:
                a, b = est.ci95
                held = held or (a is not None and a < lo) or (b is not None and b > hi)
                est.ci95 = (None if a is None else min(max(a, lo), hi), None if b is None else min(max(b, lo), hi))
            if held:
                est.note = f"{est.note}; {why}" if est.note else why
                if est.stderr is not None:  # the held interval is no longer value +- 1.96 stderr
                    est.stderr = None
                    est.note += "; no ± stderr: the interval is not value ± 1.96 stderr"
