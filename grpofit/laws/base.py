"""What every law module shares: the :class:`CurveModel` a law is (its curve for ``fit``, its
:class:`StateSpaceForm` for ``forecast``), the levels every law has, bounds and the pieces of the
data-driven guesses.

A law is one module under :mod:`grpofit.laws` defining one :class:`CurveModel` and one row of
:data:`grpofit.laws.registry.LAWS`. Time ``t`` is in optimizer steps from the first logged step of
the run (``t = step - step[0]``, steps used as logged: every 5, every 10, resumed at 101 ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

__all__ = [
    "CurveModel",
    "StateSpaceForm",
    "LEVELS",
    "LEVEL_MARGIN",
    "TIME_MARGIN",
    "level_bounds",
    "time_bounds",
    "median",
    "smooth",
    "level_ends",
    "crossing",
    "run_span",
    "huge_ok",
    "exp_neg",
]


#: extreme but legitimate inputs (values or steps near 1e300, timescales near 1e-300) may
#: overflow to inf or give NaN in intermediate products: the fitter treats non-finite curves
#: as failed evaluations, so the model functions do not warn about them
def huge_ok():
    return np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore")


#: exponents are floored here before ``exp``: ``exp(-700) ~ 1e-304`` is still a normal double,
#: while results that underflow take libm's slow path (~4x the time of a normal ``exp``); the
#: curves change by less than ``1e-304``
EXP_FLOOR = -700.0


def exp_neg(e: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``exp(max(e, -700))`` computed in place in ``e`` (or into ``out``)."""
    np.maximum(e, EXP_FLOOR, out=e)
    return np.exp(e, out=e if out is None else out)


# ---------------------------------------------------------------------------------------------
# data-driven guesses


def median(a, overwrite: bool = False) -> float:
    """``np.median`` of a 1-D array of finite values, through ``np.partition`` (several times
    cheaper for the small arrays of a fit; constant arrays, e.g. a fixed logging interval,
    return at once). NaN for an empty array. ``overwrite``: ``a`` is scratch and may be
    reordered in place (no copy of a long one)."""
    a = np.asarray(a, dtype=float).ravel()
    n = a.size
    if n == 0:
        return float("nan")
    # ufunc reductions and the in-place partition: the ndarray/np.* wrappers add Python calls
    lo = np.minimum.reduce(a)
    if lo == np.maximum.reduce(a):
        return float(lo)
    k = n // 2
    p = a if overwrite else a.copy()
    if n % 2:
        p.partition(k)
        return float(p[k])
    p.partition((k - 1, k))
    return 0.5 * float(p[k - 1]) + 0.5 * float(p[k])  # no overflow near the double limit


#: points per block of :func:`_smooth`'s index arithmetic (a long run holds no point-long index arrays)
SMOOTH_BLOCK = 1 << 18


def smooth(y: np.ndarray) -> np.ndarray:
    """Centered running mean over ``max(1, n // 25)`` points on each side (edges shrink)."""
    n = y.size
    h = max(1, n // 25)
    c = np.empty(n + 1)
    c[0] = 0.0
    np.cumsum(y, out=c[1:])
    out = np.empty(n)
    for a in range(0, n, SMOOTH_BLOCK):
        i = np.arange(a, min(n, a + SMOOTH_BLOCK))
        lo = np.maximum(i - h, 0)
        hi = np.minimum(i + h + 1, n)
        out[a : a + i.size] = (c[hi] - c[lo]) / (hi - lo)
    return out


def level_ends(y: np.ndarray) -> tuple[float, float]:
    """``(head, tail)``: median of the first ``max(3, n/30)`` points, mean of the last 20%."""
    n = y.size
    k_head = min(n, max(3, n // 30))
    k_tail = min(n, max(3, n // 5))
    return median(y[:k_head]), float(np.mean(y[-k_tail:]))


def crossing(t: np.ndarray, ys: np.ndarray, level: float, rising: bool) -> float | None:
    """First time the smoothed series reaches ``level`` (linear interpolation)."""
    hit = ys >= level if rising else ys <= level
    i = int(np.argmax(hit)) if hit.size else 0  # the first hit (no point-long index array)
    if not hit.size or not hit[i]:
        return None
    if i == 0:
        return float(t[0])
    y0, y1 = ys[i - 1], ys[i]
    frac = 0.0 if y1 == y0 else (level - y0) / (y1 - y0)
    return float(t[i - 1] + frac * (t[i] - t[i - 1]))


def run_span(t: np.ndarray) -> float:
    return float(t[-1] - t[0]) if t.size > 1 else 1.0


# ---------------------------------------------------------------------------------------------
# bounds

#: the plateau and initial value stay within this many data ranges of the observed range
LEVEL_MARGIN = 1.0
#: timescale and inertia stay below this many run spans
TIME_MARGIN = 10.0


def level_bounds(y: np.ndarray) -> tuple[float, float]:
    """``[min - m, max + m]`` with ``m = LEVEL_MARGIN * range`` (a tiny floor if constant)."""
    lo, hi = float(np.min(y)), float(np.max(y))
    m = LEVEL_MARGIN * (hi - lo)
    if m <= 0:
        m = max(1e-9, 1e-6 * abs(hi))
    return lo - m, hi + m


def time_bounds(t: np.ndarray) -> tuple[float, float]:
    """``(min, max)`` for the timescale: a tenth of the median spacing .. ``TIME_MARGIN`` spans."""
    span = max(run_span(t), 1e-12)
    dt = median(np.diff(t)) if t.size > 1 else 1.0
    return max(0.1 * dt, 1e-9 * span), TIME_MARGIN * span


# ---------------------------------------------------------------------------------------------
# the law


#: the two levels every law has: ``plateau`` (p*, the contract's plateau) and ``initial`` (p0);
#: they are rescaled with the values, never with the steps, and stay identifiable without a rise
LEVELS = ("plateau", "initial")


@dataclass(frozen=True)
class StateSpaceForm:
    """A law as a linear Gaussian state-space model: the form ``forecast`` fits and draws from.

    ``y_t = X(t) @ beta + e_t + eps_t``: a mean linear in the ``levels`` ``beta`` (the plateau
    first, then the amplitudes of the relaxation) plus a forced process ``e`` started at rest,
    whose impulse response is ``h(u) = sum_i r_i exp(l_i u)``. Plain numbers and functions of the
    law's ``times`` (its nonlinear parameters, searched in log space) that
    :mod:`grpofit.forecasting.statespace` and :mod:`grpofit.forecasting.likelihood` look up by
    ``name`` (the key of the law in the forecast's ``laws``):

    - ``columns(t, times)``: the mean's columns after the constant one (one per amplitude);
    - ``modes(times)``: ``(l, r)``, the eigenvalues and impulse-response weights of the forcing
      (a complex-conjugate pair for an underdamped law);
    - ``forcing``: the indices of the times the forcing depends on; the first one is the ``T`` of
      its strength ``q^2 = 2 sd^2 / T`` (``sd`` the forcing's stationary standard deviation);
    - ``from_log(theta)``: the times from their log coordinates (the first ``len(times)`` entries
      of the search vector; the next one is ``log sd``);
    - ``log_bounds(t_lo, t_hi, dt)``: the bounds of those coordinates, given the log bounds of a
      timescale and the logging interval;
    - ``starts(t_guess, sd0, prior)``: starting points of the search (lists of the whole search
      vector), from a timescale guess, two forcing sds to try and ``prior``, the search vector
      ``(log T, log sd)`` the exponential's form ended at (``None`` when it failed);
    - ``slowest(times)``: the slowest decay time (the draws report it); ``slow_index``: the
      coordinate of the search vector that sets it;
    - ``kalman(times, sd)``: ``(A, B, H)`` of the forced part as a continuous-time system, for
      the Kalman-filter reference (:mod:`grpofit.forecasting.kalman`); ``None`` if not given.
    """

    name: str
    levels: tuple[str, ...]
    times: tuple[str, ...]
    title: str
    columns: Callable[[np.ndarray, tuple], tuple]
    modes: Callable[[tuple], tuple]
    from_log: Callable[[np.ndarray], tuple]
    log_bounds: Callable[[float, float, float], tuple]
    starts: Callable[[float, list, Any], list]
    forcing: tuple[int, ...] = (0,)
    slowest: Callable[[tuple], float] = max
    slow_index: int = 0
    kalman: Callable | None = None


@dataclass(frozen=True)
class CurveModel:
    """One law, the one object ``fit``, ``forecast``, ``compare`` and the plots take it from: its
    function, Jacobian, parameter names, bounds, guess, derived quantities and its state-space form.

    Every law has the two :data:`LEVELS` among its parameters. ``time_params`` are the
    parameters in steps (rescaled with the steps; their intervals widened to the logging
    interval); ``derived_names`` are the keys ``derived`` returns (reported after the
    parameters); ``reports_regime`` makes the fit report a regime (the oscillator's damping
    ratio); ``statespace`` is the law's :class:`StateSpaceForm` (``None``: ``forecast`` does not
    mix it); ``fitted`` False keeps it out of ``fit`` (a law only the forecaster mixes);
    ``statespace_intervals`` takes the fit's plateau and timescale intervals from the state-space
    likelihood (:mod:`grpofit.fitting.statespace_ci`, for laws whose times are the
    ``timescale`` and at most an ``inertia``; else the least-squares HAC intervals only);
    ``titles`` are the table rows of its parameters and ``style`` its line in the plots
    (matplotlib keywords).
    """

    name: str
    func: Callable[..., np.ndarray]
    jacobian: Callable[..., np.ndarray]
    param_names: tuple[str, ...]
    bounds: Callable[[np.ndarray, np.ndarray], dict[str, tuple[float, float]]]
    guess: Callable[[np.ndarray, np.ndarray], dict[str, float]]
    derived: Callable[[dict[str, float]], dict[str, float]] = field(default=lambda p: {})
    formula: str = ""
    #: ``jacobian`` without its own ``np.errstate``, for the fitter (see the ``raw_`` note)
    raw_jacobian: Callable[..., np.ndarray] | None = None
    time_params: tuple[str, ...] = ("timescale",)
    derived_names: tuple[str, ...] = ()
    reports_regime: bool = False
    statespace: StateSpaceForm | None = None
    fitted: bool = True
    statespace_intervals: bool = False
    titles: dict[str, str] = field(default_factory=dict)
    style: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        missing = [k for k in LEVELS if k not in self.param_names]
        if missing:
            raise ValueError(f"law {self.name!r} lacks the level parameter(s) {missing}: every law has {LEVELS}")

    def __call__(self, t, params: dict[str, float]) -> np.ndarray:
        return self.func(t, *(params[k] for k in self.param_names))
