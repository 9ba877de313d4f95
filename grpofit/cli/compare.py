"""``grpofit compare``: plateau, timescale, inertia and damping ratio of two runs or groups."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from grpofit.cli.common import DEBUG, METRIC, RUN_PATTERN, STEP, TableOrJson, echo_err, print_json, shown, warn
from grpofit.core.errors import ExitCode


def compare(
    a: str = typer.Argument(..., help="Run A: a log file, a run folder, a glob pattern (a group) or FILE::RUN."),
    b: str = typer.Argument(..., help="Run B, the same way."),
    metric: Optional[str] = METRIC,
    step: Optional[str] = STEP,
    margin: float = typer.Option(
        0.1, "--margin", help="Equivalence margin for 'same', as a fraction of each quantity's scale."
    ),
    format: TableOrJson = typer.Option(TableOrJson.table, "--format", help="table (people) or json (scripts)."),
    plot: Optional[Path] = typer.Option(
        None, "--plot", help="Write an overlay of both sides' data and fits (.png/.svg/.pdf)."
    ),
    run_pattern: Optional[str] = RUN_PATTERN,
    debug: bool = DEBUG,
) -> int:
    """Differences in plateau, timescale, inertia and damping ratio between two runs or groups.

    Each quantity gets B - A with a 95% interval, a p-value and a verdict: differs, same (within
    --margin of its scale) or cannot tell.

    Example: grpofit compare sync.csv 'async_*.csv' --format json

    Example: grpofit compare export.csv export.csv --run '*GRPO*' (FILE::RUN picks one run of a file)
    """
    if plot is not None:
        from grpofit.cli.common import check_writable
        from grpofit.render.plotting import check_suffix

        check_suffix(plot, option="--plot")
        check_writable(plot, "--plot")
    from grpofit.commands.compare import compare_paths

    doc, side_a, side_b = compare_paths([a], [b], metric=metric, step=step, margin=margin, run_pattern=run_pattern)
    warn(side_a.warnings + side_b.warnings)
    if format is TableOrJson.json:
        print_json(doc)
    else:
        from grpofit.render import tables as render
        from grpofit.render.compare import compare_table

        render.print_tables([compare_table(shown(doc))])
        typer.echo(shown({"s": doc["summary"]})["s"])
    if plot is not None:
        from grpofit.render.compare import save_compare_figure

        save_compare_figure(side_a.fits, side_b.fits, plot, doc["law"])
    for e in side_a.errors + side_b.errors:
        echo_err(f"error: {e}")
    return ExitCode.BAD_INPUT if (side_a.errors or side_b.errors) else ExitCode.OK
