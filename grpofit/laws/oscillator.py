"""The damped oscillator ``M e'' + C e' + K e = 0`` started at rest, in step units with damping
normalised to one (``timescale = C/K``, ``inertia = M/C``): curve, Jacobian, guess, bounds, the
roots of its characteristic equation and its state-space form (``Ti e'' + e' + e/Ts = q xi``,
forcing on the velocity; ``oscillator`` in the forecast's ``laws``).

The ``raw_*`` functions are the same computations without a ``np.errstate`` of their own, for the
fitter (see :mod:`grpofit.laws.exponential`).
"""

from __future__ import annotations

import math

import numpy as np

from grpofit.laws.base import (
    EXP_FLOOR,
    CurveModel,
    StateSpaceForm,
    crossing,
    exp_neg,
    huge_ok,
    level_bounds,
    level_ends,
    run_span,
    smooth,
    time_bounds,
)
from grpofit.laws.exponential import guess_exponential

__all__ = [
    "oscillator",
    "oscillator_jacobian",
    "raw_oscillator_jacobian",
    "oscillator_roots",
    "relaxation",
    "relaxation_derivatives",
    "raw_relaxation_derivatives",
    "relaxation_shape",
    "raw_relaxation_shape",
    "damping_ratio",
    "regime_of",
    "guess_oscillator",
    "slowest_time",
    "OSCILLATOR",
]


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

    The one place the roots are computed: this law's state-space form (its modes and slowest
    decay) and the fit's state-space intervals (:mod:`grpofit.fitting.statespace_ci`) use it."""
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
    with huge_ok():
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
    with huge_ok():
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
    e1 = exp_neg(-x1)
    x2 = np.minimum(t / np.maximum(t2, 1e-300), -EXP_FLOOR)  # see EXP_FLOOR
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
    with huge_ok():
        return raw_relaxation_shape(x, zeta)


def raw_relaxation_shape(x, zeta):
    """:func:`relaxation_shape` without its ``np.errstate`` (see the ``raw_`` note)."""
    x = np.asarray(x, dtype=float)
    zeta = np.asarray(zeta, dtype=float).reshape(-1)
    out = np.empty(x.shape)
    for i0, i1, k, coef in _shape_plan(zeta, x.ndim):
        xs, os_ = x[i0:i1], out[i0:i1]
        if k == 2:
            exp_neg(np.negative(xs, out=os_), os_)
        elif k == 0:
            w, aw, neg_a = coef
            wx = w * xs
            c = np.cos(wx)
            sn = np.sin(wx, out=wx)
            sn *= aw
            c += sn
            e = exp_neg(np.multiply(neg_a, xs))
            np.multiply(e, c, out=os_)
        else:
            c1, g1, c2, g2 = coef
            e1 = exp_neg(np.multiply(xs, c1))
            e1 *= g1
            e2 = exp_neg(np.multiply(xs, c2))
            e2 *= g2
            np.subtract(e1, e2, out=os_)
    return out


def _any(mask: np.ndarray) -> bool:
    """``mask.any()`` as one ufunc reduction (the method goes through a Python wrapper)."""
    return bool(np.logical_or.reduce(mask, axis=None))


def _all(mask: np.ndarray) -> bool:
    """``mask.all()`` as one ufunc reduction."""
    return bool(np.logical_and.reduce(mask, axis=None))


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
    with huge_ok():
        g = raw_relaxation_derivatives(t, timescale, inertia, derivatives=False)[0]
        return plateau + (initial - plateau) * g


def oscillator_jacobian(t, plateau, initial, timescale, inertia):
    """Columns ``dR/d(plateau, initial, timescale, inertia)`` of :func:`oscillator`, ``(n, 4)``.

    ``dR/dp* = 1 - g``, ``dR/dp0 = g``, ``dR/dTs = (p0 - p*) dg/dTs``,
    ``dR/dTi = (p0 - p*) dg/dTi`` (see :func:`relaxation_derivatives`).
    """
    with huge_ok():
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


def guess_oscillator(t: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Deterministic guess for the oscillator.

    Overdamped shape: a delayed exponential ``exp(-(t - d)/T1)``; ``T1 = (t50 - t10)/ln(9/5)``
    from the 10% and 50% crossings, the slow-start delay ``d = t10 - T1 ln(10/9)`` is the
    inertia, ``timescale = T1 + inertia``. If the smoothed series overshoots the tail level
    by more than 5% of the rise, the overshoot fraction ``OS`` gives
    ``zeta = -ln OS / sqrt(pi^2 + ln^2 OS)`` and the peak time ``t_p = pi / w_d`` the rest.
    """
    p0, pst = level_ends(y)
    span = max(run_span(t), 1e-12)
    ys = smooth(y)
    gain = pst - p0
    rising = gain >= 0
    base = guess_exponential(t, y)
    if abs(gain) <= 0:
        return {**base, "inertia": 0.0}
    t10 = crossing(t, ys, p0 + 0.1 * gain, rising)
    t50 = crossing(t, ys, p0 + 0.5 * gain, rising)
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


def _bounds_oscillator(t, y):
    lv = level_bounds(y)
    tb = time_bounds(t)
    return {"plateau": lv, "initial": lv, "timescale": tb, "inertia": (0.0, tb[1])}


# ---------------------------------------------------------------------------------------------
# state-space form: levels ``(p*, p0 - p*)``, searched ``(log Ts, log Ti, log sd)``


def _columns(t, times):
    return (relaxation(t, float(times[0]), float(times[1])),)


def _modes(times):
    ts, ti = float(times[0]), max(float(times[1]), 1e-9 * float(times[0]))
    # a repeated root nudged off (the covariance is continuous there)
    small, big, under = oscillator_roots(ts, ti, apart=1e-6)
    lam = np.array([small, big])
    # Ti h'' + h' + h/Ts = delta: h(u) = (exp(l1 u) - exp(l2 u)) / (Ti (l1 - l2))
    w = 1.0 / (ti * (small - big))
    r = np.array([w, -w])
    if not under:  # two real roots: real arithmetic
        lam, r = lam.real.copy(), r.real.copy()
    return lam, r


def _from_log(theta):
    return (math.exp(theta[0]), math.exp(theta[1]))


def _log_bounds(t_lo, t_hi, dt):
    return [t_lo, math.log(max(dt / 50.0, 1e-300))], [t_hi, t_hi]


def _starts(t_guess, sd0, prior):
    T, sd = (prior[0], prior[1]) if prior is not None else (math.log(t_guess), math.log(sd0[0]))
    return [[T, T + math.log(0.1), sd], [T, T + math.log(0.3), math.log(sd0[0])]]


def slowest_time(times) -> float:
    """The oscillator's slowest decay time: ``T1`` overdamped, ``2 Ti`` underdamped."""
    ts, ti = float(times[0]), float(times[1])
    if ti <= 0.0:  # no inertia: one mode
        return ts
    return -1.0 / oscillator_roots(ts, ti)[0].real


def _kalman(times, sd):
    ts, ti = float(times[0]), float(times[1])
    q = math.sqrt(2.0 * sd * sd / ts)
    A = np.array([[0.0, 1.0], [-1.0 / (ti * ts), -1.0 / ti]])
    return A, np.array([[0.0], [q / ti]]), np.array([[1.0, 0.0]])


DAMPED = StateSpaceForm(
    "oscillator",
    ("plateau", "amplitude"),
    ("timescale", "inertia"),
    "damped oscillator + forcing",
    columns=_columns,
    modes=_modes,
    from_log=_from_log,
    log_bounds=_log_bounds,
    starts=_starts,
    forcing=(0, 1),
    slowest=slowest_time,
    kalman=_kalman,
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
    statespace=DAMPED,
    statespace_intervals=True,
    titles={
        "plateau": "plateau p*",
        "initial": "initial p0",
        "timescale": "timescale 1/K_eff",
        "inertia": "inertia M/C",
        "damping_ratio": "damping ratio",
    },
    style={"color": "tab:red", "ls": "-"},
)
