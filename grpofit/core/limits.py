"""Bounds on every value a user controls: rule thresholds, ``--min-r2``, ``--jobs``, the sizes
``simulate`` and ``predict`` accept, and how much of a stream or config grpofit reads.

A value outside its range is bad usage (exit 2, one line naming the option and its range), never
a silent pass: NaN compares false with everything, so an unchecked ``--threshold x=nan`` or
``--min-r2 nan`` would turn every failure into a pass.
"""

from __future__ import annotations

import math
import os

from grpofit.core.errors import UsageError

INF = math.inf

#: valid closed range of each rule threshold (``--threshold NAME=VALUE``); a threshold not listed
#: here (a rule added later) must be a finite number >= 0
THRESHOLD_RANGES: dict[str, tuple[float, float]] = {
    "collapse_min_drop": (0.0, 1.0),
    "collapse_noise_k": (0.0, 1e6),
    "late_fraction": (0.01, 1.0),
    "baseline_fraction": (0.01, 1.0),
    "rise_warn": (1.0, 1e12),
    "rise_fail": (1.0, 1e12),
    "rise_min_duration": (0.0, 1.0),
    "spike_factor": (1.0, 1e12),
    "precursor_lookback": (0.0, 1.0),
    "spike_warn": (1.0, 1e12),
    "clip_min_level": (0.0, 1.0),
    "oscillation_fail_zeta": (0.0, 1.0),
    "zero_std_warn": (0.0, 1.0),
    "zero_std_fail": (0.0, 1.0),
    "zero_std_excess": (0.0, 1.0),
    "std_collapse": (0.0, 1.0),
    "pin_margin": (0.0, 0.5),
    "entropy_half_fail": (0.0, 1.0),
    "entropy_half_warn": (0.0, 1.0),
    "entropy_ratio_fail": (0.0, 1e12),
    "entropy_ratio_warn": (0.0, 1e12),
    "entropy_min_drop": (0.0, 1.0),
    "entropy_floor_warn": (0.0, 1.0),
    "eval_min_points": (1.0, 1e9),
    "eval_fit_points": (1.0, 1e9),
    "eval_noise_k": (0.0, 1e6),
    "eval_drop": (0.0, 1.0),
    "eval_stall_share": (0.0, 1.0),
    "eval_timescale_ratio": (0.0, 1e12),
    "eval_plateau_ratio": (1.0, 1e12),
    "eval_fall_min": (0.0, 1.0),
    # the diagnostic rules (grpofit.diagnostics: hacking, truncation, entropy_*, groups, offpolicy, spikes)
    "hack_window": (3.0, 1e6),
    "kl_slope_min": (0.0, 1e12),
    "kl_reward_slope_ratio": (0.0, 1e12),
    "length_corr_warn": (0.0, 1.0),
    "length_corr_strong": (0.0, 1.0),
    "length_drift": (0.0, 1e12),
    "kl_target_warn": (0.0, 1e12),
    "kl_target_fail": (0.0, 1e12),
    "truncation_healthy": (0.0, 1.0),
    "truncation_warn": (0.0, 1.0),
    "truncation_fail": (0.0, 1.0),
    "length_cap_share": (0.0, 1.0),
    "entropy_window": (3.0, 1e6),
    "entropy_floor_abs": (0.0, 1e6),
    "entropy_fall": (0.0, 1.0),
    "entropy_blowup_factor": (1.0, 1e12),
    "group_std_floor": (0.0, 1e12),
    "group_std_window": (3.0, 1e6),
    "is_mean_low": (0.0, 1.0),
    "is_mean_high": (1.0, 1e12),
    "ess_min": (0.0, 1.0),
    "is_std_max": (0.0, 1e12),
    "rollout_kl_max": (0.0, 1e12),
    "entropy_law_min_r2": (0.0, 1.0),
    "spike_cluster_gap": (0.0, 1.0),
}
#: range of a threshold without an entry above
DEFAULT_RANGE = (0.0, 1e12)

#: ``--min-r2``: an R² bound (R² is at most 1)
MIN_R2_RANGE = (-1.0, 1.0)

#: ``simulate bandit`` sizes: beyond these a run needs more memory or hours than a laptop has
#: (measured: 160,000 samples a step took 2.7 GB; 100,000 arms asked for a 75 GB matrix)
MAX_SIM_ARMS = 1_000
MAX_SIM_STEPS = 1_000_000
#: samples drawn per simulated step: ``--groups`` x ``--group-size`` (about 17 KB each)
MAX_SIM_SAMPLES_PER_STEP = 16_384
#: learning rates and KL weights (the bandit's logits overflow long before these)
MAX_RATE = 1e3
#: ``predict --group-size`` (only 1/G matters) and, with ``--beta``, the finite-G bandit plateau
#: whose cost grows with G (10,000: about 7 s; 100,000: over a minute)
MAX_PREDICT_GROUP_SIZE = 10**9
MAX_PREDICT_BANDIT_GROUP_SIZE = 10_000
#: ``predict`` inputs: the closed forms overflow beyond these
MAX_PREDICT_LR = 1e6
MAX_CURVATURE = 1e12
MAX_REFRESH = 1e6
MAX_NOISE = 1e12

#: step options (``--horizon``, ``--at``, ``--until``): at most this in size (the forecast's
#: proposals overflowed near 1e308; 1e15 is still an exact integer as a float)
MAX_STEP = 1e15

#: a named pipe or standard input is read up to this many bytes
MAX_STREAM_BYTES = 2 * 1024**3
#: config files: bytes read, keys kept after flattening, nesting depth followed
MAX_CONFIG_BYTES = 20_000_000
MAX_CONFIG_KEYS = 100_000
MAX_CONFIG_DEPTH = 64
#: distinct columns of a JSONL log (its table is dense: one float per row and column, so a row
#: of 200,000 keys would make every row 1.6 MB); more is an error naming the line
MAX_COLUMNS = 10_000


def _fmt(x: float) -> str:
    return f"{x:g}"


def check_range(what: str, value: float, lo: float, hi: float, fix: str | None = None, sep: str = " ") -> float:
    """``value`` as a float when it is a finite number in ``[lo, hi]``; else :class:`UsageError`
    naming ``what`` (an option), the value and the range."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise UsageError(
            f"{what} must be a number, not {value!r}", fix=fix or f"use a value in [{_fmt(lo)}, {_fmt(hi)}]"
        ) from None
    if not math.isfinite(x) or not lo <= x <= hi:
        raise UsageError(
            f"{what}{sep}{_fmt(x)} is out of range",
            fix=fix or f"use a finite value in [{_fmt(lo)}, {_fmt(hi)}]",
        )
    return x


def check_step(option: str, value: float, *, example: str, positive: bool = False) -> float:
    """A step option's value: finite, at most :data:`MAX_STEP` in size, and above 0 when
    ``positive``; else one line naming the option, the value and the range."""
    x = float(value)
    ok = math.isfinite(x) and abs(x) <= MAX_STEP and (x > 0 or not positive)
    if not ok:
        kind = (
            f"a positive step of at most {_fmt(MAX_STEP)}"
            if positive
            else f"a step in [{_fmt(-MAX_STEP)}, {_fmt(MAX_STEP)}]"
        )
        raise UsageError(f"{option} {_fmt(x)} is out of range", fix=f"{option} takes {kind}, e.g. {option} {example}")
    return x


def check_thresholds(values: dict[str, float]) -> dict[str, float]:
    """Every override checked against its range (NaN and infinities are never valid)."""
    out = {}
    for name, value in values.items():
        lo, hi = THRESHOLD_RANGES.get(name, DEFAULT_RANGE)
        out[name] = check_range(
            f"--threshold {name}",
            value,
            lo,
            hi,
            fix=f"{name} takes a finite value in [{_fmt(lo)}, {_fmt(hi)}]",
            sep="=",
        )
    return out


def check_min_r2(value: float | None) -> float | None:
    if value is None:
        return None
    lo, hi = MIN_R2_RANGE
    return check_range("--min-r2", value, lo, hi, fix=f"--min-r2 takes a finite R² bound in [{_fmt(lo)}, {_fmt(hi)}]")


def cap_jobs(jobs: int, runs: int) -> int:
    """Worker processes actually started: at most the CPUs available and the runs to judge."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(int(jobs), cpus, max(runs, 1)))


def check_simulate(
    *,
    arms: int,
    correct: int,
    lr: float,
    momentum: float,
    refresh_interval: int,
    group_size: int,
    groups: int,
    beta: float,
    steps: int,
    seed: int,
) -> None:
    """``simulate bandit`` options inside the bounds that keep a run within memory and hours."""
    check_range("--arms", arms, 2, MAX_SIM_ARMS)
    check_range("--correct", correct, 1, MAX_SIM_ARMS)
    check_range("--lr", lr, 1e-300, MAX_RATE, fix=f"--lr takes a finite value in (0, {MAX_RATE:g}]")
    check_range("--momentum", momentum, 0.0, 0.999999, fix="--momentum takes a value in [0, 1)")
    check_range("--refresh-interval", refresh_interval, 1, MAX_SIM_STEPS)
    check_range("--beta", beta, 0.0, MAX_RATE)
    check_range("--steps", steps, 1, MAX_SIM_STEPS)
    check_range("--group-size", group_size, 0, MAX_SIM_SAMPLES_PER_STEP)
    check_range("--groups", groups, 1, MAX_SIM_SAMPLES_PER_STEP)
    check_range("--seed", seed, 0, 2**63 - 1, fix="--seed takes a whole number >= 0")
    if max(group_size, 1) * groups > MAX_SIM_SAMPLES_PER_STEP:
        raise UsageError(
            f"--groups {groups} x --group-size {group_size} = {max(group_size, 1) * groups} samples a step is too many",
            fix=f"keep --groups x --group-size <= {MAX_SIM_SAMPLES_PER_STEP}",
        )


def check_predict(
    *, lr, momentum, refresh_interval, curvature, group_size, noise, beta, arms, correct, what_if
) -> None:
    """``predict`` options finite and inside the range where the closed forms hold."""
    if lr is not None:
        check_range("--lr", lr, 1e-300, MAX_PREDICT_LR, fix=f"--lr takes a finite value in (0, {MAX_PREDICT_LR:g}]")
    if momentum is not None:
        check_range("--momentum", momentum, 0.0, 1.0)
    if refresh_interval is not None:
        check_range("--refresh-interval", refresh_interval, 1.0, MAX_REFRESH)
    if curvature is not None:
        check_range(
            "--curvature",
            curvature,
            1e-300,
            MAX_CURVATURE,
            fix=f"--curvature takes a finite value in (0, {MAX_CURVATURE:g}]",
        )
    if noise is not None:
        check_range("--noise", noise, 0.0, MAX_NOISE)
    if group_size is not None:
        hi = MAX_PREDICT_BANDIT_GROUP_SIZE if beta is not None else MAX_PREDICT_GROUP_SIZE
        why = " with --beta" if beta is not None else ""
        check_range("--group-size", group_size, 1, hi, fix=f"--group-size{why} takes a whole number in [1, {hi:g}]")
    if beta is not None:
        check_range("--beta", beta, 0.0, MAX_RATE)
        check_range("--arms", arms, 2, MAX_SIM_ARMS)
        check_range("--correct", correct, 1, MAX_SIM_ARMS)
    bounds = {"lr": (1e-300, MAX_PREDICT_LR), "momentum": (0.0, 1.0), "refresh_interval": (1.0, MAX_REFRESH)}
    for key, value in (what_if or {}).items():
        if value is not None:
            lo, hi = bounds[key]
            check_range("--what-if-" + key.replace("_", "-"), value, lo, hi)
