"""Exact GRPO on a softmax bandit (shared/docs/theory.md, section 5), written as a real GRPO log.

The model
---------
Policy ``pi = softmax(theta)`` over ``A`` arms; arms ``0 .. correct-1`` pay reward 1, the rest 0;
reference policy ``pi_ref`` (uniform unless given). The run starts at ``theta = log pi_ref``.
Each step ``n``:

1. every ``K_ref`` steps the sampling policy is refreshed: ``theta_old <- theta``;
2. ``groups`` groups of ``G`` arms are drawn from ``pi_old``; within a group the advantage is
   ``A_i = (r_i - mean r) / (s + eps)`` with ``s`` the **population** std of the group's rewards
   (``advantage="std"``, default; ``"sample_std"`` uses the ``G-1`` std as TRL's ``torch.std``
   does; ``"none"`` leaves ``r_i - mean r``, Dr. GRPO style). ``eps = 1e-4``. A zero-variance
   group has ``r_i = mean r`` for all ``i`` and contributes nothing;
3. policy gradient ``g_pg = (1/N) sum_i w_i (e_{a_i} - pi)`` over the ``N = groups * G`` samples,
   ``w_i = A_i`` by default (**no importance ratio**: because advantages are mean-centred within
   each group the ``-pi`` term cancels, so the reward signal depends only on the stale samples: the
   gradient is frozen at the last refresh, the paper's lag) or ``w_i = A_i pi(a_i)/pi_old(a_i)``
   with ``importance_ratio=True`` (an unclipped PPO ratio, which removes most of the lag);
4. minus ``beta`` times the exact KL gradient ``d KL(pi || pi_ref) / d theta_j = pi_j (log(pi_j /
   pi_ref_j) - KL)``, evaluated at the sampling policy (``kl_at="sampling"``, default: the whole
   gradient is frozen at the last refresh, the paper's lag model; akin to a KL penalty computed at
   rollout time) or at the current policy (``kl_at="current"``: a KL *loss* as in TRL's ``beta`` or
   verl's ``use_kl_loss``; then most of the restoring force has no lag, see :class:`FixedPoint`);
5. heavy-ball momentum: ``v <- mu v + g``, ``theta <- theta + eta v``.

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

Log columns: ``step`` (1..N), ``reward`` (batch mean of the sampled rewards; ``G=0``: the expected
reward ``p_old`` of the sampling policy), ``reward_std`` (mean over groups of the population std
used in the advantage; ``G=0``: ``sqrt(p_old (1-p_old))``), ``frac_reward_zero_std`` (fraction of
groups with zero std; ``G=0``: 0, the ``G -> infinity`` limit of ``p^G + (1-p)^G``), ``entropy``,
``kl`` (``KL(pi || pi_ref)``), ``grad_norm`` (of ``g`` before momentum), ``expected_reward`` (exact
``p`` of the current policy). Row ``n`` holds the policy *before* update ``n`` (row 1 = the start).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from grpofit.errors import UsageError

__all__ = [
    "EPS",
    "COLUMNS",
    "FixedPoint",
    "BanditRun",
    "group_signal",
    "mean_field_gradient",
    "surrogate",
    "fixed_point",
    "plateau_at_group_size",
    "simulate_bandit",
    "classify_trajectory",
    "write_log",
    "run_simulation",
]

EPS = 1e-4
ADVANTAGES = ("std", "sample_std", "none")
COLUMNS = ("step", "reward", "reward_std", "frac_reward_zero_std", "entropy", "kl", "grad_norm", "expected_reward")
SCHEMA = "grpofit.bandit/1"


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


def _pg_expected(theta: np.ndarray, theta_old: np.ndarray, correct: int, group_size: int,
                 importance_ratio: bool, advantage: str, eps: float) -> np.ndarray:
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
    theta: np.ndarray, theta_old: np.ndarray | None = None, *, correct: int = 1, beta: float = 1.0,
    ref: Sequence[float] | None = None, group_size: int = 0, importance_ratio: bool = False,
    advantage: str = "std", eps: float = EPS, kl_at: str = "sampling",
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
    theta: np.ndarray, theta_old: np.ndarray, *, correct: int = 1, beta: float = 1.0,
    ref: Sequence[float] | None = None, group_size: int = 0, importance_ratio: bool = False,
    advantage: str = "std", eps: float = EPS, kl_at: str = "sampling",
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
            raise UsageError("no interior fixed point of the bandit flow", fix="use a larger beta")
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
    arms: int = 8, correct: int = 1, beta: float = 1.0, group_size: int = 0, *,
    ref: Sequence[float] | None = None, advantage: str = "std", eps: float = EPS, importance_ratio: bool = False,
    kl_at: str = "sampling",
) -> FixedPoint:
    """Fixed point ``p*`` of the exact (finite-``G`` or ``G -> inf``) mean-field flow and ``K``."""
    if beta <= 0:
        raise UsageError("with beta = 0 the bandit has no interior fixed point (p -> 1)", fix="use beta > 0")
    theta = _solve_theta(arms, correct, beta, ref, group_size, advantage, eps)
    kw = dict(correct=correct, beta=beta, ref=ref, group_size=group_size, advantage=advantage, eps=eps,
              importance_ratio=importance_ratio, kl_at=kl_at)
    h = 1e-6
    J_lag = np.empty((arms, arms))
    J_now = np.empty((arms, arms))
    for j in range(arms):
        d = np.zeros(arms)
        d[j] = h
        J_lag[:, j] = (mean_field_gradient(theta, theta + d, **kw) - mean_field_gradient(theta, theta - d, **kw)) / (2 * h)
        J_now[:, j] = (mean_field_gradient(theta + d, theta, **kw) - mean_field_gradient(theta - d, theta, **kw)) / (2 * h)
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


def plateau_at_group_size(beta: float = 1.0, arms: int = 8, correct: int = 1, group_size: int = 0,
                          advantage: str = "std", ref: Sequence[float] | None = None) -> float:
    """Fixed point ``p*`` of the exact finite-``G`` expected gradient (``group_size=0``: ``G -> inf``).

    Solves ``phi_G(p) (u_C - u_W) = beta grad KL(pi || pi_ref)``; ``phi_G`` is :func:`group_signal`.
    """
    return fixed_point(arms, correct, beta, group_size, ref=ref, advantage=advantage).p


def _noise_force_variance(fp: FixedPoint, *, arms, correct, beta, ref, group_size, groups, advantage, eps,
                          importance_ratio, seed, batches: int = 400) -> float:
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


# --------------------------------------------------------------------------- simulation


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


@dataclass
class BanditRun:
    """One simulated run: the log's columns, its hyperparameters and the measured fixed point."""

    params: dict[str, Any]
    columns: dict[str, np.ndarray]
    fixed: FixedPoint | None
    plateau_exact: float | None
    noise_D: float | None = None
    diverged_at: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def steps(self) -> np.ndarray:
        return self.columns["step"]

    def late_stats(self, fraction: float = 0.25) -> dict[str, float | None]:
        """Mean and variance of ``expected_reward`` and ``reward`` over the last ``fraction`` of rows."""
        n = len(self.steps)
        if n == 0:
            return {"late_mean": None, "late_variance": None, "late_reward_variance": None}
        lo = int(n * (1 - fraction))
        p = self.columns["expected_reward"][lo:]
        r = self.columns["reward"][lo:]
        return {"late_mean": float(p.mean()), "late_variance": float(p.var()), "late_reward_variance": float(r.var())}

    def prediction(self):
        """Closed form + exact recursions at this run's hyperparameters and measured K (split)."""
        from grpofit.dynamics import predict

        if self.fixed is None or self.fixed.curvature <= 0:
            return None
        P = self.params
        k_now = min(max(self.fixed.curvature_current, 0.0), self.fixed.curvature)
        return predict(P["lr"], P["momentum"], P["refresh_interval"], self.fixed.curvature,
                       curvature_current=k_now)

    def summary(self) -> dict[str, Any]:
        """JSON-safe: hyperparameters at the top level (readable as a run config), then results."""
        from grpofit.dynamics import _f

        out: dict[str, Any] = {"schema": SCHEMA, **self.params}
        fp = self.fixed
        out.update({
            "fixed_point": None if fp is None else _f(fp.p),
            "plateau_exact": _f(self.plateau_exact),
            "curvature": None if fp is None else _f(fp.curvature),
            "curvature_lagged": None if fp is None else _f(fp.curvature_lagged),
            "curvature_current": None if fp is None else _f(fp.curvature_current),
            "curvature_method": "Jacobian of the mean-field flow at the fixed point, mode that moves p",
            "noise_D": _f(self.noise_D),
            "n_rows": int(len(self.steps)),
            "diverged_at_step": self.diverged_at,
        })
        out.update({k: _f(v) for k, v in self.late_stats().items()})
        if fp is not None and len(self.steps):
            out["trajectory"] = classify_trajectory(self.columns["expected_reward"], fp.p)
        pred = self.prediction()
        if pred is not None:
            s = pred.summary()
            out["predicted"] = {
                "damping_ratio": s["damping_ratio"], "regime": s["regime"], "stable": s["stable"],
                "timescale": s["timescale"], "inertia": s["inertia"],
                "critical_refresh_interval": s["critical_refresh_interval"],
                "exact_sawtooth": s["exact_sawtooth"], "exact_fixed_delay": s["exact_fixed_delay"],
                "note": "closed form and exact recursions with K split into lagged and current parts",
            }
            if self.noise_D is not None and pred.stable:
                var = self.noise_D / (2 * self.params["group_size"] * pred.damping * pred.stiffness)
                out["predicted"]["fluctuation_variance"] = _f(var)
        out.update(self.extra)
        out["columns"] = list(self.columns)
        return out

    def report(self) -> list[tuple[str, str]]:
        s = self.summary()
        rows = []
        for k, v in s.items():
            if isinstance(v, dict):
                continue
            rows.append((k, "-" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))))
        return rows

    def write(self, out: str | Path) -> Path:
        """Write the log (``.csv`` or ``.jsonl``) and ``<out>.meta.json``; returns the meta path."""
        return write_log(self, out)


def simulate_bandit(
    arms: int = 8, correct: int = 1, lr: float = 0.1, momentum: float = 0.0, refresh_interval: int = 1,
    group_size: int = 16, beta: float = 1.0, steps: int = 500, seed: int = 0, ref: Sequence[float] | None = None,
    importance_ratio: bool = False, advantage: str = "std", groups: int = 16, eps: float = EPS,
    kl_at: str = "sampling", measure: bool = True, theta0: np.ndarray | None = None,
) -> BanditRun:
    """Simulate GRPO with heavy-ball momentum and a stale sampling policy on a softmax bandit.

    See the module docstring for the exact update. ``group_size=0``: the exact ``G -> inf``
    expected gradient (deterministic). ``measure``: also solve for the fixed point, ``K`` and the
    noise ``D`` (skip it in inner loops). ``theta0``: start here instead of at the reference.
    A run whose parameters leave the float range stops there (``diverged_at``).
    """
    if not 1 <= correct < arms:
        raise UsageError(f"need 1 <= correct < arms, got correct={correct}, arms={arms}", fix="e.g. --arms 8 --correct 1")
    if refresh_interval < 1 or int(refresh_interval) != refresh_interval:
        raise UsageError("the refresh interval must be a whole number >= 1", fix="--refresh-interval 1 is on-policy")
    if group_size < 0 or groups < 1 or steps < 1:
        raise UsageError("need group_size >= 0, groups >= 1 and steps >= 1", fix="--group-size 0 is the mean-field limit")
    if not 0 <= momentum < 1 or lr <= 0 or beta < 0:
        raise UsageError("need lr > 0, 0 <= momentum < 1, beta >= 0", fix="check --lr, --momentum and --beta")
    if advantage not in ADVANTAGES:
        raise UsageError(f"unknown advantage {advantage!r}", fix=f"use one of {', '.join(ADVANTAGES)}")
    _kl_theta(None, None, kl_at)
    frozen_kl = kl_at == "sampling"
    kref = int(refresh_interval)
    G = int(group_size)
    rng = np.random.default_rng(seed)
    log_ref = _log_ref(arms, ref)
    theta = log_ref.copy() if theta0 is None else np.asarray(theta0, dtype=float).copy()
    v = np.zeros(arms)
    cols = {c: np.full(steps, np.nan) for c in COLUMNS}
    cols["step"] = np.arange(1, steps + 1, dtype=float)
    is_correct = np.arange(arms) < correct
    N = groups * G
    diverged = None
    for n in range(steps):
        if n % kref == 0:
            theta_old = theta.copy()
            logpi_old = _log_softmax(theta_old)
            pi_old = np.exp(logpi_old)
            p_old = float(pi_old[:correct].sum())
            cdf = np.cumsum(pi_old)
            cdf[-1] = 1.0
            if frozen_kl:
                klg_old, _ = _kl_grad(logpi_old, log_ref)
        logpi = _log_softmax(theta)
        pi = np.exp(logpi)
        klg, kl = _kl_grad(logpi, log_ref)
        if frozen_kl:
            klg = klg_old
        cols["expected_reward"][n] = pi[:correct].sum()
        cols["entropy"][n] = -float(pi @ logpi)
        cols["kl"][n] = kl
        if G == 0:
            pg = _pg_expected(theta, theta_old, correct, 0, importance_ratio, advantage, eps)
            cols["reward"][n] = p_old
            cols["reward_std"][n] = math.sqrt(max(p_old * (1 - p_old), 0.0))
            cols["frac_reward_zero_std"][n] = 0.0
        else:
            a = np.minimum(np.searchsorted(cdf, rng.random((groups, G)), side="right"), arms - 1)
            r = is_correct[a].astype(float)
            A, s, _ = _advantages(r, advantage, eps)
            w = A * np.exp(logpi[a] - logpi_old[a]) if importance_ratio else A
            pg = (np.bincount(a.ravel(), weights=w.ravel(), minlength=arms) - pi * w.sum()) / N
            cols["reward"][n] = r.mean()
            cols["reward_std"][n] = s.mean()
            cols["frac_reward_zero_std"][n] = float(np.mean(s == 0))
        g = pg - beta * klg
        cols["grad_norm"][n] = float(np.sqrt(g @ g))
        v = momentum * v + g
        theta = theta + lr * v
        if not np.all(np.isfinite(theta)) or np.abs(theta).max() > 1e12:
            diverged = n + 1
            cols = {k: c[: n + 1] for k, c in cols.items()}
            break
    params = {
        "arms": int(arms), "correct": int(correct), "lr": float(lr), "momentum": float(momentum),
        "refresh_interval": kref, "group_size": G, "groups": int(groups), "beta": float(beta),
        "steps": int(steps), "seed": int(seed), "importance_ratio": bool(importance_ratio),
        "advantage": advantage, "eps": float(eps), "kl_at": kl_at,
        "reference": "uniform" if ref is None else [float(x) for x in np.exp(log_ref)],
    }
    fp = plateau = D = None
    if measure and beta > 0:
        fp = fixed_point(arms, correct, beta, G, ref=ref, advantage=advantage, eps=eps,
                         importance_ratio=importance_ratio, kl_at=kl_at)
        plateau = fp.p if G == 0 else fixed_point(arms, correct, beta, 0, ref=ref, advantage=advantage, eps=eps).p
        if G > 0:
            var = _noise_force_variance(fp, arms=arms, correct=correct, beta=beta, ref=ref, group_size=G,
                                        groups=groups, advantage=advantage, eps=eps,
                                        importance_ratio=importance_ratio, seed=seed)
            D = lr**2 * G * var  # so that D / G is the variance of the force on e per step
    return BanditRun(params, cols, fp, plateau, D, diverged)


def classify_trajectory(p: np.ndarray, p_star: float, tol: float | None = None) -> dict[str, Any]:
    """Label a trajectory of ``p`` around ``p*``: monotone / oscillatory / unstable / diverged.

    ``e = p - p*``; ``tol`` defaults to ``1e-3 |e_0|``. ``unstable``: the largest ``|e|`` over
    the last quarter exceeds ``tol`` and is at least 0.9 of that over the third quarter (no
    decay: growth, a limit cycle or bounded chaos, since the softmax keeps ``p`` in [0, 1]);
    ``oscillatory``: converging, with an overshoot past ``p*`` larger than ``tol``;
    ``monotone``: converging without overshoot. Also returns the overshoot (fraction of ``|e_0|``).
    """
    p = np.asarray(p, dtype=float)
    if len(p) < 8 or not np.all(np.isfinite(p)):
        return {"label": "diverged" if len(p) and not np.all(np.isfinite(p)) else "unknown",
                "overshoot": None, "late_amplitude": None}
    e = p - p_star
    e0 = abs(e[0]) or 1.0
    tol = 1e-3 * e0 if tol is None else tol
    n = len(e)
    late = float(np.abs(e[3 * n // 4:]).max())
    prev = float(np.abs(e[n // 2: 3 * n // 4]).max())
    overshoot = float(max(0.0, (-np.sign(e[0]) * e).max()))
    if late > tol and late >= 0.9 * prev:
        label = "unstable"
    elif overshoot > tol:
        label = "oscillatory"
    else:
        label = "monotone"
    return {"label": label, "overshoot": overshoot / e0, "late_amplitude": late / e0}


# --------------------------------------------------------------------------- output


def _cell(v: float) -> str:
    if not math.isfinite(v):
        return ""
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(float(v))


def write_log(run: BanditRun, out: str | Path) -> Path:
    """Write ``run`` as CSV or JSONL (by suffix) plus ``<out>.meta.json``; returns the meta path.

    NaN cells are empty in CSV and ``null`` in JSONL.
    """
    from grpofit.jsonout import dumps

    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in (".csv", ".jsonl"):
        raise UsageError(f"cannot tell the log format from {out.name!r}", fix="end --out with .csv or .jsonl")
    names = list(run.columns)
    data = [run.columns[c] for c in names]
    n = len(data[0]) if data else 0
    if suffix == ".csv":
        lines = [",".join(names)]
        lines += [",".join(_cell(col[i]) for col in data) for i in range(n)]
    else:
        lines = []
        for i in range(n):
            row = {}
            for c, col in zip(names, data):
                v = float(col[i])
                row[c] = (int(v) if c == "step" else v) if math.isfinite(v) else None
            lines.append(json.dumps(row))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    meta = out.with_name(out.name + ".meta.json")
    doc = run.summary()
    doc["log"] = out.name
    meta.write_text(dumps(doc) + "\n", encoding="utf-8")
    return meta


def run_simulation(out: str | Path, **params: Any) -> dict[str, Any]:
    """Simulate, write the log and its sidecar, and return the summary (with ``out`` and ``meta``)."""
    run = simulate_bandit(**params)
    meta = write_log(run, out)
    doc = run.summary()
    doc["out"] = str(out)
    doc["meta"] = str(meta)
    return doc
