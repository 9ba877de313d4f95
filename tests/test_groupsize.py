"""Group size per run and the group-size predictions across runs (grpofit.diagnostics.groupsize)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from grpofit.core.runs import make_run
from grpofit.diagnostics.degeneracy import expected_zero_std
from grpofit.diagnostics.groupsize import from_config, from_name, group_size_analysis, group_size_of


@pytest.mark.parametrize(
    "config, value, key",
    [
        ({"num_generations": 8, "learning_rate": 1e-6}, 8, "num_generations"),
        ({"actor_rollout_ref.rollout.n": "16"}, 16, "actor_rollout_ref.rollout.n"),
        ({"actor_rollout_ref/rollout/n": 5.0}, 5, "actor_rollout_ref/rollout/n"),
        ({"n_samples_per_prompt.value": 4}, 4, "n_samples_per_prompt.value"),
        ({"trainer.group_size": {"value": 12}}, 12, "trainer.group_size"),
        ({"num_generations": "auto"}, None, None),
        ({"lr": 3}, None, None),
    ],
)
def test_group_size_from_config(config, value, key):
    gs = from_config(config)
    assert gs.value == value
    assert gs.source == (f"config:{key}" if key else None)


@pytest.mark.parametrize(
    "name, value",
    [
        ("grpo_G8_seed1", 8),
        ("runs/qwen-g16/log.csv", 16),
        ("num_generations4", 4),
        ("exp_group_size=32", 32),
        ("sweep_n16_lr1e-6", 16),
        ("Qwen2.5-7B-gsm8k", None),
        ("[paper]GRPO_online", None),
        ("gpt2_lr3e-6", None),
    ],
)
def test_group_size_from_name(name, value):
    assert from_name(name).value == value


def test_precedence_argument_then_config_then_name():
    run = make_run("grpo_G4", "x", "csv", {"step": [1, 2], "reward": [0.1, 0.2]}, config={"num_generations": 8})
    assert group_size_of(run, 16).summary() == {"value": 16, "source": "argument"}
    assert group_size_of(run).summary() == {"value": 8, "source": "config:num_generations"}
    run.config = {}
    assert group_size_of(run).summary() == {"value": 4, "source": "name:G4"}


def test_mean_field_zero_variance_fraction():
    assert expected_zero_std(0.5, 2) == pytest.approx(0.5)
    assert expected_zero_std(0.0, 8) == 1.0 and expected_zero_std(1.0, 8) == 1.0
    assert expected_zero_std(0.9, 8) == pytest.approx(0.9**8 + 0.1**8)


# ------------------------------------------------------------------ analysis over fake fits


@dataclass
class Est:
    value: float
    stderr: float


@dataclass
class Model:
    params: dict


@dataclass
class Fit:
    run: str
    models: dict

    def param(self, name, model=None):  # FitResult.param's reading
        return self.models[model].params.get(name)


def fake_fit(name, plateau, timescale, se=0.01, tse=2.0):
    return Fit(name, {"exponential": Model({"plateau": Est(plateau, se), "timescale": Est(timescale, tse)})})


def test_invariance_and_one_over_g_are_confirmed_when_true():
    rng = np.random.default_rng(0)
    items = []
    for g in (4, 8, 16):
        for i in range(3):
            fit = fake_fit(f"G{g}_{i}", 0.7 + rng.normal(0, 0.01), 50 + rng.normal(0, 2))
            var = 0.004 / g * np.exp(rng.normal(0, 0.1))
            items.append((fit, g, var))
    out = group_size_analysis(items)
    assert out["testable"] and out["group_sizes"] == [4, 8, 16]
    assert out["plateau"]["consistent"] and out["timescale"]["consistent"]
    assert len(out["plateau"]["pairs"]) == 3 and {tuple(p["G"]) for p in out["plateau"]["pairs"]} == {
        (4, 8),
        (4, 16),
        (8, 16),
    }
    vs = out["variance_scaling"]
    assert vs["slope"] == pytest.approx(-1, abs=0.15)
    lo, hi = vs["ci95"]
    assert lo <= -1 <= hi and vs["decided"] and vs["consistent_with_1_over_G"]
    assert "consistent with 1/G" in out["summary"]


def test_plateau_depending_on_g_is_reported():
    items = [(fake_fit(f"G{g}", 0.5 + 0.02 * g, 50), g, 0.001) for g in (4, 8, 16)]
    out = group_size_analysis(items)
    assert out["plateau"]["verdict"] == "depends on G"
    assert not out["plateau"]["consistent"]
    assert out["variance_scaling"]["ci95"] is not None


def test_single_group_size_is_not_testable():
    items = [
        (fake_fit("a", 0.7, 50), 8, 0.001),
        (fake_fit("b", 0.7, 50), 8, 0.002),
        (fake_fit("c", 0.7, 50), None, None),
    ]
    out = group_size_analysis(items)
    assert out["testable"] is False and "G=8" in out["summary"]
    assert group_size_analysis([])["testable"] is False


def test_two_runs_say_they_cannot_give_an_interval():
    out = group_size_analysis([(fake_fit("a", 0.7, 50), 4, 0.002), (fake_fit("b", 0.7, 50), 16, 0.0005)])
    assert out["variance_scaling"]["ci95"] is None and not out["variance_scaling"]["decided"]
    assert "too few runs" in out["summary"]


def test_wide_intervals_say_so():
    items = [(fake_fit(f"G{g}", 0.7, 50, se=1.0, tse=100), g, 0.001) for g in (4, 8)]
    out = group_size_analysis(items)
    assert out["plateau"]["verdict"] == "intervals too wide to tell"


def test_group_size_is_compared_within_one_folder_only():
    """Runs in different folders are different experiments: their G are never compared."""
    from grpofit.diagnostics import diagnose_run
    from grpofit.diagnostics.groupsize import group_size_by_experiment
    from grpofit.testing.planted import planted_run

    def judged(name, seed, G):
        run = planted_run(None, seed=seed, name=name)
        return diagnose_run(run, group_size=G)

    a = [judged("sweepA/run_G4_seed1.csv", 1, 4), judged("sweepB/run_G16_seed2.csv", 2, 16)]
    out = group_size_by_experiment(a)
    assert out["testable"] is False and "different folders" in out["summary"]
    b = a + [judged("sweepB/run_G4_seed3.csv", 3, 4), judged("sweepB/run_G16_seed4.csv", 4, 16)]
    out = group_size_by_experiment(b)
    assert out["testable"] is True and out["experiment"] == "sweepB"
    assert out["runs"] == 3


def test_in_one_folder_only_runs_that_differ_in_group_size_alone_are_compared():
    """A W&B export of one folder holds GRPO n32 / n64 and a CRPO n16 run (the deepgrpo sweep):
    CRPO is another method, so only the two GRPO runs are compared; with configs, runs whose
    settings differ in more than G (here the learning rate) are never compared."""
    from grpofit.diagnostics import diagnose_run
    from grpofit.diagnostics.groupsize import group_size_by_experiment, name_without_group_size, related_key
    from grpofit.testing.planted import planted_run

    def judged(name, seed, config=None):
        run = planted_run(None, seed=seed, name=name)
        if config is not None:
            run.config = config
        return diagnose_run(run)

    names = [
        "x.csv::Qwen-GSM8K-GRPO-n32-01131200",
        "x.csv::Qwen-GSM8K-GRPO-n64",
        "x.csv::qwen-gsm8k-crpo-no-branch-n16-new",
    ]
    assert name_without_group_size(names[0]) == name_without_group_size(names[1]) != name_without_group_size(names[2])
    ds = [judged(n, i) for i, n in enumerate(names)]
    out = group_size_by_experiment(ds)
    assert out["testable"] and out["runs"] == 2 and out["group_sizes"] == [32, 64]
    # two runs of different methods only: nothing to compare, and the summary says why
    out = group_size_by_experiment([ds[0], ds[2]])
    assert out["testable"] is False and "differ in more than G" in out["summary"]
    # configs decide when the runs carry them: G, seed and bookkeeping may differ, nothing else
    base = {"learning_rate": 1e-6, "beta": 0.0, "seed": 1, "output_dir": "a"}
    cfg = [
        dict(base, num_generations=4),
        dict(base, num_generations=8, seed=2, output_dir="b"),
        dict(base, num_generations=16, learning_rate=3e-6),
    ]
    ds = [judged(f"sweep/run{i}", i, c) for i, c in enumerate(cfg)]
    assert related_key(ds[0]) == related_key(ds[1]) != related_key(ds[2])
    out = group_size_by_experiment(ds)
    assert out["testable"] and out["group_sizes"] == [4, 8]
