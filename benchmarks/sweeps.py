"""``python -m benchmarks.sweeps``: forecast-based pruning against successive halving / ASHA and
the median rule, paired on the same sweeps.

Every sweep is replayed, report by report, under each method; the methods are the libraries' own
implementations:

- **sequential** (Optuna's usual single-worker study: one trial after another, in a random
  order seeded by the sweep's name): grpofit's :class:`~grpofit.integrations.optuna.GrpofitPruner`, Optuna's
  ``MedianPruner`` and ``SuccessiveHalvingPruner`` (their defaults, and one tuned setting);
- **parallel** (a Ray Tune sweep: every trial running at once, results arriving step by step):
  grpofit's :class:`~grpofit.integrations.ray.GrpofitStopper`, Ray's ``ASHAScheduler`` and
  ``MedianStoppingRule`` (defaults and a tuned setting), driven through their
  ``on_trial_add`` / ``on_trial_result`` interface with real ``Trial`` objects. Results of the
  same step arrive in an order seeded by the sweep's name: Ray's rungs never stop the first
  trial to reach them, so an order by the trial's index would favour trial 0 (``--tie-check``).

``--frontier`` also replays a grid of each baseline's settings, so that grpofit's regret is
compared with each family's at no more compute; every sweep records the oracle bounds
(:func:`oracle_bounds`): what a rule that knows the final levels, or one that stops a run only
once the data separate it from the best, would use.

Each trial reports the logged reward at every logged step. The run kept as best is the finished
run with the highest observed final level (the mean of its last tenth of logged rewards, what a
user sees). Measured per sweep: **regret** (the true best final level minus the true final level
of the run kept), whether the **true best was killed**, and the **compute** used (steps run,
summed over the runs, as a share of running all to the end). The true final level: generated
sweeps, the exact expected reward (the simulator's ``expected_reward``) over the last 5% of
steps; real sweeps, the mean logged reward over the last tenth up to the common horizon (the
shortest run's last step).

Sweeps: the real ones of ``tests/data/real_logs`` (deepgrpo group-size and gamma sweeps, the
HeteroRL GRPO/GEPO/GSPO trio, the rasbt chapter-7 series) and generated ones (``simulate
bandit`` over a grid of learning rate, momentum, group size and KL weight, the runs of a sweep
in a seeded random order); a generated sweep is
in the *slow starter* stratum when its true best run is below the sweep's median reward at 20% of
the steps. ``--out FILE`` writes the record (JSON); ``docs/sweeps.md`` is rendered from it
(``--doc``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests.reallogs import REAL_LOGS as REAL  # noqa: E402


@dataclass
class Sweep:
    name: str
    kind: str  #: "real", "generated", "generated (slow starter best)"
    names: list
    steps: list  #: per run, steps up to the horizon
    values: list
    truth: np.ndarray  #: true final level per run
    horizon: float
    meta: dict = field(default_factory=dict)


# --- the sweeps -------------------------------------------------------------------------------

REAL_SWEEPS = {  # cheapest first: a measurement stopped early keeps the ones done
    "rasbt ch7.6 (format reward pair)": [
        "rasbt_grpo_qwen3-0.6b_7_6_format_reward.csv",
        "rasbt_grpo_qwen3-0.6b_7_6_format_reward_conditional.csv",
    ],
    "rasbt ch7 (7.3, 7.4, 7.5)": [
        "rasbt_grpo_qwen3-0.6b_7_3_tracking.csv",
        "rasbt_grpo_qwen3-0.6b_7_4_clip_ratio.csv",
        "rasbt_grpo_qwen3-0.6b_7_5_kl_collapse.csv",
    ],
    "HeteroRL GRPO/GEPO/GSPO": ["heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_TrainReward.csv"],
    "deepgrpo group size": ["deepgrpo_wandb_val_gsm8k_groupsize_sweep_qwen2.5-0.5b.csv"],
    "deepgrpo gamma": ["deepgrpo_wandb_val_gsm8k_gamma_sweep_qwen2.5-0.5b.csv"],
}


def real_sweeps() -> list[Sweep]:
    from grpofit.fitting.analysis import resolve_column
    from grpofit.readers import read_path

    out = []
    for name, files in REAL_SWEEPS.items():
        series = []
        for f in files:
            for run in read_path(str(REAL / f)):
                s, v = run.series(resolve_column(run, "reward", None))
                series.append((run.name.split("::")[-1] if "::" in run.name else Path(f).stem, s, v))
        horizon = min(float(s[-1]) for _, s, _ in series)
        names, steps, values, truth = [], [], [], []
        for n, s, v in series:
            keep = s <= horizon
            s, v = s[keep], v[keep]
            names.append(n)
            steps.append(s)
            values.append(v)
            truth.append(float(v[-max(3, v.size // 10) :].mean()))
        out.append(Sweep(name, "real", names, steps, values, np.array(truth), horizon))
    return out


GRID = {
    "lr": (0.02, 0.04, 0.08, 0.16, 0.32),
    "momentum": (0.0, 0.5, 0.8),
    "group_size": (4, 8, 16),
    "beta": (0.2, 0.3, 0.45, 0.6),
}
#: the run planted in every other generated sweep: weak KL (a high plateau) and a small step (a
#: late rise): below the others at 20% of the steps, best at the end
SLOW = {"lr": 0.02, "momentum": 0.8, "group_size": 8, "beta": 0.2}


def generated_sweeps(count: int, *, runs: int = 6, steps: int = 400, seed: int = 0) -> list[Sweep]:
    """``count`` sweeps of ``runs`` bandit runs each (16 arms, one correct, 4 groups per step),
    configurations drawn from :data:`GRID`; odd sweeps plant :data:`SLOW` and draw the others
    with the stronger KL weights (0.45, 0.6). The stratum is read from the outcome, not the plan.
    ``seed`` 0 names them ``bandit sweep K``; another seed, ``bandit sweep K (seed S)``."""
    from grpofit.dynamics.simulation import simulate_bandit

    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        names, st, vals, truth, early = [], [], [], [], []
        for j in range(runs):
            cfg = {key: GRID[key][rng.integers(len(GRID[key]))] for key in GRID}
            if k % 2 == 1:
                cfg = dict(SLOW) if j == 0 else {**cfg, "beta": (0.45, 0.6)[rng.integers(2)]}
            r = simulate_bandit(
                arms=16, correct=1, groups=4, steps=steps, seed=int(rng.integers(1 << 30)), measure=False, **cfg
            )
            p = r.columns["expected_reward"]
            s, v = r.columns["step"], r.columns["reward"]
            n = s.size
            names.append(f"lr{cfg['lr']}-mu{cfg['momentum']}-G{cfg['group_size']}-kl{cfg['beta']}-{j}")
            st.append(s)
            vals.append(v)
            truth.append(float(p[-max(2, n // 20) :].mean()) if n == steps else 0.0)
            early.append(float(p[: max(1, steps // 5)][-max(2, steps // 50) :].mean()))
        # the runs in a seeded random order (the same runs as before): the planted run is not
        # always the first trial, which a parallel sweep's ties would favour
        perm = np.random.default_rng([seed, k, 7]).permutation(runs)
        names, st, vals = [names[i] for i in perm], [st[i] for i in perm], [vals[i] for i in perm]
        truth, early = np.array(truth)[perm], [early[i] for i in perm]
        slow = early[int(np.argmax(truth))] < float(np.median(early))
        out.append(
            Sweep(
                f"bandit sweep {k}" + (f" (seed {seed})" if seed else ""),
                "generated (slow starter best)" if slow else "generated",
                names,
                st,
                vals,
                truth,
                float(steps),
            )
        )
    return out


# --- the replays -------------------------------------------------------------------------------


class ForecastMemo:
    """:func:`~grpofit.forecasting.horizon.horizon_draws` memoised on its exact inputs (the steps'
    and values' bytes, the horizon, the seed): the function is deterministic, so a hit returns
    what the call would. Several grpofit settings, both harnesses and :mod:`benchmarks.sweep_rule`
    then share one forecast of the same points. A hit is charged the seconds (wall, CPU) the
    forecast took when computed (``charged``), so the cost per report stays the forecast's.
    Kept per sweep in ``directory`` (a file per sweep name) when given; :meth:`install` puts it
    in place of ``horizon_draws`` for :class:`~grpofit.forecasting.prune.SweepJudge`."""

    def __init__(self, directory: str | None = None):
        self.directory = Path(directory) if directory else None
        self.table: dict = {}
        self.charged = [0.0, 0.0]
        self.name: str | None = None

    def _file(self, name: str) -> Path:
        return self.directory / (zlib.crc32(name.encode()).to_bytes(4, "big").hex() + ".pkl")

    def load(self, name: str) -> None:
        import pickle

        self.name = name
        self.table = {}
        if self.directory is not None and self._file(name).exists():
            self.table = pickle.loads(self._file(name).read_bytes())

    def save(self) -> None:
        import pickle

        if self.directory is not None and self.name is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = self._file(self.name).with_suffix(".tmp")
            tmp.write_bytes(pickle.dumps(self.table))
            tmp.replace(self._file(self.name))

    def __call__(self, steps, values, horizon, *, seed: int = 0, **options):
        import hashlib

        from grpofit.forecasting import horizon as module

        s, v = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
        key = hashlib.sha1(
            s.tobytes() + b"|" + v.tobytes() + repr((float(horizon), seed, sorted(options.items()))).encode()
        )
        key = key.hexdigest()
        hit = self.table.get(key)
        if hit is None:
            t0, c0 = time.perf_counter(), time.process_time()
            r = module.horizon_draws_uncached(s, v, horizon, seed=seed, **options)
            slim = module.HorizonDraws(r.draws, {}, r.kind, r.note, None, r.open_ended)
            self.table[key] = hit = (slim, time.perf_counter() - t0, time.process_time() - c0)
        else:
            self.charged[0] += hit[1]
            self.charged[1] += hit[2]
        return hit[0]

    def install(self) -> None:
        from grpofit.forecasting import horizon as module

        if not hasattr(module, "horizon_draws_uncached"):
            module.horizon_draws_uncached = module.horizon_draws
        module.horizon_draws = self


MEMO = ForecastMemo()


def _clock() -> tuple[float, float]:
    """(wall, CPU) seconds, counting a memo hit as the forecast it stands for."""
    return time.perf_counter() + MEMO.charged[0], time.process_time() + MEMO.charged[1]


def _observed_final(v: np.ndarray) -> float:
    return float(v[-max(3, v.size // 10) :].mean())


def _score(sw: Sweep, stopped_at: list) -> dict:
    """Regret, best killed and compute share from where each run stopped (None: ran to the end)."""
    total = sum(float(s[-1] - s[0]) + 1.0 for s in sw.steps)
    used = 0.0
    finished = []
    for i, (s, at) in enumerate(zip(sw.steps, stopped_at)):
        end = float(s[-1]) if at is None else float(at)
        used += end - float(s[0]) + 1.0
        if at is None:
            finished.append(i)
    best = int(np.argmax(sw.truth))
    if finished:
        kept = max(finished, key=lambda i: _observed_final(sw.values[i]))
        regret = float(sw.truth[best] - sw.truth[kept])
    else:
        kept, regret = None, float(sw.truth[best] - sw.truth.min())
    return {
        "regret": regret,
        "best_killed": stopped_at[best] is not None,
        "compute": used / total,
        "kept": None if kept is None else sw.names[kept],
        "stopped": sum(a is not None for a in stopped_at),
    }


def oracle_bounds(sw: Sweep, first: float = 0.2, every: float = 0.05) -> dict:
    """What any rule could save on ``sw``, as compute shares (steps run / steps of running all):

    - ``hindsight``: a rule that knows the final levels stops every run but the true best at the
      first checkpoint (``first`` of the horizon);
    - ``separated``: every run but the true best stopped at the first checkpoint (``first``, then
      every ``every``) from which its level (the mean of the last tenth of the horizon's steps)
      stays below the best run's by more than twice their combined standard error at every later
      checkpoint: the earliest a rule could stop it without betting against what the data show
      so far (a rule that stops sooner is right by luck, and kills a best that only pulls ahead
      later as readily). Runs that never separate run to the end.
    """
    h = sw.horizon
    best = int(np.argmax(sw.truth))
    cps = [c for c in np.arange(first, 1.0 - 1e-9, every) * h]

    def level(i, c):
        s, v = sw.steps[i], sw.values[i]
        w = v[(s <= c) & (s > c - 0.1 * h)]
        if w.size < 2:
            w = v[s <= c][-3:]
        return float(w.mean()), float(w.std(ddof=1) / np.sqrt(w.size)) if w.size > 1 else 0.0

    def share(stop_at):
        total = sum(float(s[-1] - s[0]) + 1.0 for s in sw.steps)
        used = 0.0
        for s, at in zip(sw.steps, stop_at):
            end = float(s[-1]) if at is None else float(s[s >= at][0]) if (s >= at).any() else float(s[-1])
            used += end - float(s[0]) + 1.0
        return used / total

    hind = [None if i == best else cps[0] for i in range(len(sw.names))]
    sep = []
    for i in range(len(sw.names)):
        at = None
        if i != best:
            gaps = []
            for c in cps:
                (a, sa), (b, sb) = level(i, c), level(best, c)
                gaps.append(b - a > 2.0 * np.hypot(sa, sb))
            for j in range(len(cps)):
                if all(gaps[j:]):
                    at = cps[j]
                    break
        sep.append(at)
    return {"hindsight": share(hind), "separated": share(sep)}


def replay_optuna(sw: Sweep, pruner, order: list[int]) -> tuple[list, list]:
    """Sequential study: the runs one after another in ``order``; per report the pruner's time."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    stopped: list = [None] * len(sw.names)
    times = []
    for i in order:
        trial = study.ask()
        s, v = sw.steps[i], sw.values[i]
        pruned = False
        for step, value in zip(s, v):
            trial.report(float(value), int(round(step)))
            t0, c0 = _clock()
            hit = trial.should_prune()
            t1, c1 = _clock()
            times.append((t1 - t0, c1 - c0))
            if hit and step < s[-1]:
                stopped[i] = float(step)
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                pruned = True
                break
        if not pruned:
            study.tell(trial, _observed_final(v))
    return stopped, times


class _Controller:
    """What Ray's schedulers ask of Tune's controller during a replay: the live trials."""

    def __init__(self):
        self.live = []

    def get_live_trials(self):
        return list(self.live)


def replay_ray(sw: Sweep, make) -> tuple[list, list]:
    """Parallel sweep: every run at once, results in step order; ``make()`` is a Ray scheduler or
    a grpofit stopper."""
    from ray.tune.experiment import Trial
    from ray.tune.schedulers import TrialScheduler

    sched = make()
    trials = [Trial("replay", stub=True, trial_id=f"t{i}") for i in range(len(sw.names))]
    ctl = _Controller()
    is_sched = isinstance(sched, TrialScheduler)
    for t in trials:
        t.set_status(Trial.RUNNING)
        ctl.live.append(t)
        if is_sched:
            sched.on_trial_add(ctl, t)
    # results of the same step arrive in an order seeded by the sweep's name (trials that run
    # at the same speed reach a rung in no particular order), not by the trial's index
    rank = trial_order(sw)
    events = sorted((float(step), rank[i], i, k) for i, s in enumerate(sw.steps) for k, step in enumerate(s))
    stopped: list = [None] * len(sw.names)
    done = [False] * len(sw.names)
    times = []
    for step, _, i, k in events:
        if done[i]:
            continue
        result = {"step": step, "reward": float(sw.values[i][k]), "training_iteration": k + 1}
        t0, c0 = _clock()
        if is_sched:
            stop = sched.on_trial_result(ctl, trials[i], result) == TrialScheduler.STOP
        else:
            stop = sched(trials[i].trial_id, result)
        t1, c1 = _clock()
        times.append((t1 - t0, c1 - c0))
        last = k == len(sw.steps[i]) - 1
        if last or stop:
            done[i] = True
            if stop and not last:
                stopped[i] = step
            trials[i].set_status(Trial.TERMINATED)
            ctl.live.remove(trials[i])
            if is_sched:
                sched.on_trial_complete(ctl, trials[i], result)
    return stopped, times


#: grpofit's settings measured: "" is the pruners' defaults (a decision every 20% of the horizon,
#: no tolerance, confidence 0.95); the other is the rule :mod:`benchmarks.sweep_rule` chose on the
#: generator-seed-1 sweeps (a first decision at 20%, then every 10%; tolerance 0.01, confidence
#: 0.9), which saves more and lets near-tied best runs go, measured on the same sweeps.
#: The two "every 5% from 10%" rules (the defaults' thresholds, decisions four times as often,
#: with and without the finished trials' population prior) are measured with ``--only 'every 5%'``
#: for the cost per report of frequent decisions (the record's ``report_cost``).
GRPOFIT_RULES = {
    "": {"schedule": (0.2, 0.2)},  # the defaults' checkpoints, in whole steps
    " (tolerance 0.01, confidence 0.9, every 10%)": {
        "schedule": (0.2, 0.1),
        "margin": 0.0,
        "tolerance": 0.01,
        "confidence": 0.9,
    },
    " (every 5% from 10%)": {"schedule": (0.1, 0.05)},
    " (every 5% from 10%, population)": {"schedule": (0.1, 0.05), "population": True},
}


def methods(horizon: float) -> dict:
    """name -> (harness, factory) for every method, defaults and one tuned setting."""
    import optuna
    from ray.tune.schedulers import ASHAScheduler, MedianStoppingRule

    from grpofit.integrations.optuna import GrpofitPruner
    from grpofit.integrations.ray import GrpofitStopper

    h = int(horizon)
    ours = {}
    for suffix, rule in GRPOFIT_RULES.items():
        kw = {k: v for k, v in rule.items() if k != "schedule"}
        if "schedule" in rule:  # (first, every) as fractions of the horizon; else the pruners' defaults
            first, every = rule["schedule"]
            kw.update(min_step=max(1, int(first * h)), check_every=max(1, int(every * h)))
        ours[f"optuna: grpofit{suffix}"] = ("optuna", lambda kw=kw: GrpofitPruner(h, **kw))
        ours[f"ray: grpofit{suffix}"] = ("ray", lambda kw=kw: GrpofitStopper("reward", h, step_key="step", **kw))
    return {
        **ours,
        "optuna: median (default)": ("optuna", lambda: optuna.pruners.MedianPruner()),
        "optuna: median (tuned)": (
            "optuna",
            lambda: optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=h // 5),
        ),
        "optuna: median (warmup 30%, compute matched)": (
            "optuna",
            lambda: optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=3 * h // 10),
        ),
        "optuna: successive halving (default)": ("optuna", lambda: optuna.pruners.SuccessiveHalvingPruner()),
        "optuna: successive halving (tuned)": (
            "optuna",
            lambda: optuna.pruners.SuccessiveHalvingPruner(min_resource=max(1, h // 10), reduction_factor=3),
        ),
        "ray: ASHA (default)": ("ray", lambda: ASHAScheduler(time_attr="step", metric="reward", mode="max", max_t=h)),
        "ray: ASHA (tuned)": (
            "ray",
            lambda: ASHAScheduler(
                time_attr="step", metric="reward", mode="max", max_t=h, grace_period=max(1, h // 5), reduction_factor=3
            ),
        ),
        "ray: ASHA (grace 30%, compute matched)": (
            "ray",
            lambda: ASHAScheduler(
                time_attr="step",
                metric="reward",
                mode="max",
                max_t=h,
                grace_period=max(1, 3 * h // 10),
                reduction_factor=3,
            ),
        ),
        "ray: median (default)": ("ray", lambda: MedianStoppingRule(time_attr="step", metric="reward", mode="max")),
        "ray: median (tuned)": (
            "ray",
            lambda: MedianStoppingRule(
                time_attr="step", metric="reward", mode="max", grace_period=h // 5, min_samples_required=2
            ),
        ),
    }


def trial_order(sw: Sweep) -> list[int]:
    """The sequential study's trial order, seeded by the sweep's name: a sweep's result does not
    depend on which other sweeps are measured with it, or in what order."""
    return [int(i) for i in np.random.default_rng(zlib.crc32(sw.name.encode())).permutation(len(sw.names))]


def run_sweep(sw: Sweep, only: str | None = None, frontier: bool = False) -> dict:
    out = {
        "sweep": sw.name,
        "kind": sw.kind,
        "runs": len(sw.names),
        "horizon": sw.horizon,
        "true_best": sw.names[int(np.argmax(sw.truth))],
        "methods": {},
    }
    order = trial_order(sw)
    MEMO.load(sw.name)
    for name, (harness, make) in methods(sw.horizon).items():
        if only and only not in name:
            continue
        t0 = time.perf_counter()
        if harness == "optuna":
            stopped, times = replay_optuna(sw, make(), order)
        else:
            stopped, times = replay_ray(sw, make)
        res = _score(sw, stopped)
        res["seconds"] = time.perf_counter() - t0
        wall, cpu = np.array(times).T
        res["per_report_ms"] = {
            "mean": 1e3 * float(wall.mean()),
            "max": 1e3 * float(wall.max()),
            "cpu_mean": 1e3 * float(cpu.mean()),
            "cpu_max": 1e3 * float(cpu.max()),
        }
        out["methods"][name] = res
        MEMO.save()
    out["oracle"] = oracle_bounds(sw)
    if frontier:
        from benchmarks.sweep_rule import baseline_settings

        out["frontier"] = {}
        for name, (harness, make) in baseline_settings(sw.horizon).items():
            stopped, _ = replay_optuna(sw, make(), order) if harness == "optuna" else replay_ray(sw, make)
            out["frontier"][name] = _score(sw, stopped)
    return out


def _one(args):
    sw, only, frontier = args
    return run_sweep(sw, only, frontier)


def merge(paths: list[str]) -> dict:
    """One record from several (e.g. the real and the generated sweeps measured apart). A sweep in
    several records gets the methods of all, a later record's replacing an earlier one's (e.g.
    grpofit re-measured alone with ``--only grpofit``)."""
    by_name: dict = {}
    for p in paths:
        for rec in json.loads(Path(p).read_text())["sweeps"]:
            old = by_name.get(rec["sweep"])
            if old is None:
                by_name[rec["sweep"]] = rec
            else:
                old["methods"] = {**old["methods"], **rec["methods"]}
                old.update({k: v for k, v in rec.items() if k not in ("methods", "frontier") or not old.get(k)})
    recs = list(by_name.values())
    recs.sort(key=lambda r: (r["kind"], r["sweep"]))
    return {
        "method_note": METHOD_NOTE,
        "summary": summarise(recs),
        "frontier": summarise_frontier(recs),
        "sweeps": recs,
    }


def _mean_or_none(xs, f=np.mean):
    xs = [x for x in xs if x is not None]
    return float(f(xs)) if xs else None


def summarise(records: list[dict]) -> dict:
    """Per stratum and method: mean regret, share of sweeps with the true best killed, mean compute."""
    strata = {}
    for rec in records:
        for key in dict.fromkeys(({"real": "real"}.get(rec["kind"], "generated (all)"), rec["kind"])):
            strata.setdefault(key, []).append(rec)
    out = {}
    for key, recs in strata.items():
        names = list(recs[0]["methods"])
        out[key] = {"sweeps": len(recs)}
        for m in names:
            rows = [r["methods"][m] for r in recs if m in r["methods"]]
            out[key][m] = {
                "regret": float(np.mean([x["regret"] for x in rows])),
                "best_killed": float(np.mean([x["best_killed"] for x in rows])),
                "compute": float(np.mean([x["compute"] for x in rows])),
                "per_report_ms_mean": float(np.mean([x["per_report_ms"]["mean"] for x in rows])),
                "per_report_ms_max": float(np.max([x["per_report_ms"]["max"] for x in rows])),
                "per_report_cpu_ms_mean": _mean_or_none([x["per_report_ms"].get("cpu_mean") for x in rows]),
                "per_report_cpu_ms_max": _mean_or_none([x["per_report_ms"].get("cpu_max") for x in rows], np.max),
            }
    return out


FAMILIES = ("ray: ASHA", "ray: median", "optuna: successive halving", "optuna: median")


def summarise_frontier(records: list[dict]) -> dict:
    """Per stratum: each baseline setting of the grid (mean regret, best killed, compute) and the
    oracle bounds (:func:`oracle_bounds`), over the sweeps that have them."""
    strata: dict = {}
    for rec in records:
        for key in dict.fromkeys(({"real": "real"}.get(rec["kind"], "generated (all)"), rec["kind"])):
            strata.setdefault(key, []).append(rec)
    out = {}
    for key, recs in strata.items():
        block: dict = {"settings": {}}
        withf = [r for r in recs if r.get("frontier")]
        for name in withf[0]["frontier"] if withf else ():
            rows = [r["frontier"][name] for r in withf]
            block["settings"][name] = {
                m: float(np.mean([x[m] for x in rows])) for m in ("regret", "best_killed", "compute")
            }
        ors = [r["oracle"] for r in recs if r.get("oracle")]
        if ors:
            block["oracle"] = {m: float(np.mean([o[m] for o in ors])) for m in ors[0]}
        block["sweeps"] = len(withf)
        out[key] = block
    return out


def at_equal_compute(summary: dict, frontier: dict) -> list[dict]:
    """For every grpofit method and every baseline family of its harness: the family's least
    regret among its settings that used no more compute than grpofit (+1 point), per stratum."""
    out = []
    for key, block in summary.items():
        settings = frontier.get(key, {}).get("settings", {})
        for m, ours in block.items():
            if m == "sweeps" or ": grpofit" not in m:
                continue
            harness = m.split(":")[0]
            for fam in FAMILIES:
                if not fam.startswith(harness + ":"):
                    continue
                cands = {n: v for n, v in settings.items() if n.startswith(fam + " ")}
                cheap = {n: v for n, v in cands.items() if v["compute"] <= ours["compute"] + 0.01}
                if not cands:
                    continue
                best = min(cheap.items(), key=lambda kv: (kv[1]["regret"], kv[1]["compute"])) if cheap else None
                out.append(
                    {
                        "stratum": key,
                        "method": m,
                        "ours": {k: ours[k] for k in ("regret", "best_killed", "compute")},
                        "family": fam,
                        "setting": None if best is None else best[0],
                        "theirs": None if best is None else best[1],
                    }
                )
    return out


def render_equal_compute(record: dict) -> list[str]:
    fr = record.get("frontier")
    if not fr:
        return []
    lines = [
        "## At equal compute",
        "",
        "Each baseline replayed over a grid of its settings (`benchmarks.sweep_rule.baseline_settings`: "
        "ASHA and successive halving grace / min resource 5-40% x reduction factor 2-4, the median "
        "rules' warm-up 5-40%); against each grpofit setting, the family's least regret among its "
        "settings that used no more compute (+1 point), picked on the same sweeps (so optimistic for the "
        "baselines). Oracle bounds (`oracle_bounds`): compute of a "
        "rule that knows the final levels and stops every other run at 20% (hindsight), and of one "
        "that stops a run only once its level has stayed more than two standard errors below the "
        "best run's from then on (separated, checked every 5% from 20%).",
        "",
        "| stratum | grpofit | its regret / best killed / compute | baseline family | its best setting at no more compute | regret / best killed / compute |",
        "|---|---|---|---|---|---|",
    ]
    for r in at_equal_compute(record["summary"], fr):
        o, th = r["ours"], r["theirs"]
        theirs = (
            "-" if th is None else f"{th['regret']:.4f} / {100 * th['best_killed']:.0f}% / {100 * th['compute']:.0f}%"
        )
        lines.append(
            f"| {r['stratum']} | {r['method']} | {o['regret']:.4f} / {100 * o['best_killed']:.0f}% / "
            f"{100 * o['compute']:.0f}% | {r['family']} | {r['setting'] or 'none as cheap'} | {theirs} |"
        )
    lines += ["", "| stratum | oracle: hindsight compute | oracle: separated compute |", "|---|---|---|"]
    for key, block in fr.items():
        if "oracle" in block:
            o = block["oracle"]
            lines.append(f"| {key} | {100 * o['hindsight']:.0f}% | {100 * o['separated']:.0f}% |")
    return lines + [""]


def where_we_lose(summary: dict) -> list[str]:
    """Every stratum and harness where a baseline beats grpofit on regret, on the true best kept,
    or on compute at no higher regret; and the targets missed."""
    out = []
    for key, block in summary.items():
        for harness in ("optuna", "ray"):
            ours = block.get(f"{harness}: grpofit")
            if ours is None:
                continue
            for m, v in block.items():
                if m == "sweeps" or not m.startswith(harness + ":") or m.startswith(f"{harness}: grpofit"):
                    continue
                if v["regret"] < ours["regret"] - 1e-9:
                    out.append(
                        f"{key}, {m}: lower regret ({v['regret']:.4f} vs {ours['regret']:.4f}) "
                        f"at {100 * v['compute']:.0f}% compute vs grpofit's {100 * ours['compute']:.0f}%"
                    )
                elif v["compute"] < ours["compute"] - 1e-9 and v["regret"] <= ours["regret"] + 1e-9:
                    out.append(
                        f"{key}, {m}: less compute ({100 * v['compute']:.0f}% vs {100 * ours['compute']:.0f}%) "
                        f"at no higher regret ({v['regret']:.4f} vs {ours['regret']:.4f})"
                    )
            if ours["best_killed"] > 0.05:
                out.append(
                    f"{key}, {harness}: grpofit killed the true best in {100 * ours['best_killed']:.0f}% of sweeps (target <= 5%)"
                )
            if ours["compute"] > 0.60:
                out.append(
                    f"{key}, {harness}: grpofit used {100 * ours['compute']:.0f}% of the compute (target: save >= 40%)"
                )
            cpu = ours.get("per_report_cpu_ms_mean")
            if cpu is not None and cpu > 50:
                out.append(f"{key}, {harness}: grpofit took {cpu:.0f} CPU-ms per report on average (target <= 50)")
            cmax = ours.get("per_report_cpu_ms_max")
            if cmax is not None:
                out.append(
                    f"{key}, {harness}: the costliest single report took {cmax / 1e3:.1f} CPU-seconds "
                    f"({ours['per_report_ms_max'] / 1e3:.0f} s wall on the loaded machine): a checkpoint, "
                    "one forecast per trial that moved"
                )
    return out


def _rule_cells(row: dict, sets: list) -> str:
    return " | ".join(
        f"{row[k][h]['regret']:.4f} / {100 * row[k][h]['best_killed']:.0f}% / {100 * row[k][h]['compute']:.0f}%"
        for k in sets
        for h in ("parallel", "sequential")
    )


def rule_picks(choice: dict) -> list[dict]:
    """Per schedule of checkpoints, without and with the population prior: the row the criterion
    (:func:`benchmarks.sweep_rule.choose`) picks among the offsets and confidences."""
    from benchmarks.sweep_rule import choose

    groups: dict = {}
    for row in choice["table"]:
        groups.setdefault((row["checks_name"], bool(row.get("population"))), []).append(row)
    picks = [choose(rows) for rows in groups.values()]
    defaults = [r for r in choice["table"] if is_default_rule(r) and r not in picks]
    return defaults + picks


def is_default_rule(row: dict) -> bool:
    """The pruners' defaults: a decision every 20% from 20%, no margin or tolerance, 0.95."""
    return (
        row["checks_name"] == "20%, then every 20%"
        and not row.get("population")
        and row["margin"] == 0.0
        and row.get("tolerance", 0.0) == 0.0
        and row["confidence"] == 0.95
    )


RULE_KEYS = ("checks_name", "margin", "tolerance", "confidence", "population")


def render_rule_choice(choice: dict | None) -> list[str]:
    """The table of :mod:`benchmarks.sweep_rule`: per schedule (with and without the population
    prior) the rule the criterion picks on the tune sweeps, its results on the evaluation sweeps
    when measured, the chosen one marked; then the bands of the finished runs' prior."""
    if not choice:
        return []
    sz = choice.get("sizes", {})
    named = sz.get("sets") or {}
    sets = list(named) or [k for k in ("tune", "eval", "real") if k in choice["table"][0]]
    head = " | ".join(f"{k} {h}: regret / best killed / compute" for k in sets for h in ("parallel", "sequential"))
    lines = [
        "## Choosing grpofit's rule on other sweeps",
        "",
        f"`python -m benchmarks.sweep_rule`: {len(named.get('tune', [])) or sz.get('generated')} generated sweeps of generator seed "
        f"{sz.get('tune_seed')} (tune), every rule replayed from forecasts made once per checkpoint"
        + (
            "; evaluated on " + ", ".join(f"{k} ({len(v)} sweeps)" for k, v in named.items() if k != "tune")
            if len(named) > 1
            else ""
        )
        + " (no rule chosen on them). A rule: checkpoints (the first decision, then one every so often), margin, tolerance, "
        "confidence, and whether a trial its own forecast cannot judge (open-ended) is judged on the "
        "population prior of the trials already finished (`population`). Criterion fixed before looking: "
        "the true best killed in at most 5% of the tune sweeps under both harnesses, then the least "
        "compute, then the least regret. Below, per schedule and population setting, the row the "
        f"criterion picks among the {len(choice['table'])} rules (all in docs/sweeps.json), after the pruners' "
        "defaults (first row, *italic*); the one it picks overall in **bold**. Margin: a run that may end within it of the best is kept; tolerance: a "
        "run is let go when it would end at most that much above the best of the runs still going (with "
        "the runs already stopped: regret accepted).",
        "",
        f"| checkpoints | population | margin | tolerance | confidence | {head} |",
        "|---|---|---|---|---|" + "---|" * (2 * len(sets)),
    ]
    chosen = choice["chosen"]
    for row in rule_picks(choice):
        mark = "**" if all(row.get(k) == chosen.get(k) for k in RULE_KEYS) else "*" if is_default_rule(row) else ""
        lines.append(
            f"| {mark}{row['checks_name']}{mark} | {'yes' if row.get('population') else 'no'} | {row['margin']} | "
            f"{row.get('tolerance', 0.0)} | {row['confidence']} | {_rule_cells(row, sets)} |"
        )
    lines.append("")
    return lines + render_bands(choice.get("bands"))


def render_report_cost(rec: dict | None) -> list[str]:
    """The pruners' own replays (Optuna's and Ray's interfaces) of the rules measured for their
    cost per report on a few sweeps (a record of this benchmark run with ``--only``)."""
    if not rec:
        return []
    lines = [
        "## The pruners' cost per report, with a decision every 5%",
        "",
        "The rules with a decision every 5% replayed through the libraries' interfaces on "
        f"{len(rec['sweeps'])} sweeps ({', '.join(r['sweep'] for r in rec['sweeps'])}): a forecast costs "
        "the same wherever it is made, so the cost per report grows with the number of decisions. "
        "A forecast reused from the benchmark's memo is charged what it cost when made.",
        "",
        "| sweep | method | regret | best killed | compute | ms per report, wall (mean / max) | CPU ms per report (mean / max) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rec["sweeps"]:
        for m, v in r["methods"].items():
            pr = v["per_report_ms"]
            lines.append(
                f"| {r['sweep']} | {m} | {v['regret']:.4f} | {'yes' if v['best_killed'] else 'no'} | "
                f"{100 * v['compute']:.0f}% | {pr['mean']:.1f} / {pr['max']:.0f} | {pr['cpu_mean']:.1f} / {pr['cpu_max']:.0f} |"
            )
    return lines + [""]


def render_bands(bands: dict | None) -> list[str]:
    if not bands:
        return []
    lines = [
        "### Does a prior from the finished runs narrow an early band?",
        "",
        "Every run with two or more runs before it in the sequential order, at 10/20/30% of the horizon "
        "(`benchmarks.sweep_rule.bands`): its own forecast's 95% band at the horizon and the band of the "
        "population prior built from the runs before it, with how often each holds the true final level. "
        "Open-ended: own forecasts still rising and speeding up (or missing), on which nothing is stopped.",
        "",
        "| sweeps | cut | runs | own open-ended | own band: width / holds truth (runs) | prior band: width / holds truth (runs) |",
        "|---|---|---|---|---|---|",
    ]
    for key, block in bands.items():
        for cut, r in block.items():
            cells = []
            for name in ("own", "prior"):
                x = r[name]
                cells.append(
                    "-" if x["width"] is None else f"{x['width']:.3f} / {100 * x['coverage']:.0f}% ({x['with_band']})"
                )
            lines.append(f"| {key} | {cut} | {r['runs']} | {r['open_ended']} | {cells[0]} | {cells[1]} |")
    return lines + [""]


def _ms(x, digits) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def render_doc(record: dict) -> str:
    """docs/sweeps.md from the record."""
    lines = [
        "# Pruning a sweep: grpofit against successive halving / ASHA and the median rule",
        "",
        "Generated by `python -m benchmarks.sweeps --doc` from `docs/sweeps.json`; do not edit by hand.",
        "",
        record.get("method_note", ""),
        "",
    ]
    if record.get("measured_at"):
        lines += [f"Measured at: {record['measured_at']}", ""]
    for key, block in record["summary"].items():
        lines += [
            f"## {key} ({block['sweeps']} sweeps)",
            "",
            "| method | mean regret | true best killed | compute used | ms per report, wall (mean / max) | CPU ms per report (mean / max) |",
            "|---|---|---|---|---|---|",
        ]
        for m, v in block.items():
            if m == "sweeps":
                continue
            lines.append(
                f"| {m} | {v['regret']:.4f} | {100 * v['best_killed']:.0f}% | {100 * v['compute']:.0f}% | "
                f"{v['per_report_ms_mean']:.2f} / {v['per_report_ms_max']:.0f} | {_ms(v.get('per_report_cpu_ms_mean'), 2)} / "
                f"{_ms(v.get('per_report_cpu_ms_max'), 0)} |"
            )
        lines.append("")
    lines += render_equal_compute(record)
    lines += [
        "## Per sweep",
        "",
        "| sweep | kind | runs | true best | method | regret | best killed | compute |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rec in record["sweeps"]:
        for m, v in rec["methods"].items():
            lines.append(
                f"| {rec['sweep']} | {rec['kind']} | {rec['runs']} | {rec['true_best']} | {m} | "
                f"{v['regret']:.4f} | {'yes' if v['best_killed'] else 'no'} | {100 * v['compute']:.0f}% |"
            )
    lines.append("")
    lines += render_rule_choice(record.get("rule_choice"))
    lines += render_report_cost(record.get("report_cost"))
    lines += render_tie_check(record.get("tie_check"))
    lose = where_we_lose(record["summary"])
    for r in at_equal_compute(record["summary"], record.get("frontier") or {}):
        th = r["theirs"]
        if th is not None and th["regret"] < r["ours"]["regret"] - 1e-9:
            lose.append(
                f"{r['stratum']}, {r['method']}: {r['setting']} reached lower regret ({th['regret']:.4f} vs "
                f"{r['ours']['regret']:.4f}) at no more compute ({100 * th['compute']:.0f}% vs {100 * r['ours']['compute']:.0f}%)"
            )
    if lose:
        lines += ["## Where grpofit loses (and targets missed)", ""] + [f"- {x}" for x in lose] + [""]
    costs = [(record.get("rank_cost"), 10), (record.get("rank_cost_fleet"), 15)]
    if any(rc for rc, _ in costs):
        lines += ["## `grpofit rank` on many runs", ""]
    for rc, target in costs:
        if not rc:
            continue
        load = rc.get("load")
        where = (
            f" (load average {load[0]:.1f} at the start, {load[1]:.1f} at the end, on 2 cores)"
            if load
            else " on the shared (loaded) machine"
        )
        when = f", measured {rc['measured']}" if rc.get("measured") else ""
        lines += [
            f"{rc['runs']} bandit runs of {rc['steps']} steps cut at 40%, `--jobs {rc['jobs']}`{when}: "
            f"{rc['wall_s']:.1f} s wall{where}, {rc['cpu_s']:.1f} CPU-seconds in all, "
            f"so about {rc['cpu_s'] / 2:.1f} s on 2 free cores (target {target} s"
            f"{': missed' if rc['cpu_s'] / 2 > target else ''}).",
            "",
        ]
    return "\n".join(lines)


METHOD_NOTE = (
    "Each trial reports its logged reward at every logged step. Sequential = an Optuna study "
    "with one worker (runs in a random order seeded by the sweep's name); parallel = every run at "
    "once, results in step order (the results of one step in an order seeded by the sweep's name, "
    "not by the trial's index), through Ray Tune's scheduler / stopper interface. A generated "
    "sweep's runs are in a seeded random order, so the planted slow starter is not always the first "
    "trial. grpofit runs with the pruners' defaults: a decision every 20% of the horizon; a trial is "
    "stopped when the probability that it, or any trial stopped before it, ends above the best trial "
    "still going is below 5% (confidence 0.95, no tolerance); never while still rising and speeding "
    "up. The rule `python -m benchmarks.sweep_rule` chose on other sweeps (generator seed 1, table "
    "below: a first decision at 20%, then every 10%, tolerance 0.01, confidence 0.9) is measured on "
    "the same sweeps: it saves more compute and lets a near-tied best run go, so it is an option, "
    "not the default. Tuned settings: Optuna median "
    "n_startup_trials=2, n_warmup_steps=20% of the horizon; successive halving min_resource=10%, "
    "reduction_factor=3; Ray ASHA grace_period=20%, reduction_factor=3; Ray median "
    "grace_period=20%, min_samples_required=2; 'compute matched' settings as chosen before on the "
    "seed-1 sweeps (Ray ASHA grace_period=30%, reduction_factor=3; Optuna median "
    "n_warmup_steps=30%), and the whole grid of each family's settings in 'At equal compute'. "
    "Regret in reward units; compute = steps run / steps of running every run to the end."
)


def tie_check(seed: int, count: int = 6) -> dict:
    """Ray's ASHA on the slow-starter sweeps of generator ``seed``, replayed with the runs in the
    order they were generated and ties broken by the trial's index (the harness before: the
    planted slow starter is trial 0, the first to reach every rung, and a rung never stops the
    first trial to reach it) and in this harness's seeded order."""
    global trial_order
    rows = []
    seeded = trial_order
    for k, sw in enumerate(generated_sweeps(count, seed=seed)):
        if sw.kind != "generated (slow starter best)":
            continue
        inv = np.argsort(np.random.default_rng([seed, k, 7]).permutation(len(sw.names)))
        old = Sweep(
            sw.name,
            sw.kind,
            [sw.names[i] for i in inv],
            [sw.steps[i] for i in inv],
            [sw.values[i] for i in inv],
            sw.truth[inv],
            sw.horizon,
        )
        for name, (_, make) in methods(sw.horizon).items():
            if not name.startswith("ray: ASHA"):
                continue
            try:
                trial_order = lambda s: list(range(len(s.names)))  # noqa: E731
                before = _score(old, replay_ray(old, make)[0])
            finally:
                trial_order = seeded
            after = _score(sw, replay_ray(sw, make)[0])
            rows.append({"sweep": sw.name, "method": name, "index order": before, "seeded order": after})
    return {"seed": seed, "rows": rows}


def render_tie_check(tc: dict | None) -> list[str]:
    if not tc:
        return []
    lines = [
        "## The parallel replay's ties",
        "",
        "Before this record the parallel replay fed the results of one step in the trials' index order, "
        "and a generated sweep's planted slow starter was always trial 0: the first to reach every "
        "ASHA rung, which a rung never stops. Ray's ASHA on the slow-starter sweeps of generator seed "
        f"{tc['seed']} (`python -m benchmarks.sweeps --tie-check {tc['seed']}`), regret / true best killed / compute:",
        "",
        "| sweep | method | index order (before) | seeded order (now) |",
        "|---|---|---|---|",
    ]
    for r in tc["rows"]:
        a, b = r["index order"], r["seeded order"]
        lines.append(
            f"| {r['sweep']} | {r['method']} | {a['regret']:.4f} / {'yes' if a['best_killed'] else 'no'} / "
            f"{100 * a['compute']:.0f}% | {b['regret']:.4f} / {'yes' if b['best_killed'] else 'no'} / {100 * b['compute']:.0f}% |"
        )
    return lines + [""]


def rank_cost(n_runs: int, steps: int = 300, jobs: int = 2) -> dict:
    """``grpofit rank`` on ``n_runs`` bandit runs (CSV files) cut at 40%: wall seconds and CPU
    seconds of the whole process (on a loaded machine the CPU seconds over the cores are the
    figure to compare with the 10 s target), and the peak RSS of its largest process (the
    children's ``ru_maxrss``: measured in a fresh process, it is the command's own)."""
    import resource
    import subprocess
    import tempfile

    sweeps = generated_sweeps(max(1, math.ceil(n_runs / 10)), runs=10, steps=steps, seed=11)
    with tempfile.TemporaryDirectory() as d:
        k = 0
        for sw in sweeps:
            for name, s, v in zip(sw.names, sw.steps, sw.values):
                if k < n_runs:
                    Path(d, f"run{k:03d}.csv").write_text(
                        "step,reward\n" + "\n".join(f"{int(a)},{float(b)!r}" for a, b in zip(s, v)) + "\n"
                    )
                    k += 1
        load0 = os.getloadavg()[0]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "grpofit",
                "rank",
                str(Path(d) / "*.csv"),
                "--until",
                str(int(0.4 * steps)),
                "--horizon",
                str(steps),
                "--jobs",
                str(jobs),
                "--format",
                "json",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        load1 = os.getloadavg()[0]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "peak_rss_mb": after.ru_maxrss / 1024.0,  # the largest process's (the parent's, or a worker's)
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load": [load0, load1],
        "runs": k,
        "steps": steps,
        "jobs": jobs,
        "wall_s": wall,
        "cpu_s": cpu,
        "cpu_s_per_run": cpu / k,
        "estimated_wall_s_100_runs_2_cores": 100 * cpu / k / 2,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generated", type=int, default=12, help="generated sweeps")
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0, help="the generated sweeps' seed (0: the published ones)")
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument(
        "--stratum", default=None, help="only the generated sweeps of this kind (e.g. 'generated (slow starter best)')"
    )
    ap.add_argument("--first", type=int, default=0, help="skip the first N generated sweeps (already measured)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--only", default=None, help="only the methods whose name contains this")
    ap.add_argument("--out", default=None, help="write the record (JSON) here")
    ap.add_argument("--doc", default=None, help="render docs/sweeps.md from this record and exit")
    ap.add_argument(
        "--put",
        nargs="+",
        default=(),
        help="with --doc: KEY=FILE puts the JSON of FILE under KEY of the record first "
        "(rule_choice: a benchmarks.sweep_rule record; report_cost: a record of this benchmark)",
    )
    ap.add_argument("--merge", nargs="+", default=None, help="merge these records into --out and exit")
    ap.add_argument("--measured-at", default=None, help="with --merge: the code the records were measured on")
    ap.add_argument("--rank-cost", type=int, default=None, help="only time grpofit rank on this many runs")
    ap.add_argument(
        "--record-rank",
        default=None,
        help="with --rank-cost: put the timing into this record (docs/sweeps.json) and rewrite its page",
    )
    ap.add_argument("--tie-check", type=int, default=None, help="only ASHA's slow-starter replays, both tie orders")
    ap.add_argument(
        "--frontier",
        action="store_true",
        help="also replay a grid of the baselines' settings (regret at equal compute)",
    )
    ap.add_argument("--memo", default=None, help="keep the forecasts here, shared with later runs (ForecastMemo)")
    a = ap.parse_args(argv)
    if a.memo:
        MEMO.directory = Path(a.memo)
    MEMO.install()
    if a.tie_check is not None:
        rec = tie_check(a.tie_check)
        if a.out:
            Path(a.out).write_text(json.dumps(rec, indent=1) + "\n")
        return 0
    if a.rank_cost:
        rec = rank_cost(a.rank_cost, jobs=a.jobs)
        print(json.dumps(rec))
        if a.out:
            Path(a.out).write_text(json.dumps(rec, indent=1) + "\n")
        if a.record_rank:  # into the record: 100 runs or fewer against the 10 s target, more against the 15 s one
            path = Path(a.record_rank)
            whole = json.loads(path.read_text())
            whole["rank_cost" if rec["runs"] <= 100 else "rank_cost_fleet"] = rec
            path.write_text(json.dumps(whole, indent=1) + "\n")
            path.with_suffix(".md").write_text(render_doc(whole))
        return 0
    if a.merge:
        special = ("rankcost", "rule", "ties")
        rec = merge([p for p in a.merge if not any(w in Path(p).name for w in special)])
        for p in a.merge:
            if "rankcost" in Path(p).name:
                rec["rank_cost"] = json.loads(Path(p).read_text())
            elif "rule" in Path(p).name:
                rec["rule_choice"] = json.loads(Path(p).read_text())
            elif "ties" in Path(p).name:
                rec["tie_check"] = json.loads(Path(p).read_text())
        if a.measured_at:
            rec["measured_at"] = a.measured_at
        Path(a.out).write_text(json.dumps(rec, indent=1) + "\n")
        return 0
    if a.doc:
        rec = json.loads(Path(a.doc).read_text())
        for item in a.put:
            key, _, path = item.partition("=")
            rec[key] = json.loads(Path(path).read_text())
        if a.put:
            Path(a.doc).write_text(json.dumps(rec, indent=1) + "\n")
        Path(a.doc).with_suffix(".md").write_text(render_doc(rec))
        return 0
    gen = generated_sweeps(a.generated, runs=a.runs, steps=a.steps, seed=a.seed)[a.first :]
    if a.stratum:
        gen = [sw for sw in gen if sw.kind == a.stratum]
    sweeps = ([] if a.no_real else real_sweeps()) + gen
    work = [(sw, a.only, a.frontier) for sw in sweeps]
    records: list = []

    def record_now() -> dict:
        recs = sorted(records, key=lambda r: (r["kind"], r["sweep"]))
        rec = {
            "method_note": METHOD_NOTE,
            "summary": summarise(recs),
            "frontier": summarise_frontier(recs),
            "sweeps": recs,
            "sizes": {
                "generated": a.generated,
                "runs": a.runs,
                "steps": a.steps,
                "done": len(recs),
                "planned": len(work),
            },
        }
        if a.out:  # after every sweep: a long run that is stopped keeps what it measured
            Path(a.out).write_text(json.dumps(rec, indent=1) + "\n")
        return rec

    if a.jobs > 1:
        from multiprocessing import get_context

        with get_context("fork").Pool(a.jobs) as pool:
            for rec in pool.imap_unordered(_one, work):
                records.append(rec)
                record_now()
                print(json.dumps({k: rec[k] for k in ("sweep", "kind")}), file=sys.stderr, flush=True)
    else:
        for w in work:
            records.append(_one(w))
            record_now()
            print(json.dumps({k: records[-1][k] for k in ("sweep", "kind")}), file=sys.stderr, flush=True)
    record = record_now()
    for key, block in record["summary"].items():
        print(f"== {key} ({block['sweeps']} sweeps)")
        for m, v in block.items():
            if m != "sweeps":
                print(
                    f"  {m:40s} regret {v['regret']:.4f}  best killed {100 * v['best_killed']:3.0f}%  "
                    f"compute {100 * v['compute']:3.0f}%  ms/report {v['per_report_ms_mean']:.2f} (max {v['per_report_ms_max']:.0f})"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
