"""The predictive distribution of a run's future, from the state-space likelihood.

For one law and one parameter vector the future expected reward at times ``tf`` given the
seen data is Gaussian (universal kriging, i.e. the Kalman filter's predictive with the levels
integrated out under a flat prior):

    mean = Xf b + K' (y~ - A b)
    cov  = Pff - K'K + (Xf - K'A) (A'A)^-1 (Xf - K'A)'

with ``L L' = Pss + diag(v)``, ``A = L^-1 Xs``, ``y~ = L^-1 y``, ``K = L^-1 Psf`` and ``b`` the
GLS levels. It is the deterministic relaxation from the filtered current state plus the
forcing accumulated over the horizon (theory §6). Parameter uncertainty enters by importance
sampling each law's marginal likelihood (flat prior in log coordinates; proposals from the
Laplace approximation and, for the slowest timescale, uniform over its range), and model
uncertainty by mixing the laws with BIC weights. :func:`sample_future` returns joint draws of the expected reward
(the latent curve) at ``tf``, the draws' observation noise sd, and per-draw curve facts
(plateau, steps to 90/95% of the gain, slowest timescale).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from grpofit.forecasting.likelihood import LOG2PI, LawFit, Series, lags, tri_solve
from grpofit.forecasting.statespace import LAWS, design, process_cov

__all__ = ["Draws", "cluster_ess", "law_weights", "sample_future"]

#: parameter draws per forecast and latent draws per parameter draw
N_PARAM = 80
N_LATENT = 15
#: the parameters' importance weights use the likelihood to the power ``1 / TEMPER``, and the laws'
#: weights ``exp(-dBIC / (2 TEMPER))`` (a tempered, or "power", posterior): the laws approximate a
#: run's shape (a sigmoid rise, a second timescale), and a misspecified model's exact likelihood is
#: overconfident about where a rise ends. The forecast uses it while the run still rises (the
#: rise's end is what the data leave open; a settled run keeps the exact likelihood). Chosen on the
#: tuning grid of benchmarks/forecast_calibration.py (seed 101: 3, 5 and 10 tried), not on its
#: evaluation grid
TEMPER = 5.0


@dataclass
class Draws:
    """Joint draws of the future: ``latent[i, j]`` is draw i's expected reward at ``tf[j]``."""

    tf: np.ndarray
    latent: np.ndarray  #: (N, m)
    obs_sd: np.ndarray  #: (N,) per-point observation sd of the draw (None-free; binomial: 0)
    plateau: np.ndarray  #: (N,)
    t90: np.ndarray  #: (N,) time (from t=0) to 90% of the gain, inf if never, nan if no gain
    t95: np.ndarray
    slow: np.ndarray  #: (N,) the slowest timescale of the draw's law
    law: np.ndarray  #: (N,) index into the fits list
    #: (N,) which parameter draw (over all laws) each draw comes from: the draws of one share it,
    #: so the number of independent draws is about that of the parameter draws (:func:`cluster_ess`)
    theta: np.ndarray | None = None


def law_weights(fits: list[LawFit], temper: float = 1.0) -> np.ndarray:
    """BIC weights ``exp(-dBIC / (2 temper))`` normalised; weights below 1% are dropped."""
    bic = np.array([f.bic for f in fits])
    w = np.exp(-0.5 * (bic - bic.min()) / temper)
    w /= w.sum()
    w[w < 0.01] = 0.0
    return w / w.sum()


def _conditional(fit: LawFit, theta, series: Series, tf: np.ndarray, rng):
    """``(mean, cov, beta, beta_cov, sigma, times, nll)``: the latent at ``tf`` given the seen
    points for one ``theta`` (levels integrated out under their prior), the levels' posterior,
    the drawn observation sd (unknown noise: its scale from the scaled inverse chi-square, so
    the predictive is Student-t) and the negative log marginal likelihood."""
    from grpofit.forecasting.walk import walk_q, walk_system

    q = walk_q(fit, theta)
    fast = _filtered(fit, theta, q, series, tf, rng)
    if fast is not None:
        return fast
    times, sd, Xs, b0, Sb, S = walk_system(fit.law, theta, series, walk=q > 0)
    ts = series.t
    Xf = design(fit.law, tf, times)
    L = np.linalg.cholesky(S)
    w = tri_solve(L, series.y - Xs @ b0)
    # |t - s| and min(s, t) do not depend on theta: computed once per (series, tf)
    lag_sf, min_sf = lags(series, ts, tf, key="lags_sf")
    lag_ff, min_ff = lags(series, tf, tf, key="lags_ff")
    Psf = process_cov(fit.law, ts, tf, times, sd, lag=lag_sf)
    Pff = process_cov(fit.law, tf, tf, times, sd, lag=lag_ff)
    if q > 0:
        Psf = Psf + q * min_sf  # walk_cov(ts, tf, q)
        Pff = Pff + q * min_ff  # walk_cov(tf, tf, q)
    K = tri_solve(L, Psf + Xs @ Sb @ Xf.T)
    V = tri_solve(L, Xs @ Sb)
    mean = Xf @ b0 + K.T @ w
    cov = Pff + Xf @ Sb @ Xf.T - K.T @ K
    beta = b0 + V.T @ w
    beta_cov = Sb - V.T @ V
    n = ts.size
    q = float(w @ w)
    logdet = 2.0 * float(np.sum(np.log(np.diag(L))))
    sigma = None
    if fit.known_noise:
        nll = 0.5 * (q + logdet + n * LOG2PI)
    else:
        nll = 0.5 * (n * math.log(max(q / n, 1e-300)) + logdet + n * (LOG2PI + 1.0))
        s2 = q / rng.chisquare(n)
        cov, beta_cov, sigma = cov * s2, beta_cov * s2, math.sqrt(s2)
    return mean, 0.5 * (cov + cov.T), beta, 0.5 * (beta_cov + beta_cov.T), sigma, times, nll


def _filtered(fit: LawFit, theta, q: float, series: Series, tf: np.ndarray, rng):
    """:func:`_conditional` by the compiled filter (:func:`~.filtered.filtered_conditional`, the
    same Gaussian conditional to round-off, in time linear in the seen points), or ``None`` where
    it does not apply (then the dense conditional runs)."""
    from grpofit.forecasting.filtered import filtered_conditional

    law_theta = theta[:-1] if getattr(fit, "walk", False) else theta
    got = filtered_conditional(fit.law, law_theta, q, series, tf)
    if got is None:
        return None
    mean, cov, beta, beta_cov, nll, quad = got
    sigma = None
    if not fit.known_noise:
        s2 = quad / rng.chisquare(series.t.size)
        cov, beta_cov, sigma = cov * s2, beta_cov * s2, math.sqrt(s2)
    return mean, cov, beta, beta_cov, sigma, LAWS[fit.law].from_log(law_theta), nll


def _gain_times(law: str, times, betas: np.ndarray, fractions=(0.9, 0.95)) -> np.ndarray:
    """Times at which the deterministic curve has covered each fraction of its gain for good:
    shape ``(len(betas), len(fractions))``; ``inf`` beyond 60 slowest timescales, ``nan``
    without a gain."""
    grid = np.concatenate([[0.0], np.geomspace(min(times) * 1e-3, max(times) * 60.0, 400)])
    cols = LAWS[law].columns(grid, times)
    if len(cols) > 1:  # amplitudes of their own (``two``): the shape differs between draws
        amps = [betas[:, i : i + 1] for i in range(1, len(cols) + 1)]
        total = sum(amps[1:], amps[0])
        with np.errstate(all="ignore"):
            g = sum((a * c for a, c in zip(amps[1:], cols[1:])), amps[0] * cols[0]) / total
        g[np.abs(total[:, 0]) < 1e-12] = np.nan
        return _crossings(grid, g, fractions)
    # one shape for every draw (the amplitude cancels): computed once
    return np.repeat(_crossings(grid, cols[0][None, :], fractions), betas.shape[0], axis=0)


def _gain_times_link(law: str, times, betas: np.ndarray, unlink, fractions=(0.9, 0.95)) -> np.ndarray:
    """:func:`_gain_times` for a law fitted on a link of the metric (:mod:`.bounds`): the share of
    the gain is taken on the metric itself, ``unlink`` of each draw's deterministic curve. The
    draws are taken :data:`GAIN_BLOCK` at a time: a large temporary costs more in page faults
    than in arithmetic (a fresh 1,200 x 401 array faults ~1,000 pages at each operation)."""
    grid = np.concatenate([[0.0], np.geomspace(min(times) * 1e-3, max(times) * 60.0, 400)])
    X = design(law, grid, times)  # (grid, levels)
    out = np.empty((betas.shape[0], len(fractions)))
    for i in range(0, betas.shape[0], GAIN_BLOCK):
        b = betas[i : i + GAIN_BLOCK]
        with np.errstate(all="ignore"):
            curve = unlink(b @ X.T)  # (draws, grid)
            end = unlink(b[:, 0])[:, None]
            total = curve[:, :1] - end
            g = (curve - end) / total
        g[np.abs(total[:, 0]) < 1e-12] = np.nan
        out[i : i + GAIN_BLOCK] = _crossings(grid, g, fractions)
    return out


#: rows of draws whose gain times are taken together (:func:`_gain_times_link`)
GAIN_BLOCK = 64


def _crossings(grid: np.ndarray, g: np.ndarray, fractions) -> np.ndarray:
    """Per row of ``g`` (the remaining share of the gain on ``grid``), the time after which it
    stays within each ``1 - fraction`` (see :func:`_gain_times`)."""
    out = np.empty((g.shape[0], len(fractions)))
    absg = np.abs(g)
    for j, frac in enumerate(fractions):
        level = 1.0 - frac
        above = absg > level
        # the last grid point still above the level (index 0 is always above: |g(0)| = 1)
        last = grid.size - 1 - np.argmax(above[:, ::-1], axis=1)
        nxt = np.minimum(last + 1, grid.size - 1)
        rows = np.arange(g.shape[0])
        g0, g1 = absg[rows, last], absg[rows, nxt]
        with np.errstate(all="ignore"):
            w = np.where(g0 != g1, (g0 - level) / (g0 - g1), 0.0)
        val = grid[last] + np.clip(w, 0.0, 1.0) * (grid[nxt] - grid[last])
        val[last >= grid.size - 1] = np.inf
        val[~above.any(axis=1)] = 0.0
        val[np.isnan(g).any(axis=1)] = np.nan
        out[:, j] = val
    return out


def _mvn_logpdf(x: np.ndarray, mean: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """Log density of a multivariate normal at the rows of ``x`` (``cov`` positive definite)."""
    w, V = np.linalg.eigh(cov)
    w = np.maximum(w, 1e-300)
    z = (x - mean) @ V / np.sqrt(w)
    return -0.5 * (np.sum(z * z, axis=1) + np.sum(np.log(w)) + mean.size * LOG2PI)


def _propose(fit: LawFit, count: int, rng):
    """Parameter proposals and their log density: half from the Laplace Gaussian widened 1.5x,
    half with the slowest timescale uniform (in log) over its whole range: a plateau the data
    have not reached leaves that timescale unidentified, and a Gaussian around its best value
    would hide the runs that saturate soon and those that keep rising."""
    theta, lo, hi = fit.theta, fit.lower, fit.upper
    cov = 2.25 * fit.theta_cov
    j = LAWS[fit.law].slow_index  # the coordinate of ``theta`` that sets the slowest timescale
    n1 = count // 2
    a = rng.multivariate_normal(theta, cov, size=n1, method="eigh")
    b = rng.multivariate_normal(theta, cov, size=count - n1, method="eigh")
    b[:, j] = rng.uniform(lo[j], hi[j], size=count - n1)
    th = np.vstack([theta[None, :], a, b])
    th = th[np.all((th >= lo) & (th <= hi), axis=1)]
    others = [i for i in range(theta.size) if i != j]
    lq1 = _mvn_logpdf(th, theta, cov)
    lq2 = _mvn_logpdf(th[:, others], theta[others], cov[np.ix_(others, others)]) - math.log(hi[j] - lo[j])
    return th, np.logaddexp(lq1, lq2) + math.log(0.5)


def sample_future(
    fits: list[LawFit],
    series: Series,
    tf: np.ndarray,
    *,
    seed: int = 0,
    n_param: int = N_PARAM,
    n_total: int = N_PARAM * N_LATENT,
    unlink=None,
    temper: float = 1.0,
    gain_times: bool = True,
) -> Draws:
    """Joint draws of the latent expected reward at ``tf``, mixed over laws (BIC weights) and
    over each law's parameters (importance sampling of its marginal likelihood, flat prior in
    the log coordinates within the bounds). ``unlink``: the series is a link of the metric
    (:mod:`.bounds`); the steps to 90/95% of the gain are then taken on the metric. The draws
    themselves stay in the series' coordinates. ``temper``: the likelihood's power is
    ``1 / temper`` in the parameters' and the laws' weights (:data:`TEMPER`). ``gain_times=False``:
    the steps to 90/95% of the gain are not taken (``nan``); every other draw is the same."""
    rng = np.random.default_rng(seed)
    tf = np.asarray(tf, dtype=float)
    weights = law_weights(fits, temper)
    latent, obs_sd, plateau, t90, t95, slow, which, group = [], [], [], [], [], [], [], []
    for li, (fit, lw) in enumerate(zip(fits, weights)):
        if lw <= 0:
            continue
        thetas, logq = _propose(fit, max(20, int(round(lw * n_param))), rng)
        cands, logw = [], []
        for theta, lq in zip(thetas, logq):
            with np.errstate(all="ignore"):
                try:
                    out = _conditional(fit, theta, series, tf, rng)
                except (np.linalg.LinAlgError, ValueError):
                    continue
            if not (np.all(np.isfinite(out[0])) and np.all(np.isfinite(out[1])) and math.isfinite(out[6])):
                continue
            cands.append(out)
            logw.append(-out[6] / temper - lq)
        if not cands:
            continue
        logw = np.asarray(logw)
        w = np.exp(logw - logw.max())
        w /= w.sum()
        per = rng.multinomial(int(round(lw * n_total)), w)
        used = [(c, int(k)) for c, k in zip(cands, per) if k > 0]
        if not used:
            continue
        # the covariances' square roots for every parameter draw at once (one batched
        # eigendecomposition each); the normal draws come in the same order as one
        # ``standard_normal`` and one ``multivariate_normal(method="eigh")`` per parameter draw
        ev, V = np.linalg.eigh(np.stack([c[1] for c, _ in used]))
        roots = V * np.sqrt(np.maximum(ev, 0.0))[:, None, :]
        bev, bV = np.linalg.eigh(np.stack([c[3] for c, _ in used]))
        broots = bV * np.sqrt(np.abs(bev))[:, None, :]
        for j, ((mean, _, beta, _, sigma, times, _), k) in enumerate(used):
            latent.append(mean + rng.standard_normal((k, tf.size)) @ roots[j].T)
            b = beta + rng.standard_normal((k, beta.size)) @ broots[j].T
            plateau.extend(b[:, 0])
            obs_sd.append(np.full(k, 0.0 if sigma is None else sigma))
            slow.append(np.full(k, LAWS[fit.law].slowest(times)))
            which.append(np.full(k, li))
            group.append(np.full(k, len(group)))
            if not gain_times:
                gt = np.full((k, 2), np.nan)
            elif unlink is None:
                gt = _gain_times(fit.law, times, b)
            else:
                gt = _gain_times_link(fit.law, times, b, unlink)
            t90.extend(gt[:, 0])
            t95.extend(gt[:, 1])
    if not latent:
        raise ValueError("no usable draw")
    return Draws(
        tf,
        np.concatenate(latent),
        np.concatenate(obs_sd),
        np.asarray(plateau),
        np.asarray(t90),
        np.asarray(t95),
        np.concatenate(slow),
        np.concatenate(which),
        np.concatenate(group),
    )


def cluster_ess(values: np.ndarray, groups: np.ndarray, probs=(0.1, 0.25, 0.5, 0.75, 0.9)) -> float:
    """The effective number of independent draws behind a share of ``values`` that come in
    groups (the draws of one parameter draw share it): for the indicator of each quantile
    ``probs`` of the values, ``p (1 - p) / var`` with ``var`` the grouped (importance-sampling)
    variance of the share, ``sum_c n_c^2 (share_c - p)^2 / N^2``; the smallest over ``probs``.
    Draws of one group that all fall on the same side count as one, draws that spread across
    the quantile as nearly independent."""
    values = np.asarray(values, dtype=float)
    groups = np.asarray(groups, dtype=np.int64)
    n = values.size
    if not n:
        return 0.0
    counts = np.bincount(groups).astype(float)
    used = counts > 0
    out = float(n)
    for p in probs:
        below = values <= np.quantile(values, p)
        share = below.mean()
        if not 0.0 < share < 1.0:
            continue
        per = np.bincount(groups, weights=below.astype(float))[used] / counts[used]
        var = float(np.sum(counts[used] ** 2 * (per - share) ** 2)) / n**2
        if var > 0:
            out = min(out, share * (1.0 - share) / var)
    return out
