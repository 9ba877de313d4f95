"""The compiled least-squares arithmetic (grpofit/_filter.c's fit block) against the numpy code
it stands for: the damping ratio's profile grid (:func:`grpofit.fitting.profile._evaluate`).

Every call the fits below make is run through both and compared to round-off (the kernel calls
libm's exp, sin and cos where numpy may use its own vectorised ones, and sums the bins in
order)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grpofit.fitting import fit_series, profile
from grpofit.testing.synthetic import forced_recovery_set

try:  # the built extension itself, whatever GRPOFIT_PURE_PYTHON says
    from grpofit import _filter as kernel
except ImportError:
    kernel = None
needs_kernel = pytest.mark.skipif(kernel is None, reason="grpofit._filter was not built (no C compiler)")

RTOL = 1e-9


@pytest.fixture(scope="module")
def grid_calls():
    """The arguments of every profile-grid evaluation made while fitting forced runs of each
    regime, a long binned run of each kind and a short one."""
    seen = []
    real = profile._evaluate

    def record(*args):
        seen.append(args)
        return real(*args)

    profile._evaluate = record
    try:
        for _, table in forced_recovery_set(1, seed=7, levels=(0.0, 0.02)):
            fit_series(table["step"], table["reward"])
        rng = np.random.default_rng(3)
        t = np.arange(2000.0)
        fit_series(t, 0.8 - 0.6 * np.exp(-t / 300.0) + 0.05 * rng.standard_normal(t.size))
        fit_series(t, 0.7 - 0.5 * np.exp(-t / 200.0) * np.cos(t / 60.0) + 0.02 * rng.standard_normal(t.size))
        t = np.arange(30.0)
        fit_series(t, 0.8 - 0.6 * np.exp(-t / 8.0) + 0.03 * rng.standard_normal(t.size))
    finally:
        profile._evaluate = real
    return seen


def _close(a, b, scale=None) -> bool:
    """Equal to round-off: the same infinities, finite values within RTOL of the larger of the
    two magnitudes (or of ``scale``, for a quantity that cancels)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not np.array_equal(np.isinf(a), np.isinf(b)) or not np.array_equal(np.isnan(a), np.isnan(b)):
        return False
    fin = np.isfinite(a)
    ref = np.maximum(np.abs(a[fin]), np.abs(b[fin])) if scale is None else scale
    return bool(np.all(np.abs(a[fin] - b[fin]) <= RTOL * np.maximum(ref, 1e-300)))


@needs_kernel
def test_profile_grid_matches_numpy(grid_calls, monkeypatch):
    assert len(grid_calls) > 20
    rows = 0
    for b, zetas, ts, lv in grid_calls:
        got = profile._evaluate(b, zetas, ts, lv)
        want = profile._evaluate_numpy(b, zetas, ts, lv)
        ssr_scale = max(b.yy, 1e-300)  # the SSR is yy less the fitted part: round-off of yy's size
        assert _close(got[0], want[0], ssr_scale), "ssr"
        for x, y in zip(got[1:3], want[1:3]):  # the levels, where the system is not singular
            ok = np.isfinite(want[0])
            assert _close(x[ok], y[ok]), "levels"
        assert _close(got[3], want[3]), "shapes"
        rows += zetas.size
    assert rows > 500


@needs_kernel
def test_profile_grid_every_kind_of_row():
    """Underdamped, near-critical (nudged), overdamped and inertia-0 rows, out-of-bounds levels
    and a singular system (one bin), against numpy."""
    t = np.array([0.0, 1.0, 2.0, 4.0, 7.0, 12.0, 20.0, 33.0])
    y = 0.7 - 0.5 * np.exp(-t / 6.0)
    w = np.array([1.0, 1.0, 1.0, 2.0, 3.0, 4.0, 6.0, 9.0])
    b = profile.Binned(t, y, w, float(w @ (y * y)), float(w.sum()), float(w @ y))
    zetas = np.array([0.15, 0.5, 1.0 - 1e-9, 1.0, 1.0 + 5e-8, 2.0, 12.0, math.inf])
    ts = np.exp(np.linspace(-3.0, 5.0, 9))[None, :].repeat(zetas.size, axis=0)
    for lv in ((-10.0, 10.0), (0.3, 0.65)):
        got = profile._evaluate(b, zetas, ts, lv)
        want = profile._evaluate_numpy(b, zetas, ts, lv)
        assert _close(got[0], want[0], b.yy) and _close(got[3], want[3])
    assert np.isinf(profile._evaluate(b, zetas, ts, (0.3, 0.65))[0]).any()  # levels out of bounds
    one = profile.Binned(t[:1], y[:1], w[:1], float(y[0] ** 2), 1.0, float(y[0]))
    np.seterr(all="ignore")  # the numpy code runs under the fit's errstate
    ssr = profile._evaluate(one, zetas, ts[:, :2], (-10.0, 10.0))[0]
    assert np.all(np.isinf(ssr)) and np.all(np.isinf(profile._evaluate_numpy(one, zetas, ts[:, :2], (-10.0, 10.0))[0]))


@needs_kernel
def test_oscillator_jacobian_matches_numpy():
    """Every branch of the oscillator's response (overdamped, near-critical by series and closed
    form, underdamped, inertia 0 and tiny), on binned and raw times, against numpy."""
    from grpofit.fitting.jacobians import oscillator_jacobian, raw_jacobian
    from grpofit.laws.models import EXPONENTIAL, OSCILLATOR
    from grpofit.laws.oscillator import raw_oscillator_jacobian

    assert raw_jacobian(OSCILLATOR) is oscillator_jacobian
    assert raw_jacobian(EXPONENTIAL) is (EXPONENTIAL.raw_jacobian or EXPONENTIAL.jacobian)
    t = np.concatenate([np.arange(10.0), np.geomspace(10.0, 3000.0, 40)])
    ts = 60.0
    for ti in (0.0, 1e-9, 0.5, 10.0, 14.9, 15.0, 15.0 + 1e-9, 15.1, 20.0, 200.0, 3000.0):
        with np.errstate(all="ignore"):
            got = oscillator_jacobian(t, 0.8, 0.2, ts, ti)
            want = raw_oscillator_jacobian(t, 0.8, 0.2, ts, ti)
        assert got.shape == want.shape == (t.size, 4)
        scale = np.max(np.abs(want), axis=0)  # each column's own size: values near 0 cancel
        assert np.all(np.abs(got - want) <= 1e-9 * np.maximum(scale, 1e-300)), ti


@needs_kernel
def test_oscillator_residuals_match_numpy():
    """The solve's residuals and chained Jacobian in one compiled pass, against the numpy
    evaluation of the same problem (overdamped, near-critical and underdamped points)."""
    from grpofit.fitting import solve
    from grpofit.laws.models import OSCILLATOR

    rng = np.random.default_rng(5)
    t = np.arange(300.0)
    y = 0.7 - 0.5 * np.exp(-t / 40.0) + 0.01 * rng.standard_normal(t.size)
    b = profile.log_bins(t, y)
    for ti in (0.5, 9.9, 10.0, 30.0, 400.0):
        x0 = np.array([0.7, 0.2, 40.0, ti])
        prob = solve._Problem(OSCILLATOR, b, x0, np.ones(4, dtype=bool))
        assert prob.compiled
        q = prob.to_internal(x0)
        got = prob.evaluate(q)
        prob.compiled = False
        want = prob.evaluate(q)
        for a, c in zip(got, want):
            scale = np.max(np.abs(c), axis=0)
            assert a.shape == c.shape and np.all(np.abs(a - c) <= 1e-9 * np.maximum(scale, 1e-300)), ti


@needs_kernel
def test_rolling_median_matches_numpy():
    """The sliding sorted window against numpy's partition: the same order statistics exactly,
    ties included, every window length the checks use (infinities and NaN: numpy's path)."""
    from grpofit.fitting.collapse import _rolling_median_numpy, rolling_median

    rng = np.random.default_rng(11)
    for n in (8, 30, 301, 2000):
        for v in (
            rng.standard_normal(n),
            np.round(rng.standard_normal(n), 1),  # many ties
            np.concatenate([rng.standard_normal(n - 3), [np.inf, -np.inf, 1e308]]),
        ):
            for window in (3, 4, 7, 9, 51):
                if n <= window:
                    continue
                with np.errstate(all="ignore"):
                    got, want = rolling_median(v, window), _rolling_median_numpy(v, window // 2)
                np.testing.assert_array_equal(got, want)
    v = rng.standard_normal(100)
    v[40] = np.nan  # NaN: numpy's path
    np.testing.assert_array_equal(rolling_median(v, 9), _rolling_median_numpy(v, 4))


@needs_kernel
def test_late_check_median_matches_numpy(monkeypatch):
    """The late check's centred 5-point median by the compiled window: numpy's values."""
    from grpofit.fitting import fitcheck
    from grpofit.runtime import compiled

    rng = np.random.default_rng(2)
    cases = [rng.standard_normal(n) for n in (6, 7, 40, 333)] + [np.round(rng.standard_normal(50), 1)]
    got = [fitcheck._centred_median5(x) for x in cases]
    monkeypatch.setattr(compiled, "compiled_filter", lambda: None)
    monkeypatch.setattr(fitcheck, "compiled_filter", lambda: None)
    for g, x in zip(got, cases):
        np.testing.assert_allclose(g, fitcheck._centred_median5(x), rtol=1e-15, atol=0)
