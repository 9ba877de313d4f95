"""``--run PATTERN`` on forecast and backtest, and ``simulate --out`` written whole or not at all."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.reallogs import real_log

EXPORT = real_log("heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_TrainReward.csv")


@pytest.mark.slow
@pytest.mark.real_logs
@pytest.mark.parametrize("command", [["forecast", "--until", "300"], ["backtest", "--cuts", "50"]])
def test_run_pattern_keeps_the_matching_runs(capsys, command):
    code, out, err = run_cli(capsys, command[0], EXPORT, *command[1:], "--run", "*GEPO*", "--format", "json")
    assert code == 0, err
    assert [r["run"].split("::")[1] for r in json.loads(out)["runs"]] == ["[paper]GEPO_online"]


@pytest.mark.real_logs
@pytest.mark.parametrize("command", ["forecast", "backtest"])
def test_run_pattern_that_matches_nothing_is_one_error_line(capsys, command):
    code, out, err = run_cli(capsys, command, EXPORT, "--run", "nope")
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"error: --run 'nope' matches no run in {EXPORT}; check the run names with grpofit inspect, "
        "or use a glob such as '*GRPO*'"
    ]


def test_simulate_out_is_replaced_whole(capsys, tmp_path, monkeypatch):
    out = tmp_path / "sim.csv"
    out.write_text("old log\n")
    import grpofit.core.jsonout

    def full_disk(doc):  # the sidecar fails while the new log waits in its temporary file
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(grpofit.core.jsonout, "dumps", full_disk)
    code, _, err = run_cli(capsys, "simulate", "bandit", "--out", out, "--steps", "20")
    assert code == 2 and "No space left on device" in err
    assert out.read_text() == "old log\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sim.csv"]  # no temporary left behind
