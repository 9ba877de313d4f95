"""How rows are laid out in logs: several runs appended to one file (JSONL and CSV), eval rows
flagged among training rows, JSON rows printed among lines of text, a JSON document cut short."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from grpofit.core.errors import ReadError
from grpofit.core.roles import detect_roles
from grpofit.readers import read_bytes, read_path
from tests.conftest import run_cli


def curve(s: float, level: float = 0.8, start: float = 0.2, tau: float = 20.0) -> float:
    return round(level - (level - start) * math.exp(-s / tau), 6)


def dumps(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


# ------------------------------------------------------------------ appended runs

LENGTHS = (100, 150, 120, 130, 142)  # five reruns of a script writing to the same metrics.jsonl


def appended() -> bytes:
    return dumps(
        {"step": s, "reward": curve(s, level=0.5 + 0.1 * k)} for k, n in enumerate(LENGTHS) for s in range(1, n + 1)
    )


def test_runs_appended_one_after_another_are_separate_runs():
    runs = read_bytes(appended(), "metrics.jsonl")
    assert [r.name for r in runs] == [f"metrics.jsonl::run{k}" for k in range(1, 6)]
    for k, (run, n) in enumerate(zip(runs, LENGTHS)):
        assert run.steps.tolist() == list(range(1, n + 1))
        assert run.metrics["reward"][-1] == curve(n, level=0.5 + 0.1 * k)
        assert "duplicates" not in run.stats and "unsorted" not in run.stats
        assert not any("duplicated" in w or "not in order" in w for w in run.warnings)
    assert any("holds 5 runs appended one after another" in w for w in runs[0].warnings)


def test_fit_reports_each_appended_run(capsys, tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(appended())
    code, out, err = run_cli(capsys, "fit", path, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert [r["n_points"] for r in doc["runs"]] == list(LENGTHS)


def test_csv_runs_appended_with_or_without_a_repeated_header(tmp_path):
    for repeat_header in (False, True):
        rows = ["step,reward"]
        for k, n in enumerate((80, 120)):
            if k and repeat_header:
                rows.append("step,reward")
            rows += [f"{s},{curve(s, level=0.5 + 0.1 * k)}" for s in range(1, n + 1)]
        path = tmp_path / "log.csv"
        path.write_text("\n".join(rows) + "\n")
        runs = read_path(str(path))
        assert [r.steps.size for r in runs] == [80, 120], repeat_header
        assert runs[1].metrics["reward"][-1] == curve(120, level=0.6)
        assert not any("duplicated" in w for r in runs for w in r.warnings)


def test_a_run_id_field_tells_runs_apart():
    rows = [
        {"run_id": f"seed{k}", "step": s, "reward": curve(s, level=0.6 + 0.1 * k)}
        for s in range(1, 61)
        for k in range(3)
    ]  # interleaved, as parallel workers write
    runs = read_bytes(dumps(rows), "m.jsonl")
    assert [r.name for r in runs] == ["m.jsonl::seed0", "m.jsonl::seed1", "m.jsonl::seed2"]
    for k, run in enumerate(runs):
        assert run.steps.tolist() == list(range(1, 61)) and "run_id" not in run.metrics
        assert run.metrics["reward"][-1] == curve(60, level=0.6 + 0.1 * k)


def test_a_resume_and_a_false_start_stay_one_run():
    """A resume from a checkpoint goes back part of the way; a restart after a few steps (rasbt's
    7_3 log: steps 1-5, then 1-500) is a false start: both stay one run, later rows winning."""
    resume = [{"step": s, "reward": curve(s)} for s in range(1, 31)] + [
        {"step": s, "reward": curve(s) + 0.5} for s in range(20, 41)
    ]
    (run,) = read_bytes(dumps(resume), "r.jsonl")
    assert run.steps.tolist() == list(range(1, 41)) and run.stats["duplicates"] == 11
    false_start = [{"step": s, "reward": 9.0} for s in range(1, 6)] + [
        {"step": s, "reward": curve(s)} for s in range(1, 51)
    ]
    (run,) = read_bytes(dumps(false_start), "f.jsonl")
    assert run.steps.tolist() == list(range(1, 51)) and run.stats["duplicates"] == 5
    assert run.metrics["reward"].max() < 1


# ------------------------------------------------------------------ eval rows flagged


def test_rows_flagged_eval_are_the_eval_series_not_duplicated_steps():
    rows = []
    for s in range(1, 201):
        rows.append({"step": s, "reward": curve(s, tau=40), "loss": 0.1})
        if s % 20 == 0:
            rows.append({"step": s, "eval": True, "reward": curve(s, level=0.7, tau=40)})
    (run,) = read_bytes(dumps(rows), "e.jsonl")
    assert "duplicates" not in run.stats
    assert not any("duplicated" in w for w in run.warnings)
    steps, train = run.series("reward")
    assert steps.size == 200 and train[-1] == curve(200, tau=40)
    esteps, evals = run.series("eval/reward")
    assert esteps.tolist() == list(range(20, 201, 20))
    assert evals.tolist() == [curve(s, level=0.7, tau=40) for s in range(20, 201, 20)]
    assert "eval" not in run.metrics
    assert detect_roles(run.numeric_columns())["eval_reward"] == "eval/reward"


def test_a_false_eval_flag_is_a_training_row():
    rows = [{"step": s, "eval": False, "reward": curve(s)} for s in range(1, 31)]
    (run,) = read_bytes(dumps(rows), "e.jsonl")
    assert list(run.metrics) == ["reward"] and run.steps.size == 30


# ------------------------------------------------------------------ JSON rows among text

WARNING = (
    "/usr/lib/python3/site-packages/torch/utils/checkpoint.py:87: UserWarning: None of the inputs have requires_grad"
)


def _mixed(first_line: str | None, indent: int | None = None) -> bytes:
    out = [] if first_line is None else [first_line]
    for s in range(1, 61):
        out.append(json.dumps({"step": s, "epoch": s / 60, "logs": {"reward": curve(s), "loss": 0.1}}, indent=indent))
        if s % 10 == 0:
            out.append(WARNING)
    return ("\n".join(out) + "\n").encode()


@pytest.mark.parametrize(
    "first_line, indent",
    [(None, None), ("Loading checkpoint shards: 100%|####| 2/2", None), (None, 2)],
    ids=["json-first", "text-first", "pretty-printed"],
)
def test_json_rows_in_a_text_log_are_read(tmp_path, first_line, indent):
    path = tmp_path / "train.log"
    path.write_bytes(_mixed(first_line, indent))
    (run,) = read_path(str(path))
    assert run.steps.tolist() == list(range(1, 61))
    assert detect_roles(run.numeric_columns())["reward"] == "reward"
    assert run.metrics["reward"].tolist() == [curve(s) for s in range(1, 61)]
    assert any(f"skipped {6 + (first_line is not None)} line(s) of text" in w for w in run.warnings), run.warnings


# ------------------------------------------------------------------ truncated JSON


def test_the_truncated_message_is_only_for_truncated_json(tmp_path):
    cut = tmp_path / "trainer_state.json"
    cut.write_text('{"log_history": [{"step": 1, "reward": 0.1}, {"step": 2, "rew')
    with pytest.raises(ReadError) as info:
        read_path(str(cut))
    assert "truncated" in info.value.one_line() and "checkpoint-N" in info.value.one_line()
    closed = tmp_path / "broken.json"
    closed.write_text('{"log_history": [{"step": 1, "reward": 0.1}] "x": 1}')
    with pytest.raises(ReadError) as info:
        read_path(str(closed))
    line = info.value.one_line().replace(str(closed), "FILE")
    assert "not valid JSON" in line and "truncated" not in line and "checkpoint" not in line


def test_a_damaged_row_is_still_named_by_its_line():
    rows = dumps({"step": s, "reward": curve(s)} for s in range(1, 21)).split(b"\n")
    rows[9] = b'{"step": 10, "reward": 0.3'  # a row cut in the middle of the file
    with pytest.raises(ReadError, match="line 10 is not valid JSON"):
        read_bytes(b"\n".join(rows), "d.jsonl")
    rows[9] = b'"step": 10, "reward": 0.3}{'  # a row with its brace moved: not prose
    with pytest.raises(ReadError, match="line 10 is not valid JSON"):
        read_bytes(b"\n".join(rows), "d.jsonl")


def test_numbers_read_by_the_fast_path_equal_the_line_by_line_ones():
    """Text lines before the rows do not stop the fast path's plan from the first JSON row."""
    body = _mixed("starting", None)
    (run,) = read_bytes(body, "x.log")
    np.testing.assert_array_equal(run.metrics["reward"], [curve(s) for s in range(1, 61)])
