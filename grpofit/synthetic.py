"""Seeded synthetic runs that look like real GRPO reward logs (for recovery tests and demos).

A truth is a damped-oscillator trajectory (:func:`grpofit.models.oscillator`) in any regime
(damping ratio 0.3 .. 3), plateau 0.3 .. 0.95, initial 0 .. 0.4, timescale 20 .. 600 steps,
run length 150 .. 3000 steps, logged every 1, 5 or 10 steps, starting at step 0, 1 or 101.
Runs are long enough to settle: at least six settling times ``Ts * max(1, 1/(2 zeta^2))``
(the envelope time ``2 * inertia`` of an underdamped run), so the plateau is identifiable.

The logged reward at a step is the mean of a batch of ``n`` binary rewards,
``Binomial(n, p) / n`` (``n`` = 64 .. 512), where ``p`` is the expected reward plus a small
stochastic forcing: an Ornstein-Uhlenbeck (AR(1) per step) perturbation started at zero with
stationary sd 0.002 .. 0.01 and correlation time 0.3 .. 1 timescale, the first-order picture of
the ``sqrt(D/G) xi`` forcing of the oscillator. Only numpy is imported.
"""

from __future__ import annotations

import numpy as np

from grpofit.models import oscillator

__all__ = ["sample_truth", "make_run_table", "recovery_set", "settling_time"]


def settling_time(timescale: float, damping_ratio: float) -> float:
    """``Ts * max(1, 1 / (2 zeta^2))``: the slowest decay time of the trajectory."""
    return float(timescale * max(1.0, 1.0 / (2.0 * damping_ratio**2)))


def _loguniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def sample_truth(rng: np.random.Generator) -> dict:
    """One random truth (see the module docstring for the ranges)."""
    zeta = _loguniform(rng, 0.3, 3.0)
    factor = max(1.0, 1.0 / (2.0 * zeta**2))
    ts = _loguniform(rng, 20.0, min(600.0, 3000.0 / (6.0 * factor)))
    length = int(round(_loguniform(rng, max(150.0, 6.0 * factor * ts), 3000.0)))
    strides = [s for s in (1, 5, 10) if length / s >= 40]
    stride = int(rng.choice(strides))
    plateau = float(rng.uniform(0.3, 0.95))
    initial = float(rng.uniform(0.0, min(0.4, plateau - 0.1)))
    return {
        "plateau": plateau,
        "initial": initial,
        "timescale": ts,
        "inertia": ts / (4.0 * zeta**2),
        "damping_ratio": zeta,
        "length": length,
        "stride": stride,
        "start": int(rng.choice([0, 1, 101])),
        "batch": int(round(_loguniform(rng, 64, 512))),
        "forcing_sd": _loguniform(rng, 0.002, 0.01),
        "forcing_time": ts * float(rng.uniform(0.3, 1.0)),
    }


def make_run_table(truth: dict, *, seed: int | np.random.SeedSequence = 0) -> dict[str, np.ndarray]:
    """Simulate one logged run of ``truth``: ``{"step", "reward", "expected"}``.

    ``expected`` is the exact expected reward ``oscillator(step - step[0], ...)``; ``reward``
    is ``Binomial(batch, clip(expected + x, 0, 1)) / batch`` with ``x`` the OU forcing
    ``x[k+1] = phi x[k] + sd sqrt(1 - phi^2) eps``, ``phi = exp(-1/forcing_time)``, ``x[0] = 0``
    (simulated every step, read at the logged steps). Keys missing from ``truth`` default to
    a clean 300-step run logged every step.
    """
    rng = np.random.default_rng(seed)
    length = int(truth.get("length", 300))
    stride = int(truth.get("stride", 1))
    start = int(truth.get("start", 0))
    t_all = np.arange(length + 1, dtype=float)
    expected_all = oscillator(
        t_all, truth["plateau"], truth["initial"], truth["timescale"], truth.get("inertia", 0.0)
    )
    sd = float(truth.get("forcing_sd", 0.0))
    x = np.zeros(t_all.size)
    if sd > 0:
        phi = float(np.exp(-1.0 / max(float(truth.get("forcing_time", truth["timescale"])), 1e-9)))
        eps = rng.standard_normal(t_all.size - 1) * sd * np.sqrt(1.0 - phi * phi)
        # x[k] = sum_j phi^(k-j) eps[j]: a short python loop is fast enough for <= 3000 steps
        acc = 0.0
        for k in range(1, t_all.size):
            acc = phi * acc + eps[k - 1]
            x[k] = acc
    idx = np.arange(0, length + 1, stride)
    p = np.clip(expected_all[idx] + x[idx], 0.0, 1.0)
    batch = int(truth.get("batch", 256))
    reward = rng.binomial(batch, p) / batch
    return {"step": (start + idx).astype(float), "reward": reward, "expected": expected_all[idx]}


def recovery_set(n: int = 120, seed: int = 0) -> list[tuple[dict, dict[str, np.ndarray]]]:
    """``n`` seeded ``(truth, table)`` pairs; run ``i`` depends only on ``(seed, i)``."""
    out = []
    for i, child in enumerate(np.random.SeedSequence([seed, 0x67F]).spawn(n)):
        rng = np.random.default_rng(child)
        truth = sample_truth(rng)
        truth["index"] = i
        out.append((truth, make_run_table(truth, seed=child.spawn(1)[0])))
    return out
