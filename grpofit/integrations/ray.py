"""``GrpofitStopper``: a Ray Tune stopper that stops the trials whose forecast will not reach the best.

    from ray import tune
    from grpofit.integrations.ray import GrpofitStopper

    stopper = GrpofitStopper(metric="reward", horizon=1000)          # step key: training_iteration
    tune.Tuner(trainable, run_config=tune.RunConfig(stop=stopper), ...).fit()

It runs in Tune's driver, on the results every trial reports (``tune.report({"reward": r, ...})``):
no change to the trainables, and the trials may run on any machine of the cluster. At each trial's
checkpoints (from ``min_step`` on, a fifth of the horizon by default, then every ``check_every``
steps, a fifth) every trial is forecast to ``horizon`` and the trial is stopped when the
probability that it ends more than ``tolerance - margin`` above the best trial still running or
finished is below ``1 - confidence`` (:class:`grpofit.forecasting.prune.SweepJudge`, the same
decision as the Optuna pruner). ``mode="min"`` for a metric to minimise. ``population=True``: the
trials that reached the horizon form a population prior for the trials their own forecast cannot
judge yet (in a sweep whose trials all run at once, none has finished at the early checkpoints).

``ray[tune]`` is an optional extra (``pip install grpofit[ray]``).
"""

from __future__ import annotations

from ray.tune.stopper import Stopper

from grpofit.forecasting.prune import SweepJudge

__all__ = ["GrpofitStopper"]


class GrpofitStopper(Stopper):
    """Stop a trial when its forecast says it will not end more than ``tolerance - margin`` above
    the best trial still going (see the module docstring)."""

    def __init__(
        self,
        metric: str,
        horizon: int,
        *,
        step_key: str = "training_iteration",
        mode: str = "max",
        margin: float = 0.0,
        confidence: float = 0.95,
        tolerance: float = 0.0,
        check_every: int | None = None,
        min_step: int | None = None,
        seed: int = 0,
        population: bool = False,
    ):
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', not {mode!r}")
        self.metric, self.step_key = metric, step_key
        self.judge = SweepJudge(
            horizon,
            margin=margin,
            confidence=confidence,
            tolerance=tolerance,
            check_every=check_every,
            min_step=min_step,
            maximize=mode == "max",
            seed=seed,
            population=population,
        )

    def __call__(self, trial_id: str, result: dict) -> bool:
        value, step = result.get(self.metric), result.get(self.step_key)
        if value is None or step is None:
            return False
        self.judge.observe(trial_id, float(step), float(value))
        return self.judge.should_stop(trial_id)

    def stop_all(self) -> bool:
        return False
