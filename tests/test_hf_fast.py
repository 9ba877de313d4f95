"""trainer_state.json's column-wise fast path gives the row-by-row path's run, or steps aside."""

from __future__ import annotations

import numpy as np
import pytest

from grpofit.core.runs import make_run
from grpofit.readers import hf


def _both(rows, monkeypatch):
    fast = make_run("r", "r", "trainer_state", hf.merge_rows(rows)[0])
    with monkeypatch.context() as m:
        m.setattr(hf, "_merge_plain", lambda rows: None)
        table, stats = hf.merge_rows(rows)
    slow = make_run("r", "r", "trainer_state", table)
    return fast, slow, hf.merge_rows(rows)[1], stats


CASES = {
    "plain": [{"step": i, "reward": 0.1 * i, "loss": 1.0 / i} for i in range(1, 30)],
    "sparse and summary": [
        {"step": 1, "reward": 0.1},
        {"step": 2, "eval_reward": 0.5, "epoch": 1},
        {"step": 3, "reward": True, "note": None},
        {"train_runtime": 12.0, "train_loss": 0.3, "step": 3},
    ],
    "text numbers": [{"step": 1, "reward": "0.5"}, {"step": 2, "reward": "'0.7'"}, {"step": 3, "reward": "true"}],
    "repeated step": [{"step": 1, "reward": 0.1}, {"step": 1, "kl": 0.2}, {"step": 2, "reward": 0.3}],
    "unordered": [{"step": 2, "reward": 0.1}, {"step": 1, "reward": 0.2}],
    "nested": [{"step": 1, "rewards": {"a": 0.1}}, {"step": 2, "rewards": {"a": 0.2}}],
    "lists": [{"step": 1, "reward": [0.5]}, {"step": 2, "reward": [0.6]}],
    "no step": [{"reward": 0.5}, {"step": 2, "reward": 0.6}],
    "bool step": [{"step": True, "reward": 0.5}, {"step": 2, "reward": 0.6}],
    "big int": [{"step": 1, "reward": 10**400}, {"step": 2, "reward": 0.6}],
}


@pytest.mark.parametrize("name", list(CASES))
def test_fast_merge_is_the_careful_merge(name, monkeypatch):
    fast, slow, fast_stats, slow_stats = _both(CASES[name], monkeypatch)
    assert fast_stats == slow_stats
    assert fast.step_column == slow.step_column
    np.testing.assert_array_equal(fast.steps, slow.steps)
    assert list(fast.metrics) == list(slow.metrics)
    for k in fast.metrics:
        np.testing.assert_array_equal(fast.metrics[k], slow.metrics[k])


def test_fast_path_taken_for_the_usual_log():
    assert hf._merge_plain(CASES["plain"]) is not None
    assert hf._merge_plain(CASES["sparse and summary"]) is not None
    for name in ("repeated step", "unordered", "nested", "no step", "bool step"):
        assert hf._merge_plain(CASES[name]) is None, name
