"""Seeded synthetic runs with one failure mode planted, healthy controls and a dead run.

Every step draws ``batch_prompts`` prompts; prompt success probabilities are
``Beta(p kappa, (1 - p) kappa)`` around the policy's mean success ``p(t)`` (``kappa`` = prompt
heterogeneity), and each prompt gets ``group_size`` binary rewards. Logged like TRL: the batch
mean ``reward``, the mean within-group sample std ``reward_std``, the fraction of all-equal groups
``frac_reward_zero_std``; plus ``entropy``, ``kl``, ``grad_norm``, ``clip_ratio`` and a sparse
``eval_reward`` (``eval_size`` problems every ``eval_every`` steps, NaN between).

Healthy control: ``p(t) = p* - (p* - p0) exp(-t/T)``, entropy declining gradually (timescale
1.5-3 T to 40-60% of its start), log-normal grad-norm noise. Planted modes change one thing:

- ``train_eval_decoupling``: the train reward keeps rising; the eval peaks at 35% of the run and
  then loses 60% of its gain;
- ``advantage_degeneracy``: prompts polarise in the second half (``kappa -> 0.02``): most groups
  all-right or all-wrong at a mid-range reward;
- ``policy_concentration``: entropy falls 8x faster than the reward rises, to 5% of its start;
- ``dynamical_instability``: ``kind="collapse"`` (reward falls by half at 65% of the run, grad
  norm x8 from just before, a precursor spike 15% earlier, clip fraction up), ``kind="grad_growth"``
  (grad norm grows x20 over the second half), ``kind="oscillation"`` (underdamped reward, zeta 0.25, plateau 0.6).
"""

from __future__ import annotations

import numpy as np

from grpofit.vocabulary import MODES


def _batch(p: np.ndarray, kappa: np.ndarray, rng, group_size: int, batch_prompts: int):
    """Batch mean reward, mean within-group std and zero-variance fraction per step."""
    n = p.size
    p = np.clip(p, 1e-4, 1 - 1e-4)[:, None]
    kappa = np.broadcast_to(np.asarray(kappa, float), (n,))[:, None]
    q = rng.beta(p * kappa, (1 - p) * kappa, size=(n, batch_prompts))
    k = rng.binomial(group_size, q)
    G = group_size
    reward = k.sum(axis=1) / (batch_prompts * G)
    std = np.sqrt(k * (G - k) / (G * (G - 1))).mean(axis=1)
    zero = ((k == 0) | (k == G)).mean(axis=1)
    return reward, std, zero


def _saturating(t, start, end, timescale):
    return end - (end - start) * np.exp(-t / timescale)


def make_planted_run(
    mode: str | None,
    *,
    seed: int,
    n_steps: int = 300,
    group_size: int = 8,
    batch_prompts: int = 16,
    eval_every: int = 10,
    eval_size: int = 200,
    kind: str = "collapse",
    curve=None,
) -> dict[str, np.ndarray]:
    """Columns of one synthetic run (module docstring); ``mode=None`` is a healthy control.

    ``curve``, a function of ``t = 0, 1, ...`` giving the mean reward, replaces the healthy
    exponential (e.g. an overdamped oscillator with a slow start); eval follows it at 90%.
    """
    if mode is not None and mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of {MODES} or None")
    rng = np.random.default_rng(seed)
    t = np.arange(n_steps, dtype=float)
    n = float(n_steps)
    p0, p_star = rng.uniform(0.1, 0.25), rng.uniform(0.6, 0.8)
    T = n * rng.uniform(0.12, 0.2)
    p = _saturating(t, p0, p_star, T)
    kappa = np.full(n_steps, 6.0)
    h0 = rng.uniform(0.8, 1.2)
    h_end, T_h = h0 * rng.uniform(0.4, 0.6), T * rng.uniform(1.5, 3.0)
    grad = rng.uniform(0.1, 0.3) * np.exp(rng.normal(0, 0.25, n_steps))
    clip = 0.005 * np.exp(rng.normal(0, 0.3, n_steps))
    e0, e_star = p0 * 0.8, p_star * 0.9
    p_eval = _saturating(t, e0, e_star, T)
    if curve is not None:
        p = np.asarray(curve(t), dtype=float)
        p_eval = 0.9 * p

    if mode == "train_eval_decoupling":
        T = n * 0.4
        p = _saturating(t, p0, 0.9, T)
        tp = 0.35 * n
        peak = _saturating(tp, e0, e_star, 0.12 * n)
        p_eval = np.where(t <= tp, _saturating(t, e0, e_star, 0.12 * n), peak - 0.6 * (peak - e0) * (t - tp) / (n - tp))
    elif mode == "advantage_degeneracy":
        p = _saturating(t, p0, rng.uniform(0.4, 0.55), T)
        ramp = np.clip((t - 0.4 * n) / (0.2 * n), 0, 1)
        kappa = np.exp((1 - ramp) * np.log(6.0) + ramp * np.log(0.02))
    elif mode == "policy_concentration":
        T_h, h_end = T / 8.0, 0.05 * h0
    elif mode == "dynamical_instability":
        if kind == "collapse":
            tc = 0.65 * n
            low = p0 + 0.3 * (p_star - p0)
            p = np.where(t < tc, p, low + (p - low) * np.exp(-(t - tc) / (0.02 * n)))
            base = np.median(grad)
            grad = np.where(t >= tc - 0.02 * n, grad * 8.0, grad)
            grad[int(tc - 0.15 * n)] = 9.0 * base
            clip = np.where(t >= tc, clip * 15.0, clip)
        elif kind == "grad_growth":
            grad = grad * np.exp(np.log(20.0) * np.clip((t - 0.5 * n) / (0.5 * n), 0, 1))
        elif kind == "oscillation":
            zeta, w0, p_star = 0.25, 2 * np.pi / (0.3 * n), 0.6
            a, wd = zeta * w0, w0 * np.sqrt(1 - zeta**2)
            e = (p0 - p_star) * np.exp(-a * t) * (np.cos(wd * t) + a / wd * np.sin(wd * t))
            p = np.clip(p_star + e, 0.01, 0.99)
        else:
            raise ValueError(f"unknown instability kind {kind!r}: collapse, grad_growth or oscillation")

    reward, std, zero = _batch(p, kappa, rng, group_size, batch_prompts)
    entropy = _saturating(t, h0, h_end, T_h) * np.exp(rng.normal(0, 0.03, n_steps))
    kl = 0.02 * (1 - np.exp(-t / T)) + np.abs(rng.normal(0, 0.002, n_steps))
    eval_reward = np.full(n_steps, np.nan)
    idx = np.arange(0, n_steps, eval_every)
    eval_reward[idx] = rng.binomial(eval_size, np.clip(p_eval[idx], 0, 1)) / eval_size
    return {
        "step": t + 1,
        "reward": reward,
        "eval_reward": eval_reward,
        "reward_std": std,
        "frac_reward_zero_std": zero,
        "entropy": entropy,
        "kl": kl,
        "grad_norm": grad,
        "clip_ratio": clip,
    }


def make_dead_run(*, seed: int, n_steps: int = 300, group_size: int = 8, batch_prompts: int = 16) -> dict[str, np.ndarray]:
    """A dead run: reward near 0, 75-100% zero-variance groups, tiny gradients, flat entropy."""
    rng = np.random.default_rng(seed)
    t = np.arange(n_steps, dtype=float)
    p = np.full(n_steps, rng.uniform(0.005, 0.02))
    reward, std, zero = _batch(p, np.full(n_steps, 2.0), rng, group_size, batch_prompts)
    grad = 1e-3 * np.exp(rng.normal(0, 0.3, n_steps)) * np.where(zero >= 1.0, 0.0, 1.0)
    return {
        "step": t + 1,
        "reward": reward,
        "reward_std": std,
        "frac_reward_zero_std": zero,
        "entropy": rng.uniform(0.8, 1.2) * np.exp(rng.normal(0, 0.02, n_steps)),
        "kl": np.abs(rng.normal(0, 1e-4, n_steps)),
        "grad_norm": grad,
        "clip_ratio": np.zeros(n_steps),
    }


def planted_run(mode: str | None, *, seed: int, name: str | None = None, **kw):
    """The same columns wrapped as a :class:`grpofit.runs.Run` (name ``planted/<mode>/<seed>``)."""
    from grpofit.runs import make_run

    if mode == "dead":
        table = make_dead_run(seed=seed, **kw)
    else:
        table = make_planted_run(mode, seed=seed, **kw)
    name = name or f"planted/{mode or 'healthy'}/{seed}"
    return make_run(name, name, "planted", table, step="step")
