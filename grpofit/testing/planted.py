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
  (grad norm grows x20 over the second half), ``kind="oscillation"`` (underdamped reward, zeta 0.25, plateau 0.6),
  ``kind="recovery"`` (a collapse the run recovers from: the reward falls back to its start level
  ``p0`` at 40% of the run, stays there for a quarter of it and climbs back to its plateau at 65%,
  each change within 2% of the run; the other metrics stay healthy).

:func:`make_rule_run` plants one failure per diagnostic rule (:data:`RULE_CASES`: KL and
length hacking, KL target, truncation, length cap, entropy collapse and blow-up, within-group
std, dynamic-filtering pass rate, off-policy metrics, the entropy-reward law, grad-norm spikes)
into a healthy control that logs every metric those rules read.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from grpofit.core.vocabulary import MODES


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


class Control:
    """The healthy control's pieces, before the batch is drawn: what a planted failure changes.

    ``t`` steps from 0, ``n`` their count, ``p`` the mean success per step (``p0`` to ``p_star``
    over the timescale ``T``), ``kappa`` the prompt heterogeneity per step, ``h0``/``h_end``/``T_h``
    the entropy's start, end and timescale, ``grad`` and ``clip`` the grad norm and clip fraction
    per step, ``e0``/``e_star``/``p_eval`` the eval success's start, end and curve, ``kind`` the
    variant asked for (``dynamical_instability``: collapse, grad_growth or oscillation)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def set(self, **kw) -> None:
        """Change pieces by name (for a plant written as one expression)."""
        self.__dict__.update(kw)


def _decoupling(c: Control) -> None:
    c.T = c.n * 0.4
    c.p = _saturating(c.t, c.p0, 0.9, c.T)
    tp = 0.35 * c.n
    peak = _saturating(tp, c.e0, c.e_star, 0.12 * c.n)
    c.p_eval = np.where(
        c.t <= tp, _saturating(c.t, c.e0, c.e_star, 0.12 * c.n), peak - 0.6 * (peak - c.e0) * (c.t - tp) / (c.n - tp)
    )


def _degeneracy(c: Control) -> None:
    c.p = _saturating(c.t, c.p0, c.rng.uniform(0.4, 0.55), c.T)
    ramp = np.clip((c.t - 0.4 * c.n) / (0.2 * c.n), 0, 1)
    c.kappa = np.exp((1 - ramp) * np.log(6.0) + ramp * np.log(0.02))


def _concentration(c: Control) -> None:
    c.T_h, c.h_end = c.T / 8.0, 0.05 * c.h0


def _instability(c: Control) -> None:
    t, n = c.t, c.n
    if c.kind == "collapse":
        tc = 0.65 * n
        low = c.p0 + 0.3 * (c.p_star - c.p0)
        c.p = np.where(t < tc, c.p, low + (c.p - low) * np.exp(-(t - tc) / (0.02 * n)))
        base = np.median(c.grad)
        c.grad = np.where(t >= tc - 0.02 * n, c.grad * 8.0, c.grad)
        c.grad[int(tc - 0.15 * n)] = 9.0 * base
        c.clip = np.where(t >= tc, c.clip * 15.0, c.clip)
    elif c.kind == "grad_growth":
        c.grad = c.grad * np.exp(np.log(20.0) * np.clip((t - 0.5 * n) / (0.5 * n), 0, 1))
    elif c.kind == "oscillation":
        zeta, w0, c.p_star = 0.25, 2 * np.pi / (0.3 * n), 0.6
        a, wd = zeta * w0, w0 * np.sqrt(1 - zeta**2)
        e = (c.p0 - c.p_star) * np.exp(-a * t) * (np.cos(wd * t) + a / wd * np.sin(wd * t))
        c.p = np.clip(c.p_star + e, 0.01, 0.99)
    elif c.kind == "recovery":
        t1, t2, tau = 0.4 * n, 0.65 * n, 0.02 * n / 3.0
        fall = 1.0 / (1.0 + np.exp(-(t - t1) / tau)) - 1.0 / (1.0 + np.exp(-(t - t2) / tau))
        c.p = c.p - (c.p - c.p0) * fall
    else:
        raise ValueError(f"unknown instability kind {c.kind!r}: collapse, grad_growth, oscillation or recovery")


#: each failure mode of the vocabulary -> how its planted run changes the healthy control
#: (``tests/test_diagnostics.py`` requires every mode's planted run to fail it)
PLANTS: dict[str, Callable[[Control], None]] = {
    "train_eval_decoupling": _decoupling,
    "advantage_degeneracy": _degeneracy,
    "policy_concentration": _concentration,
    "dynamical_instability": _instability,
}


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
    """Columns of one synthetic run (module docstring); ``mode=None`` is a healthy control, a
    mode has its failure planted by its row of :data:`PLANTS`.

    ``curve``, a function of ``t = 0, 1, ...`` giving the mean reward, replaces the healthy
    exponential (e.g. an overdamped oscillator with a slow start); eval follows it at 90%.
    """
    if mode is not None and mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of {MODES} or None")
    if mode is not None and mode not in PLANTS:
        raise ValueError(f"no planted run for the mode {mode!r}: add its row to PLANTS in {__name__}")
    rng = np.random.default_rng(seed)
    t = np.arange(n_steps, dtype=float)
    n = float(n_steps)
    p0, p_star = rng.uniform(0.1, 0.25), rng.uniform(0.6, 0.8)
    T = n * rng.uniform(0.12, 0.2)
    c = Control(t=t, n=n, rng=rng, kind=kind, p0=p0, p_star=p_star, T=T, p=_saturating(t, p0, p_star, T))
    c.kappa = np.full(n_steps, 6.0)
    c.h0 = h0 = rng.uniform(0.8, 1.2)
    c.h_end, c.T_h = h0 * rng.uniform(0.4, 0.6), T * rng.uniform(1.5, 3.0)
    c.grad = rng.uniform(0.1, 0.3) * np.exp(rng.normal(0, 0.25, n_steps))
    c.clip = 0.005 * np.exp(rng.normal(0, 0.3, n_steps))
    c.e0, c.e_star = p0 * 0.8, p_star * 0.9
    c.p_eval = _saturating(t, c.e0, c.e_star, T)
    if curve is not None:
        c.p = np.asarray(curve(t), dtype=float)
        c.p_eval = 0.9 * c.p
    if mode is not None:
        PLANTS[mode](c)

    reward, std, zero = _batch(c.p, c.kappa, rng, group_size, batch_prompts)
    entropy = _saturating(t, c.h0, c.h_end, c.T_h) * np.exp(rng.normal(0, 0.03, n_steps))
    kl = 0.02 * (1 - np.exp(-t / c.T)) + np.abs(rng.normal(0, 0.002, n_steps))
    eval_reward = np.full(n_steps, np.nan)
    idx = np.arange(0, n_steps, eval_every)
    eval_reward[idx] = rng.binomial(eval_size, np.clip(c.p_eval[idx], 0, 1)) / eval_size
    return {
        "step": t + 1,
        "reward": reward,
        "eval_reward": eval_reward,
        "reward_std": std,
        "frac_reward_zero_std": zero,
        "entropy": entropy,
        "kl": kl,
        "grad_norm": c.grad,
        "clip_ratio": c.clip,
    }


def make_dead_run(
    *, seed: int, n_steps: int = 300, group_size: int = 8, batch_prompts: int = 16
) -> dict[str, np.ndarray]:
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
    """The same columns wrapped as a :class:`grpofit.core.runs.Run` (name ``planted/<mode>/<seed>``)."""
    from grpofit.core.runs import make_run

    if mode == "dead":
        table = make_dead_run(seed=seed, **kw)
    else:
        table = make_planted_run(mode, seed=seed, **kw)
    name = name or f"planted/{mode or 'healthy'}/{seed}"
    return make_run(name, name, "planted", table, step="step")


# --------------------------------------------------------------------------- the diagnostic rules

#: each planted rule case -> (the mode it feeds, the status the rule must give)
RULE_CASES: dict[str, tuple[str, str]] = {
    "kl_reward_slope": ("train_eval_decoupling", "warn"),
    "length_correlation": ("train_eval_decoupling", "warn"),
    "kl_target": ("train_eval_decoupling", "fail"),
    "truncation": ("dynamical_instability", "fail"),
    "length_cap": ("dynamical_instability", "fail"),
    "entropy_collapse": ("policy_concentration", "fail"),
    "entropy_blowup": ("dynamical_instability", "fail"),
    "within_group_std": ("advantage_degeneracy", "fail"),
    "filter_pass_rate": ("advantage_degeneracy", "fail"),  # judged by the mode's own check (1 - pass rate)
    "is_mean": ("dynamical_instability", "fail"),
    "is_ess": ("dynamical_instability", "fail"),
    "is_std": ("dynamical_instability", "fail"),
    "rollout_kl": ("dynamical_instability", "fail"),
    "entropy_reward_law": ("policy_concentration", "warn"),
    "grad_norm_spikes": ("dynamical_instability", "warn"),
}


def make_rule_run(rule: str | None, *, seed: int, n_steps: int = 300) -> dict[str, np.ndarray]:
    """A healthy control (``rule=None``) with every metric the diagnostic rules read, or the same run
    with one rule's failure planted (:data:`RULE_CASES`).

    The control adds to :func:`make_planted_run`'s healthy columns: a KL penalty (``kl_coef``
    0.04, ``kl_loss`` settling near 0.03), ``completions/mean_length`` drifting -10% with noise,
    ``completions/clipped_ratio`` near 1%, verl rollout-correction metrics (importance-ratio mean
    near 1, std 0.2, effective sample size 0.9, rollout-vs-train KL 0.001). The eval column is
    dropped for the hacking cases (they decide decoupling only without an eval set).
    """
    if rule is not None and rule not in RULE_CASES:
        raise ValueError(f"unknown rule {rule!r}; use one of {tuple(RULE_CASES)} or None")
    rng = np.random.default_rng(10_000 + seed)
    n = n_steps
    t = np.arange(n, dtype=float)
    cols = make_planted_run(
        "dynamical_instability" if rule == "grad_norm_spikes" else None, seed=seed, n_steps=n, kind="collapse"
    )
    noise = lambda sd: rng.normal(0.0, sd, n)  # noqa: E731
    del cols["kl"]
    cols["kl_coef"] = np.full(n, 0.04)
    cols["kl_loss"] = 0.03 * (1 - np.exp(-t / (0.2 * n))) * np.exp(noise(0.1)) + 0.001
    cols["completions/mean_length"] = 300.0 * (1.0 - 0.1 * t / n) * np.exp(noise(0.04))
    cols["completions/clipped_ratio"] = np.clip(0.01 * np.exp(noise(0.5)), 0, 1)
    cols["rollout_corr/rollout_is_mean"] = 1.0 + noise(0.02)
    cols["rollout_corr/rollout_is_std"] = 0.2 * np.exp(noise(0.1))
    cols["rollout_corr/rollout_is_eff_sample_size"] = np.clip(0.9 + noise(0.02), 0, 1)
    cols["rollout_corr/kl"] = 0.001 * np.exp(noise(0.3))
    second = np.clip((t - 0.5 * n) / (0.1 * n), 0.0, 1.0)  # 0 -> 1 over 50-60% of the run

    if rule in ("kl_reward_slope", "length_correlation", "kl_target"):
        del cols["eval_reward"]
    if rule == "kl_reward_slope":
        # the reward creeps up linearly while the KL climbs 10x faster per step
        p = 0.3 + 0.4 * t / n
        cols["reward"], cols["reward_std"], cols["frac_reward_zero_std"] = _batch(p, np.full(n, 6.0), rng, 8, 16)
        cols.pop("kl_coef")
        cols.pop("kl_loss")
        cols["kl"] = 0.002 + 0.02 * np.maximum(t - 0.4 * n, 0.0) + np.abs(noise(0.002))
    elif rule == "length_correlation":
        r = cols["reward"]
        cols["completions/mean_length"] = 200.0 * (1.0 + 2.5 * (r - r.min()) / np.ptp(r)) * np.exp(noise(0.03))
    elif rule == "kl_target":
        cols["kl_loss"] = cols["kl_loss"] + 0.6 * second
    elif rule == "truncation":
        cols["completions/clipped_ratio"] = np.clip(cols["completions/clipped_ratio"] + 0.3 * second, 0, 1)
    elif rule == "length_cap":
        del cols["completions/clipped_ratio"]
        length = cols["completions/mean_length"] * (1.0 + 3.0 * second)
        cols["completions/mean_length"] = np.minimum(length, 1024.0)
    elif rule == "entropy_collapse":
        p = _saturating(t, 0.1, 0.8, 0.9 * n)  # still rising at the end
        cols["reward"], cols["reward_std"], cols["frac_reward_zero_std"] = _batch(p, np.full(n, 6.0), rng, 8, 16)
        cols["eval_reward"] = np.where(np.isnan(cols["eval_reward"]), np.nan, 0.9 * p)
        cols["entropy"] = _saturating(t, 1.0, 0.02, 0.08 * n) * np.exp(noise(0.03))
    elif rule == "entropy_blowup":
        # entropy x10 from 60% of the run while the reward loses 35% of its gain (not a collapse)
        ramp = np.clip((t - 0.6 * n) / (0.05 * n), 0.0, 1.0)
        level = _saturating(t, 0.15, 0.7, 0.15 * n)
        level = level - 0.35 * (0.7 - 0.15) * ramp
        cols["reward"], cols["reward_std"], cols["frac_reward_zero_std"] = _batch(level, np.full(n, 6.0), rng, 8, 16)
        cols["entropy"] = cols["entropy"] * (1.0 + 9.0 * ramp)
    elif rule == "within_group_std":
        late_mask = t >= 0.7 * n
        p = _saturating(t, 0.1, 0.45, 0.15 * n)
        cols["reward"], cols["reward_std"], _ = _batch(p, np.full(n, 6.0), rng, 8, 16)
        cols["reward_std"] = np.where(late_mask, 0.004 * np.exp(noise(0.2)), cols["reward_std"])
        del cols["frac_reward_zero_std"]
    elif rule == "filter_pass_rate":
        zero = cols.pop("frac_reward_zero_std")
        cols["dynamic_filtering_pass_rate"] = 100.0 * np.clip(1.0 - zero - 0.85 * second, 0.0, 1.0)  # OpenRLHF: percent
        cols["reward"] = _saturating(t, 0.1, 0.4, 0.15 * n) + noise(0.02)
    elif rule == "is_mean":
        cols["rollout_corr/rollout_is_mean"] = cols["rollout_corr/rollout_is_mean"] - 0.7 * second
    elif rule == "is_ess":
        cols["rollout_corr/rollout_is_eff_sample_size"] = np.clip(
            cols["rollout_corr/rollout_is_eff_sample_size"] - 0.8 * second, 0, 1
        )
    elif rule == "is_std":
        cols["rollout_corr/rollout_is_std"] = cols["rollout_corr/rollout_is_std"] * (1.0 + 10.0 * second)
    elif rule == "rollout_kl":
        cols["rollout_corr/kl"] = cols["rollout_corr/kl"] + 0.3 * second
    elif rule == "entropy_reward_law":
        # R = -a exp(H) + b with H falling linearly 1.8 -> 0.3: the reward still climbs at the end,
        # so an exponential extrapolates a plateau above the law's ceiling b - a
        a, b = 0.12, 0.95
        h = 1.8 - 1.5 * t / (n - 1)
        p = b - a * np.exp(h)
        cols["reward"], cols["reward_std"], cols["frac_reward_zero_std"] = _batch(p, np.full(n, 6.0), rng, 8, 64)
        cols["eval_reward"] = np.where(np.isnan(cols["eval_reward"]), np.nan, 0.9 * p)
        cols["entropy"] = h * np.exp(noise(0.01))
    elif rule == "grad_norm_spikes":
        base = float(np.median(cols["grad_norm"][: n // 5]))
        for k, f in ((0.30, 20.0), (0.31, 25.0), (0.33, 18.0)):
            cols["grad_norm"][int(k * n)] = f * base
    return cols


def planted_rule_run(rule: str | None, *, seed: int, name: str | None = None, **kw):
    """:func:`make_rule_run` wrapped as a :class:`grpofit.core.runs.Run` (name ``planted-rule/<rule>/<seed>``)."""
    from grpofit.core.runs import make_run

    table = make_rule_run(rule, seed=seed, **kw)
    name = name or f"planted-rule/{rule or 'healthy'}/{seed}"
    return make_run(name, name, "planted", table, step="step")
