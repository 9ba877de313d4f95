"""Falling series: a loss, KL or cost is fitted as a decay; a reward that falls
gets a clear "falling" finding (a warning), never a quiet plateau."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from grpofit.fitting.fitcheck import metric_kind
from grpofit.render.tables import step_text
from tests.conftest import run_cli


@pytest.fixture
def falling_csv(tmp_path):
    rng = np.random.default_rng(0)
    s = np.arange(1, 301)
    loss = 0.5 + 2.0 * np.exp(-s / 60) + rng.normal(0, 0.03, s.size)
    reward = 0.2 + 0.4 * np.exp(-s / 80) + rng.normal(0, 0.02, s.size)
    path = tmp_path / "falling.csv"
    path.write_text("step,loss,reward\n" + "\n".join(f"{a},{b:.5f},{c:.5f}" for a, b, c in zip(s, loss, reward)) + "\n")
    return path


def test_metric_kind():
    assert [metric_kind(n) for n in ("loss", "actor/kl_loss", "kl", "cost", "policy_loss", "train/entropy")] == [
        "decays"
    ] * 6
    assert [metric_kind(n) for n in ("reward", "critic/rewards/mean", "eval_acc", "val-core/gsm8k/reward")] == [
        "rises"
    ] * 4


def test_a_loss_is_fitted_as_a_decay_on_every_point(capsys, falling_csv):
    code, out, _ = run_cli(capsys, "fit", falling_csv, "--metric", "loss", "--format", "json")
    run = json.loads(out)["runs"][0]
    assert code == 0 and run["n_points"] == 300 and run["collapse"] is None
    assert run["trend"]["direction"] == "falling" and run["trend"]["unexpected"] is False
    code, out, _ = run_cli(capsys, "fit", falling_csv, "--metric", "loss")
    assert f"{falling_csv}: loss decays from 2.46 to 0.493, timescale 60.9 steps: fitted as a decay" in out
    assert "collapses" not in out


@pytest.mark.slow
def test_a_falling_reward_is_a_falling_finding(capsys, falling_csv):
    code, out, _ = run_cli(capsys, "diagnose", falling_csv, "--format", "json")
    run = json.loads(out)["runs"][0]
    assert code == 0 and run["trend"]["direction"] == "falling" and run["trend"]["unexpected"]
    assert run["verdict"] == "warn"  # never a quiet pass
    code, out, _ = run_cli(capsys, "diagnose", falling_csv)
    assert "0.198 ↓" in out
    assert (
        f"{falling_csv}: reward is falling: 0.591 at the start, 0.215 over steps 226-300, "
        "timescale 82 steps; p* 0.198 is where the fall leads, not a plateau reached by learning" in out
    )
    code, _, _ = run_cli(capsys, "diagnose", falling_csv, "--strict")
    assert code == 1


def test_a_rising_reward_is_not_marked(capsys):
    from pathlib import Path

    run = Path(__file__).resolve().parents[1] / "sample_logs" / "healthy_slow_start.csv"
    code, out, _ = run_cli(capsys, "diagnose", run, "--format", "json")
    entry = json.loads(out)["runs"][0]
    assert entry["trend"]["direction"] == "rising" and not entry["trend"]["unexpected"] and entry["verdict"] == "pass"


def test_steps_print_as_integers():
    assert step_text(395.0) == "395" and step_text(3) == "3" and step_text(12.5) == "12.5"
    assert not math.isnan(float(step_text(1e6)))


def test_a_falling_reward_is_in_the_junit_report_and_fails_it_with_strict(capsys, falling_csv, tmp_path):
    from xml.etree import ElementTree as ET

    junit = tmp_path / "r.xml"
    for strict, code_expected, failures in ((False, 0, 0), (True, 1, 1)):
        args = ["diagnose", falling_csv, "--junit", junit] + (["--strict"] if strict else [])
        code, out, _ = run_cli(capsys, *args)
        assert code == code_expected
        suite = ET.parse(junit).getroot().find("testsuite")
        assert suite.get("failures") == str(failures)
        (case,) = [c for c in suite.iter("testcase") if c.get("name") == "reward_trend"]
        props = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert props["reward_trend"] == "falling" and props["verdict"] == ("fail" if strict else "warn")
        if strict:
            assert case.find("failure").get("message").startswith("reward is falling: 0.591 at the start")
            assert f"  {falling_csv}: reward falling (--strict)" in out
        else:
            assert case.find("system-out").text.startswith("warn: reward is falling")
