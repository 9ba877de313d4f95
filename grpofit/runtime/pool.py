"""The worker pool of every ``--jobs`` command: :func:`map_items` runs a module-level function over
items in forked workers, stops them on a signal, leaves no orphan and survives a worker that dies
(see :func:`map_items` for the guarantees). Only public ``concurrent.futures`` and
``multiprocessing`` interfaces: the pool's workers are the children recorded by
:class:`WorkerPool`."""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["map_items", "stop_pool", "WorkerPool"]


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


class WorkerPool:
    """A ``concurrent.futures.ProcessPoolExecutor`` and the worker processes it started.

    The workers are the ``multiprocessing`` children that appear while :meth:`submit_all` submits
    (``multiprocessing.active_children()`` before and after): every fork of the executor happens
    in a submit (all of them at the first one under the ``fork`` start method), and the submits
    run inside one :class:`grpofit.runtime.interrupts.deferred` section, so a signal cannot land
    between a fork and this record of it. :func:`stop_pool` stops exactly these processes
    through their public ``terminate``/``kill``/``join``."""

    def __init__(self, context, jobs: int):
        import os
        from concurrent.futures import ProcessPoolExecutor

        self.executor = ProcessPoolExecutor(
            max_workers=jobs, mp_context=context, initializer=_worker_signals, initargs=(os.getpid(),)
        )
        self.workers: list = []

    def submit_all(self, calls: list[tuple]) -> list:
        """``executor.submit(*call)`` for each call, in order; the workers forked meanwhile are recorded."""
        import multiprocessing

        from grpofit.runtime import interrupts

        with interrupts.deferred():
            before = {p.pid for p in multiprocessing.active_children()}
            futures = [self.executor.submit(*call) for call in calls]
            self.workers += [p for p in multiprocessing.active_children() if p.pid not in before]
        return futures

    def shutdown(self, **kw) -> None:
        self.executor.shutdown(**kw)


def _new_pool(context, jobs: int) -> WorkerPool:
    return WorkerPool(context, jobs)


def stop_pool(pool: WorkerPool, grace: float = 1.0) -> None:
    """Stop every worker of ``pool`` now: SIGTERM, then SIGKILL after ``grace`` seconds.

    ``pool.workers`` is complete (:class:`WorkerPool`), and a worker the parent never stops dies
    with it (:func:`_worker_signals`)."""
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
            p.join(1.0)
    pool.shutdown(wait=False, cancel_futures=True)


def _run_round(pool, work, todo: list[int], items, extra, jobs, parts, progress, chunk=None) -> bool:
    """``work`` on ``todo`` in ``pool``; True when a worker died (the pool is then broken)."""
    from concurrent.futures import as_completed
    from concurrent.futures.process import BrokenProcessPool

    size = chunk or _chunk_size(len(todo), jobs)
    chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
    broken = False
    calls = [(_work_chunk, work, idx, [items[i] for i in idx], extra) for idx in chunks]
    futures = dict(zip(pool.submit_all(calls), chunks))  # the first submit forks the workers
    for fut in as_completed(futures):
        idx = futures[fut]
        try:
            results = fut.result()
        except BrokenProcessPool:
            broken = True
            continue
        for i, part in zip(idx, results):
            parts[i] = part
        if progress:
            progress(len(idx))
    return broken


_PENDING = object()


def map_items(
    work: Callable,
    items: list,
    extra: Any,
    *,
    jobs: int,
    lost: Callable,
    progress: Callable[[int], None] | None = None,
    chunk: int | None = None,
) -> list:
    """``[work(item, extra) for item in items]`` in a pool of ``jobs`` forked workers, in order.

    ``chunk``: items per worker call (default :func:`_chunk_size`); 1 for items that take a
    second or more each (a backtest's runs), where a chunk of several leaves a worker idle at
    the end.

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
    parts: list = [_PENDING] * len(items)
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    _STARTED = context.RawArray("b", len(items)) if "fork" in methods else None
    todo = list(range(len(items)))
    try:
        while todo:
            pool = _new_pool(context, jobs)
            try:
                broken = _run_round(pool, work, todo, items, extra, jobs, parts, progress, chunk)
                if not broken:
                    pool.shutdown(wait=True)
            except BaseException:
                stop_pool(pool)
                raise
            if broken:
                stop_pool(pool)
            left = [i for i in todo if parts[i] is _PENDING]
            if not broken or not left:
                break
            if _STARTED is None:
                suspects, todo = left, []
            else:
                suspects = [i for i in left if _STARTED[i]]
                todo = [i for i in left if not _STARTED[i]]
            for i in suspects:
                parts[i] = _run_alone(context, work, items[i], extra, lost)
                if progress:
                    progress(1)
    finally:
        _STARTED = None
    return parts


def _run_alone(context, work, item, extra, lost) -> Any:
    """One item in a worker of its own: its death costs only this item."""
    from concurrent.futures.process import BrokenProcessPool

    pool = _new_pool(context, 1)
    try:
        (future,) = pool.submit_all([(work, item, extra)])
        return future.result()
    except BrokenProcessPool:
        return lost(item)
    finally:
        stop_pool(pool)
