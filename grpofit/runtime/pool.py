"""A process pool that knows its workers, through public interfaces only.

:class:`WorkerPool` is a ``concurrent.futures.ProcessPoolExecutor`` that records the worker
processes it starts: the ``multiprocessing`` children that appear while it submits
(``multiprocessing.active_children()`` before and after, inside a
:class:`grpofit.runtime.interrupts.deferred` section so a signal cannot land between a fork and
the record of it). Every fork of the executor happens in a submit (all of them at the first one
under the ``fork`` start method), so the record is complete, and whoever stops the pool
(:func:`grpofit.commands.pipeline.stop_pool`) stops exactly these processes through their
public ``terminate``/``kill``/``join``, never the executor's private process table.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["WorkerPool"]


class WorkerPool:
    """``ProcessPoolExecutor(jobs, mp_context=context, ...)`` with ``workers``: its processes."""

    def __init__(self, jobs: int, context, *, initializer: Callable | None = None, initargs: tuple = ()):
        from concurrent.futures import ProcessPoolExecutor

        self.jobs = jobs
        self.executor = ProcessPoolExecutor(
            max_workers=jobs, mp_context=context, initializer=initializer, initargs=initargs
        )
        self.workers: list = []  #: the ``multiprocessing.Process`` of every worker started

    def submit(self, fn: Callable, *args: Any, **kwargs: Any):
        """``executor.submit``; the workers it forks are added to :attr:`workers`."""
        if len(self.workers) >= self.jobs:  # every worker started: nothing more to record
            return self.executor.submit(fn, *args, **kwargs)
        import multiprocessing

        from grpofit.runtime import interrupts

        with interrupts.deferred():
            before = {p.pid for p in multiprocessing.active_children()}
            future = self.executor.submit(fn, *args, **kwargs)
            self.workers += [p for p in multiprocessing.active_children() if p.pid not in before]
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.executor.shutdown(wait=wait, cancel_futures=cancel_futures)
