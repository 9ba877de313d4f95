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
from typing import TYPE_CHECKING, Any, Callable

from grpofit.core.errors import GrpofitError

if TYPE_CHECKING:  # names for the annotations only (``grpofit --help`` loads none of them)
    from grpofit.diagnostics.gating import GatePolicy
    from grpofit.diagnostics.thresholds import Thresholds


@dataclass
class RunError:
    """A run that could not be read or judged, with the one-line reason."""

    run: str
    error: str
    option: str | None = None  #: ``"--metric 'nope'"`` when the option the user passed is at fault
    columns: tuple = ()  #: the run's numeric columns, for the combined message of an option error

    @classmethod
    def of(cls, run: str, exc: GrpofitError) -> "RunError":
        return cls(run, exc.one_line(), getattr(exc, "option", None), tuple(getattr(exc, "columns", ()) or ()))

    def summary(self) -> dict:
        return {"run": self.run, "error": self.error}


def raise_bad_option(errors: list[RunError], n_results: int) -> None:
    """A usage error (exit 2, one line, nothing on stdout) when no run could be used and every
    run failed because of the same option value (``--metric nope`` names no column of any run).

    One run: its own line. Several: one line naming the option, how many runs lack the column and
    the columns they all share (a column some runs lack is still a per-run error, shown beside the
    runs judged)."""
    from grpofit.core.errors import UsageError

    if n_results or not errors or errors[0].option is None or any(e.option != errors[0].option for e in errors):
        return
    if len(errors) == 1:
        raise UsageError(errors[0].error)
    option = errors[0].option
    name = option.split(" ", 1)[0]
    shared = [c for c in errors[0].columns if all(c in e.columns for e in errors[1:])]
    listing = ", ".join(shared[:25]) + (f", ... ({len(shared) - 25} more)" if len(shared) > 25 else "")
    raise UsageError(
        f"{option} matches no column in any of the {len(errors)} runs read ({errors[0].run}, ...)",
        fix=f"pass {name} with one of the numeric columns they all have: {listing}"
        if shared
        else f"pass {name} with a column of each run (they share no numeric column; see grpofit inspect)",
    )


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


def fit_paths(
    paths: list[str],
    *,
    metric: str | None = None,
    step: str | None = None,
    run_pattern: str | None = None,
    jobs: int = 1,
    keep: Callable | None = None,
) -> Outcome:
    """Read and fit every run of every path; a bad path or run is recorded, the others still fitted.

    ``run_pattern`` (``--run``) keeps the runs it matches (:mod:`grpofit.readers.selection`); ``FILE::RUN``
    paths name one run of a file.

    A single file that fails raises (the plain ``fit one.csv`` case gets the error itself).
    A folder is walked like ``diagnose`` does: each run in it is read and fitted on its own.
    ``jobs``: fit the files in that many worker processes (``diagnose``'s pool; same order).
    ``keep``: a module-level function applied to each fit where it is made (e.g.
    :func:`grpofit.fitting.analysis.fit_summary`), so only that is held, not every full result.
    """
    import os

    from grpofit.fitting.analysis import fit_run
    from grpofit.readers import discover, read_path
    from grpofit.readers.discover import dir_kind

    out = Outcome()
    units: list[str] = []
    for path in paths:
        if path != "-" and os.path.isdir(path) and dir_kind(path) is None:  # FILE::RUN is no dir
            skipped: list = []
            try:
                units.extend(src.path for src in discover([path], skipped))
            except GrpofitError as e:
                if len(paths) == 1:
                    raise
                out.errors.append(RunError.of(path, e))
            add_skipped(out, skipped)
        else:
            units.append(path)
    units = unique_sources(units, out.warnings)
    if len(units) > 1 and jobs > 1:
        from grpofit.core.limits import cap_jobs

        jobs = cap_jobs(jobs, len(units))
    if len(units) > 1 and jobs > 1:
        options = FitOptions(metric=metric, step=step, keep=keep, run_pattern=run_pattern)
        try:
            out.extend(judge_items(units, options, jobs=jobs))
            units = []
        except OSError as e:  # no process could be started: fit here instead
            out.warnings.append(
                f"--jobs {jobs}: cannot start worker processes ({e.strerror or e}); fitted the runs in one process"
            )
    for path in units:
        try:
            runs = read_path(path, step=step)
        except GrpofitError as e:
            if len(units) == 1 and not out.errors:
                raise
            out.errors.append(RunError.of(path, e))
            continue
        from grpofit.readers.selection import matches

        runs = [r for r in runs if matches(r, run_pattern)]
        for run in runs:
            try:
                result = fit_run(run, metric=metric)
                out.results.append(keep(result) if keep is not None else result)
            except GrpofitError as e:
                if len(units) == 1 and len(runs) == 1 and not out.errors:
                    raise
                out.errors.append(RunError.of(run.name, e))
            finally:  # after fitting: it may have added one (outliers excluded)
                out.warnings.extend(f"{run.name}: {w}" for w in run.warnings)
    raise_bad_option(out.errors, len(out.results))
    if run_pattern and not out.results and not out.errors:
        raise _no_match(run_pattern, paths)
    return out


def _no_match(pattern: str, paths: list) -> GrpofitError:
    from grpofit.readers.selection import no_match

    return no_match(pattern, paths)


@dataclass
class FitOptions:
    """What a ``fit --jobs`` worker needs (see :func:`fit_paths`)."""

    metric: str | None = None
    step: str | None = None
    keep: Callable | None = None
    run_pattern: str | None = None
    plot_dir: None = None  #: never: fit draws its one figure in the parent


def fit_entry_json(result) -> Any:
    """A fit's contract entry (:func:`grpofit.fitting.analysis.fit_summary`) with its JSON text made
    here (in a ``--jobs`` worker: in parallel). ``fit --format json`` keeps only these: the
    document is then spliced from the texts (:func:`grpofit.core.jsonout.dumps`, the same bytes),
    never encoded as one tree of small strings (~0.1 MB per run at a thousand runs)."""
    from grpofit.core.jsonout import Encoded
    from grpofit.fitting.analysis import fit_summary

    entry = Encoded.of(fit_summary(result))
    entry.text  # noqa: B018 - made here, spliced by grpofit.core.jsonout.dumps
    return entry


def _read_item(item: Any, step: str | None, out: Outcome) -> list | None:
    """The runs of one work item (a path, read here, or a run already read); None with the error
    recorded in ``out`` when it cannot be read (a reader bug included: it must not hide the others)."""
    from grpofit.readers import read_path

    label = item if isinstance(item, str) else item.name
    try:
        return read_path(item, step=step) if isinstance(item, str) else [item]
    except GrpofitError as e:
        out.errors.append(RunError.of(label, e))
    except Exception as e:  # noqa: BLE001 - a reader bug on one file must not hide the others
        out.errors.append(RunError(label, internal_error("reading", e)))
    return None


def fit_item(path: str, options: FitOptions) -> Outcome:
    """Read and fit every run of one file, in a worker: errors recorded, never raised."""
    from grpofit.fitting.analysis import fit_run
    from grpofit.readers.selection import matches

    out = Outcome()
    runs = _read_item(path, options.step, out)
    if runs is None:
        return out
    for run in [r for r in runs if matches(r, options.run_pattern)]:
        try:
            result = fit_run(run, metric=options.metric)
            out.results.append(options.keep(result) if options.keep is not None else result)
        except GrpofitError as e:
            out.errors.append(RunError.of(run.name, e))
        except Exception as e:  # noqa: BLE001 - a bug on one run must not hide the others
            out.errors.append(RunError(run.name, internal_error("fitting", e)))
        finally:  # after fitting: it may have added one (outliers excluded)
            out.warnings.extend(f"{run.name}: {w}" for w in run.warnings)
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


def add_skipped(out: Outcome, skipped: list) -> None:
    """What the folder walk left out: errors (an unreadable folder) or warnings (links, FIFOs)."""
    for s in skipped:
        if s.error:
            out.errors.append(RunError(s.path, s.line()))
        else:
            out.warnings.append(s.line())


def plan_work(paths: list[str], *, step: str | None = None) -> tuple[list, Outcome]:
    """Work items for ``diagnose``: run container paths, and already joined panel-export runs.

    Returns ``(items, outcome)``: each item is a path (``str``) or a :class:`~grpofit.core.runs.Run`;
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
        from grpofit.readers.selection import split_selector

        if split_selector(path)[1] is not None:  # FILE::RUN: one run of a file, read as given
            sources.append(path)
            continue
        skipped: list = []
        try:
            sources.extend(discover([path], skipped))
        except GrpofitError as e:
            out.errors.append(RunError.of(path, e))
        add_skipped(out, skipped)
    sources = unique_sources(
        sources, out.warnings, path_of=lambda s: s if isinstance(s, str) else getattr(s, "path", None)
    )
    items: list = []
    exports: list = []
    for src in sources:
        if not hasattr(src, "kind"):
            items.append(src)
        elif src.kind == "file" and is_panel_export(src.path):
            try:
                runs = read_path(src.path, step=step)
            except GrpofitError as e:
                out.errors.append(RunError.of(src.path, e))
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


@dataclass(frozen=True)
class DiagnoseOptions:
    """What :func:`grpofit.diagnostics.diagnose_run` takes besides the run, the same for every
    run of one ``diagnose``."""

    thresholds: Thresholds
    metric: str | None = None  #: ``--metric``: the reward column (auto-detected when None)
    eval_metric: str | None = None  #: ``--eval-metric``: a column or glob of eval series
    group_size: int | None = None  #: ``--group-size``: G for every run (else from its config or name)

    def arguments(self) -> dict:
        """The keyword arguments of :func:`grpofit.diagnostics.diagnose_run`."""
        return {
            "metric": self.metric,
            "eval_metric": self.eval_metric,
            "thresholds": self.thresholds,
            "group_size": self.group_size,
        }


@dataclass
class JudgeOptions:
    """Everything a worker needs to judge (and draw) a run."""

    diagnose: DiagnoseOptions
    step: str | None = None
    plot_dir: str | None = None
    encode_json: bool = False  #: the output is JSON: encode each run's entry where it is judged
    policy: GatePolicy | None = None  #: the gated verdict is written into each entry
    run_pattern: str | None = None  #: ``--run PATTERN``: judge only the runs it matches
    forecast: bool = False  #: also forecast each run (expected final reward, steps to 95%)
    horizon: float | None = None  #: planned last step for runs whose config names none
    compact: bool = False  #: keep each diagnosis without its series once judged (:func:`compact_diagnosis`)
    light: bool = False  #: hand back a :class:`JudgedRun` of each run, not its diagnosis


def internal_error(what: str, exc: BaseException) -> str:
    """The one-line reason for a bug hit while ``what`` one run (the other runs go on)."""
    detail = " ".join(str(exc).split())[:200]
    return f"internal error while {what} this run ({type(exc).__name__}: {detail}); please report it"


def judge_item(item: Any, options: JudgeOptions) -> Outcome:
    """Read (when ``item`` is a path), judge and optionally draw every run of one work item."""
    if isinstance(options, FitOptions):  # ``fit --jobs`` shares diagnose's pool
        return fit_item(item, options)
    from grpofit.diagnostics import diagnose_run

    out = Outcome()
    runs = _read_item(item, options.step, out)
    if runs is None:
        return out
    from grpofit.readers.selection import matches

    runs = [r for r in runs if matches(r, options.run_pattern)]
    for run in runs:
        seen = 0 if isinstance(item, str) else len(run.warnings)  # a joined run's were given already
        try:
            diagnosis = diagnose_run(run, **options.diagnose.arguments())
        except GrpofitError as e:
            out.errors.append(RunError.of(run.name, e))
            continue
        except Exception as e:  # noqa: BLE001 - a bug on one run must not hide the others
            out.errors.append(RunError(run.name, internal_error("judging", e)))
            continue
        finally:  # after judging: it may have added one (outliers excluded)
            out.warnings.extend(f"{run.name}: {w}" for w in run.warnings[seen:])
        entry = diagnosis.summary()  # in the worker, in parallel (cached on the diagnosis)
        if "fit_check" not in entry:
            from grpofit.fitting.fitcheck import fit_checks

            entry["fit_check"], entry["trend"] = fit_checks(entry.get("fit"), diagnosis.fit)
        if "forecast" not in entry:
            from grpofit.core.jsonout import jsonable
            from grpofit.forecasting.brief import diagnose_forecast

            entry["forecast"] = jsonable(
                diagnose_forecast(run, diagnosis.fit, full=options.forecast, horizon=options.horizon)
            )
        if options.policy is not None:
            from grpofit.diagnostics.gating import apply_policy

            apply_policy(entry, options.policy)
        if options.plot_dir is not None:
            from grpofit.render.plotting import save_diagnosis_figure

            draw = (save_diagnosis_figure, diagnosis, run, options.plot_dir, options.diagnose.thresholds)
            if _FIGURES is not None:  # drawn in a child process while the next run is judged
                _FIGURES.submit(*draw, entry=entry)
            else:
                draw[0](*draw[1:], entry=entry)
        if options.light:
            out.results.append(JudgedRun.of(diagnosis, entry, text=options.encode_json))
            continue
        if options.encode_json:
            entry.text  # noqa: B018 - made here, spliced by grpofit.core.jsonout.dumps
        out.results.append(compact_diagnosis(diagnosis) if options.compact else diagnosis)
    return out


@dataclass
class JudgedRun:
    """What ``diagnose`` keeps of one judged run of a fleet, made in the worker (a few KB, where
    the diagnosis with its entry takes about a hundred): the entry's JSON text when the output
    is JSON (written out as soon as the run's turn comes, then dropped), the part of the entry
    the tables, the gate and the JUnit report read
    (:func:`grpofit.render.tables.shown_entry`), and the group-size test's inputs."""

    shown: dict
    group: Any  #: :class:`grpofit.diagnostics.groupsize.GroupSizeInputs`
    text: str | None = None  #: the entry as ``json.dumps(entry, indent=2)`` gives it

    @classmethod
    def of(cls, diagnosis: Any, entry: dict, *, text: bool) -> "JudgedRun":
        from grpofit.core.jsonout import Encoded
        from grpofit.diagnostics.groupsize import GroupSizeInputs
        from grpofit.render.tables import shown_entry

        encoded = (entry if isinstance(entry, Encoded) else Encoded.of(entry)) if text else None
        return cls(shown_entry(entry), GroupSizeInputs.of(diagnosis), None if encoded is None else encoded.text)

    def summary(self) -> dict:
        return self.shown


def compact_diagnosis(diagnosis: Any) -> Any:
    """The judged diagnosis without the series it was judged on (the fit's points, the rules'
    panels): what ``diagnose`` keeps per run once the entry is made and the figure drawn, so a
    fleet's memory does not grow with every run's arrays. The entry (``summary()``, made here)
    and the fit's parameters (the group-size analysis) stay."""
    from dataclasses import replace

    entry = diagnosis.summary()
    fit = diagnosis.fit
    if fit is not None:
        ends = slice(0, fit.steps.size, max(1, fit.steps.size - 1))  # first and last point
        fit = replace(
            fit, steps=fit.steps[ends].copy(), values=fit.values[ends].copy(), column_steps=None, column_values=None
        )
    diagnostics = {
        m: replace(v, findings=[replace(f, panel=None) for f in v.findings]) for m, v in diagnosis.diagnostics.items()
    }
    light = replace(diagnosis, fit=fit, diagnostics=diagnostics)
    light.__dict__["_summary"] = entry
    return light


def judge_items(
    items: list,
    options: JudgeOptions,
    *,
    jobs: int = 1,
    progress: Callable[[int], None] | None = None,
    sink: Callable[[Outcome], None] | None = None,
) -> Outcome:
    """Judge every work item in ``jobs`` processes; results keep the items' order.

    ``sink``: each item's outcome is handed to it in the items' order as soon as it is judged
    (:func:`map_items`), and the outcome returned is then empty."""
    out = Outcome()
    take = sink or out.extend
    if jobs <= 1 or len(items) <= 1:
        global _FIGURES
        figures = _FIGURES = FigureProcess() if options.plot_dir is not None and len(items) > 1 else None
        try:
            for item in items:
                take(judge_item(item, options))
                if progress:
                    progress(1)
            if figures is not None:
                figures.wait()
        finally:
            _FIGURES = None
            if figures is not None:
                figures.stop()
    else:
        _preload(options)
        map_items(_judge_one, items, options, jobs=jobs, progress=progress, lost=_lost_item, sink=take)
    return out


def _judge_one(item: Any, options: JudgeOptions) -> Outcome:
    return judge_item(item, options)  # looked up at call time (tests replace judge_item)


def _lost_item(item: Any) -> Outcome:
    label = item if isinstance(item, str) else item.name
    return Outcome(errors=[RunError(label, "the worker judging this run died (out of memory or killed)")])


#: the figure process of a ``diagnose --jobs 1 --plot-dir`` (set while its runs are judged)
_FIGURES = None


class FigureProcess:
    """``diagnose --plot-dir`` in one process: the figures are drawn in a second process while
    the runs are judged (a figure costs about twice the CPU of judging its run, most of it
    matplotlib laying out and drawing text). Each judged run goes to it as it is (pickled: its
    series and its diagnosis), at most :attr:`ahead` waiting, in the runs' order; when that many
    already wait, the parent draws the run's figure itself instead of waiting for the second
    process, so both processes stay busy to the end. An error drawing one (an unwritable folder)
    is raised in the parent, at the latest when the last run is judged. Where ``fork`` is
    missing the figures are drawn in the parent."""

    ahead = 2  #: figures waiting to be drawn at most (each holds its run's series)

    def __init__(self):
        import multiprocessing
        from collections import deque

        _preload_figures()  # the process forked below inherits matplotlib and its font
        self.pool = None
        if "fork" in multiprocessing.get_all_start_methods():
            self.pool = _new_pool(multiprocessing.get_context("fork"), 1)
        self.pending: deque = deque()

    def submit(self, draw: Callable, *args: Any, **kw: Any) -> None:
        if self.pool is None:
            draw(*args, **kw)
            return
        while self.pending and self.pending[0].done():
            self._take()
        if len(self.pending) >= self.ahead:  # the second process is busy: drawn here, not waited for
            draw(*args, **kw)
            return
        from grpofit.runtime import interrupts

        with interrupts.deferred():  # the first submit forks the process: see stop_pool
            self.pending.append(self.pool.submit(draw, *args, **kw))

    def _take(self) -> None:
        from concurrent.futures.process import BrokenProcessPool

        try:
            self.pending.popleft().result()
        except BrokenProcessPool:
            raise GrpofitError("the process drawing the figures died (out of memory or killed)") from None

    def wait(self) -> None:
        """Wait for every figure; raise the first error one ended with."""
        while self.pending:
            self._take()
        if self.pool is not None:
            self.pool.shutdown(wait=True)

    def stop(self) -> None:
        """Stop the figure process now (the command ends on an error or a signal)."""
        if self.pool is not None:
            stop_pool(self.pool)


def _preload_figures() -> None:
    """matplotlib imported, and its font loaded, in the parent: each forked figure process
    inherits them instead of loading them again."""
    import grpofit.render.plotting

    grpofit.render.plotting.preload()


def _preload(options: JudgeOptions) -> None:
    """Import the heavy modules once in the parent: forked workers inherit them."""
    import ctypes  # noqa: F401 - for the workers' _die_with_parent

    import grpofit.diagnostics  # noqa: F401
    import grpofit.fitting  # noqa: F401
    import grpofit.fitting.analysis  # noqa: F401
    import grpofit.readers.delimited  # noqa: F401

    if options.plot_dir is not None:
        _preload_figures()


# --------------------------------------------------------------------------- the worker pool


#: set by a worker when it starts an item (shared with forked workers by inheritance):
#: after a worker dies, the started but unfinished items are the suspects
_STARTED = None


def _work_chunk(work: Callable, chunk: list, items: list, extra: Any) -> list:
    """``work(item, extra)`` for a few items in one worker call (fewer round trips)."""
    out = []
    for i, item in zip(chunk, items):
        if _STARTED is not None:
            _STARTED[i] = 1
        out.append(work(item, extra))
    return out


def _chunk_size(n: int, jobs: int) -> int:
    """Items per worker call: up to 8, and at least 8 calls per worker to balance the load."""
    return max(1, min(8, n // (8 * jobs)))


def _worker_signals(parent: int | None = None) -> None:
    """In a worker: die on SIGTERM/SIGHUP (the parent sends them), ignore Ctrl-C (the parent,
    which gets it too, stops the workers): no worker tracebacks, no orphans. On Linux the kernel
    also kills the worker when ``parent`` dies, however it dies (SIGKILL, a crash)."""
    import os
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    if parent is not None and _die_with_parent() and os.getppid() != parent:
        os._exit(1)  # the parent died before the request was made


def _die_with_parent() -> bool:
    """``prctl(PR_SET_PDEATHSIG, SIGKILL)``: True when the kernel took the request."""
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(1, int(signal.SIGKILL), 0, 0, 0) == 0  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - no libc prctl
        return False


def _new_pool(context, jobs: int):
    import os

    from grpofit.runtime.pool import WorkerPool

    return WorkerPool(jobs, context, initializer=_worker_signals, initargs=(os.getpid(),))


def stop_pool(pool, grace: float = 1.0) -> None:
    """Stop every worker of ``pool`` now: SIGTERM, then SIGKILL after ``grace`` seconds.

    ``pool.workers`` (:class:`grpofit.runtime.pool.WorkerPool`) is complete because workers are
    forked inside :class:`grpofit.runtime.interrupts.deferred` sections (a signal cannot land
    between ``fork`` and the pool recording the process), and a worker the parent never stops
    dies with it (:func:`_worker_signals`)."""
    import time

    procs = list(pool.workers)
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(5.0)  # SIGKILL cannot be caught: only a loaded machine's scheduler delays the end
    pool.shutdown(wait=False, cancel_futures=True)


class _Drain:
    """The parts of ``map_items`` as they finish, handed on in the items' order: with a ``sink``
    each part goes to it as soon as it and every part before it are done (an out-of-order part
    waits here until then) and is not kept; without one, the parts are kept for the caller."""

    def __init__(self, n: int, sink: Callable[[Any], None] | None):
        self.parts: list = [_PENDING] * n
        self.sink = sink
        self.next = 0  #: the first part not handed on yet

    def put(self, i: int, part: Any) -> None:
        self.parts[i] = part
        if self.sink is None:
            return
        while self.next < len(self.parts) and self.parts[self.next] is not _PENDING:
            part, self.parts[self.next] = self.parts[self.next], _DRAINED
            self.next += 1
            self.sink(part)

    def pending(self, i: int) -> bool:
        return self.parts[i] is _PENDING


#: chunks a worker pool may run ahead of the first unfinished one (per worker): a chunk finished
#: out of order waits for those before it (an ordered drain), so this bounds what waits in memory
_AHEAD = 16


def _run_round(pool, work, todo: list[int], items, extra, jobs, drain: _Drain, progress, chunk=None) -> bool:
    """``work`` on ``todo`` in ``pool``; True when a worker died (the pool is then broken)."""
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool

    from grpofit.runtime import interrupts

    size = chunk or _chunk_size(len(todo), jobs)
    chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
    running: dict = {}  # future -> its chunk's number
    submitted = 0
    broken = False
    while True:
        oldest = min(running.values(), default=submitted)
        with interrupts.deferred():  # the first submit forks the workers: see stop_pool
            while submitted < len(chunks) and submitted < oldest + _AHEAD * jobs and not broken:
                idx = chunks[submitted]
                running[pool.submit(_work_chunk, work, idx, [items[i] for i in idx], extra)] = submitted
                submitted += 1
        if not running:
            return broken
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        for fut in sorted(done, key=running.__getitem__):
            idx = chunks[running.pop(fut)]
            try:
                results = fut.result()
            except BrokenProcessPool:
                broken = True
                continue
            for i, part in zip(idx, results):
                drain.put(i, part)
            if progress:
                progress(len(idx))


_PENDING = object()
_DRAINED = object()


def map_items(
    work: Callable,
    items: list,
    extra: Any,
    *,
    jobs: int,
    lost: Callable,
    progress: Callable[[int], None] | None = None,
    chunk: int | None = None,
    sink: Callable[[Any], None] | None = None,
) -> list:
    """``[work(item, extra) for item in items]`` in a pool of ``jobs`` forked workers, in order.

    ``chunk``: items per worker call (default :func:`_chunk_size`); 1 for items that take a
    second or more each (a backtest's runs), where a chunk of several leaves a worker idle at
    the end.

    ``sink``: each result is handed to it, in the items' order, as soon as it and every result
    before it are done, and not kept (the list returned is then empty): a fleet's output is
    written as it is judged, in the order of the input, and its memory does not grow with the
    number of items (the workers run at most :data:`_AHEAD` chunks each past the first
    unfinished one).

    ``work`` is a module-level function (workers call it by name). The guarantees of every
    ``--jobs`` command (diagnose, fit, backtest):

    - workers are forked inside :class:`grpofit.runtime.interrupts.deferred` sections and die with the
      parent (:func:`_worker_signals`): no orphans, even when the parent is SIGKILLed;
    - on SIGINT/SIGTERM/SIGHUP (an exception here, see :func:`grpofit.cli.main`) every worker is
      stopped (:func:`stop_pool`: within about a second) before the exception goes on;
    - a worker that dies breaks the pool: the items it may have been working on are retried one
      by one in a process of their own (an item that kills its worker again gets ``lost(item)``),
      and the pool is rebuilt for everything else."""
    import multiprocessing

    global _STARTED
    drain = _Drain(len(items), sink)
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    _STARTED = context.RawArray("b", len(items)) if "fork" in methods else None
    todo = list(range(len(items)))
    try:
        while todo:
            pool = _new_pool(context, jobs)
            try:
                broken = _run_round(pool, work, todo, items, extra, jobs, drain, progress, chunk)
                if not broken:
                    pool.shutdown(wait=True)
            except BaseException:
                stop_pool(pool)
                raise
            if broken:
                stop_pool(pool)
            left = [i for i in todo if drain.pending(i)]
            if not broken or not left:
                break
            if _STARTED is None:
                suspects, todo = left, []
            else:
                suspects = [i for i in left if _STARTED[i]]
                todo = [i for i in left if not _STARTED[i]]
            for i in suspects:
                drain.put(i, _run_alone(context, work, items[i], extra, lost))
                if progress:
                    progress(1)
    finally:
        _STARTED = None
    return [] if sink is not None else drain.parts


def _run_alone(context, work, item, extra, lost) -> Any:
    """One item in a worker of its own: its death costs only this item."""
    from concurrent.futures.process import BrokenProcessPool

    from grpofit.runtime import interrupts

    pool = _new_pool(context, 1)
    try:
        with interrupts.deferred():
            future = pool.submit(work, item, extra)
        return future.result()
    except BrokenProcessPool:
        return lost(item)
    finally:
        stop_pool(pool)


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
    run_pattern: str | None = None,
    group_size: int | None = None,
    thresholds: dict[str, float] | None = None,
    jobs: int = 1,
    plot_dir: str | None = None,
    encode_json: bool = False,
    forecast: bool = False,
    horizon: float | None = None,
    light: bool = False,
    on_run: Callable[[JudgedRun], None] | None = None,
    gate_only: bool = False,
) -> tuple[dict, list[str]]:
    """Find, read, judge and gate every run under ``paths``.

    Returns the contract's diagnose document and the reading warnings. ``encode_json``: the
    document will be printed as JSON, so each run's entry is encoded where it is judged (in
    parallel with ``jobs``).

    ``light`` (a fleet on the command line): the document's runs are their
    :func:`~grpofit.render.tables.shown_entry` only, what the tables, the gate and the JUnit
    report read, and each run's :class:`JudgedRun` (with its entry's JSON text, when
    ``encode_json``) is handed to ``on_run`` in the input's order as soon as it is judged, so
    the whole entries are written as they come and never held together. ``gate_only`` (the
    runs were written by ``on_run`` and no table or JUnit report is made of them): each run of
    the document keeps only its name and gate.
    """
    from grpofit.core.limits import check_min_r2
    from grpofit.core.vocabulary import SCHEMAS
    from grpofit.diagnostics import MODES, Thresholds
    from grpofit.diagnostics.gating import GatePolicy, check_modes, gate_document
    from grpofit.diagnostics.groupsize import group_size_by_experiment

    min_r2 = check_min_r2(min_r2)
    th = Thresholds.from_overrides(thresholds or {})
    policy = GatePolicy(fail_on=None if not fail_on else check_modes(fail_on, MODES), min_r2=min_r2, strict=strict)
    options = JudgeOptions(
        diagnose=DiagnoseOptions(th, metric=metric, eval_metric=eval_metric, group_size=group_size),
        step=step,
        plot_dir=None if plot_dir is None else str(plot_dir),
        encode_json=encode_json,
        policy=policy,
        run_pattern=run_pattern,
        forecast=forecast or horizon is not None,
        horizon=horizon,
        compact=True,  # only the entries and the fits' parameters are used below
        light=light,
    )
    items, found = plan_work(paths, step=step)
    if not items and len(found.errors) == 1 and len(paths) == 1:
        raise GrpofitError(found.errors[0].error)  # nothing readable at all: the reason is the answer
    from grpofit.core.limits import cap_jobs

    jobs = cap_jobs(jobs, len(items))
    groups: list = []  # light: each run's group-size inputs
    taken = [0]  # light: the items handed on so far (in order)

    def take(part: Outcome) -> None:
        taken[0] += 1
        for r in part.results:
            if on_run is not None:
                on_run(r)
            groups.append(r.group)
            found.results.append({k: r.shown[k] for k in ("run", "gate") if k in r.shown} if gate_only else r.shown)
        found.errors.extend(part.errors)
        found.warnings.extend(part.warnings)

    with _progress(len(items)) as advance:
        try:
            found.extend(judge_items(items, options, jobs=jobs, progress=advance, sink=take if light else None))
        except OSError as e:  # no process could be started (fork failed: out of memory or processes)
            if jobs <= 1:
                raise
            found.warnings.append(
                f"--jobs {jobs}: cannot start worker processes ({e.strerror or e}); judged the runs in one process"
            )
            rest = items[taken[0] :]  # light: the runs before these are written already
            found.extend(judge_items(rest, options, jobs=1, progress=advance, sink=take if light else None))
    raise_bad_option(found.errors, len(found.results))
    diagnoses = found.results
    if run_pattern and not diagnoses and not found.errors:
        raise _no_match(run_pattern, list(paths))
    runs = diagnoses if light else [d.summary() for d in diagnoses]
    errors = [e.summary() for e in found.errors]
    doc: dict[str, Any] = {
        "schema": SCHEMAS["diagnose"],
        "runs": runs,
        "gate": gate_document(runs, policy, errors),
    }
    if errors:
        doc["errors"] = errors
    gs = group_size_by_experiment(groups if light else diagnoses)
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
