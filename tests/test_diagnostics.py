"""The four failure-mode diagnostics, the verdict and the CI gate (grpofit.diagnostics)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from grpofit.core.errors import MetricNotFound, UsageError
from grpofit.core.runs import make_run
from grpofit.diagnostics import MODES, Thresholds, Verdict, diagnose_run, gate, worst
from grpofit.testing.planted import make_planted_run, planted_run
from tests.reallogs import REAL_LOGS, real_log

REAL = REAL_LOGS
WANDB = "heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_"


# ------------------------------------------------------------------ planted runs

SEEDS = range(4)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mode", MODES)
def test_every_planted_mode_fails(mode, seed):
    d = diagnose_run(planted_run(mode, seed=seed, n_steps=300), group_size=8)
    v = d.diagnostics[mode]
    assert v.status == "fail", v.evidence
    assert d.verdict == "fail"
    assert v.start_step is not None and "step" in v.evidence


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10))
def test_healthy_controls_fail_nothing(seed):
    d = diagnose_run(planted_run(None, seed=1000 + seed, n_steps=300), group_size=8)
    statuses = {m: v.status for m, v in d.diagnostics.items()}
    assert "fail" not in statuses.values(), {m: v.evidence for m, v in d.diagnostics.items()}
    assert d.collapse is None


@pytest.mark.parametrize("seed", range(3))
def test_dead_run_fails_advantage_degeneracy(seed):
    d = diagnose_run(planted_run("dead", seed=seed))
    v = d.diagnostics["advantage_degeneracy"]
    assert v.status == "fail" and "dead run" in v.evidence
    assert v.start_step is not None


@pytest.mark.parametrize("seed", range(3))
def test_planted_oscillation_fails_with_the_damping_ratio(seed):
    d = diagnose_run(planted_run("dynamical_instability", seed=seed, kind="oscillation"))
    v = d.diagnostics["dynamical_instability"]
    assert v.status == "fail" and "oscillates (underdamped, damping ratio" in v.evidence
    assert d.regime == "underdamped"


@pytest.mark.parametrize("kind", ["grad_growth", "collapse"])
def test_instability_kinds(kind):
    d = diagnose_run(planted_run("dynamical_instability", seed=7, kind=kind))
    v = d.diagnostics["dynamical_instability"]
    assert v.status == "fail"
    assert "grad_norm" in v.evidence
    if kind == "collapse":
        assert "collapses at step" in v.evidence and d.collapse is not None
        # the fit covers only the part before the break
        assert d.fit.steps.max() < d.collapse.step


def test_saturated_run_warns_not_fails():
    """Near 1, most groups are all-correct as the mean field expects: the run is done (warn)."""
    rng = np.random.default_rng(0)
    n, G = 200, 8
    t = np.arange(n, dtype=float)
    p = 0.985 - 0.6 * np.exp(-t / 20)
    k = rng.binomial(G, np.clip(p, 0, 1)[:, None], size=(n, 16))
    table = {
        "step": t,
        "reward": k.mean(axis=1) / G,
        "frac_reward_zero_std": ((k == 0) | (k == G)).mean(axis=1),
    }
    d = diagnose_run(make_run("saturated", "saturated", "planted", table), group_size=G)
    v = d.diagnostics["advantage_degeneracy"]
    assert v.status == "warn" and "saturated" in v.evidence


# ------------------------------------------------------------------ unknown, summary, overrides


def test_reward_only_run_is_unknown_where_metrics_are_missing():
    cols = make_planted_run(None, seed=3)
    run = make_run("r", "r", "planted", {"step": cols["step"], "reward": cols["reward"]})
    d = diagnose_run(run)
    for m in ("train_eval_decoupling", "advantage_degeneracy", "policy_concentration"):
        assert d.diagnostics[m].status == "unknown"
    assert d.diagnostics["dynamical_instability"].status == "pass"
    assert "not logged" in d.diagnostics["dynamical_instability"].evidence
    assert d.verdict == "pass"


def test_summary_follows_the_contract_and_is_strict_json():
    d = diagnose_run(planted_run("dynamical_instability", seed=1), group_size=8)
    s = d.summary()
    json.dumps(s, allow_nan=False)
    assert s["run"] == "planted/dynamical_instability/1"
    assert set(s["diagnostics"]) == set(MODES)
    for v in s["diagnostics"].values():
        assert v["status"] in ("pass", "warn", "fail", "unknown") and isinstance(v["evidence"], str)
    assert s["verdict"] == "fail"
    assert s["collapse"]["step"] is not None
    assert s["group_size"] == {"value": 8, "source": "argument"}
    assert "fit" in s


def test_metric_overrides():
    cols = make_planted_run(None, seed=4)
    table = {"step": cols["step"], "my_reward": cols["reward"], "heldout": cols["eval_reward"]}
    run = make_run("o", "o", "planted", table)
    d = diagnose_run(run, metric="my_reward", eval_metric="heldout")
    assert d.roles["reward"] == "my_reward" and d.roles["eval_reward"] == "heldout"
    assert d.diagnostics["train_eval_decoupling"].status != "unknown"
    with pytest.raises(MetricNotFound):
        diagnose_run(run, metric="my_reward", eval_metric="nope")


def test_worst_status_order():
    assert worst(["pass", "unknown", "warn"]) == "warn"
    assert worst(["pass", "fail", "warn"]) == "fail"
    assert worst(["unknown", "unknown"]) == "unknown"
    assert worst(["unknown", "pass"]) == "pass"


def test_thresholds_overrides_and_docs():
    th = Thresholds.from_overrides({"rise_fail": 8, "zero_std_fail": "0.9"})
    assert th.rise_fail == 8.0 and th.zero_std_fail == 0.9 and th.rise_warn == Thresholds().rise_warn
    with pytest.raises(UsageError):
        Thresholds.from_overrides({"no_such_threshold": 1})
    docs = Thresholds.documentation()
    assert len(docs) >= 20 and all(d["doc"] for d in docs)
    # a stricter collapse threshold makes the planted collapse disappear
    run = planted_run("dynamical_instability", seed=2)
    assert diagnose_run(run).collapse is not None
    assert diagnose_run(run, thresholds=Thresholds.from_overrides({"collapse_min_drop": 0.95})).collapse is None


def test_gate():
    bad = diagnose_run(planted_run("policy_concentration", seed=0))
    good = diagnose_run(planted_run(None, seed=0))
    assert gate([bad, good]) == {"passed": False, "failed_runs": [bad.name]}
    assert gate([bad, good], fail_on=("dynamical_instability",))["passed"]
    g = gate([bad, good], fail_on=("dynamical_instability",), min_r2=1.01)
    assert set(g["failed_runs"]) == {bad.name, good.name}
    with pytest.raises(UsageError):
        gate([good], fail_on=("bogus",))


# ------------------------------------------------------------------ real logs


def _read(path: Path) -> list:
    from grpofit.readers import read_path

    return read_path(str(real_log(path.name)))


def _join(a, b, name: str):
    """One run from two readers' runs of the same W&B run (reward file + grad-norm file)."""
    steps = np.union1d(a.steps, b.steps)
    table = {"train/global_step": steps}
    for run in (a, b):
        for col, values in run.metrics.items():
            if col != "_step":
                out = np.full(steps.size, np.nan)
                out[np.searchsorted(steps, run.steps)] = values
                table[col] = out
    return make_run(name, a.source, a.format, table)


def _wandb_runs() -> dict:
    rewards = _read(REAL / f"{WANDB}TrainReward.csv")
    grads = {r.name.split("::")[-1]: r for r in _read(REAL / f"{WANDB}GradNorm.csv")}
    runs = {}
    for r in rewards:
        label = r.name.split("::")[-1]
        key = label.replace("[paper]", "").replace("_online", "")
        runs[key] = _join(r, grads[label], r.name)
    assert set(runs) == {"GRPO", "GEPO", "GSPO"}
    return runs


@pytest.mark.real_logs
def test_real_grpo_fails_instability_with_both_steps():
    runs = _wandb_runs()
    d = diagnose_run(runs["GRPO"])
    v = d.diagnostics["dynamical_instability"]
    assert v.status == "fail"
    assert d.collapse is not None and 850 <= d.collapse.step <= 950
    assert f"collapses at step {d.collapse.step:g}" in v.evidence
    assert "step 749" in v.evidence  # grad_norm first exceeds 0.5 there
    assert 700 <= v.start_step <= 800
    plateau = d.fit.models["exponential"].params["plateau"].value
    lo, hi = np.min(d.fit.values), np.max(d.fit.values)
    assert lo <= plateau <= hi
    assert abs(plateau - 0.74) < 0.05
    json.dumps(d.summary(), allow_nan=False)


@pytest.mark.real_logs
def test_real_gepo_has_no_collapse_and_gspo_collapses_near_1200():
    runs = _wandb_runs()
    gepo = diagnose_run(runs["GEPO"])
    assert gepo.collapse is None and gepo.verdict != "fail"
    gspo = diagnose_run(runs["GSPO"])
    assert gspo.collapse is not None and 1150 <= gspo.collapse.step <= 1250


@pytest.mark.slow
@pytest.mark.real_logs
@pytest.mark.parametrize("name", ["verl_grpo_qwen2_7b_fsdp_base", "verl_grpo_qwen25_3b_fsdp_base"])
def test_real_verl_runs_pass_or_warn(name):
    path = REAL / f"{name}.tfevents"
    (run,) = _read(path)
    d = diagnose_run(run)
    assert d.verdict in ("pass", "warn"), {m: v.evidence for m, v in d.diagnostics.items()}
    assert d.collapse is None
    assert d.diagnostics["train_eval_decoupling"].status == "pass"
    assert d.diagnostics["policy_concentration"].status in ("pass", "warn")
    # reward pinned near 1 (7B reaches 0.99): the learning signal is exhausted, not broken
    assert d.diagnostics["advantage_degeneracy"].status in ("warn", "unknown")


def test_verdict_type_summary():
    v = Verdict("warn", "x from step 3", start_step=3.0, details={"a": float("nan")})
    assert v.summary() == {"status": "warn", "evidence": "x from step 3", "start_step": 3.0, "details": {"a": None}}


def test_group_size_analysis_over_diagnoses():
    from grpofit.diagnostics.groupsize import group_size_analysis

    diags = [
        diagnose_run(planted_run(None, seed=s, name=f"sweep_G{g}_s{s}", group_size=g, n_steps=240))
        for g in (4, 16)
        for s in range(2)
    ]
    assert [d.group_size.source for d in diags] == ["name:G4", "name:G4", "name:G16", "name:G16"]
    assert all(d.late_variance is not None and d.late_variance > 0 for d in diags)
    out = group_size_analysis(diags)
    json.dumps(out, allow_nan=False)
    assert out["testable"] and out["group_sizes"] == [4, 16]
    assert out["variance_scaling"]["slope"] < 0  # bigger groups, smaller batch-mean fluctuation
