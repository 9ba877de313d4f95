"""FILE::RUN in every command, --run PATTERN, and predict --from-run reading the run's config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.reallogs import real_log

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_logs"
EXPORT = real_log("heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_TrainReward.csv")
WANDB = SAMPLES / "wandb" / "run-20261129_120000-hack01"  # config.yaml: lr 1e-6, adam_beta1 0.9, G 8


def _names(out: str) -> list[str]:
    return [r["run"].split("::")[1] for r in json.loads(out)["runs"]]


@pytest.mark.slow
@pytest.mark.real_logs
def test_file_run_and_run_pattern_select_runs_in_every_command(capsys):
    code, out, _ = run_cli(capsys, "fit", f"{EXPORT}::[paper]GEPO_online", "--format", "json")
    assert code == 0 and _names(out) == ["[paper]GEPO_online"]
    code, out, _ = run_cli(capsys, "fit", EXPORT, "--run", "*GSPO*", "--format", "json")
    assert code == 0 and _names(out) == ["[paper]GSPO_online"]
    code, out, _ = run_cli(
        capsys, "diagnose", f"{EXPORT}::[paper]GRPO_online", f"{EXPORT}::[paper]GEPO_online", "--format", "json"
    )
    assert code in (0, 1) and _names(out) == ["[paper]GRPO_online", "[paper]GEPO_online"]
    code, out, _ = run_cli(capsys, "diagnose", EXPORT, "--run", "*GEPO*", "--format", "json")
    assert _names(out) == ["[paper]GEPO_online"]
    code, out, _ = run_cli(capsys, "inspect", f"{EXPORT}::[paper]GSPO_online", "--format", "json")
    assert code == 0 and json.loads(out)["n_runs"] == 1 and _names(out) == ["[paper]GSPO_online"]


@pytest.mark.real_logs
def test_a_selection_that_matches_nothing_lists_the_runs(capsys):
    code, out, err = run_cli(capsys, "fit", f"{EXPORT}::nope")
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"error: no run 'nope' in {EXPORT}; runs there: [paper]GRPO_online, [paper]GEPO_online, [paper]GSPO_online"
    ]
    code, out, err = run_cli(capsys, "diagnose", EXPORT, "--run", "nope")
    assert code == 2 and err.startswith("error: --run 'nope' matches no run in ")


@pytest.mark.slow
@pytest.mark.real_logs
def test_predict_from_a_multi_run_file_says_how_to_pick_one(capsys):
    args = ("predict", "--lr", "1e-6", "--momentum", "0.9", "--refresh-interval", "1")
    code, _, err = run_cli(capsys, *args, "--from-run", EXPORT)
    assert code == 2 and err.splitlines() == [
        f"error: --from-run needs one run, {EXPORT} holds 3 ([paper]GRPO_online, [paper]GEPO_online, "
        f"[paper]GSPO_online); pick one with {EXPORT}::RUN or --run PATTERN"
    ]
    code, out, _ = run_cli(capsys, *args, "--from-run", f"{EXPORT}::[paper]GRPO_online", "--format", "json")
    assert code == 0 and json.loads(out)["from_run"]["run"].endswith("::[paper]GRPO_online")
    code, out, _ = run_cli(capsys, *args, "--from-run", EXPORT, "--run", "*GSPO*", "--format", "json")
    assert code == 0 and json.loads(out)["from_run"]["run"].endswith("GSPO_online")


@pytest.mark.slow
def test_predict_from_run_reads_the_config_and_flags_override(capsys):
    code, out, _ = run_cli(capsys, "predict", "--from-run", WANDB, "--refresh-interval", "2", "--format", "json")
    doc = json.loads(out)
    assert code == 0
    inputs = doc["input_sources"]
    assert doc["inputs"]["lr"] == pytest.approx(1e-07) and doc["inputs"]["refresh_interval"] == 2.0  # the numbers used
    config = f"{WANDB}/files/config.yaml"
    assert inputs["lr"] == {"value": 1e-06, "source": f"config: learning_rate in {config}"}
    assert inputs["momentum"]["value"] == 0.9 and inputs["momentum"]["source"].startswith(
        f"config: adam_beta1 in {config}"
    )
    assert inputs["refresh_interval"] == {"value": 2.0, "source": "--refresh-interval"}
    assert inputs["group_size"] == {"value": 8, "source": f"config: num_generations in {config}"}
    assert inputs["adam"]["value"] is True  # betas from an Adam config: eta_eff = lr (1 - beta1)
    assert any("eta_eff = lr (1 - beta1) = 1e-07" in n for n in doc["notes"])
    code, out, _ = run_cli(
        capsys,
        "predict",
        "--from-run",
        WANDB,
        "--refresh-interval",
        "2",
        "--lr",
        "3e-6",
        "--momentum",
        "0.5",
        "--format",
        "json",
    )
    inputs = json.loads(out)["input_sources"]
    assert inputs["lr"]["source"] == "--lr" and inputs["momentum"] == {"value": 0.5, "source": "--momentum"}
    assert inputs["adam"]["value"] is False
    code, out, err = run_cli(capsys, "predict", "--from-run", WANDB)
    assert code == 2 and err.splitlines() == [
        f"error: missing --refresh-interval (not in the config of {WANDB} either); "
        "pass --refresh-interval (flags override the run's config)"
    ]
    code, out, _ = run_cli(capsys, "predict", "--from-run", WANDB, "--refresh-interval", "2")
    assert "inputs (flags override the run's config)" in out and "1e-06  (config: learning_rate in" in out


def test_predict_table_without_a_run_has_no_input_sources(capsys):
    # the inputs table (where each value came from) belongs to --from-run; the closed form alone
    # used to crash rendering it from the plain numeric `inputs`
    args = ("predict", "--lr", "1e-6", "--momentum", "0.9", "--refresh-interval", "4", "--curvature", "2000")
    code, out, err = run_cli(capsys, *args, "--group-size", "8")
    assert code == 0 and err == "" and "closed form (step units)" in out and "group_size" in out
    assert "flags override" not in out
    code, out, _ = run_cli(capsys, *args, "--format", "json")
    doc = json.loads(out)
    assert "input_sources" not in doc and doc["inputs"]["lr"] == 1e-6 and doc["inputs"]["refresh_interval"] == 4.0
