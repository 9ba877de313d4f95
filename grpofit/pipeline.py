"""``fit`` and ``diagnose`` end to end: find runs under paths, read, fit or judge, collect.

One unreadable run never hides the others: reading and judging errors are collected per run and
returned beside the results. ``diagnose --jobs N`` hands each worker process a *path* (it reads,
judges and plots that run itself, so nothing large crosses process boundaries); only W&B panel
exports, whose runs may be joined across files by run name, are read up front. A worker that
dies takes only its own run with it.
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
class Outcome:
    """What one unit of work produced: results, errors and reading warnings."""

    results: list = field(default_factory=list)
    errors: list[RunError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def extend(self, other: "Outcome") -> None:
        self.results.extend(other.results)
        self.errors.extend(other.errors)
        self.warnings.extend(other.warnings)


# --------------------------------------------------------------------------- fit


def fit_paths(paths: list[str], *, metric: str | None = None, step: str | None = None) -> Outcome:
    """Read and fit every run of every path; a bad path is recorded, the others still fitted.

    A single path that fails raises (the plain ``fit one.csv`` case gets the error itself).
    """
    from grpofit.analysis import fit_run
    from grpofit.readers import read_path

    out = Outcome()
    paths = unique_sources(list(paths), out.warnings)
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


# --------------------------------------------------------------------------- finding runs


def unique_sources(items: list, warnings: list[str], *, path_of=lambda x: x) -> list:
    """``items`` without repeats of the same file or folder (``f.csv f.csv ./f.csv``): each run
    is judged once; a warning names what was dropped. Standard input is never a repeat."""
    seen: dict[str, str] = {}
    out = []
    for item in items:
        path = path_of(item)
        if not isinstance(path, str) or path == "-":
            out.append(item)
            continue
        base, sep, run = path.partition("::")
        key = os.path.realpath(base) + sep + run
        if key in seen:
            warnings.append(f"{path}: the same run as {seen[key]}; judged once")
            continue
        seen[key] = path
        out.append(item)
    return out


def plan_work(paths: list[str], *, step: str | None = None) -> tuple[list, Outcome]:
    """Work items for ``diagnose``: run container paths, and already joined panel-export runs.

    Returns ``(items, outcome)``: each item is a path (``str``) or a :class:`~grpofit.runs.Run`;
    the outcome holds discovery and reading errors and the reading warnings of joined runs.
    """
    from grpofit.readers import discover, read_path
    from grpofit.readers.panels import is_panel_export, join_by_run_name

    out = Outcome()
    sources = []
    for path in paths:
        if not isinstance(path, str):  # a Run given through the Python API: judged as it is
            sources.append(path)
            continue
        try:
            sources.extend(discover([path]))
        except GrpofitError as e:
            out.errors.append(RunError(path, e.one_line()))
    sources = unique_sources(sources, out.warnings, path_of=lambda s: getattr(s, "path", None))
    items: list = []
    exports: list = []
    for src in sources:
        if not hasattr(src, "kind"):
            items.append(src)
        elif src.kind == "file" and is_panel_export(src.path):
            try:
                runs = read_path(src.path, step=step)
            except GrpofitError as e:
                out.errors.append(RunError(src.path, e.one_line()))
                continue
            exports.extend(runs)
            items.append(None)  # placeholder: joined runs keep the position of their first file
        else:
            items.append(src.path)
    joined = join_by_run_name(exports)
    for run in joined:
        out.warnings.extend(f"{run.name}: {w}" for w in run.warnings)
    first = items.index(None) if None in items else len(items)
    items = [i for i in items[:first] if i is not None] + joined + [i for i in items[first:] if i is not None]
    return items, out


# --------------------------------------------------------------------------- judging


@dataclass
class JudgeOptions:
    """Everything a worker needs to judge (and draw) a run."""

    diagnose: dict  #: keyword arguments of :func:`grpofit.diagnostics.diagnose_run`
    step: str | None = None
    plot_dir: str | None = None
    encode_json: bool = False  #: the output is JSON: encode each run's entry where it is judged
    policy: Any = None  #: grpofit.gate.GatePolicy: the gated verdict is written into each entry


def internal_error(what: str, exc: BaseException) -> str:
    """The one-line reason for a bug hit while ``what`` one run (the other runs go on)."""
    detail = " ".join(str(exc).split())[:200]
    return f"internal error while {what} this run ({type(exc).__name__}: {detail}); please report it"


def judge_item(item: Any, options: JudgeOptions) -> Outcome:
    """Read (when ``item`` is a path), judge and optionally draw every run of one work item."""
    from grpofit.diagnostics import diagnose_run
    from grpofit.readers import read_path

    out = Outcome()
    label = item if isinstance(item, str) else item.name
    try:
        runs = read_path(item, step=options.step) if isinstance(item, str) else [item]
    except GrpofitError as e:
        out.errors.append(RunError(label, e.one_line()))
        return out
    except Exception as e:  # noqa: BLE001 - a reader bug on one file must not hide the others
        out.errors.append(RunError(label, internal_error("reading", e)))
        return out
    for run in runs:
        if isinstance(item, str):
            out.warnings.extend(f"{run.name}: {w}" for w in run.warnings)
        try:
            diagnosis = diagnose_run(run, **options.diagnose)
        except GrpofitError as e:
            out.errors.append(RunError(run.name, e.one_line()))
            continue
        except Exception as e:  # noqa: BLE001 - a bug on one run must not hide the others
            out.errors.append(RunError(run.name, internal_error("judging", e)))
            continue
        entry = diagnosis.summary()  # in the worker, in parallel (cached on the diagnosis)
        if options.policy is not None:
            from grpofit.gate import apply_policy

            apply_policy(entry, options.policy)
        if options.plot_dir is not None:
            from grpofit.plotting import save_diagnosis_figure

            save_diagnosis_figure(diagnosis, run, options.plot_dir, options.diagnose["thresholds"], entry=entry)
        if options.encode_json:
            entry.text  # noqa: B018 - made here, spliced by grpofit.jsonout.dumps
        out.results.append(diagnosis)
    return out


def judge_items(
    items: list,
    options: JudgeOptions,
    *,
    jobs: int = 1,
    progress: Callable[[int], None] | None = None,
) -> Outcome:
    """Judge every work item in ``jobs`` processes; results keep the items' order."""
    parts: list[Outcome | None] = [None] * len(items)
    if jobs <= 1 or len(items) <= 1:
        for i, item in enumerate(items):
            parts[i] = judge_item(item, options)
            if progress:
                progress(1)
    else:
        _judge_parallel(items, options, jobs, parts, progress)
    out = Outcome()
    for part in parts:
        out.extend(part)
    return out


def _preload(options: JudgeOptions) -> None:
    """Import the heavy modules once in the parent: forked workers inherit them."""
    import grpofit.analysis  # noqa: F401
    import grpofit.diagnostics  # noqa: F401
    import grpofit.fitting  # noqa: F401
    import grpofit.readers.delimited  # noqa: F401

    if options.plot_dir is not None:
        import grpofit.plotting

        grpofit.plotting._pyplot()


def _judge_chunk(chunk: list, options: JudgeOptions) -> list[Outcome]:
    """:func:`judge_item` for a few items in one worker call (fewer round trips)."""
    return [judge_item(item, options) for item in chunk]


def _chunk_size(n: int, jobs: int) -> int:
    """Items per worker call: up to 8, and at least 8 calls per worker to balance the load."""
    return max(1, min(8, n // (8 * jobs)))


def _judge_parallel(items, options, jobs, parts, progress):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    _preload(options)
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    size = _chunk_size(len(items), jobs)
    chunks = [list(range(i, min(i + size, len(items)))) for i in range(0, len(items), size)]
    suspects: list[int] = []
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {pool.submit(_judge_chunk, [items[i] for i in idx], options): idx for idx in chunks}
        for fut in as_completed(futures):
            idx = futures[fut]
            try:
                for i, part in zip(idx, fut.result()):
                    parts[i] = part
            except BrokenProcessPool:
                suspects.extend(idx)
                continue
            if progress:
                progress(len(idx))
    # a dead worker breaks the whole pool: retry the unfinished items one by one in a process
    # of their own, so only an item that kills its worker again is lost
    for i in sorted(suspects):
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            try:
                parts[i] = pool.submit(judge_item, items[i], options).result()
            except BrokenProcessPool:
                label = items[i] if isinstance(items[i], str) else items[i].name
                parts[i] = Outcome(errors=[RunError(label, "the worker judging this run died (out of memory or killed)")])
        if progress:
            progress(1)


# --------------------------------------------------------------------------- diagnose


def diagnose_paths(
    paths: list[str],
    *,
    metric: str | None = None,
    step: str | None = None,
    eval_metric: str | None = None,
    min_r2: float | None = None,
    fail_on: tuple[str, ...] | None = None,
    strict: bool = False,
    group_size: int | None = None,
    thresholds: dict[str, float] | None = None,
    jobs: int = 1,
    plot_dir: str | None = None,
    encode_json: bool = False,
) -> tuple[dict, list[str]]:
    """Find, read, judge and gate every run under ``paths``.

    Returns the contract's diagnose document and the reading warnings. ``encode_json``: the
    document will be printed as JSON, so each run's entry is encoded where it is judged (in
    parallel with ``jobs``).
    """
    from grpofit.diagnostics import MODES, Thresholds
    from grpofit.gate import GatePolicy, check_modes, gate_document
    from grpofit.vocabulary import SCHEMAS
    from grpofit.groupsize import group_size_by_experiment

    th = Thresholds.from_overrides(thresholds or {})
    policy = GatePolicy(
        fail_on=None if not fail_on else check_modes(fail_on, MODES), min_r2=min_r2, strict=strict
    )
    options = JudgeOptions(
        diagnose={"metric": metric, "eval_metric": eval_metric, "thresholds": th, "group_size": group_size},
        step=step,
        plot_dir=None if plot_dir is None else str(plot_dir),
        encode_json=encode_json,
        policy=policy,
    )
    items, found = plan_work(paths, step=step)
    if not items and len(found.errors) == 1 and len(paths) == 1:
        raise GrpofitError(found.errors[0].error)  # nothing readable at all: the reason is the answer
    with _progress(len(items)) as advance:
        judged = judge_items(items, options, jobs=jobs, progress=advance)
    found.extend(judged)
    diagnoses = found.results
    runs = [d.summary() for d in diagnoses]
    errors = [e.summary() for e in found.errors]
    doc: dict[str, Any] = {
        "schema": SCHEMAS["diagnose"],
        "runs": runs,
        "gate": gate_document(runs, policy, errors),
    }
    if errors:
        doc["errors"] = errors
    gs = group_size_by_experiment(diagnoses)
    if gs:
        doc["group_size"] = gs
    return doc, found.warnings


class _progress:
    """A rich progress bar on stderr when there are many runs and stderr is a terminal."""

    def __init__(self, total: int, minimum: int = 8):
        import sys

        self.total = total
        self.enabled = total >= minimum and sys.stderr.isatty()
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

