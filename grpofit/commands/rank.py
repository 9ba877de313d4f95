"""``grpofit rank``: read the runs of a sweep, cut them (``--until``), forecast each to the common
horizon (in ``--jobs`` processes) and assemble the ``grpofit.rank/1`` document from
:func:`grpofit.forecasting.rank.judge`'s verdicts. See :mod:`grpofit.forecasting.rank` for the
decision and :mod:`grpofit.forecasting.horizon` for the draws."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from grpofit.core.errors import GrpofitError, UsageError
from grpofit.forecasting.rank import STOP, gpu_count, judge, step_seconds
from grpofit.readers.selection import expand_argument

__all__ = ["RankOptions", "RankItem", "RankOutcome", "check_options", "rank_series", "rank_paths", "common_horizon"]


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
    #: each run's forecast fan is kept (``--plot``); without it the forecasts are the engine's lean
    #: ones (:func:`~grpofit.forecasting.engine.forecast_series`: the same draws and intervals)
    fans: bool = True


def check_options(opts: RankOptions) -> None:
    from grpofit.core.limits import check_step

    if opts.horizon is not None:
        if opts.horizon < 1:
            raise UsageError(
                f"--horizon {opts.horizon} is not a positive step",
                fix="pass the planned last step, e.g. --horizon 1000",
            )
        check_step("--horizon", opts.horizon, example="1000", positive=True)
    if opts.until is not None:
        check_step("--until", opts.until, example="250")
    if not (math.isfinite(opts.margin) and opts.margin >= 0):
        raise UsageError(
            f"--margin {opts.margin} is not a reward difference >= 0", fix="e.g. --margin 0.01 (in the reward's units)"
        )
    if not (0.5 < opts.confidence < 1):
        raise UsageError(f"--confidence {opts.confidence} is not between 0.5 and 1", fix="e.g. --confidence 0.95")
    if opts.batch_size is not None and opts.batch_size < 1:
        raise UsageError(
            f"--batch-size {opts.batch_size} is not positive", fix="pass the number of rewards averaged per logged step"
        )
    if opts.jobs < 1:
        raise UsageError(f"--jobs {opts.jobs} is not positive", fix="e.g. --jobs 2")


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
    n_points: int | None = None  #: the points seen, once ``steps`` is cut to its ends (:func:`_slim`)


def _slim(item: RankItem) -> None:
    """Once the run is forecast, without a figure to draw: its first and last step and the
    number of points are all the document reads of its points (memory flat in the runs)."""
    item.n_points = int(item.steps.size)
    if item.steps.size > 2:
        item.steps = item.steps[[0, -1]].copy()
        item.values = item.values[[0, -1]].copy()


def _seen(item: RankItem) -> int:
    return item.n_points if item.n_points is not None else int(item.steps.size)


@dataclass
class RankOutcome:
    doc: dict
    items: list  #: (RankItem, HorizonDraws) per run, in the document's order
    warnings: list = field(default_factory=list)


def _draws_one(item: RankItem, extra) -> object:
    """The run's :class:`~grpofit.forecasting.horizon.HorizonDraws`, with only what the document
    and the figure read: the entry's ``at`` and ``note`` (and ``final``, the level's mean and
    intervals from the draws where the engine gives none), a forecast that keeps the fan alone
    (not the engine's joint draws at every time, ~400 KB a run), and the draws at the horizon as
    their quantiles (:func:`~grpofit.forecasting.rank.summarise`, 128 float32 numbers, not 1,200
    float64): the parent's memory and the workers' pipes carry ~1.5 KB a run for the ranking."""
    from grpofit.forecasting.engine import Forecast
    from grpofit.forecasting.horizon import horizon_draws
    from grpofit.forecasting.rank import summarise

    horizon, source, seed, fans = extra
    res = horizon_draws(
        item.steps, item.values, horizon, horizon_source=source, batch=item.batch, seed=seed, lean=not fans
    )
    fan = getattr(res.forecast, "fan", None)
    entry = {k: res.entry[k] for k in ("at", "note") if k in res.entry}  # what the document reads
    at = entry.get("at", [{}])[0] if entry.get("at") else {}
    if _num(at.get("mean")) is None and res.draws is not None:  # the level seen, or held
        d = res.draws
        entry["final"] = {
            "mean": float(d.mean()),
            "pi80": [float(np.percentile(d, 10)), float(np.percentile(d, 90))],
            "pi95": [float(np.percentile(d, 2.5)), float(np.percentile(d, 97.5))],
        }
    if res.draws is not None and res.ess is None:  # independent draws
        res.ess = float(np.size(res.draws))
    res.entry = entry
    res.draws = summarise(res.draws)
    res.forecast = Forecast(res.entry, fan=fan) if fan is not None else None
    return res


def _forecast_all(items: list[RankItem], horizon, source, seed, jobs, fans: bool = True, slim: bool = False) -> list:
    """Each run's draws, in order; with ``slim`` each item is slimmed (:func:`_slim`) as its
    result comes in, so the runs' points and their results are not all held at once."""
    extra = (horizon, source, seed, fans)
    results: list = []

    def take(res) -> None:
        if slim:
            _slim(items[len(results)])
        results.append(res)

    if jobs > 1 and len(items) > 1:
        from grpofit.core.limits import cap_jobs

        jobs = cap_jobs(jobs, len(items))
    if jobs > 1 and len(items) > 1:
        import grpofit.fitting  # noqa: F401 - imported once here for the forked workers
        import grpofit.forecasting.engine  # noqa: F401
        from grpofit.commands.pipeline import map_items
        from grpofit.forecasting.lbfgsb import preload

        preload()

        try:
            map_items(_draws_one, items, extra, jobs=jobs, lost=_lost, chunk=1, sink=take)
            return results
        except OSError:  # no pool: the runs not done yet in this process
            pass
    for it in items[len(results) :]:
        take(_draws_one(it, extra))
    return results


def _lost(item: RankItem):
    from grpofit.forecasting.horizon import HorizonDraws

    return HorizonDraws(None, {}, "none", "the worker forecasting this run died")


def _num(x):
    from grpofit.core.numbers import finite

    return finite(x)


def rank_series(
    items: list[RankItem], *, horizon: float, source: str, opts: RankOptions, slim: bool = False
) -> RankOutcome:
    """The ``grpofit.rank/1`` document for runs already read and cut. ``slim``: the items are
    the caller's to give up: each is cut to its first and last point once forecast
    (:func:`_slim`; not with ``opts.fans``, whose figure draws the points)."""
    from grpofit.core.vocabulary import SCHEMAS
    from grpofit.forecasting.engine import _step_out

    results = _forecast_all(items, horizon, source, opts.seed, opts.jobs, opts.fans, slim and not opts.fans)
    verdicts = judge(
        [r.draws for r in results],
        margin=opts.margin,
        confidence=opts.confidence,
        seed=opts.seed,
        open_ended=[r.open_ended for r in results],
        ess=[r.ess for r in results],
    )
    runs = []
    for item, res, v in zip(items, results, verdicts):
        at = res.entry.get("at", [{}])[0] if res.entry.get("at") else {}
        last = float(item.steps[-1]) if item.steps.size else None  # kept by _slim
        final = {"mean": _num(at.get("mean")), "pi80": at.get("pi80"), "pi95": at.get("pi95")}
        if final["mean"] is None and res.entry.get("final"):  # the level seen, or held
            final = res.entry["final"]
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
        runs.append(
            {
                "run": item.name,
                "metric": item.metric,
                "seen": {
                    "steps": [_step_out(item.steps[0]), _step_out(last)] if item.steps.size else [None, None],
                    "n_points": _seen(item),
                },
                "final": final,
                "p_best": v["p_best"],
                "p_within_margin": v["p_within_margin"],
                "p_best_error": v.get("p_best_error"),
                "p_within_error": v.get("p_within_error"),
                "recommendation": v["recommendation"],
                "borderline": v.get("borderline"),
                "safe_choice": bool(v.get("safe_choice")),
                "saved": saved,
                "basis": res.kind,
                "note": note,
            }
        )
    ranked = [r for r in runs if r["p_best"] is not None]
    best = max(ranked, key=lambda r: r["p_best"])["run"] if ranked else None
    doc = {
        "schema": SCHEMAS["rank"],
        "horizon": {"step": _step_out(horizon), "source": source},
        "margin": opts.margin,
        "confidence": opts.confidence,
        "runs": runs,
        "best": best,
    }
    if opts.until is not None:
        doc["until"] = opts.until
    missing = len(runs) - len(ranked)
    if missing:
        doc["note"] = (
            f"{missing} of {len(runs)} runs cannot be forecast yet and take no part in p_best: "
            "the probabilities are among the others, and a run of those may still end best"
        )
    return RankOutcome(doc, list(zip(items, results)))


def common_horizon(configs, items, option) -> tuple[float, str]:
    """``--horizon``; else the latest planned end in the runs' configs; else the longest run's last
    step (as logged: with ``--until`` the sweep is replayed up to where its runs went)."""
    from grpofit.readers.plan import planned_last_step

    if option is not None:
        return float(option), "--horizon"
    planned = [planned_last_step(c)[0] for c in configs]
    planned = [p for p in planned if p is not None]
    if planned:
        return max(planned), "planned end (config)"
    last = max(float(it.full_last) for it in items if it.full_last is not None)
    return last, "last step of the longest run"


def rank_paths(paths: list[str], opts: RankOptions) -> RankOutcome:
    """Read every run under ``paths`` (files, folders, globs, ``FILE::RUN``), cut at ``--until``,
    and rank them."""
    from grpofit.fitting.analysis import resolve_column
    from grpofit.readers import read_path
    from grpofit.readers.plan import batch_size
    from grpofit.readers.selection import matches, no_match

    check_options(opts)
    configs, items, warnings, errors = [], [], [], []  # a run's config, not the run: memory per run stays small
    expanded = [p for spec in paths for p in expand_argument(spec)]
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
                if not opts.fans:  # the points after --until are drawn on the figure only
                    rest = None
                batch, _ = batch_size(run.config, opts.batch_size)
                configs.append(run.config)
                items.append(
                    RankItem(
                        run.name,
                        column,
                        np.asarray(steps, float),
                        np.asarray(values, float),
                        batch,
                        step_seconds(run),
                        gpu_count(run.config),
                        rest,
                        full_last,
                    )
                )
        except GrpofitError as e:
            if len(expanded) == 1:
                raise
            errors.append({"run": path, "error": e.one_line()})
    if opts.run_pattern and not items and not errors:
        raise no_match(opts.run_pattern, paths)
    if not items and errors:
        raise UsageError(
            f"no run could be read: {errors[0]['error']}"
            + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""),
            fix="pass log files or run folders of the sweep",
        )
    if not items:
        raise UsageError(
            f"no run could be read from {' '.join(paths)}", fix="pass log files or run folders of the sweep"
        )
    empty = [it.name for it in items if not it.steps.size]
    if len(empty) == len(items):
        raise UsageError(f"no run has a step at or before --until {opts.until}", fix="pass a later --until step")
    horizon, source = common_horizon(configs, items, opts.horizon)
    done = rank_series(items, horizon=horizon, source=source, opts=opts, slim=True)
    done.warnings = warnings
    if errors:
        done.doc["errors"] = errors
    return done
