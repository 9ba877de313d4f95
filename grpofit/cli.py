"""The ``grpofit`` command line: parse, call the library, render, pick an exit code.

No fitting maths here. Every command body reads inputs through :mod:`grpofit.readers`, calls one
library function, and hands plain dicts to :mod:`grpofit.render`. Errors a user can cause are
:class:`~grpofit.errors.GrpofitError`; :func:`main` turns them into one line and exit code 2.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

from grpofit import __version__
from grpofit.errors import ExitCode, GrpofitError, UsageError

app = typer.Typer(
    name="grpofit",
    help="Fit, forecast and diagnose GRPO training runs from their logs.\n\n"
    "Examples:\n\n"
    "  grpofit fit run.csv\n\n"
    "  grpofit diagnose logdir/ --format markdown\n\n"
    "  grpofit predict --lr 1e-6 --momentum 0.9 --refresh-interval 4 --curvature 2000",
    no_args_is_help=True,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
simulate_app = typer.Typer(help="Simulate GRPO where the paper's reduction is exact.\n\n"
                           "Example (an 8-arm bandit, then its fit):\n\n"
                           "  grpofit simulate bandit --arms 8 --correct 1 --lr 0.5 --group-size 16 --steps 600 --seed 0 --out bandit.csv\n\n"
                           "  grpofit fit bandit.csv",
                           no_args_is_help=True,
                           context_settings={"help_option_names": ["-h", "--help"]})
app.add_typer(simulate_app, name="simulate")


class TableOrJson(str, Enum):
    table = "table"
    json = "json"


class DiagnoseFormat(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"grpofit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    debug: bool = typer.Option(False, "--debug", help="Show a traceback on errors."),
) -> None:
    """Fit, forecast and diagnose GRPO training runs from their logs."""


METRIC = typer.Option(None, "--metric", help="Reward column (auto-detected from common names).")
STEP = typer.Option(None, "--step", help="Step column (auto-detected: step, train/global_step, _step, ...).")
DEBUG = typer.Option(False, "--debug", help="Show a traceback on errors.")
RUN_PATTERN = typer.Option(None, "--run", help="Only the runs whose name matches this glob (e.g. '*GRPO*'); FILE::RUN also picks one run of a file.")


def _warn(lines) -> None:
    for line in lines:
        _echo_err(f"warning: {line}")


def _echo_err(line: str) -> None:
    """One line on stderr, control characters and undecodable bytes escaped (names in it come
    from the user's files); a closed or full stderr is not an error of its own."""
    from grpofit.safetext import printable

    try:
        typer.echo(printable(line, one_line=True), err=True)
    except (OSError, ValueError, AttributeError):
        pass


def _shown(doc):
    """A document for the terminal (table, markdown): control characters in names escaped."""
    from grpofit.safetext import printable_doc

    return printable_doc(doc)


def _print_json(doc: dict) -> None:
    from grpofit.jsonout import dumps

    typer.echo(dumps(doc))


# --------------------------------------------------------------------------- fit


@app.command()
def fit(
    runs: List[str] = typer.Argument(..., help="Log files or run folders ('-' reads standard input)."),
    metric: Optional[str] = METRIC,
    step: Optional[str] = STEP,
    format: TableOrJson = typer.Option(TableOrJson.table, "--format", help="table (people) or json (scripts)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write a figure: data, both fits, residuals (.png/.svg/.pdf); several runs in a grid."),
    overlay: bool = typer.Option(False, "--overlay", help="With --plot: every run on one axis with its preferred fit (e.g. GRPO vs GSPO)."),
    run_pattern: Optional[str] = RUN_PATTERN,
    debug: bool = DEBUG,
) -> int:
    """Fit the single-exponential law and the damped oscillator to each run's reward.

    Example: grpofit fit run.csv --format json
    """
    if plot is not None:  # a bad figure name is an error before any work, not after the table
        from grpofit.plotting import check_suffix

        check_suffix(plot, option="--plot")
    from grpofit.analysis import fit_summary
    from grpofit.pipeline import fit_paths
    from grpofit.vocabulary import SCHEMAS

    done = fit_paths(runs, metric=metric, step=step, run_pattern=run_pattern)
    _warn(done.warnings)
    doc = {"schema": SCHEMAS["fit"], "runs": [fit_summary(r) for r in done.results]}
    if done.errors:
        doc["errors"] = [e.summary() for e in done.errors]
    if format is TableOrJson.json:
        _print_json(doc)
    else:
        from grpofit import render

        shown = _shown(doc["runs"])
        render.print_tables(render.fit_tables(shown))
        for line in render.fit_notes(shown):
            typer.echo(line)
    if plot is not None and done.results:
        from grpofit.plotting import save_fit_figure

        save_fit_figure(done.results, plot, overlay=overlay)
    for e in done.errors:
        _echo_err(f"error: {e.error}")
    return ExitCode.BAD_INPUT if done.errors else ExitCode.OK


# --------------------------------------------------------------------------- diagnose


from typer.core import TyperCommand  # noqa: E402


class _DiagnoseCommand(TyperCommand):
    """``diagnose --help`` ends with the mode and threshold names (built only when shown)."""

    def format_epilog(self, ctx, formatter) -> None:
        from grpofit.helptext import diagnose_epilog

        for paragraph in diagnose_epilog():
            formatter.write_paragraph()
            formatter.write_text(paragraph)


@app.command(cls=_DiagnoseCommand)
def diagnose(
    paths: List[str] = typer.Argument(..., help="Files, run folders or log directories ('-' reads standard input)."),
    metric: Optional[str] = METRIC,
    step: Optional[str] = STEP,
    eval_metric: Optional[str] = typer.Option(None, "--eval-metric", help="Eval column (auto-detected: eval_*, val-core/*, val/*)."),
    min_r2: Optional[float] = typer.Option(None, "--min-r2", help="Fail a run whose preferred fit has R² below this (a finite value in [-1, 1])."),
    fail_on: Optional[str] = typer.Option(None, "--fail-on", help="Modes that gate, comma-separated (default: every mode). A fail in another mode is shown but counts as a warning."),
    strict: bool = typer.Option(False, "--strict", help="Warnings gate too: a warn in a gating mode fails the run."),
    group_size: Optional[int] = typer.Option(None, "--group-size", min=1, help="Group size G for every run (else from config or run name)."),
    threshold: List[str] = typer.Option([], "--threshold", help="Override a rule threshold, NAME=VALUE (names below); each has a finite valid range."),
    format: DiagnoseFormat = typer.Option(DiagnoseFormat.table, "--format", help="table, json or markdown."),
    junit: Optional[Path] = typer.Option(None, "--junit", help="Also write a JUnit XML report (a test case per run and mode)."),
    plot_dir: Optional[Path] = typer.Option(None, "--plot-dir", help="Write one figure per run into this folder."),
    jobs: int = typer.Option(1, "--jobs", min=1, help="Judge runs in N parallel processes (at most one per CPU and per run)."),
    run_pattern: Optional[str] = RUN_PATTERN,
    forecast: bool = typer.Option(False, "--forecast", help="Also forecast each run: expected final reward and the step reaching 95% of the gain (slower)."),
    debug: bool = DEBUG,
) -> int:
    """Judge every run under PATHS for the four failure modes; exit 1 when a run fails (a CI gate).

    Example: grpofit diagnose outputs/ --fail-on dynamical_instability --junit grpofit.xml
    """
    from grpofit.pipeline import diagnose_paths

    doc, warnings = diagnose_paths(
        paths,
        metric=metric,
        step=step,
        eval_metric=eval_metric,
        min_r2=min_r2,
        fail_on=_split_modes(fail_on),
        strict=strict,
        run_pattern=run_pattern,
        group_size=group_size,
        thresholds=_parse_thresholds(threshold),
        jobs=jobs,
        plot_dir=plot_dir,
        encode_json=format is DiagnoseFormat.json,
        forecast=forecast,
    )
    _warn(warnings)
    from grpofit import render

    if format is DiagnoseFormat.json:
        _print_json(doc)
    elif format is DiagnoseFormat.markdown:
        typer.echo(render.diagnose_markdown(_shown(doc)), nl=False)
    else:
        shown = _shown(doc)
        render.print_diagnose(shown)
        evals = render.eval_table(shown)  # runs with several eval series: one row per benchmark
        if evals is not None:
            render.print_tables([evals])
        for line in render.diagnose_evidence(shown, errors=False):  # errors: once, on stderr
            typer.echo(line)
    if junit is not None:
        from grpofit.safetext import xml_text

        _write_text(junit, xml_text(render.diagnose_junit(doc)))
    for e in doc.get("errors", []):
        _echo_err(f"error: {e['error']}")
    if doc.get("errors"):
        return ExitCode.BAD_INPUT
    return ExitCode.OK if doc["gate"]["passed"] else ExitCode.GATE_FAILED


def _split_modes(text: str | None):
    from grpofit.vocabulary import parse_modes

    return parse_modes(text)


def _parse_thresholds(items: list[str]) -> dict[str, float]:
    """``--threshold NAME=VALUE`` items as a dict; a bad form or unknown name is one line naming
    the option and the valid names (value ranges are checked where the thresholds are built)."""
    if not items:
        return {}
    from grpofit.helptext import threshold_names

    known = threshold_names()
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if sep and known and name not in known:
            raise UsageError(f"--threshold: unknown name {name!r}", fix="valid names: " + ", ".join(known))
        try:
            if not sep:
                raise ValueError
            out[name] = float(value)
        except ValueError:
            raise UsageError(f"--threshold {item!r} is not NAME=NUMBER", fix="e.g. --threshold rise_fail=8") from None
    return out


def _check_out_folder(out: Path) -> None:
    """``--out`` must name a file in a folder that exists (checked before minutes of work)."""
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"the folder {str(folder)!r} of --out does not exist", path=str(out), fix="create it first or choose another --out")
    if out.is_dir():
        raise UsageError("--out is a folder", path=str(out), fix="name a .csv or .jsonl file")


def _write_text(path: Path, text: str) -> None:
    """Write ``text`` atomically: a reader (or an interrupt) never sees a partial file."""
    from grpofit.atomic import write_text

    write_text(path, text)


# --------------------------------------------------------------------------- inspect


@app.command()
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
    from grpofit.readers.inspect import inspect_path
    from grpofit.vocabulary import SCHEMAS

    doc = {"schema": SCHEMAS["inspect"], **inspect_path(run, step=step)}
    if run_pattern:
        from grpofit.selection import select_runs

        kept = select_runs([i["run"] for i in doc["runs"]], run_pattern, run)
        doc["runs"] = [i for i in doc["runs"] if i["run"] in kept]
        doc["n_runs"] = len(doc["runs"])
    for info in doc["runs"]:
        _warn(f"{info['run']}: {w}" for w in info["warnings"])
    if format is TableOrJson.json:
        _print_json(doc)
        return ExitCode.OK
    from grpofit import render

    render.print_tables(render.inspect_tables(_shown(doc["runs"])))
    return ExitCode.OK


# --------------------------------------------------------------------------- predict


@app.command()
def predict(
    lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate eta (Adam: see --adam)."),
    momentum: Optional[float] = typer.Option(None, "--momentum", help="Heavy-ball momentum mu (Adam: beta1)."),
    refresh_interval: Optional[float] = typer.Option(None, "--refresh-interval", help="Steps between policy refreshes K_ref."),
    curvature: Optional[float] = typer.Option(None, "--curvature", help="Curvature K of the effective potential."),
    group_size: Optional[int] = typer.Option(None, "--group-size", help="Group size G (adds the 1/G fluctuation); at most 1e9, and 10,000 with --beta."),
    noise: Optional[float] = typer.Option(None, "--noise", help="Noise strength D of the forcing (for the stationary fluctuation)."),
    beta: Optional[float] = typer.Option(None, "--beta", help="With --group-size: KL weight of the softmax bandit whose finite-G plateau to report."),
    arms: int = typer.Option(8, "--arms", help="... its number of arms."),
    correct: int = typer.Option(1, "--correct", help="... its number of correct arms."),
    adam: bool = typer.Option(False, "--adam", help="Treat --lr/--momentum as Adam's lr/beta1 (eta_eff = lr (1 - beta1))."),
    from_run: Optional[str] = typer.Option(None, "--from-run", help="Measure K from this run's fitted timescale; --lr, --momentum (Adam beta1), --refresh-interval and --group-size not given are read from its config. FILE::RUN picks one run of a file."),
    run_pattern: Optional[str] = RUN_PATTERN,
    metric: Optional[str] = METRIC,
    what_if_lr: Optional[float] = typer.Option(None, "--what-if-lr", help="Predict the trajectory at this learning rate."),
    what_if_momentum: Optional[float] = typer.Option(None, "--what-if-momentum", help="... at this momentum."),
    what_if_refresh_interval: Optional[float] = typer.Option(None, "--what-if-refresh-interval", help="... at this refresh interval."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Figure of the run, its fit and the what-if trajectory."),
    format: TableOrJson = typer.Option(TableOrJson.table, "--format"),
    debug: bool = DEBUG,
) -> int:
    """Closed-form mass, damping, stiffness, regime and stability from optimizer hyperparameters.

    Examples: grpofit predict --lr 1e-6 --momentum 0.9 --refresh-interval 4 --curvature 2000;
    grpofit predict --from-run run.csv --lr 1e-6 --momentum 0.9 --refresh-interval 2 --what-if-refresh-interval 8
    """
    if plot is not None:
        from grpofit.plotting import check_suffix

        check_suffix(plot, option="--plot")
    from grpofit.limits import check_predict
    from grpofit.predicting import run_predict

    what_if = {"lr": what_if_lr, "momentum": what_if_momentum, "refresh_interval": what_if_refresh_interval}
    check_predict(lr=lr, momentum=momentum, refresh_interval=refresh_interval, curvature=curvature, group_size=group_size,
                  noise=noise, beta=beta, arms=arms, correct=correct, what_if=what_if)
    doc, figure_data = run_predict(
        lr=lr, momentum=momentum, refresh_interval=refresh_interval, curvature=curvature,
        group_size=group_size, noise=noise, adam=adam, from_run=from_run, metric=metric,
        what_if={"lr": what_if_lr, "momentum": what_if_momentum, "refresh_interval": what_if_refresh_interval},
        bandit=None if beta is None else {"beta": beta, "arms": arms, "correct": correct},
        run_pattern=run_pattern,
    )
    if format is TableOrJson.json:
        _print_json(doc)
    else:
        from grpofit import render

        render.print_tables(render.predict_tables(doc))
    if plot is not None:
        from grpofit.plotting import save_what_if_figure

        save_what_if_figure(figure_data, plot)
    return ExitCode.OK


# --------------------------------------------------------------------------- simulate


@simulate_app.command("bandit")
def simulate_bandit(
    out: Path = typer.Option(..., "--out", help="Log to write: .csv or .jsonl (p* and K go to FILE.meta.json)."),
    arms: int = typer.Option(8, "--arms", min=2, help="Arms of the bandit (2 to 1,000)."),
    correct: int = typer.Option(1, "--correct", min=1),
    lr: float = typer.Option(0.1, "--lr", help="Learning rate (finite, in (0, 1000])."),
    momentum: float = typer.Option(0.0, "--momentum"),
    refresh_interval: int = typer.Option(1, "--refresh-interval", min=1),
    group_size: int = typer.Option(16, "--group-size", min=0, help="Samples per group; 0 = exact mean-field gradient. --groups x --group-size is at most 16,384 (memory)."),
    groups: int = typer.Option(16, "--groups", min=1, help="Groups (prompts) per step."),
    beta: float = typer.Option(1.0, "--beta", min=0.0, help="KL weight to the uniform reference policy (0 to 1000)."),
    steps: int = typer.Option(500, "--steps", min=1, help="Steps to simulate (at most 1,000,000)."),
    seed: int = typer.Option(0, "--seed"),
    importance_ratio: bool = typer.Option(False, "--importance-ratio/--no-importance-ratio", help="Reweight stale samples by pi/pi_old."),
    format: TableOrJson = typer.Option(TableOrJson.table, "--format"),
    debug: bool = DEBUG,
) -> int:
    """Exact GRPO on a softmax bandit, written as a GRPO log.

    Example: grpofit simulate bandit --arms 8 --correct 1 --lr 0.5 --momentum 0.9 --refresh-interval 4 --group-size 16 --beta 1 --steps 600 --seed 0 --out bandit.csv
    """
    from grpofit.limits import check_simulate
    from grpofit.simulation import run_simulation

    check_simulate(arms=arms, correct=correct, lr=lr, momentum=momentum, refresh_interval=refresh_interval,
                   group_size=group_size, groups=groups, beta=beta, steps=steps, seed=seed)
    _check_out_folder(out)
    doc = run_simulation(
        out=out, arms=arms, correct=correct, lr=lr, momentum=momentum, refresh_interval=refresh_interval,
        group_size=group_size, groups=groups, beta=beta, steps=steps, seed=seed, importance_ratio=importance_ratio,
    )
    if format is TableOrJson.json:
        _print_json(doc)
    else:
        from grpofit import render

        render.print_tables(render.simulate_tables(doc, str(out)))
    return ExitCode.OK


# --------------------------------------------------------------------------- forecast


@app.command()
def forecast(
    runs: List[str] = typer.Argument(..., help="Log files or run folders ('-' reads standard input)."),
    metric: Optional[str] = METRIC,
    step: Optional[str] = STEP,
    horizon: Optional[int] = typer.Option(None, "--horizon", help="Planned last step (else from the config: trainer.total_training_steps, max_steps)."),
    at: List[float] = typer.Option([], "--at", help="Also forecast at this step (repeatable)."),
    until: Optional[float] = typer.Option(None, "--until", help="Cut the run after this step: what would have been forecast then."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Binary rewards per logged mean (binomial observation noise; else from the config, else estimated)."),
    format: TableOrJson = typer.Option(TableOrJson.table, "--format", help="table (people) or json (scripts)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write a fan chart: data, fit, median forecast, 80/95% bands, planned end (.png/.svg/.pdf)."),
    run_pattern: Optional[str] = RUN_PATTERN,
    debug: bool = DEBUG,
) -> int:
    """Forecast each run from the steps seen so far: expected reward at the planned end with
    80/95% prediction intervals, plateau, steps to 90/95% of the gain, gain still expected.

    Example: grpofit forecast run.csv --horizon 1000 --at 500 --plot fan.png
    """
    from grpofit.forecasting.command import ForecastOptions, forecast_paths

    if plot is not None:
        from grpofit.plotting import check_suffix

        check_suffix(plot)
    done = forecast_paths(runs, ForecastOptions(metric=metric, step=step, horizon=horizon, at=list(at),
                                                until=until, batch_size=batch_size, run_pattern=run_pattern))
    _warn(done.warnings)
    if format is TableOrJson.json:
        _print_json(done.doc)
    else:
        from grpofit import render
        from grpofit.forecasting.report import forecast_tables

        render.print_tables(forecast_tables(done.doc))
    if plot is not None and done.items:
        from grpofit.forecasting.fanchart import save_fan_figure

        save_fan_figure(done.items, plot)
    for e in done.doc.get("errors", []):
        typer.echo(f"error: {e['error']}", err=True)
    return ExitCode.BAD_INPUT if done.doc.get("errors") else ExitCode.OK


# --------------------------------------------------------------------------- backtest


@app.command()
def backtest(
    paths: List[str] = typer.Argument(..., help="Finished runs: files, run folders or log directories."),
    metric: Optional[str] = METRIC,
    step: Optional[str] = STEP,
    cuts: Optional[str] = typer.Option(None, "--cuts", help="Cut points in percent of the steps (default 20,30,50,70)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Binary rewards per logged mean (binomial observation noise)."),
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
    from grpofit.forecasting.backtest import backtest_paths, parse_cuts

    if batch_size is not None and batch_size < 1:
        raise UsageError(f"--batch-size {batch_size} is not positive", fix="pass the number of rewards averaged per logged step")
    doc, warnings = backtest_paths(paths, metric=metric, step=step, cuts=parse_cuts(cuts), batch_size=batch_size,
                                   jobs=jobs, plot_dir=plot_dir, run_pattern=run_pattern)
    _warn(warnings)
    from grpofit.forecasting.report import backtest_markdown, backtest_table

    if format is DiagnoseFormat.json:
        _print_json(doc)
    elif format is DiagnoseFormat.markdown:
        typer.echo(backtest_markdown(doc), nl=False)
    else:
        from grpofit import render

        table, lines = backtest_table(doc)
        render.print_tables([table])
        for line in lines:
            typer.echo(line)
    for e in doc.get("errors", []):
        typer.echo(f"error: {e['error']}", err=True)
    return ExitCode.BAD_INPUT if doc.get("errors") else ExitCode.OK


# --------------------------------------------------------------------------- watch


class ExitOn(str, Enum):
    fail = "fail"
    warn = "warn"


@app.command()
def watch(
    paths: List[str] = typer.Argument(..., help="Log files, run folders or folders where runs appear."),
    interval: float = typer.Option(10.0, "--interval", help="Seconds between polls."),
    on_fail: Optional[str] = typer.Option(None, "--on-fail", help="Shell command run once per new failure (GRPOFIT_RUN, GRPOFIT_MODE, GRPOFIT_EVIDENCE, GRPOFIT_STEP in its environment)."),
    exit_on: Optional[ExitOn] = typer.Option(None, "--exit-on", help="Exit 1 as soon as a run reaches this status (fail or warn)."),
    jsonl: Optional[Path] = typer.Option(None, "--jsonl", help="Append every alert and forecast update to this file as JSON lines."),
    once: bool = typer.Option(False, "--once", help="Read everything once, report, and exit."),
    max_polls: Optional[int] = typer.Option(None, "--max-polls", help="Stop after this many polls."),
    metric: Optional[str] = METRIC,
    step: Optional[str] = STEP,
    eval_metric: Optional[str] = typer.Option(None, "--eval-metric", help="Eval column (auto-detected: eval_*, val-core/*, val/*)."),
    group_size: Optional[int] = typer.Option(None, "--group-size", min=1, help="Group size G for every run (else from config or run name)."),
    threshold: List[str] = typer.Option([], "--threshold", help="Override a rule threshold, NAME=VALUE (names below); each has a finite valid range."),
    horizon: Optional[float] = typer.Option(None, "--horizon", help="Planned last step for the forecasts (else from each run's config)."),
    no_forecast: bool = typer.Option(False, "--no-forecast", help="Judge and alert only; skip the forecasts."),
    cpu_budget: float = typer.Option(0.03, "--cpu-budget", help="Share of one core re-fits may use once caught up (alert rules are not rationed)."),
    debug: bool = DEBUG,
) -> int:
    """Follow logs still being written: current reward, forecast, verdicts and alerts per run.

    Example: grpofit watch outputs/ --exit-on fail --on-fail 'touch STOP' --jsonl watch.jsonl
    """
    from grpofit.watch.session import Session, WatchOptions

    opts = WatchOptions(
        paths=list(paths), interval=interval, once=once, max_polls=max_polls, on_fail=on_fail,
        exit_on=exit_on.value if exit_on is not None else None, jsonl=str(jsonl) if jsonl else None,
        metric=metric, step=step, eval_metric=eval_metric, group_size=group_size,
        thresholds=_parse_thresholds(threshold), forecast=not no_forecast, horizon=horizon,
        cpu_budget=cpu_budget,
    )
    return Session(opts).run()


# --------------------------------------------------------------------------- entry point


def _single_threaded_blas() -> None:
    """One BLAS thread unless the user chose otherwise (set before numpy loads its BLAS): the
    fits multiply matrices of a few hundred by four, where BLAS threads cost more than they
    give, and ``diagnose --jobs N`` already runs one process per core."""
    import os

    for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")


# --------------------------------------------------------------------------- compare


@app.command()
def compare(
    a: str = typer.Argument(..., help="Run A: a log file, a run folder, a glob pattern (a group) or FILE::RUN."),
    b: str = typer.Argument(..., help="Run B, the same way."),
    metric: Optional[str] = METRIC,
    step: Optional[str] = STEP,
    margin: float = typer.Option(0.1, "--margin", help="Equivalence margin for 'same', as a fraction of each quantity's scale."),
    format: TableOrJson = typer.Option(TableOrJson.table, "--format", help="table (people) or json (scripts)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write an overlay of both sides' data and fits (.png/.svg/.pdf)."),
    debug: bool = DEBUG,
) -> int:
    """Differences in plateau, timescale, inertia and damping ratio between two runs or groups.

    Each quantity gets B - A with a 95% interval, a p-value and a verdict: differs, same (within
    --margin of its scale) or cannot tell.

    Example: grpofit compare sync.csv 'async_*.csv' --format json
    """
    if plot is not None:
        from grpofit.plotting import check_suffix

        check_suffix(plot, option="--plot")
    from grpofit.compare import compare_paths

    doc, side_a, side_b = compare_paths([a], [b], metric=metric, step=step, margin=margin)
    _warn(side_a.warnings + side_b.warnings)
    if format is TableOrJson.json:
        _print_json(doc)
    else:
        from grpofit import render
        from grpofit.compare_render import compare_table

        render.print_tables([compare_table(_shown(doc))])
        typer.echo(_shown({"s": doc["summary"]})["s"])
    if plot is not None:
        from grpofit.compare_render import save_compare_figure

        save_compare_figure(side_a.fits, side_b.fits, plot)
    for e in side_a.errors + side_b.errors:
        _echo_err(f"error: {e}")
    return ExitCode.BAD_INPUT if (side_a.errors or side_b.errors) else ExitCode.OK


def main(argv: list[str] | None = None) -> None:
    """Console entry point: one line and exit 2 for user errors, a traceback only with --debug."""
    _single_threaded_blas()
    from grpofit import interrupts

    previous = interrupts.install()
    _closed_streams_to_devnull()
    try:
        code = _run(argv)
        code = _flush_stdout(code)
    finally:
        interrupts.restore(previous)
    if _INTERRUPTED and argv is None:
        # the process is being stopped: skip the interpreter's exit hooks (they join the
        # stopped worker pool's threads, which can take seconds)
        import os

        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        os._exit(int(code))
    sys.exit(int(code or 0))


#: set when the command was stopped by SIGINT, SIGTERM or SIGHUP
_INTERRUPTED = False


def _closed_streams_to_devnull() -> None:
    """An output stream closed by the caller (``>&-``, ``2>&-``) swallows writes, like
    /dev/null: the exit code still tells the result. (A closed standard input is an error of
    ``-`` alone: see :func:`grpofit.readers.read_path`.)"""
    import os

    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 - lives until exit


def _flush_stdout(code):
    """Flush standard output now, so that a full disk or a closed pipe is one line and exit 2
    (or, for a reader that went away, exit as usual) instead of a message at interpreter exit."""
    import os

    try:
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        pass
    except OSError as e:
        _echo_err(f"error: cannot write to standard output ({e.strerror or e})")
        code = ExitCode.BAD_INPUT
    except ValueError:  # closed
        return code
    _stdout_to_devnull()
    return code


def _stdout_to_devnull() -> None:
    """Nothing more can be written: let the interpreter's last flush go nowhere."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _run(argv: list[str] | None) -> int:
    """:func:`main` without the process plumbing: the exit code of one command."""
    try:  # recent typer vendors its own click: its exceptions are not ``click``'s
        from typer._click.exceptions import ClickException
    except ImportError:  # pragma: no cover - typer on top of an installed click
        from click.exceptions import ClickException
    from grpofit import interrupts

    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    if not debug:
        import warnings

        # numpy's overflow/invalid-value notes on extreme logs are not for users: results carry
        # their own notes, and stderr keeps its one line per problem (--debug shows them)
        warnings.filterwarnings("ignore", category=RuntimeWarning)
    try:
        code = app(args=args, prog_name="grpofit", standalone_mode=False)
    except GrpofitError as e:
        if debug:
            raise
        _echo_err(f"error: {e.one_line()}")
        code = ExitCode.BAD_INPUT
    except typer.Exit as e:
        code = e.exit_code
    except typer.Abort:
        typer.echo("aborted", err=True)
        code = ExitCode.BAD_INPUT
    except ClickException as e:
        if debug:
            raise
        if type(e).__name__ == "NoArgsIsHelpError":  # bare `grpofit` / `grpofit simulate`
            e.show()
        else:
            _echo_err(f"error: {_click_line(e)}")
        code = ExitCode.BAD_INPUT
    except (KeyboardInterrupt, interrupts.Interrupted) as e:
        global _INTERRUPTED
        _INTERRUPTED = True
        _echo_err(interrupts.describe(e))
        code = interrupts.exit_code(e)
    except BrokenPipeError:
        code = ExitCode.OK
    except OSError as e:
        if debug:
            raise
        if e.filename is not None:
            _echo_err(f"error: {e.filename}: {e.strerror or e}")
        else:  # a write to standard output (a full disk: > /dev/full)
            _echo_err(f"error: cannot write to standard output ({e.strerror or e})")
        _stdout_to_devnull()
        code = ExitCode.BAD_INPUT
    except Exception as e:  # a bug: still one line, never a traceback without --debug
        if debug:
            raise
        _echo_err(f"error: internal error ({type(e).__name__}: {' '.join(str(e).split())}); rerun with --debug and report it")
        code = ExitCode.BAD_INPUT
    return code


def _click_line(e) -> str:
    """A usage error as one line: what is wrong and where to look (``grpofit fit --help``)."""
    text = " ".join(e.format_message().split()).rstrip(".")
    ctx = getattr(e, "ctx", None)
    command = getattr(ctx, "command_path", None) or "grpofit"
    return f"{text}; see '{command} --help'"
