"""Bounds on every value a user controls: rule thresholds, ``--min-r2``, ``--jobs``, the sizes
``simulate`` and ``predict`` accept, and how much of a stream or config grpofit reads.

A value outside its range is bad usage (exit 2, one line naming the option and its range), never
a silent pass: NaN compares false with everything, so an unchecked ``--threshold x=nan`` or
``--min-r2 nan`` would turn every failure into a pass.
"""

from __future__ import annotations

import math
import os

from grpofit.errors import UsageError

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
    "eval_fall_min": (0.0, 1.0),
    # issue 16 rules (grpofit.diagnostics: hacking, truncation, entropy_*, groups, offpolicy, spikes)
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
MAX_SIM_GROUP_SIZE = 100_000
MAX_SIM_GROUPS = 100_000
MAX_SIM_ARMS = 100_000
MAX_SIM_STEPS = 10_000_000
#: samples drawn per simulated step (arms x groups x group size bounds the work of one step)
MAX_SIM_SAMPLES_PER_STEP = 10_000_000
#: ``predict --group-size`` with ``--beta`` (the finite-G bandit plateau sums over G)
MAX_PREDICT_GROUP_SIZE = 100_000
MAX_PREDICT_ARMS = 100_000

#: a named pipe or standard input is read up to this many bytes
MAX_STREAM_BYTES = 2 * 1024**3
#: config files: bytes read, keys kept after flattening, nesting depth followed
MAX_CONFIG_BYTES = 20_000_000
MAX_CONFIG_KEYS = 100_000
MAX_CONFIG_DEPTH = 64
#: JSONL rows: keys per row (a row with more is an error, not a table of 200,000 columns)
MAX_ROW_KEYS = 10_000


def _fmt(x: float) -> str:
    return f"{x:g}"


def check_range(what: str, value: float, lo: float, hi: float, fix: str | None = None, sep: str = " ") -> float:
    """``value`` as a float when it is a finite number in ``[lo, hi]``; else :class:`UsageError`
    naming ``what`` (an option), the value and the range."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{what} must be a number, not {value!r}", fix=fix or f"use a value in [{_fmt(lo)}, {_fmt(hi)}]") from None
    if not math.isfinite(x) or not lo <= x <= hi:
        raise UsageError(
            f"{what}{sep}{_fmt(x)} is out of range",
            fix=fix or f"use a finite value in [{_fmt(lo)}, {_fmt(hi)}]",
        )
    return x


def check_thresholds(values: dict[str, float]) -> dict[str, float]:
    """Every override checked against its range (NaN and infinities are never valid)."""
    out = {}
    for name, value in values.items():
        lo, hi = THRESHOLD_RANGES.get(name, DEFAULT_RANGE)
        out[name] = check_range(
            f"--threshold {name}", value, lo, hi, fix=f"{name} takes a finite value in [{_fmt(lo)}, {_fmt(hi)}]", sep="="
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
