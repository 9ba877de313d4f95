"""``python -m benchmarks.sweep_rule``: choose grpofit's stopping rule on one set of generated
sweeps and evaluate it on another, from forecasts computed once.

The decision :class:`~grpofit.forecasting.prune.SweepJudge` makes at a checkpoint depends only on
every trial's draws at the horizon (:func:`~grpofit.forecasting.horizon.horizon_draws`) from the
points it had then. This module forecasts a run at a checkpoint of :data:`SCHEDULES` (or on its
whole history: a finished trial) the first time a replay asks, through the benchmark's memo, and
replays the two harnesses of :mod:`benchmarks.sweeps` from those forecasts for many rules at once:

- parallel (Ray): at each checkpoint, every trial still running is judged against the others'
  forecasts at that checkpoint (a stopped trial keeps the forecast it was stopped on);
- sequential (Optuna, in :func:`~benchmarks.sweeps.trial_order`): a trial is judged against the
  finished trials (forecast on their whole history) and the pruned ones (the forecast they were
  pruned on).

A stopped or pruned trial is no reference and counts as given up, as in
:class:`~grpofit.forecasting.prune.SweepJudge`. A rule is (checkpoints, margin, tolerance, population,
confidence). ``--tune-seed`` sweeps choose it (the criterion is
fixed before looking: the true best killed in at most 5% of sweeps under both harnesses, then the
least compute, then the least regret); ``--eval-seed`` sweeps measure it. The benchmark proper
(:mod:`benchmarks.sweeps`) re-measures the chosen rule through the libraries' own interfaces.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

from benchmarks.sweeps import MEMO, _score, generated_sweeps, real_sweeps, trial_order

#: the schedules of checkpoints compared, (first, every) as fractions of the horizon: the first
#: decision at ``first``, then one every ``every`` (the pruners' ``min_step`` / ``check_every``)
SCHEDULES = {
    "20%, then every 20%": (0.2, 0.2),
    "20%, then every 10%": (0.2, 0.1),
    "30%, then every 10%": (0.3, 0.1),
    "10%, then every 10%": (0.1, 0.1),
    "10%, then every 5%": (0.1, 0.05),
    "20%, then every 5%": (0.2, 0.05),
}


def schedule_steps(horizon: float, first: float, every: float) -> list[float]:
    """The checkpoints of a schedule as the pruners put them: ``min_step = int(first * horizon)``
    and ``check_every = int(every * horizon)`` whole steps, up to the horizon."""
    h = int(horizon)
    start, step = max(1, int(first * h)), max(1, int(every * h))
    return [float(c) for c in range(start, h, step)]


def all_steps(horizon: float) -> list[float]:
    return sorted({c for f, e in SCHEDULES.values() for c in schedule_steps(horizon, f, e)})


class Forecasts(dict):
    """(run, checkpoint step) -> (draws or None, open_ended), the run forecast from the points it
    had when decided on at that checkpoint; (run, "end") from its whole history. Computed when a
    replay first asks (a run every rule stops early is never forecast late), through
    :data:`~benchmarks.sweeps.MEMO`, so the benchmark's replays reuse them."""

    def __init__(self, sw):
        super().__init__()
        self.sw = sw
        self.priors: dict = {}  #: the finished trials (indices) -> their population prior
        self.made = 0

    def siblings(self, k, c, done: tuple):
        """Run ``k``'s draws at checkpoint ``c`` from the population prior of the finished runs
        ``done`` (:func:`~grpofit.forecasting.prune.sibling_draws`, as
        :class:`~grpofit.forecasting.prune.SweepJudge` with ``population=True``); None with
        fewer than two or no interval."""
        from grpofit.forecasting.prune import sibling_draws, sibling_prior

        key = (k, c, "siblings", done)
        if key not in self:
            if done not in self.priors:
                self.priors[done] = sibling_prior([(str(i), self.sw.steps[i], self.sw.values[i]) for i in done], seed=0)
            prior, d = self.priors[done], None
            if prior is not None:
                s, v = self.sw.steps[k], self.sw.values[k]
                keep = s <= _decided_at(s, c)
                d = sibling_draws(prior, s[keep], v[keep], self.sw.horizon, seed=0)
            self[key] = d
        return self[key]

    def __missing__(self, key):
        i, c = key
        s, v = self.sw.steps[i], self.sw.values[i]
        keep = np.ones(s.size, bool) if c == "end" else s <= _decided_at(s, c)
        if keep.sum() < 2:
            self[key] = (None, False)
        else:
            r = MEMO(s[keep], v[keep], self.sw.horizon, seed=0)
            self[key] = (r.draws, bool(r.open_ended))
            self.made += 1
            if self.made % 4 == 0:  # a long search that is stopped keeps its forecasts
                MEMO.save()
        return self[key]


def forecasts(sw) -> Forecasts:
    """Every rule of :func:`rules` replayed once on ``sw`` (so that every forecast any of them
    needs is made), then saved to the memo."""
    MEMO.load(sw.name)
    fc = Forecasts(sw)
    for rule in rules():
        parallel(sw, fc, rule)
        sequential(sw, fc, rule)
        MEMO.save()
    fc.sw = None  # picklable without the sweep
    return fc


def checkpoints(sw, rule) -> list[float]:
    return schedule_steps(sw.horizon, *rule["schedule"])


def _decided_at(s: np.ndarray, c: float) -> float:
    """A trial is decided on at its first report at or after checkpoint ``c``."""
    after = s[s >= c]
    return float(after[0]) if after.size else float(s[-1])


def _stop_step(s: np.ndarray, c: float):
    """The step a trial is stopped at when decided at checkpoint ``c``."""
    at = _decided_at(s, c)
    return None if at >= s[-1] else at


def _decide(draws, opened, k, rule, alive) -> bool:
    """:class:`~grpofit.forecasting.prune.SweepJudge`'s decision for trial ``k``."""
    from grpofit.forecasting.rank import STOP, judge

    if draws[k] is None:
        return False
    v = judge(
        draws,
        margin=rule["margin"],
        confidence=rule["confidence"],
        seed=0,
        open_ended=opened,
        alive=alive,
        tolerance=rule.get("tolerance", 0.0),
    )
    return v[k]["recommendation"] == STOP


def parallel(sw, fc, rule) -> list:
    n = len(sw.names)
    stopped: list = [None] * n
    frozen: dict = {}
    for c in checkpoints(sw, rule):
        for k in range(n):
            if k in frozen:
                continue
            cur = [frozen.get(i, fc[i, c]) for i in range(n)]
            alive = [stopped[i] is None and i not in frozen for i in range(n)]
            if _decide([d for d, _ in cur], [o for _, o in cur], k, rule, alive):
                stopped[k] = _stop_step(sw.steps[k], c)
                frozen[k] = fc[k, c]
    return stopped


def sequential(sw, fc, rule) -> list:
    stopped: list = [None] * len(sw.names)
    past: list = []  # (draws, open_ended) of the trials already run
    kept: list = []  # whether each of them ran to the end
    done: list = []  # the runs that ran to the end, in order (a population prior's runs)
    for k in trial_order(sw):
        at = None
        for c in checkpoints(sw, rule):
            if not past:
                break
            own = fc[k, c]
            if rule.get("population") and len(done) >= 2 and (own[0] is None or own[1]):
                d = fc.siblings(k, c, tuple(done))
                own = own if d is None else (d, False)
            entries = past + [own]
            if _decide([d for d, _ in entries], [o for _, o in entries], len(entries) - 1, rule, kept + [True]):
                stopped[k], at = _stop_step(sw.steps[k], c), c
                break
        past.append(fc[k, at] if stopped[k] is not None else fc[k, "end"])
        kept.append(stopped[k] is None)
        if stopped[k] is None:
            done.append(k)
    return stopped


#: (margin, tolerance): keep the near-ties (margin), or let them go (tolerance, regret accepted)
OFFSETS = ((0.0, 0.0), (0.01, 0.0), (0.02, 0.0), (0.0, 0.005), (0.0, 0.01), (0.0, 0.02))


#: ``--grid small``: no margin (a margin only keeps more), tolerance up to 0.01, confidence 0.9 or 0.95
SMALL_GRID = (((0.0, 0.0), (0.0, 0.005), (0.0, 0.01)), (0.9, 0.95))
GRID = "full"  #: the grid :func:`rules` spans (``--grid``)


def rules() -> list[dict]:
    """Every schedule x offsets x confidence, without and with the population prior of the
    finished trials (``population``: it only acts in the sequential harness, where trials finish
    before others start; in the parallel one no trial has finished at a checkpoint)."""
    offsets, confidences = SMALL_GRID if GRID == "small" else (OFFSETS, (0.9, 0.95, 0.99))
    out = []
    for (name, sched), (m, tol), c, pop in itertools.product(SCHEDULES.items(), offsets, confidences, (False, True)):
        out.append(
            {"schedule": sched, "checks_name": name, "margin": m, "tolerance": tol, "confidence": c, "population": pop}
        )
    return out


def evaluate(sweeps, cache, rule) -> dict:
    res = {}
    for harness, fn in (("parallel", parallel), ("sequential", sequential)):
        scores = [_score(sw, fn(sw, cache[sw.name], rule)) for sw in sweeps]
        res[harness] = {
            "regret": float(np.mean([x["regret"] for x in scores])),
            "best_killed": float(np.mean([x["best_killed"] for x in scores])),
            "compute": float(np.mean([x["compute"] for x in scores])),
            "killed_sweeps": [sw.name for sw, x in zip(sweeps, scores) if x["best_killed"]],
        }
    return res


def _one(sw):
    return sw.name, forecasts(sw)


BAND_CUTS = (0.1, 0.2, 0.3)


def bands(sweeps, cache) -> dict:
    """Does a prior from the finished runs narrow the band of a run still early? For every run of
    a sweep with two or more runs before it in :func:`~benchmarks.sweeps.trial_order` (all taken
    as finished), at 10/20/30% of the horizon: the 95% band of its own forecast and of the
    population prior's (:func:`~grpofit.forecasting.prune.sibling_draws`, from the runs before
    it), their widths and whether they hold the true final level; ``open`` counts the own
    forecasts that are open-ended (never stopped on) or missing."""
    rows: dict = {}
    for sw in sweeps:
        fc = cache[sw.name]
        fc.sw = sw
        order = trial_order(sw)
        for j in range(2, len(order)):
            k = order[j]
            for cut in BAND_CUTS:
                c = float(max(1, int(cut * sw.horizon)))
                own, opened = fc[k, c]
                pri = fc.siblings(k, c, tuple(order[:j]))
                row = rows.setdefault(f"{cut:.0%}", {"n": 0, "open": 0, "own": [], "prior": []})
                row["n"] += 1
                row["open"] += int(own is None or opened)
                for name, d in (("own", own), ("prior", pri)):
                    if d is not None:
                        lo, hi = np.percentile(d, [2.5, 97.5])
                        row[name].append((float(hi - lo), bool(lo <= sw.truth[k] <= hi)))
        fc.sw = None
    out = {}
    for cut, row in rows.items():
        out[cut] = {"runs": row["n"], "open_ended": row["open"]}
        for name in ("own", "prior"):
            xs = row[name]
            out[cut][name] = {
                "with_band": len(xs),
                "width": float(np.mean([w for w, _ in xs])) if xs else None,
                "coverage": float(np.mean([h for _, h in xs])) if xs else None,
            }
    return out


def _kept(keep: str, name: str) -> Path:
    import zlib

    return Path(keep) / f"{zlib.crc32(name.encode()):08x}-{GRID}.fc.pkl"


def load(sweeps, jobs: int, keep: str | None = None) -> dict:
    """name -> :class:`Forecasts` of every sweep (every rule replayed once); ``keep``: a folder
    where each sweep's are kept when made and read back when there (``--keep``)."""
    import pickle

    cache = {}
    todo = []
    for sw in sweeps:
        if keep and _kept(keep, sw.name).exists():
            cache[sw.name] = pickle.loads(_kept(keep, sw.name).read_bytes())
        else:
            todo.append(sw)
    from multiprocessing import get_context

    with get_context("fork").Pool(jobs) as pool:
        for name, fc in pool.imap_unordered(_one, todo):
            cache[name] = fc
            if keep:
                Path(keep).mkdir(parents=True, exist_ok=True)
                _kept(keep, name).write_bytes(pickle.dumps(fc))
            print(name, file=sys.stderr, flush=True)
    return cache


def choose(table: list) -> dict:
    """The criterion fixed before looking: best killed <= 5% under both harnesses, then the
    least compute (mean of the two), then the least regret; none passing: the fewest kills."""

    def key(row):
        r = row["tune"]
        kills = max(r["parallel"]["best_killed"], r["sequential"]["best_killed"])
        compute = (r["parallel"]["compute"] + r["sequential"]["compute"]) / 2
        regret = (r["parallel"]["regret"] + r["sequential"]["regret"]) / 2
        return (kills > 0.05 + 1e-9, compute if kills <= 0.05 + 1e-9 else kills, regret)

    return min(table, key=key)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tune-seed", type=int, default=1)
    ap.add_argument("--eval-seed", type=int, nargs="*", default=(), help="evaluate on the sweeps of these seeds too")
    ap.add_argument("--generated", type=int, default=6, help="sweeps of the tune seed")
    ap.add_argument("--eval-generated", type=int, default=None, help="sweeps per evaluation seed (default --generated)")
    ap.add_argument("--real", action="store_true", help="evaluate on the real sweeps too")
    ap.add_argument("--real-count", type=int, default=None, help="only the first N real sweeps (cheapest first)")
    ap.add_argument("--keep", default=None, help="keep each sweep's forecasts here (load)")
    ap.add_argument("--kept-only", action="store_true", help="with --keep: only the sweeps already kept there")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--memo", default="/tmp/sweeps_memo", help="the forecasts' memo (shared with benchmarks.sweeps)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--bands", action="store_true", help="also measure the finished runs' prior's bands (bands())")
    ap.add_argument("--grid", choices=("full", "small"), default="full", help="the rules spanned (SMALL_GRID)")
    a = ap.parse_args(argv)
    global GRID
    GRID = a.grid
    MEMO.directory = Path(a.memo)
    MEMO.install()
    sets = {"tune": generated_sweeps(a.generated, seed=a.tune_seed)}
    for seed in a.eval_seed:
        sets[f"seed {seed}"] = generated_sweeps(a.eval_generated or a.generated, seed=seed)
    if a.real:
        sets["real"] = real_sweeps()[: a.real_count]
    if a.kept_only:
        sets = {k: [sw for sw in v if _kept(a.keep, sw.name).exists()] for k, v in sets.items()}
    sets = {k: v for k, v in sets.items() if v}
    caches = {k: load(v, a.jobs, a.keep) for k, v in sets.items()}
    if "tune" not in sets:  # only the forecasts were wanted (--keep): nothing to choose from
        return 0
    table = []
    for rule in rules():
        row = dict(rule)
        for k, sweeps in sets.items():
            row[k] = evaluate(sweeps, caches[k], rule)
        table.append(row)
    best = choose(table)
    for row in table:
        flag = "*" if row is best else " "
        cells = []
        for k in sets:
            for h in ("parallel", "sequential"):
                r = row[k][h]
                cells.append(
                    f"{k[:4]}/{h[:3]} {r['regret']:.4f} {100 * r['best_killed']:3.0f}% {100 * r['compute']:3.0f}%"
                )
        print(
            f"{flag} {row['checks_name']:20s} m={row['margin']:<5} tol={row['tolerance']:<5} c={row['confidence']:<4} "
            f"{'pop' if row.get('population') else '   '} " + " | ".join(cells)
        )
    if a.out:
        sizes = {
            "generated": a.generated,
            "tune_seed": a.tune_seed,
            "eval_seed": list(a.eval_seed),
            "real": a.real,
            "grid": a.grid,
            "sets": {k: [sw.name for sw in v] for k, v in sets.items()},
        }
        doc = {"chosen": best, "table": table, "sizes": sizes}
        if a.bands:
            doc["bands"] = {k: bands(v, caches[k]) for k, v in sets.items()}
            print(json.dumps(doc["bands"], indent=1))
        Path(a.out).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


def baseline_settings(horizon: float) -> dict:
    """A grid of the baselines' settings (harness, factory), for matching grpofit's compute."""
    import optuna
    from ray.tune.schedulers import ASHAScheduler, MedianStoppingRule

    h = int(horizon)
    out = {}
    for g in (0.05, 0.1, 0.2, 0.3, 0.4):
        for rf in (2, 3, 4):
            out[f"ray: ASHA grace {g:.0%} rf {rf}"] = (
                "ray",
                lambda g=g, rf=rf: ASHAScheduler(
                    time_attr="step",
                    metric="reward",
                    mode="max",
                    max_t=h,
                    grace_period=max(1, int(g * h)),
                    reduction_factor=rf,
                ),
            )
            out[f"optuna: successive halving min {g:.0%} rf {rf}"] = (
                "optuna",
                lambda g=g, rf=rf: optuna.pruners.SuccessiveHalvingPruner(
                    min_resource=max(1, int(g * h)), reduction_factor=rf
                ),
            )
        out[f"ray: median grace {g:.0%}"] = (
            "ray",
            lambda g=g: MedianStoppingRule(
                time_attr="step", metric="reward", mode="max", grace_period=int(g * h), min_samples_required=2
            ),
        )
        out[f"optuna: median warmup {g:.0%}"] = (
            "optuna",
            lambda g=g: optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=int(g * h)),
        )
    return out


def baseline_frontier(sweeps) -> dict:
    """Per baseline setting: mean regret, best killed and compute over ``sweeps``."""
    from benchmarks.sweeps import replay_optuna, replay_ray

    rows: dict = {}
    for sw in sweeps:
        for name, (harness, make) in baseline_settings(sw.horizon).items():
            if harness == "optuna":
                stopped, _ = replay_optuna(sw, make(), trial_order(sw))
            else:
                stopped, _ = replay_ray(sw, make)
            rows.setdefault(name, []).append(_score(sw, stopped))
    return {
        name: {
            "regret": float(np.mean([x["regret"] for x in xs])),
            "best_killed": float(np.mean([x["best_killed"] for x in xs])),
            "compute": float(np.mean([x["compute"] for x in xs])),
        }
        for name, xs in rows.items()
    }


if __name__ == "__main__":
    raise SystemExit(main())
