"""A TRL ``GRPOTrainer`` run of the kind a user reported, as the logs dicts its ``on_log`` sees.

The reported run: a small model trained on CPU for 300 steps with ``max_completion_length=12``
and 16 completions per step, healthy (the reward rises and settles) but nearly every completion
reaches the length cap: ``completions/mean_length`` sits at its maximum 12 on about half of the
late steps, ``completions/clipped_ratio`` 87.5% -> 93.8%. TRL's keys, one log event per step
(``logging_steps=1``). ``broken=True``: the same run whose reward collapses to 0 at step 200
(every group all-wrong: ``reward_std`` 0, ``frac_reward_zero_std`` 1) with the grad norm blowing up.
"""

from __future__ import annotations

import numpy as np

from grpofit.testing.planted import _batch

CAP = 12
G = 16


def trl_logs(*, seed: int = 0, n_steps: int = 300, broken: bool = False) -> list[dict]:
    rng = np.random.default_rng(seed)
    t = np.arange(n_steps, dtype=float)
    p = 0.7 - 0.55 * np.exp(-t / 60.0)
    reward, reward_std, zero = _batch(p, np.full(n_steps, 6.0), rng, G, 1)
    # completions: each of the 16 is truncated with probability q (87.5% early -> 94% late)
    q = 0.875 + 0.065 * (1 - np.exp(-t / 100.0))
    clipped = rng.binomial(G, q) / G
    short = rng.integers(4, CAP, size=n_steps)
    mean_length = clipped * CAP + (1 - clipped) * short
    grad = 0.5 * np.exp(rng.normal(0, 0.3, n_steps))
    entropy = 0.9 - 0.3 * (1 - np.exp(-t / 150.0)) + rng.normal(0, 0.02, n_steps)
    if broken:
        after = t >= 200
        reward = np.where(after, 0.0, reward)
        reward_std = np.where(after, 0.0, reward_std)
        zero = np.where(after, 1.0, zero)
        grad = np.where(after, grad * 40.0, grad)
    logs = []
    for i in range(n_steps):
        logs.append(
            {
                "loss": float(rng.normal(0, 0.01)),
                "grad_norm": float(grad[i]),
                "learning_rate": 1e-6 * (1 - i / n_steps),
                "num_tokens": float((i + 1) * G * 40),
                "completions/mean_length": float(mean_length[i]),
                "completions/min_length": float(min(short[i], CAP)),
                "completions/max_length": float(CAP),
                "completions/clipped_ratio": float(clipped[i]),
                "completions/mean_terminated_length": float(short[i]) if clipped[i] < 1 else 0.0,
                "rewards/correct/mean": float(reward[i]),
                "rewards/correct/std": float(reward_std[i]),
                "reward": float(reward[i]),
                "reward_std": float(reward_std[i]),
                "frac_reward_zero_std": float(zero[i]),
                "entropy": float(entropy[i]),
                "clip_ratio/region_mean": 0.0,
                "epoch": (i + 1) / n_steps,
            }
        )
    return logs
