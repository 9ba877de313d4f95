"""The pruning decision for a sweep in progress, shared by the Optuna pruner and the Ray Tune stopper.

:class:`SweepJudge` holds what each trial has reported (step, reward) and whether it has ended,
and answers :meth:`SweepJudge.should_stop` for one trial: at checkpoints (the first at
``min_step``, then every ``check_every`` steps of that trial) every trial is forecast to the
horizon (:func:`~.horizon.horizon_draws`, cached per trial: the trial decided on is forecast
afresh, the others are reforecast once they have moved on by a checkpoint interval, so a round
of decisions costs about one forecast per trial) and the trial is stopped when
:func:`~.rank.judge` says ``stop``: the probability that it, or any trial stopped before it,
ends at least ``tolerance - margin`` above the best of the other trials still in the sweep is
below ``1 - confidence`` (so the risk is the sweep's, not each stop's). ``margin`` keeps the trials
that may end within it of the best; ``tolerance`` lets a trial go that would end at most that
much above the best one kept (regret accepted: near-ties are not all run to the end). A stopped
trial is no reference (it can no longer be the one kept), so of two tied trials one is let go,
never both. A trial is never stopped while its forecast has no upper
end or it is still rising and speeding up (a slow starter). Trials that have ended take part with
their known level; trials not yet forecastable take no part (they can only make the decision
more cautious if they did). Between checkpoints a report costs a dictionary update.

``population=True`` lets the sweep's finished trials (two or more that ran to the horizon and
were not stopped) speak for a trial its own forecast cannot judge: when the trial decided on has
no forecast yet, or an open-ended one (still rising and speeding up, or no upper end), a
population prior is built from the finished trials (:func:`~.prior.build_prior`, once per set
of finished trials) and the trial's draws at the horizon are the prior-combined forecast's
(:func:`sibling_draws`), which the prior's own similarity check tempers for a trial unlike its
siblings. A trial whose own forecast is not open-ended is judged on it alone. In a parallel sweep
no trial has finished at the early checkpoints, so the option acts late or not at all; and on the
sweeps of docs/sweeps.md the prior's 95% band at 10-30% of the horizon was about as wide as the
run's own forecast's (0.1 narrower on some generated sweeps, wider on the real ones; a run unlike
the finished ones, which is what a clear loser is, gets a prior tempered to nothing), so it
changes few decisions: in the sequential replays it saved 0-8 points of compute, killing no best.

Decisions more often (``check_every`` a twentieth of the horizon, ``min_step`` a tenth) stop clear
losers sooner; each decision costs a forecast of the trial decided on (about 1.5 CPU-seconds for
a few hundred points), so the cost per report grows with the number of decisions: a decision at
every report is out of reach of a budget of milliseconds per report.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["SweepJudge", "sibling_draws", "sibling_prior"]

#: a trial has finished, for the population prior, once it reported this share of the horizon
FINISHED = 0.95


def sibling_prior(items, *, seed: int = 0):
    """A population prior from the sweep's finished trials, ``(name, steps, values)`` each (two
    or more; None with fewer, or when fewer than two can be summarised)."""
    from grpofit.forecasting.prior import build_prior

    if len(items) < 2:
        return None
    prior = build_prior([(str(n), s, v, {}) for n, s, v in items], seed=seed)
    return prior if len(prior.runs) >= 2 else None


def sibling_draws(prior, steps, values, horizon: float, *, seed: int = 0, n: int = 1200):
    """Draws of a trial's level at ``horizon`` from the population prior combined with its
    ``(steps, values)`` seen (:meth:`~.prior.Prior.forecast`, the level over the horizon's last
    tenth, as the trials' true final levels are): ``n`` quantiles of a distribution through the
    forecast's published median and 80/95% interval ends (piecewise linear in the normal score,
    extended past the 95% ends with the outer segments' slopes), inside [0, 1] when the trial's
    values are. None when the forecast gives no interval."""
    from statistics import NormalDist

    steps = np.asarray(steps, dtype=float)
    values = np.asarray(values, dtype=float)
    if steps.size < 4:
        return None
    span = float(horizon) - float(steps[0])
    final = np.linspace(float(horizon) - 0.1 * span, float(horizon), 20)
    per_step = steps.size / max(float(steps[-1] - steps[0]), 1.0)
    n_final = max(1, int(round(0.1 * span * per_step)))
    pf = prior.forecast(steps, values, final, n_final=n_final, seed=seed)
    f = pf.final or {}
    if f.get("median") is None or not f.get("pi95") or not f.get("pi80"):
        return None
    z = np.array([-1.959964, -1.281552, 0.0, 1.281552, 1.959964])
    q = np.array([f["pi95"][0], f["pi80"][0], f["median"], f["pi80"][1], f["pi95"][1]], dtype=float)
    if not np.all(np.isfinite(q)):
        return None
    q = np.maximum.accumulate(q)
    nd = NormalDist()
    u = nd.inv_cdf
    zs = np.array([u((i + 0.5) / n) for i in range(n)])
    out = np.interp(zs, z, q)
    lo, hi = zs < z[0], zs > z[-1]
    out[lo] = q[0] + (zs[lo] - z[0]) * (q[1] - q[0]) / (z[1] - z[0])
    out[hi] = q[-1] + (zs[hi] - z[-1]) * (q[-1] - q[-2]) / (z[-1] - z[-2])
    if values.size and values.min() >= 0.0 and values.max() <= 1.0:
        out = np.clip(out, 0.0, 1.0)
    return out


@dataclass
class _Trial:
    steps: list = field(default_factory=list)
    values: list = field(default_factory=list)
    ended: bool = False
    next_check: float = 0.0
    stopped: bool = False


class SweepJudge:
    """Forecast-based stopping for the trials of one sweep (see the module docstring).

    ``horizon``: the step every trial would end at; ``maximize``: False for a loss;
    ``min_step``: the first decision (default a fifth of the horizon); ``check_every``: steps
    between two decisions for one trial (default a fifth of the horizon). The defaults
    (``tolerance`` 0, ``confidence`` 0.95, ``margin`` 0) never killed the true best run on the
    sweeps of docs/sweeps.md; ``tolerance=0.01, confidence=0.9, check_every=horizon/10`` (the rule
    ``python -m benchmarks.sweep_rule`` chose on generated sweeps) saves more compute but let a
    near-tied best go in 17% of the generated sweeps and 20-40% of the real ones there.
    ``tolerance`` and ``margin`` are in the metric's units."""

    def __init__(
        self,
        horizon: float,
        *,
        margin: float = 0.0,
        confidence: float = 0.95,
        tolerance: float = 0.0,
        check_every: float | None = None,
        min_step: float | None = None,
        maximize: bool = True,
        seed: int = 0,
        population: bool = False,
    ):
        if not horizon or horizon <= 0:
            raise ValueError("horizon must be the positive step every trial would end at")
        if not 0.5 < confidence < 1:
            raise ValueError("confidence must lie between 0.5 and 1")
        if not (np.isfinite(tolerance) and tolerance >= 0):
            raise ValueError("tolerance must be a reward difference >= 0")
        self.tolerance = float(tolerance)
        self.horizon = float(horizon)
        self.margin = float(margin)
        self.confidence = float(confidence)
        self.check_every = float(check_every or self.horizon / 5.0)
        self.min_step = float(self.horizon / 5.0 if min_step is None else min_step)
        self.sign = 1.0 if maximize else -1.0
        self.seed = seed
        self.population = bool(population)
        self._prior: tuple = ((), None)  #: (the finished trials it was built from, the prior)
        self.trials: dict = {}
        self._cache: dict = {}
        self.decisions: list = []  #: (trial, step, p_matters, stopped) per decision made

    def observe(self, trial, step: float, value: float) -> None:
        t = self.trials.setdefault(trial, _Trial(next_check=self.min_step))
        if t.steps and step <= t.steps[-1]:  # a repeated or out-of-order report replaces nothing
            return
        if np.isfinite(value):
            t.steps.append(float(step))
            t.values.append(self.sign * float(value))

    def end(self, trial) -> None:
        self.trials.setdefault(trial, _Trial()).ended = True

    def replace(self, trial, steps, values, *, ended: bool = False, stopped: bool | None = None) -> None:
        """Set a trial's whole history (the Optuna pruner reads it from the study each time);
        ``stopped``: the trial was stopped early (pruned), so it can no longer be the one kept."""
        t = self.trials.setdefault(trial, _Trial(next_check=self.min_step))
        pairs = [(float(s), float(v)) for s, v in zip(steps, values) if np.isfinite(v)]
        t.steps = [s for s, _ in pairs]
        t.values = [self.sign * v for _, v in pairs]
        t.ended = ended
        if stopped is not None:
            t.stopped = stopped

    def _draws(self, key, t: _Trial, tolerance: float):
        """The trial's draws at the horizon; a forecast is reused until the trial has reported
        ``tolerance`` more steps (or ended), so a round of decisions costs about one forecast
        per trial, not one per trial per report."""
        from grpofit.forecasting.horizon import horizon_draws

        n = len(t.steps)
        if not n:
            return None
        last = t.steps[-1]
        hit = self._cache.get(key)
        if hit is not None and hit[0] == t.ended and (hit[1] == last or (not t.ended and last - hit[1] < tolerance)):
            return hit[2]
        # lean: the draws and the entry alone (the same numbers), ~15 KB kept per trial, not ~400 KB
        res = horizon_draws(np.asarray(t.steps), np.asarray(t.values), self.horizon, seed=self.seed, lean=True)
        res.forecast = None
        self._cache[key] = (t.ended, last, res)
        return res

    def finished(self, exclude=None) -> list:
        """The trials that ran to the horizon (not stopped), in the order they were first seen."""
        return [
            k
            for k, t in self.trials.items()
            if k != exclude and not t.stopped and t.steps and t.steps[-1] >= FINISHED * self.horizon
        ]

    def _from_siblings(self, trial, t: _Trial):
        """The trial's draws at the horizon from the finished trials' prior (None: fewer than two)."""
        done = tuple(self.finished(exclude=trial))
        if len(done) < 2:
            return None
        if self._prior[0] != done:
            items = [(k, self.trials[k].steps, self.trials[k].values) for k in done]
            self._prior = (done, sibling_prior(items, seed=self.seed))
        prior = self._prior[1]
        if prior is None:
            return None
        return sibling_draws(prior, t.steps, t.values, self.horizon, seed=self.seed)

    def should_stop(self, trial) -> bool:
        """Whether ``trial`` should stop now (only at its checkpoints; False otherwise)."""
        from grpofit.forecasting.rank import STOP, judge

        t = self.trials.get(trial)
        if t is None or t.ended or not t.steps:
            return False
        if t.stopped:
            return True
        step = t.steps[-1]
        if step < t.next_check or step >= self.horizon:
            return False
        while t.next_check <= step:
            t.next_check += self.check_every
        # the trial decided on: from (nearly) all it has reported; the others: from their last
        # forecast unless they have moved on by a whole checkpoint interval (so each trial is
        # forecast about once per interval: at its own checkpoint, or when first needed)
        keys = list(self.trials)
        res = [self._draws(k, self.trials[k], (0.1 if k == trial else 1.0) * self.check_every) for k in keys]
        draws = [None if r is None else r.draws for r in res]
        opened = [r is not None and r.open_ended for r in res]
        me = keys.index(trial)
        if self.population and (draws[me] is None or opened[me]):
            own = self._from_siblings(trial, t)
            if own is not None:
                draws[me], opened[me] = own, False
        if draws[me] is None:
            return False
        verdicts = judge(
            draws,
            margin=self.margin,
            confidence=self.confidence,
            seed=self.seed,
            open_ended=opened,
            alive=[not self.trials[k].stopped for k in keys],
            tolerance=self.tolerance,
        )
        v = verdicts[keys.index(trial)]
        t.stopped = v["recommendation"] == STOP
        self.decisions.append((trial, step, v["p_matters"], t.stopped))
        return t.stopped
