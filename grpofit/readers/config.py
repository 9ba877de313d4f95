"""Hyperparameters next to a run: W&B ``config.yaml`` (``{key: {value: ...}}``), verl/Hydra
config dumps, TRL/HF training-argument JSON, OpenRLHF args; flattened to dotted keys.

Only safe loaders are used (``yaml.safe_load``, ``json.loads``); ``training_args.bin`` is a
pickle and is never opened. A config that cannot be read is skipped: hyperparameters are
optional, the metrics are not.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

#: files tried in a run folder, in order (relative paths)
CONFIG_FILES = (
    "files/config.yaml",
    "config.yaml",
    ".hydra/config.yaml",
    "training_args.json",
    "args.json",
    "hparams.yaml",
    "config.yml",
)

#: where each dynamics quantity lives (docs/formats.md), in order of preference
KEYS: dict[str, tuple[str, ...]] = {
    "group_size": (
        "num_generations",
        "actor_rollout_ref.rollout.n",
        "n_samples_per_prompt",
        "rollout.n_samples_per_prompt",
        "rollout.n",
        "group_size",
        "num_samples_per_prompt",
    ),
    "learning_rate": (
        "learning_rate",
        "actor_rollout_ref.actor.optim.lr",
        "actor_learning_rate",
        "actor.optim.lr",
        "optim.lr",
        "lr",
    ),
    "momentum": (
        "adam_beta1",
        "actor_rollout_ref.actor.optim.betas",
        "actor.optim.betas",
        "optim.betas",
        "adam_betas",
        "betas",
    ),
    "kl_beta": (
        "beta",
        "actor_rollout_ref.actor.kl_loss_coef",
        "init_kl_coef",
        "kl_coef",
        "algorithm.kl_ctrl.kl_coef",
    ),
    "refresh": (
        "num_iterations",
        "steps_per_generation",
        "actor_rollout_ref.actor.ppo_epochs",
        "max_epochs",
    ),
}


class ConfigTooLarge(ValueError):
    """A config whose flattened form would exceed :data:`grpofit.core.limits.MAX_CONFIG_KEYS` keys
    (e.g. a YAML alias bomb: a few hundred bytes that expand to 10^9 keys)."""


def flatten(
    obj: Mapping[str, Any],
    prefix: str = "",
    *,
    wandb: bool = False,
    max_keys: int | None = None,
    max_depth: int | None = None,
) -> dict[str, Any]:
    """Nested mappings to dotted keys: ``{"a": {"b": 1}}`` -> ``{"a.b": 1}``.

    W&B's ``{key: {"value": v, "desc": ...}}`` wrapping is removed and its ``_wandb*`` and
    ``wandb_version`` entries dropped: always with ``wandb=True`` (a W&B config, where each
    entry is unwrapped on its own), else when every entry is wrapped. Lists of scalars stay lists.
    The one flattener of W&B configs (``files/config.yaml`` and the ``.wandb`` file's records).

    Bounded: more than ``max_keys`` keys raises :class:`ConfigTooLarge`; entries nested deeper
    than ``max_depth`` levels are dropped (both default to :mod:`grpofit.core.limits`). The walk is
    iterative, so a 50,000-deep config cannot exhaust the stack.
    """
    from grpofit.core.limits import MAX_CONFIG_DEPTH, MAX_CONFIG_KEYS

    max_keys = MAX_CONFIG_KEYS if max_keys is None else max_keys
    max_depth = MAX_CONFIG_DEPTH if max_depth is None else max_depth
    if not prefix:
        obj = _unwrap_wandb(obj, each=wandb)
    out: dict[str, Any] = {}
    stack: list[tuple[str, Any, int]] = [(prefix, obj, 0)]
    while stack:
        pre, node, depth = stack.pop()
        if depth > max_depth:
            continue
        items = list(node.items()) if isinstance(node, Mapping) else [(i, x) for i, x in enumerate(node)]
        todo = []
        for k, v in items:
            key = f"{pre}{k}"
            if isinstance(v, Mapping):
                todo.append((key + ".", v, depth + 1))
            elif isinstance(v, (list, tuple)) and not isinstance(node, (list, tuple)) and _scalars(v):
                out[key] = list(v)
            elif isinstance(v, (list, tuple)):
                todo.append((key + ".", v, depth + 1))
            elif isinstance(v, (int, float, str, bool)) or v is None:
                out[key] = v
            else:
                out[key] = str(v)[:1000]
            if len(out) > max_keys:
                raise ConfigTooLarge(f"more than {max_keys} keys")
        stack.extend(reversed(todo))
    return out


def _scalars(v) -> bool:
    return all(isinstance(x, (int, float, str, bool)) or x is None for x in v)


def _unwrap_wandb(obj: Mapping[str, Any], each: bool = False) -> Mapping[str, Any]:
    if each:
        items = {str(k): v for k, v in obj.items() if not str(k).startswith("_wandb") and k != "wandb_version"}
        return {k: v["value"] if isinstance(v, Mapping) and "value" in v else v for k, v in items.items()}
    items = {k: v for k, v in obj.items() if k not in ("_wandb", "wandb_version")}
    if items and all(isinstance(v, Mapping) and "value" in v for v in items.values()):
        return {k: v["value"] for k, v in items.items()}
    return items


def load_config_file(path: str) -> dict[str, Any] | None:
    """A config file flattened, or None when it is unreadable or not a mapping."""
    from grpofit.core.limits import MAX_CONFIG_BYTES

    try:
        if not os.path.isfile(path):
            return None  # a FIFO or device named config.yaml is never opened (it could block)
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES)
        if path.endswith((".yaml", ".yml")):
            import yaml

            obj = yaml.safe_load(raw)
        else:
            obj = json.loads(raw)
        if not isinstance(obj, Mapping):
            return None
        flat = flatten(obj)
    except Exception:  # noqa: BLE001 - any unreadable config is skipped, never fatal (RecursionError too)
        return None
    return flat or None


def config_in_dir(folder: str) -> tuple[dict[str, Any], str | None]:
    """The first readable config among :data:`CONFIG_FILES` in ``folder``: (config, its path)."""
    for rel in CONFIG_FILES:
        path = os.path.join(folder, rel)
        # access() answers a missing file without raising (isfile's stat does: twice the time)
        if os.access(path, os.F_OK) and os.path.isfile(path):
            cfg = load_config_file(path)
            if cfg:
                return cfg, path
    return {}, None


def config_near(path: str) -> tuple[dict[str, Any], str | None]:
    """Hyperparameters for a log file: a config in its folder (or a run folder's ``files/``)."""
    folder = os.path.dirname(os.path.abspath(path))
    cfg, src = config_in_dir(folder)
    if not cfg and os.path.basename(folder).startswith("checkpoint-"):
        cfg, src = config_in_dir(os.path.dirname(folder))
    return cfg, src


def lookup(config: Mapping[str, Any], quantity: str) -> tuple[Any, str] | None:
    """``(value, key)`` of a dynamics quantity (see :data:`KEYS`): exact keys first, then any
    key ending in ``.<name>``. For betas the first element (the momentum) is returned."""
    names = KEYS[quantity]
    hit = next(((config[n], n) for n in names if n in config), None)
    if hit is None:
        for n in names:
            for k in config:
                if k.endswith("." + n):
                    hit = (config[k], k)
                    break
            if hit:
                break
    if hit is None:
        return None
    value, key = hit
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
    value = as_number(value)
    return None if value is None else (value, key)


def as_number(value: Any) -> int | float | None:
    """A config value as a number: ints and floats as they are, numeric strings parsed; None for
    booleans, text and anything else."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def detect_group_size(config: Mapping[str, Any]) -> tuple[int, str] | None:
    """Group size G and the key that gave it (``num_generations``, ``actor_rollout_ref.rollout.n``,
    ``n_samples_per_prompt``, ...), or None."""
    hit = lookup(config, "group_size")
    if hit is None or hit[0] < 1 or hit[0] != int(hit[0]):
        return None
    return int(hit[0]), hit[1]


def hyperparameters(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every dynamics quantity found: ``{quantity: {"value": v, "key": k}}`` (JSON-safe)."""
    out = {}
    for q in KEYS:
        hit = detect_group_size(config) if q == "group_size" else lookup(config, q)
        if hit is not None:
            out[q] = {"value": hit[0], "key": hit[1]}
    return out
