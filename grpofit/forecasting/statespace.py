"""The laws as linear Gaussian state-space models: a deterministic relaxation plus forcing.

docs/theory.md §6: sampled at the logged steps, a forced relaxation plus observation noise is a
linear Gaussian state-space model ``y_t = p* + e_t + eps_t``. Its exact likelihood is a
Gaussian one; this module gives the two pieces it needs for any of the laws below:

- the **mean** ``X(t) @ beta``: the levels ``beta`` (plateau and mode amplitudes) enter
  linearly, so they are solved in closed form (generalised least squares) and only the
  timescales and noise strengths are searched;
- the **process covariance** ``Cov(e_s, e_t)`` of the forcing, started at ``t = 0`` from a
  known state (an empty momentum buffer). With the forcing's impulse response
  ``h(u) = sum_i r_i exp(l_i u)`` (``l_i`` the eigenvalues of the state matrix ``A``),

      Cov(e_s, e_t) = q^2 sum_ij r_i r_j [exp(l_i s + l_j t) - exp(l_i (s-m) + l_j (t-m))] / (l_i + l_j)

  with ``m = min(s, t)`` (both exponents are <= 0, so nothing overflows). This is the same
  matrix a Kalman filter propagates (``P_{k+1} = F P_k F' + Q``); :mod:`.kalman` checks it.

The laws are the state-space forms of the law registry
(:data:`grpofit.laws.registry.STATESPACE`, each law's :class:`grpofit.laws.base.StateSpaceForm`
in its own module: ``one`` the exponential, ``oscillator`` the damped oscillator, ``two`` a fast
and a slow mode); this module holds the arithmetic they share and looks each law's own pieces
(its mean's columns, its modes, the times its forcing depends on) up by name.

``sd`` is the forcing's stationary standard deviation of ``e`` (``q^2 = 2 sd^2 / T`` with ``T``
the law's first forcing time: theory §3's ``Var(e) = D / (2 G C K_eff)``). Every law also
carries the observation noise's standard deviation per logged point (fixed when the batch size
is known, see :mod:`.noise`).
"""

from __future__ import annotations

import numpy as np

from grpofit.laws.registry import STATESPACE

__all__ = ["LAWS", "process_cov", "design"]

#: the forecaster's laws by name (the law registry's state-space forms), mixed in this order
#: (simplest first: the fit of ``one`` is the starting point of the others' searches):
#: :func:`grpofit.forecasting.engine.forecast_series` fits every row
LAWS = STATESPACE


def design(law: str, t: np.ndarray, times) -> np.ndarray:
    """The mean's design matrix ``X(t)`` (rows: points, columns: the law's levels)."""
    t = np.asarray(t, dtype=float)
    if law not in LAWS:  # pragma: no cover - programming error
        raise ValueError(law)
    form = LAWS[law]
    X = np.empty(t.shape + (len(form.levels),))
    X[..., 0] = 1.0
    for i, col in enumerate(form.columns(t, times), start=1):
        X[..., i] = col
    return X


def _modes(law: str, times, sd: float):
    """``(l, r, q)``: eigenvalues, impulse-response weights and forcing strength."""
    lam, r = LAWS[law].modes(times)
    return lam, r, forcing_q(law, times, sd)


def process_cov(law: str, s: np.ndarray, t: np.ndarray, times, sd: float, *, lag=None) -> np.ndarray:
    """``Cov(e_s, e_t)`` of the forced process started from a known state at ``t = 0``.

    The double sum splits into a stationary part that depends on ``|t - s|`` only and a
    rank-(number of roots) correction for the start:

        Cov = q^2 [ sum_j c_j exp(l_j |t - s|) - sum_ij r_i r_j exp(l_i s) exp(l_j t) / -(l_i + l_j) ]

    with ``c_j = r_j sum_i r_i / -(l_i + l_j)``, so only one exponential per root is taken over
    the whole matrix (one for a complex pair: the other is its conjugate).

    ``lag``: ``|t - s|`` computed before (it does not depend on the law's parameters), as
    ``(values, index)``: its distinct values and the matrix of where each entry's value is
    (``values[index]``): the stationary part is taken at each distinct lag once, then spread."""
    s = np.asarray(s, dtype=float)
    t = np.asarray(t, dtype=float)
    if sd <= 0:
        return np.zeros((s.size, t.size))
    lam, r, q = _modes(law, times, sd)
    return (q * q) * _unit_cov(lam, r, s, t, lag)


def process_cov_parts(law: str, s: np.ndarray, t: np.ndarray, times, *, lag=None) -> np.ndarray:
    """:func:`process_cov` without the forcing's strength: ``process_cov(law, s, t, times, sd)``
    is ``forcing_q(law, times, sd) ** 2 * process_cov_parts(law, s, t, times)`` (the same
    arithmetic), so a search that changes only ``sd`` reuses this matrix."""
    lam, r, _ = _modes(law, times, 1.0)
    return _unit_cov(lam, r, np.asarray(s, dtype=float), np.asarray(t, dtype=float), lag)


def forcing_times(law: str, times) -> tuple:
    """The times :func:`process_cov_parts` depends on (``two``'s forcing drives its slow mode
    alone, so its fast time does not enter): the form's ``forcing``."""
    return tuple(float(times[i]) for i in LAWS[law].forcing)


def forcing_q(law: str, times, sd: float):
    """The forcing strength ``q`` of :func:`process_cov` (``q^2 = 2 sd^2 / T``, ``T`` the law's
    first forcing time: the slow time, the oscillator's ``Ts``)."""
    T = float(times[LAWS[law].forcing[0]])
    return np.sqrt(2.0 * sd * sd / T)


def _unit_cov(lam, r, s: np.ndarray, t: np.ndarray, lag) -> np.ndarray:
    """The bracket of :func:`process_cov` (its value at ``q = 1``)."""
    tot = lam[:, None] + lam[None, :]
    M = (r[:, None] * r[None, :]) / (-tot)
    c = M.sum(axis=0)
    d, spread = (np.abs(t[None, :] - s[:, None]), None) if lag is None else lag
    if lam.size == 1:
        stat = c[0] * np.exp(lam[0] * d)
    elif np.iscomplexobj(lam):  # a complex-conjugate pair: c_1 e^{l_1 d} + conj(...)
        stat = 2.0 * np.real(c[0] * np.exp(lam[0] * d))
    else:
        stat = c[0] * np.exp(lam[0] * d) + c[1] * np.exp(lam[1] * d)
    if spread is not None:
        stat = np.take(stat, spread)
    if lam.size == 1:  # one real root: (es @ M) @ et.T is a product of one term per entry
        es = np.exp(s * lam[0])
        et = es if t is s else np.exp(t * lam[0])
        stat -= np.multiply.outer(es * M[0, 0], et)
        return stat
    es = np.exp(np.outer(s, lam))
    et = es if t is s else np.exp(np.outer(t, lam))
    start = np.real((es @ M) @ et.T)
    return np.real(stat) - start
