"""the entropy rule reads the reward's half-gain step where the run crosses it."""

from __future__ import annotations

import numpy as np
import pytest

from grpofit.core.runs import make_run
from grpofit.diagnostics import diagnose_run
from tests.reallogs import real_log


def _fast_run(entropy_drop_at: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    steps = np.arange(1, 121, dtype=float)
    t = steps - 1
    reward = 0.9 - 0.7 * np.exp(-t / 3.0) + rng.normal(0, 0.005, t.size)
    # the entropy falls steeply around ``entropy_drop_at``: 1.0 -> 0.1
    entropy = 0.1 + 0.9 / (1.0 + np.exp((t - entropy_drop_at) / 0.7))
    return make_run("fast", "fast.csv", "csv", {"step": steps, "reward": reward, "entropy": entropy})


def test_half_gain_step_of_a_fast_synthetic_rise():
    # 0.2 -> 0.9 with T = 3 steps: half the gain at t = 3 ln 2 = 2.08, i.e. first at step 4 (t = 3)
    d = diagnose_run(_fast_run(entropy_drop_at=1.5))
    v = d.diagnostics["policy_concentration"]
    assert "step 4" in v.evidence, v.evidence
    # the entropy had already collapsed then: the fast entropy collapse is caught
    assert v.status == "fail", v.evidence
    assert v.details["entropy_left_at_reward_half"] < 0.25


@pytest.mark.slow
@pytest.mark.real_logs
@pytest.mark.parametrize(
    "name, crossing",
    [
        ("verl_grpo_qwen25_3b_fsdp_base.tfevents", 3),
        ("verl_grpo_qwen2_7b_fsdp_base.tfevents", 3),
    ],
)
def test_half_gain_step_on_real_verl_runs(name, crossing):
    from grpofit.readers import read_path

    path = real_log(name)
    (run,) = read_path(str(path))
    d = diagnose_run(run)
    v = d.diagnostics["policy_concentration"]
    assert f"half-gain step {crossing}" in v.evidence, v.evidence
    # ground truth from the raw series: the first logged step at or past half of first -> plateau
    s, r = run.series(d.fit.metric)
    half = r[0] + 0.5 * (np.median(r[-10:]) - r[0])
    assert s[np.flatnonzero(r >= half)[0]] == crossing
