"""``grpofit fit``: every law of the registry (:mod:`grpofit.laws.registry`) fitted to each run's reward; a table or the fit document."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from grpofit.cli.common import DEBUG, METRIC, RUN_PATTERN, STEP, TableOrJson, echo_err, print_json, shown, warn
from grpofit.core.errors import ExitCode


def fit(
    runs: List[str] = typer.Argument(..., help="Log files or run folders ('-' reads standard input)."),
    metric: Optional[str] = METRIC,
    step: Optional[str] = STEP,
    format: TableOrJson = typer.Option(TableOrJson.table, "--format", help="table (people) or json (scripts)."),
    plot: Optional[Path] = typer.Option(
        None, "--plot", help="Write a figure: data, both fits, residuals (.png/.svg/.pdf); several runs in a grid."
    ),
    overlay: bool = typer.Option(
        False, "--overlay", help="With --plot: every run on one axis with its preferred fit (e.g. GRPO vs GSPO)."
    ),
    run_pattern: Optional[str] = RUN_PATTERN,
    jobs: int = typer.Option(
        1, "--jobs", min=1, help="Fit files in N parallel processes (at most one per CPU and per file)."
    ),
    debug: bool = DEBUG,
) -> int:
    """Fit the single-exponential law and the damped oscillator to each run's reward.

    Example: grpofit fit run.csv --format json
    """
    if plot is not None:  # a bad figure name is an error before any work, not after the table
        from grpofit.cli.common import check_writable
        from grpofit.render.plotting import check_suffix

        check_suffix(plot, option="--plot")
        check_writable(plot, "--plot")
    # without --plot only each run's summary (for JSON: its text) is kept, made where the run is fitted
    from grpofit.commands.pipeline import fit_entry_json, fit_paths
    from grpofit.core.vocabulary import SCHEMAS
    from grpofit.fitting.analysis import fit_summary

    keep = None if plot is not None else fit_entry_json if format is TableOrJson.json else fit_summary
    done = fit_paths(runs, metric=metric, step=step, run_pattern=run_pattern, jobs=jobs, keep=keep)
    warn(done.warnings)
    summaries = done.results if plot is None else [fit_summary(r) for r in done.results]
    doc = {"schema": SCHEMAS["fit"], "runs": summaries}
    if done.errors:
        doc["errors"] = [e.summary() for e in done.errors]
    if format is TableOrJson.json:
        print_json(doc)
    else:
        from grpofit.render import tables as render

        rows = shown(doc["runs"])
        render.print_tables(render.fit_tables(rows))
        for line in render.fit_notes(rows):
            typer.echo(line)
    if plot is not None and done.results:
        from grpofit.render.plotting import save_fit_figure

        save_fit_figure(done.results, plot, overlay=overlay)
    for e in done.errors:
        echo_err(f"error: {e.error}")
    return ExitCode.BAD_INPUT if done.errors else ExitCode.OK
