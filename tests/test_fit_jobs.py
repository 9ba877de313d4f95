"""``fit --jobs N`` (diagnose's worker pool): the same document, order and exit code as one process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpofit.cli import main

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_logs"


def _fit(capsys, *args) -> tuple[int, dict, str]:
    with pytest.raises(SystemExit) as exc:
        main(["fit", *map(str, args), "--format", "json"])
    out, err = capsys.readouterr()
    return exc.value.code, json.loads(out), err


@pytest.mark.slow
def test_fit_jobs_two_gives_the_same_document_in_the_same_order(capsys, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("step,loss_scale\n1,2\n2,3\n")  # no reward column: an error, the others still fitted
    files = [SAMPLES / "healthy_slow_start.csv", bad, SAMPLES / "bandit_g16.csv", SAMPLES / "bandit_oscillating.jsonl"]
    code1, one, err1 = _fit(capsys, *files, "--jobs", "1")
    code2, two, err2 = _fit(capsys, *files, "--jobs", "2")
    assert code1 == code2 == 2
    assert [r["run"] for r in one["runs"]] == [str(files[0]), str(files[2]), str(files[3])]
    assert one == two
    assert [e["run"] for e in two["errors"]] == [str(bad)]
    assert err1 == err2
