"""``grpofit diagnose``: every run judged for the four failure modes; exit 1 when a run fails."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from typer.core import TyperCommand

from grpofit.cli.common import (
    DEBUG,
    METRIC,
    RUN_PATTERN,
    STEP,
    DiagnoseFormat,
    check_writable,
    echo_err,
    parse_thresholds,
    shown,
    split_modes,
    warn,
    write_text,
)
from grpofit.core.errors import ExitCode


class DiagnoseCommand(TyperCommand):
    """``diagnose --help`` ends with the mode and threshold names (built only when shown)."""

    def format_epilog(self, ctx, formatter) -> None:
        from grpofit.cli.helptext import diagnose_epilog

        for paragraph in diagnose_epilog():
            formatter.write_paragraph()
            formatter.write_text(paragraph)


def diagnose(
    paths: List[str] = typer.Argument(..., help="Files, run folders or log directories ('-' reads standard input)."),
    metric: Optional[str] = METRIC,
    step: Optional[str] = STEP,
    eval_metric: Optional[str] = typer.Option(
        None, "--eval-metric", help="Eval column (auto-detected: eval_*, val-core/*, val/*)."
    ),
    min_r2: Optional[float] = typer.Option(
        None, "--min-r2", help="Fail a run whose preferred fit has R² below this (a finite value in [-1, 1])."
    ),
    fail_on: Optional[str] = typer.Option(
        None,
        "--fail-on",
        help="Modes that gate, comma-separated (default: every mode). A fail in another mode is shown but counts as a warning.",
    ),
    strict: bool = typer.Option(False, "--strict", help="Warnings gate too: a warn in a gating mode fails the run."),
    group_size: Optional[int] = typer.Option(
        None, "--group-size", min=1, help="Group size G for every run (else from config or run name)."
    ),
    threshold: List[str] = typer.Option(
        [], "--threshold", help="Override a rule threshold, NAME=VALUE (names below); each has a finite valid range."
    ),
    format: DiagnoseFormat = typer.Option(DiagnoseFormat.table, "--format", help="table, json or markdown."),
    junit: Optional[Path] = typer.Option(
        None, "--junit", help="Also write a JUnit XML report (a test case per run and mode)."
    ),
    plot_dir: Optional[Path] = typer.Option(None, "--plot-dir", help="Write one figure per run into this folder."),
    jobs: int = typer.Option(
        1, "--jobs", min=1, help="Judge runs in N parallel processes (at most one per CPU and per run)."
    ),
    run_pattern: Optional[str] = RUN_PATTERN,
    forecast: bool = typer.Option(
        False,
        "--forecast",
        help="Also forecast each run: expected final reward and the step reaching 95% of the gain (slower).",
    ),
    horizon: Optional[float] = typer.Option(
        None,
        "--horizon",
        help="Planned last step (at most 1e15) for the forecast of runs whose config names none (implies --forecast).",
    ),
    debug: bool = DEBUG,
) -> int:
    """Judge every run under PATHS for the four failure modes; exit 1 when a run fails (a CI gate).

    Example: grpofit diagnose outputs/ --fail-on dynamical_instability --junit grpofit.xml
    """
    from grpofit.commands.pipeline import diagnose_paths

    if junit is not None:  # an output that cannot be written is an error before any work
        check_writable(junit, "--junit")
        from grpofit.runtime.outpaths import check_not_input

        check_not_input(junit, "--junit", paths)
    if plot_dir is not None:
        check_writable(plot_dir, "--plot-dir", folder=True)

    if horizon is not None and not (horizon > 0 and horizon < float("inf")):
        from grpofit.core.errors import UsageError

        raise UsageError(
            f"--horizon {horizon} is not a positive step", fix="pass the planned last step, e.g. --horizon 1000"
        )
    if horizon is not None:
        from grpofit.core.limits import check_step

        check_step("--horizon", horizon, example="1000", positive=True)
    stream = None
    if format is DiagnoseFormat.json:  # each run's entry written as it is judged, in the input's order
        from grpofit.core.jsonout import RunsStream
        from grpofit.core.vocabulary import SCHEMAS

        stream = RunsStream(lambda text: typer.echo(text, nl=False), SCHEMAS["diagnose"])
    doc, warnings = diagnose_paths(
        paths,
        metric=metric,
        step=step,
        eval_metric=eval_metric,
        min_r2=min_r2,
        fail_on=split_modes(fail_on),
        strict=strict,
        run_pattern=run_pattern,
        group_size=group_size,
        thresholds=parse_thresholds(threshold),
        jobs=jobs,
        plot_dir=plot_dir,
        encode_json=format is DiagnoseFormat.json,
        forecast=forecast,
        horizon=horizon,
        light=True,
        on_run=None if stream is None else (lambda judged: stream.add(judged.text)),
        gate_only=stream is not None and junit is None,
    )
    warn(warnings)
    from grpofit.render import tables as render

    if stream is not None:
        stream.close(doc)
    elif format is DiagnoseFormat.markdown:
        typer.echo(render.diagnose_markdown(shown(doc)), nl=False)
    else:
        safe = shown(doc)
        render.print_diagnose(safe)
        render.print_eval_table(safe)  # runs with several eval series: one row per benchmark
        for line in render.diagnose_evidence(safe, errors=False):  # errors: once, on stderr
            typer.echo(line)
    if junit is not None:
        from grpofit.core.safetext import xml_text

        write_text(junit, xml_text(render.diagnose_junit(doc)))
    for e in doc.get("errors", []):
        echo_err(f"error: {e['error']}")
    if doc.get("errors"):
        return ExitCode.BAD_INPUT
    return ExitCode.OK if doc["gate"]["passed"] else ExitCode.GATE_FAILED
