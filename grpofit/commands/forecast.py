"""``grpofit forecast``: read runs, cut them (``--until``), forecast each, collect the document.

The document is the contract's ``grpofit.forecast/1``; one unreadable run does not hide the
others (it is listed under ``errors``). Options are checked before anything is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grpofit.core.errors import GrpofitError, UsageError
from grpofit.core.vocabulary import SCHEMAS

__all__ = ["ForecastOptions", "forecast_run", "forecast_paths", "check_options"]


@dataclass
class ForecastOptions:
    metric: str | None = None
    step: str | None = None
    horizon: int | None = None
    at: list = field(default_factory=list)
    until: float | None = None
    batch_size: int | None = None
    seed: int = 0
    run_pattern: str | None = None  #: ``--run PATTERN``: forecast only the runs it matches
    prior: object = None  #: ``--prior``: a :class:`~.prior.Prior` (built once, see :func:`forecast_paths`)
    covariates: dict = field(default_factory=dict)  #: ``--covariate NAME=VALUE``: the run's, over its config's
    bounds: str | None = None  #: ``--bounds LO,HI``: the metric's range (:mod:`.bounds`)


def check_options(opts: ForecastOptions) -> None:
    """Bad option values: one line naming the option and the fix."""
    from grpofit.core.limits import check_step

    if opts.horizon is not None and opts.horizon < 1:
        raise UsageError(
            f"--horizon {opts.horizon} is not a positive step", fix="pass the planned last step, e.g. --horizon 1000"
        )
    if opts.horizon is not None:
        check_step("--horizon", opts.horizon, example="1000", positive=True)
    for s in opts.at:
        check_step("--at", s, example="500")
    if opts.until is not None:
        check_step("--until", opts.until, example="250")
    from grpofit.fitting.bounds import parse_bounds

    parse_bounds(opts.bounds)
    if opts.batch_size is not None and opts.batch_size < 1:
        raise UsageError(
            f"--batch-size {opts.batch_size} is not positive", fix="pass the number of rewards averaged per logged step"
        )


def forecast_run(run, opts: ForecastOptions, *, final_steps=None, warm=None):
    """``(entry, Forecast, rest)`` for one run; ``rest`` are the points after ``--until``
    (``warm``: see :func:`~grpofit.forecasting.engine.forecast_series`)."""
    from grpofit.fitting.analysis import resolve_column
    from grpofit.fitting.bounds import metric_bounds, parse_bounds
    from grpofit.fitting.outliers import exclude
    from grpofit.forecasting.engine import forecast_series
    from grpofit.readers.plan import batch_size, planned_last_step

    column = resolve_column(run, "reward", opts.metric)
    outliers = exclude(run, column)  # the same points as fit and diagnose
    steps, values = run.series(column)
    rest = None
    if opts.until is not None:
        keep = steps <= opts.until
        rest = (steps[~keep], values[~keep])
        steps, values = steps[keep], values[keep]
    horizon, source = planned_last_step(run.config, opts.horizon)
    if horizon is None and rest is not None and rest[0].size:
        # a finished run replayed: where it ended is the end a forecast at the cut would aim at
        horizon, source = float(rest[0][-1]), "the run's last logged step (--until replays the run)"
    batch, batch_source = batch_size(run.config, opts.batch_size)
    bounds = metric_bounds(column, values, option=parse_bounds(opts.bounds), config=run.config, batch=batch)
    fc = forecast_series(
        steps,
        values,
        horizon_step=horizon,
        horizon_source=source,
        at_steps=opts.at,
        batch=batch,
        final_steps=final_steps,
        seed=opts.seed,
        warm=warm,
        bounds=bounds,
    )
    entry = {"run": run.name, "metric": column, **fc.doc}
    _fit_plateau(entry, fc, run, column, steps, values, cut=opts.until is not None, bounds=bounds)
    entry["batch_size"] = {"value": batch, "source": batch_source}
    collapse = (getattr(fc, "extra", None) or {}).get(
        "collapse"
    )  # the shared judgement's (analysis.confirmed_collapse)
    entry["collapse"] = collapse.summary() if collapse is not None else None
    if opts.until is not None:
        entry["until"] = opts.until
    if outliers is not None:
        entry["outliers"] = outliers.summary()
    if opts.prior is not None:
        from grpofit.forecasting.prior import apply_prior, covariates_of

        apply_prior(
            entry,
            opts.prior,
            steps,
            values,
            horizon,
            covariates={**covariates_of(run), **opts.covariates},
            seed=opts.seed,
        )
    return entry, fc, rest


def _fit_plateau(entry: dict, fc, run, column: str, steps, values, *, cut: bool, bounds=None) -> None:
    """The plateau as ``grpofit fit`` states it (:func:`grpofit.fitting.fitcheck.plateau_statement`
    of the same fit: the forecast's own fit of the steps seen, which is ``fit``'s when the run did
    not collapse; :func:`grpofit.fitting.analysis.fit_run`'s fit before the collapse when it did):
    one plateau statement per run on every surface. The forecast's own plateau draws, from which
    the steps to 90/95% of the gain and the remaining gain come, stay in ``plateau_draws``.
    Where the metric has bounds, an interval end the fit's law puts past one is held at it
    (``ci95_clipped`` says which bound): a rate's plateau cannot exceed 1."""
    from grpofit.fitting import MIN_POINTS, fit_series
    from grpofit.fitting.analysis import fit_run
    from grpofit.fitting.fitcheck import plateau_statement

    draws = entry.get("plateau")
    if steps.size < MIN_POINTS or not draws or draws.get("value") is None:
        return  # no forecast, no plateau: the refusal's note says why
    extra = getattr(fc, "extra", None) or {}
    fit = extra.get("baseline") if extra.get("collapse") is None else extra.get("before")
    if fit is None:
        fit = (
            fit_series(steps, values, run=run.name, metric=column, bounds=bounds)
            if cut
            else fit_run(run, metric=column)
        )
    st = plateau_statement(fit)
    if st is None:
        return
    entry["plateau_draws"] = draws
    entry["plateau"] = {
        "value": st["value"],
        "ci95": st["ci95"],
        "kind": st["kind"],
        "law_value": st["law_value"],
        "source": "fit",
    }
    held = str(getattr(fit.param("plateau"), "note", None) or "")
    if "held inside the metric's bounds" in held:  # the fit held its law's interval at a bound
        entry["plateau"]["ci95_clipped"] = held[held.index("held inside the metric's bounds") :]
    _clip_to_bounds(entry["plateau"], bounds)


def _clip_to_bounds(plateau: dict, bounds) -> None:
    """Hold the plateau's interval ends inside the metric's bounds, saying so."""
    ci = plateau.get("ci95")
    if ci is None or bounds is None or not getattr(bounds, "two_sided", False):
        return
    lo, hi = ci
    held = [lo is not None and lo < bounds.low, hi is not None and hi > bounds.high]
    if not any(held):
        return
    plateau["ci95"] = [max(lo, bounds.low) if lo is not None else lo, min(hi, bounds.high) if hi is not None else hi]
    plateau["ci95_clipped"] = f"held inside the metric's bounds [{bounds.low:g}, {bounds.high:g}] ({bounds.source})"


@dataclass
class ForecastOutcome:
    doc: dict
    items: list  #: (Forecast, entry, rest) for plots
    warnings: list


def forecast_paths(paths: list[str], opts: ForecastOptions, *, prior_paths=(), save_prior=None) -> ForecastOutcome:
    from grpofit.readers import read_path
    from grpofit.readers.selection import matches, no_match

    check_options(opts)
    if prior_paths:
        from grpofit.forecasting.prior import load_prior

        opts.prior = load_prior(list(prior_paths), metric=opts.metric, step=opts.step)
    entries, items, warnings, errors = [], [], [], []
    for path in paths:
        try:
            runs = [r for r in read_path(path, step=opts.step) if matches(r, opts.run_pattern)]
            for run in runs:
                try:
                    entry, fc, rest = forecast_run(run, opts)
                finally:  # after the forecast: it may have added one (outliers excluded)
                    warnings.extend(f"{run.name}: {w}" for w in run.warnings)
                entries.append(entry)
                items.append((fc, entry, rest))
        except GrpofitError as e:
            if len(paths) == 1:
                raise
            errors.append({"run": path, "error": e.one_line()})
    if opts.run_pattern and not entries and not errors:
        raise no_match(opts.run_pattern, paths)
    doc = {"schema": SCHEMAS["forecast"], "runs": entries}
    if save_prior is not None and opts.prior is not None:
        opts.prior.save(str(save_prior))
    if errors:
        doc["errors"] = errors
    return ForecastOutcome(doc, items, warnings)
