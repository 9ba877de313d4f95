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
    # the noise levels estimated from the run cost a clean run nothing
    assert row["estimated_noise_ok"] and row["estimated_posterior_ok"]


def test_estimated_noise_oracle_reads_the_noise_from_the_run():
    """The estimated-noise oracle's plateau uses the run's own noise levels: a run whose
    observation noise is scaled up (forcing sd 0.03, two classes) still scores, and it is
    scored at its maximum likelihood over the forcing ratio, not the known one."""
    import numpy as np

    from benchmarks.fit_oracle import _estimated_noise, _true_times
    from grpofit.testing.synthetic import forced_recovery_set

    truth, table = forced_recovery_set(1, seed=5, levels=(0.03,), regimes=("two_class",))[0]
    t = table["step"] - table["step"][0]
    y = np.asarray(table["reward"], dtype=float)
    ts0, tf0 = _true_times(truth)
    u = np.array([-0.1, 0.0, 0.1])
    got = _estimated_noise(truth, t, y, u, ts0 * np.exp(u), np.full(3, tf0))
    assert set(got) == {"estimated_noise_ok", "estimated_posterior_ok", "estimated_p_ok"}
    # the truth shifted by 0.1: no estimate of this run is within 0.03 of it
    far = dict(truth, plateau=truth["plateau"] + 0.1)
    assert not any(_estimated_noise(far, t, y, u, ts0 * np.exp(u), np.full(3, tf0)).values())


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
                "estimated_noise_ok": float(c[10].rstrip("%")) / 100,
                "estimated_posterior_ok": float(c[11].rstrip("%")) / 100,
            }
        )
    assert summary(parsed) in doc
