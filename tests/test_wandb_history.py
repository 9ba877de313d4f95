"""W&B API history exports (``_step``, ``_runtime``, ``_timestamp``), written the way people save
them: ``run.history().to_csv(...)`` (pandas writes its index as an unnamed first column),
``scan_history()`` rows dumped with ``json.dumps`` (sparse rows: eval keys only on some steps,
media as dicts), the Parquet history artifact, and an old run folder's
``files/wandb-history.jsonl``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpofit.core.roles import choose_reward
from grpofit.readers import read_path
from tests.conftest import assert_reads_or_fails_cleanly


def _rows(n=120, offset=7):
    rows = []
    for i in range(n):
        gs = i + 1
        row = {
            "_step": i + offset,
            "_runtime": 10.0 * i,
            "_timestamp": 1.75e9 + 10 * i,
            "train/global_step": gs,
            "train/reward": 0.9 - 0.6 * np.exp(-gs / 30),
            "train/epoch": gs / n,
        }
        if gs % 10 == 0:
            row["eval/reward"] = row["train/reward"] - 0.05
            row["samples"] = {"_type": "table-file", "path": "media/table.json"}
        rows.append(row)
    return rows


def test_history_csv_from_pandas(tmp_path):
    p = tmp_path / "history.csv"
    pd.DataFrame(_rows()).to_csv(p)  # index written as the first, unnamed column
    run = read_path(str(p))[0]
    assert run.format == "wandb-history" and run.step_column == "train/global_step"
    assert run.steps[0] == 1 and run.steps.size == 120
    assert choose_reward(run.numeric_columns())["column"] == "train/reward"
    assert run.series("eval/reward")[0].size == 12


def test_scan_history_jsonl(tmp_path):
    p = tmp_path / "scan_history.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    run = read_path(str(p))[0]
    assert run.format == "wandb-history" and run.step_column == "train/global_step"
    assert run.series("train/reward")[0].size == 120 and run.series("eval/reward")[0].size == 12


def test_500_row_sample_is_flagged(tmp_path):
    p = tmp_path / "history.csv"
    pd.DataFrame(_rows(500)).to_csv(p, index=False)
    run = read_path(str(p))[0]
    assert any("scan_history" in w for w in run.warnings)
    p2 = tmp_path / "h2.csv"
    pd.DataFrame(_rows(499)).to_csv(p2, index=False)
    assert not any("scan_history" in w for w in read_path(str(p2))[0].warnings)


def test_parquet_history_artifact(tmp_path):
    pytest.importorskip("pyarrow")
    p = tmp_path / "0000.parquet"
    df = pd.DataFrame(_rows()).drop(columns=["samples"])
    df.to_parquet(p)
    run = read_path(str(p))[0]
    assert run.format == "wandb-history" and run.step_column == "train/global_step"
    assert run.series("train/reward")[0].size == 120


def test_parquet_without_the_extra_names_it(tmp_path, monkeypatch, capsys):
    from grpofit.cli import main

    p = tmp_path / "history.parquet"
    p.write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")

    def no_engine(*a, **k):
        raise ImportError("Unable to find a usable engine; tried using: 'pyarrow', 'fastparquet'.")

    monkeypatch.setattr(pd, "read_parquet", no_engine)
    with pytest.raises(SystemExit) as exc:
        main(["fit", str(p)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(p) in err[0] and "pip install '.[parquet]'" in err[0]


def test_old_run_folder_history_jsonl(tmp_path):
    run_dir = tmp_path / "wandb" / "run-20240101_000000-abc123"
    (run_dir / "files").mkdir(parents=True)
    (run_dir / "files" / "wandb-history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows(40)))
    run = read_path(str(run_dir))[0]
    assert run.format == "wandb-run" and run.step_column == "train/global_step"
    assert run.series("train/reward")[0].size == 40


@pytest.mark.slow
@settings(max_examples=50, deadline=None)
@given(cut=st.floats(0, 1), junk=st.binary(max_size=64), as_json=st.booleans())
def test_truncated_and_arbitrary_bytes(cut, junk, as_json):
    rows = _rows(20)
    good = ("".join(json.dumps(r) + "\n" for r in rows) if as_json else pd.DataFrame(rows).to_csv(index=False)).encode()
    assert_reads_or_fails_cleanly((good[: int(len(good) * cut)], good[: int(len(good) * cut)] + junk, junk))
