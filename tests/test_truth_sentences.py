"""Sentences the data contradicted, each on a run of the kind that showed it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import run_cli


def floor_run(path, seed: int = 1, rise: int = 60, fall: int = 200):
    """A verl-like agent run: the score rises a little, then sinks to its floor -1 and sits
    there for 250 steps while the responses shrink to one token."""
    rng = np.random.default_rng(seed)
    n = rise + fall + 250
    t = np.arange(n)
    r = -0.7 + 0.5 * (1 - np.exp(-t / (rise / 3))) + rng.normal(0, 0.08, n)
    down = np.clip((t - rise) / fall, 0, 1)
    r = r * (1 - down) + (-1.0) * down + rng.normal(0, 0.08, n) * (1 - down)
    r = np.maximum(r, -1.0)
    length = 300 * (1 - down) + down + rng.normal(0, 10, n) * (1 - down)
    with open(path, "w") as f:
        f.write("step,critic/score/mean,response_length/mean\n")
        for i in range(n):
            f.write(f"{i + 1},{float(r[i])!r},{float(length[i])!r}\n")
    return path


def test_a_run_sitting_at_its_floor_fails_the_gate_and_every_command_names_the_collapse(capsys, tmp_path):
    path = floor_run(tmp_path / "floor.csv")
    code, out, _ = run_cli(capsys, "diagnose", path, "--format", "json")
    diag = json.loads(out)["runs"][0]
    assert code == 1 and diag["diagnostics"]["dynamical_instability"]["status"] == "fail"
    step = diag["collapse"]["step"]
    assert diag["collapse"]["level_after"] == -1.0 and not diag["collapse"]["recovered"]
    fit = json.loads(run_cli(capsys, "fit", path, "--format", "json")[1])["runs"][0]
    n = int(np.loadtxt(path, delimiter=",", skiprows=1).shape[0])
    fc = json.loads(run_cli(capsys, "forecast", path, "--horizon", str(2 * n), "--format", "json")[1])["runs"][0]
    assert fit["collapse"]["step"] == step == fc["collapse"]["step"]
    # the floor it sits at is the forecast, with the collapse named
    assert fc["note"].startswith(f"the reward collapsed at step {step:g}")
    assert fc["at"][0]["mean"] == pytest.approx(-1.0, abs=0.02)


def _truncation_finding(table):
    from grpofit.core.runs import make_run
    from grpofit.diagnostics import diagnose_run

    d = diagnose_run(make_run("r", "r", "test", table, step="step"))
    return {f.rule: f for f in d.diagnostics["dynamical_instability"].findings}


def test_a_truncation_rate_that_fell_is_not_steadily_high():
    from grpofit.testing.planted import make_rule_run

    table = make_rule_run(None, seed=2)
    n = table["step"].size
    table["completions/clipped_ratio"] = np.linspace(0.265, 0.149, n)
    f = _truncation_finding(table)["truncation"]
    assert f.status == "warn" and "steadily high" not in f.evidence and "falling" in f.evidence


def test_length_cap_does_not_apply_when_a_truncation_rate_is_logged():
    """TRL logs completions/clipped_ratio: the rate decides (a warning for a steady high rate),
    the length's maximum does not add a fail."""
    from grpofit.testing.planted import make_rule_run

    table = make_rule_run("length_cap", seed=1)
    table["completions/clipped_ratio"] = np.clip(
        0.2 + 0.01 * np.random.default_rng(0).standard_normal(table["step"].size), 0, 1
    )
    rules = _truncation_finding(table)
    assert "length_cap" not in rules and rules["truncation"].status == "warn"


def test_a_rise_whose_plateau_is_not_identified_is_still_called_a_rise(capsys):
    """The countdown run climbs (its slope is about 7 standard errors from 0) but the law's gain
    (plateau - initial) is 1.2 standard errors from 0: the plateau is what is unidentified, not
    the rise; the reason said "no significant rise". A flat run stays "no significant rise"."""
    import pytest

    from grpofit.fitting import fit_series
    from tests.test_one_judgement import REAL

    path = REAL / "countdown_grpo_custom_beibeizzz.jsonl"
    if not path.exists():
        pytest.skip("no shared real logs")
    sig = json.loads(run_cli(capsys, "fit", path, "--format", "json")[1])["runs"][0]["signal"]
    assert not sig["detected"] and sig["trend_z"] > 5
    assert sig["reason"].startswith("a significant rise") and "no significant rise" not in sig["reason"]
    rng = np.random.default_rng(4)
    t = np.arange(1, 301, dtype=float)
    flat = fit_series(t, 0.5 + 0.05 * rng.standard_normal(t.size)).signal
    assert not flat["detected"] and "significant rise (" not in flat["reason"]


def _quoted_windows_hold(evidence: str, steps, evals, train_steps, train) -> None:
    """Every eval value the train-eval sentence quotes is the median of the evals at the steps it
    names, and the train values are the train reward's medians over the same steps."""
    import re

    m = re.search(
        r"falls from (\S+) \(median of the \d+ evals at steps (\S+)-(\S+)\) to (\S+) "
        r"\(median of the \d+ evals at steps (\S+)-(\S+)\) while the train reward goes (\S+) -> (\S+) over",
        evidence,
    )
    assert m, evidence
    e_a, a0, a1, e_b, b0, b1, t_a, t_b = (float(x) for x in m.groups())
    for e, lo, hi, t in ((e_a, a0, a1, t_a), (e_b, b0, b1, t_b)):
        inside = (steps >= lo) & (steps <= hi)
        assert np.median(evals[inside]) == pytest.approx(e, rel=5e-3)
        assert np.median(train[(train_steps >= lo) & (train_steps <= hi)]) == pytest.approx(t, rel=5e-3, abs=1e-3)
    assert t_b >= t_a - 0.05 * abs(t_a)  # a decoupling: the train reward did not fall over those steps


@pytest.mark.real_logs
def test_train_eval_quotes_the_values_at_the_quoted_steps_and_needs_a_train_reward_that_did_not_fall(capsys):
    # issue 37: "eval_acc falls from 53.6 at step 50 to 35.2 at step 500 while the train reward
    # goes 1 -> 1.38" where eval_acc at step 500 is 39.0 and the train reward fell (its medians
    # over the same steps 1.62 -> 0.5): not a decoupling
    from tests.reallogs import REAL_LOGS

    path = REAL_LOGS / "rasbt_grpo_qwen3-0.6b_7_6_format_reward_conditional.csv"
    code, out, _ = run_cli(capsys, "diagnose", str(path), "--format", "json")
    d = json.loads(out)["runs"][0]["diagnostics"]["train_eval_decoupling"]
    assert d["status"] != "fail" and "35.2 at step 500" not in d["evidence"], d["evidence"]


def test_train_eval_fail_quotes_medians_over_named_steps(capsys):
    from grpofit.readers import read_path

    path = "sample_logs/wandb/run-20261129_120000-hack01"
    code, out, _ = run_cli(capsys, "diagnose", path, "--format", "json")
    d = json.loads(out)["runs"][0]["diagnostics"]["train_eval_decoupling"]
    assert d["status"] == "fail"  # a real decoupling still fails
    run = read_path(path)[0]
    s = np.asarray(run.steps, dtype=float)
    ev, tr = (np.asarray(run.metrics[c], dtype=float) for c in ("eval/reward", "train/reward"))
    _quoted_windows_hold(
        d["evidence"], s[np.isfinite(ev)], ev[np.isfinite(ev)], s[np.isfinite(tr)], tr[np.isfinite(tr)]
    )


@pytest.mark.parametrize("seed", [21, 22, 23, 24])
def test_a_flat_run_s_plateau_is_its_level_not_the_fit_box(seed):
    # issue 37: a flat run with no rise printed p* 1.75 [-0.875, 1.75] (the fit box), another
    # 0.707 [-0.935, 0.707] while its last tenth averaged 0.023: the law's extrapolated noise
    from grpofit.fitting import fit_series
    from grpofit.fitting.fitcheck import plateau_statement

    rng = np.random.default_rng(seed)
    n = 300
    y = rng.normal(0.5, 0.3, n) if seed % 2 else rng.binomial(8, 0.03, n) / 8
    res = fit_series(np.arange(1, n + 1.0), y, run="flat", metric="reward", step_column="step")
    assert not res.signal["detected"]
    st = plateau_statement(res)
    lo, hi = st["ci95"]
    assert st["kind"] == "estimate" and lo < float(np.mean(y)) < hi
    assert hi - lo < 0.15 and abs(st["value"] - float(np.mean(y[-n // 10 :]))) < 0.15


@pytest.mark.parametrize("seed", [3, 4])
def test_no_step_reaching_90_percent_of_a_gain_the_steps_seen_do_not_show(capsys, tmp_path, seed):
    # a flat run printed "step reaching 90% of the gain: 2.29 [1.76, 3.94]" while fit called its
    # timescale not identifiable (no significant rise): a step drawn from the noise
    rng = np.random.default_rng(seed)
    path = tmp_path / "flat.csv"
    y = 0.3 + 0.02 * rng.standard_normal(200)
    path.write_text("step,reward\n" + "".join(f"{i + 1},{float(v)!r}\n" for i, v in enumerate(y)))
    fit = json.loads(run_cli(capsys, "fit", path, "--format", "json")[1])["runs"][0]
    assert fit["signal"]["detected"] is False
    fc = json.loads(run_cli(capsys, "forecast", path, "--horizon", "400", "--format", "json")[1])["runs"][0]
    for key in ("steps_to_90", "steps_to_95"):
        assert fc[key]["value"] is None and fc[key]["reason"].startswith("no significant")
    assert fc["at"][0]["mean"] == pytest.approx(0.3, abs=0.02)  # the level is still forecast
    # a rise keeps its steps
    t = np.arange(1, 201.0)
    y = 0.2 + 0.5 * (1 - np.exp(-t / 40)) + 0.02 * rng.standard_normal(200)
    path.write_text("step,reward\n" + "".join(f"{i + 1},{float(v)!r}\n" for i, v in enumerate(y)))
    fc = json.loads(run_cli(capsys, "forecast", path, "--horizon", "400", "--format", "json")[1])["runs"][0]
    assert 40 < fc["steps_to_90"]["value"] < 160


def test_a_cut_run_that_collapsed_states_the_plateau_before_the_collapse(capsys):
    # rasbt 7_5 cut at step 300 printed "plateau before the collapse at step 52.0: 0.0145 [0, 1.00]"
    # (the level after the fall, from a fit of the whole cut series) and "step reaching 90% of the
    # gain: 55.4 [55.4, 55.4]" (the fall itself); uncut it printed fit's 0.446 [0.332, 0.560]
    from tests.reallogs import real_log

    path = real_log("rasbt_grpo_qwen3-0.6b_7_5_kl_collapse.csv")
    fit = json.loads(run_cli(capsys, "fit", path, "--format", "json")[1])["runs"][0]
    want = fit["models"][fit["preferred"]]["params"]["plateau"]["value"]
    for extra in ([], ["--until", "300"]):
        code, out, _ = run_cli(capsys, "forecast", path, *extra, "--format", "json")
        fc = json.loads(out)["runs"][0]
        assert fc["collapse"]["step"] == fit["collapse"]["step"]
        assert fc["plateau"]["value"] == pytest.approx(want, rel=1e-6)
        assert fc["steps_to_90"]["value"] is None and "collapse" in fc["steps_to_90"]["reason"]
    _, text, _ = run_cli(capsys, "forecast", path, "--until", "300")
    assert "plateau before the collapse at step 52 " in text and "steps 1..300 " in text  # steps read as steps
