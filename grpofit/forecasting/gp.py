"""A Gaussian-process regression of one run summary on the covariates, for the population prior
(:mod:`.prior`, docs/prior.md "What the prior is", 2).

How a run's final level depends on its settings is smooth but seldom linear in the transforms the
closed forms suggest (on the bandit the plateau is a logistic-like function of the KL weight whose
slope depends on the group size). A linear mean in the transformed covariates plus a squared-
exponential deviation with one length scale per covariate (ARD) follows such a map where the
runs show it, and reduces to the linear regression where they do not (long length scales).

Hyperparameters (length scales, the deviation's and the noise's scales) maximise the restricted
likelihood (REML: the linear mean's coefficients integrated out under a flat prior), with the
analytic gradient, from two starts. Leave-one-out residuals are exact for those hyperparameters,
``(Q y)_i / Q_ii`` with ``Q = K^-1 - K^-1 H (H' K^-1 H)^-1 H' K^-1`` (the mean's coefficients
re-estimated without the run), so :func:`.prior._regression` can choose between this and the
ridge by their leave-one-out errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["GPFit", "gp_fit"]

#: bounds of the log length scales (in sds of each transformed covariate), and of the log scales
#: of the deviation and the noise (in sds of the response)
LOG_LS = (math.log(0.25), math.log(50.0))
LOG_SF = (math.log(1e-3), math.log(10.0))
LOG_SN = (math.log(1e-3), math.log(2.0))


@dataclass
class GPFit:
    mu_x: np.ndarray
    sd_x: np.ndarray
    y_mean: float
    y_sd: float
    Z: np.ndarray  #: standardised covariates of the runs
    theta: np.ndarray  #: log length scales, log deviation scale, log noise scale (standardised units)
    beta: np.ndarray  #: the linear mean's coefficients (intercept first)
    alpha: np.ndarray  #: K^-1 (y - H beta)
    Kinv: np.ndarray
    Ainv: np.ndarray  #: (H' K^-1 H)^-1
    loo: np.ndarray  #: leave-one-out residuals (response units)
    inflate: float = 1.0  #: the leave-one-out residuals' mean square over their predicted variance (>= 1)

    @property
    def noise_var(self) -> float:
        return float(math.exp(2.0 * self.theta[-1]) * self.y_sd**2) * self.inflate

    def _k(self, Z0: np.ndarray) -> np.ndarray:
        d = self.Z.shape[1]
        ls = np.exp(self.theta[:d])
        D = (((Z0[:, None, :] - self.Z[None, :, :]) / ls) ** 2).sum(-1)
        return math.exp(2.0 * self.theta[d]) * np.exp(-0.5 * D)

    def predict(self, X0: np.ndarray) -> np.ndarray:
        Z0 = (np.atleast_2d(X0) - self.mu_x) / self.sd_x
        H0 = np.hstack([np.ones((Z0.shape[0], 1)), Z0])
        return self.y_mean + self.y_sd * (H0 @ self.beta + self._k(Z0) @ self.alpha)

    def f_var(self, x0: np.ndarray) -> float:
        """Variance of the regression function at ``x0`` (the deviation's and the mean's
        coefficients' uncertainty), response units."""
        z0 = ((np.asarray(x0, dtype=float) - self.mu_x) / self.sd_x)[None, :]
        k0 = self._k(z0)[0]
        h0 = np.concatenate([[1.0], z0[0]])
        H = np.hstack([np.ones((self.Z.shape[0], 1)), self.Z])
        sf2 = math.exp(2.0 * self.theta[self.Z.shape[1]])
        Kk = self.Kinv @ k0
        u = h0 - H.T @ Kk
        v = sf2 - float(k0 @ Kk) + float(u @ self.Ainv @ u)
        return max(v, 0.0) * self.y_sd**2 * self.inflate


def _parts(theta, Z, H, y):
    n, d = Z.shape
    ls = np.exp(theta[:d])
    diff2 = ((Z[:, None, :] - Z[None, :, :]) / ls) ** 2
    Kf = math.exp(2.0 * theta[d]) * np.exp(-0.5 * diff2.sum(-1))
    K = Kf + math.exp(2.0 * theta[d + 1]) * np.eye(n)
    L = np.linalg.cholesky(K)
    Kinv = np.linalg.inv(L)
    Kinv = Kinv.T @ Kinv
    KH = Kinv @ H
    A = H.T @ KH
    Ainv = np.linalg.inv(A)
    Q = Kinv - KH @ Ainv @ KH.T
    return K, Kf, diff2, L, Kinv, A, Ainv, Q


def _reml(theta, Z, H, y):
    """The negative restricted log likelihood and its gradient in ``theta``."""
    n, d = Z.shape
    try:
        _, Kf, diff2, L, _, A, _, Q = _parts(theta, Z, H, y)
    except np.linalg.LinAlgError:
        return 1e10, np.zeros_like(theta)
    Qy = Q @ y
    sign, logdet_a = np.linalg.slogdet(A)
    nll = 0.5 * float(y @ Qy) + float(np.log(np.diag(L)).sum()) + 0.5 * logdet_a
    grad = np.empty_like(theta)
    for k in range(d):
        dK = Kf * diff2[:, :, k]
        grad[k] = 0.5 * float(np.sum(Q * dK)) - 0.5 * float(Qy @ dK @ Qy)
    dK = 2.0 * Kf
    grad[d] = 0.5 * float(np.sum(Q * dK)) - 0.5 * float(Qy @ dK @ Qy)
    sn2 = math.exp(2.0 * theta[d + 1])
    grad[d + 1] = sn2 * float(np.trace(Q)) - sn2 * float(Qy @ Qy)
    return nll, grad


def gp_fit(X: np.ndarray, y: np.ndarray) -> GPFit | None:
    """The GP regression of ``y`` on the columns of ``X`` (runs x covariates, transformed); None
    when it cannot be fitted (a constant response, a singular design)."""
    from scipy.optimize import minimize

    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    n, d = X.shape
    y_mean, y_sd = float(y.mean()), float(y.std())
    if not (y_sd > 0 and np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        return None
    mu_x, sd_x = X.mean(axis=0), X.std(axis=0)
    sd_x[sd_x == 0] = 1.0
    Z = (X - mu_x) / sd_x
    ys = (y - y_mean) / y_sd
    H = np.hstack([np.ones((n, 1)), Z])
    bounds = [LOG_LS] * d + [LOG_SF, LOG_SN]
    best = None
    for ls0 in (0.0, math.log(5.0)):
        th0 = np.concatenate([np.full(d, ls0), [math.log(0.5), math.log(0.5)]])
        try:
            res = minimize(_reml, th0, args=(Z, H, ys), jac=True, method="L-BFGS-B", bounds=bounds)
        except (np.linalg.LinAlgError, ValueError):
            continue
        if np.all(np.isfinite(res.x)) and (best is None or res.fun < best.fun):
            best = res
    if best is None:
        return None
    theta = best.x
    try:
        _, _, _, _, Kinv, _, Ainv, Q = _parts(theta, Z, H, ys)
    except np.linalg.LinAlgError:
        return None
    beta = Ainv @ (H.T @ Kinv @ ys)
    alpha = Kinv @ (ys - H @ beta)
    q = np.clip(np.diag(Q), 1e-12, None)
    Qy = Q @ ys
    # the leave-one-out residuals' variance under the fitted GP is 1 / Q_ii: where they are
    # larger (heavy tails, a misjudged noise), every variance is scaled up to match them, as the
    # ridge's residual variance is its residuals'
    inflate = max(1.0, float(np.mean(Qy**2 / q)))
    return GPFit(mu_x, sd_x, y_mean, y_sd, Z, theta, beta, alpha, Kinv, Ainv, Qy / q * y_sd, inflate)
