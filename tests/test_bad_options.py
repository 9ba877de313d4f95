"""Every command's bad-option paths: exit 2, one ``error:`` line on stderr naming the option,
and nothing on stdout (no table, no error row, no JSON) and no file written: the error comes
before any work, or, for an option that names a column (``--metric``, ``--eval-metric``,
``--step``), as soon as the runs show that none of them has it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
RUN = str(ROOT / "sample_logs" / "bandit_g16.csv")
EVAL = str(ROOT / "sample_logs" / "healthy_slow_start.csv")  # has an eval_reward column
LOGS = str(ROOT / "sample_logs")
PREDICT = ["--lr", "1e-3", "--momentum", "0.9", "--refresh-interval", "2", "--curvature", "3"]

CASES = [
    (["fit", RUN, "--metric", "nope"], "--metric 'nope'"),
    (["fit", RUN, "--step", "nope"], "--step"),
    (["fit", LOGS, "--metric", "nope"], "--metric 'nope' matches no column in any of the 9 runs"),
    (["fit", LOGS, "--metric", "nope", "--jobs", "2"], "--metric 'nope' matches no column in any of the 9 runs"),
    (["diagnose", RUN, "--metric", "nope"], "--metric 'nope'"),
    (["diagnose", EVAL, "--eval-metric", "nope"], "--eval-metric 'nope' is not a column"),
    (["diagnose", EVAL, "--eval-metric", "nope", "--format", "json"], "--eval-metric 'nope' is not a column"),
    (["diagnose", EVAL, "--eval-metric", "nope", "--format", "markdown"], "--eval-metric 'nope' is not a column"),
    (["diagnose", RUN, "--eval-metric", "val-core/*"], "--eval-metric 'val-core/*'"),
    (["diagnose", LOGS, "--eval-metric", "nope"], "--eval-metric 'nope' matches no column in any of the 9 runs"),
    (["diagnose", RUN, "--step", "nope"], "--step"),
    (["diagnose", RUN, "--min-r2", "5"], "--min-r2"),
    (["diagnose", RUN, "--horizon", "-5"], "--horizon"),
    (["diagnose", RUN, "--threshold", "rise_fail=-1"], "rise_fail"),
    (["forecast", RUN, "--metric", "nope"], "--metric 'nope'"),
    (["forecast", LOGS, "--metric", "nope"], "--metric 'nope'"),
    (["forecast", RUN, "--horizon", "-1"], "--horizon"),
    (["backtest", RUN, "--metric", "nope"], "--metric 'nope'"),
    (["backtest", LOGS, "--metric", "nope"], "--metric 'nope' matches no column in any of the 9 runs"),
    (["backtest", RUN, "--step", "nope"], "--step"),
    (["backtest", RUN, "--cuts", "0,200"], "--cuts"),
    (["compare", RUN, EVAL, "--metric", "nope"], "--metric 'nope'"),
    (["inspect", RUN, "--step", "nope"], "--step"),
    (
        [
            "predict",
            "--from-run",
            RUN,
            "--lr",
            "1e-3",
            "--momentum",
            "0.9",
            "--refresh-interval",
            "2",
            "--metric",
            "nope",
        ],
        "--metric 'nope'",
    ),
    (["watch", RUN, "--once", "--metric", "nope"], "--metric 'nope'"),
    (["watch", EVAL, "--once", "--no-forecast", "--eval-metric", "nope"], "--eval-metric 'nope'"),
    (
        ["watch", LOGS, "--once", "--no-forecast", "--eval-metric", "nope"],
        "--eval-metric 'nope' matches no column in any of the 9 runs",
    ),
    (["watch", RUN, "--once", "--step", "nope"], "--step"),
]


@pytest.mark.slow
@pytest.mark.parametrize("args, words", CASES, ids=[" ".join(Path(a).name for a in c[0]) for c in CASES])
def test_bad_option_prints_nothing_on_stdout(capsys, args, words):
    code, out, err = run_cli(capsys, *args)
    assert (code, out) == (2, ""), (code, out[:300])
    (line,) = err.splitlines()
    assert line.startswith("error: ") and words in line and "; " in line, line


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["fit", RUN, "--plot", "{bad}/x.png"],
        ["forecast", RUN, "--plot", "{bad}/x.png"],
        ["compare", RUN, EVAL, "--plot", "{bad}/x.png"],
        ["predict", *PREDICT, "--plot", "{bad}/x.png"],
        ["diagnose", RUN, "--junit", "{bad}/x.xml"],
        ["diagnose", RUN, "--junit", "{tmp}"],
        ["diagnose", RUN, "--plot-dir", "{bad}"],
        ["backtest", RUN, "--plot-dir", "{bad}/d"],
        ["watch", RUN, "--once", "--jsonl", "{bad}/x.jsonl"],
        ["simulate", "bandit", "--out", "{bad}/x.csv"],
    ],
    ids=lambda a: " ".join(
        x
        for x in a
        if x.startswith("-")
        or x in ("fit", "diagnose", "forecast", "compare", "predict", "backtest", "watch", "simulate")
    ),
)
def test_an_output_path_that_cannot_be_written_is_an_error_before_any_work(capsys, tmp_path, args):
    bad = tmp_path / "a_file"  # a file where a folder is needed
    bad.write_text("x")
    args = [a.format(bad=bad, tmp=tmp_path) for a in args]
    code, out, err = run_cli(capsys, *args)
    assert (code, out) == (2, ""), (code, out[:300])
    (line,) = err.splitlines()
    option = next(a for a in args if a in ("--plot", "--junit", "--plot-dir", "--jsonl", "--out"))
    assert line.startswith("error: ") and "; " in line and str(bad if "{bad}" in " ".join(args) else tmp_path) in line
    assert option in line or "--out" == option, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]  # nothing written


def test_a_column_some_runs_lack_is_an_error_row_beside_the_runs_judged(capsys):
    # not a bad option for every run: the runs that have the column are judged and shown
    code, out, err = run_cli(capsys, "diagnose", EVAL, RUN, "--eval-metric", "eval_reward")
    assert code == 2
    assert "healthy_slow_start.csv" in out and "│ error" in out
    (line,) = err.splitlines()
    assert "bandit_g16.csv" in line and "--eval-metric 'eval_reward' is not a column" in line


def test_watch_while_following_warns_about_the_option_and_keeps_waiting(capsys):
    code, out, err = run_cli(
        capsys, "watch", EVAL, "--max-polls", "1", "--interval", "0.1", "--no-forecast", "--eval-metric", "nope"
    )
    assert code == 0 and "UPDATE run=" in out  # the column may still appear (a first eval)
    (line,) = err.splitlines()
    assert line.startswith("warning: ") and "--eval-metric 'nope' is not a column" in line


def test_backtest_with_nothing_backtested_prints_only_the_errors(capsys):
    code, out, err = run_cli(capsys, "backtest", RUN, str(ROOT / "no_such_dir"), "--metric", "nope")
    assert (code, out) == (2, "")  # no empty table
    assert len(err.splitlines()) == 2 and "no_such_dir" in err and "--metric 'nope'" in err
