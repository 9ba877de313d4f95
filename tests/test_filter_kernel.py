"""The compiled Kalman filter (grpofit/_filter.c) against the numpy code it stands for.

Every case the fits below hand to the filter (one mode, the oscillator, two modes, binned
tails) is run through both and compared to round-off (:func:`_close`: the two may order or fuse
their floating-point operations differently, on any CPU and compiler)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grpofit.fitting import fit_series, statespace_ci
from grpofit.laws.registry import MODELS
from grpofit.runtime import compiled
from grpofit.testing.synthetic import forced_recovery_set

try:  # the built extension itself, whatever GRPOFIT_PURE_PYTHON says
    from grpofit import _filter as kernel
except ImportError:
    kernel = None
needs_kernel = pytest.mark.skipif(kernel is None, reason="grpofit._filter was not built (no C compiler)")


#: the compiled stages, by the statespace_ci function that chooses between kernel and numpy
STAGES = ("_columns", "_transitions", "_innovations", "_levels", "_mixture_interval")


@pytest.fixture(scope="module")
def calls():
    """The arguments of every call of each compiled stage made while fitting forced runs of each
    regime, two long enough (2,000 steps) that their tails are binned (one of them underdamped)
    and one short enough (30 steps) that the likelihood estimates the noise."""
    seen = {name: [] for name in STAGES}
    real = {name: getattr(statespace_ci, name) for name in STAGES}

    def recorder(name):
        def record(*args):
            seen[name].append(args)
            return real[name](*args)

        return record

    for name in STAGES:
        setattr(statespace_ci, name, recorder(name))
    try:
        for truth, table in forced_recovery_set(1, seed=7, levels=(0.0, 0.02)):
            fit_series(table["step"], table["reward"])
        rng = np.random.default_rng(3)
        t = np.arange(2000.0)
        y = 0.8 - 0.6 * np.exp(-t / 300.0) + 0.05 * rng.standard_normal(t.size)
        fit_series(t, y)
        y = 0.7 - 0.5 * np.exp(-t / 200.0) * np.cos(t / 60.0) + 0.02 * rng.standard_normal(t.size)
        fit_series(t, y)
        t = np.arange(30.0)  # short: every point as logged, the noise estimated
        fit_series(t, 0.8 - 0.6 * np.exp(-t / 8.0) + 0.03 * rng.standard_normal(t.size))
    finally:
        for name in STAGES:
            setattr(statespace_ci, name, real[name])
    return seen


@pytest.fixture(scope="module")
def cases(calls):
    return calls["_innovations"]


@pytest.mark.slow
def test_the_fits_exercise_every_kind_of_cell(cases, calls):
    modes = {args[2].modes for args in cases}
    assert modes == {1, 2}
    assert any(np.any(args[1] > 1) for args in cases), "no binned tail among the cases"
    assert any(np.any(args[2].ti > 0) for args in cases), "no oscillator cells among the cases"
    assert any(np.any(args[2].ti <= 0) for args in cases), "no one-mode cells among the cases"
    under = [np.any(args[3] > 0.25 * args[2]) for args in calls["_columns"]]  # 4 Ti > Ts
    binned = [np.any(args[1] > 1) for args in calls["_columns"]]
    assert any(u and b for u, b in zip(under, binned)), "no binned underdamped columns among the cases"
    assert any(u for u in under) and not all(under)
    assert {args[4] is None for args in calls["_levels"]} == {False, True}, "noise variance known and unknown"


#: relative tolerance between the kernel and the numpy code (round-off of a few hundred
#: operations per value; the fits' own tolerances are 1e-6 and looser)
RTOL = 1e-9


def _close(a, b) -> None:
    """``a`` equals ``b`` to :data:`RTOL` (or to ``RTOL`` of the largest value of its array, for
    entries that cancel to near zero), tuples element by element."""
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
        return
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape
    finite = b[np.isfinite(b)]
    scale = float(np.max(np.abs(finite))) if finite.size else 0.0
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=RTOL * scale)


@needs_kernel
@pytest.mark.parametrize("stage", [s for s in STAGES if s != "_innovations"])
def test_each_compiled_stage_gives_the_numpy_values(calls, stage, monkeypatch):
    assert len(calls[stage]) >= 7
    fn = getattr(statespace_ci, stage)
    for args in calls[stage]:
        monkeypatch.setattr(statespace_ci, "compiled_filter", lambda: kernel)
        ours = fn(*args)
        monkeypatch.setattr(statespace_ci, "compiled_filter", lambda: None)
        pure = fn(*args)
        _close(ours, pure)


@needs_kernel
def test_compiled_filter_gives_the_numpy_values(cases, monkeypatch):
    monkeypatch.setattr(statespace_ci, "compiled_filter", lambda: kernel)
    assert len(cases) >= 7  # one call or more per fit
    for args in cases:
        G, logdet = statespace_ci._innovations(*args)
        Zn, logdetn = statespace_ci._innovations_numpy(*args)
        Gn = statespace_ci._gram(Zn)
        assert G.shape == Gn.shape == (Zn.shape[1],) * 2 + (Zn.shape[2],) and logdet.shape == logdetn.shape
        _close(G, Gn)
        _close(logdet, logdetn)


def test_gram_is_the_sum_of_products():
    """The numpy reference of the filter's Gram matrix: sum_j Z[j, a] Z[j, b] per cell."""
    rng = np.random.default_rng(4)
    Z = rng.standard_normal((9, 3, 5)) * np.exp(5 * rng.standard_normal((9, 1, 1)))
    np.testing.assert_allclose(statespace_ci._gram(Z), np.einsum("jak,jbk->abk", Z, Z), rtol=1e-12)
    assert statespace_ci._gram(np.empty((0, 3, 2))).shape == (3, 3, 2)


def _small_case(S=2, n=5, K=3):
    rng = np.random.default_rng(0)
    args = [
        n,
        3,
        K,
        S,
        1,
        np.zeros(n - 1, dtype=np.int64),
        rng.random((7, S, K)),
        rng.random(n),
        rng.random((K, n, 2)),
        np.ones(n),
        np.ones(n),
        np.full(K, 10.0),
        np.full(K, 0.5),
        np.empty((3, 3, K)),
        np.empty(K),
    ]
    return args


@needs_kernel
def test_kernel_refuses_bad_sizes_and_steps():
    args = _small_case()
    kernel.innovations(*args)
    assert np.all(np.isfinite(args[-2])) and np.all(np.isfinite(args[-1]))
    wrong = list(args)
    wrong[7] = np.ones(4)  # y one point short
    with pytest.raises(ValueError, match="y: expected 5 items"):
        kernel.innovations(*wrong)
    wrong = list(args)
    wrong[5] = np.array([0, 1, 2, 0], dtype=np.int64)  # spacing 2 of 2
    with pytest.raises(ValueError, match="step_of out of range"):
        kernel.innovations(*wrong)
    wrong = list(args)
    wrong[1] = 4  # columns do not match one mode
    with pytest.raises(ValueError, match="bad sizes"):
        kernel.innovations(*wrong)
    wrong = list(args)
    wrong[5] = np.zeros(4)  # float64 steps: the same bytes, read as int64 they would be garbage
    with pytest.raises(ValueError, match="step_of: expected 4 items of int64"):
        kernel.innovations(*wrong)
    wrong = list(args)
    wrong[10] = np.ones(5, dtype=np.int64)  # int64 counts read as doubles
    with pytest.raises(ValueError, match="count: expected 5 items of float64"):
        kernel.innovations(*wrong)
    wrong = list(args)
    wrong[-2] = np.empty((3, 3, 3))[:, :, ::-1]  # not contiguous
    with pytest.raises((ValueError, BufferError)):
        kernel.innovations(*wrong)


@needs_kernel
def test_stage_kernels_refuse_bad_buffers():
    t, cnt, ts, ti = np.arange(5.0), np.ones(5), np.array([10.0, 20.0]), np.array([0.0, 2.0])
    out = np.empty((2, 5))
    kernel.columns(5, 2, t, cnt, 1.0, ts, ti, out)
    with pytest.raises(ValueError, match="out: expected 10 items"):
        kernel.columns(5, 2, t, cnt, 1.0, ts, ti, np.empty((2, 4)))
    with pytest.raises(ValueError, match="columns: bad sizes"):
        kernel.columns(0, 2, t, cnt, 1.0, ts, ti, out)
    FQ = np.empty((7, 1, 2))
    kernel.transitions(1, 2, np.ones(1), ts, ti, np.ones(2), FQ)
    with pytest.raises(ValueError, match="ti: expected 2 items of float64"):
        kernel.transitions(1, 2, np.ones(1), ts, ti.astype(np.int64), np.ones(2), FQ)
    G, q = np.ones((3, 3, 2)), np.ones(2, dtype=np.int64)
    res = [np.empty(2) for _ in range(5)]
    kernel.levels(3, 2, 5, -1.0, q, G, np.zeros(2), *res)
    with pytest.raises(ValueError, match="q: expected 2 items of int64"):
        kernel.levels(3, 2, 5, -1.0, q.astype(float), G, np.zeros(2), *res)
    with pytest.raises(ValueError, match="G: expected 18 items"):
        kernel.levels(3, 2, 5, -1.0, q, np.ones((5, 3, 2)), np.zeros(2), *res)
    with pytest.raises(ValueError, match="levels: bad sizes"):
        kernel.levels(5, 2, 5, -1.0, q, G, np.zeros(2), *res)
    with pytest.raises(ValueError, match="s: expected 2 items"):
        kernel.mixture(np.ones(2), np.ones(2), np.ones(3), 0.025, 0.975, -1.0, 1.0, 0.0, 0.0, 1e-6)
    lo, hi = kernel.mixture(np.array([1.0]), np.array([0.5]), np.array([0.1]), 0.025, 0.975, 0.0, 1.0, 0.3, 0.7, 1e-9)
    assert lo == pytest.approx(0.5 - 1.959964 * 0.1, abs=1e-6) and hi == pytest.approx(0.5 + 1.959964 * 0.1, abs=1e-6)


def test_pure_python_switch_selects_the_numpy_code(monkeypatch):
    compiled.compiled_filter.cache_clear()
    try:
        monkeypatch.setenv(compiled.PURE_ENV, "1")
        assert compiled.compiled_filter() is None
        compiled.compiled_filter.cache_clear()
        monkeypatch.setenv(compiled.PURE_ENV, "0")
        assert compiled.compiled_filter() is kernel  # None where it was not built
    finally:
        monkeypatch.delenv(compiled.PURE_ENV, raising=False)
        compiled.compiled_filter.cache_clear()


@needs_kernel
def test_fit_is_the_same_with_and_without_the_kernel(monkeypatch):
    truth, table = forced_recovery_set(1, seed=5, levels=(0.02,), regimes=("underdamped",))[0]
    monkeypatch.setattr(statespace_ci, "compiled_filter", lambda: kernel)
    ours = fit_series(table["step"], table["reward"])
    monkeypatch.setattr(statespace_ci, "compiled_filter", lambda: None)
    pure = fit_series(table["step"], table["reward"])
    for name in MODELS:  # every law fit fits
        a, b = ours.models[name], pure.models[name]
        assert a.params.keys() == b.params.keys()
        for key, par in a.params.items():
            other = b.params[key]
            assert par.note == other.note and (par.ci95 is None) == (other.ci95 is None), (name, key)
            pairs = [(par.value, other.value), (par.stderr, other.stderr), *zip(par.ci95 or (), other.ci95 or ())]
            for x, y in pairs:
                assert (x is None) == (y is None) and (x is None or x == pytest.approx(y, rel=1e-7, abs=1e-12)), (
                    name,
                    key,
                )


def test_no_cells_gives_empty_innovations():
    """A batch without cells gives empty arrays on either path (the kernel is not called)."""
    c = statespace_ci.Cells(np.empty(0), np.empty(0), np.empty(0), np.empty((0, 8, 2)), 1)
    G, logdet = statespace_ci._innovations(
        np.ones(8), np.ones(8), c, np.zeros(7, dtype=np.int64), np.empty((7, 1, 0)), np.zeros(8)
    )
    assert G.shape == (3, 3, 0) and logdet.shape == (0,)


def test_spacings_are_numpys_unique_with_inverse():
    """The filter's distinct spacings, found over Python floats, are np.unique's (sorted, with
    each step's index), repeated and uneven steps included."""
    rng = np.random.default_rng(8)
    for t in (
        np.arange(12.0),
        np.cumsum(rng.choice([1.0, 2.0, 0.5, 1e-9], 31)),
        np.concatenate([np.arange(10.0), 10.0 + 7.25 * np.arange(1, 23)]),
        np.array([3.0, 3.0, 5.0]),
    ):
        dts, step_of = statespace_ci._spacings(t)
        ref, inv = np.unique(np.diff(t), return_inverse=True)
        assert np.array_equal(dts, ref) and np.array_equal(step_of, inv) and step_of.dtype == np.int64


def test_log_determinant_is_the_log_of_the_product_and_falls_back_to_the_sum():
    """One logarithm per cell (the variances' product); a product out of the doubles' range
    (bins of 1e200 points: variances of 1e-200) takes the sum of the logarithms, on either
    path."""
    rng = np.random.default_rng(5)
    s = rng.random((6, 3)) + 0.5
    np.testing.assert_allclose(statespace_ci._log_product(s), np.log(s).sum(axis=0), rtol=1e-12)
    s[:, 1] = 1e-200
    got = statespace_ci._log_product(s)
    assert np.isfinite(got).all() and got[1] == pytest.approx(6 * math.log(1e-200), rel=1e-12)
    assert got[0] == pytest.approx(np.log(s[:, 0]).sum(), rel=1e-12)
    if kernel is None:
        return
    t, count = np.arange(6.0), np.full(6, 1e200)
    c = statespace_ci.Cells(
        np.array([10.0, 30.0]),
        np.zeros(2),
        np.array([1e-110, 1e-110]),
        np.stack([np.exp(-t / 10.0), np.zeros(6)], axis=1)[None].repeat(2, axis=0),
        1,
    )
    dts, step_of = statespace_ci._spacings(t)
    args = (np.linspace(0.1, 0.6, 6), count, c, step_of, statespace_ci._transitions(dts, c), np.zeros(6))
    ours = statespace_ci._innovations(*args)
    Z, logdet = statespace_ci._innovations_numpy(*args)
    _close(ours, (statespace_ci._gram(Z), logdet))
    assert np.all(np.isfinite(logdet)) and logdet == pytest.approx(6 * math.log(1e-200), rel=1e-9)


def test_grid_helpers_are_numpys():
    """The grids' own linspace and tile are numpy's (the denormal-step branch and equal ends
    included)."""
    rng = np.random.default_rng(6)
    cases = [(0.0, 1.0), (-3.0, 3.0), (2.5, 2.5), (1e-300, 1e-300 + 5e-324), (-1e-3, 7e5)]
    cases += [tuple(rng.normal(scale=10.0 ** rng.uniform(-4, 4), size=2)) for _ in range(200)]
    for a, b in cases:
        for num in (2, 3, 7):
            ours, ref = statespace_ci._grid(float(a), float(b), num), np.linspace(a, b, num)
            np.testing.assert_allclose(ours, ref, rtol=1e-15, atol=1e-15 * max(abs(a), abs(b))), (a, b, num)
    v = rng.random(5)
    assert np.array_equal(statespace_ci._tile(v, 4), np.tile(v, 4))


@needs_kernel
def test_sizes_whose_byte_count_overflows_are_refused():
    """K = 2**61 makes every K-long buffer's byte count 2**64, which wraps around to 0: empty
    buffers passed the size check and each kernel then ran over 2**61 cells (a segfault). Now
    a ValueError."""
    K, e, ei = 2**61, np.empty(0), np.empty(0, dtype=np.int64)
    with pytest.raises(ValueError, match="too large"):
        kernel.innovations(
            5, 3, K, 1, 1, np.zeros(4, dtype=np.int64), e, np.ones(5), e, np.ones(5), np.ones(5), e, e, e, e
        )
    with pytest.raises(ValueError, match="too large"):
        kernel.columns(5, K, np.arange(5.0), np.ones(5), 1.0, e, e, e)
    with pytest.raises(ValueError, match="too large"):
        kernel.transitions(1, K, np.ones(1), e, e, e, e)
    with pytest.raises(ValueError, match="too large"):
        kernel.levels(3, K, 5, -1.0, ei, e, e, e, e, e, e, e)
    with pytest.raises(ValueError, match="too large"):  # a product that wraps past 2**64
        kernel.transitions(2**62, 4, np.ones(1), np.ones(4), np.ones(4), np.ones(4), e)
