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
    cuts: Optional[str] = typer.Option(None, "--cuts", help="Cut points in percent of the steps (default 20,30,50,70)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Binary rewards per logged mean (binomial observation noise)."),
    bounds: Optional[str] = typer.Option(None, "--bounds", help="The metric's range LO,HI (e.g. 0,1); else from its name, the config, or [0, 1] when every value lies there."),
    format: DiagnoseFormat = typer.Option(DiagnoseFormat.table, "--format", help="table, json or markdown."),
    plot_dir: Optional[Path] = typer.Option(None, "--plot-dir", help="Write one figure per run into this folder."),
    jobs: int = typer.Option(1, "--jobs", min=1, help="Backtest files in N parallel processes."),
    run_pattern: Optional[str] = RUN_PATTERN,
    debug: bool = DEBUG,
) -> int:
    """Forecast finished runs from cut points and compare with what happened: 95% interval
    coverage of the final level, error against persistence and a plain exponential.

    Example: grpofit backtest logs/ --cuts 25,50 --jobs 2 --format markdown
    """
    from grpofit.commands.backtest import backtest_paths, parse_cuts

    if batch_size is not None and batch_size < 1:
        raise UsageError(f"--batch-size {batch_size} is not positive", fix="pass the number of rewards averaged per logged step")
    from grpofit.forecasting.bounds import parse_bounds

    parse_bounds(bounds)
    if plot_dir is not None:
        from grpofit.cli.common import check_writable

        check_writable(plot_dir, "--plot-dir", folder=True)
    doc, warnings = backtest_paths(paths, metric=metric, step=step, cuts=parse_cuts(cuts), batch_size=batch_size,
                                   jobs=jobs, plot_dir=plot_dir, run_pattern=run_pattern,
                                   bounds=bounds)
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
    for e in doc.get("errors", []):
        typer.echo(f"error: {e['error']}", err=True)
    return ExitCode.BAD_INPUT if doc.get("errors") else ExitCode.OK
