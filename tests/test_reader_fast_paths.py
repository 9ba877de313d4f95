"""The readers' fast paths give exactly what their careful paths give (issue 15's reader speed
must never change a result): trainer_state.json rows taken column-wise in batches, the JSON
scanner's run of array values, and the sniffer's byte-level pre-checks."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpofit.readers import hf
from grpofit.readers.source import Source

sniff = importlib.import_module("grpofit.readers.sniff")

_cells = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-3, 3), st.none(), st.booleans(),
    st.sampled_from(["0.5", " 2 ", "x", "true"]), st.just([1.0]), st.just({"a": 0.5}),
)


@st.composite
def _log_rows(draw):
    """Mostly plain rows (rising steps, number cells), now and then one that is not: a repeated
    or falling step, a missing or text step, a summary row, a nested or text cell, a non-object."""
    n = draw(st.integers(0, 40))
    rows, step = [], 0
    for _ in range(n):
        step += draw(st.sampled_from([1, 1, 1, 2, 0, -1]))
        row = {"step": step if draw(st.integers(0, 9)) else draw(st.sampled_from([None, "3", True, 2.5, step]))}
        for key in draw(st.lists(st.sampled_from(["loss", "reward", "kl", "eval/reward", "lr"]), max_size=4)):
            row[key] = draw(st.floats(-1, 1)) if draw(st.integers(0, 5)) else draw(_cells)
        if not draw(st.integers(0, 30)):
            row = {"train_runtime": 1.0, "train_loss": 0.5, "step": step}
        if not draw(st.integers(0, 60)):
            row = draw(st.sampled_from([[1, 2], "text", 3]))
        if draw(st.booleans()):  # key order varies from row to row
            row = dict(reversed(list(row.items()))) if isinstance(row, dict) else row
        rows.append(row)
    return rows


def _careful(rows):
    merger = hf.RowMerger()
    for r in rows:
        merger.add(r)
    return merger


@settings(max_examples=300, deadline=None)
@given(rows=_log_rows(), batch=st.sampled_from([1, 2, 3, 7, 512]))
def test_batched_rows_give_the_row_by_row_merge(rows, batch):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hf, "BATCH", batch)
        fast = hf.RowMerger()
        for r in rows:
            fast.feed(r)
        fast.flush()
    slow = _careful(rows)
    assert (fast.rows, fast.summary, fast.not_rows) == (slow.rows, slow.summary, slow.not_rows)
    if not slow.rows or slow.not_rows:
        return
    (ft, fs), (st_, ss) = fast.build(), slow.build()
    assert list(ft) == list(st_) and fs == ss
    for k in st_:
        assert ft[k].dtype == st_[k].dtype and np.array_equal(ft[k], st_[k], equal_nan=True), k
        assert np.array_equal(np.signbit(ft[k]), np.signbit(st_[k])), k


def test_plain_trainer_state_is_read_column_wise(tmp_path, monkeypatch):
    """The usual file takes the batched path (it would be silently slow otherwise), and the
    run is the row-by-row path's run."""
    rows = [{"step": s, "loss": 1.0 / s, "reward": 0.01 * s} for s in range(1, 2000)]
    rows.append({"train_runtime": 9.0, "train_loss": 0.1, "step": 1999})
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"global_step": 1999, "log_history": rows}, indent=2))
    calls = []
    real = hf.RowMerger._add_plain
    monkeypatch.setattr(hf.RowMerger, "_add_plain", lambda self, b: calls.append(len(b)) or real(self, b))
    [fast] = hf.read_hf(Source(str(path), str(path)), "trainer_state")
    assert sum(calls) == len(rows) and fast.stats["summary_rows"] == 1
    monkeypatch.setattr(hf.RowMerger, "_add_plain", lambda self, b: False)
    [slow] = hf.read_hf(Source(str(path), str(path)), "trainer_state")
    assert np.array_equal(fast.steps, slow.steps) and list(fast.metrics) == list(slow.metrics)
    for k in slow.metrics:
        assert np.array_equal(fast.metrics[k], slow.metrics[k]), k
    assert fast.stats == slow.stats


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.one_of(st.floats(), st.text(max_size=5), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)),
                       max_size=20),
       chunk=st.sampled_from([1, 5, 64, 1 << 18]), indent=st.sampled_from([None, 0, 2]))
def test_scanner_run_of_values_is_the_one_by_one_scan(tmp_path_factory, values, chunk, indent):
    import io

    import grpofit.readers.jsonscan as js

    text = json.dumps(values, indent=indent).encode()
    got: list = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(js, "CHUNK", chunk)
        scan = js.JsonScanner(io.BytesIO(text))
        scan.array(got.append)
        assert scan.peek() == ""
    assert json.dumps(got) == json.dumps(values)


@settings(max_examples=500, deadline=None)
@given(head=st.binary(max_size=60) | st.text(alphabet="step:Globa {}'\x1b[0m\n\xe9", max_size=40).map(str.encode),
       tail=st.binary(max_size=20) | st.just(b""),
       literal=st.sampled_from(["step:", "Global step ", "{'", "': "]))
def test_byte_precheck_never_misses_what_the_text_holds(head, tail, literal):
    p = sniff.Probe(head, "x.log", tail)
    if literal in p.both:
        assert p.may_contain(literal)
    if not p.may_contain(literal):
        assert literal not in p.both


def test_a_number_cut_after_its_point_is_not_taken_whole(tmp_path, monkeypatch):
    """The scanner took "3." at a chunk's edge for the number 3 (then failed on "."): a number is
    complete only when what follows cannot continue it."""
    import grpofit.readers.jsonscan as js

    text = '{"log_history": [{"step": 1, "reward": 0.5}, {"step": 2, "reward": 0.75}], "num_train_epochs": 3.25, "max_steps": 1e3}'
    path = tmp_path / "trainer_state.json"
    path.write_text(text)
    for chunk in range(1, len(text) + 1):
        monkeypatch.setattr(js, "CHUNK", chunk)
        [run] = hf.read_hf(Source(str(path), str(path)), "trainer_state")
        assert run.config["trainer_state.num_train_epochs"] == 3.25, chunk
        assert run.config["trainer_state.max_steps"] == 1000.0, chunk
