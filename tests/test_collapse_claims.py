"""a collapse is a sustained fall below the run's settled level that the law cannot
explain; a rise never is, an oscillation the oscillator fits is not; grad-norm baselines skip
the initial transient. Ground truth: the exact bandit (``grpofit simulate bandit``) and seeded
synthetic oscillator runs."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from grpofit.core.runs import make_run
from grpofit.diagnostics import diagnose_run
from grpofit.dynamics import simulation as sim
from grpofit.fitting.analysis import fit_run
from grpofit.fitting.collapse import early_baseline, find_collapse, find_rise
from tests.doc_pages import docs_text
from tests.reallogs import REAL_LOGS

ROOT = Path(__file__).resolve().parents[1]
REAL = REAL_LOGS
sys.path.insert(0, str(ROOT / "scripts"))


def _bandit_run(**kw):
    b = sim.simulate_bandit(**kw)
    return b, make_run("bandit", "bandit.csv", "csv", {k: v for k, v in b.columns.items()})


@pytest.mark.slow
def test_the_rise_of_an_underdamped_bandit_is_not_a_collapse():
    # issue: `simulate bandit --lr 0.1 --momentum 0.9 --refresh-interval 1 --group-size 0
    # --beta 1 --steps 1500` was "reward collapses at step 12 (0.19 -> 0.514, --170%)"
    b, run = _bandit_run(lr=0.1, momentum=0.9, refresh_interval=1, group_size=0, beta=1.0, steps=1500)
    p = b.columns["expected_reward"]
    assert b.summary()["trajectory"]["label"] == "oscillatory"  # exact: it overshoots, then settles
    assert abs(p[-1] - b.fixed.p) < 1e-6  # and ends at its fixed point: nothing collapsed
    d = diagnose_run(run)
    assert d.collapse is None
    assert d.fit.n_points == 1500  # the whole run is fitted, not 11 points
    ev = d.diagnostics["dynamical_instability"].evidence
    assert "collapse" not in ev.replace("no reward collapse", "")
    # the grad norm relaxes from step 1 on (the initial transient): no rise, no spike
    assert "grad_norm x" not in ev and "spike" not in ev, ev


def test_a_rise_is_never_a_collapse_candidate():
    t = np.arange(600.0)
    # underdamped from rest: overshoot to ~1.4x the gain, then settles at the plateau
    from grpofit.laws.models import oscillator

    y = oscillator(t, 0.5, 0.1, 5.0, 60.0)
    c = find_collapse(t, y)
    assert c is None or c.level_before > c.level_after


def test_decaying_metric_has_no_rise_and_the_baseline_skips_the_transient():
    t = np.arange(1000.0)
    g = 0.3 * np.exp(-t / 20.0) + 1e-3  # large first gradients relaxing to a floor
    base, start = early_baseline(g)
    assert start > 0 and base == pytest.approx(1e-3, rel=0.1)  # after the transient
    assert find_rise(t, g) is None
    # a real rise after the transient is still found, against the post-transient baseline
    g2 = g.copy()
    g2[700:] *= 10
    r = find_rise(t, g2)
    assert r is not None and 690 <= r.step <= 710 and r.ratio == pytest.approx(10, rel=0.2)


@pytest.mark.slow
def test_false_collapse_rate_on_strongly_underdamped_runs_and_recall():
    from collapse_rates import rates

    # seed 1 is held out: the rule was tuned on seed 0 (there: 37 of 40, 20 of 21 settled)
    r = rates(40, seed=1)
    assert r["false_collapses"] == 0, r["false_examples"]
    assert r["candidates_without_law_check"] == 1
    assert (r["planted_found"], r["planted"]) == (39, 40)
    assert (r["planted_settled_found"], r["planted_settled"]) == (23, 23)
    assert r["planted_located"] == 37
    readme = " ".join(docs_text().split())
    assert (
        "0 false collapses in 40 strongly underdamped synthetic runs (damping ratio 0.08-0.25; "
        "1 of them is a candidate before the law check)"
    ) in readme
    assert (
        "39 of 40 planted collapses (23 of 23 planted after the run settled) are found, 37 of them dated "
        "within 10% of the run of the planted step"
    ) in readme


@pytest.mark.real_logs
@pytest.mark.parametrize("name, onset", [("GRPO", 892), ("GSPO", 1183)])
def test_real_collapses_are_kept(name, onset):
    from grpofit.readers import read_path

    path = REAL / "heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_TrainReward.csv"
    run = next(r for r in read_path(str(path)) if r.name.endswith(f"{name}_online"))
    c = fit_run(run).collapse
    assert c is not None and abs(c.step - onset) <= 15
    assert c.level_before > c.level_after


def test_sample_collapse_run_is_kept_and_the_oscillating_bandit_is_not_a_collapse():
    from grpofit.readers import read_path

    (run,) = read_path(str(ROOT / "sample_logs" / "collapse_run"))
    c = fit_run(run).collapse
    assert c is not None and c.step == 395
    (osc,) = read_path(str(ROOT / "sample_logs" / "bandit_oscillating.jsonl"))
    assert fit_run(osc).collapse is None


def test_a_fall_from_the_settled_level_long_after_an_overshoot_is_dated_at_the_fall():
    """Ringing run (zeta 0.13) that settles, then collapses at 75%: before the fix the onset was
    put at the overshoot's peak (step 80), the break model lost to the oscillator by BIC and the
    collapse was missed."""
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    from collapse_rates import _table, underdamped_truths

    from grpofit.core.runs import make_run

    truth = underdamped_truths(40, 0)[28]
    tab = _table(truth, True)
    cut = tab["step"][int(0.75 * tab["step"].size)]
    c = fit_run(make_run("s", "s.csv", "csv", {"step": tab["step"], "reward": tab["reward"]})).collapse
    assert c is not None and abs(c.step - cut) <= 0.1 * (tab["step"][-1] - tab["step"][0])
    clean = _table(truth, False)
    assert fit_run(make_run("s", "s.csv", "csv", {"step": clean["step"], "reward": clean["reward"]})).collapse is None
