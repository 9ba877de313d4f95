"""Every threshold of ``grpofit diagnose``, with its default and meaning.

``Thresholds.documentation()`` lists them for the README and ``--help``;
``Thresholds.from_overrides({"grad_rise_fail": 8})`` applies CLI overrides (unknown names raise
:class:`~grpofit.core.errors.UsageError`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Mapping

from grpofit.core.errors import UsageError


def _t(default: float, doc: str):
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class Thresholds:
    """User-tunable thresholds of the four diagnostics (defaults documented per field)."""

    # reward collapse (grpofit.fitting.collapse.find_collapse)
    collapse_min_drop: float = _t(
        0.5, "a collapse loses at least this fraction of the reward's gain (running peak minus start level)"
    )
    collapse_noise_k: float = _t(
        4.0, "... and at least this many noise sds of the reward's rolling-median level (point sd x 1.25/sqrt(window))"
    )
    # shared
    late_fraction: float = _t(0.25, "the 'late run' is the last fraction of the points (at least one rolling window)")
    baseline_fraction: float = _t(0.2, "a metric's baseline is the median over the first fraction of its points")
    # dynamical instability
    rise_warn: float = _t(
        3.0,
        "grad_norm / importance ratio / clip fraction: sustained rolling median this many times its baseline -> warn",
    )
    rise_fail: float = _t(5.0, "... this many times -> fail")
    rise_min_duration: float = _t(0.05, "a rise must last this fraction of the step span (or until the end)")
    spike_factor: float = _t(
        4.0, "a precursor spike: a single point this many times the baseline, before a sustained rise"
    )
    precursor_lookback: float = _t(0.2, "precursor spikes are searched this fraction of the step span before the rise")
    spike_warn: float = _t(10.0, "an isolated point this many times its baseline (no sustained rise) -> warn")
    clip_min_level: float = _t(
        0.05, "a clip-fraction rise counts only when the clip fraction itself reaches this level"
    )
    oscillation_fail_zeta: float = _t(
        0.3, "a decided underdamped regime warns; with damping ratio at or below this value it fails"
    )
    # advantage degeneracy
    zero_std_warn: float = _t(0.5, "late-run fraction of zero-variance groups at or above this -> warn")
    zero_std_fail: float = _t(0.75, "... at or above this -> degenerate (fail, or warn when the reward saturates)")
    zero_std_excess: float = _t(
        0.3, "observed minus mean-field p^G+(1-p)^G at or above this -> degeneracy beyond the reward level"
    )
    std_collapse: float = _t(
        0.1, "late reward_std below this fraction of its reference (peak, or 0.5 for 0/1 rewards) -> degenerate"
    )
    pin_margin: float = _t(0.02, "a 0..1 reward within this of 0 or 1 over the late run is pinned")
    # policy concentration
    entropy_half_fail: float = _t(
        0.25, "entropy left (fraction of its start) when the reward reaches half its gain: at or below -> fail"
    )
    entropy_half_warn: float = _t(0.5, "... at or below -> warn")
    entropy_ratio_fail: float = _t(
        5.0, "reward timescale / entropy timescale at or above this (entropy fell >= 50%) -> fail"
    )
    entropy_ratio_warn: float = _t(2.5, "... at or above this (entropy fell >= entropy_min_drop) -> warn")
    entropy_min_drop: float = _t(
        0.3, "the timescale ratio matters only when entropy fell at least this fraction of its start"
    )
    entropy_floor_warn: float = _t(
        0.1, "final entropy at or below this fraction of its start -> warn (a near-deterministic policy)"
    )
    # train-eval decoupling
    eval_min_points: float = _t(4, "fewer eval points than this -> unknown")
    eval_fit_points: float = _t(
        8, "from this many eval points on, both curves get a quick exponential fit (timescales, gains)"
    )
    eval_noise_k: float = _t(4.0, "an eval fall or stall must exceed this many sds of the compared levels")
    eval_drop: float = _t(
        0.3, "eval falling this fraction of its gain below its peak while train does not fall -> fail"
    )
    eval_fall_min: float = _t(
        0.05, "... and by at least this fraction of the eval's peak level (a flat benchmark does not 'fall' by a point)"
    )
    eval_stall_share: float = _t(
        0.2, "train must still make this share of its gain in the second half for an eval stall to count"
    )
    eval_timescale_ratio: float = _t(
        4.0,
        "the 95% interval of train timescale / eval timescale wholly at or above this (eval saturates early) -> warn",
    )
    eval_plateau_ratio: float = _t(
        4.0,
        "the 95% interval of the eval plateau's share of its headroom wholly below 1/this of the train reward's (levels off low) -> warn",
    )
    # reward hacking without an eval set (train-eval decoupling when no eval series exists)
    hack_window: float = _t(20, "sliding window (points) for the KL and reward slopes")
    kl_slope_min: float = _t(
        0.005,
        "KL slope per step above this, with the reward slope > 0 and KL slope / reward slope > kl_reward_slope_ratio -> warn",
    )
    kl_reward_slope_ratio: float = _t(3.0, "... KL slope / reward slope above this")
    length_corr_warn: float = _t(
        0.6, "|corr(reward, response length)| above this with a length drift over length_drift -> warn"
    )
    length_corr_strong: float = _t(0.8, "... above this is strong: fail together with a KL slope or KL target finding")
    length_drift: float = _t(0.3, "response length moving more than this fraction from its early median")
    kl_target_warn: float = _t(0.1, "late-run KL to the reference (where a KL penalty is logged) above this -> warn")
    kl_target_fail: float = _t(0.3, "... above this -> fail")
    # truncation (dynamical instability)
    truncation_healthy: float = _t(0.05, "a healthy run truncates at most this fraction of responses on most steps")
    truncation_warn: float = _t(0.10, "late-run truncated-response rate at or above this -> warn")
    truncation_fail: float = _t(
        0.15, "... at or above this and risen from below truncation_healthy (or doubled) -> fail"
    )
    length_cap_share: float = _t(
        0.3, "mean response length at its maximum (every response truncated) on this share of the late steps -> fail"
    )
    # entropy floors and blow-ups
    entropy_window: float = _t(
        30, "points averaged at the start and at the end of the run for the entropy floor and fall"
    )
    entropy_floor_abs: float = _t(
        0.1,
        "mean entropy over the last entropy_window points below this (nats/token) while the reward still rises -> fail",
    )
    entropy_fall: float = _t(
        0.5, "entropy down more than this fraction of its first-window mean while the reward still rises -> warn"
    )
    entropy_blowup_factor: float = _t(
        3.0,
        "entropy rolling median this many times its early median, sustained -> warn; with the reward falling -> fail (instability)",
    )
    # advantage degeneracy from group statistics
    group_std_floor: float = _t(
        0.01, "mean within-group reward std over the last group_std_window points below this -> degenerate"
    )
    group_std_window: float = _t(20, "points in the late window of the within-group std rule")
    # off-policy and async health
    is_mean_low: float = _t(
        0.5, "importance-ratio mean (rolling median) below this, sustained -> fail (transient -> warn)"
    )
    is_mean_high: float = _t(2.0, "... above this, sustained -> fail (transient -> warn)")
    ess_min: float = _t(0.3, "effective sample size fraction below this, sustained -> fail (transient -> warn)")
    is_std_max: float = _t(1.0, "importance-ratio std above this, sustained -> fail (transient -> warn)")
    rollout_kl_max: float = _t(0.1, "|rollout-vs-train KL| above this, sustained -> fail (transient -> warn)")
    # entropy-reward law R = -a exp(H) + b
    entropy_law_min_r2: float = _t(
        0.3, "the law is used only when it explains at least this share of the reward's variance"
    )
    # spike clusters
    spike_cluster_gap: float = _t(
        0.05, "spikes (spike_warn x baseline) closer than this fraction of the step span form one cluster"
    )

    @classmethod
    def documentation(cls) -> list[dict]:
        """``[{"name", "default", "doc"}]`` for every threshold, in declaration order."""
        return [{"name": f.name, "default": f.default, "doc": f.metadata["doc"]} for f in fields(cls)]

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, float] | None = None) -> "Thresholds":
        """Defaults with ``overrides`` applied (names as in :meth:`documentation`)."""
        base = cls()
        if not overrides:
            return base
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise UsageError(
                f"unknown threshold(s): {', '.join(unknown)}",
                fix="use one of: " + ", ".join(sorted(known)),
            )
        try:
            values = {k: float(v) for k, v in overrides.items()}
        except (TypeError, ValueError) as e:
            raise UsageError(f"threshold values must be numbers ({e})", fix="e.g. --threshold rise_fail=8") from None
        from grpofit.core.limits import check_thresholds

        return replace(base, **check_thresholds(values))
