"""``diagnose`` end to end: find runs under paths, read and join them, judge them (in parallel).

One unreadable run never hides the others: reading and judging errors are collected per run
and returned beside the results. A worker process that dies takes only its own run with it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

from grpofit.errors import GrpofitError


@dataclass
class RunError:
    """A run that could not be read or judged, with the one-line reason."""

    run: str
    error: str

    def summary(self) -> dict:
        return {"run": self.run, "error": self.error}


@dataclass
class Collected:
    runs: list = field(default_factory=list)
    errors: list[RunError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def collect_runs(paths: list[str], *, step: str | None = None) -> Collected:
    """Read every run under ``paths``; W&B panel exports of the same runs are joined by run name."""
    from grpofit.readers import discover, read_path

    out = Collected()
    sources = []
    for path in paths:
        try:
            sources.extend(discover([path]))
        except GrpofitError as e:
            out.errors.append(RunError(path, e.one_line()))
    for src in sources:
        try:
            runs = read_path(src.path, step=step)
        except GrpofitError as e:
            out.errors.append(RunError(src.path, e.one_line()))
            continue
        except Exception as e:  # noqa: BLE001 - a reader bug on one file must not hide the others
            out.errors.append(RunError(src.path, internal_error("reading", e)))
            continue
        for run in runs:
            out.warnings.extend(f"{run.name}: {w}" for w in run.warnings)
        out.runs.extend(runs)
    out.runs = join_by_run_name(out.runs)
    return out


def run_key(run) -> str | None:
    """The name that ties one run's metrics across files (the ``::run name`` of a panel export)."""
    if "::" in run.name:
        return run.name.split("::", 1)[1]
    return None


def join_by_run_name(runs: list) -> list:
    """Merge runs that carry the same ``::run name`` (one W&B panel export per metric)."""
    from grpofit.roles import find_role
    from grpofit.runs import merge_runs

    groups: dict[str, list] = {}
    order: list = []
    for run in runs:
        key = run_key(run)
        if key is None:
            order.append(run)
            continue
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(run)
    out = []
    for item in order:
        if not isinstance(item, str):
            out.append(item)
            continue
        members = groups[item]
        if len(members) == 1:
            out.append(members[0])
            continue
        # the file holding the reward names the joined run
        members.sort(key=lambda r: find_role("reward", r.numeric_columns()) is None)
        out.append(merge_runs(members))
    return out


def _judge(run, options: dict) -> Any:
    from grpofit.diagnostics import diagnose_run

    return diagnose_run(run, **options)


def judge_runs(
    runs: list,
    options: dict,
    *,
    jobs: int = 1,
    progress: Callable[[int], None] | None = None,
) -> tuple[list, list[RunError]]:
    """Diagnose every run, in ``jobs`` processes; returns (diagnoses in input order, errors)."""
    results: list = [None] * len(runs)
    errors: list[RunError] = []
    if jobs <= 1 or len(runs) <= 1:
        for i, run in enumerate(runs):
            results[i] = _judge_safely(run, options, errors)
            if progress:
                progress(1)
    else:
        indexed: list[tuple[int, RunError]] = []
        _judge_parallel(runs, options, jobs, results, indexed, progress)
        errors.extend(e for _, e in sorted(indexed, key=lambda pair: pair[0]))  # input order
    return [r for r in results if r is not None], errors


def internal_error(what: str, exc: BaseException) -> str:
    """The one-line reason for a bug hit while ``what`` one run (the others still go on)."""
    detail = " ".join(str(exc).split())[:200]
    return f"internal error while {what} this run ({type(exc).__name__}: {detail}); please report it"


def _judge_safely(run, options, errors):
    try:
        return _judge(run, options)
    except GrpofitError as e:
        errors.append(RunError(run.name, e.one_line()))
    except Exception as e:  # noqa: BLE001 - a bug on one run must not hide the others
        errors.append(RunError(run.name, internal_error("judging", e)))
    return None


def _worker(args):
    run, options = args
    try:
        return _judge(run, options), None
    except GrpofitError as e:
        return None, e.one_line()
    except Exception as e:  # noqa: BLE001 - reported like a GrpofitError, the pool lives on
        return None, internal_error("judging", e)


def _judge_parallel(runs, options, jobs, results, errors, progress):
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    pending = list(range(len(runs)))
    suspects: list[int] = []
    while pending:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(_worker, (runs[i], options)): i for i in pending}
            pending = []
            for fut in as_completed(futures):
                i = futures[fut]
                try:
                    result, err = fut.result()
                except BrokenProcessPool:
                    suspects.append(i)
                    continue
                except Exception as e:  # noqa: BLE001 - e.g. a result that cannot be sent back
                    result, err = None, internal_error("judging", e)
                if err:
                    errors.append((i, RunError(runs[i].name, err)))
                results[i] = result
                if progress:
                    progress(1)
        # a dead worker breaks the whole pool: retry the unfinished runs one by one in a
        # process of their own, so only a run that kills its worker again is lost
        for i in suspects:
            with ProcessPoolExecutor(max_workers=1) as pool:
                try:
                    result, err = pool.submit(_worker, (runs[i], options)).result()
                except BrokenProcessPool:
                    result, err = None, "the worker judging this run died (out of memory or killed)"
                except Exception as e:  # noqa: BLE001
                    result, err = None, internal_error("judging", e)
            if err:
                errors.append((i, RunError(runs[i].name, err)))
            results[i] = result
            if progress:
                progress(1)
        suspects = []


def default_jobs() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


@dataclass
class Fitted:
    results: list = field(default_factory=list)
    errors: list[RunError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def fit_paths(paths: list[str], *, metric: str | None = None, step: str | None = None) -> Fitted:
    """Read and fit every run of every path; a bad path is recorded, the others still fitted.

    A single path that fails raises (the plain ``fit one.csv`` case gets the error itself).
    """
    from grpofit.analysis import fit_run
    from grpofit.readers import read_path

    out = Fitted()
    for path in paths:
        try:
            runs = read_path(path, step=step)
            for run in runs:
                out.warnings.extend(f"{run.name}: {w}" for w in run.warnings)
                out.results.append(fit_run(run, metric=metric))
        except GrpofitError as e:
            if len(paths) == 1:
                raise
            out.errors.append(RunError(path, e.one_line()))
    return out


@dataclass
class DiagnoseReport:
    document: dict
    diagnoses: list
    warnings: list[str]
    runs: dict  #: run name -> Run (for figures)
    thresholds: Any


def diagnose_paths(
    paths: list[str],
    *,
    metric: str | None = None,
    step: str | None = None,
    eval_metric: str | None = None,
    min_r2: float | None = None,
    fail_on: tuple[str, ...] | None = None,
    group_size: int | None = None,
    thresholds: dict[str, float] | None = None,
    jobs: int = 1,
) -> DiagnoseReport:
    """Find, read, judge and gate every run under ``paths``; the contract's diagnose document."""
    from grpofit.diagnostics import MODES, Thresholds, gate
    from grpofit.groupsize import group_size_analysis

    collected = collect_runs(paths, step=step)
    if not collected.runs and len(collected.errors) == 1 and len(paths) == 1:
        # nothing readable at all: the single reason is the whole answer
        raise GrpofitError(collected.errors[0].error)
    options = {
        "metric": metric,
        "eval_metric": eval_metric,
        "thresholds": Thresholds.from_overrides(thresholds or {}),
        "group_size": group_size,
    }
    with _progress(len(collected.runs)) as advance:
        diagnoses, errors = judge_runs(collected.runs, options, jobs=jobs, progress=advance)
    errors = collected.errors + errors
    gate_doc = gate(diagnoses, fail_on=fail_on or MODES, min_r2=min_r2)
    doc: dict[str, Any] = {
        "schema": "grpofit.diagnose/1",
        "runs": [d.summary() for d in diagnoses],
        "gate": gate_doc,
    }
    if errors:
        doc["errors"] = [e.summary() for e in errors]
        doc["gate"]["passed"] = False
    gs = group_size_analysis(diagnoses)
    if gs:
        doc["group_size"] = gs
    return DiagnoseReport(
        document=doc,
        diagnoses=diagnoses,
        warnings=collected.warnings,
        runs={r.name: r for r in collected.runs},
        thresholds=options["thresholds"],
    )


class _progress:
    """A rich progress bar on stderr when there are many runs and stderr is a terminal."""

    def __init__(self, total: int, minimum: int = 8):
        self.total = total
        self.enabled = total >= minimum and _stderr_is_terminal()
        self.bar = None

    def __enter__(self):
        if not self.enabled:
            return None
        from rich.console import Console
        from rich.progress import Progress

        self.bar = Progress(console=Console(stderr=True), transient=True)
        self.bar.start()
        task = self.bar.add_task("judging runs", total=self.total)
        return lambda n: self.bar.advance(task, n)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False


def _stderr_is_terminal() -> bool:
    import sys

    return sys.stderr.isatty()
