"""The fit's plateau and timescale intervals from the state-space likelihood (theory §6)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grpofit.fitting import fit_series
from grpofit.fitting.statespace_ci import Cells, _kalman_cells, agrees, state_space_intervals
from grpofit.forecasting.statespace import design, process_cov
from grpofit.laws.registry import MODELS
from grpofit.testing.synthetic import forced_recovery_set


def _dense(law, t, y, times, r):
    """Restricted likelihood, GLS plateau and its variance from the dense covariance."""
    X = design(law, t, times)
    S = r * r * process_cov(law, t, t, times, 1.0) + np.eye(t.size)
    Si = np.linalg.inv(S)
    A = X.T @ Si @ X
    c = X.T @ Si @ y
    b = np.linalg.solve(A, c)
    Q = y @ Si @ y - c @ b
    n, p = t.size, X.shape[1]
    nll = 0.5 * (np.linalg.slogdet(S)[1] + np.linalg.slogdet(A)[1]) + 0.5 * (n - p) * math.log(Q)
    return nll, b[0], Q / (n - p) * np.linalg.inv(A)[0, 0]


@pytest.mark.parametrize(
    "law,ts,ti,r",
    [
        ("oscillator", 40.0, 6.0, 0.5),
        ("oscillator", 40.0, 25.0, 2.0),
        ("oscillator", 40.0, 9.99, 1.0),
        ("one", 30.0, 0.0, 0.3),
    ],
)
def test_kalman_filter_equals_the_dense_likelihood(law, ts, ti, r):
    rng = np.random.default_rng(1)
    t = np.concatenate([np.arange(12.0), 12.0 + 7.0 * np.arange(20)])
    y = 0.7 - 0.5 * np.exp(-t / 35.0) + 0.03 * rng.standard_normal(t.size)
    cols = np.zeros((1, t.size, 2))
    cols[0, :, 0] = design(law, t, (ts, ti) if law == "oscillator" else (ts,))[:, 1]
    nll, b0, var, _ = _kalman_cells(
        t, y, np.ones(t.size), Cells(np.array([ts]), np.array([ti]), np.array([r]), cols, 1)
    )
    d = _dense(law, t, y, (ts, ti) if law == "oscillator" else (ts,), r)
    assert nll[0] == pytest.approx(d[0], abs=1e-8)
    assert b0[0] == pytest.approx(d[1], rel=1e-10)
    assert var[0] == pytest.approx(d[2], rel=1e-8)


def test_forcing_widens_the_plateau_interval():
    """Same curve and noise; forcing inside the dynamics must widen the interval a lot."""
    runs = {lvl: forced_recovery_set(1, seed=4, levels=(lvl,), regimes=("overdamped",))[0] for lvl in (0.0, 0.03)}
    width = {}
    for lvl, (truth, table) in runs.items():
        t = table["step"] - table["step"][0]
        ss = state_space_intervals("oscillator", t, table["reward"], (truth["timescale"], truth["inertia"]))
        width[lvl] = ss.plateau[1] - ss.plateau[0]
    assert width[0.03] > 2.0 * width[0.0]


def test_fit_publishes_state_space_intervals_and_drops_disagreeing_stderr():
    truth, table = forced_recovery_set(1, seed=2, levels=(0.015,), regimes=("overdamped",))[0]
    res = fit_series(table["step"], table["reward"])
    for model in [m.name for m in MODELS.values() if m.statespace_intervals]:
        for name in ("plateau", "timescale"):
            e = res.models[model].params[name]
            assert e.ci95 is not None and e.ci95[0] <= e.value <= e.ci95[1]
            assert "state-space" in (e.note or "") or "not pinned down" in (e.note or "")
            if e.stderr is not None:
                assert agrees(e.value, e.stderr, e.ci95)


def test_agrees():
    assert agrees(1.0, 0.1, (0.804, 1.196))
    assert not agrees(1.0, 0.1, (0.9, 1.6))  # skewed: value ± 1.96 se would mislead
    assert not agrees(1.0, None, (0.8, 1.2))


@pytest.mark.slow
def test_recovery_harness_scores_every_stratum():
    """The machinery of ``python -m benchmarks.recovery --forced`` on one run per stratum."""
    from benchmarks.recovery import forced_report, run_forced_recovery

    rows = run_forced_recovery(1, seed=11)
    assert len(rows) == 12
    for r in rows:
        assert 0.0 <= r["plateau_coverage"] <= 1.0 and 0.0 <= r["recovered"] <= 1.0
        assert r["regime_wrong"] in (0.0, 1.0)
    assert "| regime wrong |" in forced_report(rows)


@pytest.mark.slow
def test_committed_coverage_table_matches_one_recomputed_stratum():
    """docs/fit_coverage.md is the output of ``python -m benchmarks.fit_targets 100 2026`` (its first
    table is ``benchmarks.recovery``'s forced report): recompute its hardest stratum (strong
    forcing, underdamped) and compare the row."""
    from benchmarks.recovery import check_committed_row, forced_report, run_forced_recovery

    rows = run_forced_recovery(100, seed=2026, only=(0.03, "underdamped"))
    check_committed_row(
        "fit_coverage.md",
        "python -m benchmarks.fit_targets 100 2026",
        forced_report(rows),
        "| 0.03 | underdamped | 100 |",
    )


def test_a_batch_of_cells_gives_each_cell_its_own_likelihood():
    """Cells sharing a timescale and inertia over several forcing ratios (computed once per
    (timescale, inertia) and spread), one-mode cells and two-mode cells in one filter pass:
    each cell's terms are those of the cell filtered alone, and the dense likelihood's."""
    rng = np.random.default_rng(3)
    t = np.concatenate([np.arange(10.0), 10.0 + 9.0 * np.arange(22)])
    y = 0.6 - 0.4 * np.exp(-t / 30.0) + 0.03 * rng.standard_normal(t.size)
    ratios = np.array([0.1, 0.7, 3.0])
    times = [("oscillator", 40.0, 6.0), ("oscillator", 40.0, 25.0), ("oscillator", 55.0, 6.0), ("one", 30.0, 0.0)]
    ts, ti, r, cols = [], [], [], []
    for law, a, b in times:
        col = design(law, t, (a, b) if law == "oscillator" else (a,))[:, 1]
        for ratio in ratios:
            ts.append(a), ti.append(b), r.append(ratio), cols.append(np.stack([col, np.zeros(t.size)], axis=1))
    for fast, slow in ((4.0, 40.0), (6.0, 80.0)):
        for ratio in ratios:
            ts.append(slow), ti.append(0.0), r.append(ratio)
            cols.append(np.stack([np.exp(-t / fast), np.exp(-t / slow)], axis=1))
    batch = Cells(np.array(ts), np.array(ti), np.array(r), np.array(cols), 2)
    together = _kalman_cells(t, y, np.ones(t.size), batch)
    for k in range(len(ts)):
        alone = Cells(
            batch.ts[k : k + 1],
            batch.ti[k : k + 1],
            batch.r[k : k + 1],
            batch.cols[k : k + 1],
            2 if np.any(batch.cols[k, :, 1]) else 1,
        )
        for got, want in zip(together, _kalman_cells(t, y, np.ones(t.size), alone)):
            assert got[k] == pytest.approx(want[0], rel=1e-9, abs=1e-12)
    for k, (law, a, b) in enumerate(times):
        for i, ratio in enumerate(ratios):
            d = _dense(law, t, y, (a, b) if law == "oscillator" else (a,), ratio)
            assert together[0][3 * k + i] == pytest.approx(d[0], abs=1e-8)
            assert together[1][3 * k + i] == pytest.approx(d[1], rel=1e-9)


def test_binned_columns_are_the_curves_bin_means():
    """A bin's mean column is the curve averaged over its points, not the curve at the bin's
    mean time (exponentials are convex: the latter read a fast rise as a slower one); the real
    arithmetic of the complex rates and of the oscillator's columns matches complex numbers."""
    from grpofit.fitting.binning import bin_tail
    from grpofit.fitting.statespace_ci import _binned, _binned_complex, _columns, _reduce, _spacing

    t = np.arange(0.0, 600.0)
    tb, _, cnt = _reduce(t, np.zeros_like(t))
    d = _spacing(tb, cnt)
    assert cnt.max() > 10

    def bin_means(curve):
        return bin_tail(t, [curve], 10, 32)[1][0]

    real = np.array([-1.0 / 15.0, -1.0 / 0.7, -1e4])
    got = _binned(real, tb, cnt, d)
    assert np.all(np.isfinite(got))
    for k, lk in enumerate(real):
        assert np.max(np.abs(got[k] - bin_means(np.exp(lk * t)))) < 1e-12
    assert np.max(np.abs(got[0] - np.exp(real[0] * tb))) > 1e-3  # the point values would differ
    re, im = _binned_complex(np.array([-0.05, -0.2]), np.array([0.04, 1.3]), tb, cnt, d)
    for k, lk in enumerate((-0.05 + 0.04j, -0.2 + 1.3j)):
        e = np.exp(lk * t)
        assert np.max(np.abs(re[k] - bin_means(e.real))) < 1e-12
        assert np.max(np.abs(im[k] - bin_means(e.imag))) < 1e-12
    # the mode columns: one mode, overdamped, near critical and underdamped cells
    cells = [("one", 15.0, 0.0), ("oscillator", 40.0, 6.0), ("oscillator", 40.0, 9.99999), ("oscillator", 40.0, 25.0)]
    cols = _columns(tb, cnt, np.array([c[1] for c in cells]), np.array([c[2] for c in cells]))
    for k, (law, ts, ti) in enumerate(cells):
        curve = design(law, t, (ts, ti) if law == "oscillator" else (ts,))[:, 1]
        tol = 1e-6 if ti == 9.99999 else 1e-12  # a repeated root is nudged apart
        assert np.max(np.abs(cols[k] - bin_means(curve))) < tol, (law, ts, ti)


@pytest.mark.slow
def test_every_shown_stderr_tells_what_its_interval_tells():
    """On forced runs of every regime and level, each parameter of both laws: a published
    stderr agrees with its interval and value ± 1.96 stderr covers the interval; a dropped one
    says why."""
    shown = dropped = 0
    for truth, table in forced_recovery_set(2, seed=9):
        res = fit_series(table["step"], table["reward"])
        for fit in res.models.values():
            for name, e in fit.params.items():
                if e.stderr is not None and e.ci95 is not None and None not in e.ci95:
                    shown += 1
                    assert agrees(e.value, e.stderr, e.ci95), (name, e)
                    assert e.value - 1.96 * e.stderr <= e.ci95[0] + 1e-12
                    assert e.value + 1.96 * e.stderr >= e.ci95[1] - 1e-12
                elif e.stderr is None and e.ci95 is not None and None not in e.ci95 and e.value is not None:
                    dropped += 1
                    assert e.note, (name, e)
    assert shown > 50 and dropped > 5


def test_a_skewed_interval_drops_its_stderr():
    from grpofit.fitting.intervals import NO_STDERR, reconcile_stderr
    from grpofit.fitting.results import Estimate

    e = Estimate(1.28, 0.078, (1.05, 1.63), None)  # the README's damping ratio before the rule
    reconcile_stderr(e)
    assert e.stderr is None and NO_STDERR in e.note
    e = Estimate(22.3, 2.2, (13.9, 31.5), "profile")  # a narrow stderr is raised to the interval
    reconcile_stderr(e)
    assert e.stderr == pytest.approx((31.5 - 22.3) / 1.96) and e.note == "profile"
    e = Estimate(0.0968, 0.05, (0.0, None), "consistent with 0")  # an open end: nothing to agree with
    reconcile_stderr(e)
    assert e.stderr is None and e.note == "consistent with 0; no ± stderr: the interval has an open end"
