"""The state-space likelihood by a Kalman filter: the reference the dense evaluation is checked
against (``tests/test_forecast.py``), and the statement of the model in its usual form.

State: the forced part of the error, started exactly at 0 at ``t = 0`` (the deterministic
relaxation is the mean, :func:`grpofit.forecasting.statespace.design`). Between two logged
steps ``dt`` apart the state moves by ``F = exp(A dt)`` and gains the process covariance
``Q = int_0^dt exp(As) B B' exp(A's) ds`` (Van Loan's block exponential); it is observed as
``y - mean = H x + eps`` with ``Var eps`` the observation variance of the point (theory §6).
A loop over points: for tests and small series only, the fitter uses :mod:`.likelihood`.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["system", "kalman_loglik"]


def system(law: str, times, sd: float):
    """``(A, B, H)`` of the forced part of ``law`` (forcing sd ``sd``, see :mod:`.statespace`):
    the law's form's ``kalman``."""
    from grpofit.forecasting.statespace import LAWS

    form = LAWS[law]
    if form.kalman is None:
        raise ValueError(f"the law {law!r} has no Kalman form")
    return form.kalman(times, sd)


def _discrete(A, B, dt):
    """``(F, Q)`` over ``dt`` by Van Loan's method."""
    from scipy.linalg import expm

    m = A.shape[0]
    M = np.zeros((2 * m, 2 * m))
    M[:m, :m] = -A
    M[:m, m:] = B @ B.T
    M[m:, m:] = A.T
    E = expm(M * dt)
    F = E[m:, m:].T
    return F, F @ E[:m, m:]


def kalman_loglik(law: str, times, sd: float, t, resid, obs_var) -> float:
    """Log-likelihood of ``resid = y - mean`` at times ``t`` (from 0) under the forced law."""
    A, B, H = system(law, times, sd)
    m = A.shape[0]
    x = np.zeros(m)
    P = np.zeros((m, m))
    prev = 0.0
    ll = 0.0
    for tk, rk, vk in zip(t, resid, obs_var):
        F, Q = _discrete(A, B, float(tk) - prev)
        prev = float(tk)
        x = F @ x
        P = F @ P @ F.T + Q
        h = H[0]
        s = float(h @ P @ h) + float(vk)
        innov = float(rk) - float(h @ x)
        ll -= 0.5 * (math.log(2.0 * math.pi * s) + innov * innov / s)
        gain = (P @ h) / s
        x = x + gain * innov
        P = P - np.outer(gain, h @ P)
    return ll
