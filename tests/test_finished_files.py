"""Finished files are read whole: every command keeps a last line written without a final line
break when it parses, whatever the file's modification time; only ``watch`` waits for a line to
complete (tests/test_hostile.py has the reader-level cases, torn lines included).

rasbt 7_4 ends without a line break, and its last row holds the step-500 eval: a fresh,
writable copy (as a clone, download or export makes) used to lose it, which failed train-eval.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.conftest import run_cli
from tests.reallogs import real_log

pytestmark = pytest.mark.real_logs

NAME = "rasbt_grpo_qwen3-0.6b_7_4_clip_ratio.csv"


@pytest.fixture
def fresh_copy(tmp_path):
    """A copy of rasbt 7_4 made just now, writable (the file every fresh clone has)."""
    path = tmp_path / NAME
    shutil.copyfile(real_log(NAME), path)
    os.chmod(path, 0o644)
    assert not path.read_bytes().endswith(b"\n")
    return path


# command -> where its JSON says the last step read
LAST = {
    "fit": lambda d: d["runs"][0]["steps"][1],
    "diagnose": lambda d: d["runs"][0]["fit"]["steps"][1],
    "inspect": lambda d: d["runs"][0]["last_step"],
    "forecast": lambda d: d["runs"][0]["seen"]["steps"][1],
    "backtest": lambda d: d["runs"][0]["steps"][1],
}


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(LAST))
def test_every_command_reads_the_last_row_of_a_fresh_copy(capsys, fresh_copy, command):
    code, out, err = run_cli(capsys, command, fresh_copy, "--format", "json")
    assert code in (0, 1), err
    assert LAST[command](json.loads(out)) == 500
    assert "incomplete" not in err


@pytest.mark.slow
def test_fresh_copy_gets_the_same_verdicts_as_an_old_one(capsys, fresh_copy):
    """The step-500 eval is read, and train-eval does not fail on a copy for being fresh."""
    code, out, err = run_cli(capsys, "diagnose", fresh_copy, "--format", "json")
    fresh = json.loads(out)["runs"][0]
    old = 1_600_000_000
    os.utime(fresh_copy, (old, old))
    code_old, out_old, _ = run_cli(capsys, "diagnose", fresh_copy, "--format", "json")
    settled = json.loads(out_old)["runs"][0]
    assert code == code_old == 0
    assert fresh["diagnostics"]["train_eval_decoupling"]["status"] != "fail"
    assert fresh["verdict"] == settled["verdict"]
    assert {m: d["status"] for m, d in fresh["diagnostics"].items()} == {
        m: d["status"] for m, d in settled["diagnostics"].items()
    }


@pytest.mark.slow
def test_api_and_compare_keep_the_last_row(capsys, fresh_copy):
    import grpofit

    (run,) = grpofit.read(str(fresh_copy))
    steps, evals = run.series("eval_acc")
    assert steps[-1] == 500 and evals[-1] == pytest.approx(41.6)
    code, out, err = run_cli(
        capsys, "compare", fresh_copy, real_log("rasbt_grpo_qwen3-0.6b_7_3_tracking.csv"), "--format", "json"
    )
    assert code in (0, 1), err
    assert "incomplete" not in err
