"""The compiled Kalman filter (grpofit/_filter.c) against the numpy code it stands for.

The kernel claims the numpy path's bits under the reference numerics the tests pin
(grpofit/testing/numerics.py): every case the fits below hand to the filter (one mode, the
oscillator, two modes, binned tails) is run through both and compared bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from grpofit import compiled
from grpofit.fitting import fit_series, statespace_ci
from grpofit.testing.synthetic import forced_recovery_set

try:  # the built extension itself, whatever GRPOFIT_PURE_PYTHON says
    from grpofit import _filter as kernel
except ImportError:
    kernel = None
needs_kernel = pytest.mark.skipif(kernel is None, reason="grpofit._filter was not built (no C compiler)")


@pytest.fixture(scope="module")
def cases():
    """The arguments of every filter call made while fitting forced runs of each regime, one of
    them long enough (2,000 steps) that its tail is binned."""
    seen = []
    real = statespace_ci._innovations

    def record(*args):
        seen.append(args)
        return real(*args)

    statespace_ci._innovations = record
    try:
        for truth, table in forced_recovery_set(1, seed=7, levels=(0.0, 0.02)):
            fit_series(table["step"], table["reward"])
        rng = np.random.default_rng(3)
        t = np.arange(2000.0)
        y = 0.8 - 0.6 * np.exp(-t / 300.0) + 0.05 * rng.standard_normal(t.size)
        fit_series(t, y)
    finally:
        statespace_ci._innovations = real
    return seen


def test_the_fits_exercise_every_kind_of_cell(cases):
    modes = {args[2].modes for args in cases}
    assert modes == {1, 2}
    assert any(np.any(args[1] > 1) for args in cases), "no binned tail among the cases"
    assert any(np.any(args[2].ti > 0) for args in cases), "no oscillator cells among the cases"
    assert any(np.any(args[2].ti <= 0) for args in cases), "no one-mode cells among the cases"


@needs_kernel
def test_compiled_filter_gives_the_numpy_bits(cases, monkeypatch):
    monkeypatch.setattr(statespace_ci, "compiled_filter", lambda: kernel)
    assert len(cases) >= 7  # one call or more per fit
    for args in cases:
        Z, logdet = statespace_ci._innovations(*args)
        Zn, logdetn = statespace_ci._innovations_numpy(*args)
        assert Z.shape == Zn.shape and logdet.shape == logdetn.shape
        assert np.array_equal(Z.view(np.int64), Zn.view(np.int64))
        assert np.array_equal(logdet.view(np.int64), logdetn.view(np.int64))


def _small_case(S=2, n=5, K=3):
    rng = np.random.default_rng(0)
    args = [n, 3, K, S, 1, np.zeros(n - 1, dtype=np.int64), rng.random((7, S, K)), rng.random(n),
            rng.random((K, n, 2)), np.ones(n), np.ones(n), np.full(K, 10.0), np.full(K, 0.5),
            np.empty((n, 3, K)), np.empty(K)]
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
    wrong[-2] = np.empty((5, 3, 3))[:, :, ::-1]  # not contiguous
    with pytest.raises((ValueError, BufferError)):
        kernel.innovations(*wrong)


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
    for name in ("exponential", "oscillator"):
        a, b = ours.models[name], pure.models[name]
        assert a.params.keys() == b.params.keys()
        for key, par in a.params.items():
            assert par == b.params[key]


def test_no_cells_gives_empty_innovations():
    """A batch without cells gives empty arrays on either path (the kernel is not called)."""
    c = statespace_ci.Cells(np.empty(0), np.empty(0), np.empty(0), np.empty((0, 8, 2)), 1)
    Z, logdet = statespace_ci._innovations(np.ones(8), np.ones(8), c, np.zeros(7, dtype=np.int64),
                                           np.empty((7, 1, 0)), np.zeros(8))
    assert Z.shape == (8, 3, 0) and logdet.shape == (0,)
