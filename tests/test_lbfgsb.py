"""grpofit.forecasting.lbfgsb is scipy's L-BFGS-B through its public API: bounded minima found,
the start clipped into the bounds, scipy imported only when a minimum is asked for."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from grpofit.forecasting.lbfgsb import minimize

OPTIONS = {"maxiter": 200, "eps": 1e-8, "ftol": 1e-12}


def rosen(x):
    return float(sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2))


@pytest.mark.parametrize(
    "hi, expected",
    [
        ([2, 2, 2], [1.0, 1.0, 1.0]),  # interior minimum
        ([2, 0.5, 2], [0.7071, 0.5, 0.2516]),  # the second coordinate held at its upper bound
    ],
)
def test_bounded_minimum_of_rosenbrock(hi, expected):
    x, fun = minimize(rosen, [-1.2, 1.0, 0.5], [-2, -2, -2], hi, **OPTIONS)
    assert np.all(x <= np.asarray(hi) + 1e-12)
    np.testing.assert_allclose(x, expected, atol=2e-3)
    assert fun == pytest.approx(rosen(x), rel=1e-12)


def test_start_outside_the_bounds_is_clipped():
    seen = []

    def f(x):
        seen.append(np.array(x))
        return float(np.sum((x - 0.3) ** 2))

    x, fun = minimize(f, [5.0, -5.0], [-1, -1], [1, 1], **OPTIONS)
    assert np.all(np.abs(seen[0]) <= 1.0)
    np.testing.assert_allclose(x, [0.3, 0.3], atol=1e-6)
    assert fun < 1e-10


def test_an_infinite_wall_is_avoided():
    def f(x):  # singular (inf) beyond a wall; the minimum is inside
        return math.inf if x[0] + x[1] > 1.5 else float((x[0] - 0.5) ** 2 + (x[1] - 0.2) ** 2)

    x, fun = minimize(f, [0.0, 0.0], [-3, -3], [3, 3], **OPTIONS)
    np.testing.assert_allclose(x, [0.5, 0.2], atol=1e-5)
    assert math.isfinite(fun)


def test_help_does_not_import_scipy():
    import subprocess

    code = "import sys\nfrom grpofit.cli import app\nprint(sorted(m for m in sys.modules if m.startswith('scipy')))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(out) == []


def test_forward_gradient_takes_scipys_steps():
    """Forward differences of step eps, a step that would leave the bounds turned back, the
    divisor the step as represented ((x + h) - x): the gradient of a known function to the
    differences' own error, and the step turned back at the upper bound."""
    from grpofit.forecasting.lbfgsb import forward_gradient

    seen = []

    def f(x):
        seen.append(np.array(x))
        return float(np.sum(np.sin(x) * np.arange(1, x.size + 1)))

    lo, hi = np.array([-1.0, -1.0, -1.0]), np.array([1.0, 1.0, 0.3 + 5e-7])
    x = np.array([0.2, -0.7, 0.3])
    f0, g = forward_gradient(f, lo, hi, 1e-6)(x)
    assert f0 == f(x)
    np.testing.assert_allclose(g, np.cos(x) * np.arange(1, 4), atol=1e-5)
    steps = [s - x for s in seen[1:4]]
    assert steps[0][0] > 0 and steps[1][1] > 0 and steps[2][2] < 0  # the last one turned back


def test_the_search_is_scipys_own_with_its_finite_differences():
    """The minimum and the path to it are those of scipy's L-BFGS-B left to take its own finite
    differences (the same steps, the same arithmetic): the same point to the last bits."""
    from scipy.optimize import minimize as scipy_minimize

    lo, hi = [-2, -2, -2], [2, 0.5, 2]
    x, fun = minimize(rosen, [-1.2, 1.0, 0.5], lo, hi, maxiter=40, eps=1e-5, ftol=1e-7)
    res = scipy_minimize(
        rosen,
        [-1.2, 1.0, 0.5],
        method="L-BFGS-B",
        bounds=list(zip(lo, hi)),
        options={"maxiter": 40, "eps": 1e-5, "ftol": 1e-7},
    )
    np.testing.assert_allclose(x, res.x, rtol=1e-12, atol=1e-14)
    assert fun == pytest.approx(res.fun, rel=1e-12)


def _with_many(f):
    """``f`` with ``many`` (values at the rows at once), as the compiled objective has it."""

    def g(x):
        return f(x)

    g.many = lambda rows: np.array([f(r) for r in np.asarray(rows)])
    return g


def test_points_at_once_give_the_same_search_and_hessian():
    """An objective that takes its points at once (``many``: the gradient's 1 + n points, the
    Laplace Hessian's) gives the same gradient, search and covariance to the bit as one taken a
    point at a time (the Hessian's points outside the bounds clipped)."""
    from grpofit.forecasting.lbfgsb import forward_gradient
    from grpofit.forecasting.likelihood import laplace_cov

    lo, hi = np.array([-2.0, -2.0, -2.0]), np.array([2.0, 0.5, 2.0])
    both = _with_many(rosen)
    for x in ([0.2, -0.7, 0.3], [1.9999999, 0.5, -2.0]):
        a = forward_gradient(rosen, lo, hi, 1e-5)(np.array(x))
        b = forward_gradient(both, lo, hi, 1e-5)(np.array(x))
        assert a[0] == b[0] and np.array_equal(a[1], b[1])
    xa, fa = minimize(rosen, [-1.2, 1.0, 0.5], lo, hi, maxiter=40, eps=1e-5, ftol=1e-7)
    xb, fb = minimize(both, [-1.2, 1.0, 0.5], lo, hi, maxiter=40, eps=1e-5, ftol=1e-7)
    assert np.array_equal(xa, xb) and fa == fb
    theta = np.array([0.4, 0.49, 1.99])  # steps of 0.02 leave the bounds: clipped
    assert np.array_equal(laplace_cov(rosen, theta, lo, hi), laplace_cov(both, theta, lo, hi))
