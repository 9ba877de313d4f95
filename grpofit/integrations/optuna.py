"""``GrpofitPruner``: an Optuna pruner that stops a trial whose forecast will not reach the best.

    import optuna
    from grpofit.integrations.optuna import GrpofitPruner

    study = optuna.create_study(direction="maximize", pruner=GrpofitPruner(horizon=1000))
    # in the objective: trial.report(reward, step); if trial.should_prune(): raise optuna.TrialPruned()

Works with any study whose trials report a reward per step (``trial.report``): at the trial's
checkpoints (from ``min_step`` on, a fifth of the horizon by default, then every ``check_every``
steps, a fifth) every trial is forecast to ``horizon`` and the trial is pruned when the
probability that it ends more than ``tolerance - margin`` above the best trial still in the
study is below ``1 - confidence`` (:class:`grpofit.forecasting.prune.SweepJudge`, which says what
the defaults are and why). Finished trials count with the level they reached, running ones (other
workers) with their forecast; pruned ones can no longer be the best kept, so they are no
reference. A ``minimize`` study is handled by negating the values. ``population=True``: a trial
its own forecast cannot judge yet (no forecast, or still rising and speeding up) is judged on a
population prior from the study's completed trials (two or more that reached the horizon).

Cost: between checkpoints a report reads the trial's values (no forecast); at a checkpoint, one
forecast per trial whose history changed (the benchmark measures it per report).
``optuna`` is an optional extra (``pip install grpofit[optuna]``).
"""

from __future__ import annotations

import optuna

from grpofit.forecasting.prune import SweepJudge

__all__ = ["GrpofitPruner"]


class GrpofitPruner(optuna.pruners.BasePruner):
    """Prune a trial when its forecast says it will not end more than ``tolerance - margin`` above
    the best trial still in the study (see the module docstring)."""

    def __init__(
        self,
        horizon: int,
        *,
        margin: float = 0.0,
        confidence: float = 0.95,
        tolerance: float = 0.0,
        check_every: int | None = None,
        min_step: int | None = None,
        seed: int = 0,
        population: bool = False,
    ):
        self._args = dict(
            horizon=horizon,
            margin=margin,
            confidence=confidence,
            tolerance=tolerance,
            check_every=check_every,
            min_step=min_step,
            seed=seed,
            population=population,
        )
        SweepJudge(horizon, margin=margin, confidence=confidence, tolerance=tolerance)  # checks the arguments now
        self._judges: dict = {}

    def _judge(self, study) -> SweepJudge:
        key = study.study_name  # unique per storage (Optuna's public name of a study)
        judge = self._judges.get(key)
        if judge is None:
            maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
            judge = self._judges[key] = SweepJudge(maximize=maximize, **self._args)
        return judge

    def prune(self, study: "optuna.study.Study", trial: "optuna.trial.FrozenTrial") -> bool:
        values = trial.intermediate_values
        if not values:
            return False
        judge = self._judge(study)
        state = judge.trials.get(trial.number)
        if state is not None and state.steps and state.steps[-1] >= max(values) and state.stopped:
            return True
        steps = sorted(values)
        judge.replace(trial.number, steps, [values[s] for s in steps])
        t = judge.trials[trial.number]
        if steps[-1] < t.next_check:  # not a checkpoint: no need to read the other trials
            return False
        done = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
        for other in study.get_trials(deepcopy=False):
            if other.number == trial.number or not other.intermediate_values:
                continue
            known = judge.trials.get(other.number)
            ended = other.state in done
            if known is not None and known.ended and ended:
                continue  # its history no longer changes
            iv = other.intermediate_values
            s = sorted(iv)
            pruned = other.state == optuna.trial.TrialState.PRUNED
            judge.replace(other.number, s, [iv[k] for k in s], ended=ended, stopped=pruned)
        return judge.should_stop(trial.number)
