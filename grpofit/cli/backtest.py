"""``grpofit backtest``: finished runs forecast from cut points and compared with what happened."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from grpofit.cli.common import DEBUG, METRIC, RUN_PATTERN, STEP, DiagnoseFormat, print_json, warn
from grpofit.core.errors import ExitCode, UsageError


def backtest(
    paths: List[str] = typer.Argument(..., help="Finished runs: files, run folders or log directories."),
    metric: Optional[str] = METRIC,
    step: Optional[str] = STEP,
    cuts: Optional[str] = typer.Option(
        None, "--cuts", help="Cut points in percent of the steps (default 20,30,50,70)."
    ),
    batch_size: Optional[int] = typer.Option(
        None, "--batch-size", help="Binary rewards per logged mean (binomial observation noise)."
    ),
    bounds: Optional[str] = typer.Option(
        None,
        "--bounds",
        help="The metric's range LO,HI (e.g. 0,1); else from its name, the config, or [0, 1] when every value lies there.",
    ),
    format: DiagnoseFormat = typer.Option(DiagnoseFormat.table, "--format", help="table, json or markdown."),
    plot_dir: Optional[Path] = typer.Option(None, "--plot-dir", help="Write one figure per run into this folder."),
    jobs: int = typer.Option(1, "--jobs", min=1, help="Backtest files in N parallel processes."),
    run_pattern: Optional[str] = RUN_PATTERN,
    prior_from_others: bool = typer.Option(
        False,
        "--prior-from-others",
        help="Score every run leave-one-out with a prior built from the other runs, at 0% (before the first step), 10% and 25%, beside the forecast without it (docs/prior.md).",
    ),
    debug: bool = DEBUG,
) -> int:
    """Forecast finished runs from cut points and compare with what happened: 95% interval
    coverage of the final level, error against persistence and a plain exponential.

    Example: grpofit backtest logs/ --cuts 25,50 --jobs 2 --format markdown
    """
    from grpofit.commands.backtest import backtest_paths, parse_cuts

    if batch_size is not None and batch_size < 1:
        raise UsageError(
            f"--batch-size {batch_size} is not positive", fix="pass the number of rewards averaged per logged step"
        )
    from grpofit.fitting.bounds import parse_bounds

    parse_bounds(bounds)
    if plot_dir is not None:
        from grpofit.cli.common import check_writable

        check_writable(plot_dir, "--plot-dir", folder=True)
    if prior_from_others:
        return _prior_from_others(paths, metric, step, format, run_pattern)
    doc, warnings = backtest_paths(
        paths,
        metric=metric,
        step=step,
        cuts=parse_cuts(cuts),
        batch_size=batch_size,
        jobs=jobs,
        plot_dir=plot_dir,
        run_pattern=run_pattern,
        bounds=bounds,
    )
    warn(warnings)
    from grpofit.render.forecast import backtest_markdown, backtest_table

    if format is DiagnoseFormat.json:
        print_json(doc)
    elif format is DiagnoseFormat.markdown:
        typer.echo(backtest_markdown(doc), nl=False)
    elif doc["runs"] or not doc.get("errors"):  # nothing backtested, only errors: they say it all (stderr)
        from grpofit.render import tables as render

        table, lines = backtest_table(doc)
        render.print_tables([table])
        for line in lines:
            typer.echo(line)
    from grpofit.cli.common import echo_err

    for e in doc.get("errors", []):  # escaped like every command's error lines (names come from files)
        echo_err(f"error: {e['error']}")
    return ExitCode.BAD_INPUT if doc.get("errors") else ExitCode.OK


def _prior_from_others(paths, metric, step, format, run_pattern) -> int:
    from grpofit.forecasting.prior_backtest import loo_doc, loo_markdown
    from grpofit.readers import read_path
    from grpofit.readers.selection import matches

    runs = [r for p in paths for r in read_path(p, step=step) if matches(r, run_pattern)]
    if len(runs) < 3:
        raise UsageError(
            f"--prior-from-others needs at least three runs, {len(runs)} found in {' '.join(paths)}",
            fix="pass a sweep: the runs of one recipe",
        )
    doc = loo_doc(runs, metric=metric)
    if format is DiagnoseFormat.json:
        print_json(doc)
    else:
        typer.echo(loo_markdown(doc["summary"]["prior_from_others"]), nl=False)
    return ExitCode.OK
