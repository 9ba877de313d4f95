"""The calibration harness (``python -m benchmarks.forecast_calibration``) on a few runs, and
the committed tables it writes (docs/forecast_calibration.md)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import forecast_calibration as fc


@pytest.fixture(scope="module")
def rows():
    items = fc.bandit_items(3, fc.TUNE_SEED) + fc.generated_items(1, fc.TUNE_SEED)[:2]
    return [r for item in items for r in fc.forecast_rows(item, cuts=(0.1, 0.5))]


@pytest.mark.slow
def test_every_band_lies_inside_the_bounds_and_the_two_bands_differ(rows):
    made = [r for r in rows if r.get("made")]
    assert len(made) >= 15
    for r in made:
        lo80, hi80 = r["pi80"]
        lo95, hi95 = r["pi95"]
        assert r["bounds"]["low"] == 0.0 and r["bounds"]["high"] == 1.0
        assert 0.0 <= lo95 <= lo80 <= r["mean"] <= hi80 <= hi95 <= 1.0
    # pi80 and pi95 are different bands (the old forecast's were equal on 253 of 256 targets)
    assert np.mean([r["pi95"][1] - r["pi95"][0] > r["pi80"][1] - r["pi80"][0] + 1e-9 for r in made]) > 0.9


def test_table_counts_strata_and_miss_sides():
    rows = [
        {
            "cut": 0.1,
            "target": "end",
            "moved": True,
            "made": True,
            "in80": False,
            "in95": False,
            "above": True,
            "below": False,
            "distinct": True,
            "error": 0.2,
            "persistence_error": 0.4,
            "width95": 0.3,
        },
        {
            "cut": 0.1,
            "target": "mid",
            "moved": False,
            "made": True,
            "in80": True,
            "in95": True,
            "above": False,
            "below": False,
            "distinct": True,
            "error": 0.01,
            "persistence_error": 0.01,
            "width95": 0.1,
        },
        {"cut": 0.1, "target": "recommendation", "stop_call": True, "wrong": False},
    ]
    text = "\n".join(fc.table(rows, "t"))
    assert "| 10% | moved | 1 | 1 | 0% | 0% | 1/1 | 100% | 0.200 | 0.400 | 0.50 | 0.300 |" in text
    assert "| 10% | settled | 1 | 1 | 100% | 100% | 0/0 |" in text
    assert "printed 1 times; wrong (the run then rose by more than 0.05) 0 times" in text


def test_tuning_and_evaluation_grids_differ():
    tune, ev = fc.bandit_settings(5, fc.TUNE_SEED), fc.bandit_settings(5, fc.EVAL_SEED)
    assert all(a != b for a, b in zip(tune, ev))
    for kw in tune + ev:
        assert 600 <= kw["steps"] <= 1500 and kw["group_size"] in (0, 2, 4, 8, 16)


def test_committed_tables_name_their_data():
    text = fc.DOC.read_text()
    assert f"Evaluation seed {fc.EVAL_SEED}" in text and f"seed {fc.TUNE_SEED} only" in text
    for cut in ("10%", "25%", "50%"):
        assert f"| {cut} | moved |" in text and f"| {cut} | settled |" in text
    assert "shared real logs with a trend" in text


def test_jumps_count_only_steps_outside_both_intervals():
    def row(cut, value, lo, hi, kind="estimate", key="steps_to_95"):
        return {"name": "r", "cut": cut, "key": key, "value": value, "ci95": [lo, hi], "kind": kind}

    rows = [
        row(0.10, 500, 400, 600),
        row(0.15, 550, 450, 700),  # inside the first's interval: no jump
        row(0.20, 900, 850, 950),  # outside 450-700, and 550 outside 850-950: a jump
        row(0.25, None, None, None, kind=None),  # no step printed: no pair
        row(0.30, 300, 300, None, kind="lower_bound"),
        row(0.35, 1800, 1700, 1900),  # inside the lower bound's [300, inf): no jump
    ]
    j = fc.jumps(rows)["steps_to_95"]
    assert j == {"pairs": 3, "jumps": 1, "printed": 5, "cuts": 6}
    assert fc.jumps(rows)["steps_to_90"]["pairs"] == 0


def test_committed_doc_measures_the_jumps():
    text = fc.DOC.read_text()
    assert "steps to 90/95% of the gain between neighbouring cuts" in text
    assert "| real logs with a trend | steps_to_95 |" in text


def test_outside_set_lies_outside_the_grid_and_is_recorded():
    out = fc.outside_settings()
    grid = fc.bandit_settings(40, fc.EVAL_SEED) + fc.bandit_settings(40, fc.TUNE_SEED)
    assert len(out) == fc.OUTSIDE_RUNS and fc.OUTSIDE_SEED not in (fc.TUNE_SEED, fc.EVAL_SEED)
    for kw in out:
        assert kw["arms"] in (32, 64) and 0.1 <= kw["lr"] <= 0.3 and kw["momentum"] in (0.0, 0.95)
        assert kw["refresh_interval"] in (1, 8) and kw["group_size"] in (0, 4, 32)
        assert 1800 <= kw["steps"] <= 3000
    assert max(kw["arms"] for kw in grid) < 32 and max(kw["lr"] for kw in grid) <= 0.1
    assert "outside the grid" in fc.DOC.read_text()
