"""Noise floor and heteroscedasticity-and-autocorrelation-consistent (HAC) variances.

Training-curve residuals are autocorrelated and heteroscedastic, so the textbook covariance is
far too narrow. grpofit uses the Newey-West (Bartlett kernel) sandwich ``B^-1 Omega B^-1``
(``B = J'J``, ``Omega = sum_{|j|<L} (1 - |j|/L) sum_t s_t s_{t-j}'``, ``s_t = J_t r_t``), with the
fixed-b critical value of Kiefer & Vogelsang (2005).
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

__all__ = [
    "noise_floor",
    "bandwidth",
    "critical_value",
    "hac_meat",
    "hac_scalar",
    "sandwich",
    "MIN_BANDWIDTH_FRACTION",
    "BLOCK",
    "Parts",
    "blocked_parts",
]

#: the HAC bandwidth is at least this fraction of the series (fixed-b): the slow forcing of a
#: training curve is often too weak to detect in the residual autocorrelation (c ~ 0.01) yet
#: inflates the long-run variance several times (1 + 2 c tau with tau ~ 100s of points)
MIN_BANDWIDTH_FRACTION = 0.1

#: rows per block of the sums over a long series: a series of up to this many points is summed
#: in one piece (the plain formulas below); a longer one is summed block by block, never holding
#: its full Jacobian, its scores ``J_t r_t`` or an FFT over twice its length (a
#: 10^7-point fit once held several GB). Results then differ from one piece in rounding only.
BLOCK = 1 << 18


def noise_floor(y: np.ndarray) -> float:
    """The point-to-point noise sd, robust to the trend: ``1.4826 * MAD(diff(y)) / sqrt(2)``, or
    ``sqrt(var(diff y) / 2)`` where the differences sit on a lattice (the R² ceiling's estimator,
    :func:`grpofit.fitting.ceiling.diff_sd`, on the one array of differences)."""
    from grpofit.fitting.ceiling import diff_sd

    d = np.diff(np.asarray(y, dtype=float))
    return diff_sd(d, scratch=True) if d.size else 0.0


def _acf(r: np.ndarray, maxlag: int) -> np.ndarray:
    """Autocorrelation of ``r`` (mean removed) at lags ``0..maxlag-1``."""
    n = r.size
    if n > BLOCK:
        ac = _lagged_sums(r, maxlag)
    else:
        x = r - r.mean()
        nfft = 1 << (2 * n - 1).bit_length()
        f = np.fft.rfft(x, nfft)
        ac = np.fft.irfft(f * np.conj(f), nfft)[:maxlag]
    return ac / ac[0] if ac[0] > 0 else np.zeros(maxlag)


def _lagged_sums(r: np.ndarray, maxlag: int, block: int | None = None) -> np.ndarray:
    """``sum_t x_t x_{t+j}`` for ``j < maxlag`` (``x = r - mean(r)``), one block of ``t`` at a
    time: each block's FFT correlation with the block plus the ``maxlag`` points after it."""
    block = block or BLOCK
    mean = r.mean()
    nfft = 1 << (block + maxlag - 1).bit_length()
    ac = np.zeros(maxlag)
    for a in range(0, r.size, block):
        x = r[a : a + block] - mean
        y = r[a : a + block + maxlag] - mean
        ac += np.fft.irfft(np.conj(np.fft.rfft(x, nfft)) * np.fft.rfft(y, nfft), nfft)[:maxlag]
    return ac


_TAU_FRACTIONS = np.linspace(0.0, 1.0, 40)


def bandwidth(r: np.ndarray) -> int:
    """Bartlett bandwidth from Andrews' plug-in rule for a "white + AR(1)" residual model.

    The residual autocorrelation at lags ``1..m`` is fitted by ``c phi^j`` over a grid of
    correlation times (white noise if ``c`` is within 2.5 standard errors of 0); then
    ``f0 = 1 + 2c phi/(1-phi)``, ``f1 = 2c phi/(1-phi)^2``, ``alpha = (2 f1/f0)^2``,
    ``L = 1.1447 (alpha n)^(1/3)``, clipped to ``[max(n^(1/4), MIN_BANDWIDTH_FRACTION n), n/2]``.
    """
    n = r.size
    lo = max(1, int(math.ceil(max(n**0.25, MIN_BANDWIDTH_FRACTION * n))))
    if n < 12:
        return lo
    m = max(4, min(n // 3, 400))
    rho = _acf(r, m + 1)[1:]
    phis, basis, bb = _ar1_basis(n, m)
    c = np.clip((basis @ rho) / bb, 0.0, 1.0)
    # sum (rho - c b)^2 = rho.rho - 2 c b.rho + c^2 b.b
    sse = float(rho @ rho) - 2.0 * c * (basis @ rho) + c * c * bb
    k = int(np.argmin(sse))
    c, phi = float(c[k]), float(phis[k, 0])
    if c <= 2.5 / math.sqrt(n * bb[k]):  # not significant against white-noise ACF scatter
        return lo
    f0 = 1.0 + 2.0 * c * phi / (1.0 - phi)
    f1 = 2.0 * c * phi / (1.0 - phi) ** 2
    alpha = (2.0 * f1 / f0) ** 2
    bw = 1.1447 * (alpha * n) ** (1.0 / 3.0)
    return int(np.clip(math.ceil(bw), lo, max(lo, n // 2)))


_BASES: dict = {}


def _ar1_basis(n: int, m: int):
    """``(phis, phi^j for j = 1..m, sum_j phi^2j)`` on the grid of correlation times of a
    series of ``n`` points (depends on ``n`` and ``m`` only: cached, read-only arrays)."""
    key = (n, m)
    hit = _BASES.get(key)
    if hit is not None:
        return hit
    taus = np.exp(math.log(0.5) + _TAU_FRACTIONS * math.log(max(1.0, n / 2.0) / 0.5))
    phis = np.exp(-1.0 / taus)[:, None]
    basis = np.cumprod(np.broadcast_to(phis, (phis.shape[0], m)), axis=1)  # phi^j, j = 1..m
    bb = np.einsum("ij,ij->i", basis, basis)
    for a in (phis, basis, bb):
        a.setflags(write=False)
    if len(_BASES) >= 32:
        _BASES.clear()
    _BASES[key] = hit = (phis, basis, bb)
    return hit


def critical_value(b: float) -> float:
    """Fixed-b 97.5% quantile for the Bartlett kernel (Kiefer & Vogelsang 2005):
    ``1.96 + 2.9694 b + 0.4160 b^2 - 0.5324 b^3`` with ``b = L / n``."""
    b = min(max(b, 0.0), 1.0)
    return 1.959964 + 2.9694 * b + 0.4160 * b * b - 0.5324 * b**3


def _window_sums(s: np.ndarray, bw: int, axis: int) -> np.ndarray:
    """Sums of ``s`` over every window of ``bw`` consecutive points along ``axis`` (0 or 1 of
    a 2-D array), the windows sliding past both ends (``n + bw - 1`` of them; zero padding)."""
    if axis == 1:
        return _window_sums(s.T, bw, 0).T
    n = s.shape[0]
    # ext[i] = cumsum up to point i - bw (0 before the start, the total after the end):
    # window m is ext[m + bw] - ext[m]
    ext = np.empty((n + 2 * bw - 1, *s.shape[1:]))
    ext[:bw] = 0.0
    np.cumsum(s, axis=0, out=ext[bw : bw + n])
    ext[bw + n :] = ext[bw + n - 1]
    return ext[bw:] - ext[: n + bw - 1]


def hac_meat(s: np.ndarray, bw: int) -> np.ndarray:
    """``Omega = sum_{|j|<L} (1 - |j|/L) sum_t s_t s_{t-j}'`` for the rows ``s_t`` of ``s``.

    Computed as ``(1/L) sum_m S_m S_m'`` with ``S_m`` the sum of ``s`` over the ``m``-th window
    of ``L`` consecutive points (``L - |j|`` windows hold a pair ``j`` apart): the Bartlett
    kernel is the autocorrelation of a box. ``O(n k^2)``, exact."""
    w = _window_sums(s, bw, axis=0)
    return (w.T @ w) / bw


def hac_scalar(u: np.ndarray, bw: int) -> np.ndarray:
    """Row-wise long-run variance ``sum_{|j|<L} (1-|j|/L) sum_t u_t u_{t-j}`` of ``u`` (m, n)."""
    w = _window_sums(u, bw, axis=1)
    return np.einsum("ij,ij->i", w, w) / bw


class Parts(NamedTuple):
    """``J'J`` and the HAC meat ``Omega`` of a long series (:func:`blocked_parts`): what
    :func:`sandwich` needs, for any leading subset of the columns (their sub-matrices)."""

    bread: np.ndarray
    meat: np.ndarray


def blocked_parts(
    jac_rows: Callable[[int, int], np.ndarray], r: np.ndarray, bw: int, block: int | None = None
) -> Parts:
    """:class:`Parts` of the Jacobian given by row blocks (``jac_rows(lo, hi)``: rows
    ``lo..hi-1``, a new array each call, which is overwritten) and residuals ``r``, holding one
    block of rows at a time.

    ``Omega = (1/L) sum_m S_m S_m'`` as in :func:`hac_meat`, with the window sum
    ``S_m = C_m - C_{m-L}`` (``C_j`` the running sum of ``s_t = J_t r_t`` up to ``j``: 0 before
    the start, the total after the end) read by two cursors ``L`` apart, each keeping its own
    running sum (the Jacobian is evaluated twice, never stored)."""
    n, block = r.size, block or BLOCK
    lead, lag = _RunningSum(jac_rows, r, 0), _RunningSum(jac_rows, r, -bw)
    meat = None
    for m in range(0, n + bw - 1, block):
        size = min(block, n + bw - 1 - m)
        w = lead.next(size)
        w -= lag.next(size)
        part = w.T @ w
        meat = part if meat is None else meat + part
    return Parts(lead.bread, meat / bw)


class _RunningSum:
    """``C_j`` for ``j = start, start + 1, ...`` in blocks (see :func:`blocked_parts`); the
    rows it passes add to ``bread`` (``J'J``)."""

    def __init__(self, jac_rows, r: np.ndarray, start: int):
        self.jac_rows, self.r, self.j = jac_rows, r, start
        self.total = None
        self.bread = None

    def next(self, size: int) -> np.ndarray:
        n, j = self.r.size, self.j
        self.j += size
        lo, hi = max(j, 0), min(j + size, n)
        if hi <= lo:  # wholly before the start or after the end
            if j < 0 and self.total is None:
                k = self.jac_rows(0, 1).shape[1]
                return np.zeros((size, k))
            return np.broadcast_to(self.total, (size, self.total.shape[0])).copy()
        s = self.jac_rows(lo, hi)
        part = s.T @ s
        self.bread = part if self.bread is None else self.bread + part
        s *= self.r[lo:hi, None]  # the scores J_t r_t in the Jacobian's own array
        if self.total is not None:
            s[0] += self.total
        np.cumsum(s, axis=0, out=s)
        self.total = s[-1].copy()
        if lo == j and hi == j + size:
            return s
        out = np.empty((size, s.shape[1]))
        out[: lo - j] = 0.0
        out[lo - j : hi - j] = s
        out[hi - j :] = self.total
        return out


def sandwich(
    jac: np.ndarray | None,
    r: np.ndarray | None,
    bw: int,
    meat: np.ndarray | None = None,
    *,
    bread: np.ndarray | None = None,
) -> np.ndarray | None:
    """HAC covariance ``B^-1 Omega B^-1`` (``None`` if ``J'J`` is singular); ``bread`` and
    ``meat`` when the caller has them (:class:`Parts` of a long series)."""
    if bread is None:
        bread = jac.T @ jac
    if not np.all(np.isfinite(bread)):
        return None
    try:
        # 2-norm condition number of the symmetric bread from its eigenvalues; the inverse
        # from the same decomposition
        ev, vec = np.linalg.eigh(bread)
        if not (np.all(np.isfinite(ev)) and ev[0] > 0 and ev[-1] <= 1e14 * ev[0]):
            return None
        binv = (vec / ev) @ vec.T
    except np.linalg.LinAlgError:
        return None
    if meat is None:
        meat = hac_meat(jac * r[:, None], bw)
    cov = binv @ meat @ binv
    return 0.5 * (cov + cov.T)
