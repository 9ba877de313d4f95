"""grpofit's own compiled kernel, where it was built.

:func:`compiled_filter` is the extension built from ``grpofit/_filter.c`` when the package is
installed with a C compiler at hand. It is optional: without it the same arithmetic runs in
numpy (equal to round-off, ``tests/test_filter_kernel.py``).
"""

from __future__ import annotations

import functools

__all__ = ["compiled_filter", "PURE_ENV"]

#: set (to anything but "" or "0") to run the numpy code instead of grpofit's own compiled kernels
PURE_ENV = "GRPOFIT_PURE_PYTHON"


@functools.cache
def compiled_filter():
    """grpofit's compiled arithmetic (``grpofit/_filter.c``: the state-space intervals' columns,
    transitions, Kalman filter, levels and mixture quantiles, used by
    :mod:`grpofit.fitting.statespace_ci`; the least-squares fit's profile grid, oscillator
    Jacobian and rolling median, used by :mod:`grpofit.fitting.profile`,
    :mod:`grpofit.fitting.jacobians` and :mod:`grpofit.fitting.collapse`; the forecaster's walk
    likelihood), or ``None`` where it was not built (no C compiler at
    install time: the numpy code gives the same results to round-off, more slowly) or
    :data:`PURE_ENV` is set."""
    import os

    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return None
    try:
        from grpofit import _filter
    except ImportError:
        return None
    return _filter
