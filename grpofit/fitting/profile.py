"""Log-binned data and the profile likelihood of the damping ratio by variable projection.

For a fixed damping ratio ``zeta`` and timescale ``Ts`` the oscillator is linear in its two
levels, ``R = p* + (p0 - p*) g(t/Ts; zeta)`` (:func:`grpofit.laws.models.relaxation_shape`), so the
best levels are a weighted 2x2 least squares in closed form. The profile over ``zeta`` then
needs only a 1-D search over ``log Ts`` per row, done for all rows at once on a grid plus two
parabolic steps. The same grid gives the fitter its starting points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from grpofit.laws.models import median, raw_relaxation_shape
from grpofit.runtime.compiled import compiled_filter

__all__ = ["Binned", "log_bins", "linear_levels", "Profile", "profile", "refine", "at_timescales", "ZETA_GRID"]

#: damping ratios of the profile grid (plus infinity = inertia 0)
ZETA_GRID = np.geomspace(0.15, 12.0, 19)
#: log-timescale offsets of the grid around its centre: x0.2 .. x5 (ratio ~1.5)
_LOG_TS = np.linspace(math.log(0.2), math.log(5.0), 9)
_BIN_WIDTH = 0.12  # log-bins are this fraction of their time wide


@dataclass
class Binned:
    """Bin means ``y`` at mean times ``t`` with counts ``w``; ``yy = sum w y^2``."""

    t: np.ndarray
    y: np.ndarray
    w: np.ndarray
    yy: float
    sw: float  # sum w
    wy: float  # sum w y


def log_bins(t: np.ndarray, y: np.ndarray) -> Binned:
    """Points before ``10 dt`` kept; later ones pooled in bins ``12%`` of their time wide.

    A relaxation curve with any timescale ``T`` departs from linear inside such a bin by
    ``O((0.12 t/T)^2 e^{-t/T} / 24) <= 3e-4`` of its gain, so least squares on the bin means
    weighted by the counts is the full least squares up to that (and 20-60x cheaper)."""
    n = t.size
    dt = median(np.diff(t)) if n > 1 else 1.0
    t_ind = 10.0 * dt
    ids = np.arange(n, dtype=np.int64)
    late = t >= t_ind
    if late.any():
        first_late = int(np.argmax(late))
        x = t[late]  # then in place: a long run holds few point-long arrays
        x /= t_ind
        np.log(x, out=x)
        x /= math.log1p(_BIN_WIDTH)
        np.floor(x, out=x)
        x += first_late  # exact: whole numbers far below 2^53
        ids[late] = x
    # ids are non-decreasing: bin boundaries where they change
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    w = np.diff(np.r_[starts, n]).astype(float)
    tb = np.add.reduceat(t, starts) / w
    yb = np.add.reduceat(y, starts) / w
    return Binned(tb, yb, w, float(w @ (yb * yb)), float(w.sum()), float(w @ yb))


def linear_levels(b: Binned, g: np.ndarray):
    """Best ``y = alpha + beta g`` along the last axis of ``g`` (weighted by the bin counts):
    ``(ssr, plateau, initial)`` with ``plateau = alpha``, ``initial = alpha + beta``.

    Rows with a singular system get ``ssr = inf``."""
    w = b.w
    s0, y0 = b.sw, b.wy
    gw = g * w
    s1 = gw.sum(axis=-1)
    s2 = np.einsum("...i,...i->...", gw, g)
    y1 = gw @ b.y
    det = s0 * s2 - s1 * s1
    alpha = (s2 * y0 - s1 * y1) / det  # callers silence floating-point warnings once
    beta = (s0 * y1 - s1 * y0) / det
    ssr = b.yy - alpha * y0 - beta * y1
    bad = ~(det > 1e-12 * s0 * np.maximum(s2, 1e-300)) | ~np.isfinite(ssr)
    ssr = np.where(bad, np.inf, np.maximum(ssr, 0.0))
    return ssr, alpha, alpha + beta


def _in_bounds(plat, init, lv):
    return (plat >= lv[0]) & (plat <= lv[1]) & (init >= lv[0]) & (init <= lv[1])


@dataclass
class Profile:
    """Per damping ratio: the binned SSR minimised over timescale and levels."""

    zeta: np.ndarray  # grid incl. inf at the end
    ssr: np.ndarray
    ts: np.ndarray
    plateau: np.ndarray
    initial: np.ndarray
    center: float  # the timescale the grid was centred on
    best_ssr: float = math.inf  # binned ssr of the final fit
    grid_ts: np.ndarray | None = None  # the timescales of the first-stage grid (M,)
    grid_ssr: np.ndarray | None = None  # its SSR per (zeta row, timescale) (R, M)
    #: each row's relaxation ``g`` at the bin times at its timescale (R, bins), for the
    #: intervals' thresholds
    curves: np.ndarray | None = None

    def row(self, k: int, *, exponential: bool = False) -> dict[str, float]:
        """Row ``k`` as a start for the fitter (``inertia = Ts / (4 zeta^2)``)."""
        z = self.zeta[k]
        start = {"plateau": float(self.plateau[k]), "initial": float(self.initial[k]), "timescale": float(self.ts[k])}
        if not exponential:
            start["inertia"] = 0.0 if np.isinf(z) else float(self.ts[k] / (4.0 * z * z))
        return start

    def subset(self, keep: np.ndarray) -> "Profile":
        return Profile(
            self.zeta[keep],
            self.ssr[keep],
            self.ts[keep],
            self.plateau[keep],
            self.initial[keep],
            self.center,
            self.best_ssr,
            curves=None if self.curves is None else self.curves[keep],
        )

    def timescale_range(self, best: float, thr: float, rows=None) -> tuple[float, float] | None:
        """Profile-likelihood range of the timescale on the first-stage grid: the timescales
        whose SSR, minimised over the damping ratios ``rows`` (all by default) and the levels,
        is within ``thr`` of ``best``; ends interpolated linearly in ``log Ts`` towards the first
        rejected grid value (``None`` if no grid value is accepted)."""
        if self.grid_ssr is None:
            return None
        g = self.grid_ssr if rows is None else self.grid_ssr[rows]
        d = np.min(g, axis=0) - best - thr  # <= 0: accepted
        acc = np.flatnonzero(d <= 0)
        if acc.size == 0:
            return None
        s = np.log(self.grid_ts)
        i, j = int(acc[0]), int(acc[-1])
        lo = s[i] if i == 0 else s[i] + (s[i - 1] - s[i]) * d[i] / (d[i] - d[i - 1])
        hi = s[j] if j == s.size - 1 else s[j] + (s[j + 1] - s[j]) * d[j] / (d[j] - d[j + 1])
        return float(np.exp(lo)), float(np.exp(hi))


def _evaluate(b: Binned, zetas: np.ndarray, ts: np.ndarray, lv):
    """SSR, levels and relaxation ``g`` at the bins for each ``(zeta_r, ts[r, j])`` (``ts``
    shape ``(R, M)``): the compiled kernel where it was built (``grpofit/_filter.c``,
    ``profile_grid``: the same operations, the bins summed in order), else
    :func:`_evaluate_numpy`."""
    kernel = compiled_filter()
    R, M = ts.shape
    if kernel is None or R * M == 0 or b.t.size == 0:
        return _evaluate_numpy(b, zetas, ts, lv)
    f64 = np.ascontiguousarray
    ssr, plat, init = np.empty((R, M)), np.empty((R, M)), np.empty((R, M))
    g = np.empty((R, M, b.t.size))
    kernel.profile_grid(
        R,
        M,
        b.t.size,
        f64(b.t, dtype=float),
        f64(b.w, dtype=float),
        f64(b.y, dtype=float),
        float(b.yy),
        float(b.sw),
        float(b.wy),
        f64(zetas, dtype=float),
        f64(ts, dtype=float),
        float(lv[0]),
        float(lv[1]),
        ssr,
        plat,
        init,
        g,
    )
    return ssr, plat, init, g


def _evaluate_numpy(b: Binned, zetas: np.ndarray, ts: np.ndarray, lv):
    """:func:`_evaluate` in numpy."""
    g = raw_relaxation_shape(b.t[None, None, :] / ts[:, :, None], zetas)
    ssr, plat, init = linear_levels(b, g)
    ssr = np.where(_in_bounds(plat, init, lv), ssr, np.inf)
    return ssr, plat, init, g


def _parabola_vertex(s, f):
    """Vertex of the parabola through ``(s_i, f_i)``, ``i = 0, 1, 2`` (rows); ``s_1`` if the
    three points are not convex."""
    s0, s1, s2 = s
    f0, f1, f2 = f
    d01 = (f1 - f0) / (s1 - s0)
    curv = ((f2 - f1) / (s2 - s1) - d01) / (s2 - s0)
    vert = 0.5 * (s0 + s1) - d01 / (2.0 * curv)
    return np.where(np.isfinite(vert) & (curv > 0), vert, s1)


def _clip(x, lo, hi):
    """``np.clip`` for arrays and scalar bounds, without its dispatch overhead."""
    return np.minimum(np.maximum(x, lo), hi)


def profile(
    b: Binned, center: float, lv: tuple[float, float], tb: tuple[float, float], zetas: np.ndarray | None = None
) -> Profile:
    """Binned SSR minimised over timescale and levels, for each damping ratio of the grid.

    Timescales ``center * (0.2 .. 5)`` (9 log-spaced values), then two parabolic steps in
    ``log Ts`` around each row's minimum (the second through the first vertex and two points
    a third of a grid step away). Levels are solved linearly; out-of-bounds levels are
    excluded (``ssr = inf``)."""
    if zetas is None:
        zetas = np.append(ZETA_GRID, np.inf)
    zetas = np.asarray(zetas, dtype=float)
    lo_s, hi_s = math.log(tb[0]), math.log(tb[1])
    s_grid = _clip(math.log(center) + _LOG_TS, lo_s, hi_s)
    ssr, plat, init, g = _evaluate(b, zetas, np.broadcast_to(np.exp(s_grid), (zetas.size, s_grid.size)), lv)
    rows = np.arange(zetas.size)
    k = np.argmin(ssr, axis=1)
    best_s = s_grid[k]
    h = _LOG_TS[1] - _LOG_TS[0]
    km = np.minimum(np.maximum(k, 1), s_grid.size - 2)
    near = (km[:, None] + np.arange(-1, 2)).T  # (3, R): the grid neighbours of each minimum
    v = _parabola_vertex(s_grid[near], ssr[rows, near])
    v = _clip(_clip(v, best_s - h, best_s + h), lo_s, hi_s)
    best, curves = _second_stage(
        b,
        zetas,
        v,
        h / 3.0,
        lo_s,
        hi_s,
        lv,
        first=(best_s, ssr[rows, k], plat[rows, k], init[rows, k]),
        first_g=g[rows, k],
    )
    return Profile(
        zeta=zetas,
        ssr=best[1],
        ts=np.exp(best[0]),
        plateau=best[2],
        initial=best[3],
        center=float(center),
        grid_ts=np.exp(s_grid),
        grid_ssr=ssr,
        curves=curves,
    )


def _second_stage(b: Binned, zetas, v, h3: float, lo_s: float, hi_s: float, lv, first=None, first_g=None):
    """Per row: three ``log Ts`` values ``h3`` apart around ``v``, their parabola's vertex, and
    the best of those four (and of ``first``, the grid's minimum with its curves ``first_g``,
    when given): ``((log Ts, ssr, plateau, initial) arrays, curves (R, bins))``."""
    trio = _clip(v[:, None] + np.array([-h3, 0.0, h3]), lo_s, hi_s)
    f3, p3, i3, g3 = _evaluate(b, zetas, np.exp(trio), lv)
    v2 = _clip(_clip(_parabola_vertex(trio.T, f3.T), v - h3, v + h3), lo_s, hi_s)
    f4, p4, i4, g4 = _evaluate(b, zetas, np.exp(v2)[:, None], lv)
    parts = [(trio, f3, p3, i3), (v2[:, None], f4, p4, i4)]
    curves = [g3, g4]
    if first is not None:
        parts.insert(0, tuple(a[:, None] for a in first))
        curves.insert(0, first_g[:, None, :])
    # (4, R, candidates): log Ts, ssr, plateau, initial
    cand = np.stack([np.concatenate(col, axis=1) for col in zip(*parts)])
    j = np.argmin(cand[1], axis=1)
    rows = np.arange(zetas.size)
    return cand[:, rows, j], np.concatenate(curves, axis=1)[rows, j]


def refine(
    b: Binned, zetas: np.ndarray, ts_guess: np.ndarray, lv: tuple[float, float], tb: tuple[float, float]
) -> Profile:
    """Rows at new damping ratios whose best timescale is known to be near ``ts_guess`` (the
    interval ends between two profiled rows, ``ts_guess`` interpolated between theirs): the
    second stage of :func:`profile` only (three timescales a third of a grid step apart,
    their parabola's vertex, the best of the four)."""
    zetas = np.asarray(zetas, dtype=float)
    lo_s, hi_s = math.log(tb[0]), math.log(tb[1])
    h3 = (_LOG_TS[1] - _LOG_TS[0]) / 3.0
    v = _clip(np.log(np.asarray(ts_guess, dtype=float)), lo_s, hi_s)
    best, curves = _second_stage(b, zetas, v, h3, lo_s, hi_s, lv)
    return Profile(
        zeta=zetas,
        ssr=best[1],
        ts=np.exp(best[0]),
        plateau=best[2],
        initial=best[3],
        center=float(np.exp(np.mean(v))) if v.size else 1.0,
        curves=curves,
    )


def at_timescales(b: Binned, zetas: np.ndarray, ts: np.ndarray, lv) -> Profile:
    """Rows at given ``(zeta, ts)`` pairs (levels solved linearly)."""
    ssr, plat, init, g = _evaluate(b, zetas, np.asarray(ts, dtype=float)[:, None], lv)
    return Profile(
        zetas,
        ssr[:, 0],
        np.asarray(ts, dtype=float),
        plat[:, 0],
        init[:, 0],
        median(ts) if len(ts) else 1.0,
        curves=g[:, 0],
    )
