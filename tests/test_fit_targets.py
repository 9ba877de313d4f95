"""docs/fit_coverage.md: the fit beside the oracle, plateau bounds, inertia and damping ratio
(benchmarks/fit_targets.py)."""

from __future__ import annotations

import pytest

from benchmarks.fit_targets import bounds_table, oracle_table, run_targets, shapes_table
from benchmarks.recovery import check_committed_row


def test_a_small_run_fills_every_table():
    r = run_targets(1, seed=11, n_recovery=3)
    assert len(r["oracle"]) == 12  # every forcing level x regime
    text = oracle_table(r["oracle"])
    assert text.count("\n") == 13 and "| 0.03 | two_class | 1 |" in text
    kinds = {k[0] for k in r["bounds"]}
    assert kinds == {"forced runs", "settled runs", "cut runs"}
    assert "| settled runs | forcing outside the dynamics | 3 |" in bounds_table(r["bounds"])
    for rows in r["bounds"].values():  # a contradiction is counted only where a bound is printed
        assert all(b["printed"] or not b["contradicted"] for b in rows)
    assert "two_class" not in shapes_table(r["shapes"])  # no inertia or damping ratio to recover


def test_the_oracle_scores_the_plateau_alone():
    from benchmarks.fit_oracle import oracle_row
    from grpofit.testing.synthetic import forced_recovery_set

    truth, table = forced_recovery_set(1, seed=3, levels=(0.0,), regimes=("underdamped",))[0]
    row = oracle_row(truth, table)
    assert row["p_ok"] and row["p_covers"] and not row["p_wrong"]


@pytest.mark.slow
def test_committed_oracle_beside_the_fit_matches_one_recomputed_stratum():
    """The strongest forcing's two-class stratum (the one whose recovery misses its target),
    recomputed on the held-out seed: its row of the oracle-beside-the-fit table."""
    r = run_targets(100, seed=2026, only=(0.03, "two_class"))
    doc = check_committed_row(
        "fit_coverage.md",
        "python -m benchmarks.fit_targets 100 2026",
        oracle_table(r["oracle"]),
        "| 0.03 | two_class | 100 |",
    )
    assert "| forced runs | forcing sd 0.03 | 300 |" in doc
