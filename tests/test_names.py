"""Run names in tables: common directories cut by path components, long names elided in the
middle (never wrapped), no trailing spaces off a terminal, each run judged once."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from grpofit.render.tables import elide, short_names
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_logs"


def test_short_names_cut_whole_path_components():
    assert short_names(["./sample_logs/healthy_slow_start.csv", "sample_logs/bandit_g16.csv"]) == [
        "healthy_slow_start.csv",
        "bandit_g16.csv",
    ]
    assert short_names(["logs/ab/x.csv", "logs/ac/y.csv"]) == ["ab/x.csv", "ac/y.csv"]  # not "b/x.csv"
    assert short_names(["/data/a.csv", "/other/b.csv"]) == ["/data/a.csv", "/other/b.csv"]
    assert short_names(["d/export.csv::run a", "d/export.csv::run b"]) == ["export.csv::run a", "export.csv::run b"]


def test_elide_cuts_the_middle_and_prefers_path_components():
    assert elide("collapse_run/checkpoint-400", 40) == "collapse_run/checkpoint-400"
    assert elide("runs/2026/november/collapse_run/checkpoint-400", 30) == "runs/…/checkpoint-400"
    assert elide("heterorl_qwen3_1p7b.wandb_TrainReward.csv::[paper]GRPO_online", 24) == "…::[paper]GRPO_online"
    assert elide("heterorl_qwen3_1p7b.wandb_TrainReward.csv::GRPO", 24) == "hetero…nReward.csv::GRPO"
    text = elide("bandit_oscillating_long_name_g16.csv", 20)
    assert len(text) == 20 and text.startswith("bandit") and text.endswith("g16.csv") and "…" in text


@pytest.mark.slow
@pytest.mark.parametrize("columns", [80, 120])
def test_table_fits_narrow_terminals_without_wrapping_names(capsys, monkeypatch, tmp_path, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    deep = tmp_path / "an_experiment_with_a_rather_long_name" / "bandit_g16_with_a_long_suffix_too.csv"
    deep.parent.mkdir()
    shutil.copy(SAMPLES / "bandit_g16.csv", deep)
    code, out, _ = run_cli(capsys, "diagnose", deep, SAMPLES / "healthy_slow_start.csv")
    assert code == 0
    lines = out.splitlines()
    table = [line for line in lines if set(line) & set("│┃━")]
    assert all(len(line) <= columns for line in table), max(map(len, table))
    rows = [line for line in lines if "│" in line]
    assert len(rows) == 2  # one line per run: no name wrapped onto a second line
    assert "…" in rows[0] and rows[0].split("│")[0].strip().endswith("_too.csv")
    assert all(line == line.rstrip() for line in lines)  # piped: no padding
    assert "T-E" in out  # the compact layout below 130 columns


def test_wide_table_has_no_trailing_spaces_when_piped(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, _ = run_cli(capsys, "fit", SAMPLES / "bandit_g16.csv")
    assert code == 0 and all(line == line.rstrip() for line in out.splitlines())
    code, out, _ = run_cli(capsys, "diagnose", SAMPLES / "bandit_g16.csv")
    assert all(line == line.rstrip() for line in out.splitlines())
    assert "1/K_eff" in out  # 140 columns off a terminal: the full layout


def test_the_same_run_given_twice_is_judged_once(capsys, tmp_path, monkeypatch):
    f = tmp_path / "f.csv"
    shutil.copy(SAMPLES / "bandit_g16.csv", f)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "diagnose", "f.csv", "f.csv", "./f.csv", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and [r["run"] for r in doc["runs"]] == ["f.csv"]
    assert err.splitlines() == [
        "warning: f.csv: the same run as f.csv; judged once",
        "warning: ./f.csv: the same run as f.csv; judged once",
    ]
    code, out, _ = run_cli(capsys, "fit", "f.csv", "./f.csv", "--format", "json")
    assert len(json.loads(out)["runs"]) == 1


def test_eval_table_elides_names_and_never_cuts_numbers():
    """The per-benchmark table keeps one line per row at 120 columns (long run and benchmark names
    elided in the middle, not wrapped mid-word) and prints every number whole, even at 80."""
    from rich.console import Console

    from grpofit.render.tables import eval_table

    ev = {"points": 27, "gain": -0.0127, "plateau": {"value": 0.468, "ci95": [0.401, 0.535]}, "status": "pass"}
    doc = {
        "runs": [
            {
                "run": "logs/verl_grpo_gsm8k_qwen2-7b_trtllm.tfevents",
                "evals": [dict(ev, benchmark="openai/gsm8k"), dict(ev, benchmark="DigitalLearningGmbH/MATH-lighteval")],
            }
        ]
    }
    for width in (120, 160):
        console = Console(width=width, record=True, file=open(os.devnull, "w"))
        console.print(eval_table(doc, width=width))
        rows = [line for line in console.export_text().splitlines() if line.startswith("│")]
        assert len(rows) == 2, rows  # one line per benchmark: nothing wrapped
        assert all("-0.0127" in r and "0.468 [0.401, 0.535]" in r for r in rows)
        assert "…" in rows[1] and "lighteval" in rows[1]
    console = Console(width=80, record=True, file=open(os.devnull, "w"))
    console.print(eval_table(doc, width=80))
    text = console.export_text()
    assert "-0.0127" in text and "0.468" in text and "0.535" in text  # folded, never cut
