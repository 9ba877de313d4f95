"""Seeded synthetic runs that look like real GRPO reward logs (for recovery tests and demos).

A truth is a damped-oscillator trajectory (:func:`grpofit.laws.models.oscillator`) in any regime
(damping ratio 0.3 .. 3), plateau 0.3 .. 0.95, initial 0 .. 0.4, timescale 20 .. 600 steps,
run length 150 .. 3000 steps, logged every 1, 5 or 10 steps, starting at step 0, 1 or 101.
Runs are long enough to settle: at least six settling times ``Ts * max(1, 1/(2 zeta^2))``
(the envelope time ``2 * inertia`` of an underdamped run), so the plateau is identifiable.

The logged reward at a step is the mean of a batch of ``n`` binary rewards,
``Binomial(n, p) / n`` (``n`` = 64 .. 512), where ``p`` is the expected reward plus a small
stochastic forcing: an Ornstein-Uhlenbeck (AR(1) per step) perturbation started at zero with
stationary sd 0.002 .. 0.01 and correlation time 0.3 .. 1 timescale, the first-order picture of
the ``sqrt(D/G) xi`` forcing of the oscillator. Only numpy is imported.

**Forcing inside the dynamics** (docs/theory.md §6; :func:`make_forced_run`, :func:`forced_recovery_set`):
the forcing enters the oscillator's velocity, ``Ti e'' + e' + e/Ts = q xi`` (or, for a run with
two classes of prompts, the slow mode of ``e = a1 exp(-t/T1) + a2 exp(-t/T2)``, theory §7), and
is simulated exactly per step from the discretised linear system (``F = exp(A)``, ``Q`` its
process covariance), so it moves the run off its curve for a whole relaxation. Strength: the
stationary sd of ``e`` (:data:`FORCING_LEVELS`). The logged reward is binomial around the
forced expected reward. Drawing these imports scipy (``expm``).
"""

from __future__ import annotations

import numpy as np

from grpofit.laws.models import oscillator

__all__ = [
    "sample_truth",
    "make_run_table",
    "recovery_set",
    "settling_time",
    "forced_path",
    "make_forced_run",
    "sample_forced_truth",
    "forced_recovery_set",
    "FORCING_LEVELS",
]


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
    expected_all = oscillator(t_all, truth["plateau"], truth["initial"], truth["timescale"], truth.get("inertia", 0.0))
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


# --------------------------------------------------------------------------- forcing in the dynamics

#: stationary sd of the forced error ``e`` (reward units): none, weak, medium, strong
FORCING_LEVELS = (0.0, 0.005, 0.015, 0.03)


def forced_path(n_steps: int, law: str, times, sd: float, rng: np.random.Generator) -> np.ndarray:
    """The forced part of ``e`` at steps ``0 .. n_steps`` (exactly 0 at step 0), simulated with
    the exact one-step transition of the law's linear system (:mod:`grpofit.forecasting.kalman`)."""
    out = np.zeros(n_steps + 1)
    if sd <= 0:
        return out
    from grpofit.forecasting.kalman import _discrete, system

    A, B, H = system(law, times, sd)
    F, Q = _discrete(A, B, 1.0)
    w, V = np.linalg.eigh(0.5 * (Q + Q.T))
    root = V * np.sqrt(np.maximum(w, 0.0))
    noise = rng.standard_normal((n_steps, A.shape[0])) @ root.T
    x = np.zeros(A.shape[0])
    h = H[0]
    for k in range(n_steps):  # a few thousand steps of a 2x2 recursion: fine for a generator
        x = F @ x + noise[k]
        out[k + 1] = h @ x
    return out


def sample_forced_truth(rng: np.random.Generator, *, regime: str, forcing_sd: float) -> dict:
    """A truth for one stratum: ``regime`` is ``overdamped``, ``underdamped`` or ``two_class``."""
    plateau = float(rng.uniform(0.5, 0.9))
    initial = float(rng.uniform(0.05, min(0.35, plateau - 0.2)))
    length = int(rng.choice([300, 600, 1000]))
    truth = {
        "plateau": plateau,
        "initial": initial,
        "length": length,
        "stride": 1,
        "start": 1,
        "batch": int(rng.choice([128, 256, 512])),
        "forcing_sd": float(forcing_sd),
        "regime": regime,
    }
    if regime == "two_class":
        t_fast = _loguniform(rng, 3.0, length / 40.0)
        t_slow = _loguniform(rng, max(6.0 * t_fast, length / 12.0), length / 5.0)
        w_fast = float(rng.uniform(0.4, 0.8))
        truth.update(
            {
                "fast_timescale": t_fast,
                "slow_timescale": t_slow,
                "fast_weight": w_fast,
                "timescale": t_slow,
                "inertia": 0.0,
                "damping_ratio": None,
            }
        )
    else:
        zeta = _loguniform(rng, 1.5, 3.0) if regime == "overdamped" else _loguniform(rng, 0.35, 0.7)
        factor = max(1.0, 1.0 / (2.0 * zeta**2))
        ts = _loguniform(rng, 10.0, length / (6.0 * factor))
        truth.update({"timescale": ts, "inertia": ts / (4.0 * zeta**2), "damping_ratio": zeta})
    return truth


def make_forced_run(truth: dict, *, seed: int | np.random.SeedSequence = 0) -> dict[str, np.ndarray]:
    """One logged run with the forcing inside the dynamics: ``{"step", "reward", "expected",
    "latent"}``; ``expected`` is the deterministic curve, ``latent`` the forced expected reward
    the binomial batch is drawn around."""
    rng = np.random.default_rng(seed)
    length = int(truth.get("length", 300))
    t_all = np.arange(length + 1, dtype=float)
    p, p0 = truth["plateau"], truth["initial"]
    if "fast_timescale" in truth:
        wf = truth["fast_weight"]
        gain = p0 - p
        expected = p + gain * (
            wf * np.exp(-t_all / truth["fast_timescale"]) + (1.0 - wf) * np.exp(-t_all / truth["slow_timescale"])
        )
        forced = forced_path(
            length, "two", (truth["fast_timescale"], truth["slow_timescale"]), truth.get("forcing_sd", 0.0), rng
        )
    else:
        expected = oscillator(t_all, p, p0, truth["timescale"], truth.get("inertia", 0.0))
        forced = forced_path(
            length,
            "oscillator",
            (truth["timescale"], max(truth.get("inertia", 0.0), 1e-6)),
            truth.get("forcing_sd", 0.0),
            rng,
        )
    latent = np.clip(expected + forced, 0.0, 1.0)
    stride = int(truth.get("stride", 1))
    idx = np.arange(0, length + 1, stride)
    batch = int(truth.get("batch", 256))
    reward = rng.binomial(batch, latent[idx]) / batch
    start = int(truth.get("start", 0))
    return {"step": (start + idx).astype(float), "reward": reward, "expected": expected[idx], "latent": latent[idx]}


def forced_recovery_set(
    n_per_stratum: int = 10, seed: int = 0, *, levels=FORCING_LEVELS, regimes=("overdamped", "underdamped", "two_class")
) -> list[tuple[dict, dict]]:
    """Seeded ``(truth, table)`` pairs, ``n_per_stratum`` for every forcing level x regime."""
    out = []
    root = np.random.SeedSequence([seed, 0x5EED])
    children = root.spawn(len(levels) * len(regimes) * n_per_stratum)
    i = 0
    for level in levels:
        for regime in regimes:
            for _ in range(n_per_stratum):
                child = children[i]
                rng = np.random.default_rng(child)
                truth = sample_forced_truth(rng, regime=regime, forcing_sd=level)
                truth["index"] = i
                out.append((truth, make_forced_run(truth, seed=child.spawn(1)[0])))
                i += 1
    return out
