"""Bad options: exit 2, one line naming the option and its valid values, before any work
(nothing on stdout); the conventions users expect (-h, completion, names in --help)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpofit.cli.helptext import threshold_names
from grpofit.core.vocabulary import MODES
from tests.conftest import run_cli
from tests.reallogs import real_log

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "sample_logs" / "bandit_g16.csv"


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["diagnose", RUN, "--threshold", "rise_fail"],
            "error: --threshold 'rise_fail' is not NAME=NUMBER; e.g. --threshold rise_fail=8",
        ),
        (
            ["diagnose", RUN, "--group-size", "-3"],
            "error: Invalid value for '--group-size': -3 is not in the range x>=1; see 'grpofit diagnose --help'",
        ),
        (
            ["diagnose", RUN, "--jobs", "0"],
            "error: Invalid value for '--jobs': 0 is not in the range x>=1; see 'grpofit diagnose --help'",
        ),
        (
            ["fit", RUN, "--plot", "x.jpgz"],
            "error: --plot x.jpgz: cannot tell the figure format from the suffix; end the file name in .png, .svg or .pdf",
        ),
        (
            [
                "predict",
                "--lr",
                "1e-3",
                "--momentum",
                "0.9",
                "--refresh-interval",
                "2",
                "--curvature",
                "3",
                "--plot",
                "a.jpgz",
            ],
            "error: --plot a.jpgz: cannot tell the figure format from the suffix; end the file name in .png, .svg or .pdf",
        ),
    ],
)
def test_bad_option_is_one_line_before_any_work(capsys, args, line):
    code, out, err = run_cli(capsys, *args)
    assert code == 2 and out == ""
    assert err.splitlines() == [line]


def test_unknown_threshold_name_lists_the_valid_names(capsys):
    code, out, err = run_cli(capsys, "diagnose", RUN, "--threshold", "grad_norm_factor=5")
    assert code == 2 and out == ""
    assert err.splitlines() == [
        "error: --threshold: unknown name 'grad_norm_factor'; valid names: " + ", ".join(threshold_names())
    ]
    assert "rise_fail" in threshold_names() and "grad_norm_factor" not in threshold_names()


def test_unknown_mode_names_the_option_and_the_modes(capsys):
    code, out, err = run_cli(capsys, "diagnose", RUN, "--fail-on", "nope")
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert "--fail-on" in err and all(m in err for m in MODES)


def test_eval_metric_error_names_eval_metric(capsys):
    code, out, err = run_cli(capsys, "diagnose", RUN, "--eval-metric", "nope")
    (line,) = err.splitlines()
    assert code == 2 and out == ""  # no error row first: a bad option prints nothing on stdout
    assert "--eval-metric 'nope' is not a column" in line and "pass --eval-metric with one of" in line
    assert "--metric " not in line


@pytest.mark.real_logs
def test_each_error_is_printed_once(capsys):
    gradnorm = real_log("heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_GradNorm.csv")
    code, out, err = run_cli(capsys, "diagnose", gradnorm)
    assert code == 2
    assert len(err.splitlines()) == 3 and "no reward column" not in out  # stdout: error rows only
    assert out.count("│ error") == 3


def test_short_help_completion_and_names_in_help(capsys):
    for args in (["-h"], ["fit", "-h"], ["simulate", "-h"], ["simulate", "bandit", "-h"]):
        code, out, _ = run_cli(capsys, *args)
        assert code == 0 and out.startswith("Usage: grpofit")
    _, out, _ = run_cli(capsys, "--help")
    assert "--install-completion" in out
    _, out, _ = run_cli(capsys, "diagnose", "--help")
    flat = " ".join(out.split())
    assert all(m in flat for m in MODES) and "--strict" in flat
    assert all(name in flat for name in threshold_names())
    _, out, _ = run_cli(capsys, "simulate", "--help")
    assert "grpofit simulate bandit --arms 8" in " ".join(out.split())


def test_forecast_plot_suffix_error_names_the_option(capsys):
    code, out, err = run_cli(capsys, "forecast", RUN, "--plot", "x.jpgz")
    assert code == 2 and out == ""
    assert err.splitlines() == [
        "error: --plot x.jpgz: cannot tell the figure format from the suffix; end the file name in .png, .svg or .pdf"
    ]
