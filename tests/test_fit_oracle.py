"""The oracles of docs/fit_oracle.md: how much one forced run can tell (benchmarks/fit_oracle.py)."""

from __future__ import annotations

import pytest

from benchmarks.fit_oracle import oracle_report, oracle_row, run_oracle, summary
from benchmarks.recovery import check_committed_row


def test_oracle_scores_a_clean_run_as_recovered():
    """Without forcing every estimate of a long clean run is within the tolerances."""
    from grpofit.testing.synthetic import forced_recovery_set

    truth, table = forced_recovery_set(1, seed=3, levels=(0.0,), regimes=("overdamped",))[0]
    row = oracle_row(truth, table)
    assert row["known_times_ok"] and row["known_noise_ok"] and row["posterior_ok"]
    assert row["known_times_p"] > 0.999 and not row["posterior_wrong"]


@pytest.mark.slow
def test_committed_oracle_table_matches_one_recomputed_stratum():
    """docs/fit_oracle.md is the output of ``python -m benchmarks.fit_oracle 100 2026``: recompute
    the strongest forcing's two-class stratum and compare its row and the summary's claims."""
    rows = run_oracle(100, seed=2026, only=(0.03, "two_class"))
    doc = check_committed_row(
        "fit_oracle.md", "python -m benchmarks.fit_oracle 100 2026", oracle_report(rows), "| 0.03 | two_class | 100 |"
    )
    # the summary is computed from all rows: recompute it from the committed table's rows
    table = [ln for ln in doc.splitlines() if ln.startswith("| 0")]
    parsed = []
    for ln in table:
        c = [x.strip() for x in ln.strip("|").split("|")]
        parsed.append(
            {
                "forcing_sd": float(c[0]),
                "regime": c[1],
                "known_times_p": float(c[3].rstrip("%")) / 100,
                "known_noise_ok": float(c[6].rstrip("%")) / 100,
                "posterior_ok": float(c[7].rstrip("%")) / 100,
                "posterior_wrong": float(c[9].rstrip("%")) / 100,
            }
        )
    assert summary(parsed) in doc
