"""``grpofit rank``: which runs of a sweep will end best, and which to stop now.

Every run is forecast to one common horizon (``--horizon``, else the latest planned end in the
runs' configs, else the last step of the longest run), so runs of different lengths are compared
where they will end, not at the step they share. :func:`~.horizon.horizon_draws` gives each run's
draws of its expected reward there; :func:`judge` reads off, per run, from the runs'
distributions there (the runs are forecast independently: integrals over their quantiles),

- ``p_best``: the probability that it ends highest (sums to 1 over the runs with draws);
- ``p_within_margin``: the probability that it ends within ``margin`` of the highest;
- the recommendation (:func:`decide`): ``stop`` when ``p_within_margin < 1 - confidence`` (it
  will not end within the margin of the best, with the stated confidence), ``keep`` when it is
  at least as likely as not to end within the margin, ``cannot tell yet`` otherwise, when the
  run has no draws (too few points, no rise yet), and instead of ``stop`` while the run is still
  rising and speeding up, or its forecast has no upper end (a slow starter: the law's extrapolation of a rise
  under way is not to be trusted with a stop); the safe choice (:func:`_keep_the_safe_choice`)
  is never stopped.

The same :func:`judge` decides for the Optuna pruner and the Ray Tune stopper
(:mod:`grpofit.integrations.optuna`, :mod:`grpofit.integrations.ray`); reading the runs and the
document are :mod:`grpofit.commands.rank`'s.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["judge", "decide", "summarise", "N_QUANTILES", "step_seconds", "gpu_count", "KEEP", "STOP", "UNSURE"]

KEEP, STOP, UNSURE = "keep", "stop", "cannot tell yet"


def _stop_below(confidence: float) -> float:
    """The probability below which a run is stopped: ``1 - confidence`` (rounded: 1 - 0.95 is
    0.050000000000000044)."""
    return round(1.0 - confidence, 12)


def decide(p_within: float | None, confidence: float) -> str:
    """``stop`` / ``keep`` / ``cannot tell yet`` from the probability of ending within the margin."""
    if p_within is None:
        return UNSURE
    if p_within < _stop_below(confidence):
        return STOP
    return KEEP if p_within >= 0.5 else UNSURE


#: quantiles a run's draws at the horizon are kept as (sorted, float32): the ranking reads each
#: run's distribution through them alone, so it holds ~0.5 KB a run, not the draws (9.6 KB)
N_QUANTILES = 128


def summarise(draws) -> np.ndarray | None:
    """The run's draws as :data:`N_QUANTILES` quantiles at ``(i + 0.5) / N`` (sorted, float32);
    fewer draws than that are kept sorted as they are. None without a finite draw."""
    if draws is None:
        return None
    d = np.asarray(draws, dtype=float).ravel()
    d = d[np.isfinite(d)]
    if not d.size:
        return None
    if d.size > N_QUANTILES:
        d = np.quantile(d, (np.arange(N_QUANTILES) + 0.5) / N_QUANTILES)
    return np.sort(d).astype(np.float32)


#: a probability within this many Monte-Carlo errors of a threshold decides nothing by itself
BORDERLINE_ERRORS = 2.0


def near_threshold(p: float, error: float, confidence: float, can_stop: bool = True) -> bool:
    """Whether ``p`` lies within :data:`BORDERLINE_ERRORS` Monte-Carlo errors of a threshold
    :func:`decide` reads (``1 - confidence`` when the run can be stopped, and 0.5): another seed
    may then give the other recommendation."""
    band = BORDERLINE_ERRORS * error
    return bool(abs(p - 0.5) < band or (can_stop and abs(p - _stop_below(confidence)) < band))


def judge(
    draws: list[np.ndarray | None],
    *,
    margin: float = 0.01,
    confidence: float = 0.95,
    seed: int = 0,
    open_ended: list[bool] | None = None,
    alive: list[bool] | None = None,
    tolerance: float = 0.0,
    ess: list[float | None] | None = None,
) -> list[dict]:
    """Per run ``{"p_best", "p_within_margin", "recommendation"}`` from each run's draws at the
    horizon (None: no draws; such a run takes no part and gets nulls and ``cannot tell yet``).
    ``open_ended[i]``: run i is still rising and speeding up, or its forecast has no upper end
    (:class:`~.horizon.HorizonDraws`): it is never
    stopped (``cannot tell yet`` at worst), since the draws' upper tail that would clear it is
    not known.

    The runs are independent, so the probabilities are integrals over the runs' own
    distributions (each run's draws summarised by :func:`summarise`), not shares of rows of
    paired draws: ``p_best[k] = E[prod_{j != k} P(X_j < X_k)]`` over ``X_k``'s draws, and
    ``p_within_margin[k] = E[prod_{j != k} P(X_j <= X_k + margin)]``. Pairing one draw of each
    run per row, as before, added a binomial error of its own (about a point at 1,200 rows) and
    held every run's draws at once; these hold one pass of cumulative sums over the runs'
    quantiles (:func:`_products`), the same for one run or a thousand. ``seed`` is no longer
    read (nothing is random here); kept for the callers.

    ``ess[i]``: the effective number of independent draws behind run i's (the parameter draws'
    importance weights, :attr:`~.horizon.HorizonDraws.ess`); each run's entry then carries
    ``p_best_error`` / ``p_within_error``, the Monte-Carlo standard error of its probabilities
    from its own draws (``sqrt(p (1 - p) / ess)``, the other runs' draws taken as exact), and
    ``borderline``: the probability the recommendation reads is within :data:`BORDERLINE_ERRORS`
    such errors of a threshold (:func:`near_threshold`), so another seed may change it.

    The recommendation reads ``p_within_margin`` unless a pruner passes ``alive`` or
    ``tolerance`` (:class:`~.prune.SweepJudge`): then it reads ``p_matters``, the probability
    that run i ends at least ``tolerance - margin`` above the best of the *other runs still in
    the sweep* (``alive``: not stopped; a stopped run can no longer be the one kept, so it is
    no reference). With ``tolerance`` 0 and every run alive the two are the same number; a
    ``tolerance`` lets a run go that would end at most that much above the best kept (regret
    accepted, so that near-ties are not all run to the end). The runs already stopped count as
    given up with it: ``p_matters`` is the probability that any of them, or run i, ends more than
    that above the best still going, so the risk of the sweep as a whole stays below
    ``1 - confidence``."""
    knots = [summarise(d) for d in draws]
    have = [i for i, q in enumerate(knots) if q is not None]
    out = [{"p_best": None, "p_within_margin": None, "recommendation": UNSURE} for _ in draws]
    if not have:
        return out
    qs = [knots[i] for i in have]
    p_best, within = _products(qs, margin)
    pruning = alive is not None or tolerance > 0
    for k, i in enumerate(have):
        pw = float(within[k])
        p = _p_matters(qs, k, [alive is None or alive[j] for j in have], tolerance - margin) if pruning else pw
        verdict = decide(p, confidence)
        if verdict == STOP and open_ended is not None and open_ended[i]:
            verdict = UNSURE
        out[i] = {"p_best": float(p_best[k]), "p_within_margin": pw, "recommendation": verdict}
        if ess is not None and ess[i]:
            n = max(float(ess[i]), 1.0)
            out[i]["p_best_error"] = math.sqrt(p_best[k] * (1.0 - p_best[k]) / n)
            out[i]["p_within_error"] = math.sqrt(pw * (1.0 - pw) / n)
            can_stop = open_ended is None or not open_ended[i]
            out[i]["borderline"] = near_threshold(p, math.sqrt(p * (1.0 - p) / n), confidence, can_stop)
        if pruning:
            out[i]["p_matters"] = p
    if not pruning:
        _keep_the_safe_choice(out, have, qs)
    return out


#: the share of a run's forecast below its "low end" (the safe choice, :func:`_keep_the_safe_choice`)
SAFE_QUANTILE = 0.025


def _keep_the_safe_choice(out: list[dict], have: list[int], qs: list[np.ndarray]) -> None:
    """Never recommend stopping the run whose forecast's low end (its :data:`SAFE_QUANTILE`
    quantile) is the highest: the best run if every forecast ends at its low end. A run still
    rising has a wide forecast whose upper tail makes every settled run unlikely to end within
    the margin of the best, and stopping them all bets the sweep on that extrapolation: five
    ``simulate bandit`` runs (learning rates 0.02-0.4, one plateau ~0.66) ranked at 20% had the
    slow starter at 0.870 [0.380, 1.00] and the three settled runs, the true best among them,
    all marked ``stop``; the slow starter ended at 0.646, the lowest. The safe choice is marked
    ``safe_choice`` and kept."""
    if len(have) < 2:
        return
    lows = [float(q[min(int(SAFE_QUANTILE * q.size), q.size - 1)]) for q in qs]
    k = int(np.argmax(lows))
    entry = out[have[k]]
    entry["safe_choice"] = True
    if entry["recommendation"] == STOP:
        entry["recommendation"] = KEEP


def _products(qs: list[np.ndarray], margin: float) -> tuple[np.ndarray, np.ndarray]:
    """``(p_best, p_within)`` per run from the runs' sorted quantiles ``qs`` (float32; each run:
    equal masses at its quantiles). ``S(x) = sum_j log F_j(x)`` and the number of runs with
    ``F_j(x) = 0`` are cumulative sums over every run's quantiles, sorted together (one grid of
    distinct values; about 16 bytes per quantile); run k's product over the others is
    ``exp(S - log F_k)`` at its own quantiles. A tie (draws at a bound) is split: ``P(X_j < x)``
    and ``P(X_j <= x)`` averaged, and ``p_best`` normalised to sum to 1."""
    grid = np.concatenate(qs)
    grid.sort()
    grid = grid[np.concatenate(([True], grid[1:] != grid[:-1]))]
    dS = np.zeros(grid.size)
    dZ = np.zeros(grid.size, dtype=np.int32)
    for q in qs:  # run j's CDF jumps at its quantiles: log F_j goes from log(c/n) to log((c+1)/n)
        n = q.size
        c = np.arange(n)
        np.add.at(dS, np.searchsorted(grid, q), np.where(c > 0, np.log1p(1.0 / np.maximum(c, 1)), -math.log(n)))
        dZ[np.searchsorted(grid, q[0])] += 1
    S = np.cumsum(dS, out=dS)  # at grid[g], right-continuous
    Z = len(qs) - np.cumsum(dZ, out=dZ)

    def others(at: np.ndarray, own: np.ndarray, strict: bool) -> np.ndarray:
        """prod_{j != k} F_j at ``at`` (``strict``: P(X_j < at)), given run k's own F_k there."""
        g = np.searchsorted(grid, at, side="left" if strict else "right") - 1  # the last grid value counted
        below = g < 0
        s = np.where(below, 0.0, S[np.maximum(g, 0)])
        z = np.where(below, len(qs), Z[np.maximum(g, 0)]).astype(float)
        zero = own <= 0
        z = z - zero
        with np.errstate(divide="ignore"):
            s = s - np.where(zero, 0.0, np.log(np.where(zero, 1.0, own)))
        return np.where(z > 0.5, 0.0, np.exp(np.minimum(s, 0.0)))

    p_best, within = np.empty(len(qs)), np.empty(len(qs))
    shift = np.float32(margin)
    for k, q in enumerate(qs):
        n = q.size
        best = 0.5 * (
            others(q, np.searchsorted(q, q, side="left") / n, True)
            + others(q, np.searchsorted(q, q, side="right") / n, False)
        )
        p_best[k] = best.mean()
        y = q + shift
        within[k] = others(y, np.searchsorted(q, y, side="right") / n, False).mean()
    total = p_best.sum()
    if total > 0:
        p_best = p_best / total
    return p_best, np.clip(within, 0.0, 1.0)


def _cdf_on(grid: np.ndarray, q: np.ndarray) -> np.ndarray:
    return np.searchsorted(q, grid, side="right") / q.size


def _p_matters(qs: list[np.ndarray], k: int, alive: list[bool], offset: float) -> float:
    """P(run k, or any run already stopped, ends at least ``offset`` above the best other alive
    run); 1 with none alive. Counting the stopped ones keeps the whole sweep's risk, not each
    stop's, below ``1 - confidence``: stops do not add up (a run let go because a tied run was
    still going is not followed by letting that one go too). From the runs' CDFs on their
    quantiles: ``sum_a P(max of the given-up = a) P(max of the others <= a - offset)``."""
    others = [j for j in range(len(qs)) if j != k and alive[j]]
    if not others:
        return 1.0
    given_up = [k] + [j for j in range(len(qs)) if j != k and not alive[j]]
    grid = np.unique(np.concatenate([qs[j] for j in given_up])).astype(float)
    up = np.prod([_cdf_on(grid, qs[j].astype(float)) for j in given_up], axis=0)
    mass = np.diff(np.concatenate([[0.0], up]))
    ref = np.prod([_cdf_on(grid - offset, qs[j].astype(float)) for j in others], axis=0)
    return float(np.clip(np.sum(mass * ref), 0.0, 1.0))


#: columns holding the seconds one step took, and columns of seconds since the start
STEP_TIME_COLUMNS = (
    "timing_s/step",
    "perf/time_per_step",
    "time/step",
    "train/step_time",
    "step_time",
    "time_per_step",
    "timing/step",
)
ELAPSED_COLUMNS = ("_runtime", "train/runtime", "elapsed", "time_elapsed", "wall_time")
GPU_KEYS = (("trainer.n_gpus_per_node", "trainer.nnodes"), ("n_gpus",), ("world_size",), ("num_gpus",))


def step_seconds(run) -> float | None:
    """Median seconds per step from the run's logs (a per-step timing column, or the differences
    of an elapsed-seconds column), or None."""
    for name in STEP_TIME_COLUMNS:
        if name in run.metrics:
            v = run.metrics[name]
            v = v[np.isfinite(v) & (v > 0)]
            if v.size:
                return float(np.median(v))
    for name in ELAPSED_COLUMNS:
        if name in run.metrics:
            s, v = run.series(name)
            if s.size > 2:
                rate = np.diff(v) / np.diff(s)
                rate = rate[np.isfinite(rate) & (rate > 0)]
                if rate.size:
                    return float(np.median(rate))
    return None


def gpu_count(config) -> int | None:
    from grpofit.readers.config import as_number

    for keys in GPU_KEYS:
        vals = [as_number(config.get(k)) for k in keys]
        if all(v is not None and v >= 1 for v in vals):
            return int(round(float(np.prod(vals))))
    return None
