"""grpofit.forecasting.lbfgsb drives scipy's compiled L-BFGS-B as scipy.optimize.minimize does:
the same evaluation points, the same result to the last bit."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from scipy.optimize import minimize as scipy_minimize

from grpofit.forecasting.lbfgsb import minimize

OPTIONS = {"maxiter": 40, "eps": 1e-5, "ftol": 1e-7}


def _both(f, x0, lo, hi, **options):
    """(points, x, fun) of ours and of scipy's on ``f``."""
    opts = dict(OPTIONS, **options)
    seen = {"ours": [], "scipy": []}

    def logged(name):
        def g(x):
            seen[name].append(np.array(x))
            return f(x)
        return g

    x, fun = minimize(logged("ours"), np.array(x0, dtype=float), np.array(lo, dtype=float),
                      np.array(hi, dtype=float), maxiter=opts["maxiter"], eps=opts["eps"], ftol=opts["ftol"])
    res = scipy_minimize(logged("scipy"), np.array(x0, dtype=float), method="L-BFGS-B",
                         bounds=list(zip(lo, hi)), options=opts)
    return seen, (x, fun), (res.x, res.fun)


def _same(seen, ours, theirs):
    assert len(seen["ours"]) == len(seen["scipy"]) > 3
    for a, b in zip(seen["ours"], seen["scipy"]):
        assert np.array_equal(a, b)
    assert np.array_equal(ours[0], theirs[0])
    assert ours[1] == theirs[1] or (math.isnan(ours[1]) and math.isnan(theirs[1]))


def rosen(x):
    return float(sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2))


@pytest.mark.slow
@pytest.mark.parametrize("x0, lo, hi, maxiter", [
    ([-1.2, 1.0, 0.5], [-2, -2, -2], [2, 2, 2], 40),  # interior minimum
    ([-1.2, 1.0, 0.5], [-2, -2, -2], [2, 0.5, 2], 40),  # a bound active at the minimum
    ([1.999999, -2.0, 0.0], [-2, -2, -2], [2, 2, 2], 40),  # the start on a bound: steps reversed
    ([-1.2, 1.0, 0.5], [-2, -2, -2], [2, 2, 2], 3),  # stopped by maxiter
    ([0.3, 0.1, -0.4], [0.2, -1e-6, -0.4], [0.2 + 2e-6, 1e-6, -0.4 + 3e-6], 40),  # boxes narrower than eps
])
def test_same_points_and_result_as_scipy(x0, lo, hi, maxiter):
    _same(*_both(rosen, x0, lo, hi, maxiter=maxiter))


def test_infinite_values_are_handled_as_scipy_does():
    def f(x):  # singular (inf) beyond a wall the search runs into
        return math.inf if x[0] + x[1] > 1.5 else float((x[0] - 2) ** 2 + (x[1] - 1) ** 2 + 0.1 * x[0] * x[1])

    _same(*_both(f, [0.0, 0.0], [-3, -3], [3, 3]))


@pytest.mark.slow
def test_a_likelihood_search_is_scipys():
    from grpofit.forecasting.likelihood import bounds_for, evaluate, reduce_series
    from grpofit.forecasting.walk import _nll, walk_bounds

    rng = np.random.default_rng(3)
    t = np.arange(200.0)
    y = 0.8 - 0.5 * np.exp(-t / 40.0) + 0.02 * rng.standard_normal(t.size)
    series = reduce_series(t, y, level_sd=0.5)
    lo, hi = bounds_for("oscillator", series, 600.0)
    _same(*_both(lambda th: evaluate("oscillator", th, series).reml, [math.log(40.0), math.log(4.0), math.log(0.3)],
                 lo, hi))
    qlo, qhi = walk_bounds(series)
    lo, hi = np.append(lo, qlo), np.append(hi, qhi)
    _same(*_both(lambda th: _nll("oscillator", th, series, levels=False)[0],
                 [math.log(40.0), math.log(4.0), math.log(0.3), 0.5 * (qlo + qhi)], lo, hi))


@pytest.mark.slow
@pytest.mark.subprocess
def test_forecast_imports_neither_scipy_optimize_nor_linalg():
    import subprocess

    code = ("import sys, numpy as np\n"
            "from grpofit.forecasting.engine import forecast_series\n"
            "t = np.arange(120.0); rng = np.random.default_rng(0)\n"
            "y = 0.8 - 0.5 * np.exp(-t / 30.0) + 0.02 * rng.standard_normal(t.size)\n"
            "fc = forecast_series(t, y, horizon_step=400)\n"
            "assert fc.doc['at'][0]['mean'] is not None\n"
            "print(sorted(m for m in sys.modules if m.startswith(('scipy.optimize', 'scipy.linalg'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # the two compiled modules alone (they register under their own names), not their packages
    assert set(eval(out)) <= {"scipy.linalg._flapack", "scipy.optimize._lbfgsb"}


@pytest.mark.slow
def test_another_scipy_version_uses_scipys_minimize(monkeypatch):
    import grpofit.forecasting.lbfgsb as lbfgsb

    monkeypatch.setattr(lbfgsb, "SCIPY_VERSIONS", ())
    assert lbfgsb._setulb() is None
    calls = []
    monkeypatch.setattr(lbfgsb, "_drive", lambda *a, **k: calls.append(1))
    _same(*_both(rosen, [-1.2, 1.0, 0.5], [-2, -2, -2], [2, 2, 2]))
    assert not calls
