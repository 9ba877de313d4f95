"""Function-level tests of the two laws: formulas, regimes, continuity, Jacobians, registry."""

from __future__ import annotations

import numpy as np
import pytest

from grpofit.laws.models import (
    EXPONENTIAL,
    MODELS,
    OSCILLATOR,
    damping_ratio,
    exponential,
    oscillator,
    relaxation,
    relaxation_derivatives,
)

T = np.array([0.0, 0.5, 1.0, 3.0, 10.0, 37.0, 100.0, 400.0, 2500.0])


def _closed_form(t, ts, ti):
    """The textbook three-regime formulas (theory.md section 1), away from b = 0."""
    a = 1.0 / (2.0 * ti)
    w0sq = 1.0 / (ti * ts)
    if a * a > w0sq:
        b = np.sqrt(a * a - w0sq)
        return (1 + a / b) / 2 * np.exp(-(a - b) * t) + (1 - a / b) / 2 * np.exp(-(a + b) * t)
    wd = np.sqrt(w0sq - a * a)
    return np.exp(-a * t) * (np.cos(wd * t) + a / wd * np.sin(wd * t))


def test_exponential_formula():
    t = np.array([0.0, 10.0, 1e9])
    out = exponential(t, 0.8, 0.1, 10.0)
    assert out[0] == pytest.approx(0.1)
    assert out[1] == pytest.approx(0.8 - 0.7 * np.exp(-1.0))
    assert out[2] == pytest.approx(0.8)


@pytest.mark.parametrize("zeta", [0.2, 0.5, 0.8, 1.3, 2.0, 5.0])
@pytest.mark.parametrize("ts", [3.0, 40.0, 500.0])
def test_relaxation_matches_closed_forms(zeta, ts):
    ti = ts / (4 * zeta**2)
    assert np.allclose(relaxation(T, ts, ti), _closed_form(T, ts, ti), rtol=1e-10, atol=1e-13)


def test_critical_and_continuity_across_b_zero():
    ts = 40.0
    ti = ts / 4.0  # zeta = 1: g = exp(-a t)(1 + a t)
    a = 1 / (2 * ti)
    crit = np.exp(-a * T) * (1 + a * T)
    assert np.allclose(relaxation(T, ts, ti), crit, rtol=1e-13, atol=1e-15)
    for eps in (1e-12, 1e-9, 1e-6, 1e-4):
        for sign in (1, -1):
            g = relaxation(T, ts, ti * (1 + sign * eps))
            assert np.max(np.abs(g - crit)) < 20 * eps + 1e-13
    # sweep the damping ratio through one: no jumps between the branches
    zetas = np.linspace(0.9, 1.1, 2001)
    g = np.array([relaxation(np.array([30.0]), ts, ts / (4 * z * z))[0] for z in zetas])
    assert np.max(np.abs(np.diff(g))) < 1e-3


def test_large_t_and_extreme_parameters_are_finite():
    t = np.array([0.0, 1e3, 1e6, 1e9])
    for ts, ti in [(1.0, 0.0), (1.0, 1e-12), (1.0, 0.2499999), (1.0, 0.25), (1.0, 1e3), (1e4, 1e-3)]:
        g = relaxation(t, ts, ti)
        assert np.all(np.isfinite(g)), (ts, ti)
        assert g[0] == pytest.approx(1.0)
        assert abs(g[-1]) < 1e-6
    _, d1, d2 = relaxation_derivatives(t, 1.0, 0.0)
    assert np.all(np.isfinite(d1)) and np.all(np.isfinite(d2))


def test_inertia_zero_is_the_exponential():
    assert np.allclose(oscillator(T, 0.7, 0.1, 33.0, 0.0), exponential(T, 0.7, 0.1, 33.0), rtol=1e-14)


def test_started_at_rest():
    h = 1e-6
    for ti in (0.5, 2.0, 10.0, 50.0):
        g = relaxation(np.array([0.0, h]), 20.0, ti)
        assert (g[1] - g[0]) / h == pytest.approx(0.0, abs=1e-4)


def test_damping_ratio():
    assert damping_ratio(40.0, 10.0) == pytest.approx(1.0)
    assert damping_ratio(160.0, 10.0) == pytest.approx(2.0)
    assert damping_ratio(1.0, 0.0) == np.inf


PARAMS = {
    "exponential": [(0.8, 0.1, 25.0), (0.3, 0.9, 400.0)],
    "oscillator": [
        (0.8, 0.1, 25.0, 0.0),
        (0.8, 0.1, 25.0, 1.0),
        (0.8, 0.1, 25.0, 6.2),
        (0.8, 0.1, 25.0, 6.25),  # critical
        (0.8, 0.1, 25.0, 6.3),
        (0.6, 0.2, 50.0, 80.0),  # underdamped
        (0.6, 0.2, 50.0, 2000.0),
    ],
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_jacobian_matches_finite_differences(name):
    model = MODELS[name]
    t = np.linspace(0.0, 300.0, 301)
    for p in PARAMS[name]:
        jac = model.jacobian(t, *p)
        assert jac.shape == (t.size, len(model.param_names))
        for i in range(len(p)):
            h = 1e-6 * max(abs(p[i]), 1.0)
            lo = list(p)
            hi = list(p)
            lo[i] -= h if p[i] - h >= 0 or i < 2 else 0.0
            hi[i] += h
            fd = (model.func(t, *hi) - model.func(t, *lo)) / (hi[i] - lo[i])
            assert np.allclose(jac[:, i], fd, rtol=1e-4, atol=1e-6), (name, p, i)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_registry_guess_and_bounds(name):
    model = MODELS[name]
    t = np.arange(0.0, 400.0, 5.0)
    y = oscillator(t, 0.7, 0.1, 60.0, 10.0)
    guess = model.guess(t, y)
    bounds = model.bounds(t, y)
    assert set(guess) == set(model.param_names) == set(bounds)
    for k, v in guess.items():
        lo, hi = bounds[k]
        assert lo <= v <= hi and np.isfinite(v)
    assert guess["plateau"] == pytest.approx(0.7, abs=0.02)
    assert guess["initial"] == pytest.approx(0.1, abs=0.05)
    assert 30 < guess["timescale"] < 120


def test_oscillator_guess_sees_overshoot():
    t = np.arange(0.0, 2000.0, 2.0)
    ts, zeta = 50.0, 0.35
    y = oscillator(t, 0.7, 0.1, ts, ts / (4 * zeta**2))
    g = OSCILLATOR.guess(t, y)
    assert damping_ratio(g["timescale"], g["inertia"]) == pytest.approx(zeta, rel=0.2)


def test_registry_contents():
    # the exponential and the oscillator it nests lead, fitted together from one grid (any
    # further law is a row after them, taken from the registry wherever tests name laws)
    assert list(MODELS)[:2] == ["exponential", "oscillator"]
    assert EXPONENTIAL.param_names == ("plateau", "initial", "timescale")
    assert OSCILLATOR.param_names == ("plateau", "initial", "timescale", "inertia")
    assert OSCILLATOR.derived({"timescale": 40.0, "inertia": 10.0})["damping_ratio"] == pytest.approx(1.0)


@pytest.mark.parametrize("zeta", [0.15, 0.5, 0.9, 1.0 - 1e-9, 1.0, 1.0 + 1e-9, 1.05, 3.0, 12.0, np.inf])
def test_relaxation_shape_matches_relaxation(zeta):
    from grpofit.laws.models import relaxation_shape

    ts = 37.0
    ti = 0.0 if np.isinf(zeta) else ts / (4.0 * zeta * zeta)
    x = (T / ts)[None, :]
    got = relaxation_shape(x, np.array([zeta]))[0]
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, relaxation(T, ts, ti), atol=1e-7)


@pytest.mark.parametrize("name", ["exponential", "oscillator"])
def test_raw_kernels_equal_the_public_functions(name):
    """The fitter's ``raw_*`` kernels (no np.errstate of their own) compute exactly what the
    public functions compute, in every regime of the oscillator."""
    from grpofit.laws.models import raw_relaxation_derivatives, raw_relaxation_shape, relaxation_shape

    model = MODELS[name]
    params = (
        [(0.7, 0.1, 40.0)]
        if name == "exponential"
        else [
            (0.7, 0.1, 40.0, 0.0),
            (0.7, 0.1, 40.0, 2.0),
            (0.7, 0.1, 40.0, 9.9),
            (0.7, 0.1, 40.0, 10.0),
            (0.7, 0.1, 40.0, 60.0),
        ]
    )
    with np.errstate(all="ignore"):  # how the fitter calls them
        for p in params:
            np.testing.assert_array_equal(model.raw_jacobian(T, *p), model.jacobian(T, *p))
            if name == "oscillator":
                for raw, public in zip(
                    raw_relaxation_derivatives(T, p[2], p[3]), relaxation_derivatives(T, p[2], p[3])
                ):
                    np.testing.assert_array_equal(raw, public)
        zeta = np.array([0.3, 0.99, 1.0, 1.7, 12.0, np.inf])
        x = np.outer(np.ones(zeta.size), T / 37.0)
        np.testing.assert_array_equal(raw_relaxation_shape(x, zeta), relaxation_shape(x, zeta))


def test_exponent_floor_changes_nothing_visible():
    """Exponents are floored at -700 before exp (libm's underflow path is several times slower):
    far tails stay below 1e-300 and no warning is raised by the public functions."""
    import warnings

    from grpofit.laws.models import relaxation_shape

    x = np.array([[0.0, 1.0, 50.0, 800.0, 1e6]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for zeta in (0.5, 3.0, 12.0, np.inf):
            g = relaxation_shape(x, np.array([zeta]))[0]
            assert np.all(np.isfinite(g)) and g[0] == pytest.approx(1.0)
            assert abs(g[4]) < 1e-300  # far past the relaxation (exp(-700) at most)
            if zeta > 1:  # slowest rate 1/T1 > 1/2: exp(-400) or less at x = 800
                assert abs(g[3]) < 1e-170
        jac = OSCILLATOR.jacobian(np.array([0.0, 1e5]), 0.7, 0.1, 10.0, 0.01)
        assert np.all(np.isfinite(jac)) and abs(jac[1, 1]) < 1e-300


@pytest.mark.slow
def test_median_and_the_fit_checks_rolling_median_are_np_medians_bit_for_bit():
    """grpofit.laws.models.median (used instead of np.median on the fit path) and fitcheck's
    5-point rolling median give np.median's values exactly: odd and even sizes, ties,
    magnitudes far apart; NaN windows fall back to np.median."""
    from grpofit.fitting.fitcheck import _centred_median5
    from grpofit.laws.models import median

    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 4, 5, 6, 7, 10, 33, 60, 101):
        for _ in range(40):
            x = rng.normal(size=n) * 10.0 ** rng.integers(-8, 8)
            if rng.random() < 0.3:
                x = np.round(x, 1)
            assert median(x) == np.median(x)
            want = np.array([np.median(x[max(0, i - 2) : i + 3]) for i in range(n)])
            assert np.array_equal(_centred_median5(x), want)
        x = rng.normal(size=n)
        x[n // 2] = np.nan
        want = np.array([np.median(x[max(0, i - 2) : i + 3]) for i in range(n)])
        assert np.array_equal(_centred_median5(x), want, equal_nan=True)


@pytest.mark.parametrize(
    "ts, ti",
    [(40.0, 1e-9), (40.0, 2.0), (40.0, 9.99), (40.0, 10.0), (40.0, 10.01), (40.0, 60.0), (1e-3, 5e-4), (1e6, 3.0)],
)
def test_oscillator_roots_are_the_characteristic_equations(ts, ti):
    """``models.oscillator_roots``: the roots of ``Ti l^2 + l + 1/Ts = 0`` (np.roots), the slow
    one first, to round-off, without cancellation; arrays give the same values element-wise."""
    from grpofit.laws.models import oscillator_roots

    slow, fast, under = oscillator_roots(ts, ti)
    ref = sorted(np.roots([ti, 1.0, 1.0 / ts]), key=lambda z: (-z.real, z.imag))
    assert under == (1.0 - 4.0 * ti / ts < 0)
    if ti == ts / 4:  # a repeated root: np.roots splits it by about its square-root round-off
        np.testing.assert_allclose([slow, fast], [-0.5 / ti, -0.5 / ti], rtol=1e-7)
    elif under:
        np.testing.assert_allclose(
            [slow, fast], [complex(ref[0].real, abs(ref[0].imag)), complex(ref[0].real, -abs(ref[0].imag))], rtol=1e-9
        )
    else:
        np.testing.assert_allclose([slow.real, fast.real], [ref[0].real, ref[1].real], rtol=1e-7)
        assert abs(ti * slow.real**2 + slow.real + 1.0 / ts) <= 1e-12 / ts  # no cancellation
    arr = oscillator_roots(np.array([ts, ts]), np.array([ti, ti]))
    np.testing.assert_allclose(arr[0], [slow, slow], rtol=1e-15)
    np.testing.assert_allclose(arr[1], [fast, fast], rtol=1e-15)
    assert list(arr[2]) == [under, under]
