"""``grpofit rank``: forecast every run of a sweep to a common horizon and say which to stop."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from grpofit.cli.common import DEBUG, METRIC, RUN_PATTERN, STEP, DiagnoseFormat, print_json, warn
from grpofit.core.errors import ExitCode


def rank(
    runs: List[str] = typer.Argument(
        ..., help="Log files, run folders, glob patterns or FILE::RUN ('-' reads standard input)."
    ),
    metric: Optional[str] = METRIC,
    step: Optional[str] = STEP,
    horizon: Optional[int] = typer.Option(
        None,
        "--horizon",
        help="The common step to compare the runs at (else the latest planned end in the configs, else the longest run's last step).",
    ),
    until: Optional[float] = typer.Option(
        None, "--until", help="Cut every run after this step: the decision the sweep faced then."
    ),
    margin: float = typer.Option(
        0.01,
        "--margin",
        help="A run 'ends within the margin' when its final reward is at most this far below the best run's (reward units).",
    ),
    confidence: float = typer.Option(
        0.95,
        "--confidence",
        help="Stop a run when it ends within the margin of the best with probability below 1 - this.",
    ),
    batch_size: Optional[int] = typer.Option(
        None,
        "--batch-size",
        help="Binary rewards per logged mean (binomial observation noise; else from the config, else estimated).",
    ),
    format: DiagnoseFormat = typer.Option(
        DiagnoseFormat.table, "--format", help="table (people), json (scripts) or markdown (CI summaries)."
    ),
    plot: Optional[Path] = typer.Option(
        None, "--plot", help="Write the runs' forecast fans side by side (.png/.svg/.pdf)."
    ),
    jobs: int = typer.Option(1, "--jobs", help="Forecast the runs in this many processes."),
    seed: int = typer.Option(0, "--seed", help="Seed of the predictive draws."),
    run_pattern: Optional[str] = RUN_PATTERN,
    debug: bool = DEBUG,
) -> int:
    """Rank the runs of a sweep: each run's expected reward at the common horizon with 80/95%
    intervals, the probability that it ends best and within --margin of the best, and keep /
    stop (with the steps and GPU-hours saved) / cannot tell yet.

    Example: grpofit rank 'sweep/*.csv' --horizon 1000 --until 200 --plot fans.png
    """
    from grpofit.commands.rank import RankOptions, rank_paths

    if plot is not None:
        from grpofit.cli.common import check_writable
        from grpofit.render.plotting import check_suffix

        check_suffix(plot, option="--plot")
        check_writable(plot, "--plot")
    done = rank_paths(
        runs,
        RankOptions(
            metric=metric,
            step=step,
            horizon=horizon,
            until=until,
            margin=margin,
            confidence=confidence,
            batch_size=batch_size,
            seed=seed,
            run_pattern=run_pattern,
            jobs=jobs,
            fans=plot is not None,
        ),
    )
    warn(done.warnings)
    if format is DiagnoseFormat.json:
        print_json(done.doc)
    elif format is DiagnoseFormat.markdown:
        from grpofit.render.rank import rank_markdown

        typer.echo(rank_markdown(done.doc), nl=False)
    else:
        from grpofit.render import tables as render
        from grpofit.render.rank import rank_table

        table, lines = rank_table(done.doc)
        render.print_tables([table])
        for line in lines:
            typer.echo(line)
    if plot is not None and done.items:
        from grpofit.render.rank import save_rank_figure

        save_rank_figure(done, plot)
    for e in done.doc.get("errors", []):
        typer.echo(f"error: {e['error']}", err=True)
    return ExitCode.BAD_INPUT if done.doc.get("errors") else ExitCode.OK
