"""``grpofit backtest``: forecasts from cut points of finished runs against what happened.

For each run and each cut fraction ``f`` (default 20/30/50/70%) the run is cut at step
``first + f (last - first)`` and forecast (:func:`grpofit.forecasting.engine.forecast_series`)
to its last step. What is compared is the run's **final level**: the mean logged reward over
its last 10% of steps. The forecast predicts that mean (the expected reward averaged over
those steps plus the observation noise of the average) with a 95% interval; ``covered`` says
whether the actual level is inside, ``error`` is ``|predicted median - actual|`` (the
predictive median: the point forecast that minimises the expected absolute error). Where the
run is still rising and the seen steps do not show where the rise stops, the prediction is a
lower bound (``kind: lower_bound``, upper end null): ``covered`` then says whether the level
reached it, and the summary counts these cuts (``lower_bounds``) so that coverage is not read
as two-sided.

``point`` records how the point forecast was made (the model's median before it was held
against persistence, persistence, the rolling-origin model weight, still rising?), so that other
point rules can be recomputed from a backtest (``benchmarks/forecast_measure.py`` does).

Two baselines on the same cut: **persistence** (the mean of the last tenth of the seen points)
and a plain **single exponential** (grpofit's exponential fit of the seen points, averaged over
the final window). The summary gives coverage, median and worst error, per fraction and overall;
baselines are summarised over the cuts where a forecast was made, so the comparison is fair.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grpofit.core.numbers import finite as _num
from grpofit.core.vocabulary import SCHEMAS

__all__ = [
    "DEFAULT_CUTS",
    "FINAL_FRACTION",
    "backtest_series",
    "backtest_run",
    "summarise",
    "backtest_paths",
    "parse_cuts",
]

DEFAULT_CUTS = (0.2, 0.3, 0.5, 0.7)
#: the final level is the mean over this last fraction of the run's steps
FINAL_FRACTION = 0.1


def parse_cuts(text: str | None) -> tuple[float, ...]:
    """``"20,30,50,70"`` (percent) or ``"0.2,0.5"`` (fractions) -> fractions in (0, 1)."""
    from grpofit.core.errors import UsageError

    if not text:
        return DEFAULT_CUTS
    out = []
    for item in text.split(","):
        item = item.strip().rstrip("%")
        try:
            v = float(item)
        except ValueError:
            raise UsageError(f"--cuts {text!r} is not a list of percentages", fix="e.g. --cuts 20,30,50,70") from None
        v = v / 100.0 if v > 1 else v
        if not 0.0 < v < 1.0:
            raise UsageError(f"--cuts: {item} is not between 0 and 100%", fix="e.g. --cuts 20,30,50,70")
        out.append(v)
    return tuple(out)


#: a "done" / "no further gain expected" call is wrong when the final level then lies more than
#: this share of the metric's range (its bounds, else the run's range) above the level at the cut
WRONG_RISE = 0.05


def _stop_call(recommendation: str | None) -> bool:
    return bool(recommendation) and recommendation.startswith(("done", "no further gain"))


def backtest_series(
    steps, values, *, cuts=DEFAULT_CUTS, batch: int | None = None, seed: int = 0, bounds=None, metric: str | None = None
) -> list[dict]:
    """The contract's ``cuts`` list for one series. Each cut also records the forecast's
    ``recommendation`` and, for a "done" / "no further gain expected" call, whether it was wrong
    (``recommendation_wrong``: the final level rose above the level at the cut by more than
    :data:`WRONG_RISE` of the metric's range)."""
    from grpofit.core.errors import GrpofitError
    from grpofit.fitting import MIN_POINTS as FIT_MIN
    from grpofit.fitting import fit_series
    from grpofit.fitting.bounds import metric_bounds
    from grpofit.fitting.drift import persistence
    from grpofit.forecasting.engine import forecast_series
    from grpofit.laws.models import exponential

    steps = np.asarray(steps, dtype=float)
    values = np.asarray(values, dtype=float)
    first, last = float(steps[0]), float(steps[-1])
    span = last - first
    window = steps >= last - FINAL_FRACTION * span
    actual = float(values[window].mean())
    if bounds is None:
        bounds = metric_bounds(metric, values, batch=batch)
    extent = (bounds.high - bounds.low) if bounds.two_sided else float(np.ptp(values))
    out = []
    for frac in cuts:
        cut = first + frac * span
        seen = steps <= cut
        s, v = steps[seen], values[seen]
        fc = forecast_series(
            s,
            v,
            horizon_step=last,
            horizon_source="backtest: the run's last step",
            final_steps=steps[window],
            batch=batch,
            seed=seed,
            bounds=bounds,
        )
        entry = {"fraction": frac, "step": _num(s[-1]) if s.size else _num(cut), "n_seen": int(s.size)}
        if fc.final is not None:
            lo, hi = fc.final["pi95"]
            entry["predicted"] = {
                "mean": fc.final["mean"],
                "median": fc.final["median"],
                "pi95": [lo, hi],
                "kind": fc.final["kind"],
            }
            entry["covered"] = bool(lo <= actual and (hi is None or actual <= hi))
            entry["error"] = abs(fc.final["median"] - actual)
        else:
            entry["predicted"] = {"mean": None, "median": None, "pi95": None}
            entry["covered"] = None
            entry["error"] = None
        entry["actual"] = actual
        pers = persistence(v) if s.size else None
        exp_pred = None
        base = fc.extra.get("baseline")
        if base is None and s.size >= FIT_MIN:
            try:
                base = fit_series(s, v, bounds=bounds)
            except GrpofitError:
                base = None
        est = [base.param(k, "exponential") for k in ("plateau", "initial", "timescale")] if base else []
        if est and all(e is not None and e.value is not None for e in est):
            curve = exponential(steps[window] - s[0], *(e.value for e in est))
            exp_pred = float(np.mean(curve))
        entry["baselines"] = {
            "persistence": {"prediction": pers, "error": None if pers is None else abs(pers - actual)},
            "exponential": {"prediction": exp_pred, "error": None if exp_pred is None else abs(exp_pred - actual)},
        }
        entry["plateau"] = fc.doc.get("plateau")
        if fc.final is not None:
            pt = fc.doc.get("point") or {}
            entry["point"] = {
                "model_median": fc.final.get("model_median"),
                "persistence": pt.get("persistence"),
                "model_weight": pt.get("model_weight"),
                "still_rising": fc.doc.get("still_rising"),
            }
        entry["note"] = fc.doc.get("note") if fc.final is None else None
        rec = fc.doc.get("recommendation")
        entry["recommendation"] = rec
        entry["recommendation_wrong"] = (
            bool(actual - pers > WRONG_RISE * extent) if _stop_call(rec) and pers is not None else None
        )
        out.append(entry)
    return out


def backtest_run(run, *, metric=None, cuts=DEFAULT_CUTS, batch_size=None, seed=0, bounds=None) -> dict:
    """``bounds``: ``"LO,HI"`` (the option) or None (from the metric, the config, the values)."""
    from grpofit.fitting.analysis import resolve_column
    from grpofit.fitting.bounds import metric_bounds, parse_bounds
    from grpofit.fitting.outliers import exclude
    from grpofit.readers.plan import batch_size as find_batch

    column = resolve_column(run, "reward", metric)
    outliers = exclude(run, column)  # the same points as fit and diagnose
    steps, values = run.series(column)
    batch, _ = find_batch(run.config, batch_size)
    entry = {"run": run.name, "metric": column, "steps": [_num(steps[0]), _num(steps[-1])] if steps.size else None}
    if outliers is not None:
        entry["outliers"] = outliers.summary()
    if steps.size < 2:
        entry["cuts"] = []
        entry["note"] = "too few points to backtest"
        return entry
    found = metric_bounds(column, values, option=parse_bounds(bounds), config=run.config, batch=batch)
    entry["bounds"] = found.doc()
    entry["cuts"] = backtest_series(steps, values, cuts=cuts, batch=batch, seed=seed, bounds=found)
    return entry


def _stats(errors: list[float]) -> dict:
    errors = [e for e in errors if e is not None]
    if not errors:
        return {"median_error": None, "worst_error": None}
    return {"median_error": float(np.median(errors)), "worst_error": float(np.max(errors))}


def summarise(runs: list[dict]) -> dict:
    """Coverage and errors overall and per cut fraction; baselines on the forecast cuts."""
    cuts = [c for r in runs for c in r.get("cuts", [])]
    made = [c for c in cuts if c.get("error") is not None]

    def block(items):
        cov = [c["covered"] for c in items]
        return {
            "n": len(items),
            "coverage": float(np.mean(cov)) if cov else None,
            "lower_bounds": sum(1 for c in items if c["predicted"].get("kind") == "lower_bound"),
            **_stats([c["error"] for c in items]),
            "baselines": {
                name: _stats([c["baselines"][name]["error"] for c in items]) for name in ("persistence", "exponential")
            },
        }

    overall = block(made)
    calls = [c for c in cuts if c.get("recommendation_wrong") is not None]
    wrong = sum(1 for c in calls if c["recommendation_wrong"])
    stops = {
        "calls": len(calls),
        "wrong": wrong,
        "wrong_rate": (wrong / len(calls)) if calls else None,
        "rule": f"'done' / 'no further gain expected', then the final level rose by more than {WRONG_RISE:.0%} "
        "of the metric's range above the level at the cut",
    }
    by_fraction = {}
    for frac in sorted({c["fraction"] for c in cuts}):
        b = block([c for c in made if c["fraction"] == frac])
        by_fraction[f"{frac:.0%}"] = {
            "n": b["n"],
            "coverage": b["coverage"],
            "lower_bounds": b["lower_bounds"],
            "median_error": b["median_error"],
            "persistence_median_error": b["baselines"]["persistence"]["median_error"],
            "exponential_median_error": b["baselines"]["exponential"]["median_error"],
        }
    return {
        "n_cuts": len(cuts),
        "n_forecasts": len(made),
        "coverage": overall["coverage"],
        "lower_bounds": overall["lower_bounds"],
        "median_error": overall["median_error"],
        "worst_error": overall["worst_error"],
        "baselines": overall["baselines"],
        "by_fraction": by_fraction,
        "stop_recommendations": stops,
    }


@dataclass
class _Task:
    path: str
    metric: str | None
    step: str | None
    cuts: tuple
    batch_size: int | None
    plot_dir: str | None
    run_pattern: str | None = None
    bounds: str | None = None


def _work(task: _Task, _extra=None) -> tuple[list[dict], list, list[str]]:
    from grpofit.core.errors import GrpofitError
    from grpofit.readers import read_path

    entries, errors, warnings = [], [], []
    from grpofit.commands.pipeline import RunError

    try:
        runs = read_path(task.path, step=task.step)
    except GrpofitError as e:
        return [], [RunError.of(task.path, e)], []
    from grpofit.readers.selection import matches

    for run in [r for r in runs if matches(r, task.run_pattern)]:
        try:
            entry = backtest_run(
                run, metric=task.metric, cuts=task.cuts, batch_size=task.batch_size, bounds=task.bounds
            )
        except GrpofitError as e:
            errors.append(RunError.of(run.name, e))
            continue
        finally:  # after the backtest: it may have added one (outliers excluded)
            warnings.extend(f"{run.name}: {w}" for w in run.warnings)
        entries.append(entry)
        if task.plot_dir:
            from grpofit.render.backtest_plot import save_backtest_figure

            save_backtest_figure(run, entry, task.plot_dir)
    return entries, errors, warnings


def _lost(task: _Task) -> tuple[list, list, list]:
    from grpofit.commands.pipeline import RunError

    return [], [RunError(task.path, "the worker backtesting this file died (out of memory or killed)")], []


def _run_tasks(tasks: list[_Task], jobs: int) -> list:
    """:func:`_work` on every task, in ``jobs`` workers of the ``--jobs`` pool
    (:func:`grpofit.commands.pipeline.map_items`: workers stopped on a signal, none orphaned, the pool
    rebuilt after a worker dies)."""
    if jobs > 1 and len(tasks) > 1:
        from grpofit.core.limits import cap_jobs

        jobs = cap_jobs(jobs, len(tasks))
    if jobs > 1 and len(tasks) > 1:
        import ctypes  # noqa: F401 - imported once here for the forked workers

        import grpofit.fitting  # noqa: F401
        import grpofit.forecasting.engine  # noqa: F401
        import grpofit.readers.delimited  # noqa: F401
        from grpofit.commands.pipeline import map_items
        from grpofit.forecasting.lbfgsb import preload

        preload()

        if tasks[0].plot_dir is not None:
            import grpofit.render.backtest_plot  # noqa: F401
        try:
            return map_items(_work, tasks, None, jobs=jobs, lost=_lost, chunk=1)  # a run takes about a second
        except OSError:  # no process could be started: work here instead
            pass
    return [_work(t) for t in tasks]


def backtest_paths(
    paths: list[str],
    *,
    metric=None,
    step=None,
    cuts=DEFAULT_CUTS,
    batch_size=None,
    jobs: int = 1,
    plot_dir=None,
    run_pattern: str | None = None,
    bounds: str | None = None,
) -> tuple[dict, list[str]]:
    """The ``grpofit.backtest/1`` document for every run under ``paths`` and the warnings."""
    from grpofit.commands.pipeline import RunError
    from grpofit.core.errors import GrpofitError
    from grpofit.readers import discover

    files, early = [], []
    for path in paths:
        try:
            files.extend(discover([path]))
        except GrpofitError as e:
            if len(paths) == 1:
                raise
            early.append(RunError.of(path, e))
    tasks = [
        _Task(
            f.path,
            metric,
            step,
            tuple(cuts),
            batch_size,
            None if plot_dir is None else str(plot_dir),
            run_pattern,
            bounds,
        )
        for f in files
    ]
    results = _run_tasks(tasks, jobs)
    runs, errors, warnings = [], list(early), []
    for e, err, w in results:
        runs.extend(e)
        errors.extend(err)
        warnings.extend(w)
    from grpofit.commands.pipeline import raise_bad_option

    raise_bad_option(errors, len(runs))  # --metric/--step that no run has: exit 2, nothing on stdout
    errors = [e.summary() for e in errors]
    if run_pattern and not runs and not errors:
        from grpofit.readers.selection import no_match

        raise no_match(run_pattern, paths)
    doc = {
        "schema": SCHEMAS["backtest"],
        "final_level": f"mean of the last {FINAL_FRACTION:.0%} of steps",
        "runs": runs,
        "summary": summarise(runs),
    }
    if errors:
        doc["errors"] = errors
    return doc, warnings
