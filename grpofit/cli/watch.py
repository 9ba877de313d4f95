"""``grpofit watch``: follow logs still being written (verdicts, forecasts, alerts per run)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from grpofit.cli.common import DEBUG, METRIC, RUN_PATTERN, STEP, parse_thresholds


class ExitOn(str, Enum):
    fail = "fail"
    warn = "warn"


def watch(
    paths: List[str] = typer.Argument(
        ..., help="Log files, run folders, folders where runs appear, or FILE::RUN (one run of a multi-run file)."
    ),
    interval: float = typer.Option(10.0, "--interval", help="Seconds between polls."),
    on_fail: Optional[str] = typer.Option(
        None,
        "--on-fail",
        help="Shell command run once per new failure (GRPOFIT_RUN, GRPOFIT_MODE, GRPOFIT_EVIDENCE, GRPOFIT_STEP in its environment).",
    ),
    exit_on: Optional[ExitOn] = typer.Option(
        None, "--exit-on", help="Exit 1 as soon as a run reaches this status (fail or warn)."
    ),
    jsonl: Optional[Path] = typer.Option(
        None, "--jsonl", help="Append every alert and forecast update to this file as JSON lines."
    ),
    once: bool = typer.Option(False, "--once", help="Read everything once, report, and exit."),
    max_polls: Optional[int] = typer.Option(None, "--max-polls", help="Stop after this many polls."),
    metric: Optional[str] = METRIC,
    step: Optional[str] = STEP,
    eval_metric: Optional[str] = typer.Option(
        None, "--eval-metric", help="Eval column (auto-detected: eval_*, val-core/*, val/*)."
    ),
    group_size: Optional[int] = typer.Option(
        None, "--group-size", min=1, help="Group size G for every run (else from config or run name)."
    ),
    threshold: List[str] = typer.Option(
        [], "--threshold", help="Override a rule threshold, NAME=VALUE (names below); each has a finite valid range."
    ),
    horizon: Optional[float] = typer.Option(
        None, "--horizon", help="Planned last step for the forecasts, at most 1e15 (else from each run's config)."
    ),
    no_forecast: bool = typer.Option(False, "--no-forecast", help="Judge and alert only; skip the forecasts."),
    cpu_budget: float = typer.Option(
        0.03,
        "--cpu-budget",
        help="Share of one core watch may use once caught up; re-fits wait for it (alert rules are never rationed).",
    ),
    run_pattern: Optional[str] = RUN_PATTERN,
    debug: bool = DEBUG,
) -> int:
    """Follow logs still being written: current reward, forecast, verdicts and alerts per run.

    Example: grpofit watch outputs/ --exit-on fail --on-fail 'touch STOP' --jsonl watch.jsonl
    """
    from grpofit.watch.session import Session, WatchOptions

    opts = WatchOptions(
        paths=list(paths),
        interval=interval,
        once=once,
        max_polls=max_polls,
        on_fail=on_fail,
        exit_on=exit_on.value if exit_on is not None else None,
        jsonl=str(jsonl) if jsonl else None,
        metric=metric,
        step=step,
        eval_metric=eval_metric,
        group_size=group_size,
        thresholds=parse_thresholds(threshold),
        forecast=not no_forecast,
        horizon=horizon,
        cpu_budget=cpu_budget,
        run_pattern=run_pattern,
    )
    return Session(opts).run()
