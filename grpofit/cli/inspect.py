"""``grpofit inspect``: what was detected in a log (format, runs, step column, roles, gaps)."""

from __future__ import annotations

from typing import Optional

import typer

from grpofit.cli.common import DEBUG, RUN_PATTERN, STEP, TableOrJson, print_json, shown, warn
from grpofit.core.errors import ExitCode


def inspect(
    run: str = typer.Argument(..., help="A log file or run folder ('-' reads standard input)."),
    step: Optional[str] = STEP,
    format: TableOrJson = typer.Option(TableOrJson.table, "--format"),
    run_pattern: Optional[str] = RUN_PATTERN,
    debug: bool = DEBUG,
) -> int:
    """Show what was detected: format, runs, step column, which column plays which role, gaps.

    Example: grpofit inspect wandb/run-20260101_120000-abc123
    """
    from grpofit.core.vocabulary import SCHEMAS
    from grpofit.readers.inspect import inspect_path

    doc = {"schema": SCHEMAS["inspect"], **inspect_path(run, step=step)}
    if run_pattern:
        from grpofit.readers.selection import select_runs

        kept = select_runs([i["run"] for i in doc["runs"]], run_pattern, run)
        doc["runs"] = [i for i in doc["runs"] if i["run"] in kept]
        doc["n_runs"] = len(doc["runs"])
    for info in doc["runs"]:
        warn(f"{info['run']}: {w}" for w in info["warnings"])
    if format is TableOrJson.json:
        print_json(doc)
        return ExitCode.OK
    from grpofit.render import tables as render

    render.print_tables(render.inspect_tables(shown(doc["runs"])))
    return ExitCode.OK
