"""The theory of GRPO on a softmax bandit: exact expected gradients, fixed points and ``K``.

The simulator (:mod:`grpofit.dynamics.simulation`) and the predictions (:mod:`grpofit.dynamics.coefficients`)
both build on this module; it imports neither (docs/theory.md §5; the model, the
update and the log columns are described in :mod:`grpofit.dynamics.simulation`).

"Exact" mean-field gradient (``group_size=0``)
----------------------------------------------
Group the samples by the number ``k ~ Binomial(G, p_old)`` of correct ones in a group. With
``s_k = sqrt(k (G-k)) / G`` the expected policy gradient is exactly

    E[g_pg] = phi_G(p_old) (u_C - u_W),        phi_G(p) = E_k[ s_k^2 / (d_k + eps) ]

where ``u_C`` (``u_W``) is ``pi_old`` restricted to the correct (wrong) arms and renormalised, and
``d_k`` the advantage's denominator (``s_k`` for "std"). For ``G -> infinity``
``phi -> sigma^2/(sigma + eps) ~ sigma = sqrt(p (1-p))``, which is ``sum_a pi_a A_a (e_a - pi)`` with
``A_a = (r_a - p)/sqrt(p (1-p))``. ``group_size=0`` uses this limit ("exact" = the expectation of the
GRPO gradient over infinitely large groups, with no sampling noise); :func:`mean_field_gradient`
with ``group_size=G`` gives the exact finite-``G`` expectation (no sampling noise either).

Why the plateau moves with ``G``: ``phi_G(p) < sigma(p)`` (Jensen: ``E sqrt(k(G-k)) <=
sqrt(G (G-1) p (1-p))``, and zero-variance groups give 0), so a small group weakens the reward
force against the unchanged KL pull, and the fixed point :func:`plateau_at_group_size` drops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from grpofit.core.errors import UsageError

__all__ = [
    "EPS",
    "ADVANTAGES",
    "FixedPoint",
    "group_signal",
    "mean_field_gradient",
    "surrogate",
    "fixed_point",
    "plateau_at_group_size",
]

EPS = 1e-4
ADVANTAGES = ("std", "sample_std", "none")

# --------------------------------------------------------------------------- finite-G maths


def _binom_pmf(G: int, p: float) -> np.ndarray:
    k = np.arange(G + 1)
    if p <= 0:
        return (k == 0).astype(float)
    if p >= 1:
        return (k == G).astype(float)
    lg = np.array([math.lgamma(G + 1) - math.lgamma(i + 1) - math.lgamma(G - i + 1) for i in k])
    return np.exp(lg + k * math.log(p) + (G - k) * math.log1p(-p))


def group_signal(p: float, group_size: int, advantage: str = "std", eps: float = EPS) -> float:
    """Strength of the expected GRPO reward signal: ``phi_G(p) = E_k[ s_k^2 / (d_k + eps) ]``.

    ``k ~ Binomial(G, p)`` correct samples in a group, ``s_k^2 = k (G-k) / G^2`` the population
    variance of its rewards, ``d_k`` the advantage denominator (``s_k``; ``s_k sqrt(G/(G-1))`` for
    ``"sample_std"``; ``1 - eps`` i.e. no division for ``"none"``). Per group, the correct samples
    carry total weight ``G phi`` and the wrong ones ``-G phi``. ``group_size=0``: the ``G -> inf``
    limit ``sigma^2 / (sigma + eps)`` with ``sigma = sqrt(p (1-p))`` (``sigma^2`` for "none").
    """
    if advantage not in ADVANTAGES:
        raise UsageError(f"unknown advantage {advantage!r}", fix=f"use one of {', '.join(ADVANTAGES)}")
    p = float(p)
    if group_size == 0:
        var = p * (1.0 - p)
        if advantage == "none":
            return var
        return var / (math.sqrt(var) + eps)
    G = int(group_size)
    k = np.arange(G + 1)
    var = k * (G - k) / G**2
    if advantage == "none":
        w = var
    else:
        d = np.sqrt(var) * (math.sqrt(G / (G - 1)) if advantage == "sample_std" and G > 1 else 1.0)
        w = var / (d + eps)
    return float(_binom_pmf(G, p) @ w)


def _log_softmax(theta: np.ndarray) -> np.ndarray:
    m = theta.max()
    z = theta - m
    return z - math.log(np.exp(z).sum())


def _kl_grad(logpi: np.ndarray, log_ref: np.ndarray) -> tuple[np.ndarray, float]:
    """``d KL(pi||ref)/d theta = pi (log(pi/ref) - KL)`` and ``KL``."""
    pi = np.exp(logpi)
    d = logpi - log_ref
    kl = float(pi @ d)
    return pi * (d - kl), kl


def _pg_expected(
    theta: np.ndarray,
    theta_old: np.ndarray,
    correct: int,
    group_size: int,
    importance_ratio: bool,
    advantage: str,
    eps: float,
) -> np.ndarray:
    """Exact expected policy gradient (see the module docstring)."""
    pi_old = np.exp(_log_softmax(theta_old))
    p_old = float(pi_old[:correct].sum())
    if p_old <= 0.0 or p_old >= 1.0:
        return np.zeros_like(theta)
    phi = group_signal(p_old, group_size, advantage, eps)
    if not importance_ratio:
        out = -pi_old / (1.0 - p_old)
        out[:correct] = pi_old[:correct] / p_old
        return phi * out
    pi = np.exp(_log_softmax(theta))
    p = float(pi[:correct].sum())
    on_c = np.zeros_like(pi)
    on_c[:correct] = pi[:correct]
    on_w = pi - on_c
    return phi * ((on_c - p * pi) / p_old - (on_w - (1.0 - p) * pi) / (1.0 - p_old))


def _log_ref(arms: int, ref: Sequence[float] | None) -> np.ndarray:
    if ref is None:
        return np.full(arms, -math.log(arms))
    r = np.asarray(ref, dtype=float)
    if r.shape != (arms,) or np.any(r <= 0):
        raise UsageError("the reference policy needs one positive probability per arm", fix="pass ref=None for uniform")
    return np.log(r / r.sum())


def mean_field_gradient(
    theta: np.ndarray,
    theta_old: np.ndarray | None = None,
    *,
    correct: int = 1,
    beta: float = 1.0,
    ref: Sequence[float] | None = None,
    group_size: int = 0,
    importance_ratio: bool = False,
    advantage: str = "std",
    eps: float = EPS,
    kl_at: str = "sampling",
) -> np.ndarray:
    """Exact expected GRPO ascent direction ``E[g_pg] - beta grad KL(pi || pi_ref)``.

    ``theta_old`` is the sampling policy (default: ``theta``, on-policy). ``group_size=0``: the
    ``G -> inf`` limit; ``G > 0``: the exact finite-``G`` expectation over the binomial number of
    correct samples (no sampling noise in either case).
    """
    theta = np.asarray(theta, dtype=float)
    theta_old = theta if theta_old is None else np.asarray(theta_old, dtype=float)
    pg = _pg_expected(theta, theta_old, correct, group_size, importance_ratio, advantage, eps)
    klg, _ = _kl_grad(_log_softmax(_kl_theta(theta, theta_old, kl_at)), _log_ref(len(theta), ref))
    return pg - beta * klg


def _kl_theta(theta, theta_old, kl_at):
    if kl_at == "sampling":
        return theta_old
    if kl_at == "current":
        return theta
    raise UsageError(f"unknown kl_at {kl_at!r}", fix="use 'sampling' or 'current'")


def surrogate(
    theta: np.ndarray,
    theta_old: np.ndarray,
    *,
    correct: int = 1,
    beta: float = 1.0,
    ref: Sequence[float] | None = None,
    group_size: int = 0,
    importance_ratio: bool = False,
    advantage: str = "std",
    eps: float = EPS,
    kl_at: str = "sampling",
) -> float:
    """The objective whose gradient in ``theta`` is :func:`mean_field_gradient`.

    With the expected advantages fixed at the sampling policy, ``Abar_a = phi/p_old`` on correct
    arms and ``-phi/(1-p_old)`` on wrong ones (``phi = phi_G(p_old)``):
    ratio: ``sum_a pi_a Abar_a - beta KL(pi || pi_ref)`` (``E_pi[A] - beta KL``);
    no ratio: ``sum_a pi_old_a Abar_a log pi_a - beta KL(pi || pi_ref)``.
    With ``kl_at="sampling"`` the KL term is linearised at ``theta_old``
    (``beta grad KL(pi_old) . theta``), whose gradient is the frozen KL gradient.
    """
    theta = np.asarray(theta, dtype=float)
    log_ref = _log_ref(len(theta), ref)
    logpi = _log_softmax(theta)
    pi_old = np.exp(_log_softmax(np.asarray(theta_old, dtype=float)))
    p_old = float(pi_old[:correct].sum())
    phi = group_signal(p_old, group_size, advantage, eps)
    abar = np.full(len(theta), -phi / (1.0 - p_old))
    abar[:correct] = phi / p_old
    pi = np.exp(logpi)
    if kl_at == "sampling":
        klg, _ = _kl_grad(_log_softmax(np.asarray(theta_old, dtype=float)), log_ref)
        kl = float(klg @ theta)
    else:
        kl = float(pi @ (logpi - log_ref))
    gain = float(pi @ abar) if importance_ratio else float((pi_old * abar) @ logpi)
    return gain - beta * kl


# --------------------------------------------------------------------------- fixed point and K


class NoInteriorFixedPoint(UsageError):
    """The flow has no fixed point inside (0, 1): the reward rises to 1 (beta 0, or a KL pull
    that the std-normalised push beats near p = 1)."""


@dataclass(frozen=True)
class FixedPoint:
    """Fixed point of the mean-field flow ``d theta/dt = g(theta)`` and its relaxation rate.

    ``curvature`` K: minus the eigenvalue of the Jacobian ``J = dg/dtheta`` (on-policy,
    ``theta_old = theta``) for the mode that moves ``p`` (largest overlap with ``grad p``; the
    gauge mode ``theta + c 1`` is excluded automatically since it does not move ``p``). So
    ``p - p* ~ exp(-K t)`` under the flow, and ``e_{n+1} - e_n = -eta K e_n`` for plain gradient
    ascent. Split ``K = K_lagged + K_current`` with ``J_lag = dg/dtheta_old`` (what the stale
    sampling policy controls: the reward signal) and ``J_now = dg/dtheta`` (the KL pull, and the
    ratio's part), each projected on the mode with its left eigenvector.
    """

    theta: np.ndarray
    p: float
    curvature: float
    curvature_lagged: float
    curvature_current: float
    group_size: int

    def summary(self) -> dict[str, Any]:
        return {
            "fixed_point": self.p,
            "curvature": self.curvature,
            "curvature_lagged": self.curvature_lagged,
            "curvature_current": self.curvature_current,
        }


def _solve_theta(arms, correct, beta, ref, group_size, advantage, eps) -> np.ndarray:
    from scipy.optimize import brentq, root

    kw = dict(correct=correct, beta=beta, ref=ref, group_size=group_size, advantage=advantage, eps=eps)
    if ref is None or np.allclose(np.asarray(ref) / np.sum(ref), 1.0 / arms):

        def th(x):
            t = np.zeros(arms)
            t[:correct] = x
            return t - t.mean()

        # x = theta_correct - theta_wrong; the flow starts at the reference (x = 0) and rises.
        # Std-normalised rewards push like sqrt(1-p) near p = 1 and beat the KL pull there, so
        # p = 1 also attracts: take the first stable crossing (+ to -) at or above x = 0.
        f = lambda x: mean_field_gradient(th(x), **kw)[0]  # noqa: E731
        grid = np.linspace(0.0, 25.0, 501)
        vals = np.array([f(x) for x in grid])
        down = np.flatnonzero((vals[:-1] > 0) & (vals[1:] <= 0))
        if vals[0] <= 0:
            grid = np.linspace(-25.0, 0.0, 501)
            vals = np.array([f(x) for x in grid])
            down = np.flatnonzero((vals[:-1] > 0) & (vals[1:] <= 0))
        if not len(down):
            raise NoInteriorFixedPoint("no interior fixed point of the bandit flow", fix="use a larger beta")
        i = int(down[0])
        return th(brentq(f, grid[i], grid[i + 1], xtol=1e-14, rtol=1e-14, maxiter=500))
    theta = _log_ref(arms, ref).copy()
    for _ in range(3000):
        theta = theta + 0.5 * mean_field_gradient(theta, **kw)
    sol = root(lambda t: mean_field_gradient(t, **kw) + t.mean(), theta - theta.mean(), method="hybr", tol=1e-14)
    if not sol.success:
        raise UsageError("the bandit's fixed point was not found", fix="use a larger beta")
    return sol.x


def fixed_point(
    arms: int = 8,
    correct: int = 1,
    beta: float = 1.0,
    group_size: int = 0,
    *,
    ref: Sequence[float] | None = None,
    advantage: str = "std",
    eps: float = EPS,
    importance_ratio: bool = False,
    kl_at: str = "sampling",
) -> FixedPoint:
    """Fixed point ``p*`` of the exact (finite-``G`` or ``G -> inf``) mean-field flow and ``K``."""
    if beta <= 0:
        raise NoInteriorFixedPoint("with beta = 0 the bandit has no interior fixed point (p -> 1)", fix="use beta > 0")
    theta = _solve_theta(arms, correct, beta, ref, group_size, advantage, eps)
    kw = dict(
        correct=correct,
        beta=beta,
        ref=ref,
        group_size=group_size,
        advantage=advantage,
        eps=eps,
        importance_ratio=importance_ratio,
        kl_at=kl_at,
    )
    h = 1e-6
    J_lag = np.empty((arms, arms))
    J_now = np.empty((arms, arms))
    for j in range(arms):
        d = np.zeros(arms)
        d[j] = h
        J_lag[:, j] = (mean_field_gradient(theta, theta + d, **kw) - mean_field_gradient(theta, theta - d, **kw)) / (
            2 * h
        )
        J_now[:, j] = (mean_field_gradient(theta + d, theta, **kw) - mean_field_gradient(theta - d, theta, **kw)) / (
            2 * h
        )
    J = J_lag + J_now
    lam, V = np.linalg.eig(J)
    W = np.linalg.inv(V)
    pi = np.exp(_log_softmax(theta))
    p = float(pi[:correct].sum())
    grad_p = pi * ((np.arange(arms) < correct) - p)
    overlap = np.abs(grad_p @ V) / np.linalg.norm(V, axis=0)
    k = int(np.argmax(overlap))
    K = -float(lam[k].real)
    K_lag = -float((W[k] @ J_lag @ V[:, k]).real) + 0.0
    K_now = -float((W[k] @ J_now @ V[:, k]).real) + 0.0  # no negative zero in JSON
    return FixedPoint(theta, p, K, K_lag, K_now, int(group_size))


def plateau_at_group_size(
    beta: float = 1.0,
    arms: int = 8,
    correct: int = 1,
    group_size: int = 0,
    advantage: str = "std",
    ref: Sequence[float] | None = None,
) -> float:
    """Fixed point ``p*`` of the exact finite-``G`` expected gradient (``group_size=0``: ``G -> inf``).

    Solves ``phi_G(p) (u_C - u_W) = beta grad KL(pi || pi_ref)``; ``phi_G`` is :func:`group_signal`.
    """
    return fixed_point(arms, correct, beta, group_size, ref=ref, advantage=advantage).p


def _noise_force_variance(
    fp: FixedPoint,
    *,
    arms,
    correct,
    beta,
    ref,
    group_size,
    groups,
    advantage,
    eps,
    importance_ratio,
    seed,
    batches: int = 400,
) -> float:
    """Monte-Carlo variance of ``zeta = grad p . g_batch`` at the fixed point (per step)."""
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
    theta = fp.theta
    logpi = _log_softmax(theta)
    pi = np.exp(logpi)
    p = float(pi[:correct].sum())
    grad_p = pi * ((np.arange(arms) < correct) - p)
    cdf = np.cumsum(pi)
    cdf[-1] = 1.0
    N = groups * group_size
    u = rng.random((batches, groups, group_size))
    a = np.minimum(np.searchsorted(cdf, u, side="right"), arms - 1)
    A, _, _ = _advantages((a < correct).astype(float), advantage, eps)
    # no ratio at theta = theta_old: g_pg = (1/N) sum A_i (e_{a_i} - pi); the pi term sums to zero
    zeta = (A * grad_p[a]).reshape(batches, -1).sum(axis=1) / N
    return float(zeta.var())


def _advantages(r: np.ndarray, advantage: str, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group-normalised advantages over the last axis; returns ``(A, population std, group mean)``."""
    G = r.shape[-1]
    mean = r.mean(axis=-1, keepdims=True)
    s = np.sqrt(mean * (1.0 - mean))  # population std of binary rewards
    if advantage == "none":
        A = r - mean
    else:
        d = s * math.sqrt(G / (G - 1)) if advantage == "sample_std" and G > 1 else s
        A = (r - mean) / (d + eps)
    return A, s[..., 0], mean[..., 0]
