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
