"""``grpofit rank``: which runs of a sweep will end best, and which to stop now.

Every run is forecast to one common horizon (``--horizon``, else the latest planned end in the
runs' configs, else the last step of the longest run), so runs of different lengths are compared
where they will end, not at the step they share. :func:`~.horizon.horizon_draws` gives each run's
draws of its expected reward there; :func:`judge` turns the runs' draws into joint draws (one
draw of every run per row, independent across runs) and reads off, per run,

- ``p_best``: the share of rows where it is the highest (sums to 1 over the runs with draws);
- ``p_within_margin``: the share of rows where it is within ``margin`` of the row's highest;
- the recommendation (:func:`decide`): ``stop`` when ``p_within_margin < 1 - confidence`` (it
  will not end within the margin of the best, with the stated confidence), ``keep`` when it is
  at least as likely as not to end within the margin, ``cannot tell yet`` otherwise, when the
  run has no draws (too few points, no rise yet), and instead of ``stop`` while the run is still
  rising and speeding up, or its forecast has no upper end (a slow starter: the law's extrapolation of a rise
  under way is not to be trusted with a stop).

The same :func:`judge` decides for the Optuna pruner and the Ray Tune stopper
(:mod:`grpofit.integrations.optuna`, :mod:`grpofit.integrations.ray`); reading the runs and the
document are :mod:`grpofit.commands.rank`'s.
"""

from __future__ import annotations

import numpy as np

__all__ = ["judge", "decide", "step_seconds", "gpu_count", "KEEP", "STOP", "UNSURE"]

KEEP, STOP, UNSURE = "keep", "stop", "cannot tell yet"


def decide(p_within: float | None, confidence: float) -> str:
    """``stop`` / ``keep`` / ``cannot tell yet`` from the probability of ending within the margin."""
    if p_within is None:
        return UNSURE
    if p_within < round(1.0 - confidence, 12):  # 1 - 0.95 is 0.050000000000000044
        return STOP
    return KEEP if p_within >= 0.5 else UNSURE


def judge(
    draws: list[np.ndarray | None],
    *,
    margin: float = 0.01,
    confidence: float = 0.95,
    seed: int = 0,
    open_ended: list[bool] | None = None,
    alive: list[bool] | None = None,
    tolerance: float = 0.0,
) -> list[dict]:
    """Per run ``{"p_best", "p_within_margin", "recommendation"}`` from each run's draws at the
    horizon (None: no draws; such a run takes no part and gets nulls and ``cannot tell yet``).
    ``open_ended[i]``: run i is still rising and speeding up, or its forecast has no upper end
    (:class:`~.horizon.HorizonDraws`): it is never
    stopped (``cannot tell yet`` at worst), since the draws' upper tail that would clear it is
    not known.

    The runs' draws are resampled to one length and stacked column by column, so each row is one
    joint outcome of the sweep (independent across runs); probabilities are shares of rows.

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
    have = [i for i, d in enumerate(draws) if d is not None and np.size(d)]
    out = [{"p_best": None, "p_within_margin": None, "recommendation": UNSURE} for _ in draws]
    if not have:
        return out
    joint = _joint(draws, have, seed)  # (n, runs)
    top = joint.max(axis=1)
    winner = np.argmax(joint, axis=1)
    p_best = np.bincount(winner, minlength=len(have)) / float(joint.shape[0])
    within = (joint >= (top - margin)[:, None]).mean(axis=0)
    pruning = alive is not None or tolerance > 0
    for k, i in enumerate(have):
        pw = float(within[k])
        p = _p_matters(joint, k, [alive is None or alive[j] for j in have], tolerance - margin) if pruning else pw
        verdict = decide(p, confidence)
        if verdict == STOP and open_ended is not None and open_ended[i]:
            verdict = UNSURE
        out[i] = {"p_best": float(p_best[k]), "p_within_margin": pw, "recommendation": verdict}
        if pruning:
            out[i]["p_matters"] = p
    return out


def _joint(draws, have, seed) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = max(np.size(draws[i]) for i in have)
    cols = []
    for i in have:
        d = np.asarray(draws[i], dtype=float).ravel()
        cols.append(d if d.size == n else d[rng.integers(0, d.size, n)])
    return np.column_stack(cols)


def _p_matters(joint: np.ndarray, k: int, alive: list[bool], offset: float) -> float:
    """P(column k, or any column already stopped, ends at least ``offset`` above the best other
    alive column); 1 with none alive. Counting the stopped ones keeps the whole sweep's risk, not
    each stop's, below ``1 - confidence``: stops do not add up (a run let go because a tied run
    was still going is not followed by letting that one go too)."""
    others = [j for j in range(joint.shape[1]) if j != k and alive[j]]
    if not others:
        return 1.0
    ref = joint[:, others].max(axis=1)
    given_up = [k] + [j for j in range(joint.shape[1]) if j != k and not alive[j]]
    return float((joint[:, given_up].max(axis=1) >= ref + offset).mean())


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
