"""Covariates of a run for the population prior (:mod:`.prior`, docs/prior.md): where they come
from (the run's config, a bandit simulation's ``FILE.meta.json``, a model size in the config's
model path or the run's name, ``--covariate NAME=VALUE``) and how the prior regresses on them
(the transforms the closed forms of theory.md §2 suggest)."""

from __future__ import annotations

import json
import math
import os
import re

__all__ = ["COVARIATES", "covariates_of", "parse_covariates"]

#: canonical covariates and the transform the closed forms suggest
COVARIATES = ("lr", "momentum", "refresh", "group_size", "kl", "size")


def _transform(name: str, v: float) -> float | None:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(v):
        return None
    if name == "momentum":
        return math.log(max(1.0 - v, 1e-3))
    if name == "kl":
        return math.log(v + 1e-3)
    if name == "group_size":
        return math.log(v if v > 0 else 1024.0)  # 0 = exact (infinite group)
    return math.log(v) if v > 0 else None


# ---------------------------------------------------------------------------------- covariates


_SIZE = re.compile(r"(?<![0-9a-z.])(\d+(?:\.\d+)?)\s*([bm])(?![a-z])", re.IGNORECASE)


def covariates_of(run) -> dict:
    """Covariates a run names: its config's hyperparameters (:mod:`grpofit.readers.config`), a
    bandit simulation's ``FILE.meta.json`` (its settings only, never its answers), a model size
    in its config's model path (``Qwen/Qwen2.5-0.5B``) or its name (``0.5B``, ``7b``, ``350M``)."""
    from grpofit.core.vocabulary import SCHEMAS
    from grpofit.readers.config import hyperparameters

    out: dict = {}
    hp = hyperparameters(run.config or {})
    for q, name in (
        ("learning_rate", "lr"),
        ("momentum", "momentum"),
        ("refresh", "refresh"),
        ("group_size", "group_size"),
        ("kl_beta", "kl"),
    ):
        if q in hp:
            out[name] = float(hp[q]["value"])
    path = str(run.name).split("::")[0]
    meta = path + ".meta.json"
    if os.path.isfile(meta):
        try:
            with open(meta, encoding="utf-8") as f:
                m = json.load(f)
            if m.get("schema") == SCHEMAS["bandit"]:
                for key, name in (
                    ("lr", "lr"),
                    ("momentum", "momentum"),
                    ("refresh_interval", "refresh"),
                    ("group_size", "group_size"),
                    ("beta", "kl"),
                ):
                    if isinstance(m.get(key), (int, float)):
                        out.setdefault(name, float(m[key]))
        except (OSError, ValueError):
            pass
    hit = None
    for key in ("model_name_or_path", "actor_rollout_ref.model.path", "model.path", "model_name", "model"):
        value = (run.config or {}).get(key)
        if isinstance(value, str):
            hit = _SIZE.search(value.rsplit("/", 1)[-1])
            if hit:
                break
    hit = hit or _SIZE.search(os.path.basename(str(run.name)))
    if hit:
        out.setdefault("size", float(hit.group(1)) * (1e9 if hit.group(2).lower() == "b" else 1e6))
    return out


def parse_covariates(items) -> dict:
    """``["lr=1e-5", "size=7e9"]`` -> ``{"lr": 1e-5, "size": 7e9}`` (``UsageError`` otherwise)."""
    from grpofit.core.errors import UsageError

    out = {}
    for item in items or ():
        name, _, value = str(item).partition("=")
        name = name.strip().replace("-", "_")
        name = {
            "learning_rate": "lr",
            "beta": "kl",
            "kl_beta": "kl",
            "refresh_interval": "refresh",
            "model_size": "size",
            "g": "group_size",
        }.get(name, name)
        try:
            v = float(value)
        except ValueError:
            v = float("nan")
        if name not in COVARIATES or _transform(name, v) is None:
            raise UsageError(
                f"--covariate {item!r} is not NAME=NUMBER with NAME one of {', '.join(COVARIATES)}",
                fix="e.g. --covariate lr=1e-5 --covariate size=7e9",
            )
        out[name] = v
    return out
