"""A long watch keeps its memory flat: the runs' columns grow in place, and what a
poll allocates on top of the data is freed, not kept."""

from __future__ import annotations

import io
import json
import tracemalloc

import numpy as np
import pytest

from grpofit.core.runs import make_run
from grpofit.runtime.trim import release
from grpofit.watch.grow import Grow
from grpofit.watch.session import Session, WatchOptions
from grpofit.watch.tail import Columns


def test_grow_appends_in_place_and_keeps_handed_out_views():
    g = Grow(16)
    g.extend(np.arange(10.0))
    first = g.view()
    buffers = {id(g.buf)}
    for i in range(100):
        g.extend(np.array([100.0 + i]))
        buffers.add(id(g.buf))
    assert np.array_equal(first, np.arange(10.0))  # an earlier snapshot is unchanged
    assert np.array_equal(g.view(), np.concatenate([np.arange(10.0), 100.0 + np.arange(100)]))
    assert len(buffers) <= 4  # 16 -> 32 -> 64 -> 128: doubled, not copied per append
    assert g.buf.size < 2 * g.n + 16


def test_columns_pad_a_metric_that_appears_later():
    cols = Columns()
    cols.append(
        make_run("r", "r", "jsonl", {"step": np.array([1.0, 2.0]), "reward": np.array([0.1, 0.2])}, step="step")
    )
    cols.append(make_run("r", "r", "jsonl", {"step": np.array([3.0]), "kl": np.array([0.5])}, step="step"))
    buf = cols._steps.buf
    for s in range(4, 20):  # small appends go into the spare capacity: no copy per append
        cols.append(make_run("r", "r", "jsonl", {"step": np.array([float(s)]), "kl": np.array([0.0])}, step="step"))
    assert cols._steps.buf is buf and len(cols) == 19
    run = cols.run("r", "r")
    assert np.array_equal(run.steps, np.arange(1.0, 20.0))
    assert np.allclose(run.metrics["reward"][:4], [0.1, 0.2, np.nan, np.nan], equal_nan=True)
    assert np.isnan(run.metrics["reward"][2:]).all()
    assert np.allclose(run.metrics["kl"][:4], [np.nan, np.nan, 0.5, 0.0], equal_nan=True)


def test_release_is_harmless():
    assert release() in (True, False)


@pytest.mark.slow
def test_a_long_followed_run_costs_its_data_and_no_more(tmp_path):
    """2,400 rows in 60 polls; the first judgement only (refits off): what the heap keeps
    between poll 10 and poll 60 is the new rows' columns, not a per-poll residue."""
    path = tmp_path / "run.jsonl"
    rng = np.random.default_rng(0)
    step = 0

    def append(k: int) -> None:
        nonlocal step
        with open(path, "a") as f:
            for _ in range(k):
                step += 1
                f.write(
                    json.dumps(
                        {
                            "step": step,
                            "reward": round(0.7 - 0.5 * np.exp(-step / 300) + rng.normal(0, 0.03), 4),
                            "kl": step / 1e4,
                            "grad_norm": 0.2,
                            "entropy": 1 - step / 2e4,
                        }
                    )
                    + "\n"
                )

    append(40)
    sess = Session(WatchOptions(paths=[str(tmp_path)], forecast=False), out=io.StringIO(), err=io.StringIO())
    sess.monitor.refit_growth = 1e9  # the fits have bounded caches of their own; this is the watch's part
    sess.poll()
    for _ in range(9):
        append(40)
        sess.poll()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(50):
            append(40)
            sess.poll()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    rows = 50 * 40
    # 5 columns + steps + the rule's levels = 7 floats a row; in-place growth at most doubles it
    assert grown <= 2 * 7 * 8 * rows + 64_000, grown
    st = sess.monitor.runs[str(path)]
    assert st.n == 2400
