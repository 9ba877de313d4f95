"""One verdict everywhere: --fail-on, --min-r2 and --strict decide the table, the markdown, the
JSON, the JUnit report and the exit code alike."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_logs"
WANDB = SAMPLES / "wandb"  # train_eval_decoupling fails, every other mode passes
HEALTHY = SAMPLES / "healthy_slow_start.csv"  # R² 0.954, every mode passes


@pytest.mark.slow
def test_a_fail_outside_fail_on_does_not_gate_anywhere(capsys, tmp_path):
    junit = tmp_path / "x.xml"
    args = ("diagnose", WANDB, "--fail-on", "dynamical_instability,advantage_degeneracy")
    code, out, _ = run_cli(capsys, *args, "--junit", junit, "--format", "markdown")
    assert code == 0
    assert "**Gate: passed**" in out
    row = next(line for line in out.splitlines() if line.startswith("| ") and "hack01" in line)
    assert "⚪ fail (not gating)" in row and row.endswith("| ⚠️ warn |")  # the verdict column agrees
    root = ET.parse(junit).getroot()
    assert root.findall(".//failure") == []
    (skipped,) = [c for c in root.iter("testcase") if c.get("name") == "train_eval_decoupling"]
    assert skipped.find("skipped").get("message").startswith("fail, not gating")
    code, out, _ = run_cli(capsys, *args, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["gate"]["passed"] and doc["gate"]["failed_runs"] == []
    run = doc["runs"][0]
    assert run["verdict"] == "warn" and run["status_verdict"] == "fail"
    assert run["diagnostics"]["train_eval_decoupling"]["status"] == "fail"  # the mode's own status stays
    assert run["gate"]["not_gating"] == ["train_eval_decoupling"]
    code, out, _ = run_cli(capsys, *args)
    assert code == 0 and "Gate: passed" in out and "fail*" in out
    assert "* a fail in a mode outside --fail-on" in out


def test_the_same_fail_gates_by_default_everywhere(capsys, tmp_path):
    junit = tmp_path / "x.xml"
    code, out, _ = run_cli(capsys, "diagnose", WANDB, "--junit", junit, "--format", "markdown")
    assert code == 1
    assert "**Gate: failed** (1 run failed)" in out
    assert f"- {WANDB}/run-20261129_120000-hack01: train_eval_decoupling fail" in out
    (failure,) = ET.parse(junit).getroot().findall(".//failure")
    assert "eval/reward falls" in failure.get("message")


def test_min_r2_shows_its_reason_everywhere(capsys, tmp_path):
    junit = tmp_path / "x.xml"
    code, out, _ = run_cli(capsys, "diagnose", HEALTHY, "--min-r2", "0.99", "--junit", junit)
    assert code == 1
    row = next(line for line in out.splitlines() if "healthy_slow_start.csv" in line and "│" in line)
    assert row.rstrip("│ ").endswith("fail")  # verdict column
    assert "Gate: failed (1 run failed)" in out
    assert f"  {HEALTHY}: R² 0.9538 below --min-r2 0.99" in out
    case = [c for c in ET.parse(junit).getroot().iter("testcase") if c.get("name") == "min_r2"]
    assert case[0].find("failure").get("message") == "R² 0.9538 below --min-r2 0.99"
    code, out, _ = run_cli(capsys, "diagnose", HEALTHY, "--min-r2", "0.99", "--format", "markdown")
    assert "**Gate: failed** (1 run failed)" in out and "R² 0.9538 below --min-r2 0.99" in out
    assert out.splitlines()[4].endswith("| ❌ fail |")
    code, out, _ = run_cli(capsys, "diagnose", HEALTHY, "--min-r2", "0.99", "--format", "json")
    doc = json.loads(out)
    assert doc["runs"][0]["verdict"] == "fail" and doc["gate"]["failed_runs"] == [str(HEALTHY)]
    assert doc["gate"]["reasons"] == {str(HEALTHY): ["R² 0.9538 below --min-r2 0.99"]}
    assert doc["runs"][0]["gate"]["reasons"] == ["R² 0.9538 below --min-r2 0.99"]


@pytest.mark.slow
def test_strict_makes_warnings_gate(capsys, tmp_path):
    # the oscillating bandit (damping ratio 0.23) only warns once the fail line is lowered to 0.1
    args = ("diagnose", SAMPLES / "bandit_oscillating.jsonl", "--threshold", "oscillation_fail_zeta=0.1")
    code, out, _ = run_cli(capsys, *args, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["runs"][0]["verdict"] == "warn"
    assert doc["runs"][0]["diagnostics"]["dynamical_instability"]["status"] == "warn"
    junit = tmp_path / "x.xml"
    code, out, _ = run_cli(capsys, *args, "--strict", "--junit", junit)
    assert code == 1
    assert "  sample_logs/bandit_oscillating.jsonl: dynamical_instability warn (--strict)" in out.replace(
        str(ROOT) + "/", ""
    )
    (failure,) = ET.parse(junit).getroot().findall(".//failure")
    assert failure.get("type") == "warn"
    code, out, _ = run_cli(capsys, *args, "--strict", "--format", "json")
    doc = json.loads(out)
    assert doc["runs"][0]["verdict"] == "fail" and doc["gate"]["policy"]["strict"] is True
    assert doc["runs"][0]["gate"]["reasons"] == ["dynamical_instability warn (--strict)"]
    # --strict with --fail-on: a warn outside the gating modes does not gate
    code, _, _ = run_cli(capsys, *args, "--strict", "--fail-on", "advantage_degeneracy")
    assert code == 0
