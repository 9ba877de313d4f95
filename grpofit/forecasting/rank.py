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
  at least as likely as not to end within the margin, ``cannot tell yet`` otherwise or when the
  run has no draws (too few points, no rise yet).

The same :func:`judge` decides for the Optuna pruner and the Ray Tune stopper
(:mod:`grpofit.integrations.optuna`, :mod:`grpofit.integrations.ray`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np

from grpofit.errors import GrpofitError, UsageError

__all__ = ["RankOptions", "judge", "decide", "rank_series", "rank_paths", "RankOutcome", "step_seconds"]

KEEP, STOP, UNSURE = "keep", "stop", "cannot tell yet"


@dataclass
class RankOptions:
    metric: str | None = None
    step: str | None = None
    horizon: int | None = None
    until: float | None = None
    margin: float = 0.01
    confidence: float = 0.95
    batch_size: int | None = None
    seed: int = 0
    run_pattern: str | None = None
    jobs: int = 1


def check_options(opts: RankOptions) -> None:
    from grpofit.limits import check_step

    if opts.horizon is not None:
        if opts.horizon < 1:
            raise UsageError(f"--horizon {opts.horizon} is not a positive step", fix="pass the planned last step, e.g. --horizon 1000")
        check_step("--horizon", opts.horizon, example="1000", positive=True)
    if opts.until is not None:
        check_step("--until", opts.until, example="250")
    if not (math.isfinite(opts.margin) and opts.margin >= 0):
        raise UsageError(f"--margin {opts.margin} is not a reward difference >= 0", fix="e.g. --margin 0.01 (in the reward's units)")
    if not (0.5 < opts.confidence < 1):
        raise UsageError(f"--confidence {opts.confidence} is not between 0.5 and 1", fix="e.g. --confidence 0.95")
    if opts.batch_size is not None and opts.batch_size < 1:
        raise UsageError(f"--batch-size {opts.batch_size} is not positive", fix="pass the number of rewards averaged per logged step")
    if opts.jobs < 1:
        raise UsageError(f"--jobs {opts.jobs} is not positive", fix="e.g. --jobs 2")


def decide(p_within: float | None, confidence: float) -> str:
    """``stop`` / ``keep`` / ``cannot tell yet`` from the probability of ending within the margin."""
    if p_within is None:
        return UNSURE
    if p_within < round(1.0 - confidence, 12):  # 1 - 0.95 is 0.050000000000000044
        return STOP
    return KEEP if p_within >= 0.5 else UNSURE


def judge(draws: list[np.ndarray | None], *, margin: float = 0.01, confidence: float = 0.95,
          seed: int = 0) -> list[dict]:
    """Per run ``{"p_best", "p_within_margin", "recommendation"}`` from each run's draws at the
    horizon (None: no draws; such a run takes no part and gets nulls and ``cannot tell yet``).

    The runs' draws are resampled to one length and stacked column by column, so each row is one
    joint outcome of the sweep (independent across runs); probabilities are shares of rows."""
    have = [i for i, d in enumerate(draws) if d is not None and np.size(d)]
    out = [{"p_best": None, "p_within_margin": None, "recommendation": UNSURE} for _ in draws]
    if not have:
        return out
    rng = np.random.default_rng(seed)
    n = max(np.size(draws[i]) for i in have)
    cols = []
    for i in have:
        d = np.asarray(draws[i], dtype=float).ravel()
        cols.append(d if d.size == n else d[rng.integers(0, d.size, n)])
    joint = np.column_stack(cols)  # (n, runs)
    top = joint.max(axis=1)
    winner = np.argmax(joint, axis=1)
    p_best = np.bincount(winner, minlength=len(have)) / float(n)
    within = (joint >= (top - margin)[:, None]).mean(axis=0)
    for k, i in enumerate(have):
        pw = float(within[k])
        out[i] = {"p_best": float(p_best[k]), "p_within_margin": pw, "recommendation": decide(pw, confidence)}
    return out


#: columns holding the seconds one step took, and columns of seconds since the start
STEP_TIME_COLUMNS = ("timing_s/step", "perf/time_per_step", "time/step", "train/step_time", "step_time",
                     "time_per_step", "timing/step")
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


@dataclass
class RankItem:
    """One run's inputs to the ranking (what a ``--jobs`` worker needs)."""

    name: str
    metric: str
    steps: np.ndarray
    values: np.ndarray
    batch: int | None
    seconds: float | None
    gpus: int | None
    rest: tuple | None = None  #: the points after ``--until`` (plots)
    full_last: float | None = None  #: the last step logged, before any ``--until`` cut


@dataclass
class RankOutcome:
    doc: dict
    items: list  #: (RankItem, HorizonDraws) per run, in the document's order
    warnings: list = field(default_factory=list)


def _draws_one(item: RankItem, extra) -> object:
    from grpofit.forecasting.horizon import horizon_draws

    horizon, source, seed = extra
    return horizon_draws(item.steps, item.values, horizon, horizon_source=source, batch=item.batch, seed=seed)


def _forecast_all(items: list[RankItem], horizon, source, seed, jobs) -> list:
    extra = (horizon, source, seed)
    if jobs > 1 and len(items) > 1:
        from grpofit.limits import cap_jobs

        jobs = cap_jobs(jobs, len(items))
    if jobs > 1 and len(items) > 1:
        import grpofit.fitting  # noqa: F401 - imported once here for the forked workers
        import grpofit.forecasting.engine  # noqa: F401
        from grpofit.pipeline import map_items

        try:
            return map_items(_draws_one, items, extra, jobs=jobs, lost=_lost, chunk=1)
        except OSError:
            pass
    return [_draws_one(it, extra) for it in items]


def _lost(item: RankItem):
    from grpofit.forecasting.horizon import HorizonDraws

    return HorizonDraws(None, {}, "none", "the worker forecasting this run died")


def _num(x):
    from grpofit.numbers import finite

    return finite(x)


def rank_series(items: list[RankItem], *, horizon: float, source: str, opts: RankOptions) -> RankOutcome:
    """The ``grpofit.rank/1`` document for runs already read and cut."""
    from grpofit.forecasting.engine import _step_out
    from grpofit.vocabulary import SCHEMAS

    results = _forecast_all(items, horizon, source, opts.seed, opts.jobs)
    verdicts = judge([r.draws for r in results], margin=opts.margin, confidence=opts.confidence, seed=opts.seed)
    runs = []
    for item, res, v in zip(items, results, verdicts):
        at = res.entry.get("at", [{}])[0] if res.entry.get("at") else {}
        last = float(item.steps[-1]) if item.steps.size else None
        final = {"mean": _num(at.get("mean")), "pi80": at.get("pi80"), "pi95": at.get("pi95")}
        if final["mean"] is None and res.draws is not None:  # the level seen, or held
            d = res.draws
            final = {"mean": float(d.mean()),
                     "pi80": [float(np.percentile(d, 10)), float(np.percentile(d, 90))],
                     "pi95": [float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))]}
        left = max(0.0, float(horizon) - last) if last is not None else 0.0
        saved = {"steps": None, "gpu_hours": None, "hours": None}
        if v["recommendation"] == STOP:
            saved["steps"] = _step_out(left)
            if item.seconds is not None:
                saved["hours"] = left * item.seconds / 3600.0
                if item.gpus is not None:
                    saved["gpu_hours"] = saved["hours"] * item.gpus
        note = res.note
        if res.kind == "forecast" and res.entry.get("note"):
            note = res.entry["note"]
        runs.append({
            "run": item.name, "metric": item.metric,
            "seen": {"steps": [_step_out(item.steps[0]), _step_out(last)] if item.steps.size else [None, None],
                     "n_points": int(item.steps.size)},
            "final": final, "p_best": v["p_best"], "p_within_margin": v["p_within_margin"],
            "recommendation": v["recommendation"], "saved": saved, "basis": res.kind, "note": note,
        })
    ranked = [r for r in runs if r["p_best"] is not None]
    best = max(ranked, key=lambda r: r["p_best"])["run"] if ranked else None
    doc = {"schema": SCHEMAS["rank"], "horizon": {"step": _step_out(horizon), "source": source},
           "margin": opts.margin, "confidence": opts.confidence, "runs": runs, "best": best}
    if opts.until is not None:
        doc["until"] = opts.until
    missing = len(runs) - len(ranked)
    if missing:
        doc["note"] = (f"{missing} of {len(runs)} runs cannot be forecast yet and take no part in p_best: "
                       "the probabilities are among the others, and a run of those may still end best")
    return RankOutcome(doc, list(zip(items, results)))


def _expand(spec: str) -> list[str]:
    """Paths of one argument: itself when it exists (or is '-' or ``FILE::RUN``), else its glob."""
    import glob

    if spec == "-" or os.path.exists(spec):
        return [spec]
    base, sep, _ = spec.partition("::")
    if sep and os.path.isfile(base):
        return [spec]
    if any(ch in spec for ch in "*?["):
        hits = sorted(glob.glob(spec, recursive=True))
        if not hits:
            raise UsageError(f"{spec}: the pattern matches no file", fix="check the glob pattern (quote it for the shell)")
        return hits
    raise UsageError(f"{spec}: no such file or directory", fix="check the path, or use FILE::RUN to pick one run of a file")


def common_horizon(runs, items, option) -> tuple[float, str]:
    """``--horizon``; else the latest planned end in the configs; else the longest run's last step
    (as logged: with ``--until`` the sweep is replayed up to where its runs went)."""
    from grpofit.forecasting.plan import planned_last_step

    if option is not None:
        return float(option), "--horizon"
    planned = [planned_last_step(r.config)[0] for r in runs]
    planned = [p for p in planned if p is not None]
    if planned:
        return max(planned), "planned end (config)"
    last = max(float(it.full_last) for it in items if it.full_last is not None)
    return last, "last step of the longest run"


def rank_paths(paths: list[str], opts: RankOptions) -> RankOutcome:
    """Read every run under ``paths`` (files, folders, globs, ``FILE::RUN``), cut at ``--until``,
    and rank them."""
    from grpofit.analysis import resolve_column
    from grpofit.forecasting.plan import batch_size
    from grpofit.readers import read_path
    from grpofit.selection import matches, no_match

    check_options(opts)
    runs, items, warnings, errors = [], [], [], []
    expanded = [p for spec in paths for p in _expand(spec)]
    for path in expanded:
        try:
            for run in read_path(path, step=opts.step):
                if not matches(run, opts.run_pattern):
                    continue
                warnings.extend(f"{run.name}: {w}" for w in run.warnings)
                column = resolve_column(run, "reward", opts.metric)
                steps, values = run.series(column)
                rest = None
                full_last = float(steps[-1]) if len(steps) else None
                if opts.until is not None:
                    keep = steps <= opts.until
                    rest = (steps[~keep], values[~keep])
                    steps, values = steps[keep], values[keep]
                batch, _ = batch_size(run.config, opts.batch_size)
                runs.append(run)
                items.append(RankItem(run.name, column, np.asarray(steps, float), np.asarray(values, float),
                                      batch, step_seconds(run), gpu_count(run.config), rest, full_last))
        except GrpofitError as e:
            if len(expanded) == 1:
                raise
            errors.append({"run": path, "error": e.one_line()})
    if opts.run_pattern and not items and not errors:
        raise no_match(opts.run_pattern, paths)
    if not items and errors:
        raise UsageError(f"no run could be read: {errors[0]['error']}" + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""),
                         fix="pass log files or run folders of the sweep")
    if not items:
        raise UsageError(f"no run could be read from {' '.join(paths)}", fix="pass log files or run folders of the sweep")
    empty = [it.name for it in items if not it.steps.size]
    if len(empty) == len(items):
        raise UsageError(f"no run has a step at or before --until {opts.until}", fix="pass a later --until step")
    horizon, source = common_horizon(runs, items, opts.horizon)
    done = rank_series(items, horizon=horizon, source=source, opts=opts)
    done.warnings = warnings
    if errors:
        done.doc["errors"] = errors
    return done
