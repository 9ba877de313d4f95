"""The one JSON-safe number coercion (:func:`grpofit.core.numbers.finite`) every document uses."""

from __future__ import annotations

import math

import numpy as np
import pytest

from grpofit.core.numbers import finite


@pytest.mark.parametrize(
    "x", [None, math.nan, math.inf, -math.inf, np.float64("nan"), "not a number", [1.0, 2.0], object()]
)
def test_unknown_values_become_none(x):
    assert finite(x) is None
    assert finite(x, whole=True) is None


def test_numbers_pass_as_floats_and_whole_ones_as_ints_on_request():
    assert finite(3) == 3.0 and isinstance(finite(3), float)
    assert finite(np.float32(0.5)) == 0.5 and type(finite(np.float32(0.5))) is float
    assert finite(np.int64(120), whole=True) == 120 and type(finite(np.int64(120), whole=True)) is int
    assert finite(2.5, whole=True) == 2.5
    assert finite("1e-6") == 1e-6  # a numeric string from a config


def test_the_modules_share_it():
    """The copies it replaced now are this one function (under their old local names)."""
    from grpofit.commands import backtest, compare
    from grpofit.dynamics import _common
    from grpofit.fitting import results
    from grpofit.forecasting import engine

    assert results.num is finite and engine._num is finite and backtest._num is finite
    assert _common._f is finite and compare._f is finite
    from grpofit.readers.inspect import _num as inspect_num
    from grpofit.watch.monitor import _num as monitor_num

    assert inspect_num(4.0) == 4 and type(inspect_num(4.0)) is int and inspect_num(math.inf) is None
    assert monitor_num(np.float64(7.0)) == 7 and monitor_num(None) is None
