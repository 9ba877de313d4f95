"""The Optuna pruner and the Ray Tune stopper, against the real libraries (the ``test`` extra)."""

from __future__ import annotations

import numpy as np
import pytest

H = 100
#: trial -> plateau: two winners, two that saturate far below them
PLATEAUS = [0.80, 0.30, 0.78, 0.25]


def reward(trial: int, step: int) -> float:
    rng = np.random.default_rng(1000 * trial + step)
    p = PLATEAUS[trial]
    return 0.1 + (p - 0.1) * (1 - np.exp(-step / 15.0)) + 0.02 * rng.standard_normal()


@pytest.mark.slow
@pytest.mark.parametrize("direction,population", [("maximize", False), ("minimize", False), ("maximize", True)])
def test_optuna_pruner_prunes_the_losers_only(direction, population):
    optuna = pytest.importorskip("optuna")
    from grpofit.integrations.optuna import GrpofitPruner

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sign = 1.0 if direction == "maximize" else -1.0

    def objective(trial):
        i = trial.number
        for s in range(1, H + 1):
            v = sign * reward(i, s)
            trial.report(v, s)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return v

    study = optuna.create_study(
        direction=direction,
        pruner=GrpofitPruner(H, margin=0.02, tolerance=0.0, check_every=25, min_step=25, population=population),
    )
    study.optimize(objective, n_trials=len(PLATEAUS))
    states = [t.state.name for t in study.trials]
    assert states[0] == "COMPLETE" and states[2] == "COMPLETE"
    assert states[1] == "PRUNED" and states[3] == "PRUNED"
    assert max(study.trials[3].intermediate_values) < H  # stopped early: compute saved


def test_optuna_pruner_arguments_checked():
    pytest.importorskip("optuna")
    from grpofit.integrations.optuna import GrpofitPruner

    with pytest.raises(ValueError, match="confidence"):
        GrpofitPruner(100, confidence=1.5)
    with pytest.raises(ValueError, match="horizon"):
        GrpofitPruner(0)


@pytest.mark.slow
def test_ray_stopper_on_a_real_local_ray():
    """A real Tune run (local Ray, one CPU): the trainables only report; the stopper, in the
    driver, stops the two losers before the horizon and lets the winners finish."""
    ray = pytest.importorskip("ray")
    from ray import tune

    from grpofit.integrations.ray import GrpofitStopper

    def trainable(config):
        for s in range(1, H + 1):
            tune.report({"reward": reward(config["i"], s)})

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        stopper = GrpofitStopper("reward", H, margin=0.02, tolerance=0.0, check_every=25, min_step=25)
        tuner = tune.Tuner(
            trainable,
            param_space={"i": tune.grid_search(list(range(len(PLATEAUS))))},
            tune_config=tune.TuneConfig(max_concurrent_trials=4),
            run_config=tune.RunConfig(stop=stopper, verbose=0),
        )
        results = tuner.fit()
        last = {r.config["i"]: r.metrics["training_iteration"] for r in results}
    finally:
        ray.shutdown()
    assert last[0] == H and last[2] == H
    assert last[1] < H and last[3] < H


def test_the_pruners_defaults_are_the_rule_that_never_killed_the_best_in_the_record():
    """The defaults are the rule measured as 'grpofit' in docs/sweeps.json (a decision every 20%,
    no tolerance, confidence 0.95): there it killed no true best, where the rule with tolerance
    0.01 let a near-tied best go."""
    import json
    from pathlib import Path

    from grpofit.forecasting.prune import SweepJudge

    j = SweepJudge(1000)
    assert (j.tolerance, j.confidence, j.margin, j.min_step, j.check_every) == (0.0, 0.95, 0.0, 200.0, 200.0)
    summary = json.loads((Path(__file__).parents[1] / "docs" / "sweeps.json").read_text())["summary"]
    for stratum in ("generated (all)", "real"):
        for method in ("optuna: grpofit", "ray: grpofit"):
            assert summary[stratum][method]["best_killed"] == 0, (stratum, method)
