"""Bounded minimisation: scipy's L-BFGS-B, imported when first needed, with the gradient by
forward differences taken here.

``scipy.optimize`` is imported here, inside :func:`minimize`, not when the package loads:
``grpofit --help`` and the commands that never maximise a likelihood do not pay for it (about
0.3 s). The gradient is the forward differences of absolute step ``eps`` that scipy takes when
given none (``approx_derivative``'s ``2-point`` scheme: the same steps, turned back at a bound,
and the same arithmetic, so the search takes the same path), computed by :func:`forward_gradient`
and handed to scipy with the value (``jac=True``): scipy's general finite-difference machinery
cost about as much per gradient as the likelihood's evaluations themselves.
"""

from __future__ import annotations

import numpy as np

__all__ = ["minimize", "forward_gradient", "preload"]

#: the relative step scipy falls back to when ``x + eps`` rounds back to ``x`` (``2-point``)
_FALLBACK = np.finfo(float).eps ** 0.5
_FALLBACK_F = float(_FALLBACK)


def forward_gradient(f, lo, hi, eps: float):
    """``x -> (f(x), gradient)``: forward differences of absolute step ``eps``, as scipy's
    ``approx_derivative(f, x, method="2-point", abs_step=eps, bounds=(lo, hi))`` takes them (a
    step that would leave the bounds goes the other way; one wider than the room on either side
    shrinks to the wider room). Where ``f`` has ``many`` (``thetas -> values`` at the rows, the
    compiled objective of :mod:`.filtered`) the ``1 + n`` points are evaluated in one call."""
    lo = np.asarray(lo, dtype=float)
    hi = np.asarray(hi, dtype=float)
    many = getattr(f, "many", None)
    lo_list, hi_list = lo.tolist(), hi.tolist()

    def fg(x):
        x = np.array(x, dtype=float)
        if many is not None:
            return _at_once(many, x, lo_list, hi_list, float(eps))
        f0 = f(x)
        h = np.full(x.shape, float(eps))
        sign = (x >= 0).astype(float) * 2 - 1
        h = np.where((x + h) - x == 0, _FALLBACK * sign * np.maximum(1.0, np.abs(x)), h)
        below, above = x - lo, hi - x
        fitting = np.abs(h) <= np.maximum(below, above)
        h[((x + h < lo) | (x + h > hi)) & fitting] *= -1
        up = (above >= below) & ~fitting
        h[up] = above[up]
        down = (above < below) & ~fitting
        h[down] = -below[down]
        g = np.empty(x.size)
        for i in range(x.size):
            x1 = x.copy()
            x1[i] = x[i] + h[i]
            g[i] = (f(x1) - f0) / ((x[i] + h[i]) - x[i])
        return f0, g

    return fg


def _at_once(many, x: np.ndarray, lo: list, hi: list, eps: float):
    """:func:`forward_gradient`'s ``(f(x), gradient)`` with the ``1 + n`` points evaluated by one
    call of ``many``: the same steps by the same operations, on Python floats (the search's
    vectors have a few entries, where numpy's per-call cost is most of the time)."""
    xs = x.tolist()
    hs = []
    for xi, lo_i, hi_i in zip(xs, lo, hi):
        h = eps
        if (xi + h) - xi == 0:
            h = _FALLBACK_F * (1.0 if xi >= 0 else -1.0) * max(1.0, abs(xi))
        below, above = xi - lo_i, hi_i - xi
        if abs(h) <= max(below, above):
            if xi + h < lo_i or xi + h > hi_i:
                h = -h
        elif above >= below:
            h = above
        else:
            h = -below
        hs.append(h)
    rows = [xs] + [xs[:i] + [xs[i] + hs[i]] + xs[i + 1 :] for i in range(len(xs))]
    values = many(np.array(rows)).tolist()
    f0 = values[0]
    return f0, np.array([(v - f0) / ((xi + h) - xi) for v, xi, h in zip(values[1:], xs, hs)])


def preload() -> None:
    """Import ``scipy.optimize`` now: a command about to fork ``--jobs`` workers that will all
    forecast calls this, and the workers inherit it instead of each importing it (about 0.4 s
    of CPU each)."""
    import scipy.optimize  # noqa: F401


def minimize(f, x0, lo, hi, *, maxiter: int, eps: float, ftol: float) -> tuple[np.ndarray, float]:
    """``(x, f(x))`` where ``scipy.optimize.minimize(f, x0, method="L-BFGS-B", bounds=...,
    options={"maxiter", "eps", "ftol"})`` stops (``res.x``, ``res.fun``), its gradient taken by
    :func:`forward_gradient`; the start is clipped into the bounds first."""
    from scipy.optimize import minimize as scipy_minimize

    lo = np.asarray(lo, dtype=float)
    hi = np.asarray(hi, dtype=float)
    x0 = np.minimum(np.maximum(np.atleast_1d(np.asarray(x0, dtype=float)).ravel(), lo), hi)  # np.clip
    res = scipy_minimize(
        forward_gradient(f, lo, hi, eps),
        x0,
        jac=True,
        method="L-BFGS-B",
        bounds=list(zip(lo.tolist(), hi.tolist())),
        options={"maxiter": maxiter, "ftol": ftol},
    )
    return res.x, float(res.fun)
