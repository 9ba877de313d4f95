"""The two laws grpofit fits, as pure numpy functions, and a small registry of models.

Time ``t`` is in optimizer steps from the first logged step of the run (``t = step - step[0]``,
steps used as logged: every 5, every 10, resumed at 101 ...).

- :func:`exponential`: single-exponential saturation ``R(t) = p* - (p* - p0) exp(-t/T)``.
- :func:`oscillator`: the damped oscillator ``M e'' + C e' + K e = 0`` started at rest, in step
  units with damping normalised to one (``timescale = C/K``, ``inertia = M/C``).

Both come with analytic Jacobians with respect to their parameters (used by the fitter).
Each is described once as a :class:`CurveModel` (parameter names, bounds, deterministic
data-driven ``guess``, derived quantities, table titles, plot style); the registry of the laws
``fit`` fits, :data:`grpofit.laws.registry.MODELS`, lists them (``grpofit.laws.models.MODELS`` is the same
dict). Fitting, selection, the JSON, the tables and the plots read that registry: a new law is
one module with its ``CurveModel``, one row in :mod:`grpofit.laws.registry` and one test.

For lmfit users, :func:`lmfit_model` wraps a law as an ``lmfit.Model`` (same function,
bounds as parameter hints, the data-driven guess as ``Model.guess``) for lmfit's reports,
constraints and confidence intervals. grpofit's own fitter uses its numpy Levenberg-Marquardt
(:mod:`grpofit.fitting.lm`, MINPACK's rules) and imports scipy/lmfit only as fallbacks (see
:mod:`grpofit.fitting.solve`); all reach the same optimum.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

__all__ = [
    "exponential",
    "exponential_jacobian",
    "relaxation",
    "relaxation_derivatives",
    "relaxation_shape",
    "oscillator",
    "oscillator_jacobian",
    "damping_ratio",
    "regime_of",
    "CurveModel",
    "LEVELS",
    "EXPONENTIAL",
    "OSCILLATOR",
    "lmfit_model",
    "median",
    "oscillator_roots",
]


#: extreme but legitimate inputs (values or steps near 1e300, timescales near 1e-300) may
#: overflow to inf or give NaN in intermediate products: the fitter treats non-finite curves
#: as failed evaluations, so the model functions do not warn about them
def _huge_ok():
    return np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore")


# The ``raw_*`` functions are the same computations without a ``np.errstate`` of their own (it
# costs about as much as evaluating a curve of a hundred points): for the fitter, which runs
# inside one ``np.errstate(all="ignore")``. Everyone else calls the public functions.

# ---------------------------------------------------------------------------------------------
# exponential


def exponential(t, plateau, initial, timescale):
    """Single-exponential saturation.

    ``R(t) = p* - (p* - p0) * exp(-t / T)`` with ``p* = plateau``, ``p0 = initial``,
    ``T = timescale`` (steps, > 0).
    """
    t = np.asarray(t, dtype=float)
    with _huge_ok():
        return plateau - (plateau - initial) * np.exp(-t / timescale)


def exponential_jacobian(t, plateau, initial, timescale):
    """Columns ``dR/d(plateau, initial, timescale)`` of :func:`exponential`, shape ``(n, 3)``.

    ``dR/dp* = 1 - E``, ``dR/dp0 = E``, ``dR/dT = -(p* - p0) E t / T^2`` with ``E = exp(-t/T)``.
    """
    with _huge_ok():
        return raw_exponential_jacobian(t, plateau, initial, timescale)


def raw_exponential_jacobian(t, plateau, initial, timescale):
    """:func:`exponential_jacobian` without its ``np.errstate`` (see the ``raw_`` note)."""
    t = np.asarray(t, dtype=float)
    x = t / timescale
    jac = np.empty((3, t.size))  # filled by rows, returned as the (n, 3) view
    e = _exp_neg(np.negative(x, out=jac[1]))
    np.subtract(1.0, e, out=jac[0])
    np.multiply(e, x, out=jac[2])
    jac[2] *= -(plateau - initial) / timescale
    return jac.T


# ---------------------------------------------------------------------------------------------
# damped oscillator

#: use the two-real-time form when ``u = sqrt(1 - 4 inertia/timescale) >= _U_SWITCH``
_U_SWITCH = 0.3
#: series for the entire functions of ``z = b^2 t^2`` when ``|z| < _Z_SERIES``
_Z_SERIES = 0.05
_N_SERIES = 6


def _factorial(n: int) -> float:
    out = 1.0
    for i in range(2, n + 1):
        out *= i
    return out


_C_COEF = np.array([1.0 / _factorial(2 * k) for k in range(_N_SERIES)])
_S_COEF = np.array([1.0 / _factorial(2 * k + 1) for k in range(_N_SERIES)])
_SP_COEF = np.array([(k + 1) / _factorial(2 * k + 3) for k in range(_N_SERIES)])
_SERIES = np.stack([_C_COEF, _S_COEF, _SP_COEF])
_SERIES_T = np.ascontiguousarray(_SERIES.T)
_POWERS = np.arange(_N_SERIES, dtype=float)


def oscillator_roots(timescale, inertia, *, apart: float = 0.0):
    """The roots of the damped oscillator's characteristic equation ``Ti l^2 + l + 1/Ts = 0``
    (its modes decay as ``exp(l t)``): ``(slow, fast, under)``, complex. The fast root is
    ``(-1 - sqrt(1 - 4 Ti/Ts)) / (2 Ti)`` and the slow one ``1 / (Ts Ti fast)`` (the product of
    the roots), so neither loses digits to cancellation. Overdamped (``1 - 4 Ti/Ts >= 0``,
    ``under`` False) both are real (``-1/T1`` and ``-1/T2``); underdamped they are the pair
    ``-1/(2 Ti) +- i w`` (``w`` the angular frequency). ``apart``: a repeated root
    (``|1 - 4 Ti/Ts| < apart``) is nudged apart to ``+-apart`` (for formulas with a 0/0 form
    there). Scalars give scalars, arrays arrays; ``Ti > 0``.

    The one place the roots are computed: the forecaster's state-space forms
    (:mod:`grpofit.forecasting.statespace`), the fit's state-space intervals
    (:mod:`grpofit.fitting.statespace_ci`) and the predictive draws' slowest decay use it."""
    if np.ndim(timescale) == 0 and np.ndim(inertia) == 0:
        ts, ti = float(timescale), float(inertia)
        disc = 1.0 - 4.0 * ti / ts
        if abs(disc) < apart:
            disc = apart if disc >= 0 else -apart
        root = np.sqrt(complex(disc))
        fast = (-1.0 - root) / (2.0 * ti)
        return 1.0 / (ts * ti * fast), fast, disc < 0
    ts = np.asarray(timescale, dtype=float)
    ti = np.asarray(inertia, dtype=float)
    with _huge_ok():
        disc = 1.0 - 4.0 * ti / ts
        if apart:
            disc = np.where(np.abs(disc) < apart, np.where(disc >= 0, apart, -apart), disc)
        fast = (-1.0 - np.sqrt(disc.astype(complex))) / (2.0 * ti)
        return 1.0 / (ts * ti * fast), fast, disc < 0


def relaxation(t, timescale, inertia):
    """Unit response ``g(t) = e(t) / e(0)`` of the oscillator started at rest.

    ``Ti Ts g'' + Ts g' + g = 0``, ``g(0) = 1``, ``g'(0) = 0`` with ``Ts = timescale``,
    ``Ti = inertia``; ``a = 1/(2 Ti)``, ``w0^2 = 1/(Ti Ts)``, ``b^2 = a^2 - w0^2``:

        g(t) = exp(-a t) * (cosh(b t) + (a / b) sinh(b t))

    one analytic function of ``b^2`` (``cos``/``sin`` when ``b^2 < 0``, ``1 + a t`` at
    ``b = 0``). Evaluated without overflow or cancellation in every regime: the overdamped
    branch as ``(T1 exp(-t/T1) - T2 exp(-t/T2)) / (T1 - T2)`` with ``T1,2 = Ts (1 -+ u)/2``,
    ``u = sqrt(1 - 4 Ti/Ts)`` (exact exponential ``exp(-t/Ts)`` at ``Ti = 0``), the rest through
    power series of ``cosh(sqrt z)`` and ``sinh(sqrt z)/sqrt z`` in ``z = b^2 t^2`` near zero.
    Parameters broadcast against ``t``.
    """
    return relaxation_derivatives(t, timescale, inertia, derivatives=False)[0]


def relaxation_derivatives(t, timescale, inertia, *, derivatives: bool = True):
    """``(g, dg/dtimescale, dg/dinertia)`` of :func:`relaxation` (``None``s if not asked).

    Overdamped branch: ``dg/dT1 = (f'(T1) - g)/(T1 - T2)``, ``dg/dT2 = (g - f'(T2))/(T1 - T2)``
    with ``f(x) = x exp(-t/x)``, ``f'(x) = exp(-t/x)(1 + t/x)``, and ``T1 + T2 = Ts``,
    ``T1 T2 = Ti Ts``. Other branch: ``g = exp(-at)(C(z) + a t S(z))``, ``C = cosh sqrt z``,
    ``S = sinh sqrt z / sqrt z``, ``dg/da = t (e^{-at} S - g)``,
    ``dg/d(b^2) = t^2 e^{-at} (S/2 + a t S')``, chained through ``a = 1/(2 Ti)``,
    ``b^2 = a^2 - 1/(Ti Ts)``.

    Scalar parameters are the fast path; parameter arrays broadcast against ``t``.
    """
    with _huge_ok():
        return raw_relaxation_derivatives(t, timescale, inertia, derivatives=derivatives)


def raw_relaxation_derivatives(t, timescale, inertia, *, derivatives: bool = True):
    """:func:`relaxation_derivatives` without its ``np.errstate`` (see the ``raw_`` note)."""
    t = np.asarray(t, dtype=float)
    if (isinstance(timescale, float) and isinstance(inertia, float)) or (
        np.ndim(timescale) == 0 and np.ndim(inertia) == 0
    ):
        ts, ti = float(timescale), max(float(inertia), 0.0)
        disc = 1.0 - 4.0 * ti / ts
        fn = _overdamped if disc >= _U_SWITCH**2 else _near_critical
        return fn(t, ts, ti, disc, derivatives)
    t, ts, ti = np.broadcast_arrays(
        t, np.asarray(timescale, dtype=float), np.maximum(np.asarray(inertia, dtype=float), 0.0)
    )
    shape = t.shape
    t, ts, ti = t.ravel(), ts.ravel(), ti.ravel()
    disc = 1.0 - 4.0 * ti / ts  # u^2 = 1 - 1/zeta^2
    over = disc >= _U_SWITCH**2
    g = np.empty(t.size)
    d_ts = np.empty(t.size) if derivatives else None
    d_ti = np.empty(t.size) if derivatives else None
    for mask, fn in ((over, _overdamped), (~over, _near_critical)):
        if not mask.any():
            continue
        out = fn(t[mask], ts[mask], ti[mask], disc[mask], derivatives)
        g[mask] = out[0]
        if derivatives:
            d_ts[mask] = out[1]
            d_ti[mask] = out[2]
    if derivatives:
        return g.reshape(shape), d_ts.reshape(shape), d_ti.reshape(shape)
    return g.reshape(shape), None, None


def _overdamped(t, ts, ti, disc, derivatives):
    u = np.sqrt(disc)
    t1 = 0.5 * ts * (1.0 + u)
    t2 = 2.0 * ti / (1.0 + u)  # = ts (1 - u) / 2 without cancellation; 0 when inertia = 0
    d = ts * u  # T1 - T2
    x1 = t / t1
    e1 = _exp_neg(-x1)
    x2 = np.minimum(t / np.maximum(t2, 1e-300), -_EXP_FLOOR)  # see _EXP_FLOOR
    e2 = np.exp(-x2)
    g = (t1 * e1 - t2 * e2) / d
    if not derivatives:
        return g, None, None
    fp1 = e1 * (1.0 + x1)
    fp2 = e2 * (1.0 + x2)  # -> 0 as t/T2 -> inf
    dg1 = (fp1 - g) / d
    dg2 = (g - fp2) / d
    d_ts = (dg1 * (t1 - ti) + dg2 * (ti - t2)) / d
    d_ti = (dg2 - dg1) / u
    return g, d_ts, d_ti


def _near_critical(t, ts, ti, disc, derivatives):
    a = 0.5 / ti
    beta = a * a * disc  # b^2
    if np.ndim(a) == 0:
        # scalar parameters: one sign of b^2; series where |z| is small, closed form elsewhere
        z = beta * t * t
        small = np.abs(z) < _Z_SERIES
        if _all(small):
            return _nc_series(t, a, z, ts, derivatives)
        out = _nc_closed(t, a, beta, z, ts, derivatives)
        if _any(small):
            ser = _nc_series(t[small], a, z[small], ts, derivatives)
            for full, part in zip(out, ser):
                if full is not None:
                    full[small] = part
        return out
    t, a, beta, ts = np.broadcast_arrays(t, a, beta, ts)
    z = beta * t * t
    small = np.abs(z) < _Z_SERIES
    g = np.empty(t.shape)
    d_ts = np.empty(t.shape) if derivatives else None
    d_ti = np.empty(t.shape) if derivatives else None
    for mask, closed in ((small, False), (~small, True)):
        if not mask.any():
            continue
        if closed:
            out = _nc_closed(t[mask], a[mask], beta[mask], z[mask], ts[mask], derivatives)
        else:
            out = _nc_series(t[mask], a[mask], z[mask], ts[mask], derivatives)
        g[mask] = out[0]
        if derivatives:
            d_ts[mask], d_ti[mask] = out[1], out[2]
    return g, d_ts, d_ti


def _nc_finish(t, a, ts, ec, es, esp, derivatives):
    g = ec + a * t * es
    if not derivatives:
        return g, None, None
    dg_da = t * (es - g)
    dg_db2 = t * t * (0.5 * es + a * t * esp)
    d_ti = dg_da * (-2.0 * a * a) + dg_db2 * (4.0 * a * a * (1.0 / ts - a))
    d_ts = dg_db2 * (2.0 * a / ts / ts)
    return g, d_ts, d_ti


def _nc_series(t, a, z, ts, derivatives):
    # C, S, S' at once: powers of z (|z| < _Z_SERIES) times the coefficient table
    acc = np.power.outer(z, _POWERS) @ _SERIES_T
    e = np.exp(-a * t)
    return _nc_finish(t, a, ts, e * acc[..., 0], e * acc[..., 1], e * acc[..., 2] if derivatives else None, derivatives)


def _nc_closed(t, a, beta, z, ts, derivatives):
    x = np.sqrt(np.abs(z))
    if np.ndim(beta) == 0 and beta > 0:
        pos = None
    else:
        pos = z > 0
    if pos is None:  # all overdamped-side: exp(-(a -+ b) t), never cosh * exp separately
        b = np.sqrt(beta)
        ep = np.exp(-(a - b) * t)
        em = np.exp(-(a + b) * t)
        ec = 0.5 * (ep + em)
        es = 0.5 * (ep - em) / x
    elif not _any(pos):  # all underdamped-side
        e = np.exp(-a * t)
        ec = e * np.cos(x)
        es = e * np.sin(x) / x
    else:
        b = np.sqrt(np.abs(beta))
        ep = np.exp(-(a - b) * t)
        em = np.exp(-(a + b) * t)
        e = np.exp(-a * t)
        ec = np.where(pos, 0.5 * (ep + em), e * np.cos(x))
        es = np.where(pos, 0.5 * (ep - em), e * np.sin(x)) / x
    esp = (ec - es) / (2.0 * z) if derivatives else None
    return _nc_finish(t, a, ts, ec, es, esp, derivatives)


def relaxation_shape(x, zeta):
    """:func:`relaxation` in units of the timescale, ``g(x; zeta)`` with ``x = t / Ts``.

    With ``inertia = Ts / (4 zeta^2)`` the response depends on ``t`` only through ``x``:

    - ``zeta > 1``: ``(T1 exp(-x/T1) - T2 exp(-x/T2)) / u`` with ``u = sqrt(1 - 1/zeta^2)``,
      ``T1 = (1 + u)/2``, ``T2 = 1 / (2 zeta^2 (1 + u))`` (no cancellation);
    - ``zeta < 1``: ``exp(-a x) (cos(w x) + (a/w) sin(w x))``, ``a = 2 zeta^2``,
      ``w = 2 zeta sqrt(1 - zeta^2)``;
    - ``zeta = inf`` (inertia 0): ``exp(-x)``.

    ``zeta`` within ``1e-7`` of one is moved to ``1 -+ 1e-7`` (the curve changes by ``< 1e-7``
    of the gain; the cancellation error stays ``< 1e-12``). ``zeta`` has one value per leading row of ``x``: shapes ``(R,)`` and
    ``(R, ...)``. Vectorised over the whole array (the fitter's grid and profile use it).
    """
    with _huge_ok():
        return raw_relaxation_shape(x, zeta)


def raw_relaxation_shape(x, zeta):
    """:func:`relaxation_shape` without its ``np.errstate`` (see the ``raw_`` note)."""
    x = np.asarray(x, dtype=float)
    zeta = np.asarray(zeta, dtype=float).reshape(-1)
    out = np.empty(x.shape)
    for i0, i1, k, coef in _shape_plan(zeta, x.ndim):
        xs, os_ = x[i0:i1], out[i0:i1]
        if k == 2:
            _exp_neg(np.negative(xs, out=os_), os_)
        elif k == 0:
            w, aw, neg_a = coef
            wx = w * xs
            c = np.cos(wx)
            sn = np.sin(wx, out=wx)
            sn *= aw
            c += sn
            e = _exp_neg(np.multiply(neg_a, xs))
            np.multiply(e, c, out=os_)
        else:
            c1, g1, c2, g2 = coef
            e1 = _exp_neg(np.multiply(xs, c1))
            e1 *= g1
            e2 = _exp_neg(np.multiply(xs, c2))
            e2 *= g2
            np.subtract(e1, e2, out=os_)
    return out


#: exponents are floored here before ``exp``: ``exp(-700) ~ 1e-304`` is still a normal double,
#: while results that underflow take libm's slow path (~4x the time of a normal ``exp``); the
#: curves change by less than ``1e-304``
_EXP_FLOOR = -700.0


def _any(mask: np.ndarray) -> bool:
    """``mask.any()`` as one ufunc reduction (the method goes through a Python wrapper)."""
    return bool(np.logical_or.reduce(mask, axis=None))


def _all(mask: np.ndarray) -> bool:
    """``mask.all()`` as one ufunc reduction."""
    return bool(np.logical_and.reduce(mask, axis=None))


def _exp_neg(e: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``exp(max(e, -700))`` computed in place in ``e`` (or into ``out``)."""
    np.maximum(e, _EXP_FLOOR, out=e)
    return np.exp(e, out=e if out is None else out)


#: per-row coefficients of :func:`relaxation_shape` by damping-ratio vector (the profile grid
#: repeats the same one several times per fit); bounded, cleared when full
_PLANS: dict = {}
_PLANS_MAX = 64


def _shape_plan(zeta: np.ndarray, ndim: int) -> list:
    """``[(i0, i1, kind, coefficients)]``: runs of rows of one kind (0 underdamped, 1
    overdamped, 2 inertia 0; the grid is sorted: three runs) with the coefficients of
    :func:`relaxation_shape` shaped ``(rows, 1, ...)`` to broadcast against ``x[i0:i1]``."""
    key = (zeta.tobytes(), ndim)
    plan = _PLANS.get(key)
    if plan is not None:
        return plan
    z = np.where(np.abs(zeta - 1.0) < 1e-7, np.where(zeta < 1.0, 1.0 - 1e-7, 1.0 + 1e-7), zeta)
    extra = (1,) * (ndim - 1)
    kind = np.where(np.isinf(z), 2, np.where(z < 1.0, 0, 1))
    cuts = np.flatnonzero(kind[1:] != kind[:-1]) + 1
    edges = [0, *cuts.tolist(), z.size]
    plan = []
    for i0, i1 in zip(edges[:-1], edges[1:]):
        k = int(kind[i0])
        if k == 2:
            plan.append((i0, i1, k, None))
            continue
        zs = z[i0:i1].reshape(-1, *extra)
        if k == 0:
            a = 2.0 * zs * zs
            w = 2.0 * zs * np.sqrt(1.0 - zs * zs)
            plan.append((i0, i1, k, (w, a / w, -a)))
        else:
            u = np.sqrt(1.0 - 1.0 / (zs * zs))
            t1 = 0.5 * (1.0 + u)
            t2 = 1.0 / (2.0 * zs * zs * (1.0 + u))
            plan.append((i0, i1, k, (-1.0 / t1, t1 / u, -1.0 / t2, t2 / u)))
    if len(_PLANS) >= _PLANS_MAX:
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


def oscillator(t, plateau, initial, timescale, inertia):
    """Damped oscillator started at rest, in step units with damping normalised to one.

    ``R(t) = p* + (p0 - p*) g(t)``, ``g`` = :func:`relaxation`: the solution of
    ``M e'' + C e' + K e = 0``, ``e = R - p*``, ``e(0) = p0 - p*``, ``e'(0) = 0``, with
    ``timescale Ts = C/K`` and ``inertia Ti = M/C`` (so ``a = 1/(2 Ti)``,
    ``w0^2 = 1/(Ti Ts)``, ``damping_ratio = 0.5 sqrt(Ts/Ti)``). ``inertia = 0`` is exactly the
    exponential with ``T = Ts``.
    """
    with _huge_ok():
        g = raw_relaxation_derivatives(t, timescale, inertia, derivatives=False)[0]
        return plateau + (initial - plateau) * g


def oscillator_jacobian(t, plateau, initial, timescale, inertia):
    """Columns ``dR/d(plateau, initial, timescale, inertia)`` of :func:`oscillator`, ``(n, 4)``.

    ``dR/dp* = 1 - g``, ``dR/dp0 = g``, ``dR/dTs = (p0 - p*) dg/dTs``,
    ``dR/dTi = (p0 - p*) dg/dTi`` (see :func:`relaxation_derivatives`).
    """
    with _huge_ok():
        return raw_oscillator_jacobian(t, plateau, initial, timescale, inertia)


def raw_oscillator_jacobian(t, plateau, initial, timescale, inertia):
    """:func:`oscillator_jacobian` without its ``np.errstate`` (see the ``raw_`` note)."""
    t = np.asarray(t, dtype=float)
    g, d_ts, d_ti = raw_relaxation_derivatives(t, timescale, inertia)
    gain = initial - plateau
    jac = np.empty((4, t.size))  # filled by rows, returned as the (n, 4) view
    np.subtract(1.0, g, out=jac[0])
    jac[1] = g
    np.multiply(d_ts, gain, out=jac[2])
    np.multiply(d_ti, gain, out=jac[3])
    return jac.T


def damping_ratio(timescale, inertia):
    """``zeta = C / (2 sqrt(M K)) = 0.5 * sqrt(timescale / inertia)`` (``inf`` at inertia 0)."""
    ts = np.asarray(timescale, dtype=float)
    ti = np.asarray(inertia, dtype=float)
    with np.errstate(divide="ignore"):
        out = 0.5 * np.sqrt(ts / ti)
    return float(out) if out.ndim == 0 else out


def regime_of(zeta: float) -> str:
    """Point regime of a damping ratio: ``overdamped`` (> 1), ``critical`` (= 1), ``underdamped``."""
    if zeta > 1.0:
        return "overdamped"
    if zeta < 1.0:
        return "underdamped"
    return "critical"


# ---------------------------------------------------------------------------------------------
# data-driven guesses


def median(a, overwrite: bool = False) -> float:
    """``np.median`` of a 1-D array of finite values, through ``np.partition`` (several times
    cheaper for the small arrays of a fit; constant arrays, e.g. a fixed logging interval,
    return at once). NaN for an empty array. ``overwrite``: ``a`` is scratch and may be
    reordered in place (no copy of a long one)."""
    a = np.asarray(a, dtype=float).ravel()
    n = a.size
    if n == 0:
        return float("nan")
    # ufunc reductions and the in-place partition: the ndarray/np.* wrappers add Python calls
    lo = np.minimum.reduce(a)
    if lo == np.maximum.reduce(a):
        return float(lo)
    k = n // 2
    p = a if overwrite else a.copy()
    if n % 2:
        p.partition(k)
        return float(p[k])
    p.partition((k - 1, k))
    return 0.5 * float(p[k - 1]) + 0.5 * float(p[k])  # no overflow near the double limit


#: points per block of :func:`_smooth`'s index arithmetic (a long run holds no point-long index arrays)
_SMOOTH_BLOCK = 1 << 18


def _smooth(y: np.ndarray) -> np.ndarray:
    """Centered running mean over ``max(1, n // 25)`` points on each side (edges shrink)."""
    n = y.size
    h = max(1, n // 25)
    c = np.empty(n + 1)
    c[0] = 0.0
    np.cumsum(y, out=c[1:])
    out = np.empty(n)
    for a in range(0, n, _SMOOTH_BLOCK):
        i = np.arange(a, min(n, a + _SMOOTH_BLOCK))
        lo = np.maximum(i - h, 0)
        hi = np.minimum(i + h + 1, n)
        out[a : a + i.size] = (c[hi] - c[lo]) / (hi - lo)
    return out


def _level_ends(y: np.ndarray) -> tuple[float, float]:
    """``(head, tail)``: median of the first ``max(3, n/30)`` points, mean of the last 20%."""
    n = y.size
    k_head = min(n, max(3, n // 30))
    k_tail = min(n, max(3, n // 5))
    return median(y[:k_head]), float(np.mean(y[-k_tail:]))


def _crossing(t: np.ndarray, ys: np.ndarray, level: float, rising: bool) -> float | None:
    """First time the smoothed series reaches ``level`` (linear interpolation)."""
    hit = ys >= level if rising else ys <= level
    i = int(np.argmax(hit)) if hit.size else 0  # the first hit (no point-long index array)
    if not hit.size or not hit[i]:
        return None
    if i == 0:
        return float(t[0])
    y0, y1 = ys[i - 1], ys[i]
    frac = 0.0 if y1 == y0 else (level - y0) / (y1 - y0)
    return float(t[i - 1] + frac * (t[i] - t[i - 1]))


def _span(t: np.ndarray) -> float:
    return float(t[-1] - t[0]) if t.size > 1 else 1.0


def guess_exponential(t: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Plateau from the tail mean, initial from the head, ``T = t_half / ln 2`` from the
    first crossing of the half-rise level by the smoothed series."""
    p0, pst = _level_ends(y)
    span = max(_span(t), 1e-12)
    ys = _smooth(y)
    t_half = _crossing(t, ys, 0.5 * (p0 + pst), rising=pst >= p0)
    tau = (t_half / np.log(2.0)) if t_half and t_half > 0 else 0.2 * span
    return {"plateau": pst, "initial": p0, "timescale": float(np.clip(tau, 1e-3 * span, span))}


def guess_oscillator(t: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Deterministic guess for the oscillator.

    Overdamped shape: a delayed exponential ``exp(-(t - d)/T1)``; ``T1 = (t50 - t10)/ln(9/5)``
    from the 10% and 50% crossings, the slow-start delay ``d = t10 - T1 ln(10/9)`` is the
    inertia, ``timescale = T1 + inertia``. If the smoothed series overshoots the tail level
    by more than 5% of the rise, the overshoot fraction ``OS`` gives
    ``zeta = -ln OS / sqrt(pi^2 + ln^2 OS)`` and the peak time ``t_p = pi / w_d`` the rest.
    """
    p0, pst = _level_ends(y)
    span = max(_span(t), 1e-12)
    ys = _smooth(y)
    gain = pst - p0
    rising = gain >= 0
    base = guess_exponential(t, y)
    if abs(gain) <= 0:
        return {**base, "inertia": 0.0}
    t10 = _crossing(t, ys, p0 + 0.1 * gain, rising)
    t50 = _crossing(t, ys, p0 + 0.5 * gain, rising)
    ts, ti = base["timescale"], 0.0
    if t10 is not None and t50 is not None and t50 > t10:
        t1 = (t50 - t10) / np.log(1.8)
        ti = max(0.0, t10 - t1 * np.log(10.0 / 9.0))
        ts = t1 + ti
    # overshoot
    k = int(np.argmax(ys) if rising else np.argmin(ys))
    over = (ys[k] - pst) / gain
    if 0.05 < over < 0.95 and 0 < k < ys.size - 1 and t[k] > 0:
        lo = np.log(over)
        zeta = -lo / np.sqrt(np.pi**2 + lo * lo)
        a = np.pi / (t[k] * np.sqrt(1.0 / zeta**2 - 1.0))
        ti = 0.5 / a
        ts = 4.0 * zeta**2 * ti
    ts = float(np.clip(ts, 1e-3 * span, span))
    ti = float(np.clip(ti, 0.0, span))
    return {"plateau": pst, "initial": p0, "timescale": ts, "inertia": ti}


# ---------------------------------------------------------------------------------------------
# bounds

#: the plateau and initial value stay within this many data ranges of the observed range
LEVEL_MARGIN = 1.0
#: timescale and inertia stay below this many run spans
TIME_MARGIN = 10.0


def level_bounds(y: np.ndarray) -> tuple[float, float]:
    """``[min - m, max + m]`` with ``m = LEVEL_MARGIN * range`` (a tiny floor if constant)."""
    lo, hi = float(np.min(y)), float(np.max(y))
    m = LEVEL_MARGIN * (hi - lo)
    if m <= 0:
        m = max(1e-9, 1e-6 * abs(hi))
    return lo - m, hi + m


def time_bounds(t: np.ndarray) -> tuple[float, float]:
    """``(min, max)`` for the timescale: a tenth of the median spacing .. ``TIME_MARGIN`` spans."""
    span = max(_span(t), 1e-12)
    dt = median(np.diff(t)) if t.size > 1 else 1.0
    return max(0.1 * dt, 1e-9 * span), TIME_MARGIN * span


def _bounds_exponential(t, y):
    lv = level_bounds(y)
    return {"plateau": lv, "initial": lv, "timescale": time_bounds(t)}


def _bounds_oscillator(t, y):
    lv = level_bounds(y)
    tb = time_bounds(t)
    return {"plateau": lv, "initial": lv, "timescale": tb, "inertia": (0.0, tb[1])}


# ---------------------------------------------------------------------------------------------
# registry


#: the two levels every law has: ``plateau`` (p*, the contract's plateau) and ``initial`` (p0);
#: they are rescaled with the values, never with the steps, and stay identifiable without a rise
LEVELS = ("plateau", "initial")


@dataclass(frozen=True)
class CurveModel:
    """One law: its function, Jacobian, parameter names, bounds, guess and derived quantities.

    Every law has the two :data:`LEVELS` among its parameters. ``time_params`` are the
    parameters in steps (rescaled with the steps; their intervals widened to the logging
    interval); ``derived_names`` are the keys ``derived`` returns (reported after the
    parameters); ``reports_regime`` makes the fit report a regime (the oscillator's damping
    ratio); ``statespace_law`` names the forecaster's law
    (:data:`grpofit.forecasting.statespace.LAWS`) whose likelihood gives the plateau and
    timescale intervals (``None``: the least-squares HAC intervals only); ``titles`` are the
    table rows of its parameters and ``style`` its line in the plots (matplotlib keywords).
    """

    name: str
    func: Callable[..., np.ndarray]
    jacobian: Callable[..., np.ndarray]
    param_names: tuple[str, ...]
    bounds: Callable[[np.ndarray, np.ndarray], dict[str, tuple[float, float]]]
    guess: Callable[[np.ndarray, np.ndarray], dict[str, float]]
    derived: Callable[[dict[str, float]], dict[str, float]] = field(default=lambda p: {})
    formula: str = ""
    #: ``jacobian`` without its own ``np.errstate``, for the fitter (see the ``raw_`` note)
    raw_jacobian: Callable[..., np.ndarray] | None = None
    time_params: tuple[str, ...] = ("timescale",)
    derived_names: tuple[str, ...] = ()
    reports_regime: bool = False
    statespace_law: str | None = None
    titles: dict[str, str] = field(default_factory=dict)
    style: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        missing = [k for k in LEVELS if k not in self.param_names]
        if missing:
            raise ValueError(f"law {self.name!r} lacks the level parameter(s) {missing}: every law has {LEVELS}")

    def __call__(self, t, params: dict[str, float]) -> np.ndarray:
        return self.func(t, *(params[k] for k in self.param_names))


EXPONENTIAL = CurveModel(
    name="exponential",
    func=exponential,
    jacobian=exponential_jacobian,
    param_names=("plateau", "initial", "timescale"),
    bounds=_bounds_exponential,
    guess=guess_exponential,
    formula="p* - (p* - p0) exp(-t/T)",
    raw_jacobian=raw_exponential_jacobian,
    time_params=("timescale",),
    statespace_law="one",
    titles={"plateau": "plateau p*", "initial": "initial p0", "timescale": "timescale 1/K_eff"},
    style={"color": "tab:orange", "ls": "--"},
)

OSCILLATOR = CurveModel(
    name="oscillator",
    func=oscillator,
    jacobian=oscillator_jacobian,
    param_names=("plateau", "initial", "timescale", "inertia"),
    bounds=_bounds_oscillator,
    guess=guess_oscillator,
    derived=lambda p: {"damping_ratio": damping_ratio(p["timescale"], p["inertia"])},
    formula="Ti Ts e'' + Ts e' + e = 0, e(0) = p0 - p*, e'(0) = 0",
    raw_jacobian=raw_oscillator_jacobian,
    time_params=("timescale", "inertia"),
    derived_names=("damping_ratio",),
    reports_regime=True,
    statespace_law="oscillator",
    titles={
        "plateau": "plateau p*",
        "initial": "initial p0",
        "timescale": "timescale 1/K_eff",
        "inertia": "inertia M/C",
        "damping_ratio": "damping ratio",
    },
    style={"color": "tab:red", "ls": "-"},
)


def __getattr__(name: str):
    """``MODELS``: the registry of :mod:`grpofit.laws.registry`, loaded on first use (the law modules
    import this one, so the registry cannot live here without an import cycle)."""
    if name == "MODELS":
        from grpofit.laws.registry import MODELS

        return MODELS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def lmfit_model(name: str, t=None, y=None):
    """The law ``name`` (``"exponential"`` or ``"oscillator"``) as an ``lmfit.Model``.

    The independent variable is ``t`` = steps from the first logged step (``step - step[0]``).
    ``Model.guess(data, t=t)`` returns ``Parameters`` set to grpofit's deterministic
    data-driven guess with grpofit's bounds (:func:`level_bounds`, :func:`time_bounds`).
    Parameter hints: ``timescale > 0``, ``inertia >= 0`` and, when ``t`` and ``y`` are given,
    the bounds and guess for that series, so ``make_params()`` is ready to fit::

        model = lmfit_model("oscillator", t, y)
        result = model.fit(y, model.make_params(), t=t)
        print(result.fit_report())

    lmfit is imported here, not at module import (``import grpofit.laws.models`` stays light).
    """
    import lmfit

    from grpofit.laws.registry import MODELS

    spec = MODELS[name]

    class GrpofitModel(lmfit.Model):
        def guess(self, data, t, **kws):  # noqa: D401 - lmfit's hook
            data = np.asarray(data, dtype=float)
            t = np.asarray(t, dtype=float)
            start, bounds = spec.guess(t, data), spec.bounds(t, data)
            params = self.make_params()
            for key in spec.param_names:
                lo, hi = bounds[key]
                params[self.prefix + key].set(value=float(np.clip(start[key], lo, hi)), min=lo, max=hi)
            return lmfit.models.update_param_vals(params, self.prefix, **kws)

    model = GrpofitModel(spec.func, independent_vars=["t"], name=name)
    model.set_param_hint("timescale", min=0.0, value=1.0)
    if "inertia" in spec.param_names:
        model.set_param_hint("inertia", min=0.0, value=0.0)
    if t is not None and y is not None:
        t = np.asarray(t, dtype=float)
        y = np.asarray(y, dtype=float)
        start, bounds = spec.guess(t, y), spec.bounds(t, y)
        for key in spec.param_names:
            lo, hi = bounds[key]
            model.set_param_hint(key, value=float(np.clip(start[key], lo, hi)), min=lo, max=hi)
    return model
