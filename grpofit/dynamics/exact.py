"""The exact answer for the lagged recursion (R) under two lag models.

    e_{n+1} - e_n = mu (e_n - e_{n-1}) - eta (K_lag e_{n-lag} + K_now e_n)                (R)

- ``fixed``: a constant delay ``L = K_ref``; the spectral radius of the companion matrix of (R)
  (:func:`exact_fixed_delay`). Instability starts near ``L ~ (pi/2)(1 - mu)/(eta K)``.
- ``sawtooth``: the gradient is frozen at the last refresh, so the lag cycles ``0 .. K_ref-1``;
  the monodromy matrix over one refresh period (:func:`exact_sawtooth`). Instability starts near
  ``K_ref ~ 2 (1 - mu)/(eta K)``.

:func:`critical_refresh_interval` finds the smallest unstable integer ``K_ref``;
:func:`linear_recursion` iterates (R) itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from grpofit.core.errors import UsageError
from grpofit.dynamics._common import _check, _f

__all__ = [
    "ExactStability",
    "exact_fixed_delay",
    "exact_sawtooth",
    "critical_refresh_interval",
    "linear_recursion",
    "MAX_FIXED_DELAY",
    "EIG_DELAY",
    "MAX_FIXED_THRESHOLD",
    "MAX_SAWTOOTH_INTERVAL",
]

#: largest fixed delay for which the exact spectral radius is computed
MAX_FIXED_DELAY = 20_000
#: fixed delays up to this use the companion matrix's eigenvalues (cost ~ L^3); longer ones
#: the argument principle (cost ~ L per circle)
EIG_DELAY = 150
#: largest fixed delay scanned for the threshold (argument-principle test, cost ~ L)
MAX_FIXED_THRESHOLD = 20_000
#: largest refresh interval scanned for the sawtooth threshold
MAX_SAWTOOTH_INTERVAL = 1_000_000
#: a per-step growth factor within this of one is *marginal* (an exact tie such as
#: ``eta K = 1 - mu`` at ``K_ref = 1``): neither stable nor growing. The same margin decides
#: ``stable`` and the critical refresh interval, so the two never contradict each other.
MARGIN = 1e-9


def _decays(per_step_radius: float) -> bool:
    """Stable: the per-step growth factor is below one by more than :data:`MARGIN`."""
    return per_step_radius < 1.0 - MARGIN


@dataclass(frozen=True)
class ExactStability:
    """The exact linear recursion (R) under one lag model."""

    lag_model: str  #: "fixed" (L = K_ref) or "sawtooth" (lag cycles 0 .. K_ref-1)
    refresh_interval: int
    spectral_radius: float | None  #: per-step growth factor of ||e_n|| (sawtooth: rho(P)^(1/K_ref))
    period_radius: float | None  #: sawtooth: rho of the monodromy matrix P over one period
    stable: bool | None  #: spectral radius < 1 - MARGIN
    regime: str  #: monotone / oscillatory / marginal (|rho - 1| <= MARGIN) / unstable / unknown
    dominant_eigenvalue: complex | None  #: per step (fixed) or per period (sawtooth)
    oscillation_period: float | None  #: steps, from the phase of the dominant eigenvalue
    critical_refresh_interval: int | None  #: smallest integer K_ref that does not decay (None: none found)
    note: str | None = None

    @property
    def decay_time(self) -> float | None:
        """``-1 / log(rho)`` steps (e-folding time of the slowest mode); None when unstable."""
        r = self.spectral_radius
        if r is None or r >= 1 or r <= 0:
            return None
        return -1.0 / math.log(r)

    def summary(self) -> dict[str, Any]:
        ev = self.dominant_eigenvalue
        return {
            "lag_model": self.lag_model,
            "assumes": _LAG_TEXT[self.lag_model],
            "spectral_radius": _f(self.spectral_radius),
            "period_radius": _f(self.period_radius),
            "stable": self.stable,
            "regime": self.regime,
            "dominant_eigenvalue": None if ev is None else [_f(ev.real), _f(ev.imag)],
            "oscillation_period": _f(self.oscillation_period),
            "decay_time": _f(self.decay_time),
            "critical_refresh_interval": self.critical_refresh_interval,
            "note": self.note,
        }


_LAG_TEXT = {
    "fixed": "exact recursion, constant delay L = refresh_interval",
    "sawtooth": "exact recursion, gradient frozen at the last refresh (lag cycles 0..refresh_interval-1)",
}


def _discrete_regime(ev: complex, radius: float, per: int = 1) -> tuple[str, float | None]:
    """monotone (dominant eigenvalue real positive) / oscillatory (complex or negative) /
    marginal (per-step growth within :data:`MARGIN` of one) / unstable."""
    step_radius = radius ** (1.0 / per) if math.isfinite(radius) and radius > 0 else radius
    if abs(step_radius - 1.0) <= MARGIN:
        regime = "marginal"
    elif radius >= 1.0:
        regime = "unstable"
    elif radius == 0 or (abs(ev.imag) <= 1e-12 * max(radius, 1e-300) and ev.real > 0):
        regime = "monotone"
    else:
        regime = "oscillatory"
    phase = abs(math.atan2(ev.imag, ev.real))
    period = (2.0 * math.pi * per / phase) if phase > 1e-12 else None
    return regime, period


def _dominant(eigs: np.ndarray) -> tuple[complex, float]:
    mods = np.abs(eigs)
    r = float(mods.max())
    # among (numerically) tied moduli prefer the real positive one: it is the same growth
    tied = np.flatnonzero(mods >= r * (1 - 1e-12))
    pick = max(tied, key=lambda i: (abs(eigs[i].imag) < 1e-12 * max(r, 1e-300), eigs[i].real))
    return complex(eigs[pick]), r


def _fixed_companion(a: float, mu: float, b: float, L: int) -> np.ndarray:
    """Companion matrix of ``e_{n+1} = a e_n - mu e_{n-1} - b e_{n-L}`` on (e_n, ..., e_{n-m})."""
    m = max(L, 1)
    A = np.zeros((m + 1, m + 1))
    A[0, 0] += a
    A[0, 1] += -mu
    A[0, L] += -b
    A[np.arange(1, m + 1), np.arange(0, m)] = 1.0
    return A


def _polish(z: complex, a: float, mu: float, b: float, L: int, iters: int = 30) -> complex:
    """Newton on ``Q(z) = z - a + mu/z + b z^{-L}`` (the fixed-delay polynomial over ``z^L``)."""
    for _ in range(iters):
        zl = z ** (-L)
        dq = 1.0 - mu / z**2 - L * b * zl / z
        if dq == 0 or not np.isfinite(dq):
            break
        step = (z - a + mu / z + b * zl) / dq
        z -= step
        if abs(step) < 1e-15 * abs(z):
            break
    return z


def _winding(a: float, mu: float, b: float, L: int, r: float = 1.0) -> tuple[int, np.ndarray, np.ndarray]:
    """Winding number of ``Q`` on ``|z| = r``; roots of the polynomial inside = ``L + winding``."""
    n = 64 * int(L) + 8192
    w = np.linspace(0.0, 2.0 * np.pi, n + 1)
    z = r * np.exp(1j * w)
    q = z - a + mu / z + b * z ** (-int(L)) if L > 0 else z - a + mu / z + b
    return int(round(np.angle(q[1:] / q[:-1]).sum() / (2.0 * np.pi))), w, q


def _fixed_radius(lr, momentum, L, k_lag, k_now) -> tuple[complex, float]:
    """Dominant root of ``z^{L+1} - a z^L + mu z^{L-1} + b`` (``a = 1 + mu - eta K_now``,
    ``b = eta K_lag``).

    ``L <= EIG_DELAY``: companion-matrix eigenvalues, the largest polished by Newton (the
    eigensolver alone is good to ~1e-7 in modulus, too coarse at a threshold). Longer delays:
    the argument principle on circles ``|z| = r`` (roots inside = ``L + winding``), bisection on
    ``r`` for the smallest circle holding all ``L+1`` roots, then Newton from the point of that
    circle where ``|Q|`` is smallest. O(L) per circle instead of O(L^3).
    """
    a, b, L = 1.0 + momentum - lr * k_now, lr * k_lag, int(L)
    if L <= EIG_DELAY:
        eigs = np.linalg.eigvals(_fixed_companion(a, momentum, b, L)).astype(complex)
        for i in np.argsort(-np.abs(eigs))[: min(6, len(eigs))]:
            if abs(eigs[i]) > 1e-8:
                z = _polish(complex(eigs[i]), a, momentum, b, L)
                if abs(z - eigs[i]) < 1e-4 * max(1.0, abs(eigs[i])):  # a local polish only
                    eigs[i] = z
        return _dominant(eigs)
    hi = 1.0 + abs(a) + momentum + b  # Cauchy bound: every root inside
    lo = max(0.5, 10.0 ** (-250.0 / L))  # z^(-L) must stay finite on the inner circle
    if _winding(a, momentum, b, L, lo)[0] == 1:  # everything inside r = 0.5: rare, use the eigensolver
        return _dominant(np.linalg.eigvals(_fixed_companion(a, momentum, b, L)))
    for _ in range(48):
        mid = 0.5 * (lo + hi)
        if _winding(a, momentum, b, L, mid)[0] == 1:
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-10:
            break
    _, w, q = _winding(a, momentum, b, L, hi)
    m = np.abs(q[:-1])
    cand = np.flatnonzero((m <= np.roll(m, 1)) & (m <= np.roll(m, -1)))  # local minima of |Q|
    z = hi * np.exp(1j * w[cand])
    with np.errstate(all="ignore"):
        for _ in range(40):  # vectorised Newton from every local minimum
            zl = z ** (-L)
            step = (z - a + momentum / z + b * zl) / (1.0 - momentum / z**2 - L * b * zl / z)
            z = z - np.where(np.isfinite(step), step, 0)
        res = np.abs(z - a + momentum / z + b * z ** (-L))
    ok = np.isfinite(res) & (res < 1e-9)
    best = complex(z[ok][np.argmax(np.abs(z[ok]))]) if ok.any() else complex(hi)
    # the conjugate root has the same modulus; prefer the real one if it is real
    if abs(best.imag) < 1e-12:
        best = complex(best.real, 0.0)
    return best, abs(best)


def _fixed_stable(lr, momentum, L, k_lag, k_now) -> bool:
    """Argument principle on ``|z| = 1``: all ``L+1`` roots inside iff the winding number of
    ``Q(z) = z - (1 + mu - eta K_now) + mu/z + eta K_lag z^{-L}`` is 1. O(L); ill-conditioned
    only when a root sits within ~1e-7 of the circle (thresholds are settled with
    :func:`_fixed_radius`)."""
    return _winding(1.0 + momentum - lr * k_now, momentum, lr * k_lag, int(L))[0] == 1


def _sawtooth_monodromy(lr, momentum, kref, k_lag, k_now) -> np.ndarray:
    """Monodromy ``P = S^K_ref R`` on the state ``(e_n, e_{n-1}, e_refresh)``.

    ``S`` is one step ``e_{n+1} = (1 + mu - eta K_now) e_n - mu e_{n-1} - eta K_lag e_refresh``;
    ``R`` is the refresh ``e_refresh <- e_n`` at the start of each period.
    """
    S = np.array([[1.0 + momentum - lr * k_now, -momentum, -lr * k_lag], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    R = np.array([[1.0, 0, 0], [0, 1.0, 0], [1.0, 0, 0]])
    return np.linalg.matrix_power(S, int(kref)) @ R


def _sawtooth_radius(lr, momentum, kref, k_lag, k_now) -> tuple[complex, float]:
    P = _sawtooth_monodromy(lr, momentum, kref, k_lag, k_now)
    if not np.all(np.isfinite(P)):
        return complex(math.inf), math.inf
    return _dominant(np.linalg.eigvals(P))


def _as_int_interval(refresh_interval: float) -> int:
    k = int(round(refresh_interval))
    if abs(k - refresh_interval) > 1e-9 or k < 1:
        raise UsageError(
            f"the exact recursion needs an integer refresh interval >= 1, got {refresh_interval}",
            fix="pass a whole number of steps to --refresh-interval",
        )
    return k


def critical_refresh_interval(
    lr: float,
    momentum: float,
    curvature: float,
    lag_model: str = "sawtooth",
    curvature_current: float = 0.0,
    max_interval: int | None = None,
) -> int | None:
    """Smallest integer ``K_ref >= 1`` at which the exact recursion does not decay
    (per-step growth ``>= 1 - MARGIN``: unstable, or marginal at an exact tie).

    Exponential search then bisection, which assumes stability is lost once and for all as
    ``K_ref`` grows (true for both lag models in the tested range; the bisection result is
    checked against its neighbour). ``None`` when the recursion is stable up to ``max_interval``
    (default :data:`MAX_FIXED_DELAY` for the fixed delay, :data:`MAX_SAWTOOTH_INTERVAL` for
    the sawtooth), e.g. when the unlagged curvature outweighs the lagged one.
    """
    k_lag = curvature - curvature_current
    if lag_model == "fixed":
        cap = max_interval or MAX_FIXED_THRESHOLD
        radius = lambda L: 0.0 if _fixed_stable(lr, momentum, L, k_lag, curvature_current) else 1.0  # noqa: E731
        grows = lambda L: radius(L) >= 1  # noqa: E731
    elif lag_model == "sawtooth":
        cap = max_interval or MAX_SAWTOOTH_INTERVAL
        radius = lambda L: _sawtooth_radius(lr, momentum, L, k_lag, curvature_current)[1]  # noqa: E731
        grows = lambda L: not _decays(radius(L) ** (1.0 / L))  # noqa: E731
    else:
        raise UsageError(f"unknown lag model {lag_model!r}", fix="use 'fixed' or 'sawtooth'")
    if lag_model == "fixed" and not _decays(_fixed_radius(lr, momentum, 1, k_lag, curvature_current)[1]):
        return 1
    if grows(1):
        return 1
    lo, hi = 1, 2
    while not grows(hi):
        if hi >= cap:
            return None
        lo, hi = hi, min(hi * 2, cap)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if grows(mid):
            hi = mid
        else:
            lo = mid
    if lag_model == "fixed":
        # the winding test is ill-conditioned when a root sits ~1e-7 from the unit circle:
        # settle the last step with the polished dominant root
        decays = lambda L: _decays(_fixed_radius(lr, momentum, L, k_lag, curvature_current)[1])  # noqa: E731
        while hi > 1 and not decays(hi - 1):
            hi -= 1
        while decays(hi) and hi < cap:
            hi += 1
    return hi


def exact_fixed_delay(
    lr: float,
    momentum: float,
    refresh_interval: float,
    curvature: float,
    curvature_current: float = 0.0,
    *,
    with_threshold: bool = True,
) -> ExactStability:
    """Exact (R) with a constant delay ``L = K_ref``: eigenvalues of its companion matrix.

    Characteristic polynomial ``z^{L+1} - (1 + mu - eta K_now) z^L + mu z^{L-1} + eta K_lag = 0``.
    Growth per step = spectral radius; stable iff < 1; the regime is ``monotone`` when the
    dominant eigenvalue is real and positive, ``oscillatory`` when it is complex or negative.
    Delays up to :data:`EIG_DELAY` use the eigensolver, longer ones the argument principle;
    skipped (None, with a note) for ``L > MAX_FIXED_DELAY``.
    """
    _check(lr, momentum, refresh_interval, curvature)
    L = _as_int_interval(refresh_interval)
    k_lag = curvature - curvature_current
    crit = critical_refresh_interval(lr, momentum, curvature, "fixed", curvature_current) if with_threshold else None
    note = None
    if crit is None and with_threshold:
        note = f"no instability found up to L = {MAX_FIXED_THRESHOLD}"
    if L > MAX_FIXED_DELAY:
        return ExactStability(
            "fixed",
            L,
            None,
            None,
            None,
            "unknown",
            None,
            None,
            crit,
            note=f"delay {L} > {MAX_FIXED_DELAY}: not computed",
        )
    ev, r = _fixed_radius(lr, momentum, L, k_lag, curvature_current)
    regime, period = _discrete_regime(ev, r)
    return ExactStability("fixed", L, r, None, _decays(r), regime, ev, period, crit, note)


def exact_sawtooth(
    lr: float,
    momentum: float,
    refresh_interval: float,
    curvature: float,
    curvature_current: float = 0.0,
    *,
    with_threshold: bool = True,
) -> ExactStability:
    """Exact (R) with the gradient frozen at the last refresh: the monodromy over one period.

    ``P = S^K_ref R`` (see :func:`_sawtooth_monodromy`); per-step growth ``rho(P)^(1/K_ref)``.
    A complex or negative dominant eigenvalue of ``P`` means oscillation across periods
    (a negative one: period ``2 K_ref``).
    """
    _check(lr, momentum, refresh_interval, curvature)
    kref = _as_int_interval(refresh_interval)
    k_lag = curvature - curvature_current
    crit = critical_refresh_interval(lr, momentum, curvature, "sawtooth", curvature_current) if with_threshold else None
    note = (
        None
        if crit is not None or not with_threshold
        else f"no instability found up to K_ref = {MAX_SAWTOOTH_INTERVAL}"
    )
    ev, rP = _sawtooth_radius(lr, momentum, kref, k_lag, curvature_current)
    r = rP ** (1.0 / kref) if math.isfinite(rP) else math.inf
    regime, period = _discrete_regime(ev, rP, per=kref)
    return ExactStability("sawtooth", kref, r, rP, _decays(r), regime, ev, period, crit, note)


def linear_recursion(
    lr: float,
    momentum: float,
    refresh_interval: int,
    curvature: float,
    steps: int,
    e0: float = 1.0,
    lag_model: str = "sawtooth",
    curvature_current: float = 0.0,
) -> np.ndarray:
    """Iterate (R) from rest (``e_0 = e0``, empty momentum buffer, ``e_n = e0`` for n < 0).

    ``lag_model`` "sawtooth": lag ``n mod K_ref``; "fixed": lag ``K_ref``. Returns ``e_0..e_{steps-1}``.
    """
    kref = int(refresh_interval)
    k_lag = curvature - curvature_current
    e = np.empty(steps)
    e[0] = e0
    prev = e0
    for n in range(steps - 1):
        if lag_model == "sawtooth":
            lagged = e[n - n % kref]
        else:
            lagged = e[n - kref] if n - kref >= 0 else e0
        nxt = e[n] + momentum * (e[n] - prev) - lr * (k_lag * lagged + curvature_current * e[n])
        prev = e[n]
        e[n + 1] = nxt
    return e
