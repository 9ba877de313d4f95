"""The pandas-free reader of small CSV files gives exactly what the pandas path gives."""

from __future__ import annotations

import numpy as np
import pytest

from grpofit.readers import delimited, read_path

CASES = {
    "plain": "step,reward\n1,0.1\n2,0.2\n3,0.3\n",
    "quoted": '"step","reward"\n"1","0.1"\n"2","0.25"\n',
    "missing": "step,reward,eval_reward\n1,0.1,\n2,,0.5\n3,0.3,\n",
    "na_strings": "step,reward,kl\n1,0.1,NA\n2,null,0.01\n3,0.3,nan\n",
    "text_column": "step,reward,note\n1,0.1,hello\n2,0.2,world\n",
    "stray_text": "step,reward\n1,0.1\n2,oops\n3,0.3\n",
    "bools": "step,reward,done\n1,0.1,True\n2,0.2,False\n",
    "bom": "\ufeffstep,reward\n1,0.1\n2,0.2\n",
    "short_rows": "step,reward,kl\n1,0.1\n2,0.2,0.01\n",
    "inf": "step,reward\n1,0.1\n2,inf\n3,0.3\n",
    "tsv": "step\treward\n1\t0.1\n2\t0.2\n",
    "crlf": "step,reward\r\n1,0.1\r\n2,0.2\r\n",
    "scientific": "step,reward\n1,1e-3\n2,2.5E-2\n",
    "unsorted_dupes": "step,reward\n2,0.2\n1,0.1\n2,0.25\n",
}


def _read(path, small: bool):
    old = delimited.SMALL_FILE
    delimited.SMALL_FILE = old if small else -1
    try:
        return read_path(str(path))
    finally:
        delimited.SMALL_FILE = old


@pytest.mark.parametrize("name", sorted(CASES))
def test_small_path_equals_pandas_path(tmp_path, name):
    path = tmp_path / (name + (".tsv" if name == "tsv" else ".csv"))
    path.write_bytes(CASES[name].encode("utf-8"))
    (fast,) = _read(path, small=True)
    (slow,) = _read(path, small=False)
    assert fast.step_column == slow.step_column
    assert np.array_equal(fast.steps, slow.steps)
    assert list(fast.metrics) == list(slow.metrics)
    for key in fast.metrics:
        assert np.array_equal(fast.metrics[key], slow.metrics[key], equal_nan=True), key
    assert fast.warnings == slow.warnings


@pytest.mark.slow
@pytest.mark.subprocess
def test_small_file_does_not_import_pandas(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "run.csv"
    path.write_text(CASES["missing"])
    code = (
        f"import sys; from grpofit.readers import read_path; read_path({str(path)!r}); print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_chunked_path_equals_whole_path(tmp_path, monkeypatch):
    """Large wide tables are parsed in row chunks; the table, warnings and torn-line handling match."""
    rng = np.random.default_rng(7)
    rows = ["step,reward,kl,note"]
    for i in range(2500):
        reward = "oops" if i == 1234 else f"{rng.random():.6f}"
        rows.append(f"{i},{reward},{'' if i % 7 == 0 else rng.random()},text{i}")
    path = tmp_path / "big.csv"
    path.write_text("\n".join(rows) + "\n2500,0.5")  # a torn last line
    monkeypatch.setattr(delimited, "SMALL_FILE", -1)
    monkeypatch.setattr(delimited, "CHUNK_ROWS", 300)
    monkeypatch.setattr(delimited, "CHUNKED_FILE", 1)
    (chunked,) = read_path(str(path))
    monkeypatch.setattr(delimited, "CHUNKED_FILE", 10**12)
    (whole,) = read_path(str(path))
    assert chunked.steps.size == whole.steps.size == 2500
    assert list(chunked.metrics) == list(whole.metrics) == ["reward", "kl"]
    for key in whole.metrics:
        assert np.array_equal(chunked.metrics[key], whole.metrics[key], equal_nan=True)
    assert chunked.warnings == whole.warnings
    assert any("incomplete" in w for w in chunked.warnings)
    assert any("non-numeric" in w for w in chunked.warnings)


UNQUOTED_CASES = {
    **CASES,
    "quoted_cell": 'step,reward\n1,"0.1"\n2,0.2\n',
    "quoted_header": '"step","reward"\n1,0.1\n2,0.2\n',
    "ragged_long": "step,reward\n1,0.1,9\n2,0.2\n",
    "empty_cells": "step,reward,kl\n1,,0.1\n2,0.2,\n",
    "whitespace": "step,reward\n 1 , 0.1\n2,\t0.2 \n",
    "trailing_delimiter": "step,reward,\n1,0.1,\n2,0.2,\n",
    "blank_lines_cr": "step,reward\r\r1,0.1\r\r2,0.2\r",
    "semicolon_comma_decimal": "step;reward\n1;0,5\n2;0.6\n",
    "underscores_hex": "step,reward\n1_0,0.1\n0x2,0.2\n",
    "index_column": ",step,reward\n0,1,0.1\n1,2,0.2\n",
    "wandb_header": '"Step","run - train/reward","run - train/reward__MIN"\n1,0.1,0.1\n2,0.2,0.2\n',
    "quoted_delimiter_header": '"a,b","reward"\n1,0.1\n2,0.2\n',
    "inner_quote_header": '"a""b",reward\n1,0.1\n',
    "half_quoted_header": 'a"b"c,reward\n1,0.1\n',
    "spaced_quoted_header": ' "step",reward\n1,0.1\n',
    "empty_quoted_header": '"",reward\n1,0.1\n',
}


@pytest.mark.parametrize("name", sorted(UNQUOTED_CASES))
def test_unquoted_fast_path_equals_csv_path(tmp_path, monkeypatch, name):
    """The str.split fast path of _read_small gives exactly what its csv.reader path gives."""
    path = tmp_path / (name + (".tsv" if name == "tsv" else ".csv"))
    path.write_bytes(UNQUOTED_CASES[name].encode("utf-8"))
    (fast,) = read_path(str(path))
    monkeypatch.setattr(delimited, "_read_unquoted", lambda text, delim: None)
    (careful,) = read_path(str(path))
    assert (fast.step_column, fast.warnings, fast.stats) == (careful.step_column, careful.warnings, careful.stats)
    assert fast.steps.tobytes() == careful.steps.tobytes()
    assert list(fast.metrics) == list(careful.metrics)
    for key in fast.metrics:
        assert fast.metrics[key].tobytes() == careful.metrics[key].tobytes(), key


def test_unquoted_fast_path_takes_only_clean_tables():
    take = delimited._read_unquoted
    header, table, warnings, dropped = take("step,reward\r\n\r\n1, 0.5\r\n2,1e-3\r\n", ",")
    assert header == list(table) == ["step", "reward"] and warnings == [] and dropped == 0
    assert table["reward"].tolist() == [0.5, 1e-3] and table["reward"].flags.c_contiguous
    for text in (
        'step,reward\n1,"0.5"\n',
        "step,reward\n1,0.5,\n",
        "step,reward\n1\n",
        "step,reward\n1,x\n",
        "step,reward\n1,\n2, \n",  # a blank cell is missing, a space is text: the csv path words it
        "step,step\n1,2\n",
        "step,reward\n",
        '"a,b",c\n1,2\n',
        '"a"b",c\n1,2\n',
    ):
        assert take(text, ",") is None, text
    _, table, warnings, _ = take("step,reward\n1,\n2,0.5\n", ",")  # a metric logged every few steps
    assert np.isnan(table["reward"][0]) and table["reward"][1] == 0.5 and warnings == []
    _, table, _, _ = take('"Step","r - train/reward"\n1,0.5\n', ",")  # W&B quotes only the header
    assert list(table) == ["Step", "r - train/reward"] and table["r - train/reward"].tolist() == [0.5]
