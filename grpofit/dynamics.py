"""Dynamics from optimizer hyperparameters: the closed form and the exact discrete answer.

The reduced-order model (shared/docs/theory.md, section 2) expands the linear recursion

    e_{n+1} - e_n = mu (e_n - e_{n-1}) - eta K e_{n-L}                                   (R)

(heavy-ball momentum ``mu``, learning rate ``eta``, curvature ``K``, lag ``L``) to second order in
the step ``delta`` with ``L = K_ref``:

    M     = (delta^2 / 2) (1 + mu + eta K K_ref^2)
    C     = delta (1 - mu - eta K K_ref)
    K_eff = eta K

This module reports that closed form (:func:`closed_form`, :func:`predict`) *and* the exact
answer for (R) under two lag models (:func:`exact_fixed_delay`, :func:`exact_sawtooth`):

- ``fixed``: a constant delay ``L = K_ref`` (the closed form's lag); the spectral radius of the
  companion matrix of (R). Instability starts near ``L ~ (pi/2)(1 - mu)/(eta K)``.
- ``sawtooth``: the gradient is frozen at the last refresh, so the lag cycles ``0 .. K_ref-1``
  (what a trainer that regenerates every ``K_ref`` steps does); the monodromy matrix over one
  refresh period. Instability starts near ``K_ref ~ 2 (1 - mu)/(eta K)``.

Both exact models accept an *unlagged* part of the curvature (``curvature_current``): the force
``-eta (K_lag e_{n-lag} + K_now e_n)`` with ``K_lag + K_now = K``. In GRPO the KL pull is computed
on the current policy while the reward signal comes from stale samples, so part of ``K`` does not
wait for the refresh. The default ``0`` is the paper's picture (all of ``K`` lagged).

Adam: EMA momentum ``m <- beta1 m + (1 - beta1) g`` is heavy-ball with ``mu = beta1`` and
``eta_eff = eta (1 - beta1)`` (:func:`heavy_ball_from_adam`); preconditioning is not modelled.

Only numpy is imported at module level; matplotlib is imported by :func:`plot_what_if`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from grpofit.errors import UsageError

__all__ = [
    "ClosedForm",
    "ExactStability",
    "Prediction",
    "RunPrediction",
    "WhatIf",
    "closed_form",
    "predict",
    "exact_fixed_delay",
    "exact_sawtooth",
    "critical_refresh_interval",
    "measure_curvature",
    "heavy_ball_from_adam",
    "from_run",
    "what_if",
    "oscillator_curve",
    "linear_recursion",
    "plot_what_if",
    "stationary_variance",
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
#: |zeta - 1| below this is called "critical"
CRITICAL_TOL = 1e-6

PAPER_LAG = "closed form: second-order expansion of (R) with a fixed lag L = refresh_interval"


def _f(x: Any) -> float | None:
    """JSON-safe float: NaN/inf -> None."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _check(lr: float, momentum: float, refresh_interval: float, curvature: float | None = None) -> None:
    if not (lr > 0 and math.isfinite(lr)):
        raise UsageError(f"learning rate must be positive, got {lr}", fix="pass --lr ETA with ETA > 0")
    if not (0 <= momentum < 1):
        raise UsageError(f"momentum must be in [0, 1), got {momentum}", fix="pass --momentum MU with 0 <= MU < 1")
    if not (refresh_interval >= 1 and math.isfinite(refresh_interval)):
        raise UsageError(
            f"refresh interval must be >= 1, got {refresh_interval}",
            fix="pass --refresh-interval 1 for on-policy training (refresh every step)",
        )
    if curvature is not None and not (curvature > 0 and math.isfinite(curvature)):
        raise UsageError(
            f"curvature must be positive, got {curvature}",
            fix="pass --curvature K > 0, or --from-run RUN to measure it",
        )


# --------------------------------------------------------------------------- helpers


def heavy_ball_from_adam(lr: float, beta1: float) -> tuple[float, float]:
    """Map Adam-style EMA momentum to heavy ball: returns ``(eta_eff, mu)``.

    ``m <- beta1 m + (1 - beta1) g; theta <- theta + eta m`` is ``v <- mu v + g;
    theta <- theta + eta_eff v`` with ``mu = beta1`` and ``eta_eff = eta (1 - beta1)``.
    Adam's per-coordinate preconditioning (the second moment) is outside this picture: fold it
    into the curvature ``K`` you measure.
    """
    if not 0 <= beta1 < 1:
        raise UsageError(f"beta1 must be in [0, 1), got {beta1}", fix="pass Adam's beta1, e.g. 0.9")
    return lr * (1.0 - beta1), beta1


def measure_curvature(timescale: float, lr: float, momentum: float, refresh_interval: float, delta: float = 1.0) -> float:
    """Curvature from a fitted timescale: ``K = (1 - mu) / (eta (T/delta + K_ref))``.

    Inverts ``T = C / K_eff = delta (1 - mu - eta K K_ref) / (eta K)`` of the closed form.
    """
    _check(lr, momentum, refresh_interval)
    if not (timescale > 0 and math.isfinite(timescale)):
        raise UsageError(
            f"the fitted timescale must be positive and finite, got {timescale}",
            fix="check the fit; K cannot be measured from a run without a relaxation timescale",
        )
    return (1.0 - momentum) / (lr * (timescale / delta + refresh_interval))


def stationary_variance(noise: float, group_size: int, damping: float, stiffness: float) -> float | None:
    """Stationary fluctuation of the oscillator: ``Var(e) = D / (2 G C K_eff)`` (independent of M).

    ``D`` is the noise intensity of one sample in ``e`` units per step, so ``D/G`` is the variance
    of the stochastic force per step (``D = eta^2 G Var(force)`` for a discrete trainer). For binary
    rewards the natural scale is ``D = p*(1 - p*)``: an order of magnitude, not a measurement (the
    bandit simulator records the measured ``D`` in its sidecar). ``None`` when ``C <= 0``.
    """
    if group_size <= 0 or damping <= 0 or stiffness <= 0:
        return None
    return noise / (2.0 * group_size * damping * stiffness)


# --------------------------------------------------------------------------- closed form


@dataclass(frozen=True)
class ClosedForm:
    """The paper's coefficients (second-order expansion, lag ``L = K_ref``)."""

    mass: float
    damping: float
    stiffness: float
    damping_ratio: float
    regime: str  #: overdamped / critical / underdamped, or "unstable" when C <= 0
    stable: bool
    timescale: float | None  #: C / K_eff (None when unstable)
    inertia: float | None  #: M / C (None when unstable)
    critical_refresh_interval: float  #: (1 - mu - eta K_now) / (eta K_lag): C = 0
    critical_lr: float  #: (1 - mu) / (K_lag K_ref + K_now): C = 0


def closed_form(
    lr: float,
    momentum: float,
    refresh_interval: float,
    curvature: float,
    delta: float = 1.0,
    curvature_current: float = 0.0,
) -> ClosedForm:
    """Closed-form mass, damping and stiffness.

    With ``K_lag = K - K_now`` (``K_now = curvature_current``, 0 in the paper):

        M     = (delta^2 / 2) (1 + mu + eta K_lag K_ref^2)
        C     = delta (1 - mu - eta K_lag K_ref)
        K_eff = eta K
        zeta  = C / (2 sqrt(M K_eff))

    Stable iff ``C > 0``, i.e. ``eta K K_ref < 1 - mu`` in the paper's case. Critical refresh
    interval ``K_ref* = (1 - mu)/(eta K)``, critical learning rate ``eta* = (1 - mu)/(K K_ref)``.
    The regime is ``"unstable"`` whenever ``C <= 0`` (then ``timescale`` and ``inertia`` are None
    and ``damping_ratio`` is negative or zero: anti-damping).
    """
    _check(lr, momentum, refresh_interval, curvature)
    k_now = float(curvature_current)
    if not 0 <= k_now <= curvature:
        raise UsageError(
            f"curvature_current must lie in [0, curvature], got {k_now}",
            fix="split K into a lagged and a current part that add up to K",
        )
    k_lag = curvature - k_now
    mu, eta, L = momentum, lr, refresh_interval
    mass = 0.5 * delta**2 * (1.0 + mu + eta * k_lag * L**2)
    damping = delta * (1.0 - mu - eta * k_lag * L)
    stiffness = eta * curvature
    zeta = damping / (2.0 * math.sqrt(mass * stiffness))
    stable = damping > 0
    if not stable:
        regime = "unstable"
    elif abs(zeta - 1.0) < CRITICAL_TOL:
        regime = "critical"
    else:
        regime = "overdamped" if zeta > 1 else "underdamped"
    krit = (1.0 - mu) / (eta * k_lag) if k_lag > 0 else math.inf
    lr_crit = (1.0 - mu) / (k_lag * L) if k_lag > 0 else math.inf
    return ClosedForm(
        mass=mass,
        damping=damping,
        stiffness=stiffness,
        damping_ratio=zeta,
        regime=regime,
        stable=stable,
        timescale=damping / stiffness if stable else None,
        inertia=mass / damping if stable else None,
        critical_refresh_interval=krit,
        critical_lr=lr_crit,
    )


# --------------------------------------------------------------------------- exact recursions


@dataclass(frozen=True)
class ExactStability:
    """The exact linear recursion (R) under one lag model."""

    lag_model: str  #: "fixed" (L = K_ref) or "sawtooth" (lag cycles 0 .. K_ref-1)
    refresh_interval: int
    spectral_radius: float | None  #: per-step growth factor of ||e_n|| (sawtooth: rho(P)^(1/K_ref))
    period_radius: float | None  #: sawtooth: rho of the monodromy matrix P over one period
    stable: bool | None  #: spectral radius < 1
    regime: str  #: monotone / oscillatory / unstable / unknown
    dominant_eigenvalue: complex | None  #: per step (fixed) or per period (sawtooth)
    oscillation_period: float | None  #: steps, from the phase of the dominant eigenvalue
    critical_refresh_interval: int | None  #: smallest unstable integer K_ref (None: none found)
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
    """monotone (dominant eigenvalue real positive) / oscillatory (complex or negative) / unstable."""
    if radius >= 1.0:
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
    lo = 0.5
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
    S = np.array(
        [[1.0 + momentum - lr * k_now, -momentum, -lr * k_lag], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    )
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
    """Smallest integer ``K_ref >= 1`` at which the exact recursion is unstable (rho >= 1).

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
    elif lag_model == "sawtooth":
        cap = max_interval or MAX_SAWTOOTH_INTERVAL
        radius = lambda L: _sawtooth_radius(lr, momentum, L, k_lag, curvature_current)[1]  # noqa: E731
    else:
        raise UsageError(f"unknown lag model {lag_model!r}", fix="use 'fixed' or 'sawtooth'")
    if radius(1) >= 1:
        return 1
    lo, hi = 1, 2
    while radius(hi) < 1:
        if hi >= cap:
            return None
        lo, hi = hi, min(hi * 2, cap)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if radius(mid) >= 1:
            hi = mid
        else:
            lo = mid
    if lag_model == "fixed":
        # the winding test is ill-conditioned when a root sits ~1e-7 from the unit circle:
        # settle the last step with the polished dominant root
        exact = lambda L: _fixed_radius(lr, momentum, L, k_lag, curvature_current)[1]  # noqa: E731
        while hi > 1 and exact(hi - 1) >= 1:
            hi -= 1
        while exact(hi) < 1 and hi < cap:
            hi += 1
    return hi


def exact_fixed_delay(
    lr: float, momentum: float, refresh_interval: float, curvature: float, curvature_current: float = 0.0,
    *, with_threshold: bool = True,
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
        return ExactStability("fixed", L, None, None, None, "unknown", None, None, crit,
                              note=f"delay {L} > {MAX_FIXED_DELAY}: not computed")
    ev, r = _fixed_radius(lr, momentum, L, k_lag, curvature_current)
    regime, period = _discrete_regime(ev, r)
    return ExactStability("fixed", L, r, None, r < 1, regime, ev, period, crit, note)


def exact_sawtooth(
    lr: float, momentum: float, refresh_interval: float, curvature: float, curvature_current: float = 0.0,
    *, with_threshold: bool = True,
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
    note = None if crit is not None or not with_threshold else f"no instability found up to K_ref = {MAX_SAWTOOTH_INTERVAL}"
    ev, rP = _sawtooth_radius(lr, momentum, kref, k_lag, curvature_current)
    r = rP ** (1.0 / kref) if math.isfinite(rP) else math.inf
    regime, period = _discrete_regime(ev, rP, per=kref)
    return ExactStability("sawtooth", kref, r, rP, rP < 1, regime, ev, period, crit, note)


def linear_recursion(
    lr: float, momentum: float, refresh_interval: int, curvature: float, steps: int, e0: float = 1.0,
    lag_model: str = "sawtooth", curvature_current: float = 0.0,
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


# --------------------------------------------------------------------------- prediction


@dataclass
class Prediction:
    """Closed form plus the exact discrete answer for one set of hyperparameters."""

    lr: float
    momentum: float
    refresh_interval: float
    curvature: float
    delta: float
    closed: ClosedForm
    fixed: ExactStability | None
    sawtooth: ExactStability | None
    curvature_current: float = 0.0
    group_size: int | None = None
    noise: float | None = None  #: D used for the fluctuation (None: not computable)
    noise_source: str | None = None
    plateau: float | None = None  #: infinite-G plateau p* when known (given or fitted)
    group: dict[str, Any] | None = None  #: finite-G quantities (see predict)
    notes: list[str] = field(default_factory=list)

    # contract fields
    @property
    def mass(self) -> float:
        return self.closed.mass

    @property
    def damping(self) -> float:
        return self.closed.damping

    @property
    def stiffness(self) -> float:
        return self.closed.stiffness

    @property
    def damping_ratio(self) -> float:
        return self.closed.damping_ratio

    @property
    def regime(self) -> str:
        return self.closed.regime

    @property
    def stable(self) -> bool:
        return self.closed.stable

    @property
    def timescale(self) -> float | None:
        return self.closed.timescale

    @property
    def inertia(self) -> float | None:
        return self.closed.inertia

    @property
    def fluctuation_variance(self) -> float | None:
        if self.group_size is None or self.noise is None:
            return None
        return stationary_variance(self.noise, self.group_size, self.damping, self.stiffness)

    def summary(self) -> dict[str, Any]:
        """Contract keys first (``grpofit.predict/1``), then additive sections."""
        c = self.closed
        out: dict[str, Any] = {
            "schema": "grpofit.predict/1",
            "mass": _f(c.mass),
            "damping": _f(c.damping),
            "stiffness": _f(c.stiffness),
            "damping_ratio": _f(c.damping_ratio),
            "regime": c.regime,
            "stable": bool(c.stable),
            "critical_refresh_interval": _f(c.critical_refresh_interval),
            "timescale": _f(c.timescale),
            "inertia": _f(c.inertia),
            "critical_lr": _f(c.critical_lr),
            "lag_model": PAPER_LAG,
            "inputs": {
                "lr": self.lr,
                "momentum": self.momentum,
                "refresh_interval": self.refresh_interval,
                "curvature": self.curvature,
                "curvature_current": self.curvature_current,
                "delta": self.delta,
                "group_size": self.group_size,
            },
        }
        out["exact_fixed_delay"] = self.fixed.summary() if self.fixed else None
        out["exact_sawtooth"] = self.sawtooth.summary() if self.sawtooth else None
        if self.group_size is not None:
            g = {
                "group_size": self.group_size,
                "noise_temperature": 1.0 / self.group_size if self.group_size > 0 else 0.0,
                "noise": _f(self.noise),
                "noise_source": self.noise_source,
                "fluctuation_variance": _f(self.fluctuation_variance),
                "fluctuation_sd": _f(math.sqrt(self.fluctuation_variance)) if self.fluctuation_variance else None,
            }
            g.update({k: (_f(v) if isinstance(v, float) else v) for k, v in (self.group or {}).items()})
            out["group"] = g
        out["notes"] = list(self.notes)
        return out

    def report(self) -> list[tuple[str, str]]:
        """Rows ``(quantity, value)`` for a table."""
        def fmt(v):
            if v is None:
                return "-"
            if isinstance(v, bool):
                return "yes" if v else "no"
            if isinstance(v, float):
                return f"{v:.4g}"
            return str(v)

        c = self.closed
        rows = [
            ("mass M", fmt(c.mass)), ("damping C", fmt(c.damping)), ("stiffness K_eff", fmt(c.stiffness)),
            ("damping ratio", fmt(c.damping_ratio)), ("regime (closed form)", c.regime),
            ("stable (closed form)", fmt(c.stable)), ("critical K_ref (closed form)", fmt(c.critical_refresh_interval)),
            ("critical lr (closed form)", fmt(c.critical_lr)),
            ("timescale C/K_eff", fmt(c.timescale)), ("inertia M/C", fmt(c.inertia)),
        ]
        for ex in (self.fixed, self.sawtooth):
            if ex is None:
                continue
            name = "fixed delay" if ex.lag_model == "fixed" else "sawtooth"
            rows += [
                (f"{name}: growth per step", fmt(ex.spectral_radius)),
                (f"{name}: stable / regime", f"{fmt(ex.stable)} / {ex.regime}"),
                (f"{name}: critical K_ref", fmt(ex.critical_refresh_interval)),
            ]
        if self.fluctuation_variance is not None:
            rows.append(("Var(e) = D/(2 G C K_eff)", fmt(self.fluctuation_variance)))
        if self.group and self.group.get("plateau_at_group_size") is not None:
            rows.append((f"plateau at G={self.group_size}", fmt(self.group["plateau_at_group_size"])))
        return rows


def predict(
    lr: float,
    momentum: float,
    refresh_interval: float,
    curvature: float,
    group_size: int | None = None,
    noise: float | None = None,
    delta: float = 1.0,
    *,
    plateau: float | None = None,
    curvature_current: float = 0.0,
    bandit: Mapping[str, Any] | None = None,
    exact: bool = True,
) -> Prediction:
    """Closed form + exact discrete stability for heavy-ball GRPO with a lagged policy.

    Closed form (lag ``L = K_ref``, see :func:`closed_form`); exact answers for the fixed delay
    and the sawtooth lag (see :func:`exact_fixed_delay`, :func:`exact_sawtooth`), only for an
    integer ``refresh_interval`` and ``delta = 1`` (step units).

    Group size ``G`` (when given): noise temperature ``1/G`` and ``Var(e) = D / (2 G C K_eff)``
    with ``D = noise``, or ``D = p*(1 - p*)`` when only ``plateau`` is given (binary rewards).
    With a ``plateau`` (the infinite-G ``p*``) it also reports the finite-G signal factor
    ``s_G(p*) = E_k[s_k^2/(s_k + eps)] / sqrt(p*(1-p*))`` (``k ~ Binomial(G, p*)``, ``s_k`` the
    population std of the group) and the zero-std fraction ``p*^G + (1-p*)^G``; with ``bandit``
    (keys ``beta``, ``arms``, ``correct``, optional ``advantage``) the corrected plateau of the
    softmax bandit at that ``G`` (:func:`grpofit.simulation.plateau_at_group_size`).
    """
    cf = closed_form(lr, momentum, refresh_interval, curvature, delta, curvature_current)
    notes: list[str] = []
    fixed = saw = None
    if exact:
        if abs(refresh_interval - round(refresh_interval)) > 1e-9:
            notes.append("exact recursions need an integer refresh interval; skipped")
        else:
            fixed = exact_fixed_delay(lr, momentum, refresh_interval, curvature, curvature_current)
            saw = exact_sawtooth(lr, momentum, refresh_interval, curvature, curvature_current)
            if delta != 1.0:
                notes.append("exact recursions are in optimizer steps (delta = 1)")
    if cf.stable and fixed is not None and saw is not None and not (fixed.stable and saw.stable):
        notes.append("the closed form says stable but an exact lag model does not: trust the exact answer")
    noise_source = None
    group = None
    if group_size is not None:
        if group_size < 0:
            raise UsageError(f"group size must be >= 0, got {group_size}", fix="pass --group-size G with G >= 1")
        if noise is not None:
            noise_source = "given"
        elif plateau is not None and 0 < plateau < 1:
            noise = plateau * (1 - plateau)
            noise_source = "p*(1-p*) (binary rewards; an order of magnitude)"
        else:
            noise_source = "unknown: pass noise D or a plateau"
        group = _group_section(group_size, plateau, bandit)
    return Prediction(
        lr=lr, momentum=momentum, refresh_interval=refresh_interval, curvature=curvature, delta=delta,
        closed=cf, fixed=fixed, sawtooth=saw, curvature_current=curvature_current, group_size=group_size,
        noise=noise, noise_source=noise_source, plateau=plateau, group=group, notes=notes,
    )


def _group_section(G: int, plateau: float | None, bandit: Mapping[str, Any] | None) -> dict[str, Any]:
    from grpofit import simulation as sim

    out: dict[str, Any] = {}
    if plateau is not None and 0 < plateau < 1 and G > 0:
        sig = sim.group_signal(plateau, G) / sim.group_signal(plateau, 0)
        out["advantage_signal_factor"] = float(sig)
        out["zero_std_fraction"] = float(plateau**G + (1 - plateau) ** G)
    if bandit is not None:
        kw = dict(beta=bandit["beta"], arms=bandit.get("arms", 8), correct=bandit.get("correct", 1),
                  advantage=bandit.get("advantage", "std"))
        out["plateau_at_group_size"] = float(sim.plateau_at_group_size(group_size=G, **kw))
        out["plateau_exact"] = float(sim.plateau_at_group_size(group_size=0, **kw))
    return out


# --------------------------------------------------------------------------- oscillator curve


def _series_cs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``C(x) = cosh(sqrt x)``, ``S(x) = sinh(sqrt x)/sqrt x`` by their series (|x| <= 1)."""
    c = np.ones_like(x)
    s = np.ones_like(x)
    tc = np.ones_like(x)
    ts = np.ones_like(x)
    for k in range(1, 12):
        tc = tc * x / ((2 * k - 1) * (2 * k))
        ts = ts * x / ((2 * k) * (2 * k + 1))
        c += tc
        s += ts
    return c, s


def oscillator_curve(t: np.ndarray, plateau: float, initial: float, mass: float, damping: float, stiffness: float) -> np.ndarray:
    """Deterministic oscillator from rest: ``p(t) = p* + e(t)``, ``e(0) = initial - p*``, ``e'(0) = 0``.

    ``M e'' + C e' + K_eff e = 0``; with ``a = C/(2M)``, ``b^2 = a^2 - K_eff/M``:
    ``e(t) = e0 exp(-a t) [cosh(b t) + (a/b) sinh(b t)]`` (cos/sin when ``b^2 < 0``), evaluated
    without overflow (exponentials combined) and by series when ``|b t| < 1``. ``C < 0`` gives
    the growing (unstable) solution.
    """
    t = np.asarray(t, dtype=float)
    e0 = initial - plateau
    a = damping / (2.0 * mass)
    b2 = a * a - stiffness / mass
    x = b2 * t * t
    out = np.empty_like(t)
    small = np.abs(x) <= 1.0
    with np.errstate(over="ignore", invalid="ignore"):
        if small.any():
            c, s = _series_cs(x[small])
            ts = t[small]
            out[small] = np.exp(-a * ts) * (c + a * ts * s)
        big = ~small
        if big.any():
            tb = t[big]
            if b2 > 0:
                b = math.sqrt(b2)
                out[big] = 0.5 * ((1 + a / b) * np.exp(-(a - b) * tb) + (1 - a / b) * np.exp(-(a + b) * tb))
            else:
                w = math.sqrt(-b2)
                out[big] = np.exp(-a * tb) * (np.cos(w * tb) + (a / w) * np.sin(w * tb))
    return plateau + e0 * out


# --------------------------------------------------------------------------- from a run


def _param(fit: Any, name: str) -> tuple[float | None, tuple[float, float] | None]:
    """``(value, ci95)`` of a parameter from a FitResult, ModelFit, dict of Estimates or numbers."""
    obj = fit
    if hasattr(obj, "models"):  # FitResult
        obj = obj.models["oscillator"]
    if hasattr(obj, "params"):  # ModelFit
        obj = obj.params
    if isinstance(obj, Mapping) and "params" in obj:  # summary() dict of a model
        obj = obj["params"]
    p = obj.get(name) if isinstance(obj, Mapping) else None
    if p is None:
        return None, None
    if isinstance(p, (int, float)):
        return float(p), None
    if isinstance(p, Mapping):
        val, ci = p.get("value"), p.get("ci95")
    else:
        val, ci = getattr(p, "value", None), getattr(p, "ci95", None)
    ci = tuple(float(v) for v in ci) if ci is not None and None not in tuple(ci) else None
    return (None if val is None else float(val)), ci


@dataclass
class RunPrediction:
    """The falsifiable check: inertia predicted from the fitted timescale vs the fitted inertia."""

    curvature: float
    curvature_ci95: tuple[float, float] | None
    prediction: Prediction
    fitted_timescale: float
    fitted_inertia: float | None
    fitted_inertia_ci95: tuple[float, float] | None
    predicted_inertia: float | None
    predicted_inertia_range: tuple[float, float] | None  #: from the timescale's ci95
    agrees: bool | None  #: predicted inertia inside the fitted 95% interval (None: no interval)
    plateau: float | None
    initial: float | None

    def summary(self) -> dict[str, Any]:
        return {
            "curvature": _f(self.curvature),
            "curvature_ci95": None if self.curvature_ci95 is None else [_f(v) for v in self.curvature_ci95],
            "fitted_timescale": _f(self.fitted_timescale),
            "fitted_inertia": _f(self.fitted_inertia),
            "fitted_inertia_ci95": None if self.fitted_inertia_ci95 is None else [_f(v) for v in self.fitted_inertia_ci95],
            "predicted_inertia": _f(self.predicted_inertia),
            "predicted_inertia_range": None if self.predicted_inertia_range is None else [_f(v) for v in self.predicted_inertia_range],
            "agrees": self.agrees,
            "plateau": _f(self.plateau),
            "initial": _f(self.initial),
        }

    def report(self) -> list[tuple[str, str]]:
        s = self.summary()
        return [(k.replace("_", " "), "-" if v is None else str(v)) for k, v in s.items()]


def from_run(
    fit: Any, lr: float, momentum: float, refresh_interval: float, delta: float = 1.0,
    group_size: int | None = None, noise: float | None = None,
) -> RunPrediction:
    """Measure ``K`` from the fitted timescale, then predict the inertia and compare.

    ``fit``: a ``grpofit.fitting.FitResult`` (its oscillator), a ``ModelFit``, its summary dict,
    or a mapping ``{"timescale": x | Estimate | {"value", "ci95"}, "inertia": ..., ...}``.
    ``K = (1 - mu) / (eta (T/delta + K_ref))``; predicted inertia ``M/C`` with that ``K``. The
    timescale of the prediction equals ``T`` by construction; the inertia is the falsifiable part.
    """
    T, T_ci = _param(fit, "timescale")
    if T is None:
        raise UsageError("the fit has no oscillator timescale", fix="fit the run first (grpofit fit RUN)")
    K = measure_curvature(T, lr, momentum, refresh_interval, delta)
    plateau, _ = _param(fit, "plateau")
    initial, _ = _param(fit, "initial")
    pred = predict(lr, momentum, refresh_interval, K, group_size=group_size, noise=noise, delta=delta, plateau=plateau)
    inertia, inertia_ci = _param(fit, "inertia")
    K_ci = rng = None
    if T_ci is not None and T_ci[0] > 0:
        ks = sorted(measure_curvature(t, lr, momentum, refresh_interval, delta) for t in T_ci)
        K_ci = (ks[0], ks[1])
        vals = [closed_form(lr, momentum, refresh_interval, k, delta).inertia for k in ks]
        if None not in vals:
            rng = (min(vals), max(vals))
    agrees = None
    if inertia_ci is not None and pred.inertia is not None:
        agrees = bool(inertia_ci[0] <= pred.inertia <= inertia_ci[1])
    return RunPrediction(K, K_ci, pred, T, inertia, inertia_ci, pred.inertia, rng, agrees, plateau, initial)


@dataclass
class WhatIf:
    """Trajectories (arrays for plotting) under the run's and the new hyperparameters."""

    steps: np.ndarray  #: t = 0 .. n-1, steps from the first logged step
    baseline: np.ndarray  #: closed-form oscillator, original hyperparameters
    predicted: np.ndarray  #: closed-form oscillator, new hyperparameters
    predicted_discrete: np.ndarray  #: exact recursion (sawtooth lag) with the new hyperparameters
    base: Prediction
    new: Prediction
    plateau: float
    initial: float

    def summary(self) -> dict[str, Any]:
        return {
            "base": {k: self.base.summary()[k] for k in ("damping_ratio", "regime", "stable", "timescale", "inertia")},
            "new": {k: self.new.summary()[k] for k in ("damping_ratio", "regime", "stable", "timescale", "inertia")},
            "new_inputs": self.new.summary()["inputs"],
            "new_exact_sawtooth": self.new.sawtooth.summary() if self.new.sawtooth else None,
            "plateau": _f(self.plateau),
            "initial": _f(self.initial),
            "n_steps": int(len(self.steps)),
        }


def what_if(
    base: "RunPrediction | Prediction",
    *,
    lr: float | None = None,
    momentum: float | None = None,
    refresh_interval: float | None = None,
    steps: int | np.ndarray | None = None,
    plateau: float | None = None,
    initial: float | None = None,
) -> WhatIf:
    """Predicted trajectory under other hyperparameters: same ``K``, plateau and initial value.

    The oscillator curve (:func:`oscillator_curve`) with the new ``M, C, K_eff`` and, beside it,
    the exact sawtooth recursion (an integer refresh interval is rounded). ``steps``: an array of
    step offsets or a count (default: 6 baseline timescales, at least 50).
    """
    if isinstance(base, RunPrediction):
        plateau = base.plateau if plateau is None else plateau
        initial = base.initial if initial is None else initial
        base = base.prediction
    if plateau is None or initial is None:
        raise UsageError("what-if needs the plateau and the initial value", fix="predict from a fitted run")
    new = predict(
        base.lr if lr is None else lr,
        base.momentum if momentum is None else momentum,
        base.refresh_interval if refresh_interval is None else refresh_interval,
        base.curvature, group_size=base.group_size, noise=base.noise, delta=base.delta,
        curvature_current=base.curvature_current, plateau=base.plateau,
    )
    if steps is None:
        tau = base.timescale or 50.0
        steps = max(50, int(math.ceil(6 * (tau + (base.inertia or 0)))))
    t = np.arange(int(steps), dtype=float) if np.isscalar(steps) else np.asarray(steps, dtype=float)
    curve = lambda p: oscillator_curve(t, plateau, initial, p.mass, p.damping, p.stiffness)  # noqa: E731
    n = int(math.ceil(t.max())) + 1 if len(t) else 1
    kref = max(1, int(round(new.refresh_interval)))
    with np.errstate(over="ignore", invalid="ignore"):
        e = linear_recursion(new.lr, new.momentum, kref, new.curvature, n, e0=initial - plateau,
                             curvature_current=new.curvature_current)
    disc = plateau + np.interp(t, np.arange(n), e)
    return WhatIf(t, curve(base), curve(new), disc, base, new, plateau, initial)


def plot_what_if(result: WhatIf, ax: Any = None, observed: tuple[np.ndarray, np.ndarray] | None = None) -> Any:
    """Figure of the baseline and what-if trajectories (Agg backend; never shown)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 4))
    else:
        fig = ax.figure
    lo, hi = min(result.initial, result.plateau), max(result.initial, result.plateau)
    span = hi - lo or 1.0
    clip = lambda y: np.clip(y, lo - 2 * span, hi + 2 * span)  # noqa: E731
    if observed is not None:
        ax.plot(observed[0], observed[1], ".", ms=2, color="0.6", label="run")
    b, n = result.base, result.new
    ax.plot(result.steps, clip(result.baseline), color="C0",
            label=f"baseline: lr={b.lr:g} mu={b.momentum:g} Kref={b.refresh_interval:g} ({b.regime})")
    ax.plot(result.steps, clip(result.predicted), color="C3",
            label=f"what-if: lr={n.lr:g} mu={n.momentum:g} Kref={n.refresh_interval:g} ({n.regime})")
    ax.plot(result.steps, clip(result.predicted_discrete), color="C3", ls=":", label="what-if, exact sawtooth recursion")
    ax.axhline(result.plateau, color="0.5", lw=0.8, ls="--")
    ax.set_xlabel("steps from first logged step")
    ax.set_ylabel("reward")
    ax.legend(fontsize=7)
    return fig
