"""The planned last step and the batch size of a run, from its config (or the options).

Planned last step, in order: ``--horizon N``; the config's ``trainer.total_training_steps``
(verl), ``max_steps`` (Hugging Face / TRL training arguments, or ``trainer_state.max_steps``
read from a ``trainer_state.json``; ``-1`` means unset); ``epochs x steps per epoch``
(``trainer.total_epochs`` / ``num_train_epochs`` / ``epochs`` times ``steps_per_epoch`` /
``num_update_steps_per_epoch``). The source is reported beside the step.

Batch size (binary rewards per logged mean, for the binomial observation variance):
``--batch-size N``; else verl's ``data.train_batch_size x actor_rollout_ref.rollout.n``.
"""

from __future__ import annotations

from typing import Any, Mapping

from grpofit.core.limits import MAX_STEP

__all__ = ["planned_last_step", "batch_size"]

HORIZON_KEYS = ("trainer.total_training_steps", "total_training_steps", "max_steps", "trainer_state.max_steps")
EPOCH_KEYS = ("trainer.total_epochs", "num_train_epochs", "total_epochs", "epochs", "trainer_state.num_train_epochs")
PER_EPOCH_KEYS = ("steps_per_epoch", "num_update_steps_per_epoch", "trainer.steps_per_epoch")


def _positive(config: Mapping[str, Any], key: str) -> float | None:
    from grpofit.readers.config import as_number

    value = as_number(config.get(key))
    try:
        value = float(value) if value is not None else None
    except (OverflowError, TypeError, ValueError):
        return None
    # a planned step of .inf or 1e400 (or beyond any step the forecast can reach) is no plan
    return value if value is not None and 0 < value <= MAX_STEP else None


def _first(config: Mapping[str, Any], keys) -> tuple[float, str] | None:
    for key in keys:
        v = _positive(config, key)
        if v is not None:
            return v, key
    for key in keys:  # nested under some prefix
        for k in config:
            if k.endswith("." + key):
                v = _positive(config, k)
                if v is not None:
                    return v, k
    return None


def planned_last_step(config: Mapping[str, Any], horizon: int | None = None) -> tuple[float | None, str | None]:
    """``(step, source)`` of the planned last step, or ``(None, None)``."""
    if horizon is not None:
        return float(horizon), "--horizon"
    hit = _first(config, HORIZON_KEYS)
    if hit is not None:
        return hit[0], f"config: {hit[1]}"
    epochs, per = _first(config, EPOCH_KEYS), _first(config, PER_EPOCH_KEYS)
    if epochs is not None and per is not None and epochs[0] * per[0] <= MAX_STEP:
        return epochs[0] * per[0], f"config: {epochs[1]} x {per[1]}"
    return None, None


def batch_size(config: Mapping[str, Any], option: int | None = None) -> tuple[int | None, str | None]:
    """``(rewards per logged mean, source)`` or ``(None, None)``."""
    if option is not None:
        return int(option), "--batch-size"
    prompts = _first(config, ("data.train_batch_size",))
    samples = _first(config, ("actor_rollout_ref.rollout.n",))
    if prompts is not None and samples is not None:
        return int(prompts[0] * samples[0]), f"config: {prompts[1]} x {samples[1]}"
    return None, None
