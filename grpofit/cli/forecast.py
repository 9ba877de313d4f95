"""``grpofit forecast``: each run's expected reward at the planned end, with prediction intervals."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from grpofit.cli.common import DEBUG, METRIC, RUN_PATTERN, STEP, TableOrJson, print_json, warn
from grpofit.core.errors import ExitCode


def forecast(
    runs: List[str] = typer.Argument(..., help="Log files or run folders ('-' reads standard input)."),
    metric: Optional[str] = METRIC,
    step: Optional[str] = STEP,
    horizon: Optional[int] = typer.Option(
        None,
        "--horizon",
        help="Planned last step, at most 1e15 (else from the config: trainer.total_training_steps, max_steps).",
    ),
    at: List[float] = typer.Option([], "--at", help="Also forecast at this step (repeatable; within ±1e15)."),
    until: Optional[float] = typer.Option(
        None, "--until", help="Cut the run after this step (within ±1e15): what would have been forecast then."
    ),
    batch_size: Optional[int] = typer.Option(
        None,
        "--batch-size",
        help="Binary rewards per logged mean (binomial observation noise; else from the config, else estimated).",
    ),
    bounds: Optional[str] = typer.Option(
        None,
        "--bounds",
        help="The metric's range LO,HI (e.g. 0,1): every interval and draw stays inside it (else from the metric's name, the config, or [0, 1] when every value lies there).",
    ),
    format: TableOrJson = typer.Option(TableOrJson.table, "--format", help="table (people) or json (scripts)."),
    plot: Optional[Path] = typer.Option(
        None,
        "--plot",
        help="Write a fan chart: data, fit, median forecast, 80/95% bands, planned end (.png/.svg/.pdf).",
    ),
    run_pattern: Optional[str] = RUN_PATTERN,
    prior: List[str] = typer.Option(
        [],
        "--prior",
        help="Finished runs (files, folders) or a saved grpofit.prior/1 JSON: a population prior combined with each run's own data (docs/prior.md; repeatable).",
    ),
    save_prior: Optional[Path] = typer.Option(
        None, "--save-prior", help="Write the prior built from --prior to this JSON file (grpofit.prior/1)."
    ),
    covariate: List[str] = typer.Option(
        [],
        "--covariate",
        help="NAME=VALUE of the run being forecast (lr, momentum, refresh, group_size, kl, size), over its config's (repeatable).",
    ),
    debug: bool = DEBUG,
) -> int:
    """Forecast each run from the steps seen so far: expected reward at the planned end with
    80/95% prediction intervals, plateau, steps to 90/95% of the gain, gain still expected.

    Example: grpofit forecast run.csv --horizon 1000 --at 500 --plot fan.png
    """
    from grpofit.commands.forecast import ForecastOptions, forecast_paths

    if plot is not None:
        from grpofit.cli.common import check_writable
        from grpofit.render.plotting import check_suffix

        check_suffix(plot, option="--plot")
        check_writable(plot, "--plot")
    from grpofit.core.errors import UsageError
    from grpofit.forecasting.prior import parse_covariates

    if save_prior is not None and not prior:
        raise UsageError(
            "--save-prior needs --prior", fix="pass the finished runs: --prior runs/ --save-prior prior.json"
        )
    if save_prior is not None:
        from grpofit.cli.common import check_writable

        check_writable(save_prior, "--save-prior")
    done = forecast_paths(
        runs,
        ForecastOptions(
            metric=metric,
            step=step,
            horizon=horizon,
            at=list(at),
            until=until,
            batch_size=batch_size,
            run_pattern=run_pattern,
            bounds=bounds,
            covariates=parse_covariates(covariate),
        ),
        prior_paths=list(prior),
        save_prior=save_prior,
    )
    warn(done.warnings)
    if format is TableOrJson.json:
        print_json(done.doc)
    else:
        from grpofit.render import tables as render
        from grpofit.render.forecast import forecast_tables

        render.print_tables(forecast_tables(done.doc))
    if plot is not None and done.items:
        from grpofit.render.fanchart import save_fan_figure

        save_fan_figure(done.items, plot)
    from grpofit.cli.common import echo_err

    for e in done.doc.get("errors", []):  # escaped like every command's error lines (names come from files)
        echo_err(f"error: {e['error']}")
    return ExitCode.BAD_INPUT if done.doc.get("errors") else ExitCode.OK
