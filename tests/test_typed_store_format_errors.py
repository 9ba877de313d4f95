"""Bad input in the typed-JSONL, MLflow (SQLite and file store), Parquet, SwanLab and progress-line
formats: exit code 2 and ONE line on stderr naming the file and the fix,
never a traceback and never a silently merged series."""

from __future__ import annotations

import json
import sqlite3

import pytest

from grpofit.cli import main


def _write(tmp_path, name, data):
    p = tmp_path / name
    if isinstance(data, str):
        p.write_text(data)
    else:
        p.write_bytes(data)
    return p


def _sqlite_without_runs(tmp_path):
    p = tmp_path / "mlruns.db"
    con = sqlite3.connect(p)
    con.execute(
        "CREATE TABLE metrics (key TEXT, value REAL, timestamp INTEGER, run_uuid TEXT, step INTEGER, is_nan INTEGER)"
    )
    con.commit()
    con.close()
    return p


def _mlflow_run_without_metrics(tmp_path):
    run = tmp_path / "mlruns" / "0" / "abc"
    (run / "metrics").mkdir(parents=True)
    (run / "meta.yaml").write_text("run_id: abc\nlifecycle_stage: active\n")
    return run


CASES = {
    "typed-bad-middle-line": lambda t: _write(
        t,
        "m.jsonl",
        json.dumps({"type": "train", "step": 1, "reward": 0.1})
        + "\n{not json\n"
        + json.dumps({"type": "eval", "step": 2, "reward": 0.2})
        + "\n",
    ),
    "typed-no-numbers": lambda t: _write(
        t, "m.jsonl", "".join(json.dumps({"type": k, "note": "x"}) + "\n" for k in ("a", "b"))
    ),
    "sqlite-not-mlflow": _sqlite_without_runs,
    "mlflow-run-without-metrics": _mlflow_run_without_metrics,
    "parquet-garbage": lambda t: _write(t, "h.parquet", b"PAR1" + b"\x01" * 50),
    "swanlab-backup-without-scalars": lambda t: _write(t, "backup.swanlab", b":SWL\xd6\xe1\x00" + b"\x00" * 20),
    "progress-one-pair-lines": lambda t: _write(t, "train.log", "".join(f"loss: {i}\n" for i in range(20))),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, case):
    path = CASES[case](tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["fit", str(path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert str(path) in err[0] and "Traceback" not in err[0]
