"""Hooks into training frameworks (optional extras; nothing here is imported by the CLI).

``GrpofitCallback`` (:mod:`.trainer`) watches a Hugging Face ``Trainer``-based run (TRL's
``GRPOTrainer`` among them) from inside the training loop. ``grpofit.integrations.optuna``
(``GrpofitPruner``) and ``grpofit.integrations.ray`` (``GrpofitStopper``) stop the losing trials
of a sweep from their forecasts; import them from their modules (they need optuna / ray).
"""

from __future__ import annotations

__all__ = ["GrpofitCallback"]


def __getattr__(name: str):
    if name == "GrpofitCallback":
        from grpofit.integrations.trainer import GrpofitCallback

        return GrpofitCallback
    raise AttributeError(name)
