"""Which column plays which role (reward, eval reward, entropy, ...), by the names real runs use.

The patterns come from docs/formats.md. Each role is a list of regular expressions tried
in order against every column; the first pattern that matches any column wins, and within one
pattern the first column (in the file's order) wins. ``--metric`` / ``--eval-metric`` override.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable, Mapping, Sequence

ROLES = (
    "reward",
    "eval_reward",
    "reward_std",
    "zero_std_frac",
    "entropy",
    "kl",
    "grad_norm",
    "clip_ratio",
    "is_ratio",
    "response_length",
    # diagnostic metrics: truncation, group statistics, off-policy health
    "truncation",
    "truncated_count",
    "rollout_count",
    "filter_pass_rate",
    "is_mean",
    "is_std",
    "is_ess",
    "rollout_kl",
)

_VAL = r"(?:val-core|val-aux)/.+/(?:reward|acc|score|[^/]+)/mean(?:@|_at_)\d+"

PATTERNS: dict[str, tuple[str, ...]] = {
    "reward": (
        r"reward",
        r"train/reward",
        r"train_reward",
        r"rewards?/mean",
        r"critic/score/mean",
        r"critic/rewards/mean",
        r"train/rewards?/mean",
        r"train/rewards/[^/]+/mean",
        r"rewards/[^/]+/mean",
        r"train/rewards?/[^/]+",
        r"train/score",
        r"score",
        r"episode_reward",
        r"train/episode_reward",
        r"mean_reward",
        # custom loops (Reasoning-from-Scratch, hand-written GRPO, console "Reward: x" lines)
        r"reward_avg",
        r"avg_reward",
        r"reward_mean",
        r"Reward",
        r"(?:training|rollout|rollouts)/reward",
        r"(?:train|training|rollout|rollouts)/(?:mean_reward|reward_avg|avg_reward|reward_mean)",
        r"(?:train|training|rollout|rollouts)/rewards?/mean",
        r"train/rollout/(?:reward_mean|reward)",
        # TRL before March 2025: one column per reward function, without "/mean"
        r"rewards/(?!(?:mean|std|min|max)\Z)[^/]+",
        r"accuracy",
        r"(?:train|training|rollout|rollouts)[/_]acc(?:uracy)?",
    ),
    "eval_reward": (
        r"eval_reward",
        r"eval/reward",
        r"eval_rewards?/mean",
        r"eval/rewards?/mean",
        r"eval_rewards/[^/]+/mean",
        r"eval/rewards/[^/]+/mean",
        # TRL before March 2025: per reward function without "/mean" (W&B: eval/rewards/<fn>)
        r"eval_rewards/(?!(?:mean|std|min|max)\Z)[^/]+",
        r"eval/rewards/(?!(?:mean|std|min|max)\Z)[^/]+",
        r"val-core/.+/reward/mean(?:@|_at_)1",
        r"val-core/.+/mean(?:@|_at_)\d+",
        r"val/test_score/.+",
        r"val/reward",
        r"val-aux/.+/reward/mean(?:@|_at_)1",
        r"eval/.+_pass@?1",
        r"eval/.+_acc(?:uracy)?",
        r"eval/accuracy",
        r"eval_accuracy",
        r"eval/score",
        r"eval_acc",
        r"(?:eval|val|valid|validation|test)[/_](?:mean_reward|reward_avg|avg_reward|reward_mean|acc|accuracy|score)",
        r"(?:valid|validation|test)/reward",
        # TRL with several eval datasets: eval_<ds>_reward, eval_<ds>_rewards/<fn>/mean (diagnostics)
        r"eval_[^/]+_reward",
        r"eval_[^/]+_rewards/[^/]+/mean",
    ),
    "reward_std": (
        r"group_reward_std",
        r"train/group_reward_std",
        r"reward_std",
        r"rewards?/std",
        r"train/reward_std",
        r"group_reward_std",
        r"rewards/[^/]+/std",
        r"train/rewards/[^/]+/std",
        r"critic/score/std",
        r"(?:train|training|rollout|rollouts)/(?:reward_std|std_reward|reward/std)",
        r"train/rollout/reward_std",
        r"(?:reward|rewards)_std_mean",
    ),
    "zero_std_frac": (
        r"frac_reward_zero_std",
        r"train/frac_reward_zero_std",
        r"zero_std_ratio",
        r".*/zero_std_ratio",
        r".*frac_reward_zero_std",
        r".*zero_adv(?:antage)?_ratio",
    ),
    "entropy": (
        r"entropy",
        r"actor/entropy",
        r"train/entropy",
        r"actor/entropy_loss",
        r"entropy_loss",
        r"train/(?:policy_)?entropy(?:_loss)?",
        r"entropy_avg",
        r"policy/entropy",
        r".*/entropy(?:_loss)?",
        r"(?:.*/)?token_entropy",
    ),
    "kl": (
        r"kl",
        r"train/kl",
        r"actor/kl_loss",
        r"actor/ppo_kl",
        r"critic/kl",
        r"objective/kl",
        r"kl_loss",
        r"kl_div(?:ergence)?",
        r"(?:.*/)?ppo_kl",
        r".*/kl(?:_loss)?",
    ),
    "grad_norm": (
        r"grad_norm",
        r"actor/grad_norm",
        r"train/grad_norm",
        r"actor_grad_norm",
        r"train/actor_grad_norm",
        r".*/grad_norm",
    ),
    "clip_ratio": (
        r"clip_ratio/region_mean",
        r"clip_ratio",
        r"train/clip_ratio/region_mean",
        r"actor/pg_clipfrac",
        r"ppo_clip_ratio",
        r"clip_ratio/high_max",
        r".*clip_ratio.*",
        r".*clipfrac.*",
    ),
    "is_ratio": (
        r"sampling/importance_sampling_ratio/max",
        r".*importance_sampling_ratio/max",
        r".*importance_sampling_ratio.*",
        r".*is_ratio.*",
    ),
    "response_length": (
        r"completions/mean_length",
        r"completion_length",
        r"response_length/mean",
        r"train/completions/mean_length",
        r".*response_length/mean",
        r".*mean_length",
        r"avg_response_len(?:gth)?",
        r"avg_gen_tokens",
        r"train/completion_length",
        r"response_length",
        r".*/response_length",
    ),
    "truncation": (
        r"response_length/clip_ratio",
        r"completions/clipped_ratio",
        r"train/completions/clipped_ratio",
        r"rollout/truncated_rate",
        r"train/rollout/truncated_rate",
        r".*truncat(?:ed|ion)_(?:rate|ratio|frac(?:tion)?)",
        r".*response_length[^/]*/clip_ratio",
    ),
    "truncated_count": (r"truncated_count", r"num_truncated", r".*/truncated_count"),
    "rollout_count": (r"rollout_count", r"num_rollouts", r".*/rollout_count"),
    "filter_pass_rate": (r"dynamic_filtering_pass_rate", r".*/dynamic_filtering_pass_rate"),
    "is_mean": (
        r"rollout_corr/rollout_is_mean",
        r"sampling/importance_sampling_ratio/mean",
        r".*rollout_is_mean",
        r".*importance_sampling_ratio/mean",
        r"policy_ratio",
    ),
    "is_std": (r"rollout_corr/rollout_is_std", r".*rollout_is_std", r".*importance_sampling_ratio/std"),
    "is_ess": (
        r"rollout_corr/rollout_is_eff_sample_size",
        r".*eff(?:ective)?_sample_size(?:_frac(?:tion)?)?",
        r".*ess_frac(?:tion)?",
    ),
    "rollout_kl": (
        r"rollout_corr/kl",
        r"rollout_corr/k3_kl",
        r"vllm_kl",
        r".*/vllm_kl",
        r"sampling/sampling_logp_difference/mean",
        r".*sampling_logp_difference/mean",
        r"training/rollout_probs_diff_mean",
    ),
}

_COMPILED = {role: tuple(re.compile(p + r"\Z") for p in pats) for role, pats in PATTERNS.items()}

# columns that look like a role by name but are not the quantity (bounds, timing, std of reward)
_EXCLUDE = re.compile(r".*(__MIN|__MAX|_min|_max|/min|/max|timing|_runtime|_timestamp)\Z")


# length-cap clip ratios are truncation rates, not PPO clip fractions
_LENGTH_CLIP = re.compile(r".*(?:response_length|prompt_length|completions?)[^/]*/clip(?:ped)?_ratio\Z")
# rollout-vs-train KLs are off-policy health, not the KL to the reference policy
_ROLLOUT_KL = re.compile(r".*(?:rollout_corr/|vllm|sampling/|rollout_probs).*\Z")
_BOUNDED = ("clip_ratio", "is_ratio", "is_mean", "is_std", "is_ess", "rollout_kl", "truncation")


def find_role(role: str, columns: Sequence[str]) -> str | None:
    """The column that fills ``role``, or None."""
    for pattern in _COMPILED[role]:
        for col in columns:
            if role not in _BOUNDED and _EXCLUDE.match(col):
                continue
            if role == "clip_ratio" and _LENGTH_CLIP.match(col):
                continue
            if role == "kl" and _ROLLOUT_KL.match(col):
                continue
            if pattern.match(col):
                return col
    return None


def detect_roles(
    columns: Iterable[str],
    overrides: Mapping[str, str | None] | None = None,
) -> dict[str, str | None]:
    """Map every role to a column (or None). ``overrides`` (role -> column) win when given.

    One column never fills two roles: the reward column is taken first, then the others in
    :data:`ROLES` order among the remaining columns.
    """
    overrides = {k: v for k, v in (overrides or {}).items() if v}
    if not overrides:  # the usual call: the same columns in every run of a sweep
        return dict(_detect_plain(tuple(columns)))
    return _detect(list(columns), overrides)


@lru_cache(maxsize=256)
def _detect_plain(columns: tuple[str, ...]) -> dict[str, str | None]:
    """:func:`detect_roles` without overrides, remembered per column list (callers get a copy)."""
    return _detect(list(columns), {})


def _detect(columns: list[str], overrides: dict[str, str]) -> dict[str, str | None]:
    taken = set(overrides.values())
    out: dict[str, str | None] = {}
    for role in ROLES:
        if role in overrides:
            out[role] = overrides[role]
            continue
        col = find_role(role, [c for c in columns if c not in taken])
        out[role] = col
        if col is not None:
            taken.add(col)
    return out


#: ``role`` values a fitted series may have: the train reward, or a validation reward fitted
#: because no train reward was logged
FIT_ROLES = ("reward", "eval_reward")


def reward_candidates(columns: Sequence[str]) -> list[str]:
    """Every column that could be the train reward, in the order :func:`find_role` prefers."""
    out: list[str] = []
    for pattern in _COMPILED["reward"]:
        for col in columns:
            if col not in out and not _EXCLUDE.match(col) and pattern.match(col):
                out.append(col)
    return out


def choose_reward(columns: Sequence[str], metric: str | None = None) -> dict:
    """The series to fit and why: ``{"column", "role", "candidates", "note"}``.

    The train reward is preferred; when several columns could be it, the first by the order of
    :data:`PATTERNS` wins and ``note`` names the others. When no train reward is logged but a
    validation reward is, that one is fitted with ``role`` ``eval_reward`` and ``note`` says so.
    ``metric`` (``--metric``) is taken as given; its role is ``eval_reward`` when only the
    validation patterns name it. ``column`` is None when nothing fits the role.
    """
    got = _choose(tuple(columns), metric)
    return {**got, "candidates": list(got["candidates"])}


@lru_cache(maxsize=256)
def _choose(columns: tuple[str, ...], metric: str | None) -> dict:
    """:func:`choose_reward`, remembered per column list and ``metric`` (callers get a copy)."""
    columns = list(columns)
    train = reward_candidates(columns)
    if metric is not None:
        role = "eval_reward" if metric not in train and find_role("eval_reward", [metric]) else "reward"
        auto = choose_reward(columns) if metric in columns else None
        note = auto["note"] if auto and auto["column"] == metric else None
        return {"column": metric, "role": role, "candidates": train, "note": note}
    if train:
        note = None
        if len(train) > 1:
            others = ", ".join(repr(c) for c in train[1:4]) + (" ..." if len(train) > 4 else "")
            note = f"reward column {train[0]!r} chosen over {others}; pass --metric to fit another"
        return {"column": train[0], "role": "reward", "candidates": train, "note": note}
    val = find_role("eval_reward", columns)
    if val is not None:
        return {
            "column": val,
            "role": "eval_reward",
            "candidates": [val],
            "note": f"no train reward is logged: fitted the validation reward {val!r}",
        }
    return {"column": None, "role": "reward", "candidates": [], "note": None}
