"""The forecast search's Kalman filter (grpofit/_filter.c ``walk_nll``, grpofit/forecasting/filtered.py)
gives the dense walk likelihood it replaces, to round-off, on every law: one mode, the
oscillator over-, under- and near-critically damped, two modes; the noise known (binomial) or
profiled; a short series seen as logged and a long one with a binned tail. And the fits it
drives end where the dense ones do."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grpofit.forecasting import filtered
from grpofit.forecasting.likelihood import bounds_for, reduce_series
from grpofit.forecasting.statespace import LAWS, design
from grpofit.forecasting.walk import dense_objective, fit_walk_law, search_objective, walk_bounds

try:  # the built extension itself, whatever GRPOFIT_PURE_PYTHON says
    from grpofit import _filter as kernel
except ImportError:
    kernel = None
needs_kernel = pytest.mark.skipif(
    kernel is None or not hasattr(kernel, "walk_nll"), reason="grpofit._filter was not built (no C compiler)"
)

#: relative tolerance between the filter and the dense Cholesky evaluation (measured: 1.2e-9 at
#: worst over 6,000 random points of the bounds of 300 fits)
RTOL = 1e-8


def _series(known: bool, n: int):
    rng = np.random.default_rng(n)
    t = np.arange(float(n)) * 2.0
    y = np.clip(0.7 - 0.45 * np.exp(-t / 90.0) + 0.03 * rng.standard_normal(t.size), 0, 1)
    pv = np.full(t.size, 0.2 * 0.8 / 64) if known else None
    return reduce_series(t, y, pv, level_sd=0.5)


@pytest.fixture(autouse=True)
def _kernel(monkeypatch):
    """The filter on (the built kernel), whatever GRPOFIT_PURE_PYTHON says."""
    if kernel is not None:
        monkeypatch.setattr(filtered, "compiled_filter", lambda: kernel)


def _thetas(law, series, rng, count):
    """Random points of the search's bounds, and for the oscillator points 1e-5 and 1e-3 either
    side of critical damping (``Ts = 4 Ti``; closer, the dense evaluation's nudged roots are off,
    see below) and a stiff one (``Ti`` far below ``Ts``)."""
    lo, hi = bounds_for(law, series, 3.0 * float(series.t[-1]))
    qlo, qhi = walk_bounds(series)
    lo, hi = np.append(lo, qlo), np.append(hi, qhi)
    out = [lo + (hi - lo) * rng.uniform(size=lo.size) for _ in range(count)]
    if law == "oscillator":
        for rel in (1e-5, -1e-5, 1e-3, -1e-3):
            th = 0.5 * (lo + hi)
            th[1] = th[0] - math.log(4.0) + rel
            out.append(th)
        th = 0.5 * (lo + hi)
        th[1] = lo[1]
        out.append(th)
    return out


@needs_kernel
@pytest.mark.parametrize("n", [40, 600])
@pytest.mark.parametrize("known", [False, True])
@pytest.mark.parametrize("law", list(LAWS))
def test_the_filter_gives_the_dense_likelihood(law, known, n):
    series = _series(known, n)
    assert (series.t.size < n) == (n > 90)  # the long one is binned
    fast = filtered.filtered_objective(law, series)
    assert fast is not None and search_objective(law, series).__qualname__ == fast.__qualname__
    dense = dense_objective(law, series)
    rng = np.random.default_rng(17)
    finite = 0
    for theta in _thetas(law, series, rng, 40):
        a, b = fast(theta), dense(theta)
        if math.isfinite(b):
            finite += 1
            assert a == pytest.approx(b, rel=RTOL, abs=RTOL)
        else:
            assert not math.isfinite(a) or a > 1e3
    assert finite >= 40


@needs_kernel
def test_the_filter_refuses_what_it_cannot_evaluate():
    series = _series(False, 40)
    f = filtered.filtered_objective("one", series)
    theta = np.array([math.log(30.0), math.log(0.5), -6.0])
    assert math.isfinite(f(theta))
    series.y[3] = np.nan  # a value that is not finite: the likelihood is not either
    assert filtered.filtered_objective("one", series)(theta) == math.inf
    dts, step_of = filtered.spacings(series)
    one = np.ones(1)
    args = (series.t.size, 1, 2, dts.size, False, 0.01, 1.0, 1.0, step_of, -one, one, one, dts)
    with pytest.raises(ValueError):  # X of the wrong size
        kernel.walk_nll(*args, series.y, np.ones(3), series.obs_var())
    with pytest.raises(ValueError):  # a spacing index out of range
        kernel.walk_nll(*args[:8], step_of + dts.size, *args[9:], series.y, np.ones(2 * series.t.size), one)


def test_without_the_kernel_the_dense_likelihood_runs(monkeypatch):
    monkeypatch.setattr(filtered, "compiled_filter", lambda: None)
    series = _series(True, 40)
    assert filtered.filtered_objective("one", series) is None
    assert search_objective("one", series).__qualname__ == dense_objective("one", series).__qualname__


@needs_kernel
@pytest.mark.slow
@pytest.mark.parametrize("law", list(LAWS))
def test_fits_by_the_filter_end_where_the_dense_fits_do(law, monkeypatch):
    """The same maximum (to 1e-3 in the log likelihood) and the same Laplace spread where the
    likelihood is not flat: the searches' paths differ by round-off only."""
    series = _series(False, 300)
    kw = dict(t_guess=90.0, t_max=1800.0)
    fast = fit_walk_law(law, series, **kw)
    monkeypatch.setattr(filtered, "compiled_filter", lambda: None)
    dense = fit_walk_law(law, series, **kw)
    assert fast.nll == pytest.approx(dense.nll, abs=1e-3)
    np.testing.assert_allclose(fast.beta, dense.beta, atol=0.02)


@needs_kernel
def test_the_filter_is_continuous_through_critical_damping():
    """Within about 1e-6 of ``Ts = 4 Ti`` the dense evaluation nudges the repeated root apart
    and its value is off (by 0.15 in this case, on the underdamped side); the filter's matrix
    exponential has no such band: its values from 1e-8 to 1e-5 either side lie on the line
    through the dense values 1e-5 either side (where both agree)."""
    series = _series(False, 40)
    fast = filtered.filtered_objective("oscillator", series)
    dense = dense_objective("oscillator", series)
    base = np.array([math.log(10.8), 0.0, math.log(0.127), -5.48])

    def at(f, rel):
        th = base.copy()
        th[1] = th[0] - math.log(4.0) + rel
        return f(th)

    lo, hi = at(dense, -1e-5), at(dense, 1e-5)
    assert at(fast, -1e-5) == pytest.approx(lo, rel=RTOL) and at(fast, 1e-5) == pytest.approx(hi, rel=RTOL)
    for rel in (-1e-6, -1e-7, -1e-8, 0.0, 1e-8, 1e-7, 3e-7, 1e-6):
        assert at(fast, rel) == pytest.approx(lo + (hi - lo) * (rel + 1e-5) / 2e-5, abs=1e-6)
    assert abs(at(dense, 1e-7) - at(fast, 1e-7)) > 0.1  # the dense band this replaces


@needs_kernel
@pytest.mark.parametrize("known", [False, True])
@pytest.mark.parametrize("law", list(LAWS))
def test_many_points_at_once_are_the_points_one_at_a_time(law, known):
    """``f.many`` (the kernel's ``walk_search``: the law's system built in C, its design once per
    distinct set of times) gives each row exactly the value of the kernel's one-point filter
    (``walk_nll`` with the parts built by the law's Python form), and the dense value to round-off;
    a finite-difference gradient's points (rows sharing their times) and rows out of order too."""
    series = _series(known, 600)
    fast = filtered.filtered_objective(law, series)
    assert fast is not None and fast.many is not None
    monkey = pytest.MonkeyPatch()
    monkey.setattr(filtered, "LAW_CODES", {})
    one_at_a_time = filtered.filtered_objective(law, series)
    monkey.undo()
    assert not hasattr(one_at_a_time, "many")
    dense = dense_objective(law, series)
    rng = np.random.default_rng(5)
    thetas = _thetas(law, series, rng, 12)
    base = thetas[0]
    steps = base + np.vstack([np.zeros(base.size), 1e-5 * np.eye(base.size)])  # a gradient's points
    rows = np.vstack([steps, np.array(thetas)[::-1], steps[:2]])
    values = fast.many(rows)
    assert values.shape == (rows.shape[0],)
    for row, v in zip(rows, values):
        assert v == one_at_a_time(row)  # the same bits
        d = dense(row)
        if math.isfinite(d):
            assert v == pytest.approx(d, rel=RTOL, abs=RTOL)


def test_the_designs_at_once_are_each_design():
    t = np.concatenate([np.arange(25.0), np.linspace(25.0, 300.0, 65)])
    cases = {
        "one": [(3.0,), (250.0,), (1e-3,)],
        "two": [(2.0, 80.0), (0.5, 4000.0)],
        # over-, near-critically (both sides, the series and the closed form) and underdamped
        "oscillator": [(40.0, 1.0), (40.0, 10.0 * (1 + 1e-6)), (40.0, 10.0 * (1 - 1e-4)), (40.0, 9.5), (40.0, 30.0)],
    }
    for law, times in cases.items():
        X = filtered.designs(law, t, times)
        assert X.shape == (len(times), t.size, len(LAWS[law].levels))
        for u, tm in enumerate(times):
            assert np.array_equal(X[u], design(law, t, tm))


@needs_kernel
def test_many_refuses_bad_arguments():
    series = _series(False, 40)
    dts, step_of = filtered.spacings(series)
    n, D = series.t.size, dts.size
    X = filtered.designs("one", series.t, [(30.0,)])
    th = np.array([[math.log(30.0), math.log(0.5), -6.0]])
    out = np.empty(1)
    args = (0, n, D, False, 1.0, 1, 1, step_of, dts, series.y, series.obs_var(), th)
    kernel.walk_search(*args, X, np.zeros(1, dtype=np.int64), out)
    assert math.isfinite(out[0])
    with pytest.raises(ValueError):  # a design index out of range
        kernel.walk_search(*args, X, np.ones(1, dtype=np.int64), out)
    with pytest.raises(ValueError):  # no such law
        kernel.walk_search(7, *args[1:], X, np.zeros(1, dtype=np.int64), out)
    with pytest.raises(ValueError):  # a design of the wrong size
        kernel.walk_search(*args, X[:, :-1], np.zeros(1, dtype=np.int64), out)


def _dense_conditional(fit, theta, series, tf):
    """predictive._conditional with the compiled filter off (the dense Cholesky conditional)."""
    from grpofit.forecasting import predictive

    monkey = pytest.MonkeyPatch()
    monkey.setattr(filtered, "LAW_CODES", {})
    try:
        return predictive._conditional(fit, theta, series, tf, np.random.default_rng(1))
    finally:
        monkey.undo()


@needs_kernel
@pytest.mark.parametrize("n", [40, 600])
@pytest.mark.parametrize("known", [False, True])
@pytest.mark.parametrize("law", list(LAWS))
def test_the_filtered_conditional_is_the_dense_one(law, known, n):
    """The kernel's ``walk_conditional`` (the latent at future times from the filtered state)
    gives the dense conditional's mean, covariance, levels' posterior, drawn noise sd and
    likelihood to round-off, at the fit and at points around it (for the oscillator also
    under- and near-critically damped ones), future times in any order and repeated."""
    from grpofit.forecasting import predictive

    series = _series(known, n)
    fit = fit_walk_law(law, series, t_guess=60.0, t_max=6.0 * float(series.t[-1]))
    last = float(series.t[-1])
    tf = np.concatenate([[last, 3.0 * last], np.linspace(last, 3.0 * last, 12)[::-1], [last + 1e-3]])
    rng = np.random.default_rng(9)
    points = [fit.theta] + [fit.theta + 0.3 * rng.standard_normal(fit.theta.size) for _ in range(4)]
    if law == "oscillator":
        for ratio in (0.2, 0.25 * (1 + 1e-6), 0.25 * (1 - 1e-4), 0.7):  # inertia / timescale
            th = fit.theta.copy()
            th[1] = th[0] + math.log(ratio)
            points.append(th)
    checked = 0
    for theta in points:
        assert filtered.filtered_conditional(law, theta[:-1], math.exp(theta[-1]), series, tf) is not None
        fast = predictive._conditional(fit, theta, series, tf, np.random.default_rng(1))
        dense = _dense_conditional(fit, theta, series, tf)
        if not math.isfinite(dense[6]):
            continue
        checked += 1
        assert fast[6] == pytest.approx(dense[6], rel=RTOL, abs=RTOL)
        scale = np.abs(dense[1]).max()
        np.testing.assert_allclose(fast[0], dense[0], rtol=1e-8, atol=1e-8 * np.abs(dense[0]).max())
        np.testing.assert_allclose(fast[1], dense[1], rtol=0, atol=1e-7 * scale)
        np.testing.assert_allclose(fast[2], dense[2], rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(fast[3], dense[3], rtol=0, atol=1e-8 * np.abs(dense[3]).max())
        assert (fast[4] is None) == (dense[4] is None) == known
        if not known:
            assert fast[4] == pytest.approx(dense[4], rel=1e-8)
        assert fast[5] == pytest.approx(dense[5])
    assert checked >= 4


@needs_kernel
def test_a_time_before_the_last_seen_point_takes_the_dense_conditional():
    """The filter predicts forward only: a time before the last seen point would need a smoother,
    so there the dense conditional runs (and gives that time's smoothed latent)."""
    series = _series(False, 40)
    fit = fit_walk_law("one", series, t_guess=60.0, t_max=240.0)
    last = float(series.t[-1])
    assert filtered.filtered_conditional("one", fit.theta[:-1], 1e-4, series, np.array([last - 1.0, last])) is None
    assert filtered.filtered_conditional("one", fit.theta[:-1], 1e-4, series, np.array([last, last + 5])) is not None


@needs_kernel
@pytest.mark.parametrize("known", [False, True])
def test_the_fits_levels_by_the_filter_are_the_dense_ones(known):
    from grpofit.forecasting import walk

    series = _series(known, 600)
    for law in LAWS:
        fit = fit_walk_law(law, series, t_guess=60.0, t_max=3000.0)
        a, b = walk._levels_at(law, fit.theta, series), walk._nll(law, fit.theta, series)
        assert a[0] == pytest.approx(b[0], rel=RTOL)
        np.testing.assert_allclose(a[1][0], b[1][0], rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(a[1][1], b[1][1], rtol=0, atol=1e-8 * np.abs(b[1][1]).max())
        assert (a[1][2] is None) == known and (known or a[1][2] == pytest.approx(b[1][2], rel=1e-9))


@needs_kernel
def test_the_conditional_kernel_refuses_bad_arguments():
    series = _series(False, 40)
    t, resid, obs_var, u2, D, step_of, dts = filtered._seen_parts(series)
    last = float(series.t[-1])

    def call(tf, code=0, times=np.array([math.log(30.0)])):
        tf = np.asarray(tf, dtype=float)
        outs = (np.empty(tf.size), np.empty((tf.size, tf.size)), np.empty(2), np.empty((2, 2)))
        return kernel.walk_conditional(
            code,
            t.size,
            D,
            tf.size,
            False,
            u2,
            0.25,
            1e-6,
            times,
            step_of,
            dts,
            t,
            resid,
            obs_var,
            tf,
            np.array([series.level, 0.0]),
            *outs,
        )

    nll, quad = call([last, last + 10.0])
    assert math.isfinite(nll) and quad > 0
    with pytest.raises(ValueError):  # a time before the last seen one (the filter does not smooth)
        call([last - 1.0, last])
    with pytest.raises(ValueError):  # no such law
        call([last], code=9)
    with pytest.raises(ValueError):  # the law's times of the wrong size
        call([last], times=np.zeros(2))
