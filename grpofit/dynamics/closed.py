"""The closed form: second-order expansion of the lagged recursion (R) with ``L = K_ref``.

    M     = (delta^2 / 2) (1 + mu + eta K K_ref^2)
    C     = delta (1 - mu - eta K K_ref)
    K_eff = eta K

Also the quantities derived from it: the critical refresh interval and learning rate
(:class:`ClosedForm`), the curvature measured from a fitted timescale
(:func:`measure_curvature`), the stationary fluctuation (:func:`stationary_variance`) and the
Adam-to-heavy-ball mapping (:func:`heavy_ball_from_adam`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from grpofit.core.errors import UsageError
from grpofit.dynamics._common import _check

__all__ = [
    "ClosedForm",
    "closed_form",
    "heavy_ball_from_adam",
    "measure_curvature",
    "stationary_variance",
    "CRITICAL_TOL",
    "PAPER_LAG",
]

#: |zeta - 1| below this is called "critical"
CRITICAL_TOL = 1e-6

PAPER_LAG = "closed form: second-order expansion of (R) with a fixed lag L = refresh_interval"


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


def measure_curvature(
    timescale: float, lr: float, momentum: float, refresh_interval: float, delta: float = 1.0
) -> float:
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


@dataclass(frozen=True)
class ClosedForm:
    """The paper's coefficients (second-order expansion, lag ``L = K_ref``)."""

    mass: float
    damping: float
    stiffness: float
    damping_ratio: float
    regime: str  #: overdamped / critical / underdamped; "marginal" at C = 0 (to rounding), "unstable" when C < 0
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
    At ``C = 0`` (to rounding: ``|1 - mu - eta K_lag K_ref| <= 1e-9`` of its terms) the regime is
    ``"marginal"`` and not stable. The regime is ``"unstable"`` whenever ``C < 0`` (then ``timescale`` and ``inertia`` are None
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
    # C = delta (1 - mu - eta K_lag K_ref) is a difference of O(1) terms: a tie is zero only to rounding
    tie = abs(1.0 - mu - eta * k_lag * L) <= 1e-9 * max(1.0 - mu, eta * k_lag * L, 1e-300)
    stable = damping > 0 and not tie
    if tie:
        regime = "marginal"
    elif not stable:
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
